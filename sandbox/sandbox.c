/*
 * The candidate sandbox (libkagent-sandbox.so). The forked candidate child of the
 * Python worker calls kagent_sandbox_enter_json once, through ctypes, before it
 * imports the untrusted candidate; from then on the process and everything it
 * forks stay confined. The steps follow openssh's sandbox-seccomp-filter.c and are
 * applied in this order, each one making the next harder to undo:
 *
 *   1. a new, empty network namespace (root: CLONE_NEWNET; others: a user namespace
 *      with it), or nothing when neither is allowed: seccomp still denies the network;
 *   2. rlimits: CPU, FSIZE, AS when asked, NOFILE, CORE=0;
 *   3. as root, the writable folders are given to uid 65534 and the process drops to
 *      it, because the kernel does not enforce RLIMIT_NPROC for root; then NPROC;
 *   4. PR_SET_NO_NEW_PRIVS;
 *   5. Landlock: "/" read-only, the scratch and cache folders writable, /dev for
 *      the GPU nodes, TCP bind/connect denied, signals and abstract sockets scoped;
 *   6. seccomp: default allow, a deny list of the kernel interfaces a candidate
 *      never needs (non-Unix sockets, namespaces, ptrace, io_uring, bpf, ...).
 *
 * What CUDA needs was checked on an H200 (docs/sandbox.md): ioctl and AF_UNIX stay
 * allowed, /proc/self stays writable, and RLIMIT_AS is left alone by default.
 */
#include "ctypes_buffer.h"
#include "kagent/sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <math.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The build machine's kernel headers (Debian bookworm: 6.1) stop at Landlock ABI 2,
 * while the kernels that run candidates know more: the later constants are the
 * kernel's own values, and the ruleset attribute is declared here at its full size.
 */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

struct sandbox__ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;	     /* ABI 6 */
};

/* The rights of ABI 1 are bits 0 to 12, EXECUTE to MAKE_SYM. */
#define SANDBOX_FS_ABI1 ((1ULL << 13) - 1)
#define SANDBOX_FS_READ                                                                            \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* The rights Landlock accepts on a rule for a file rather than a folder. */
#define SANDBOX_FS_FILE                                                                            \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                              \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* Deep enough for any cache layout, shallow enough to bound the walk's descriptors. */
#define SANDBOX_CHOWN_MAX_DEPTH 64
#define SANDBOX_MAX_OPEN_FILES 4096

/* What kagent_sandbox_enter applied in this process, for kagent_sandbox_describe. */
static struct {
	int entered;
	const char *network_namespace;
	int landlock_abi;
	int dropped_to_unprivileged;
	long long uid;
	int seccomp;
} sandbox__applied;

static int
sandbox__landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return abi < 0 ? -errno : (int)abi;
}

/* Every filesystem right the running ABI knows, so that none is left unrestricted. */
static uint64_t
sandbox__landlock_fs_rights(int abi)
{
	uint64_t rights = SANDBOX_FS_ABI1;

	if (abi >= 2)
		rights |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return rights;
}

/* Landlock confines the calling thread only (up to ABI 7): refuse to half-confine. */
static int
sandbox__count_threads(void)
{
	DIR *directory = opendir("/proc/self/task");
	struct dirent *entry;
	int count = 0;

	if (directory == NULL)
		return -errno;
	while ((entry = readdir(directory)) != NULL) {
		if (entry->d_name[0] != '.')
			count++;
	}
	closedir(directory);
	return count;
}

static int
sandbox__check_directory(const char *what, const char *path, char *cause, size_t cause_size)
{
	struct stat status;

	if (path == NULL || path[0] == '\0')
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL, "%s is missing",
						  what);
	if (path[0] != '/')
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "%s \"%s\" is not an absolute path", what, path);
	if (stat(path, &status) < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -errno, "%s \"%s\": %s", what,
						  path, strerror(errno));
	if (!S_ISDIR(status.st_mode))
		return kagent_ctypes_buffer_error(cause, cause_size, -ENOTDIR,
						  "%s \"%s\" is not a directory", what, path);
	return 0;
}

/* "nvidia" and digits only: a GPU's node (not nvidiactl, nvidia-uvm, nvidia-caps). */
static int
sandbox__is_gpu_node(const char *name)
{
	const char *digit;

	if (strncmp(name, "nvidia", 6) != 0 || name[6] == '\0')
		return 0;
	for (digit = name + 6; *digit != '\0'; digit++)
		if (*digit < '0' || *digit > '9')
			return 0;
	return 1;
}

