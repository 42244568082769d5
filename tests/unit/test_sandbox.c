/*
 * Tests for the candidate sandbox. Each behaviour test forks a child that enters
 * the sandbox on a fresh scratch folder and then tries something; the child checks
 * the outcome itself (a failed CHECK aborts it) and the parent asserts on its exit
 * status, then kills its process group and reaps everything it left behind.
 */
#include "test.h"

#include "kagent/sandbox/sandbox.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct kagent_sandbox_policy
default_policy(const char *scratch)
{
	struct kagent_sandbox_policy policy = {
	    .scratch_directory = scratch,
	    .cpu_seconds = 60,
	    .max_processes = 64,
	    .max_file_bytes = 1 << 20,
	    .new_network_namespace = 1,
	};

	return policy;
}

static json_t *
describe(void)
{
	char buffer[4096];
	json_t *root;
	int length = kagent_sandbox_describe(buffer, sizeof buffer);

	CHECK(length > 0);
	root = json_loads(buffer, 0, NULL);
	CHECK(root != NULL);
	return root;
}

static void
skip_without_landlock(void)
{
	json_t *root = describe();
	json_int_t abi = json_integer_value(json_object_get(root, "landlock_abi"));

	json_decref(root);
	if (abi < 1)
		kagent_test_skip("Landlock is not available in this kernel");
}

static int
remove_entry(const char *path, const struct stat *status, int type, struct FTW *walk)
{
	(void)status;
	(void)type;
	(void)walk;
	remove(path);
	return 0;
}

static void
remove_tree(char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(path);
}

/* Kills what the sandboxed child left in its process group and reaps it all: the test
 * process is a subreaper, so orphaned grandchildren come back to it. */
static void
kill_and_reap(pid_t group)
{
	kill(-group, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	CHECK(kill(-group, 0) < 0 && errno == ESRCH);
}

/* The same policy as JSON, the way the Python runner passes it. */
static char *
json_policy(const struct kagent_sandbox_policy *policy)
{
	json_t *paths = json_array();
	const char *const *path;
	json_t *root;
	char *text;

	for (path = policy->writable_paths; path != NULL && *path != NULL; path++)
		json_array_append_new(paths, json_string(*path));
	root = json_pack(
	    "{s:s, s:o, s:f, s:I, s:I, s:I, s:b, s:b, s:s?, s:s?}", "scratch_directory",
	    policy->scratch_directory, "writable_paths", paths, "cpu_seconds", policy->cpu_seconds,
	    "max_processes", (json_int_t)policy->max_processes, "max_file_bytes",
	    (json_int_t)policy->max_file_bytes, "max_address_space_bytes",
	    (json_int_t)policy->max_address_space_bytes, "allow_gpu_devices",
	    policy->allow_gpu_devices, "new_network_namespace", policy->new_network_namespace,
	    "own_gpu_node", policy->own_gpu_node, "device_directory", policy->device_directory);
	CHECK(root != NULL);
	text = json_dumps(root, JSON_COMPACT);
	CHECK(text != NULL);
	json_decref(root);
	return text;
}

/* Runs body in a sandboxed child in its own process group; returns its wait status. */
static int
run_sandboxed(const struct kagent_sandbox_policy *policy, void (*body)(const char *),
	      int enter_json)
{
	int status = 0;
	pid_t child;

	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		char error[512];
		int result;

		setpgid(0, 0);
		if (enter_json) {
			char *json = json_policy(policy);

			result = kagent_sandbox_enter_json(json, error, sizeof error);
			free(json);
		} else {
			result = kagent_sandbox_enter(policy, error, sizeof error);
		}
		if (result != 0) {
			fprintf(stderr, "entering the sandbox failed (%d): %s\n", result, error);
			_exit(3);
		}
		body(policy->scratch_directory);
		fflush(NULL);
		_exit(0);
	}
	setpgid(child, child);
	CHECK(waitpid(child, &status, 0) == child);
	kill_and_reap(child);
	return status;
}

