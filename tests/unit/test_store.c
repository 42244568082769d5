/*
 * Unit tests for the daemon's store (agent/daemon/store.c): URLs, the schema and its
 * migrations, batches all or nothing, the claim (order, fairness, atomic across connections),
 * finishing and cancelling, recovery after a daemon killed mid-session, leases (heartbeat,
 * takeover, release), trace records, GPU names, variants recorded once, baselines, calls
 * run from a libuv loop on the thread pool, and LISTEN/NOTIFY wake-ups.
 *
 * The same tests run on both backends: on SQLite (a file in a temporary folder) by default,
 * on PostgreSQL when KAGENT_TEST_POSTGRES_URL names a server (tests/meson.build's
 * store_postgresql runs them under tests/fixtures/postgres_server.py, which sets it).
 */
#include "kagent/daemon/store.h"

#include "kagent/base/alloc.h"
#include "kagent/base/paths.h"

#include "test.h"

#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fixture {
	char *directory;
	char *path; /* the database file (SQLite) */
	char *url;  /* sqlite:<path>, or the PostgreSQL server's */
	int postgresql;
	struct kagent_store *store;
};

static struct kagent_store *
open_store(const char *url)
{
	struct kagent_store *store = NULL;
	char *cause = NULL;
	int status = kagent_store_open(url, &store, &cause);

	if (status != 0)
		fprintf(stderr, "open: %s\n", cause);
	CHECK_INT(status, 0);
	CHECK(cause == NULL);
	return store;
}

/* Runs SQL on the store through a connection of its own, as another program would. */
static void
raw_exec(const struct fixture *fixture, const char *sql)
{
	char *cause = NULL;

	if (kagent_store_raw_query(fixture->url, sql, NULL, &cause) != 0) {
		fprintf(stderr, "%s: %s\n", sql, cause);
		abort();
	}
}

/* The single integer a query returns. */
static long long
raw_integer(const struct fixture *fixture, const char *sql)
{
	long long value = 0;
	char *cause = NULL;

	if (kagent_store_raw_query(fixture->url, sql, &value, &cause) != 0) {
		fprintf(stderr, "%s: %s\n", sql, cause);
		abort();
	}
	return value;
}

/* A new, empty store: a file in a fresh folder, or the server's database emptied. */
static void
fixture_open(struct fixture *fixture)
{
	const char *server = getenv("KAGENT_TEST_POSTGRES_URL");

	fixture->directory = kagent_test_make_directory();
	fixture->path = kagent_asprintf("%s/state/kagent.db", fixture->directory);
	fixture->postgresql = server != NULL && server[0] != '\0';
	if (fixture->postgresql) {
		fixture->url = kagent_strdup(server);
		raw_exec(fixture, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	} else {
		fixture->url = kagent_asprintf("sqlite:%s", fixture->path);
	}
	fixture->store = open_store(fixture->url);
}

static void
fixture_close(struct fixture *fixture)
{
	char *cause = NULL;

	kagent_store_close(fixture->store);
	CHECK_INT(kagent_paths_remove_tree(fixture->directory, &cause), 0);
	free(fixture->directory);
	free(fixture->path);
	free(fixture->url);
}

/* A batch of count problems level<level>/<n>_p.py; returns its id. */
static char *
make_batch(struct kagent_store *store, size_t count, int level)
{
	struct kagent_store_problem problems[256];
	char *paths[256], *batch_id = NULL, *cause = NULL;
	json_t *settings = json_pack("{s:s, s:f}", "model", "test-model", "target", 1.5);
	size_t index;

	CHECK(count <= 256);
	for (index = 0; index < count; index++) {
		paths[index] = kagent_asprintf("/problems/level%d/%zu_p.py", level, index + 1);
		problems[index] =
		    (struct kagent_store_problem){.path = paths[index], .level = level};
	}
	CHECK_INT(kagent_store_batch_create(store, settings, problems, count, &batch_id, &cause),
		  0);
	for (index = 0; index < count; index++)
		free(paths[index]);
	json_decref(settings);
	CHECK(batch_id != NULL);
	return batch_id;
}

static struct kagent_store_claim *
claim(struct kagent_store *store)
{
	struct kagent_store_claim *claimed = NULL;
	char *cause = NULL;

	CHECK_INT(kagent_store_session_claim(store, "0", &claimed, &cause), 0);
	return claimed;
}

static json_t *
get_batch(struct kagent_store *store, const char *batch_id)
{
	json_t *batch = NULL;
	char *cause = NULL;

	CHECK_INT(kagent_store_batch_get(store, batch_id, &batch, &cause), 0);
	return batch;
}

static const char *
batch_state(json_t *batch)
{
	return json_string_value(json_object_get(batch, "state"));
}

static const char *
session_field(json_t *batch, size_t index, const char *key)
{
	return json_string_value(
	    json_object_get(json_array_get(json_object_get(batch, "sessions"), index), key));
}

static void
test_open_creates_folder_and_schema(void)
{
	struct fixture fixture = {0};
	char *folder;
	struct stat info;

	fixture_open(&fixture);
	CHECK_INT(raw_integer(&fixture, "SELECT MAX(version) FROM schema_version"),
		  kagent_store_schema_version());
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM schema_version"),
		  kagent_store_schema_version());
	CHECK_STRING(kagent_store_backend(fixture.store),
		     fixture.postgresql ? "postgresql" : "sqlite");
	CHECK_STRING(kagent_store_backend_name(fixture.url),
		     fixture.postgresql ? "postgresql" : "sqlite");
	/* Opening again changes nothing. */
	kagent_store_close(open_store(fixture.url));
	if (!fixture.postgresql) {
		folder = kagent_asprintf("%s/state", fixture.directory);
		CHECK_INT(stat(folder, &info), 0);
		CHECK_INT(info.st_mode & 0777, 0700);
		free(folder);
		/* WAL is a property of the file: another connection sees it. */
		CHECK_INT(raw_integer(&fixture, "SELECT journal_mode = 'wal' FROM"
						" pragma_journal_mode"),
			  1);
		/* A bare path is a file too. */
		kagent_store_close(open_store(fixture.path));
	}
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM schema_version"),
		  kagent_store_schema_version());
	fixture_close(&fixture);
}

static void
test_open_refuses_other_schemes(void)
{
	struct kagent_store *store = NULL;
	char *cause = NULL;

	/* A server that is not there: refused, named without its password. */
	CHECK_INT(
	    kagent_store_open("postgresql://kagent:secret@127.0.0.1:1/kagent", &store, &cause),
	    -ECONNREFUSED);
	CHECK(store == NULL);
	CHECK_CONTAINS(cause, "postgresql://kagent:***@127.0.0.1:1/kagent: opening");
	CHECK(strstr(cause, "secret") == NULL);
	free(cause);
	cause = NULL;
	CHECK_STRING(kagent_store_backend_name("postgres://db/kagent"), "postgresql");
	CHECK_STRING(kagent_store_backend_name("./name:x.db"), "sqlite");
	CHECK(kagent_store_backend_name("mysql://db/kagent") == NULL);
	CHECK_INT(kagent_store_open("mysql://db/kagent", &store, &cause), -EPROTONOSUPPORT);
	CHECK_CONTAINS(cause, "unknown scheme \"mysql\"");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_store_open("sqlite:", &store, &cause), -EINVAL);
	CHECK_CONTAINS(cause, "names no file");
	free(cause);
}

