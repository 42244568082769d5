/*
 * The daemon's store (docs/store.md): batches of optimization sessions, the
 * queue those sessions wait in, the variants they produced, the baseline
 * timings and the sessions' trace records, kept in SQLite (one file, WAL) or
 * in PostgreSQL (one queue shared by the daemons of several machines), chosen
 * by the URL. Callers see an opaque store, JSON objects and errnos, never SQL.
 *
 * Each open store is one daemon identity (host:pid:random). A claim holds the
 * session under a lease that kagent_store_heartbeat renews; a session whose
 * lease ran out (its daemon died or lost the network) is taken over by the next
 * claim, on any machine, and resumed.
 *
 * Every function is one short transaction and is safe to call from any thread
 * (calls on one store are serialised). From a libuv loop, run them on the
 * thread pool with kagent_store_submit so the loop never waits on the disk.
 *
 * Functions return 0 or a negative errno and, on failure, set *cause to a
 * message a person can read (malloc'd; the caller frees it). -ENOENT: no such
 * batch or session; -EALREADY: the batch or session has already finished (the
 * HTTP API answers 409); -EPROTO: the database is newer than this binary;
 * -ESTALE: another daemon took the session over; -ECONNREFUSED/-ECONNRESET: the
 * PostgreSQL server cannot be reached (the next call tries to reconnect).
 */
#ifndef KAGENT_STORE_H
#define KAGENT_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

struct kagent_store;

enum kagent_store_session_state {
	KAGENT_STORE_QUEUED,
	KAGENT_STORE_RUNNING,
	KAGENT_STORE_DONE,	/* the session ran to its end (whatever it found) */
	KAGENT_STORE_FAILED,	/* it could not run: bad problem, evaluator or model errors */
	KAGENT_STORE_CANCELLED, /* cancelled before or while it ran */
};

/* "queued", "running", "done", "failed", "cancelled". */
const char *kagent_store_session_state_name(enum kagent_store_session_state state);

/*
 * Opens (and creates or migrates) the store at url: "sqlite:PATH" or a bare
 * PATH (the file's folder is created, 0700, where missing), or
 * "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?PARAMETERS]" (libpq's
 * URL; "postgres://" too). A database written by a newer kagent is refused
 * (-EPROTO), as is any other scheme (-EPROTONOSUPPORT).
 */
int kagent_store_open(const char *url, struct kagent_store **store_out, char **cause);
/* Closes the store; the leases of sessions it still holds end at once, so that another
 * daemon may take them over without waiting. */
void kagent_store_close(struct kagent_store *store);
/* "sqlite" or "postgresql". */
const char *kagent_store_backend(const struct kagent_store *store);
/* The store as messages name it: the file, or the URL with its password as "***". */
const char *kagent_store_name(const struct kagent_store *store);
/* This store's daemon identity, host:pid:random: the owner of the sessions it claims. */
const char *kagent_store_identity(const struct kagent_store *store);
/* The backend's name for the store at url ("sqlite", "postgresql"); NULL for none. */
const char *kagent_store_backend_name(const char *url);
/*
 * For tests and tools: runs sql on the store at url through a connection of its own,
 * without migrating it (as another program would). With value_out NULL, sql may be several
 * statements; else it is one query and *value_out gets its first cell as an integer (0 when
 * it returned no row).
 */
int kagent_store_raw_query(const char *url, const char *sql, long long *value_out, char **cause);
/* How long a claim's lease lasts (1 to 86400 s; 30 s unless set): set it before claiming. */
int kagent_store_set_lease(struct kagent_store *store, double seconds, char **cause);
double kagent_store_lease(const struct kagent_store *store);
/* The GPU model this daemon measures on ("NVIDIA H200"), kept with each claim and verdict so
 * that reports never mix GPU models silently; NULL when unknown. Set it before claiming. */
void kagent_store_set_gpu_name(struct kagent_store *store, const char *gpu_name);
/* The schema version this binary writes (the last migration). */
int kagent_store_schema_version(void);

/* One problem of a new batch; the strings are borrowed. */
struct kagent_store_problem {
	const char *path; /* the problem file */
	const char *name; /* e.g. "19_ReLU"; NULL: the file name without ".py" */
	int level;	  /* the KernelBench level, 0 when it has none */
};

/*
 * Creates a batch with one queued session per problem, all or nothing.
 * settings (model, endpoint, target, budgets...) is kept as given. Each
 * session's id is a new run id (the name of its branch and trace).
 * *batch_id_out is "b-YYYYMMDD-HHMMSS-xxxxxxxx" (malloc'd).
 */
int kagent_store_batch_create(struct kagent_store *store, const json_t *settings,
			      const struct kagent_store_problem *problems, size_t count,
			      char **batch_id_out, char **cause);