static void
check_exited_cleanly(int status)
{
	if (WIFSIGNALED(status))
		fprintf(stderr, "sandboxed child killed by signal %d\n", WTERMSIG(status));
	CHECK(WIFEXITED(status));
	CHECK_INT(WEXITSTATUS(status), 0);
}

/* --- the JSON entry point and describe, in this process: nothing must change --- */

static void
check_still_unconfined(void)
{
	CHECK_INT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 0);
	CHECK_INT(prctl(PR_GET_SECCOMP, 0, 0, 0, 0), 0);
}

static void
test_describe_is_json(void)
{
	json_t *root = describe();
	char small[8];

	CHECK(json_is_integer(json_object_get(root, "landlock_abi")));
	CHECK(json_is_boolean(json_object_get(root, "seccomp_available")));
	CHECK(json_is_true(json_object_get(root, "seccomp_available")));
	CHECK(json_is_boolean(json_object_get(root, "running_as_root")));
	CHECK_INT(json_is_true(json_object_get(root, "running_as_root")), geteuid() == 0);
	CHECK_INT(json_integer_value(json_object_get(root, "unprivileged_id")), 65534);
	CHECK(json_is_null(json_object_get(root, "applied")));
	CHECK_STRING(json_string_value(json_object_get(root, "library")), "kagent-sandbox");
	json_decref(root);
	CHECK_INT(kagent_sandbox_describe(small, sizeof small), -ENOSPC);
	CHECK_INT(kagent_sandbox_describe(NULL, 0), -EINVAL);
}

static void
test_json_rejects_malformed(void)
{
	char error[256];

	CHECK(kagent_sandbox_enter_json("{\"scratch_directory\": ", error, sizeof error) < 0);
	CHECK_CONTAINS(error, "not valid JSON");
	CHECK(kagent_sandbox_enter_json("[1, 2]", error, sizeof error) < 0);
	CHECK_CONTAINS(error, "not a JSON object");
	CHECK(kagent_sandbox_enter_json(NULL, error, sizeof error) < 0);
	CHECK_CONTAINS(error, "no policy");
	/* A message that does not fit is cut, not overflowed. */
	CHECK(kagent_sandbox_enter_json("nope", error, 4) < 0);
	CHECK_INT(strlen(error), 3);
	check_still_unconfined();
}

static void
test_json_rejects_unknown_key(void)
{
	char *scratch = kagent_test_make_directory();
	char json[512], error[256];

	snprintf(json, sizeof json, "{\"scratch_directory\": \"%s\", \"max_procs\": 4}", scratch);
	CHECK_INT(kagent_sandbox_enter_json(json, error, sizeof error), -EINVAL);
	CHECK_CONTAINS(error, "unknown policy key \"max_procs\"");
	check_still_unconfined();
	remove_tree(scratch);
}

static void
test_json_rejects_bad_values(void)
{
	char *scratch = kagent_test_make_directory();
	const char *bad[] = {"\"cpu_seconds\": \"ten\"",
			     "\"cpu_seconds\": -1",
			     "\"max_processes\": 2.5",
			     "\"max_file_bytes\": -3",
			     "\"writable_paths\": [\"/tmp\", 3]",
			     "\"allow_gpu_devices\": \"yes\"",
			     "\"own_gpu_node\": 1",
			     "\"own_gpu_node\": \"nvidiactl\"",
			     "\"own_gpu_node\": \"nvidia\"",
			     "\"own_gpu_node\": \"../nvidia0\"",
			     "\"device_directory\": false",
			     "\"writable_paths\": [\"relative\"]"};
	char json[512], error[256];
	size_t index;

	for (index = 0; index < sizeof bad / sizeof *bad; index++) {
		snprintf(json, sizeof json, "{\"scratch_directory\": \"%s\", %s}", scratch,
			 bad[index]);
		CHECK_INT(kagent_sandbox_enter_json(json, error, sizeof error), -EINVAL);
		CHECK(error[0] != '\0');
	}
	snprintf(json, sizeof json,
		 "{\"scratch_directory\": \"%s\", \"cpu_seconds\": 1, "
		 "\"cpu_seconds\": 2}",
		 scratch);
	CHECK_INT(kagent_sandbox_enter_json(json, error, sizeof error), -EINVAL);
	check_still_unconfined();
	remove_tree(scratch);
}