static void
test_migrates_an_old_file(void)
{
	struct fixture fixture = {0};
	char *batch_id;
	json_t *batch;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 2, 1);
	kagent_store_close(fixture.store);
	/* The store as version 1 wrote it: without the later migrations' tables, columns,
	 * index and rows (the same SQL in both engines). */
	raw_exec(&fixture, "DROP TABLE trace_records;"
			   "ALTER TABLE sessions DROP COLUMN owner;"
			   "ALTER TABLE sessions DROP COLUMN lease_until;"
			   "ALTER TABLE sessions DROP COLUMN gpu_name;"
			   "ALTER TABLE sessions DROP COLUMN cancel_requested;"
			   "ALTER TABLE variants DROP COLUMN gpu_name;"
			   "DROP INDEX sessions_by_state;"
			   "DELETE FROM schema_version WHERE version > 1");
	CHECK_INT(raw_integer(&fixture, "SELECT MAX(version) FROM schema_version"), 1);
	fixture.store = open_store(fixture.url);
	CHECK_INT(raw_integer(&fixture, "SELECT MAX(version) FROM schema_version"),
		  kagent_store_schema_version());
	CHECK_INT(raw_integer(&fixture, fixture.postgresql
					    ? "SELECT COUNT(*) FROM pg_indexes WHERE indexname ="
					      " 'sessions_by_state'"
					    : "SELECT COUNT(*) FROM sqlite_master WHERE type ="
					      " 'index' AND name = 'sessions_by_state'"),
		  1);
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM trace_records"), 0);
	/* The data survived. */
	batch = get_batch(fixture.store, batch_id);
	CHECK_INT(json_array_size(json_object_get(batch, "sessions")), 2);
	json_decref(batch);
	free(batch_id);
	fixture_close(&fixture);
}

static void
test_refuses_a_newer_file(void)
{
	struct fixture fixture = {0};
	struct kagent_store *store = NULL;
	char *cause = NULL, *sql;

	fixture_open(&fixture);
	sql = kagent_asprintf("INSERT INTO schema_version VALUES (%d, 'from the future', 'now')",
			      kagent_store_schema_version() + 1);
	raw_exec(&fixture, sql);
	CHECK_INT(kagent_store_open(fixture.url, &store, &cause), -EPROTO);
	CHECK(store == NULL);
	CHECK_CONTAINS(cause, "newer");
	free(cause);
	free(sql);
	fixture_close(&fixture);
}

static void
test_batch_create_list_get(void)
{
	struct fixture fixture = {0};
	struct kagent_store_problem problems[] = {
	    {.path = "/kb/level1/19_ReLU.py", .level = 1},
	    {.path = "/kb/level2/3_Conv.py", .name = "conv", .level = 2},
	    {.path = "relative/plain"},
	};
	json_t *settings = json_pack("{s:s}", "model", "m"), *batches = NULL, *batch, *level;
	char *first = NULL, *second, *cause = NULL;

	fixture_open(&fixture);
	CHECK_INT(kagent_store_batch_create(fixture.store, settings, problems, 3, &first, &cause),
		  0);
	CHECK(strncmp(first, "b-", 2) == 0);
	second = make_batch(fixture.store, 1, 1);
	CHECK_INT(kagent_store_batch_list(fixture.store, &batches, &cause), 0);
	CHECK_INT(json_array_size(batches), 2);
	/* Newest first. */
	CHECK_STRING(json_string_value(json_object_get(json_array_get(batches, 0), "id")), second);
	batch = json_array_get(batches, 1);
	CHECK_STRING(json_string_value(json_object_get(batch, "id")), first);
	CHECK_STRING(batch_state(batch), "queued");
	CHECK_INT(json_integer_value(json_object_get(batch, "problems")), 3);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(batch, "counts"), "queued")),
		  3);
	CHECK_STRING(
	    json_string_value(json_object_get(json_object_get(batch, "settings"), "model")), "m");
	json_decref(batches);

	batch = get_batch(fixture.store, first);
	CHECK_INT(json_array_size(json_object_get(batch, "sessions")), 3);
	CHECK_STRING(session_field(batch, 0, "problem"), "19_ReLU");
	CHECK_STRING(session_field(batch, 1, "problem"), "conv");
	CHECK_STRING(session_field(batch, 2, "problem"), "plain");
	CHECK_STRING(session_field(batch, 0, "state"), "queued");
	CHECK_STRING(session_field(batch, 0, "problem_path"), "/kb/level1/19_ReLU.py");
	CHECK(strcmp(session_field(batch, 0, "id"), session_field(batch, 1, "id")) != 0);
	level = json_object_get(json_array_get(json_object_get(batch, "sessions"), 2), "level");
	CHECK(json_is_null(level));
	json_decref(batch);

	CHECK_INT(kagent_store_batch_get(fixture.store, "b-none", &batch, &cause), -ENOENT);
	CHECK(batch == NULL);
	CHECK_CONTAINS(cause, "no batch b-none");
	free(cause);
	json_decref(settings);
	free(first);
	free(second);
	fixture_close(&fixture);
}

static void
test_batch_create_is_all_or_nothing(void)
{
	struct fixture fixture = {0};
	struct kagent_store_problem problems[] = {{.path = "/a.py"}, {.path = NULL}};
	json_t *batches = NULL;
	char *batch_id = NULL, *cause = NULL;

	fixture_open(&fixture);
	CHECK_INT(kagent_store_batch_create(fixture.store, NULL, problems, 2, &batch_id, &cause),
		  -EINVAL);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_store_batch_create(fixture.store, NULL, problems, 0, &batch_id, &cause),
		  -EINVAL);
	free(cause);
	cause = NULL;
	/* A failure on the third session's row, after the batch and two sessions went in. */
	if (fixture.postgresql)
		raw_exec(&fixture,
			 "CREATE FUNCTION fail_third() RETURNS trigger LANGUAGE plpgsql AS $$"
			 " BEGIN IF NEW.position = 3 THEN RAISE EXCEPTION 'disk says no'; END IF;"
			 " RETURN NEW; END $$;"
			 "CREATE TRIGGER fail_third BEFORE INSERT ON sessions"
			 " FOR EACH ROW EXECUTE FUNCTION fail_third()");
	else
		raw_exec(&fixture,
			 "CREATE TRIGGER fail_third BEFORE INSERT ON sessions"
			 " WHEN NEW.position = 3 BEGIN SELECT RAISE(ABORT, 'disk says no');"
			 " END");
	{
		struct kagent_store_problem three[] = {
		    {.path = "/a.py"}, {.path = "/b.py"}, {.path = "/c.py"}};

		CHECK(kagent_store_batch_create(fixture.store, NULL, three, 3, &batch_id, &cause) <
		      0);
		CHECK_CONTAINS(cause, "disk says no");
		free(cause);
	}
	CHECK(batch_id == NULL);
	CHECK_INT(kagent_store_batch_list(fixture.store, &batches, &cause), 0);
	CHECK_INT(json_array_size(batches), 0);
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM sessions"), 0);
	json_decref(batches);
	fixture_close(&fixture);
}

/* Round robin: batches take turns; within one, the problems go in order. */
static void
test_claim_order_is_fair(void)
{
	struct fixture fixture = {0};
	char *first, *second, *cause = NULL;
	const char *expected[][2] = {{NULL, "1"}, {NULL, "1"}, {NULL, "2"},
				     {NULL, "2"}, {NULL, "3"}, {NULL, "4"}};
	struct kagent_store_claim *claimed;
	json_t *batch;
	size_t index;

	fixture_open(&fixture);
	first = make_batch(fixture.store, 4, 1);
	second = make_batch(fixture.store, 2, 2);
	for (index = 0; index < 6; index++)
		expected[index][0] = index < 4 && index % 2 == 1 ? second : first;
	for (index = 0; index < 6; index++) {
		char *suffix;

		claimed = claim(fixture.store);
		CHECK(claimed != NULL);
		CHECK_STRING(claimed->batch_id, expected[index][0]);
		suffix = kagent_asprintf("-000%s", expected[index][1]);
		CHECK(strcmp(claimed->session_id + strlen(claimed->session_id) - 5, suffix) == 0);
		CHECK_INT(claimed->attempt, 1);
		CHECK_INT(claimed->resume, 0);
		CHECK(claimed->trace_path == NULL);
		CHECK_STRING(json_string_value(json_object_get(claimed->settings, "model")),
			     "test-model");
		if (index == 0) {
			batch = get_batch(fixture.store, first);
			CHECK_STRING(batch_state(batch), "running");
			json_decref(batch);
			batch = get_batch(fixture.store, second);
			CHECK_STRING(batch_state(batch), "queued");
			json_decref(batch);
		}
		free(suffix);
		kagent_store_claim_free(claimed);
	}
	CHECK(claim(fixture.store) == NULL);
	batch = get_batch(fixture.store, first);
	CHECK_STRING(session_field(batch, 0, "gpu"), "0");
	CHECK_STRING(session_field(batch, 3, "state"), "running");
	json_decref(batch);
	(void)cause;
	free(first);
	free(second);
	fixture_close(&fixture);
}

