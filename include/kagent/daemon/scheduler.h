/*
 * kagentd's scheduler (docs/daemon.md): which slot (GPU) the next session runs on, and when
 * to ask the store for one. It holds no session and does no I/O: it counts what runs on each
 * slot and calls its owner's claim function when a session may start, so its rules are tested
 * with fake sessions (tests/unit/test_scheduler.c).
 *
 * The rules:
 * - cap: at most max_sessions sessions in flight (claimed, starting or running);
 * - spread: the next session goes to the least-loaded slot (the lowest index on a tie), and
 *   each session's evaluations go to its slot's GPU (the config's evaluation.gpu);
 * - fairness across batches is the store's: kagent_store_session_claim serves the batch
 *   served longest ago first (round robin), the problems of a batch in order;
 * - one claim at a time: the answer (a session, or none queued) comes back through
 *   kagent_scheduler_claimed before the next claim is asked for; after "none queued" the
 *   scheduler idles until kagent_scheduler_wake (a new batch) or a slot frees up.
 *
 * Timing exclusivity per GPU is not decided here: the worker runs one whole evaluation at a
 * time per sandbox uid (sandbox/runner/kagent_runner/worker.py, _lock_sandbox_uid), and the
 * judge times under the GPU's timing lock (gpu_lock.py), so the timed windows of sessions and
 * of the reward service's lanes (evaluations.c) sharing a GPU never overlap while their model
 * turns, loading and trials do.
 */
#ifndef KAGENT_DAEMON_SCHEDULER_H
#define KAGENT_DAEMON_SCHEDULER_H

#include <stddef.h>

struct kagent_scheduler {
	size_t slot_count;
	int max_sessions;
	int *load; /* sessions in flight per slot */
	int in_flight;
	int claiming; /* a claim was asked for and has not been answered */
	int idle;     /* the last claim found nothing queued: wait for a wake */
	int woken;    /* a wake came while a claim was pending */
	int stopped;  /* no more claims (the daemon is shutting down) */
	/* Asks the owner to claim the next queued session for slot; the owner answers with
	 * kagent_scheduler_claimed, now or later. */
	void (*claim)(size_t slot, void *data);
	void *data;
};

/* slot_count >= 1 slots, at most max_sessions >= 1 in flight. */
void kagent_scheduler_init(struct kagent_scheduler *scheduler, size_t slot_count, int max_sessions,
			   void (*claim)(size_t slot, void *data), void *data);
void kagent_scheduler_clear(struct kagent_scheduler *scheduler);
/* The slot the next session would go to (least loaded, lowest index first), or -1 at the cap. */
int kagent_scheduler_next_slot(const struct kagent_scheduler *scheduler);
/* Asks for claims while a slot is free, no claim is pending, and the queue is not known empty. */
void kagent_scheduler_pump(struct kagent_scheduler *scheduler);
/*
 * The answer to a claim for slot: found 1 (a session now runs there, counted until
 * kagent_scheduler_release) or 0 (nothing queued: idle until a wake). Then pumps.
 */
void kagent_scheduler_claimed(struct kagent_scheduler *scheduler, size_t slot, int found);
/* A session on slot ended; its place goes to the next one. */
void kagent_scheduler_release(struct kagent_scheduler *scheduler, size_t slot);
/* Something was queued (a new batch, a recovery): claim again. */
void kagent_scheduler_wake(struct kagent_scheduler *scheduler);
/* No claim from now on (shutdown); the counts go on for the sessions still running. */
void kagent_scheduler_stop(struct kagent_scheduler *scheduler);

#endif