static void
test_json_rejects_missing_scratch(void)
{
	char error[256];

	CHECK_INT(kagent_sandbox_enter_json("{\"cpu_seconds\": 5}", error, sizeof error), -EINVAL);
	CHECK_CONTAINS(error, "no scratch_directory");
	CHECK_INT(kagent_sandbox_enter_json("{\"scratch_directory\": \"/nonexistent/kagent\"}",
					    error, sizeof error),
		  -ENOENT);
	CHECK_CONTAINS(error, "/nonexistent/kagent");
	CHECK_INT(kagent_sandbox_enter_json("{\"scratch_directory\": \"/etc/passwd\"}", error,
					    sizeof error),
		  -ENOTDIR);
	CHECK_INT(kagent_sandbox_enter(NULL, error, sizeof error), -EINVAL);
	check_still_unconfined();
}

/* --- behaviour inside the sandbox --- */

static int listening_port;

static void
body_network_denied(const char *scratch)
{
	static const int families[] = {AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK};
	struct sockaddr_in address = {.sin_family = AF_INET};
	size_t index;
	int fd;

	(void)scratch;
	for (index = 0; index < sizeof families / sizeof *families; index++) {
		errno = 0;
		CHECK(socket(families[index], SOCK_STREAM, 0) < 0);
		CHECK_INT(errno, EPERM);
		CHECK(socket(families[index], SOCK_DGRAM, 0) < 0);
		CHECK_INT(errno, EPERM);
	}
	/* The upper half of the argument is ignored by the kernel, not by the filter. */
	CHECK(syscall(SYS_socket, 0x100000000L | AF_INET, SOCK_STREAM, 0) < 0);
	CHECK_INT(errno, EPERM);
	{
		int pair[2];

		CHECK(socketpair(AF_INET, SOCK_STREAM, 0, pair) < 0);
		CHECK_INT(errno, EPERM);
	}
	address.sin_port = htons((uint16_t)listening_port);
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd < 0);
	CHECK(connect(fd, (struct sockaddr *)&address, sizeof address) < 0);
}

static int
open_listener(void)
{
	struct sockaddr_in address = {.sin_family = AF_INET};
	socklen_t length = sizeof address;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&address, sizeof address) == 0);
	CHECK(listen(fd, 8) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&address, &length) == 0);
	listening_port = ntohs(address.sin_port);
	return fd;
}

static void
test_network_denied(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);
	int listener = open_listener();

	check_exited_cleanly(run_sandboxed(&policy, body_network_denied, 0));
	/* Without a new network namespace, seccomp alone still stops it. */
	policy.new_network_namespace = 0;
	check_exited_cleanly(run_sandboxed(&policy, body_network_denied, 1));
	close(listener);
	remove_tree(scratch);
}

/*
 * A TCP socket created before the sandbox lives in the old network namespace and
 * seccomp never sees it again: only Landlock's network rights (ABI 4) stop it.
 */
static int early_socket = -1;

static void
body_early_socket_cannot_connect(const char *scratch)
{
	struct sockaddr_in address = {.sin_family = AF_INET};

	(void)scratch;
	address.sin_port = htons((uint16_t)listening_port);
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(connect(early_socket, (struct sockaddr *)&address, sizeof address) < 0);
	CHECK_INT(errno, EACCES);
}

static void
test_early_socket_cannot_connect(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);
	json_t *root = describe();
	json_int_t abi = json_integer_value(json_object_get(root, "landlock_abi"));
	int listener = open_listener();
	struct sockaddr_in address = {.sin_family = AF_INET};

	json_decref(root);
	if (abi < 4)
		kagent_test_skip("Landlock ABI < 4 has no network rights");
	/* Proof that the connect would work unconfined. */
	address.sin_port = htons((uint16_t)listening_port);
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	early_socket = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(early_socket, (struct sockaddr *)&address, sizeof address) == 0);
	close(early_socket);
	early_socket = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(early_socket >= 0);
	check_exited_cleanly(run_sandboxed(&policy, body_early_socket_cannot_connect, 0));
	close(early_socket);
	close(listener);
	remove_tree(scratch);
}