static void
test_finish_moves_the_batch(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *one, *two;
	json_t *result = json_pack("{s:s, s:{s:s}}", "stop_reason", "target_reached",
				   "confirmation", "status", "correct"),
	       *batch, *session = NULL;
	char *batch_id, *cause = NULL;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 2, 1);
	one = claim(fixture.store);
	two = claim(fixture.store);
	CHECK_INT(kagent_store_session_finish(fixture.store, one->session_id, KAGENT_STORE_DONE,
					      result, &cause),
		  0);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(batch_state(batch), "running");
	json_decref(batch);
	CHECK_INT(kagent_store_session_finish(fixture.store, two->session_id, KAGENT_STORE_FAILED,
					      NULL, &cause),
		  0);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(batch_state(batch), "done");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(batch, "counts"), "done")), 1);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(batch, "counts"), "failed")),
		  1);
	json_decref(batch);

	CHECK_INT(kagent_store_session_get(fixture.store, one->session_id, &session, &cause), 0);
	CHECK_STRING(json_string_value(json_object_get(session, "state")), "done");
	CHECK(json_equal(json_object_get(session, "result"), result));
	CHECK(json_is_string(json_object_get(session, "finished_at")));
	json_decref(session);

	/* Finishing twice, or a session nobody knows. */
	CHECK_INT(kagent_store_session_finish(fixture.store, one->session_id, KAGENT_STORE_DONE,
					      result, &cause),
		  -EALREADY);
	CHECK_CONTAINS(cause, "is done, not running");
	free(cause);
	cause = NULL;
	CHECK_INT(
	    kagent_store_session_finish(fixture.store, "nobody", KAGENT_STORE_DONE, NULL, &cause),
	    -ENOENT);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_store_session_finish(fixture.store, one->session_id, KAGENT_STORE_RUNNING,
					      NULL, &cause),
		  -EINVAL);
	free(cause);
	kagent_store_claim_free(one);
	kagent_store_claim_free(two);
	json_decref(result);
	free(batch_id);
	fixture_close(&fixture);
}

static void
test_cancel(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *running, *other;
	json_t *running_ids = NULL, *batch;
	char *batch_id, *finished_id, *cause = NULL;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 3, 1);
	running = claim(fixture.store);
	CHECK_INT(kagent_store_batch_cancel(fixture.store, batch_id, &running_ids, &cause), 0);
	CHECK_INT(json_array_size(running_ids), 1);
	CHECK_STRING(json_string_value(json_array_get(running_ids, 0)), running->session_id);
	json_decref(running_ids);
	running_ids = NULL;
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(batch_state(batch), "cancelled");
	CHECK_STRING(session_field(batch, 0, "state"), "running");
	CHECK_STRING(session_field(batch, 1, "state"), "cancelled");
	CHECK_STRING(session_field(batch, 2, "state"), "cancelled");
	json_decref(batch);
	/* Nothing of it is claimed any more; the running one ends when it is interrupted. */
	CHECK(claim(fixture.store) == NULL);
	CHECK_INT(kagent_store_session_finish(fixture.store, running->session_id,
					      KAGENT_STORE_CANCELLED, NULL, &cause),
		  0);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(batch_state(batch), "cancelled");
	json_decref(batch);
	CHECK_INT(kagent_store_batch_cancel(fixture.store, batch_id, &running_ids, &cause),
		  -EALREADY);
	CHECK(running_ids == NULL);
	CHECK_CONTAINS(cause, "already cancelled");
	free(cause);
	cause = NULL;

	/* A finished batch cannot be cancelled; an unknown one is not found. */
	finished_id = make_batch(fixture.store, 1, 1);
	other = claim(fixture.store);
	CHECK_INT(kagent_store_session_finish(fixture.store, other->session_id, KAGENT_STORE_DONE,
					      NULL, &cause),
		  0);
	CHECK_INT(kagent_store_batch_cancel(fixture.store, finished_id, &running_ids, &cause),
		  -EALREADY);
	CHECK_CONTAINS(cause, "already done");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_store_batch_cancel(fixture.store, "b-none", &running_ids, &cause),
		  -ENOENT);
	free(cause);
	kagent_store_claim_free(running);
	kagent_store_claim_free(other);
	free(batch_id);
	free(finished_id);
	fixture_close(&fixture);
}

/* A daemon that claimed two sessions, said where one's trace is, and was killed. */
static void
crashing_daemon(const char *url)
{
	struct kagent_store *store = NULL;
	struct kagent_store_claim *first = NULL, *second = NULL;
	char *cause = NULL;

	if (kagent_store_open(url, &store, &cause) != 0 ||
	    kagent_store_session_claim(store, "0", &first, &cause) != 0 || first == NULL ||
	    kagent_store_session_set_trace(store, first->session_id, "/runs/traces/t1.jsonl",
					   &cause) != 0 ||
	    kagent_store_session_claim(store, "1", &second, &cause) != 0 || second == NULL)
		_exit(1);
	raise(SIGKILL);
	_exit(2);
}

static void
test_recover_after_a_crash(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *first, *second;
	char *batch_id, *first_id, *second_id, *cause = NULL;
	json_t *batch;
	pid_t child;
	int status = 0, recovered = -1;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 3, 1);
	batch = get_batch(fixture.store, batch_id);
	first_id = kagent_strdup(session_field(batch, 0, "id"));
	second_id = kagent_strdup(session_field(batch, 1, "id"));
	json_decref(batch);
	kagent_store_close(fixture.store);

	child = fork();
	CHECK(child >= 0);
	if (child == 0)
		crashing_daemon(fixture.url);
	CHECK_INT(waitpid(child, &status, 0), child);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	/* The next daemon. */
	fixture.store = open_store(fixture.url);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(session_field(batch, 0, "state"), "running");
	json_decref(batch);
	CHECK_INT(kagent_store_recover(fixture.store, &recovered, &cause), 0);
	CHECK_INT(recovered, 2);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(batch_state(batch), "running");
	CHECK_INT(json_array_size(json_object_get(batch, "sessions")), 3);
	CHECK_STRING(session_field(batch, 0, "state"), "queued");
	CHECK(json_is_true(
	    json_object_get(json_array_get(json_object_get(batch, "sessions"), 0), "resume")));
	CHECK_STRING(session_field(batch, 0, "trace_path"), "/runs/traces/t1.jsonl");
	CHECK(json_is_null(
	    json_object_get(json_array_get(json_object_get(batch, "sessions"), 0), "gpu")));
	json_decref(batch);

	/* Claimed again under the same run ids: resumed where a trace was written. */
	first = claim(fixture.store);
	CHECK_STRING(first->session_id, first_id);
	CHECK_INT(first->resume, 1);
	CHECK_INT(first->attempt, 2);
	CHECK_STRING(first->trace_path, "/runs/traces/t1.jsonl");
	second = claim(fixture.store);
	CHECK_STRING(second->session_id, second_id);
	CHECK_INT(second->resume, 0);
	CHECK_INT(second->attempt, 2);
	kagent_store_claim_free(first);
	kagent_store_claim_free(second);
	first = claim(fixture.store); /* the third, never started */
	CHECK_INT(first->attempt, 1);
	kagent_store_claim_free(first);
	CHECK(claim(fixture.store) == NULL);
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM sessions"), 3);

	/* All three run under this daemon now, each once. */
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM sessions WHERE state ="
					" 'running'"),
		  3);
	free(batch_id);
	free(first_id);
	free(second_id);
	fixture_close(&fixture);
}