/* Everything that can be refused is refused here, before the process is changed. */
static int
sandbox__check_policy(const struct kagent_sandbox_policy *policy, char *cause, size_t cause_size)
{
	const char *const *path;
	int result, threads;

	if (policy == NULL)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL, "no policy");
	result = sandbox__check_directory("scratch_directory", policy->scratch_directory, cause,
					  cause_size);
	if (result < 0)
		return result;
	for (path = policy->writable_paths; path != NULL && *path != NULL; path++) {
		result = sandbox__check_directory("writable_paths entry", *path, cause, cause_size);
		if (result < 0)
			return result;
	}
	if (!isfinite(policy->cpu_seconds) || policy->cpu_seconds < 0 || policy->cpu_seconds > 1e12)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "cpu_seconds %g is out of range",
						  policy->cpu_seconds);
	if (policy->max_processes < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "max_processes is negative");
	if (policy->max_file_bytes < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "max_file_bytes is negative");
	if (policy->max_address_space_bytes < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "max_address_space_bytes is negative");
	if (policy->own_gpu_node != NULL && !sandbox__is_gpu_node(policy->own_gpu_node))
		return kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						  "own_gpu_node \"%.64s\" is not nvidia<minor>",
						  policy->own_gpu_node);
	threads = sandbox__count_threads();
	if (threads > 1)
		return kagent_ctypes_buffer_error(
		    cause, cause_size, -EBUSY,
		    "the process has %d threads: enter the sandbox while it is "
		    "single-threaded (Landlock confines the calling thread only)",
		    threads);
	return 0;
}

static void
sandbox__write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0) {
		/* Best effort: an unmapped uid only makes getuid() report the overflow id. */
	}
	close(fd);
}

/*
 * Without root, a user namespace is what allows a network namespace. The uid and
 * gid are mapped onto themselves so that the process still sees who it is, and the
 * capabilities the new namespace grants are dropped: the candidate needs none.
 */
static int
sandbox__enter_user_network_namespace(void)
{
	struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	uid_t uid = getuid();
	gid_t gid = getgid();
	char line[64];

	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return -errno;
	sandbox__write_file("/proc/self/setgroups", "deny");
	snprintf(line, sizeof line, "%lu %lu 1", (unsigned long)gid, (unsigned long)gid);
	sandbox__write_file("/proc/self/gid_map", line);
	snprintf(line, sizeof line, "%lu %lu 1", (unsigned long)uid, (unsigned long)uid);
	sandbox__write_file("/proc/self/uid_map", line);
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &header, data) < 0)
		return -errno;
	return 0;
}

static void
sandbox__enter_network_namespace(const struct kagent_sandbox_policy *policy)
{
	sandbox__applied.network_namespace = "not requested";
	if (!policy->new_network_namespace)
		return;
	if (geteuid() == 0 && unshare(CLONE_NEWNET) == 0) {
		sandbox__applied.network_namespace = "new";
		return;
	}
	/* Root keeps its user namespace: uid 65534 must stay mapped for the drop below. */
	if (geteuid() != 0 && sandbox__enter_user_network_namespace() == 0) {
		sandbox__applied.network_namespace = "new, in a new user namespace";
		return;
	}
	sandbox__applied.network_namespace = "unavailable";
}

/* Lowers a limit; never raises the hard limit, which would fail without privilege. */
static int
sandbox__set_limit(int resource, const char *name, rlim_t soft, rlim_t hard, char *cause,
		   size_t cause_size)
{
	struct rlimit limit;

	if (getrlimit(resource, &limit) < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -errno, "getrlimit(%s): %s",
						  name, strerror(errno));
	if (limit.rlim_max != RLIM_INFINITY && hard > limit.rlim_max)
		hard = limit.rlim_max;
	if (soft > hard)
		soft = hard;
	limit.rlim_cur = soft;
	limit.rlim_max = hard;
	if (setrlimit(resource, &limit) < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -errno, "setrlimit(%s): %s",
						  name, strerror(errno));
	return 0;
}

static int
sandbox__set_limits(const struct kagent_sandbox_policy *policy, char *cause, size_t cause_size)
{
	struct rlimit files;
	int result = 0;

	if (policy->cpu_seconds > 0) {
		rlim_t seconds = (rlim_t)ceil(policy->cpu_seconds);

		/* SIGXCPU at the soft limit; SIGKILL a second later if it is ignored. */
		result = sandbox__set_limit(RLIMIT_CPU, "RLIMIT_CPU", seconds, seconds + 1, cause,
					    cause_size);
		if (result < 0)
			goto out;
	}
	if (policy->max_file_bytes > 0) {
		result =
		    sandbox__set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)policy->max_file_bytes,
				       (rlim_t)policy->max_file_bytes, cause, cause_size);
		if (result < 0)
			goto out;
	}
	if (policy->max_address_space_bytes > 0) {
		result = sandbox__set_limit(
		    RLIMIT_AS, "RLIMIT_AS", (rlim_t)policy->max_address_space_bytes,
		    (rlim_t)policy->max_address_space_bytes, cause, cause_size);
		if (result < 0)
			goto out;
	}
	if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
	    (files.rlim_max == RLIM_INFINITY || files.rlim_max > SANDBOX_MAX_OPEN_FILES)) {
		result = sandbox__set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", SANDBOX_MAX_OPEN_FILES,
					    SANDBOX_MAX_OPEN_FILES, cause, cause_size);
		if (result < 0)
			goto out;
	}
	result = sandbox__set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0, cause, cause_size);
out:
	return result;
}