static void
body_unix_sockets_work(const char *scratch)
{
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	int pair[2], server, client, accepted;
	char byte = 0;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
	CHECK(write(pair[0], "x", 1) == 1);
	CHECK(read(pair[1], &byte, 1) == 1 && byte == 'x');
	snprintf(address.sun_path, sizeof address.sun_path, "%s/socket", scratch);
	server = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(server >= 0);
	CHECK(bind(server, (struct sockaddr *)&address, sizeof address) == 0);
	CHECK(listen(server, 1) == 0);
	client = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(client >= 0);
	CHECK(connect(client, (struct sockaddr *)&address, sizeof address) == 0);
	accepted = accept(server, NULL, NULL);
	CHECK(accepted >= 0);
	CHECK(write(client, "y", 1) == 1);
	CHECK(read(accepted, &byte, 1) == 1 && byte == 'y');
}

static void
test_unix_sockets_work(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);

	check_exited_cleanly(run_sandboxed(&policy, body_unix_sockets_work, 1));
	remove_tree(scratch);
}

static char *extra_directory;

static void
write_and_check(const char *directory)
{
	char path[512], renamed[512], buffer[8] = {0};
	int fd;

	snprintf(path, sizeof path, "%s/file", directory);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "hello", 5) == 5);
	CHECK(ftruncate(fd, 4) == 0);
	close(fd);
	snprintf(renamed, sizeof renamed, "%s/sub", directory);
	CHECK(mkdir(renamed, 0700) == 0);
	snprintf(renamed, sizeof renamed, "%s/sub/moved", directory);
	CHECK(rename(path, renamed) == 0);
	fd = open(renamed, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(read(fd, buffer, sizeof buffer) == 4);
	CHECK_STRING(buffer, "hell");
	close(fd);
	CHECK(unlink(renamed) == 0);
}

static void
body_scratch_is_writable(const char *scratch)
{
	char buffer[64];
	int fd;

	write_and_check(scratch);
	write_and_check(extra_directory);
	/* A file the trusted side left there was handed over too. */
	fd = openat(open(extra_directory, O_RDONLY | O_DIRECTORY), "cached", O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	CHECK(write(fd, "new", 3) == 3);
	close(fd);
	/* The rest of the system stays readable. */
	fd = open("/etc/passwd", O_RDONLY);
	CHECK(fd >= 0);
	CHECK(read(fd, buffer, sizeof buffer) > 0);
	close(fd);
	fd = open("/dev/null", O_WRONLY);
	CHECK(fd >= 0);
	CHECK(write(fd, "x", 1) == 1);
	close(fd);
	if (KAGENT_SANDBOX_UNPRIVILEGED_ID == getuid()) {
		struct stat status;

		fd = open(scratch, O_RDONLY | O_DIRECTORY);
		CHECK(fd >= 0 && fstat(fd, &status) == 0);
		CHECK_INT(status.st_uid, KAGENT_SANDBOX_UNPRIVILEGED_ID);
		close(fd);
	}
}

static void
test_scratch_is_writable(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);
	const char *paths[2];
	char *existing;

	extra_directory = kagent_test_make_directory();
	/* A file the trusted side left in a cache: it must become writable too. */
	existing = kagent_test_write_file(extra_directory, "cached", "old");
	paths[0] = extra_directory;
	paths[1] = NULL;
	policy.writable_paths = paths;
	check_exited_cleanly(run_sandboxed(&policy, body_scratch_is_writable, 1));
	free(existing);
	remove_tree(scratch);
	remove_tree(extra_directory);
}

static char *outside_directory;
static char *outside_file;