static void
test_recover_a_cancelled_batch(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *running;
	json_t *running_ids = NULL, *batch;
	char *batch_id, *done_id, *cause = NULL;
	int recovered = -1;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 2, 1);
	running = claim(fixture.store);
	CHECK_INT(kagent_store_batch_cancel(fixture.store, batch_id, &running_ids, &cause), 0);
	json_decref(running_ids);
	/* A batch whose only session finished: done, and recovery keeps it so. */
	done_id = make_batch(fixture.store, 1, 1);
	kagent_store_claim_free(running);
	running = claim(fixture.store);
	CHECK_INT(kagent_store_session_finish(fixture.store, running->session_id, KAGENT_STORE_DONE,
					      NULL, &cause),
		  0);
	kagent_store_close(fixture.store);
	fixture.store = open_store(fixture.url);
	CHECK_INT(kagent_store_recover(fixture.store, &recovered, &cause), 0);
	CHECK_INT(recovered, 0);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(batch_state(batch), "cancelled");
	CHECK_STRING(session_field(batch, 0, "state"), "cancelled");
	json_decref(batch);
	batch = get_batch(fixture.store, done_id);
	CHECK_STRING(batch_state(batch), "done");
	json_decref(batch);
	CHECK(claim(fixture.store) == NULL);
	kagent_store_claim_free(running);
	free(batch_id);
	free(done_id);
	fixture_close(&fixture);
}

static void
test_variants_are_recorded_once(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *claimed;
	json_t *verdict = json_pack("{s:s}", "status", "correct"), *variants = NULL;
	struct kagent_store_variant variant = {
	    .variant_id = "v1",
	    .verdict = verdict,
	    .speedup_vs_eager = 1.5,
	    .speedup_vs_compile = 0.9,
	    .credited = 1,
	};
	char *batch_id, *cause = NULL;
	int inserted = -1, first = -1;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 1, 1);
	claimed = claim(fixture.store);
	variant.session_id = claimed->session_id;
	CHECK_INT(kagent_store_variant_record(fixture.store, &variant, &inserted, &cause), 0);
	CHECK_INT(inserted, 1);
	/* The same variant again, even with other numbers: kept as first recorded. */
	variant.speedup_vs_eager = 9.0;
	CHECK_INT(kagent_store_variant_record(fixture.store, &variant, &inserted, &cause), 0);
	CHECK_INT(inserted, 0);
	variant.variant_id = "v2";
	variant.parent = "v1";
	CHECK_INT(kagent_store_variant_record(fixture.store, &variant, &inserted, &cause), 0);
	CHECK_INT(inserted, 1);
	CHECK_INT(kagent_store_variant_list(fixture.store, claimed->session_id, &variants, &cause),
		  0);
	CHECK_INT(json_array_size(variants), 2);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(variants, 0), "variant")),
		     "v1");
	CHECK(json_real_value(json_object_get(json_array_get(variants, 0), "speedup_vs_eager")) ==
	      1.5);
	CHECK(json_is_null(json_object_get(json_array_get(variants, 0), "parent")));
	CHECK_STRING(json_string_value(json_object_get(json_array_get(variants, 1), "parent")),
		     "v1");
	CHECK(json_equal(json_object_get(json_array_get(variants, 0), "verdict"), verdict));
	json_decref(variants);

	/* Committed once: the second caller learns it was already done. */
	CHECK_INT(kagent_store_variant_commit(fixture.store, claimed->session_id, "v1", "abc123",
					      &first, &cause),
		  0);
	CHECK_INT(first, 1);
	CHECK_INT(kagent_store_variant_commit(fixture.store, claimed->session_id, "v1", "def456",
					      &first, &cause),
		  0);
	CHECK_INT(first, 0);
	CHECK_INT(kagent_store_variant_list(fixture.store, claimed->session_id, &variants, &cause),
		  0);
	CHECK(json_is_true(json_object_get(json_array_get(variants, 0), "committed")));
	CHECK_STRING(json_string_value(json_object_get(json_array_get(variants, 0), "commit")),
		     "abc123");
	CHECK(json_is_false(json_object_get(json_array_get(variants, 1), "committed")));
	json_decref(variants);
	CHECK_INT(kagent_store_variant_commit(fixture.store, claimed->session_id, "v9", "x", &first,
					      &cause),
		  -ENOENT);
	free(cause);
	cause = NULL;
	variant.session_id = "nobody";
	CHECK_INT(kagent_store_variant_record(fixture.store, &variant, &inserted, &cause), -ENOENT);
	CHECK_CONTAINS(cause, "no session nobody");
	free(cause);
	kagent_store_claim_free(claimed);
	json_decref(verdict);
	free(batch_id);
	fixture_close(&fixture);
}

static void
test_baselines(void)
{
	struct fixture fixture = {0};
	json_t *timings = json_pack("{s:{s:f}, s:n}", "eager", "median_ms", 3.07, "compile"),
	       *read = NULL;
	char *cause = NULL;

	fixture_open(&fixture);
	CHECK_INT(kagent_store_baseline_get(fixture.store, "abc", "H100", &read, &cause), -ENOENT);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_store_baseline_put(fixture.store, "abc", "H100", timings, &cause), 0);
	CHECK_INT(kagent_store_baseline_get(fixture.store, "abc", "H100", &read, &cause), 0);
	CHECK(json_equal(read, timings));
	json_decref(read);
	CHECK_INT(kagent_store_baseline_get(fixture.store, "abc", "H200", &read, &cause), -ENOENT);
	free(cause);
	cause = NULL;
	json_object_set_new(timings, "compile", json_pack("{s:f}", "median_ms", 2.5));
	CHECK_INT(kagent_store_baseline_put(fixture.store, "abc", "H100", timings, &cause), 0);
	CHECK_INT(kagent_store_baseline_get(fixture.store, "abc", "H100", &read, &cause), 0);
	CHECK(json_equal(read, timings));
	json_decref(read);
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM baselines"), 1);
	json_decref(timings);
	fixture_close(&fixture);
}

/* ---- two connections claiming at once ---- */

#define RACE_SESSIONS 120
#define RACE_THREADS 4

static pthread_barrier_t race_barrier;

struct racer {
	const char *url;
	char *claimed[RACE_SESSIONS];
	size_t count;
	int failures;
};

static void *
race(void *data)
{
	struct racer *racer = data;
	struct kagent_store *store = NULL;
	char *cause = NULL;

	/* A connection of its own, as another daemon on the same file would have. */
	if (kagent_store_open(racer->url, &store, &cause) != 0) {
		racer->failures++;
		free(cause);
		pthread_barrier_wait(&race_barrier);
		return NULL;
	}
	for (;;) {
		struct kagent_store_claim *claimed = NULL;

		if (kagent_store_session_claim(store, "0", &claimed, &cause) != 0) {
			fprintf(stderr, "claim: %s\n", cause);
			free(cause);
			cause = NULL;
			racer->failures++;
			break;
		}
		if (claimed == NULL)
			break;
		if (racer->count < RACE_SESSIONS)
			racer->claimed[racer->count++] = kagent_strdup(claimed->session_id);
		kagent_store_claim_free(claimed);
	}
	/* Closing gives a store's leases up (its sessions could be taken over): every racer
	 * keeps its connection until all have stopped claiming. */
	pthread_barrier_wait(&race_barrier);
	kagent_store_close(store);
	return NULL;
}