/*
 * Gives a writable folder and what it holds to uid 65534, walking by descriptor so
 * that a symbolic link planted by an earlier candidate is never followed, and
 * leaving hard-linked files alone (a link to a file outside must not change owner).
 * Takes ownership of fd.
 */
static int
sandbox__give_tree(int fd, int depth, const char *top, uid_t id, char *cause, size_t cause_size)
{
	struct dirent *entry;
	struct stat status;
	DIR *directory = NULL;
	int result = 0;

	if (fstat(fd, &status) < 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -errno,
						    "stat under \"%s\": %s", top, strerror(errno));
		close(fd);
		goto out;
	}
	if ((status.st_uid != id || status.st_gid != id) && fchown(fd, id, id) < 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -errno,
						    "chown under \"%s\": %s", top, strerror(errno));
		close(fd);
		goto out;
	}
	if (depth > SANDBOX_CHOWN_MAX_DEPTH) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -ELOOP,
						    "\"%s\" is nested too deeply", top);
		close(fd);
		goto out;
	}
	directory = fdopendir(fd);
	if (directory == NULL) {
		result = kagent_ctypes_buffer_error(
		    cause, cause_size, -errno, "opendir under \"%s\": %s", top, strerror(errno));
		close(fd);
		goto out;
	}
	while ((entry = readdir(directory)) != NULL) {
		int child;

		if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
			continue;
		child = openat(dirfd(directory), entry->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (child < 0)
			continue; /* gone since readdir */
		if (fstat(child, &status) < 0 || S_ISLNK(status.st_mode) ||
		    (!S_ISDIR(status.st_mode) && status.st_nlink > 1) ||
		    (!S_ISDIR(status.st_mode) && status.st_uid == id && status.st_gid == id)) {
			close(child);
			continue;
		}
		if (S_ISDIR(status.st_mode)) {
			close(child);
			child = openat(dirfd(directory), entry->d_name,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (child < 0)
				continue;
			result = sandbox__give_tree(child, depth + 1, top, id, cause, cause_size);
			if (result < 0)
				goto out;
			continue;
		}
		if (fchownat(child, "", id, id, AT_EMPTY_PATH) < 0) {
			result = kagent_ctypes_buffer_error(cause, cause_size, -errno,
							    "chown under \"%s\": %s", top,
							    strerror(errno));
			close(child);
			goto out;
		}
		close(child);
	}
out:
	if (directory != NULL)
		closedir(directory);
	return result;
}

static int
sandbox__give_folder(const char *path, uid_t id, char *cause, size_t cause_size)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return kagent_ctypes_buffer_error(cause, cause_size, -errno, "open \"%s\": %s",
						  path, strerror(errno));
	return sandbox__give_tree(fd, 0, path, id, cause, cause_size);
}

/*
 * Root is exempt from RLIMIT_NPROC and from Landlock's reach over DAC, so a root
 * caller becomes uid/gid 65534 for good (openssh's permanently_set_uid), after
 * handing it the folders it must write. The process is marked dumpable again
 * because changing uid clears the flag, which would leave /proc/self owned by root
 * and unwritable, and CUDA writes there.
 */
static int
sandbox__drop_root(const struct kagent_sandbox_policy *policy, char *cause, size_t cause_size)
{
	const uid_t id = policy->unprivileged_id != 0 ? (uid_t)policy->unprivileged_id
						      : KAGENT_SANDBOX_UNPRIVILEGED_ID;
	const char *const *path;
	uid_t real_uid, effective_uid, saved_uid;
	gid_t real_gid, effective_gid, saved_gid;
	int result;

	result = sandbox__give_folder(policy->scratch_directory, id, cause, cause_size);
	if (result < 0)
		goto out;
	for (path = policy->writable_paths; path != NULL && *path != NULL; path++) {
		result = sandbox__give_folder(*path, id, cause, cause_size);
		if (result < 0)
			goto out;
	}
	if (setgroups(0, NULL) < 0 || setresgid(id, id, id) < 0 || setresuid(id, id, id) < 0) {
		result =
		    kagent_ctypes_buffer_error(cause, cause_size, -errno, "dropping to uid %lu: %s",
					       (unsigned long)id, strerror(errno));
		goto out;
	}
	if (getresuid(&real_uid, &effective_uid, &saved_uid) < 0 ||
	    getresgid(&real_gid, &effective_gid, &saved_gid) < 0 || real_uid != id ||
	    effective_uid != id || saved_uid != id || real_gid != id || effective_gid != id ||
	    saved_gid != id || setuid(0) == 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -EPERM,
						    "uid %lu was not dropped for good",
						    (unsigned long)id);
		goto out;
	}
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -errno,
						    "PR_SET_DUMPABLE: %s", strerror(errno));
		goto out;
	}
	sandbox__applied.dropped_to_unprivileged = 1;
out:
	return result;
}

