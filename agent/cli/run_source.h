/*
 * Where `kagent export` and `kagent replay` find runs: each operand is a trace file, a run
 * folder (<output>/<problem> with traces/, or an output folder with <problem>/traces/), or a
 * batch (b-...) or session id that kagentd's store resolves to its sessions' traces. The store
 * is read through its public functions only (store.h), at --store URL or kagentd's default.
 */
#ifndef KAGENT_RUN_SOURCE_H
#define KAGENT_RUN_SOURCE_H

#include <jansson.h>

struct kagent_run_source;

/* store_url: NULL for kagentd's default store (kagent_paths_store_url), opened when needed. */
struct kagent_run_source *kagent_run_source_create(const char *store_url);
void kagent_run_source_free(struct kagent_run_source *source);
/*
 * Appends the trace paths operand names to traces (an array of strings), in order: a batch's
 * sessions in problem order, those that never started (no trace) left out and counted in
 * *skipped_out. Returns 0, or a negative errno with *cause: -ENOENT for an operand that is no
 * file, folder, batch or session, or a session without a trace.
 */
int kagent_run_source_collect(struct kagent_run_source *source, const char *operand, json_t *traces,
			      int *skipped_out, char **cause);

#endif