static int
compare_strings(const void *left, const void *right)
{
	return strcmp(*(char *const *)left, *(char *const *)right);
}

static void
test_claim_is_atomic_across_connections(void)
{
	struct fixture fixture = {0};
	struct racer racers[RACE_THREADS] = {{0}};
	pthread_t threads[RACE_THREADS];
	char *all[RACE_SESSIONS], *first, *second;
	size_t index, total = 0, item;

	fixture_open(&fixture);
	first = make_batch(fixture.store, RACE_SESSIONS / 2, 1);
	second = make_batch(fixture.store, RACE_SESSIONS / 2, 2);
	CHECK_INT(pthread_barrier_init(&race_barrier, NULL, RACE_THREADS), 0);
	for (index = 0; index < RACE_THREADS; index++) {
		racers[index].url = fixture.url;
		CHECK_INT(pthread_create(&threads[index], NULL, race, &racers[index]), 0);
	}
	for (index = 0; index < RACE_THREADS; index++) {
		CHECK_INT(pthread_join(threads[index], NULL), 0);
		CHECK_INT(racers[index].failures, 0);
		for (item = 0; item < racers[index].count; item++) {
			CHECK(total < RACE_SESSIONS);
			all[total++] = racers[index].claimed[item];
		}
	}
	pthread_barrier_destroy(&race_barrier);
	/* Every session claimed, none twice. */
	CHECK_INT(total, RACE_SESSIONS);
	qsort(all, total, sizeof all[0], compare_strings);
	for (index = 1; index < total; index++)
		CHECK(strcmp(all[index - 1], all[index]) != 0);
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM sessions WHERE state ="
					" 'running' AND attempts = 1"),
		  RACE_SESSIONS);
	for (index = 0; index < total; index++)
		free(all[index]);
	free(first);
	free(second);
	fixture_close(&fixture);
}

/* ---- the last sessions of a batch ending at once ---- */

#define ENDING_ROUNDS 20
#define ENDING_THREADS 4

static pthread_barrier_t ending_barrier;

struct ender {
	struct kagent_store *store;
	char *session_id;
	int status;
};

static void *
end_session(void *data)
{
	struct ender *ender = data;
	char *cause = NULL;

	pthread_barrier_wait(&ending_barrier);
	ender->status = kagent_store_session_finish(ender->store, ender->session_id,
						    KAGENT_STORE_DONE, NULL, &cause);
	if (ender->status != 0)
		fprintf(stderr, "finish: %s\n", cause);
	free(cause);
	return NULL;
}

/* Daemons on other connections ending a batch's last sessions at the same moment: the batch
 * is done once they have all ended. (Each end refreshes the batch's state; on PostgreSQL two
 * at once each saw the other's session still running, and the batch stayed 'running' for
 * good: bench/daemon_cluster_bench.py with 50 daemons.) */
static void
test_last_sessions_ending_at_once_end_the_batch(void)
{
	struct fixture fixture = {0};
	struct ender enders[ENDING_THREADS] = {{0}};
	pthread_t threads[ENDING_THREADS];
	size_t index, round;

	fixture_open(&fixture);
	for (index = 0; index < ENDING_THREADS; index++)
		enders[index].store = open_store(fixture.url);
	for (round = 0; round < ENDING_ROUNDS; round++) {
		char *batch_id = make_batch(fixture.store, ENDING_THREADS, 1);
		json_t *batch;

		for (index = 0; index < ENDING_THREADS; index++) {
			struct kagent_store_claim *claimed = claim(enders[index].store);

			CHECK(claimed != NULL);
			enders[index].session_id = kagent_strdup(claimed->session_id);
			kagent_store_claim_free(claimed);
		}
		CHECK_INT(pthread_barrier_init(&ending_barrier, NULL, ENDING_THREADS), 0);
		for (index = 0; index < ENDING_THREADS; index++)
			CHECK_INT(
			    pthread_create(&threads[index], NULL, end_session, &enders[index]), 0);
		for (index = 0; index < ENDING_THREADS; index++) {
			CHECK_INT(pthread_join(threads[index], NULL), 0);
			CHECK_INT(enders[index].status, 0);
			free(enders[index].session_id);
		}
		pthread_barrier_destroy(&ending_barrier);
		batch = get_batch(fixture.store, batch_id);
		CHECK_STRING(batch_state(batch), "done");
		json_decref(batch);
		free(batch_id);
	}
	for (index = 0; index < ENDING_THREADS; index++)
		kagent_store_close(enders[index].store);
	fixture_close(&fixture);
}

/* ---- from a loop ---- */

struct loop_run {
	struct kagent_store *store;
	uv_loop_t *loop;
	pthread_t loop_thread;
	char *batch_id;
	int created, claimed, failed, other_thread;
	char *failure;
};

static int
work_create(struct kagent_store *store, void *data, char **cause)
{
	struct loop_run *run = data;
	struct kagent_store_problem problem = {.path = "/p.py", .level = 1};

	run->other_thread = !pthread_equal(pthread_self(), run->loop_thread);
	return kagent_store_batch_create(store, NULL, &problem, 1, &run->batch_id, cause);
}

static int
work_claim(struct kagent_store *store, void *data, char **cause)
{
	struct kagent_store_claim *claimed = NULL;
	int status = kagent_store_session_claim(store, "0", &claimed, cause);

	(void)data;
	if (status == 0 && claimed == NULL) {
		*cause = kagent_strdup("nothing to claim");
		status = -ENOENT;
	}
	kagent_store_claim_free(claimed);
	return status;
}

static int
work_fail(struct kagent_store *store, void *data, char **cause)
{
	json_t *batch = NULL;

	(void)data;
	return kagent_store_batch_get(store, "b-none", &batch, cause);
}

static void
after_fail(int status, const char *cause, void *data)
{
	struct loop_run *run = data;

	CHECK(pthread_equal(pthread_self(), run->loop_thread));
	CHECK_INT(status, -ENOENT);
	run->failed = 1;
	run->failure = kagent_strdup(cause);
}

static void
after_claim(int status, const char *cause, void *data)
{
	struct loop_run *run = data;

	CHECK(pthread_equal(pthread_self(), run->loop_thread));
	if (status != 0)
		fprintf(stderr, "claim: %s\n", cause);
	CHECK_INT(status, 0);
	run->claimed = 1;
}

/* After the batch exists, the claim and a failing call, chained from the loop. */
static void
after_create(int status, const char *cause, void *data)
{
	struct loop_run *run = data;

	CHECK(pthread_equal(pthread_self(), run->loop_thread));
	if (status != 0)
		fprintf(stderr, "create: %s\n", cause);
	CHECK_INT(status, 0);
	CHECK(cause == NULL);
	run->created = 1;
	CHECK_INT(kagent_store_submit(run->store, run->loop, work_claim, after_claim, run), 0);
	CHECK_INT(kagent_store_submit(run->store, run->loop, work_fail, after_fail, run), 0);
}

static void
test_submit_from_a_loop(void)
{
	struct fixture fixture = {0};
	struct loop_run run = {0};
	uv_loop_t loop;
	json_t *batch;

	fixture_open(&fixture);
	CHECK_INT(uv_loop_init(&loop), 0);
	run.store = fixture.store;
	run.loop = &loop;
	run.loop_thread = pthread_self();
	CHECK_INT(kagent_store_submit(fixture.store, &loop, work_create, after_create, &run), 0);
	CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK(run.created && run.claimed && run.failed);
	CHECK(run.other_thread);
	CHECK_CONTAINS(run.failure, "no batch b-none");
	batch = get_batch(fixture.store, run.batch_id);
	CHECK_STRING(batch_state(batch), "running");
	json_decref(batch);
	/* No handle or request left behind. */
	CHECK_INT(uv_loop_close(&loop), 0);
	free(run.batch_id);
	free(run.failure);
	fixture_close(&fixture);
}