/* A clear message now rather than EACCES from somewhere inside torch later. */
static int
sandbox__check_writable(const struct kagent_sandbox_policy *policy, char *cause, size_t cause_size)
{
	const char *const *path;

	if (access(policy->scratch_directory, W_OK | X_OK) < 0)
		return kagent_ctypes_buffer_error(
		    cause, cause_size, -errno,
		    "uid %lu cannot write \"%s\" (are its parent folders "
		    "searchable?): %s",
		    (unsigned long)getuid(), policy->scratch_directory, strerror(errno));
	for (path = policy->writable_paths; path != NULL && *path != NULL; path++) {
		if (access(*path, W_OK | X_OK) < 0)
			return kagent_ctypes_buffer_error(
			    cause, cause_size, -errno,
			    "uid %lu cannot write \"%s\" (are its parent folders "
			    "searchable?): %s",
			    (unsigned long)getuid(), *path, strerror(errno));
	}
	return 0;
}

/* A rule on a file may carry file rights only; optional rules skip missing paths. */
static int
sandbox__landlock_allow(int ruleset, const char *path, uint64_t rights, uint64_t handled,
			int optional, char *cause, size_t cause_size)
{
	struct landlock_path_beneath_attr rule = {0};
	struct stat status;
	int result = 0;

	rule.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (rule.parent_fd < 0) {
		if (optional)
			goto out;
		result = kagent_ctypes_buffer_error(
		    cause, cause_size, -errno, "landlock: open \"%s\": %s", path, strerror(errno));
		goto out;
	}
	if (fstat(rule.parent_fd, &status) < 0) {
		result = kagent_ctypes_buffer_error(
		    cause, cause_size, -errno, "landlock: stat \"%s\": %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(status.st_mode))
		rights &= SANDBOX_FS_FILE;
	rule.allowed_access = rights & handled;
	if (rule.allowed_access == 0)
		goto out;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
		result = kagent_ctypes_buffer_error(cause, cause_size, -errno,
						    "landlock: rule for \"%s\": %s", path,
						    strerror(errno));
out:
	if (rule.parent_fd >= 0)
		close(rule.parent_fd);
	return result;
}

/*
 * CUDA opens /dev/nvidiactl, /dev/nvidia<minor>, /dev/nvidia-uvm and /dev/nvidia-caps/ nodes
 * read-write and drives them with ioctl ("No CUDA GPUs are available" otherwise). With an own
 * GPU node, the other GPUs' nodes are left out: Landlock only allows, so every other entry of
 * the folder gets a rule of its own (symbolic links and sockets take none; what a link leads
 * to has its own rule or needs none). CUDA's initialisation skips a GPU whose node it cannot
 * open, and is cheaper for it (docs/sandbox.md).
 */
static int
sandbox__landlock_allow_devices(int ruleset, const struct kagent_sandbox_policy *policy,
				uint64_t handled, char *cause, size_t cause_size)
{
	const uint64_t rights =
	    SANDBOX_FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
	const char *folder = policy->device_directory != NULL ? policy->device_directory : "/dev";
	struct dirent *entry;
	struct stat status;
	char path[PATH_MAX];
	DIR *directory = NULL;
	int result = 0;

	if (policy->own_gpu_node == NULL)
		return sandbox__landlock_allow(ruleset, folder, rights, handled, 0, cause,
					       cause_size);
	directory = opendir(folder);
	if (directory == NULL)
		return kagent_ctypes_buffer_error(cause, cause_size, -errno,
						  "landlock: open \"%s\": %s", folder,
						  strerror(errno));
	while ((entry = readdir(directory)) != NULL) {
		if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
			continue;
		if (sandbox__is_gpu_node(entry->d_name) &&
		    strcmp(entry->d_name, policy->own_gpu_node) != 0)
			continue;
		if (fstatat(dirfd(directory), entry->d_name, &status, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone since it was listed */
		if (!S_ISDIR(status.st_mode) && !S_ISCHR(status.st_mode) &&
		    !S_ISBLK(status.st_mode) && !S_ISREG(status.st_mode))
			continue;
		if ((size_t)snprintf(path, sizeof path, "%s/%s", folder, entry->d_name) >=
		    sizeof path)
			continue;
		result =
		    sandbox__landlock_allow(ruleset, path, rights, handled, 1, cause, cause_size);
		if (result < 0)
			break;
	}
	closedir(directory);
	return result;
}

static int
sandbox__apply_landlock(const struct kagent_sandbox_policy *policy, char *cause, size_t cause_size)
{
	struct sandbox__ruleset_attr attributes = {0};
	const char *const *path;
	uint64_t handled, writable;
	int abi, ruleset = -1, result = 0;

	abi = sandbox__landlock_abi();
	if (abi == -ENOSYS || abi == -EOPNOTSUPP) {
		/* Not built in, or not enabled at boot: seccomp and DAC remain. */
		sandbox__applied.landlock_abi = 0;
		goto out;
	}
	if (abi < 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, abi, "landlock: %s",
						    strerror(-abi));
		goto out;
	}
	handled = sandbox__landlock_fs_rights(abi);
	attributes.handled_access_fs = handled;
	/* No network rule is added: every TCP bind and connect is denied, even on a socket
	 * created before the sandbox (seccomp only stops new ones). */
	if (abi >= 4)
		attributes.handled_access_net =
		    LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
	/* The candidate may not signal the judge or the worker, nor reach abstract sockets
	 * bound outside the sandbox; its own children are inside and stay reachable. */
	if (abi >= 6)
		attributes.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attributes, sizeof attributes, 0);
	if (ruleset < 0) {
		result = kagent_ctypes_buffer_error(
		    cause, cause_size, -errno, "landlock: create ruleset: %s", strerror(errno));
		goto out;
	}
	/* Device nodes are never created, even where the filesystem would allow it. */
	writable = handled & ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK);
	result =
	    sandbox__landlock_allow(ruleset, "/", SANDBOX_FS_READ, handled, 0, cause, cause_size);
	if (result < 0)
		goto out;
	result = sandbox__landlock_allow(ruleset, policy->scratch_directory, writable, handled, 0,
					 cause, cause_size);
	if (result < 0)
		goto out;
	for (path = policy->writable_paths; path != NULL && *path != NULL; path++) {
		result = sandbox__landlock_allow(ruleset, *path, writable, handled, 0, cause,
						 cause_size);
		if (result < 0)
			goto out;
	}
	if (policy->allow_gpu_devices) {
		result =
		    sandbox__landlock_allow_devices(ruleset, policy, handled, cause, cause_size);
		if (result < 0)
			goto out;
	}
	/* cudaGetDeviceCount fails with error 304 when /proc/self cannot be written. */
	result = sandbox__landlock_allow(ruleset, "/proc/self",
					 SANDBOX_FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE |
					     LANDLOCK_ACCESS_FS_TRUNCATE,
					 handled, 1, cause, cause_size);
	if (result < 0)
		goto out;
	result =
	    sandbox__landlock_allow(ruleset, "/dev/null",
				    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
					LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV,
				    handled, 1, cause, cause_size);
	if (result < 0)
		goto out;
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -errno,
						    "landlock: restrict self: %s", strerror(errno));
		goto out;
	}
	sandbox__applied.landlock_abi = abi;
