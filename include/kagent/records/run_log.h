/*
 * A finished (or stopped) run read back from its trace as data: the problem (its source found
 * by its sha256), the run's settings, and every evaluated variant in order with its source,
 * its verdict, its parent and the conversation that produced it. `kagent export` turns it into
 * dataset records (dataset.h) and `kagent replay` re-evaluates its variants; neither calls a
 * model.
 */
#ifndef KAGENT_RUN_LOG_H
#define KAGENT_RUN_LOG_H

#include "kagent/base/sha256.h"
#include "kagent/records/config.h"

#include <jansson.h>
#include <stddef.h>

/* One variant the run evaluated (a verdict record with purpose "evaluate"). */
struct kagent_run_variant {
	char *id;     /* "v3" */
	int turn;     /* the turn that wrote it, 0 when the record has none */
	char *parent; /* the variant it was written from (the verdict record's), or NULL */
	char *source; /* the candidate file as judged */
	char source_sha256[KAGENT_SHA256_HEX_SIZE];
	json_t *verdict; /* the whole verdict */
	/*
	 * The conversation up to and including the assistant message whose evaluate call wrote
	 * it, in kagent's neutral form: each message {role, content, reasoning, tool_calls,
	 * tool_call_id, name} with every key present (null when it does not apply).
	 */
	json_t *messages;
	char *commit; /* its commit on runs/<run>, NULL when none was recorded */
};

struct kagent_run_log {
	char *trace_path;
	json_t *start; /* the first run_start record */
	const char *run_id;
	const char *problem_name;
	const char *problem_sha256;
	char *problem_path;		      /* a file holding the problem with that sha256 */
	char *problem_source;		      /* its text */
	const char *model;		      /* config.provider.model, NULL when unknown */
	const char *provider;		      /* config.provider.api */
	enum kagent_target_baseline baseline; /* config.target.baseline */
	struct kagent_run_variant *variants;
	size_t count;
	/* the variant the last best record named, else the one the final record announced;
	 * NULL when neither */
	char *best;
};

/*
 * Reads the trace at path. A variant's source is the evaluate call's argument whose sha256 is
 * the verdict's candidate sha256, else the run's variant file beside the trace
 * (<dir>/../variants/<run>/vN.py) with that sha256; the problem is the first of the recorded
 * path, the run's worktree and <dir>/../<run>/problem.py with the recorded sha256. Returns 0,
 * or a negative errno with *cause: -EINVAL for a file that is no trace of a run (no run_start),
 * -ENOENT when a source cannot be found.
 */
int kagent_run_log_read(const char *path, struct kagent_run_log **log_out, char **cause);
void kagent_run_log_free(struct kagent_run_log *log);

/* The variant called id, or NULL. */
const struct kagent_run_variant *kagent_run_log_find(const struct kagent_run_log *log,
						     const char *id);

#endif