/* One session: a queued one is cancelled at once, a running one is left to its owner, a
 * finished one answers -EALREADY; the batch is done once the last of them has ended. */
static void
test_session_cancel(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *running;
	json_t *batch;
	char *batch_id, *queued_id, *cause = NULL;
	int is_running = -1;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 2, 1);
	running = claim(fixture.store);
	batch = get_batch(fixture.store, batch_id);
	queued_id = kagent_strdup(session_field(batch, 1, "id"));
	json_decref(batch);
	CHECK_INT(kagent_store_session_cancel(fixture.store, queued_id, &is_running, &cause), 0);
	CHECK_INT(is_running, 0);
	CHECK_INT(
	    kagent_store_session_cancel(fixture.store, running->session_id, &is_running, &cause),
	    0);
	CHECK_INT(is_running, 1);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(session_field(batch, 0, "state"), "running");
	CHECK_STRING(session_field(batch, 1, "state"), "cancelled");
	CHECK_STRING(batch_state(batch), "running");
	json_decref(batch);
	CHECK(claim(fixture.store) == NULL);
	CHECK_INT(kagent_store_session_finish(fixture.store, running->session_id,
					      KAGENT_STORE_CANCELLED, NULL, &cause),
		  0);
	batch = get_batch(fixture.store, batch_id);
	CHECK_STRING(batch_state(batch), "done");
	json_decref(batch);
	CHECK_INT(kagent_store_session_cancel(fixture.store, queued_id, &is_running, &cause),
		  -EALREADY);
	CHECK_CONTAINS(cause, "already cancelled");
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_store_session_cancel(fixture.store, "nobody", &is_running, &cause),
		  -ENOENT);
	free(cause);
	kagent_store_claim_free(running);
	free(queued_id);
	free(batch_id);
	fixture_close(&fixture);
}

/* ---- leases ---- */

static void
sleep_seconds(double seconds)
{
	struct timespec pause = {.tv_sec = (time_t)seconds,
				 .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};

	nanosleep(&pause, NULL);
}

/*
 * Two daemons: the first claims a session and goes quiet (no heartbeat); within its lease
 * nobody else gets it, after it the second takes it over, resumed; the first can no longer
 * finish it, the second can; nothing ran twice at once and the row is the same.
 */
static void
test_takeover_after_the_lease(void)
{
	struct fixture fixture = {0};
	struct kagent_store *other;
	struct kagent_store_claim *first, *taken;
	json_t *session = NULL;
	char *batch_id, *cause = NULL;

	fixture_open(&fixture);
	other = open_store(fixture.url);
	CHECK(strcmp(kagent_store_identity(fixture.store), kagent_store_identity(other)) != 0);
	CHECK_INT(kagent_store_set_lease(fixture.store, 0.5, &cause), -EINVAL);
	free(cause);
	cause = NULL;
	CHECK_INT(kagent_store_set_lease(fixture.store, 1, &cause), 0);
	CHECK(kagent_store_lease(fixture.store) == 1.0);
	kagent_store_set_gpu_name(fixture.store, "NVIDIA H100 80GB HBM3");
	kagent_store_set_gpu_name(other, "NVIDIA H200");
	batch_id = make_batch(fixture.store, 1, 1);
	first = claim(fixture.store);
	CHECK(first != NULL);
	CHECK_INT(kagent_store_session_set_trace(fixture.store, first->session_id,
						 "/runs/traces/t.jsonl", &cause),
		  0);
	CHECK_INT(kagent_store_session_get(other, first->session_id, &session, &cause), 0);
	CHECK_STRING(json_string_value(json_object_get(session, "owner")),
		     kagent_store_identity(fixture.store));
	CHECK_STRING(json_string_value(json_object_get(session, "gpu_name")),
		     "NVIDIA H100 80GB HBM3");
	json_decref(session);
	/* Within the lease: nothing for the other daemon, and its recovery leaves it alone. */
	CHECK(claim(other) == NULL);
	{
		int recovered = -1;

		CHECK_INT(kagent_store_recover(other, &recovered, &cause), 0);
		CHECK_INT(recovered, 0);
	}
	sleep_seconds(1.3);
	taken = claim(other);
	CHECK(taken != NULL);
	CHECK_STRING(taken->session_id, first->session_id);
	CHECK_INT(taken->attempt, 2);
	CHECK_INT(taken->resume, 1);
	CHECK_STRING(taken->trace_path, "/runs/traces/t.jsonl");
	CHECK_INT(kagent_store_session_get(other, first->session_id, &session, &cause), 0);
	CHECK_STRING(json_string_value(json_object_get(session, "owner")),
		     kagent_store_identity(other));
	CHECK_STRING(json_string_value(json_object_get(session, "gpu_name")), "NVIDIA H200");
	json_decref(session);
	/* The first daemon comes back: its heartbeat no longer holds the session (it stops it),
	 * and its end is no longer its to write. */
	{
		json_t *held = NULL;

		CHECK_INT(kagent_store_heartbeat(fixture.store, &held, NULL, &cause), 0);
		CHECK_INT(json_array_size(held), 0);
		json_decref(held);
	}
	CHECK_INT(kagent_store_session_finish(fixture.store, first->session_id, KAGENT_STORE_DONE,
					      NULL, &cause),
		  -ESTALE);
	CHECK_CONTAINS(cause, "taken over");
	free(cause);
	cause = NULL;
	CHECK_INT(
	    kagent_store_session_finish(other, taken->session_id, KAGENT_STORE_DONE, NULL, &cause),
	    0);
	CHECK_INT(raw_integer(&fixture, "SELECT COUNT(*) FROM sessions WHERE state = 'done'"), 1);
	CHECK(claim(other) == NULL);
	kagent_store_claim_free(first);
	kagent_store_claim_free(taken);
	kagent_store_close(other);
	free(batch_id);
	fixture_close(&fixture);
}

/* A heartbeat keeps the lease; closing the store gives it up at once. */
static void
test_heartbeat_keeps_the_lease(void)
{
	struct fixture fixture = {0};
	struct kagent_store *other;
	struct kagent_store_claim *first, *taken;
	char *batch_id, *cause = NULL;
	json_t *held = NULL;

	fixture_open(&fixture);
	other = open_store(fixture.url);
	CHECK_INT(kagent_store_set_lease(fixture.store, 1, &cause), 0);
	batch_id = make_batch(fixture.store, 1, 1);
	first = claim(fixture.store);
	CHECK(first != NULL);
	for (int beat = 0; beat < 5; beat++) {
		sleep_seconds(0.4);
		CHECK_INT(kagent_store_heartbeat(fixture.store, &held, NULL, &cause), 0);
		CHECK_INT(json_array_size(held), 1);
		CHECK_STRING(json_string_value(json_array_get(held, 0)), first->session_id);
		json_decref(held);
		CHECK(claim(other) == NULL);
	}
	/* Another daemon's heartbeat renews only its own (none). */
	CHECK_INT(kagent_store_heartbeat(other, &held, NULL, &cause), 0);
	CHECK_INT(json_array_size(held), 0);
	json_decref(held);
	kagent_store_close(fixture.store);
	fixture.store = NULL;
	taken = claim(other);
	CHECK(taken != NULL);
	CHECK_STRING(taken->session_id, first->session_id);
	CHECK_INT(taken->attempt, 2);
	CHECK_INT(taken->resume, 0); /* it never said where its trace was */
	kagent_store_claim_free(first);
	kagent_store_claim_free(taken);
	fixture.store = other;
	free(batch_id);
	fixture_close(&fixture);
}