out:
	if (ruleset >= 0)
		close(ruleset);
	return result;
}

/* Kernel interfaces a candidate never needs, each a known way out or a large attack
 * surface. Names unknown to this libseccomp or architecture are skipped. */
static const char *const sandbox__denied_syscalls[] = {"io_uring_setup",
						       "io_uring_enter",
						       "io_uring_register",
						       "unshare",
						       "setns",
						       "ptrace",
						       "process_vm_readv",
						       "process_vm_writev",
						       "process_madvise",
						       "pidfd_getfd",
						       "kcmp",
						       "bpf",
						       "perf_event_open",
						       "mount",
						       "umount",
						       "umount2",
						       "pivot_root",
						       "chroot",
						       "fsopen",
						       "fsconfig",
						       "fsmount",
						       "fspick",
						       "open_tree",
						       "move_mount",
						       "mount_setattr",
						       "kexec_load",
						       "kexec_file_load",
						       "init_module",
						       "finit_module",
						       "delete_module",
						       "keyctl",
						       "add_key",
						       "request_key",
						       "userfaultfd",
						       "acct",
						       "swapon",
						       "swapoff",
						       "reboot",
						       "syslog",
						       "quotactl",
						       "iopl",
						       "ioperm",
						       "open_by_handle_at",
						       "lookup_dcookie",
						       "fanotify_init",
						       "uselib",
						       "vhangup",
						       "nfsservctl"};

/* clone() may create namespaces too; CLONE_NEWTIME is left out because for clone()
 * that bit is part of the exit signal (only clone3 and unshare take it). */
static const unsigned long sandbox__namespace_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};

/* The first argument of socket(2) and socketpair(2) is not AF_UNIX. Spelled out rather than
 * with SCMP_A0, whose initializer leaves fields for the compiler to fill. */
static const struct scmp_arg_cmp sandbox__not_unix = {
    .arg = 0, .op = SCMP_CMP_NE, .datum_a = AF_UNIX, .datum_b = 0};

