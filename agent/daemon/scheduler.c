/*
 * The scheduler's rules as counts over slots (include/kagent/daemon/scheduler.h): no I/O and
 * no session here, so a test drives it with fake claims.
 */
#include "kagent/daemon/scheduler.h"

#include "kagent/base/alloc.h"

#include <stdlib.h>

void
kagent_scheduler_init(struct kagent_scheduler *scheduler, size_t slot_count, int max_sessions,
		      void (*claim)(size_t slot, void *data), void *data)
{
	*scheduler = (struct kagent_scheduler){
	    .slot_count = slot_count > 0 ? slot_count : 1,
	    .max_sessions = max_sessions > 0 ? max_sessions : 1,
	    .claim = claim,
	    .data = data,
	};
	scheduler->load = kagent_calloc(scheduler->slot_count, sizeof *scheduler->load);
}

void
kagent_scheduler_clear(struct kagent_scheduler *scheduler)
{
	free(scheduler->load);
	scheduler->load = NULL;
}

int
kagent_scheduler_next_slot(const struct kagent_scheduler *scheduler)
{
	size_t slot, best = 0;

	if (scheduler->in_flight >= scheduler->max_sessions)
		return -1;
	for (slot = 1; slot < scheduler->slot_count; slot++) {
		if (scheduler->load[slot] < scheduler->load[best])
			best = slot;
	}
	return (int)best;
}

void
kagent_scheduler_pump(struct kagent_scheduler *scheduler)
{
	int slot;

	/* One claim at a time: the claim's answer (a session or none) decides whether to go on,
	 * and the store serialises claims anyway. */
	if (scheduler->claiming || scheduler->idle || scheduler->stopped)
		return;
	if ((slot = kagent_scheduler_next_slot(scheduler)) < 0)
		return;
	/* Counted at once, so the slot's load is right while the claim is pending. */
	scheduler->claiming = 1;
	scheduler->in_flight++;
	scheduler->load[slot]++;
	scheduler->claim((size_t)slot, scheduler->data);
}

void
kagent_scheduler_claimed(struct kagent_scheduler *scheduler, size_t slot, int found)
{
	scheduler->claiming = 0;
	if (!found) {
		scheduler->in_flight--;
		scheduler->load[slot]--;
		/* A wake that came while this claim was pending may have queued what it missed. */
		scheduler->idle = !scheduler->woken;
	}
	scheduler->woken = 0;
	kagent_scheduler_pump(scheduler);
}

void
kagent_scheduler_release(struct kagent_scheduler *scheduler, size_t slot)
{
	if (slot >= scheduler->slot_count || scheduler->load[slot] == 0)
		return;
	scheduler->in_flight--;
	scheduler->load[slot]--;
	/* A freed place is worth a claim: another daemon on the same store, or a recovery, may
	 * have queued work that no wake announced. */
	scheduler->idle = 0;
	kagent_scheduler_pump(scheduler);
}

void
kagent_scheduler_wake(struct kagent_scheduler *scheduler)
{
	scheduler->idle = 0;
	if (scheduler->claiming)
		scheduler->woken = 1;
	kagent_scheduler_pump(scheduler);
}

void
kagent_scheduler_stop(struct kagent_scheduler *scheduler)
{
	scheduler->stopped = 1;
}
