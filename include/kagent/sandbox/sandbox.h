/*
 * The candidate sandbox: one call, made by the forked candidate child before the
 * untrusted code is imported, that confines the calling process for the rest of
 * its life (network namespace, rlimits, unprivileged uid when root, no-new-privs,
 * Landlock, seccomp). It is built as libkagent-sandbox.so so that the Python runner
 * can call it through ctypes; docs/sandbox.md describes what is applied and why.
 */
#ifndef KAGENT_SANDBOX_H
#define KAGENT_SANDBOX_H

#include <stddef.h>

/* The uid and gid a root caller drops to when the policy names none: "nobody". */
#define KAGENT_SANDBOX_UNPRIVILEGED_ID 65534

struct kagent_sandbox_policy {
	const char *scratch_directory;	   /* the only writable folder (must exist) */
	const char *const *writable_paths; /* NULL-terminated extra writable folders, may be NULL */
	double cpu_seconds;		   /* RLIMIT_CPU, 0 = unlimited */
	long max_processes;		   /* RLIMIT_NPROC, 0 = unlimited (counts the whole uid) */
	long long max_file_bytes;	   /* RLIMIT_FSIZE, 0 = unlimited */
	long long max_address_space_bytes; /* RLIMIT_AS, 0 = unlimited (must stay 0 for CUDA) */
	int allow_gpu_devices;		   /* /dev read+write+ioctl for the NVIDIA device nodes */
	int new_network_namespace;	   /* a new, empty network namespace where possible */
	/* The uid and gid a root caller drops to (0: KAGENT_SANDBOX_UNPRIVILEGED_ID). Give each
	 * GPU's candidates their own, unused id: the process limit counts the whole uid, and
	 * the worker ends every process of that uid after an evaluation. */
	long unprivileged_id;
	/* With allow_gpu_devices: "nvidia<minor>", the one GPU node under /dev the candidate may
	 * open (the other GPUs' nodes are left out: docs/sandbox.md, step 5); NULL for
	 * every GPU's. */
	const char *own_gpu_node;
	const char *device_directory; /* NULL for /dev; tests name a folder of stand-ins */
};

/*
 * Confines the calling process. It must be single-threaded (Landlock confines the
 * calling thread only). Returns 0, or a negative errno with a message in
 * cause[cause_size]. It never exits; the policy is checked before anything is
 * changed, but a failure after that leaves the process partly confined: the caller
 * must then exit rather than run the candidate.
 */
int kagent_sandbox_enter(const struct kagent_sandbox_policy *policy, char *cause,
			 size_t cause_size);
/*
 * The same with the policy as a JSON object whose keys are the struct's fields
 * (writable_paths an array of strings, the two flags booleans, own_gpu_node and
 * device_directory strings or null). Unknown keys are refused. This is what the Python runner
 * calls.
 */
int kagent_sandbox_enter_json(const char *policy_json, char *cause, size_t cause_size);
/*
 * Forbids new processes and exec from now on, on every thread of the process (fork, vfork,
 * execve, execveat, clone without CLONE_THREAD); threads stay allowed. Irreversible: the
 * judge applies it to a timed child before its timed calls and checks it through the
 * child's /proc/PID/status (Seccomp_filters). Returns 0 or a negative errno with a message.
 */
int kagent_sandbox_forbid_processes(char *cause, size_t cause_size);
/*
 * Writes a JSON object saying what the library can apply here (Landlock ABI,
 * seccomp, root, ...) and what an earlier kagent_sandbox_enter applied in this
 * process. Returns the length written (without the NUL) or a negative errno
 * (-ENOSPC when the buffer is too small).
 */
int kagent_sandbox_describe(char *buffer, size_t buffer_size);

#endif