static int
sandbox__seccomp_rules(scmp_filter_ctx filter)
{
	const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
	size_t index;
	int result = 0, bit;

	for (index = 0; index < sizeof sandbox__denied_syscalls / sizeof *sandbox__denied_syscalls;
	     index++) {
		int number = seccomp_syscall_resolve_name(sandbox__denied_syscalls[index]);

		if (number == __NR_SCMP_ERROR)
			continue;
		result = seccomp_rule_add(filter, deny, number, 0);
		if (result < 0)
			goto out;
	}
	/* Only Unix sockets: "not AF_UNIX" also covers families nobody listed (AF_ALG,
	 * AF_BLUETOOTH...) and cannot be dodged by setting the argument's upper bits. */
	result = seccomp_rule_add(filter, deny, SCMP_SYS(socket), 1, sandbox__not_unix);
	if (result < 0)
		goto out;
	result = seccomp_rule_add(filter, deny, SCMP_SYS(socketpair), 1, sandbox__not_unix);
	if (result < 0)
		goto out;
	for (index = 0; index < sizeof sandbox__namespace_flags / sizeof *sandbox__namespace_flags;
	     index++) {
		result =
		    seccomp_rule_add(filter, deny, SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, sandbox__namespace_flags[index],
					     sandbox__namespace_flags[index]));
		if (result < 0)
			goto out;
	}
	/* clone3 passes its flags in memory, out of seccomp's sight. ENOSYS makes glibc fall
	 * back to clone, which the rules above inspect. */
	result = seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (result < 0)
		goto out;
	/* ioctl stays allowed (CUDA lives on it), except faking input on a terminal. */
	result = seccomp_rule_add(filter, deny, SCMP_SYS(ioctl), 1,
				  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, TIOCSTI));
	if (result < 0)
		goto out;
	result = seccomp_rule_add(filter, deny, SCMP_SYS(ioctl), 1,
				  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, TIOCLINUX));
	if (result < 0)
		goto out;
	/*
	 * personality: only 0 (PER_LINUX) and 0xffffffff (the query) are allowed, so that
	 * ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC cannot be set. A rule compares an argument
	 * once, so "neither all zeros nor all ones" is spelled bit by bit: some bit set with
	 * bit 31 clear, or bit 31 set with some bit clear.
	 */
	for (bit = 0; bit < 31; bit++) {
		unsigned long one = 1UL << bit, top = 1UL << 31;

		result = seccomp_rule_add(filter, deny, SCMP_SYS(personality), 1,
					  SCMP_A0(SCMP_CMP_MASKED_EQ, one | top, one));
		if (result < 0)
			goto out;
		result = seccomp_rule_add(filter, deny, SCMP_SYS(personality), 1,
					  SCMP_A0(SCMP_CMP_MASKED_EQ, one | top, top));
		if (result < 0)
			goto out;
	}
out:
	return result;
}

/*
 * The timed calls' rule (docs/verdict.md, "The sealed boundary"): no new process, so that no
 * device work can run in a process the device record does not see. Threads stay allowed
 * (CUDA and torch make them); exec is refused too, since a thread could exec away from the
 * record.
 */
