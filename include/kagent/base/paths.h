/*
 * Where kagent finds what it needs at run time: the Python interpreter that runs
 * the worker, the runner package, the prompts, the web viewer's files, the sandbox library,
 * its cache and the worker sockets. Each is an environment variable first, then a path relative to
 * the running executable (a build folder inside the source tree), then the
 * default compiled in by meson.
 */
#ifndef KAGENT_PATHS_H
#define KAGENT_PATHS_H

#include <sys/types.h>

/* Each returns 0 and a newly allocated path in *out (the caller frees it), or a negative errno. */

/* KAGENT_PYTHON, else <exe_dir>/../.venv/bin/python3 when executable, else KAGENT_DEFAULT_PYTHON.
 */
int kagent_paths_python(char **out, char **cause);
/* KAGENT_RUNNER_DIR, else <exe_dir>/../sandbox/runner when it exists, else the default. */
int kagent_paths_runner_dir(char **out, char **cause);
/* KAGENT_PROMPTS_DIR, else <exe_dir>/../prompts when it exists, else the default (the source
 * tree's prompts/). */
int kagent_paths_prompts_dir(char **out, char **cause);
/* The web viewer's own files (HTML, CSS, JavaScript; docs/viewer.md): KAGENT_VIEWER_DIR, else
 * <exe_dir>/../agent/daemon/viewer when it exists (a build folder in the source tree), else the
 * default (where meson installs them, <datadir>/kagent/viewer). */
int kagent_paths_viewer_dir(char **out, char **cause);
/* The system's JavaScript libraries (Debian's libjs-* packages): KAGENT_JAVASCRIPT_DIR, else
 * the default, /usr/share/javascript. */
int kagent_paths_javascript_dir(char **out, char **cause);
/* KAGENT_SANDBOX_LIBRARY, else <exe_dir>/sandbox/libkagent-sandbox.so when it exists, else the
 * default. */
int kagent_paths_sandbox_library(char **out, char **cause);
/* KAGENT_CACHE_DIR, else $XDG_CACHE_HOME/kagent, else $HOME/.cache/kagent; created (0700). */
/*
 * The folder for caches the sandboxed side writes (a candidate's Triton and build
 * caches, the judge's torch.compile cache): KAGENT_SANDBOX_CACHE_DIR, else
 * /var/tmp/kagent-<euid>, created 0711 because the sandbox uid must reach it.
 */
int kagent_paths_sandbox_cache_dir(char **out, char **cause);
/* KAGENT_BYTECODE_DIR, else bytecode/ in kagent_paths_sandbox_cache_dir: the worker's Python
 * bytecode for a torch installed without any (docs/worker-protocol.md, "Bytecode"). Not created
 * here. */
int kagent_paths_bytecode_dir(char **out, char **cause);
int kagent_paths_cache_dir(char **out, char **cause);
/* The folder of kagent's own sockets: $XDG_RUNTIME_DIR/kagent, else /tmp/kagent-<uid>. Not
 * created here. */
int kagent_paths_socket_dir(char **out, char **cause);
/* KAGENT_WORKER_SOCKET, else worker.sock in kagent_paths_socket_dir. The folder is not created
 * here. */
int kagent_paths_worker_socket(char **out, char **cause);
/* The socket of run_id's own worker, session-RUN_ID.sock beside kagent_paths_worker_socket (a
 * path short enough for a socket address); the folder is created (0700). The session sockets
 * there that nothing listens on any more, left by runs that were killed, are removed first. */
int kagent_paths_session_socket(const char *run_id, char **out, char **cause);
/* The socket of the daemon, kagentd: KAGENT_DAEMON_SOCKET, else kagentd.sock in
 * kagent_paths_socket_dir ($XDG_RUNTIME_DIR/kagent/kagentd.sock, else
 * /tmp/kagent-<uid>/kagentd.sock). The folder is not created here: the server creates it. */
int kagent_paths_daemon_socket(char **out, char **cause);
/* kagentd's store by default: $KAGENT_STORE (a cluster's shared PostgreSQL URL), else
 * sqlite:$XDG_STATE_HOME/kagent/kagent.db, else sqlite:$HOME/.local/state/kagent/kagent.db.
 * Nothing is created. */
int kagent_paths_store_url(char **out, char **cause);
/* 1 when a process listens on the Unix socket at path, else 0 (no such file, not a socket,
 * or a socket whose owner is gone). */
int kagent_paths_socket_listening(const char *path);
/* The folder holding the running executable (from /proc/self/exe). */
int kagent_paths_executable_dir(char **out, char **cause);
/* rm -r: removes path and everything under it (symbolic links are removed, not followed). */
int kagent_paths_remove_tree(const char *path, char **cause);

#endif
