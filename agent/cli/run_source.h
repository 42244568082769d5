/*
 * Where `kagent export` and `kagent replay` find runs: each operand is a trace file, a run
 * folder (<output>/<problem> with traces/, or an output folder with <problem>/traces/), or a
 * batch (b-...) or session id that kagentd resolves to its sessions' traces: through its store's
 * public functions (store.h) with --store URL, through the running daemon's API with --socket
 * (or $KAGENT_SOCKET, or when a daemon answers on its default socket), else through the store
 * at its default path.
 */
#ifndef KAGENT_RUN_SOURCE_H
#define KAGENT_RUN_SOURCE_H

#include <jansson.h>

struct kagent_run_source;

/* The --store option of the commands that read runs; they also take KAGENT_DAEMON_CALL_OPTIONS
 * (daemon_call.h), for --socket and --token-file. */
/* clang-format off */
#define KAGENT_RUN_SOURCE_STORE_OPTION                                                             \
	{"store", 0, "URL", "kagentd's store, where batch and session ids are looked up instead "  \
		"of asking the daemon", "the daemon named by --socket or $KAGENT_SOCKET, or one "  \
		"answering on its default socket; else sqlite:$XDG_STATE_HOME/kagent/kagent.db",   \
		NULL}
/* clang-format on */

struct kagent_daemon_call;

/* call: the command's --socket, --token-file and --store (may be absent); the store is opened,
 * or the daemon asked, only when an operand is an id. */
struct kagent_run_source *kagent_run_source_create(const struct kagent_daemon_call *call);
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