static int
sandbox__no_process_rules(scmp_filter_ctx filter)
{
	const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
	static const char *const calls[] = {"fork", "vfork", "execve", "execveat"};
	size_t index;
	int result = 0;

	for (index = 0; index < sizeof calls / sizeof *calls; index++) {
		int number = seccomp_syscall_resolve_name(calls[index]);

		if (number == __NR_SCMP_ERROR)
			continue;
		result = seccomp_rule_add(filter, deny, number, 0);
		if (result < 0)
			return result;
	}
	result = seccomp_rule_add(filter, deny, SCMP_SYS(clone), 1,
				  SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
	if (result < 0)
		return result;
	/* as at entry: clone3 hides its flags from seccomp, so glibc must fall back to clone */
	return seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
}

/* Builds a filter from `rules` and loads it; with every_thread, on all of the process's
 * threads at once (TSYNC), which a process that already runs CUDA needs. */
static int
sandbox__load_filter(int (*rules)(scmp_filter_ctx), int every_thread, char *cause,
		     size_t cause_size)
{
	scmp_filter_ctx filter;
	int result;

	filter = seccomp_init(SCMP_ACT_ALLOW);
	if (filter == NULL)
		return kagent_ctypes_buffer_error(cause, cause_size, -ENOMEM,
						  "seccomp_init failed");
	/* A syscall made under another architecture (int 0x80 from a 64-bit process) would
	 * bypass every rule: such a call kills the whole process instead. */
	result = seccomp_attr_set(filter, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (result < 0) {
		kagent_ctypes_buffer_error(cause, cause_size, result,
					   "seccomp: bad-arch action: %s", strerror(-result));
		goto out;
	}
	if (every_thread) {
		result = seccomp_attr_set(filter, SCMP_FLTATR_CTL_TSYNC, 1);
		if (result < 0) {
			kagent_ctypes_buffer_error(cause, cause_size, result,
						   "seccomp: synchronising threads: %s",
						   strerror(-result));
			goto out;
		}
	}
	/* x32 calls arrive with the x86-64 audit arch, so they need rules of their own. */
	if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
		result = seccomp_arch_add(filter, SCMP_ARCH_X32);
		if (result < 0 && result != -EEXIST) {
			kagent_ctypes_buffer_error(cause, cause_size, result,
						   "seccomp: adding x32: %s", strerror(-result));
			goto out;
		}
	}
	result = rules(filter);
	if (result < 0) {
		kagent_ctypes_buffer_error(cause, cause_size, result, "seccomp: adding a rule: %s",
					   strerror(-result));
		goto out;
	}
	result = seccomp_load(filter);
	if (result < 0) {
		kagent_ctypes_buffer_error(cause, cause_size, result,
					   "seccomp: loading the filter: %s", strerror(-result));
		goto out;
	}
out:
	seccomp_release(filter);
	return result;
}

static int
sandbox__apply_seccomp(char *cause, size_t cause_size)
{
	int result = sandbox__load_filter(sandbox__seccomp_rules, 0, cause, cause_size);

	if (result == 0)
		sandbox__applied.seccomp = 1;
	return result;
}

int
kagent_sandbox_forbid_processes(char *cause, size_t cause_size)
{
	if (cause != NULL && cause_size > 0)
		cause[0] = '\0';
	/* seccomp without privilege needs no_new_privs; the sandbox set it, but a caller
	 * outside one (the unit tests) may not have */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return kagent_ctypes_buffer_error(
		    cause, cause_size, -errno, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	return sandbox__load_filter(sandbox__no_process_rules, 1, cause, cause_size);
}

int
kagent_sandbox_enter(const struct kagent_sandbox_policy *policy, char *cause, size_t cause_size)
{
	int result;

	if (cause != NULL && cause_size > 0)
		cause[0] = '\0';
	result = sandbox__check_policy(policy, cause, cause_size);
	if (result < 0)
		goto out;
	memset(&sandbox__applied, 0, sizeof sandbox__applied);
	sandbox__applied.entered = 1;
	sandbox__enter_network_namespace(policy);
	result = sandbox__set_limits(policy, cause, cause_size);
	if (result < 0)
		goto out;
	if (geteuid() == 0) {
		result = sandbox__drop_root(policy, cause, cause_size);
		if (result < 0)
			goto out;
	}
	sandbox__applied.uid = (long long)getuid();
	/* RLIMIT_NPROC counts every process of the real uid, system-wide, not only ours. */
	if (policy->max_processes > 0) {
		result =
		    sandbox__set_limit(RLIMIT_NPROC, "RLIMIT_NPROC", (rlim_t)policy->max_processes,
				       (rlim_t)policy->max_processes, cause, cause_size);
		if (result < 0)
			goto out;
	}
	result = sandbox__check_writable(policy, cause, cause_size);
	if (result < 0)
		goto out;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -errno,
						    "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		goto out;
	}
	result = sandbox__apply_landlock(policy, cause, cause_size);
	if (result < 0)
		goto out;
	result = sandbox__apply_seccomp(cause, cause_size);
out:
	return result;
}

/* A JSON flag: true/false, or 0/1 for callers that write integers. */
static int
sandbox__json_flag(json_t *value, int *flag)
{
	if (json_is_boolean(value)) {
		*flag = json_is_true(value);
		return 0;
	}
	if (json_is_integer(value) &&
	    (json_integer_value(value) == 0 || json_integer_value(value) == 1)) {
		*flag = (int)json_integer_value(value);
		return 0;
	}
	return -EINVAL;
}

static int
sandbox__json_count(json_t *value, long long maximum, long long *count)
{
	if (!json_is_integer(value) || json_integer_value(value) < 0 ||
	    json_integer_value(value) > maximum)
		return -EINVAL;
	*count = json_integer_value(value);
	return 0;
}

int
kagent_sandbox_enter_json(const char *policy_json, char *cause, size_t cause_size)
{
	struct kagent_sandbox_policy policy = {0};
	const char **paths = NULL;
	json_error_t json_error;
	json_t *root = NULL, *value;
	const char *key;
	long long count;
	int result = 0;

	if (cause != NULL && cause_size > 0)
		cause[0] = '\0';
	if (policy_json == NULL) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -EINVAL, "no policy");
		goto out;
	}
	root = json_loads(policy_json, JSON_REJECT_DUPLICATES, &json_error);
	if (root == NULL) {
		result = kagent_ctypes_buffer_error(
		    cause, cause_size, -EINVAL, "policy is not valid JSON: %s (line %d, column %d)",
		    json_error.text, json_error.line, json_error.column);
		goto out;
	}
	if (!json_is_object(root)) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						    "policy is not a JSON object");
		goto out;
	}
	json_object_foreach(root, key, value)
	{
		if (strcmp(key, "scratch_directory") == 0) {
			if (!json_is_string(value)) {
				result = -EINVAL;
				break;
			}
			policy.scratch_directory = json_string_value(value);
		} else if (strcmp(key, "writable_paths") == 0) {
			size_t index, size;

			if (json_is_null(value))
				continue;
			if (!json_is_array(value)) {
				result = -EINVAL;
				break;
			}
			size = json_array_size(value);
			paths = calloc(size + 1, sizeof *paths);
			if (paths == NULL) {
				result = kagent_ctypes_buffer_error(cause, cause_size, -ENOMEM,
								    "out of memory");
				goto out;
			}
			for (index = 0; index < size; index++) {
				paths[index] = json_string_value(json_array_get(value, index));
				if (paths[index] == NULL)
					break;
			}
			if (index < size) {
				result = -EINVAL;
				break;
			}
			policy.writable_paths = paths;
		} else if (strcmp(key, "cpu_seconds") == 0) {
			if (!json_is_number(value)) {
				result = -EINVAL;
				break;
			}
			policy.cpu_seconds = json_number_value(value);
		} else if (strcmp(key, "max_processes") == 0) {
			result = sandbox__json_count(value, LONG_MAX, &count);
			if (result < 0)
				break;
			policy.max_processes = (long)count;
		} else if (strcmp(key, "max_file_bytes") == 0) {
			result = sandbox__json_count(value, LLONG_MAX, &count);
			if (result < 0)
				break;
			policy.max_file_bytes = count;
		} else if (strcmp(key, "max_address_space_bytes") == 0) {
			result = sandbox__json_count(value, LLONG_MAX, &count);
			if (result < 0)
				break;
			policy.max_address_space_bytes = count;
		} else if (strcmp(key, "allow_gpu_devices") == 0) {
			result = sandbox__json_flag(value, &policy.allow_gpu_devices);
			if (result < 0)
				break;
		} else if (strcmp(key, "own_gpu_node") == 0 ||
			   strcmp(key, "device_directory") == 0) {
			const char **field = strcmp(key, "own_gpu_node") == 0
						 ? &policy.own_gpu_node
						 : &policy.device_directory;

			if (json_is_null(value))
				continue;
			if (!json_is_string(value)) {
				result = -EINVAL;
				break;
			}
			*field = json_string_value(value);
		} else if (strcmp(key, "unprivileged_id") == 0) {
			/* uids above 2^31 - 1 are refused: some tools treat them as negative */
			result = sandbox__json_count(value, 0x7fffffffLL, &count);
			if (result < 0)
				break;
			policy.unprivileged_id = (long)count;
		} else if (strcmp(key, "new_network_namespace") == 0) {
			result = sandbox__json_flag(value, &policy.new_network_namespace);
			if (result < 0)
				break;
		} else {
			result = kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
							    "unknown policy key \"%s\"", key);
			goto out;
		}
	}
	if (result < 0) {
		result = kagent_ctypes_buffer_error(cause, cause_size, result,
						    "policy key \"%s\" has a bad value", key);
		goto out;
	}
	if (policy.scratch_directory == NULL) {
		result = kagent_ctypes_buffer_error(cause, cause_size, -EINVAL,
						    "policy has no scratch_directory");
		goto out;
	}
	result = kagent_sandbox_enter(&policy, cause, cause_size);