static void
body_writes_outside_denied(const char *scratch)
{
	char path[512];
	int fd;

	(void)scratch;
	snprintf(path, sizeof path, "%s/new", outside_directory);
	errno = 0;
	CHECK(open(path, O_CREAT | O_WRONLY, 0600) < 0);
	CHECK_INT(errno, EACCES);
	snprintf(path, sizeof path, "%s/dir", outside_directory);
	CHECK(mkdir(path, 0700) < 0);
	CHECK_INT(errno, EACCES);
	CHECK(open(outside_file, O_WRONLY) < 0);
	CHECK_INT(errno, EACCES);
	CHECK(truncate(outside_file, 0) < 0);
	CHECK_INT(errno, EACCES);
	CHECK(unlink(outside_file) < 0);
	CHECK_INT(errno, EACCES);
	snprintf(path, sizeof path, "/tmp/kagent-sandbox-escape-%ld", (long)getpid());
	CHECK(open(path, O_CREAT | O_WRONLY, 0600) < 0);
	CHECK_INT(errno, EACCES);
	/* Without allow_gpu_devices, device nodes other than /dev/null stay read-only. */
	CHECK(open("/dev/full", O_WRONLY) < 0);
	CHECK_INT(errno, EACCES);
	/* The scratch folder can not be used to move files out of it. */
	snprintf(path, sizeof path, "%s/mine", scratch);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	{
		char target[512];

		snprintf(target, sizeof target, "%s/moved", outside_directory);
		CHECK(rename(path, target) < 0);
		CHECK(link(path, target) < 0);
		CHECK(symlink(path, target) < 0);
	}
}

static void
test_writes_outside_denied(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);

	skip_without_landlock();
	/* World-writable, so that only Landlock (not file permissions) can refuse. */
	outside_directory = kagent_test_make_directory();
	CHECK(chmod(outside_directory, 0777) == 0);
	outside_file = kagent_test_write_file(outside_directory, "existing", "keep");
	CHECK(chmod(outside_file, 0666) == 0);
	check_exited_cleanly(run_sandboxed(&policy, body_writes_outside_denied, 0));
	{
		char path[512];
		struct stat status;

		snprintf(path, sizeof path, "%s/new", outside_directory);
		CHECK(access(path, F_OK) < 0);
		CHECK(stat(outside_file, &status) == 0 && status.st_size == 4);
	}
	free(outside_file);
	remove_tree(outside_directory);
	remove_tree(scratch);
}

static void
body_gpu_devices(const char *scratch)
{
	int fd;

	(void)scratch;
	fd = open("/dev/full", O_WRONLY);
	CHECK(fd >= 0);
	close(fd);
	/* /dev is writable, not a place to create files. */
	CHECK(open("/dev/kagent-sandbox-test", O_CREAT | O_WRONLY, 0600) < 0);
}

static void
test_gpu_devices_rule(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);

	skip_without_landlock();
	policy.allow_gpu_devices = 1;
	check_exited_cleanly(run_sandboxed(&policy, body_gpu_devices, 1));
	remove_tree(scratch);
}

static char *device_directory;

/* Whether the sandboxed process can open device_directory/name for reading and writing. */
static int
device_opens(const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof path, "%s/%s", device_directory, name);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static void
body_own_gpu_node(const char *scratch)
{
	(void)scratch;
	/* The lane's GPU and the driver's shared nodes... */
	CHECK_INT(device_opens("nvidia1"), 0);
	CHECK_INT(device_opens("nvidiactl"), 0);
	CHECK_INT(device_opens("nvidia-uvm"), 0);
	CHECK_INT(device_opens("nvidia-caps/nvidia-cap1"), 0);
	/* ...but not the host's other GPUs, before or after it in number. */
	CHECK_INT(device_opens("nvidia0"), -EACCES);
	CHECK_INT(device_opens("nvidia12"), -EACCES);
	/* A link takes no rule of its own; /dev/null keeps its rule. */
	CHECK_INT(device_opens("stderr"), 0);
	CHECK(open("/dev/null", O_RDWR) >= 0);
}