/*
 * The batches, newest first, each {id, created_at, state, settings, problems,
 * counts: {queued, running, done, failed, cancelled}}.
 */
int kagent_store_batch_list(struct kagent_store *store, json_t **batches_out, char **cause);
/* One batch as in the list, with "sessions": its sessions in problem order (as session_get). */
int kagent_store_batch_get(struct kagent_store *store, const char *batch_id, json_t **batch_out,
			   char **cause);
/*
 * Cancels a batch: its queued sessions become cancelled at once; the ids of
 * its running ones come back in *running_out (an array the caller owns) so the
 * caller can interrupt them, and they finish as they end. A batch that is done
 * or already cancelled answers -EALREADY.
 */
int kagent_store_batch_cancel(struct kagent_store *store, const char *batch_id,
			      json_t **running_out, char **cause);

/* A session handed to a caller by kagent_store_session_claim. */
struct kagent_store_claim {
	char *session_id;   /* the run id */
	char *batch_id;	    /* its batch */
	char *problem_path; /* the problem file */
	char *problem;	    /* the problem's name */
	int level;	    /* 0 when none */
	int attempt;	    /* 1 the first time, more after a recovery */
	int resume;	    /* continue the run (kagent optimize --resume), never start afresh */
	char *trace_path;   /* where its trace is, NULL until set_trace said so */
	json_t *settings;   /* the batch's settings */
};
void kagent_store_claim_free(struct kagent_store_claim *claim);

/*
 * Claims the next queued session, atomically: it becomes running on gpu
 * (may be NULL) under this store's identity and lease, and no other caller, in
 * this process or another one on the same store, can claim it. Fair across
 * batches by round robin: the batch served longest ago goes first (a new batch
 * counts as never served, oldest first among those), and within a batch the
 * problems go in order. A running session whose lease has run out counts as
 * queued: it is taken over, with resume set where its trace path was stored.
 * Sets *claim_out to NULL when nothing is queued.
 */
int kagent_store_session_claim(struct kagent_store *store, const char *gpu,
			       struct kagent_store_claim **claim_out, char **cause);
/* Records where a running session writes its trace, so a recovery can resume it. */
int kagent_store_session_set_trace(struct kagent_store *store, const char *session_id,
				   const char *trace_path, char **cause);
/*
 * Ends a running session as done, failed or cancelled, with its result (the
 * session's final summary, the `final` trace record; may be NULL). A session
 * that is not running answers -EALREADY, one another daemon has taken over
 * -ESTALE (its end is that daemon's to write). The batch's state follows.
 */
int kagent_store_session_finish(struct kagent_store *store, const char *session_id,
				enum kagent_store_session_state state, const json_t *result,
				char **cause);
/*
 * Cancels one session: a queued one becomes cancelled at once; for a running one
 * *running_out is set to 1 and its state stays, so the caller interrupts it and
 * finishes it as cancelled when it stops (where it runs on another daemon, that
 * daemon's heartbeat learns of the cancel). One that has finished answers
 * -EALREADY, an unknown one -ENOENT.
 */
int kagent_store_session_cancel(struct kagent_store *store, const char *session_id,
				int *running_out, char **cause);
/*
 * One session: {id, batch_id, position, problem_path, problem, level (or
 * null), state, gpu, attempts, resume, created_at, started_at, finished_at,
 * trace_path, result, owner, gpu_name} (times in UTC, ISO 8601; null where not
 * yet; owner: the daemon identity that claimed it last).
 */
int kagent_store_session_get(struct kagent_store *store, const char *session_id,
			     json_t **session_out, char **cause);
/*
 * After a crash: sessions left running by a daemon that is gone go back to the
 * queue marked resume (run id, trace path and attempts kept), except those of
 * a cancelled batch, which become cancelled; every batch's state is derived
 * again from its sessions. A daemon is gone when its lease has run out, or
 * when it ran on this host and its process no longer exists (a daemon killed
 * and restarted here resumes at once); a live daemon's sessions are left to it.
 * *recovered_out (may be NULL) counts the requeued. Call it once at start-up,
 * before any claim.
 */
int kagent_store_recover(struct kagent_store *store, int *recovered_out, char **cause);
/*
 * Renews the leases of the running sessions this store claimed; *held_out (may
 * be NULL; an array the caller owns) gets their ids: a session this daemon runs
 * that is not among them was taken over after its lease ran out (a partition
 * longer than the lease), and must stop here. *cancelled_out (may be NULL; an
 * array) gets the held sessions a cancel reached through another daemon (the
 * session's, or its batch's), for the caller to interrupt. Also ends as
 * cancelled the sessions of cancelled batches whose daemon is gone. A daemon
 * calls it well within its lease.
 */