out:
	free(paths);
	json_decref(root);
	return result;
}

static long
sandbox__read_number(const char *path)
{
	char text[32] = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t length;

	if (fd < 0)
		return -1;
	length = read(fd, text, sizeof text - 1);
	close(fd);
	return length > 0 ? strtol(text, NULL, 10) : -1;
}

int
kagent_sandbox_describe(char *buffer, size_t buffer_size)
{
	const struct scmp_version *version = seccomp_version();
	json_t *root = NULL, *applied = json_null();
	char libseccomp[48];
	size_t length;
	int abi = sandbox__landlock_abi(), result;

	if (buffer == NULL || buffer_size == 0) {
		result = -EINVAL;
		goto out;
	}
	snprintf(libseccomp, sizeof libseccomp, "%u.%u.%u", version->major, version->minor,
		 version->micro);
	if (sandbox__applied.entered)
		applied = json_pack("{s:s?, s:i, s:b, s:I, s:b}", "network_namespace",
				    sandbox__applied.network_namespace, "landlock_abi",
				    sandbox__applied.landlock_abi, "dropped_to_unprivileged",
				    sandbox__applied.dropped_to_unprivileged, "uid",
				    (json_int_t)sandbox__applied.uid, "seccomp",
				    sandbox__applied.seccomp);
	root = json_pack("{s:s, s:s, s:i, s:s?, s:b, s:i, s:s, s:b, s:I, s:i, s:b, s:b, s:i, s:i, "
			 "s:o?}",
			 "library", "kagent-sandbox", "version", KAGENT_VERSION, "landlock_abi",
			 abi > 0 ? abi : 0, "landlock_error", abi > 0 ? NULL : strerror(-abi),
			 "seccomp_available", prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0,
			 "seccomp_api_level", (int)seccomp_api_get(), "libseccomp", libseccomp,
			 "running_as_root", geteuid() == 0, "euid", (json_int_t)geteuid(),
			 "unprivileged_id", KAGENT_SANDBOX_UNPRIVILEGED_ID, "user_namespaces",
			 sandbox__read_number("/proc/sys/user/max_user_namespaces") > 0,
			 "no_new_privs", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1,
			 "seccomp_mode", prctl(PR_GET_SECCOMP, 0, 0, 0, 0), "threads",
			 sandbox__count_threads(), "applied", applied);
	applied = NULL; /* "o" took the reference, even on failure */
	if (root == NULL) {
		result = -ENOMEM;
		goto out;
	}
	length = json_dumpb(root, buffer, buffer_size - 1, JSON_COMPACT);
	if (length == 0 || length > buffer_size - 1) {
		result = length == 0 ? -ENOMEM : -ENOSPC;
		goto out;
	}
	buffer[length] = '\0';
	result = (int)length;
out:
	json_decref(applied);
	json_decref(root);
	return result;
}