static void
test_own_gpu_node_rule(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);
	const char *const nodes[] = {"nvidia0", "nvidia1", "nvidia12", "nvidiactl", "nvidia-uvm"};
	char path[512];
	size_t index;

	skip_without_landlock();
	/* Stand-ins for /dev's nodes, world-writable so that only Landlock can refuse. */
	device_directory = kagent_test_make_directory();
	CHECK(chmod(device_directory, 0755) == 0);
	for (index = 0; index < sizeof nodes / sizeof *nodes; index++) {
		char *file = kagent_test_write_file(device_directory, nodes[index], "");

		CHECK(chmod(file, 0666) == 0);
		free(file);
	}
	snprintf(path, sizeof path, "%s/nvidia-caps", device_directory);
	CHECK(mkdir(path, 0755) == 0);
	free(kagent_test_write_file(path, "nvidia-cap1", ""));
	snprintf(path, sizeof path, "%s/nvidia-caps/nvidia-cap1", device_directory);
	CHECK(chmod(path, 0666) == 0);
	snprintf(path, sizeof path, "%s/stderr", device_directory);
	CHECK(symlink("/dev/null", path) == 0);
	policy.allow_gpu_devices = 1;
	policy.own_gpu_node = "nvidia1";
	policy.device_directory = device_directory;
	check_exited_cleanly(run_sandboxed(&policy, body_own_gpu_node, 1));
	remove_tree(device_directory);
	remove_tree(scratch);
}

static void
body_identity(const char *scratch)
{
	char path[512];
	struct stat status;
	int fd;

	CHECK_INT(getuid(), KAGENT_SANDBOX_UNPRIVILEGED_ID);
	CHECK_INT(geteuid(), KAGENT_SANDBOX_UNPRIVILEGED_ID);
	CHECK_INT(getgid(), KAGENT_SANDBOX_UNPRIVILEGED_ID);
	CHECK_INT(getgroups(0, NULL), 0);
	CHECK(setuid(0) < 0);
	snprintf(path, sizeof path, "%s/owned", scratch);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0 && fstat(fd, &status) == 0);
	CHECK_INT(status.st_uid, KAGENT_SANDBOX_UNPRIVILEGED_ID);
	close(fd);
	/* Marked dumpable again, so that /proc/self belongs to the process. */
	CHECK(stat("/proc/self/status", &status) == 0);
	CHECK_INT(status.st_uid, KAGENT_SANDBOX_UNPRIVILEGED_ID);
	fd = open("/proc/self/comm", O_WRONLY);
	CHECK(fd >= 0);
	CHECK(write(fd, "candidate", 9) == 9);
	close(fd);
}

static void
test_root_drops_to_nobody(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);

	if (geteuid() != 0)
		kagent_test_skip("not running as root");
	check_exited_cleanly(run_sandboxed(&policy, body_identity, 0));
	remove_tree(scratch);
}

static void
body_dangerous_syscalls(const char *scratch)
{
	char buffer[64];
	struct iovec local = {buffer, sizeof buffer}, remote = {buffer, sizeof buffer};
	char describe_buffer[4096];
	json_t *root, *applied;

	(void)scratch;
	CHECK_INT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
	CHECK_INT(prctl(PR_GET_SECCOMP, 0, 0, 0, 0), 2);
	CHECK(ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(unshare(CLONE_NEWUSER) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(unshare(CLONE_NEWNET) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(setns(0, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_clone3, NULL, 0) < 0);
	CHECK_INT(errno, ENOSYS);
	CHECK(syscall(SYS_io_uring_setup, 8, buffer) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_bpf, 0, NULL, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(process_vm_readv(getppid(), &local, 1, &remote, 1, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_keyctl, 0, 0, 0, 0, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, NULL) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_userfaultfd, 0) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_personality, ADDR_NO_RANDOMIZE) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_personality, 0x80000001UL) < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_personality, 0xffffffffUL) >= 0);
	CHECK(syscall(SYS_personality, 0UL) >= 0);
	/* Ordinary process creation still works, through clone3's fallback to clone. */
	{
		pid_t child = fork();

		CHECK(child >= 0);
		if (child == 0)
			_exit(7);
		CHECK(waitpid(child, &(int){0}, 0) == child);
	}
	/* describe reports what was applied. */
	CHECK(kagent_sandbox_describe(describe_buffer, sizeof describe_buffer) > 0);
	root = json_loads(describe_buffer, 0, NULL);
	CHECK(root != NULL);
	applied = json_object_get(root, "applied");
	CHECK(json_is_object(applied));
	CHECK(json_is_true(json_object_get(applied, "seccomp")));
	CHECK(json_is_true(json_object_get(root, "no_new_privs")));
	json_decref(root);
}