int kagent_store_heartbeat(struct kagent_store *store, json_t **held_out, json_t **cancelled_out,
			   char **cause);
/*
 * Calls wake(data) on loop's thread whenever another daemon queues work
 * (PostgreSQL's LISTEN/NOTIFY, on a second connection watched by a uv_poll_t).
 * SQLite has no such channel: it returns 0 and never calls wake (one machine:
 * the daemon that queues work wakes itself). Stop it before closing the loop.
 */
int kagent_store_listen(struct kagent_store *store, uv_loop_t *loop, void (*wake)(void *data),
			void *data, char **cause);
void kagent_store_listen_stop(struct kagent_store *store);

/*
 * Stores records of a session's trace (docs/traces.md), an array of records each with its
 * "seq", in one transaction, so that the store holds the run's account wherever its files
 * are. A seq stored already keeps its first record (syncing the same file twice changes
 * nothing); *appended_out (may be NULL) counts the new ones.
 */
int kagent_store_trace_append(struct kagent_store *store, const char *session_id,
			      const json_t *records, int *appended_out, char **cause);
/* One line of a session's trace file, as the file holds it (one JSON record, without its
 * newline): the strings are borrowed. */
struct kagent_store_trace_line {
	const char *session_id;
	long long seq; /* the record's "seq" */
	const char *text;
};
/*
 * Stores trace lines of any number of sessions in one transaction, each text as it is (not
 * parsed: the daemon's copy takes the seq from the line's start), with the rules of
 * kagent_store_trace_append: a seq stored already keeps its first record; *appended_out (may
 * be NULL) counts the new ones. A line of an unknown session is -ENOENT and stores nothing.
 */
int kagent_store_trace_append_lines(struct kagent_store *store,
				    const struct kagent_store_trace_line *lines, size_t count,
				    int *appended_out, char **cause);
/* The session's trace records by seq (an array; empty when none). */
int kagent_store_trace_read(struct kagent_store *store, const char *session_id,
			    json_t **records_out, char **cause);

/* A variant a session's model wrote, with its verdict; the strings and verdict are borrowed. */
struct kagent_store_variant {
	const char *session_id;
	const char *variant_id;	   /* "v3" */
	const char *parent;	   /* the variant it came from, or NULL */
	const json_t *verdict;	   /* its verdict, or NULL */
	double speedup_vs_eager;   /* 0 when not correct or not measured */
	double speedup_vs_compile; /* 0 when not correct or not measured */
	int credited;		   /* the credit rule (docs/verdict.md) */
};

/*
 * Records a variant once: recording (session, variant) again changes nothing
 * and sets *inserted_out (may be NULL) to 0.
 */
int kagent_store_variant_record(struct kagent_store *store,
				const struct kagent_store_variant *variant, int *inserted_out,
				char **cause);
/*
 * Marks a recorded variant committed as commit_id. *first_out is 1 for the one
 * call that marked it and 0 for any later one, so no variant is committed
 * twice; -ENOENT when the variant was never recorded.
 */
int kagent_store_variant_commit(struct kagent_store *store, const char *session_id,
				const char *variant_id, const char *commit_id, int *first_out,
				char **cause);
/*
 * A session's variants in the order they were recorded: {variant, parent,
 * verdict, speedup_vs_eager, speedup_vs_compile, credited, committed, commit,
 * created_at, gpu_name} (gpu_name: the GPU model of the daemon that recorded it).
 */
int kagent_store_variant_list(struct kagent_store *store, const char *session_id,
			      json_t **variants_out, char **cause);

/* The eager and torch.compile timings of a problem (by sha256) on a device; -ENOENT when none. */
int kagent_store_baseline_get(struct kagent_store *store, const char *problem_sha256,
			      const char *device, json_t **timings_out, char **cause);
/* Stores (or replaces) those timings. */
int kagent_store_baseline_put(struct kagent_store *store, const char *problem_sha256,
			      const char *device, const json_t *timings, char **cause);

/*
 * Running the functions above from a loop: work runs on libuv's thread pool
 * (it may call any store function on store), then after runs on the loop's
 * thread with work's status and cause (borrowed: freed when after returns).
 * Returns 0, or a negative errno when the work could not be queued (then
 * neither callback runs).
 */
typedef int (*kagent_store_work_function)(struct kagent_store *store, void *data, char **cause);
typedef void (*kagent_store_after_function)(int status, const char *cause, void *data);
int kagent_store_submit(struct kagent_store *store, uv_loop_t *loop,
			kagent_store_work_function work, kagent_store_after_function after,
			void *data);

#endif