/* A cancelled batch's session whose daemon is gone ends cancelled at the next heartbeat. */
static void
test_heartbeat_ends_orphans_of_cancelled_batches(void)
{
	struct fixture fixture = {0};
	struct kagent_store *other;
	struct kagent_store_claim *running;
	json_t *running_ids = NULL, *batch;
	char *batch_id, *cause = NULL;

	fixture_open(&fixture);
	other = open_store(fixture.url);
	batch_id = make_batch(fixture.store, 2, 1);
	running = claim(fixture.store);
	CHECK_INT(kagent_store_batch_cancel(other, batch_id, &running_ids, &cause), 0);
	CHECK_INT(json_array_size(running_ids), 1);
	json_decref(running_ids);
	CHECK_INT(kagent_store_heartbeat(other, NULL, NULL, &cause), 0);
	batch = get_batch(other, batch_id);
	CHECK_STRING(session_field(batch, 0, "state"), "running"); /* its lease still holds */
	json_decref(batch);
	kagent_store_close(fixture.store); /* the daemon goes: its lease ends */
	fixture.store = other;
	CHECK(claim(other) == NULL); /* never taken over */
	CHECK_INT(kagent_store_heartbeat(other, NULL, NULL, &cause), 0);
	batch = get_batch(other, batch_id);
	CHECK_STRING(session_field(batch, 0, "state"), "cancelled");
	CHECK_STRING(batch_state(batch), "cancelled");
	json_decref(batch);
	kagent_store_claim_free(running);
	free(batch_id);
	fixture_close(&fixture);
}

/* A cancel asked through one daemon reaches the daemon running the session at its
 * heartbeat: the session's own cancel, and its batch's. */
static void
test_heartbeat_carries_cancels(void)
{
	struct fixture fixture = {0};
	struct kagent_store *other;
	struct kagent_store_claim *first, *second;
	json_t *cancelled = NULL, *running_ids = NULL;
	char *batch_id, *cause = NULL;
	int is_running = 0;

	fixture_open(&fixture);
	other = open_store(fixture.url);
	batch_id = make_batch(fixture.store, 3, 1);
	first = claim(fixture.store);
	second = claim(fixture.store);
	CHECK_INT(kagent_store_heartbeat(fixture.store, NULL, &cancelled, &cause), 0);
	CHECK_INT(json_array_size(cancelled), 0);
	json_decref(cancelled);
	CHECK_INT(kagent_store_session_cancel(other, first->session_id, &is_running, &cause), 0);
	CHECK_INT(is_running, 1);
	/* Only the daemon that runs it hears of it. */
	CHECK_INT(kagent_store_heartbeat(other, NULL, &cancelled, &cause), 0);
	CHECK_INT(json_array_size(cancelled), 0);
	json_decref(cancelled);
	CHECK_INT(kagent_store_heartbeat(fixture.store, NULL, &cancelled, &cause), 0);
	CHECK_INT(json_array_size(cancelled), 1);
	CHECK_STRING(json_string_value(json_array_get(cancelled, 0)), first->session_id);
	json_decref(cancelled);
	CHECK_INT(kagent_store_batch_cancel(other, batch_id, &running_ids, &cause), 0);
	CHECK_INT(json_array_size(running_ids), 2);
	json_decref(running_ids);
	CHECK_INT(kagent_store_heartbeat(fixture.store, NULL, &cancelled, &cause), 0);
	CHECK_INT(json_array_size(cancelled), 2);
	json_decref(cancelled);
	kagent_store_claim_free(first);
	kagent_store_claim_free(second);
	kagent_store_close(other);
	free(batch_id);
	fixture_close(&fixture);
}

static void
test_trace_records(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *claimed;
	json_t *records = NULL, *batch_records = json_array(), *record;
	char *batch_id, *cause = NULL;
	int appended = -1;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 1, 1);
	claimed = claim(fixture.store);
	CHECK_INT(kagent_store_trace_read(fixture.store, claimed->session_id, &records, &cause), 0);
	CHECK_INT(json_array_size(records), 0);
	json_decref(records);
	/* Out of order, as two syncs of one file may arrive. */
	for (int seq = 3; seq >= 1; seq--)
		json_array_append_new(batch_records,
				      json_pack("{s:s, s:i, s:s}", "type", "turn_end", "seq", seq,
						"text", "a 'quoted' \"line\"\n$1"));
	CHECK_INT(kagent_store_trace_append(fixture.store, claimed->session_id, batch_records,
					    &appended, &cause),
		  0);
	CHECK_INT(appended, 3);
	/* The same records again (and one new): only the new one goes in. */
	json_array_append_new(batch_records, json_pack("{s:s, s:i}", "type", "stop", "seq", 4));
	CHECK_INT(kagent_store_trace_append(fixture.store, claimed->session_id, batch_records,
					    &appended, &cause),
		  0);
	CHECK_INT(appended, 1);
	CHECK_INT(kagent_store_trace_read(fixture.store, claimed->session_id, &records, &cause), 0);
	CHECK_INT(json_array_size(records), 4);
	for (int seq = 1; seq <= 3; seq++) {
		record = json_array_get(records, (size_t)seq - 1);
		CHECK_INT(json_integer_value(json_object_get(record, "seq")), seq);
		CHECK_STRING(json_string_value(json_object_get(record, "text")),
			     "a 'quoted' \"line\"\n$1");
	}
	json_decref(records);
	CHECK_INT(
	    kagent_store_trace_append(fixture.store, "nobody", batch_records, &appended, &cause),
	    -ENOENT);
	CHECK_CONTAINS(cause, "no session nobody");
	free(cause);
	cause = NULL;
	json_array_append_new(batch_records, json_pack("{s:s}", "type", "no seq"));
	CHECK_INT(kagent_store_trace_append(fixture.store, claimed->session_id, batch_records,
					    &appended, &cause),
		  -EINVAL);
	CHECK_CONTAINS(cause, "no seq");
	free(cause);
	json_decref(batch_records);
	kagent_store_claim_free(claimed);
	free(batch_id);
	fixture_close(&fixture);
}

/* Lines of two sessions in one call, stored as their text; all or nothing. */
static void
test_trace_lines_of_several_sessions(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *first, *second;
	json_t *records = NULL;
	char *batch_id, *cause = NULL;
	int appended = -1;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 2, 1);
	first = claim(fixture.store);
	second = claim(fixture.store);
	{
		const struct kagent_store_trace_line lines[] = {
		    {first->session_id, 1, "{\"type\":\"start\",\"seq\":1,\"x\":\"a\"}"},
		    {second->session_id, 1, "{\"type\":\"start\",\"seq\":1,\"x\":\"b\"}"},
		    {first->session_id, 2, "{\"type\":\"turn_end\",\"seq\":2,\"n\":1.5}"},
		};

		CHECK_INT(
		    kagent_store_trace_append_lines(fixture.store, lines, 3, &appended, &cause), 0);
		CHECK_INT(appended, 3);
		/* Again: stored once. */
		CHECK_INT(
		    kagent_store_trace_append_lines(fixture.store, lines, 3, &appended, &cause), 0);
		CHECK_INT(appended, 0);
	}
	CHECK_INT(kagent_store_trace_read(fixture.store, first->session_id, &records, &cause), 0);
	CHECK_INT(json_array_size(records), 2);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(records, 0), "x")), "a");
	CHECK(json_real_value(json_object_get(json_array_get(records, 1), "n")) == 1.5);
	json_decref(records);
	CHECK_INT(kagent_store_trace_read(fixture.store, second->session_id, &records, &cause), 0);
	CHECK_INT(json_array_size(records), 1);
	CHECK_STRING(json_string_value(json_object_get(json_array_get(records, 0), "x")), "b");
	json_decref(records);
	{
		/* An unknown session among them: nothing of the call is stored. */
		const struct kagent_store_trace_line lines[] = {
		    {second->session_id, 2, "{\"type\":\"stop\",\"seq\":2}"},
		    {"nobody", 1, "{\"type\":\"start\",\"seq\":1}"},
		};

		CHECK_INT(
		    kagent_store_trace_append_lines(fixture.store, lines, 2, &appended, &cause),
		    -ENOENT);
		CHECK_CONTAINS(cause, "no session nobody");
		free(cause);
		cause = NULL;
		CHECK_INT(
		    kagent_store_trace_read(fixture.store, second->session_id, &records, &cause),
		    0);
		CHECK_INT(json_array_size(records), 1);
		json_decref(records);
	}
	{
		const struct kagent_store_trace_line lines[] = {{first->session_id, 0, "{}"}};

		CHECK_INT(
		    kagent_store_trace_append_lines(fixture.store, lines, 1, &appended, &cause),
		    -EINVAL);
		CHECK_CONTAINS(cause, "seq");
		free(cause);
	}
	kagent_store_claim_free(first);
	kagent_store_claim_free(second);
	free(batch_id);
	fixture_close(&fixture);
}