static void
test_dangerous_syscalls_denied(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);

	check_exited_cleanly(run_sandboxed(&policy, body_dangerous_syscalls, 0));
	remove_tree(scratch);
}

#if defined(__x86_64__)
static long
i386_getpid(void)
{
	long result = 20; /* __NR_getpid on i386 */

	__asm__ volatile("int $0x80" : "+a"(result) : : "memory");
	return result;
}

static void
body_foreign_architecture(const char *scratch)
{
	(void)scratch;
	i386_getpid();
	_exit(0); /* not reached: the filter kills the process */
}

static void
test_foreign_architecture_killed(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);
	pid_t child;
	int status;

	/* Only meaningful where the kernel runs 32-bit calls at all. */
	child = fork();
	CHECK(child >= 0);
	if (child == 0)
		_exit(i386_getpid() == getpid() ? 0 : 1);
	CHECK(waitpid(child, &status, 0) == child);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		kagent_test_skip("this kernel does not run i386 system calls");
	status = run_sandboxed(&policy, body_foreign_architecture, 0);
	CHECK(WIFSIGNALED(status));
	CHECK_INT(WTERMSIG(status), SIGSYS);
	remove_tree(scratch);
}
#endif

/* --- limits --- */

static int report_pipe[2];

struct fork_report {
	int forks;
	int error;
};

static void
body_fork_bomb(const char *scratch)
{
	struct fork_report report = {0, 0};

	(void)scratch;
	for (;;) {
		pid_t child = fork();

		if (child == 0) {
			pause();
			_exit(0);
		}
		if (child < 0) {
			report.error = errno;
			break;
		}
		if (++report.forks > 10000)
			break;
	}
	CHECK(write(report_pipe[1], &report, sizeof report) == sizeof report);
	pause(); /* stays, with its children, until the parent kills the group */
}

static void
test_fork_bomb_limited(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);
	struct fork_report report;
	pid_t child;

	policy.max_processes = 16;
	CHECK(pipe(report_pipe) == 0);
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		char error[512];

		close(report_pipe[0]);
		setpgid(0, 0);
		if (kagent_sandbox_enter(&policy, error, sizeof error) != 0) {
			fprintf(stderr, "entering the sandbox failed: %s\n", error);
			_exit(3);
		}
		body_fork_bomb(scratch);
		_exit(0);
	}
	setpgid(child, child);
	close(report_pipe[1]);
	CHECK(read(report_pipe[0], &report, sizeof report) == sizeof report);
	fprintf(stderr, "# fork bomb: %d forks, then errno %d\n", report.forks, report.error);
	CHECK_INT(report.error, EAGAIN);
	/* The limit counts every process of the uid, the bomb's own parent included. */
	CHECK(report.forks >= 1);
	CHECK(report.forks < policy.max_processes);
	/* The whole group goes away with one kill, and nothing is left behind. */
	kill_and_reap(child);
	close(report_pipe[0]);
	remove_tree(scratch);
}

static void
body_busy_loop(const char *scratch)
{
	volatile unsigned long counter = 0;

	(void)scratch;
	for (;;)
		counter++;
}