/* Another program's connection holding the lock that trace_records' writers wait for: SQLite's
 * write lock on the file, or a PostgreSQL table lock that lets readers through. */
struct write_lock {
	sqlite3 *sqlite;
	PGconn *postgresql;
};

static void
write_lock_take(const struct fixture *fixture, struct write_lock *lock)
{
	if (fixture->postgresql) {
		PGresult *result;

		lock->postgresql = PQconnectdb(fixture->url);
		CHECK(PQstatus(lock->postgresql) == CONNECTION_OK);
		result =
		    PQexec(lock->postgresql, "BEGIN; LOCK TABLE trace_records IN EXCLUSIVE MODE");
		CHECK(PQresultStatus(result) == PGRES_COMMAND_OK);
		PQclear(result);
		return;
	}
	CHECK_INT(sqlite3_open(fixture->path, &lock->sqlite), SQLITE_OK);
	CHECK_INT(sqlite3_exec(lock->sqlite, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
}

static void
write_lock_release(struct write_lock *lock)
{
	if (lock->postgresql != NULL) {
		PQclear(PQexec(lock->postgresql, "COMMIT"));
		PQfinish(lock->postgresql);
		return;
	}
	CHECK_INT(sqlite3_exec(lock->sqlite, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(lock->sqlite);
}

struct blocked_write {
	struct kagent_store *store;
	const char *session_id;
	int status;
};

static void *
blocked_write_run(void *data)
{
	struct blocked_write *write = data;
	const struct kagent_store_trace_line line = {write->session_id, 1,
						     "{\"type\":\"start\",\"seq\":1}"};
	char *cause = NULL;

	write->status = kagent_store_trace_append_lines(write->store, &line, 1, NULL, &cause);
	free(cause);
	return NULL;
}

static double
seconds_now(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* A write of this store waiting for the database's lock (held here by another program) keeps
 * the store's writer busy; a read of the same store still answers at once. */
static void
test_reads_do_not_wait_for_writes(void)
{
	struct fixture fixture = {0};
	struct kagent_store_claim *claimed;
	struct write_lock lock = {0};
	struct blocked_write write = {0};
	pthread_t thread;
	json_t *batch = NULL, *records = NULL;
	char *batch_id, *cause = NULL;
	double started, read_seconds;

	fixture_open(&fixture);
	batch_id = make_batch(fixture.store, 2, 1);
	claimed = claim(fixture.store);
	write_lock_take(&fixture, &lock);
	write.store = fixture.store;
	write.session_id = claimed->session_id;
	CHECK_INT(pthread_create(&thread, NULL, blocked_write_run, &write), 0);
	usleep(300 * 1000); /* the write is waiting for the lock now */
	started = seconds_now();
	CHECK_INT(kagent_store_batch_get(fixture.store, batch_id, &batch, &cause), 0);
	read_seconds = seconds_now() - started;
	CHECK_INT(json_array_size(json_object_get(batch, "sessions")), 2);
	json_decref(batch);
	if (read_seconds > 1.0)
		fprintf(stderr, "the read took %.2f s behind the write\n", read_seconds);
	CHECK(read_seconds < 1.0);
	write_lock_release(&lock);
	CHECK_INT(pthread_join(thread, NULL), 0);
	CHECK_INT(write.status, 0);
	CHECK_INT(kagent_store_trace_read(fixture.store, claimed->session_id, &records, &cause), 0);
	CHECK_INT(json_array_size(records), 1);
	json_decref(records);
	kagent_store_claim_free(claimed);
	free(batch_id);
	fixture_close(&fixture);
}

/* ---- LISTEN/NOTIFY ---- */

struct listening {
	uv_loop_t *loop;
	uv_timer_t timer;
	int woken;
};

static void
listening_woken(void *data)
{
	struct listening *listening = data;

	listening->woken++;
	uv_stop(listening->loop);
}

static void
listening_timeout(uv_timer_t *timer)
{
	uv_stop(timer->loop);
}

/* A batch queued through another connection wakes a listening daemon's loop (PostgreSQL);
 * on SQLite listening is accepted and never wakes. */
static void
test_listen_wakes_on_new_work(void)
{
	struct fixture fixture = {0};
	struct listening listening = {0};
	struct kagent_store *other;
	uv_loop_t loop;
	char *batch_id, *cause = NULL;

	fixture_open(&fixture);
	other = open_store(fixture.url);
	CHECK_INT(uv_loop_init(&loop), 0);
	listening.loop = &loop;
	CHECK_INT(kagent_store_listen(fixture.store, &loop, listening_woken, &listening, &cause),
		  0);
	uv_timer_init(&loop, &listening.timer);
	uv_timer_start(&listening.timer, listening_timeout, 5000, 0);
	batch_id = make_batch(other, 1, 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK_INT(listening.woken, fixture.postgresql ? 1 : 0);
	kagent_store_listen_stop(fixture.store);
	uv_close((uv_handle_t *)&listening.timer, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK_INT(uv_loop_close(&loop), 0);
	kagent_store_close(other);
	free(batch_id);
	fixture_close(&fixture);
}

static const struct kagent_test tests[] = {
    {"open_creates_folder_and_schema", test_open_creates_folder_and_schema},
    {"open_refuses_other_schemes", test_open_refuses_other_schemes},
    {"migrates_an_old_file", test_migrates_an_old_file},
    {"refuses_a_newer_file", test_refuses_a_newer_file},
    {"batch_create_list_get", test_batch_create_list_get},
    {"batch_create_is_all_or_nothing", test_batch_create_is_all_or_nothing},
    {"claim_order_is_fair", test_claim_order_is_fair},
    {"finish_moves_the_batch", test_finish_moves_the_batch},
    {"cancel", test_cancel},
    {"session_cancel", test_session_cancel},
    {"recover_after_a_crash", test_recover_after_a_crash},
    {"recover_a_cancelled_batch", test_recover_a_cancelled_batch},
    {"variants_are_recorded_once", test_variants_are_recorded_once},
    {"baselines", test_baselines},
    {"claim_is_atomic_across_connections", test_claim_is_atomic_across_connections},
    {"last_sessions_ending_at_once_end_the_batch", test_last_sessions_ending_at_once_end_the_batch},
    {"submit_from_a_loop", test_submit_from_a_loop},
    {"takeover_after_the_lease", test_takeover_after_the_lease},
    {"heartbeat_keeps_the_lease", test_heartbeat_keeps_the_lease},
    {"heartbeat_ends_orphans_of_cancelled_batches",
     test_heartbeat_ends_orphans_of_cancelled_batches},
    {"heartbeat_carries_cancels", test_heartbeat_carries_cancels},
    {"trace_records", test_trace_records},
    {"trace_lines_of_several_sessions", test_trace_lines_of_several_sessions},
    {"reads_do_not_wait_for_writes", test_reads_do_not_wait_for_writes},
    {"listen_wakes_on_new_work", test_listen_wakes_on_new_work},
    {NULL, NULL},
};

KAGENT_TEST_MAIN(tests, 60)