static void
test_cpu_limit_kills_busy_loop(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);
	struct timespec start, end;
	double seconds;
	int status;

	policy.cpu_seconds = 1;
	clock_gettime(CLOCK_MONOTONIC, &start);
	status = run_sandboxed(&policy, body_busy_loop, 1);
	clock_gettime(CLOCK_MONOTONIC, &end);
	seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
	fprintf(stderr, "# busy loop ended after %.2f s\n", seconds);
	CHECK(WIFSIGNALED(status));
	CHECK(WTERMSIG(status) == SIGXCPU || WTERMSIG(status) == SIGKILL);
	CHECK(seconds > 0.8 && seconds < 30);
	remove_tree(scratch);
}

static void
body_file_size(const char *scratch)
{
	static char block[4096];
	char path[512];
	ssize_t written = 0, result = 0;
	int fd;

	signal(SIGXFSZ, SIG_IGN); /* as Python does: the write then fails with EFBIG */
	snprintf(path, sizeof path, "%s/big", scratch);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	while (written < (1 << 22) && (result = write(fd, block, sizeof block)) > 0)
		written += result;
	CHECK(result < 0);
	CHECK_INT(errno, EFBIG);
	CHECK_INT(written, 1 << 16);
	close(fd);
}

static void
test_file_size_limit(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);

	policy.max_file_bytes = 1 << 16;
	check_exited_cleanly(run_sandboxed(&policy, body_file_size, 0));
	remove_tree(scratch);
}

/* --- the seal of timed calls: no new process, threads still work, on every thread --- */

static void *
seal__thread_fork(void *unused)
{
	pid_t child;

	(void)unused;
	child = fork();
	if (child == 0)
		_exit(0);
	return (void *)(intptr_t)(child < 0 ? errno : 0);
}

static void
body_forbid_processes(const char *scratch)
{
	char error[512];
	pthread_t thread;
	void *fork_errno = NULL;
	char *const argv[] = {"/bin/true", NULL};
	pid_t child;

	(void)scratch;
	/* a thread made before the seal is sealed too (TSYNC) */
	CHECK_INT(kagent_sandbox_forbid_processes(error, sizeof error), 0);
	child = fork();
	CHECK(child < 0);
	CHECK_INT(errno, EPERM);
	CHECK(syscall(SYS_vfork) < 0);
	CHECK(execve("/bin/true", argv, NULL) < 0);
	CHECK_INT(errno, EPERM);
	/* threads are still made (CUDA needs them), and a thread cannot fork either */
	CHECK_INT(pthread_create(&thread, NULL, seal__thread_fork, NULL), 0);
	CHECK_INT(pthread_join(thread, &fork_errno), 0);
	CHECK_INT((int)(intptr_t)fork_errno, EPERM);
}

static void
test_forbid_processes(void)
{
	char *scratch = kagent_test_make_directory();
	struct kagent_sandbox_policy policy = default_policy(scratch);

	check_exited_cleanly(run_sandboxed(&policy, body_forbid_processes, 0));
	remove_tree(scratch);
}

static const struct kagent_test tests[] = {
    {"describe_is_json", test_describe_is_json},
    {"json_rejects_malformed", test_json_rejects_malformed},
    {"json_rejects_unknown_key", test_json_rejects_unknown_key},
    {"json_rejects_bad_values", test_json_rejects_bad_values},
    {"json_rejects_missing_scratch", test_json_rejects_missing_scratch},
    {"network_denied", test_network_denied},
    {"early_socket_cannot_connect", test_early_socket_cannot_connect},
    {"unix_sockets_work", test_unix_sockets_work},
    {"scratch_is_writable", test_scratch_is_writable},
    {"writes_outside_denied", test_writes_outside_denied},
    {"gpu_devices_rule", test_gpu_devices_rule},
    {"own_gpu_node_rule", test_own_gpu_node_rule},
    {"root_drops_to_nobody", test_root_drops_to_nobody},
    {"dangerous_syscalls_denied", test_dangerous_syscalls_denied},
#if defined(__x86_64__)
    {"foreign_architecture_killed", test_foreign_architecture_killed},
#endif
    {"fork_bomb_limited", test_fork_bomb_limited},
    {"cpu_limit_kills_busy_loop", test_cpu_limit_kills_busy_loop},
    {"file_size_limit", test_file_size_limit},
    {"forbid_processes", test_forbid_processes},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
