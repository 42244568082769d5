/*
 * The daemon's store on SQLite (see include/kagent/daemon/store.h and
 * docs/store.md): the schema and its migrations, the batch queue with its
 * atomic claim and crash recovery, variants, baselines, and the bridge that
 * runs these calls on libuv's thread pool.
 */
#include "kagent/daemon/store.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"

#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* How long a call waits for another connection's write lock (another daemon, a
 * kagent command reading the file) before it fails with -EBUSY. */
#define STORE_BUSY_TIMEOUT_MS 10000

/* Timestamps are UTC text in ISO 8601: sortable, readable in the sqlite3 shell, and JSON as is. */
#define STORE_NOW "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"

/*
 * One connection, used by one thread at a time behind lock. Why not a
 * connection per thread: the work runs on libuv's pool threads, which kagent
 * does not own and cannot close a connection on when they end; and SQLite lets
 * one writer at a time into a file anyway, so more connections would buy only
 * concurrent reads of calls that each take milliseconds. The connection is
 * opened SQLITE_OPEN_NOMUTEX because lock already serialises it.
 */
struct kagent_store {
	sqlite3 *db;
	char *path;
	pthread_mutex_t lock;
};

/*
 * The schema, one migration per version, in order. A migration is never edited
 * once released: a change is a new entry at the end (docs/store.md). Each runs
 * in its own transaction with its row in schema_version.
 */
struct store__migration {
	int version;
	const char *description;
	const char *sql;
};

static const struct store__migration store__migrations[] = {
    {1, "batches, sessions, variants and baselines",
     "CREATE TABLE batches ("
     " id TEXT PRIMARY KEY,"
     " created_at TEXT NOT NULL,"
     " state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'cancelled')),"
     " settings TEXT NOT NULL," /* JSON: model, endpoint, target, budgets */
     " problems INTEGER NOT NULL,"
     /* the claim counter when a session of this batch was last claimed: round robin */
     " served INTEGER NOT NULL DEFAULT 0);"
     "CREATE TABLE sessions ("
     " id TEXT PRIMARY KEY," /* the run id: branch runs/<id>, traces/<id>.jsonl */
     " batch_id TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,"
     " position INTEGER NOT NULL,"
     " problem_path TEXT NOT NULL,"
     " problem TEXT NOT NULL,"
     " level INTEGER,"
     " state TEXT NOT NULL"
     "  CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),"
     " gpu TEXT,"
     " attempts INTEGER NOT NULL DEFAULT 0,"
     " resume INTEGER NOT NULL DEFAULT 0,"
     " created_at TEXT NOT NULL,"
     " started_at TEXT,"
     " finished_at TEXT,"
     " trace_path TEXT,"
     " result TEXT," /* JSON: the session's final summary */
     " UNIQUE (batch_id, position));"
     "CREATE TABLE variants ("
     " session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
     " variant_id TEXT NOT NULL,"
     " parent TEXT,"
     " verdict TEXT," /* JSON */
     " speedup_vs_eager REAL NOT NULL DEFAULT 0,"
     " speedup_vs_compile REAL NOT NULL DEFAULT 0,"
     " credited INTEGER NOT NULL DEFAULT 0,"
     " committed INTEGER NOT NULL DEFAULT 0,"
     " commit_id TEXT,"
     " created_at TEXT NOT NULL,"
     " PRIMARY KEY (session_id, variant_id));"
     "CREATE TABLE baselines ("
     " problem_sha256 TEXT NOT NULL,"
     " device TEXT NOT NULL,"
     " timings TEXT NOT NULL," /* JSON: eager and torch.compile timing summaries */
     " updated_at TEXT NOT NULL,"
     " PRIMARY KEY (problem_sha256, device));"},
    {2, "an index of sessions by state, for the claim and the batch counts",
     "CREATE INDEX sessions_by_state ON sessions (state, batch_id, position);"},
};

#define STORE_MIGRATION_COUNT (sizeof store__migrations / sizeof store__migrations[0])

static const char *const store__state_names[] = {
    [KAGENT_STORE_QUEUED] = "queued",	    [KAGENT_STORE_RUNNING] = "running",
    [KAGENT_STORE_DONE] = "done",	    [KAGENT_STORE_FAILED] = "failed",
    [KAGENT_STORE_CANCELLED] = "cancelled",
};

const char *
kagent_store_session_state_name(enum kagent_store_session_state state)
{
	if ((size_t)state >= sizeof store__state_names / sizeof store__state_names[0])
		return "unknown";
	return store__state_names[state];
}

int
kagent_store_schema_version(void)
{
	return store__migrations[STORE_MIGRATION_COUNT - 1].version;
}

/* ---- SQLite helpers ---- */

/* Turns an SQLite failure into a negative errno and a cause naming what failed. */
static int
store__fail(struct kagent_store *store, int code, const char *what, char **cause)
{
	int primary = code & 0xff;

	*cause =
	    kagent_asprintf("store %s: %s: %s", store->path, what,
			    store->db != NULL ? sqlite3_errmsg(store->db) : sqlite3_errstr(code));
	switch (primary) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	default:
		return -EIO;
	}
}

static int
store__exec(struct kagent_store *store, const char *sql, const char *what, char **cause)
{
	int code = sqlite3_exec(store->db, sql, NULL, NULL, NULL);

	return code == SQLITE_OK ? 0 : store__fail(store, code, what, cause);
}

static int
store__prepare(struct kagent_store *store, const char *sql, sqlite3_stmt **statement, char **cause)
{
	int code = sqlite3_prepare_v2(store->db, sql, -1, statement, NULL);

	return code == SQLITE_OK ? 0 : store__fail(store, code, "preparing a statement", cause);
}

/* Steps a statement that returns no row (or whose rows do not matter). */
static int
store__run(struct kagent_store *store, sqlite3_stmt *statement, const char *what, char **cause)
{
	int code;

	while ((code = sqlite3_step(statement)) == SQLITE_ROW)
		;
	return code == SQLITE_DONE ? 0 : store__fail(store, code, what, cause);
}

/* IMMEDIATE takes the write lock at the start, so two writers never both read and then
 * collide on the upgrade (which SQLite answers with SQLITE_BUSY, past the busy timeout). */
static int
store__begin(struct kagent_store *store, char **cause)
{
	return store__exec(store, "BEGIN IMMEDIATE", "starting a transaction", cause);
}

static int
store__commit(struct kagent_store *store, char **cause)
{
	return store__exec(store, "COMMIT", "committing", cause);
}

static void
store__rollback(struct kagent_store *store)
{
	sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
}

static void
store__bind_text(sqlite3_stmt *statement, int index, const char *text)
{
	if (text == NULL)
		sqlite3_bind_null(statement, index);
	else
		sqlite3_bind_text(statement, index, text, -1, SQLITE_TRANSIENT);
}

/* Binds value as compact JSON text, NULL as SQL NULL. */
static void
store__bind_json(sqlite3_stmt *statement, int index, const json_t *value)
{
	char *text = value != NULL ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

	if (text == NULL)
		sqlite3_bind_null(statement, index);
	else
		sqlite3_bind_text(statement, index, text, -1, free);
}

static json_t *
store__column_string(sqlite3_stmt *statement, int index)
{
	const unsigned char *text = sqlite3_column_text(statement, index);

	return text != NULL ? json_string((const char *)text) : json_null();
}

static json_t *
store__column_integer(sqlite3_stmt *statement, int index)
{
	if (sqlite3_column_type(statement, index) == SQLITE_NULL)
		return json_null();
	return json_integer(sqlite3_column_int64(statement, index));
}

/* A JSON column: the value it holds, or null (also for text that does not parse). */
static json_t *
store__column_json(sqlite3_stmt *statement, int index)
{
	const char *text = (const char *)sqlite3_column_text(statement, index);
	json_t *value = text != NULL ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;

	return value != NULL ? value : json_null();
}

static char *
store__column_strdup(sqlite3_stmt *statement, int index)
{
	const unsigned char *text = sqlite3_column_text(statement, index);

	return text != NULL ? kagent_strdup((const char *)text) : NULL;
}

/* ---- open, migrations ---- */

/* The version the file is at: the last migration recorded, 0 for a new file. */
static int
store__read_version(struct kagent_store *store, int *version, char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result, code;

	result = store__prepare(store, "SELECT COALESCE(MAX(version), 0) FROM schema_version",
				&statement, cause);
	if (result < 0)
		goto out;
	code = sqlite3_step(statement);
	if (code != SQLITE_ROW) {
		result = store__fail(store, code, "reading the schema version", cause);
		goto out;
	}
	*version = sqlite3_column_int(statement, 0);
out:
	sqlite3_finalize(statement);
	return result;
}

static int
store__newer(struct kagent_store *store, int version, char **cause)
{
	*cause = kagent_asprintf("store %s has schema version %d, newer than this kagent knows "
				 "(%d): it was written by a newer kagent; use that one",
				 store->path, version, kagent_store_schema_version());
	return -EPROTO;
}

/* Applies each missing migration in a transaction of its own. Another process may be
 * migrating the same file: the version is read again under the write lock. */
static int
store__migrate(struct kagent_store *store, char **cause)
{
	sqlite3_stmt *statement = NULL;
	size_t index;
	int result, version = 0, began = 0;

	result = store__exec(store,
			     "CREATE TABLE IF NOT EXISTS schema_version ("
			     " version INTEGER PRIMARY KEY,"
			     " description TEXT NOT NULL,"
			     " applied_at TEXT NOT NULL)",
			     "creating schema_version", cause);
	if (result < 0 || (result = store__read_version(store, &version, cause)) < 0)
		goto out;
	if (version > kagent_store_schema_version()) {
		result = store__newer(store, version, cause);
		goto out;
	}
	for (index = 0; index < STORE_MIGRATION_COUNT; index++) {
		const struct store__migration *migration = &store__migrations[index];
		char *what;

		if (migration->version <= version)
			continue;
		if ((result = store__begin(store, cause)) < 0)
			goto out;
		began = 1;
		if ((result = store__read_version(store, &version, cause)) < 0)
			goto out;
		if (version > kagent_store_schema_version()) {
			result = store__newer(store, version, cause);
			goto out;
		}
		if (migration->version > version) {
			what = kagent_asprintf("migration %d (%s)", migration->version,
					       migration->description);
			result = store__exec(store, migration->sql, what, cause);
			free(what);
			if (result < 0)
				goto out;
			result = store__prepare(store,
						"INSERT INTO schema_version (version, description,"
						" applied_at) VALUES (?1, ?2, " STORE_NOW ")",
						&statement, cause);
			if (result < 0)
				goto out;
			sqlite3_bind_int(statement, 1, migration->version);
			store__bind_text(statement, 2, migration->description);
			result = store__run(store, statement, "recording a migration", cause);
			sqlite3_finalize(statement);
			statement = NULL;
			if (result < 0)
				goto out;
			version = migration->version;
		}
		began = 0;
		if ((result = store__commit(store, cause)) < 0)
			goto out;
	}
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	return result;
}

/*
 * The file a URL names: "sqlite:PATH", "sqlite://PATH" or a bare PATH. Another
 * scheme is refused here; a second backend would be chosen here instead.
 */
static int
store__parse_url(const char *url, char **path_out, char **cause)
{
	const char *colon, *scan;

	if (url == NULL || url[0] == '\0') {
		*cause = kagent_strdup("the store URL is empty: give sqlite:PATH");
		return -EINVAL;
	}
	if (strncmp(url, "sqlite:", 7) == 0) {
		url += 7;
		if (strncmp(url, "//", 2) == 0)
			url += 2;
		if (url[0] == '\0') {
			*cause = kagent_strdup("the store URL sqlite: names no file: give "
					       "sqlite:PATH");
			return -EINVAL;
		}
		*path_out = kagent_strdup(url);
		return 0;
	}
	/* A scheme is letters, digits, + - . before the first colon, starting with a letter. */
	colon = strchr(url, ':');
	if (colon != NULL && colon > url &&
	    ((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z'))) {
		for (scan = url; scan < colon; scan++)
			if (!(strchr("+-.", *scan) != NULL || (*scan >= '0' && *scan <= '9') ||
			      (*scan >= 'a' && *scan <= 'z') || (*scan >= 'A' && *scan <= 'Z')))
				break;
		if (scan == colon) {
			if (strncmp(url, "postgres", 8) == 0)
				*cause = kagent_asprintf("store %s: PostgreSQL is not supported "
							 "yet; use sqlite:PATH",
							 url);
			else
				*cause = kagent_asprintf("store %s: unknown scheme \"%.*s\"; use "
							 "sqlite:PATH (or ./%s for a file name "
							 "with a colon)",
							 url, (int)(colon - url), url, url);
			return -EPROTONOSUPPORT;
		}
	}
	*path_out = kagent_strdup(url);
	return 0;
}

/* Creates the folder of path (0700: the store holds prompts, settings and endpoints). */
static int
store__make_folder(const char *path, char **cause)
{
	char *copy, *folder;
	int result = 0;

	if (strcmp(path, ":memory:") == 0)
		return 0;
	copy = kagent_strdup(path);
	folder = dirname(copy);
	if (strcmp(folder, ".") != 0 && strcmp(folder, "/") != 0)
		result = kagent_fileio_make_directories(folder, 0700, cause);
	free(copy);
	return result;
}

int
kagent_store_open(const char *url, struct kagent_store **store_out, char **cause)
{
	struct kagent_store *store = NULL;
	char *path = NULL;
	int result, code;

	*store_out = NULL;
	if ((result = store__parse_url(url, &path, cause)) < 0 ||
	    (result = store__make_folder(path, cause)) < 0)
		goto out;
	store = kagent_calloc(1, sizeof *store);
	store->path = path;
	path = NULL;
	pthread_mutex_init(&store->lock, NULL);
	code =
	    sqlite3_open_v2(store->path, &store->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (code != SQLITE_OK) {
		result = store__fail(store, code, "opening", cause);
		goto out;
	}
	sqlite3_busy_timeout(store->db, STORE_BUSY_TIMEOUT_MS);
	/* WAL: readers (the API, kagent commands) never wait for the writer, nor it for them. */
	result = store__exec(store, "PRAGMA journal_mode = WAL", "turning WAL on", cause);
	if (result < 0 ||
	    (result = store__exec(store, "PRAGMA foreign_keys = ON", "turning foreign keys on",
				  cause)) < 0 ||
	    (result = store__migrate(store, cause)) < 0)
		goto out;
	*store_out = store;
	store = NULL;
out:
	kagent_store_close(store);
	free(path);
	return result;
}

void
kagent_store_close(struct kagent_store *store)
{
	if (store == NULL)
		return;
	sqlite3_close(store->db);
	pthread_mutex_destroy(&store->lock);
	free(store->path);
	free(store);
}

/* ---- batches ---- */

/* 20261122-061502: the time part of batch and run ids, so that they sort by age. */
static void
store__stamp(char stamp[32])
{
	time_t now = time(NULL);
	struct tm utc;

	gmtime_r(&now, &utc);
	strftime(stamp, 32, "%Y%m%d-%H%M%S", &utc);
}

/* The problem's name when none is given: the file name without its folder and ".py". */
static char *
store__problem_name(const struct kagent_store_problem *problem)
{
	const char *base = strrchr(problem->path, '/');
	size_t length;

	if (problem->name != NULL && problem->name[0] != '\0')
		return kagent_strdup(problem->name);
	base = base != NULL ? base + 1 : problem->path;
	length = strlen(base);
	if (length > 3 && strcmp(base + length - 3, ".py") == 0)
		length -= 3;
	return kagent_strndup(base, length);
}

/* Derives the batch's state from its sessions (all batches when batch_id is NULL). A cancelled
 * batch stays cancelled; one with nothing queued or running is done; one that has started is
 * running; else it is queued. */
static int
store__refresh_batches(struct kagent_store *store, const char *batch_id, char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result;

	result = store__prepare(
	    store,
	    "UPDATE batches SET state = CASE"
	    " WHEN state = 'cancelled' THEN 'cancelled'"
	    " WHEN NOT EXISTS (SELECT 1 FROM sessions s WHERE s.batch_id = batches.id"
	    "  AND s.state IN ('queued', 'running')) THEN 'done'"
	    " WHEN EXISTS (SELECT 1 FROM sessions s WHERE s.batch_id = batches.id"
	    "  AND (s.state <> 'queued' OR s.attempts > 0)) THEN 'running'"
	    " ELSE 'queued' END"
	    " WHERE ?1 IS NULL OR id = ?1",
	    &statement, cause);
	if (result < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	result = store__run(store, statement, "updating batch states", cause);
out:
	sqlite3_finalize(statement);
	return result;
}

int
kagent_store_batch_create(struct kagent_store *store, const json_t *settings,
			  const struct kagent_store_problem *problems, size_t count,
			  char **batch_id_out, char **cause)
{
	sqlite3_stmt *statement = NULL;
	char stamp[32], *batch_id = NULL;
	uint32_t random_bits = 0;
	size_t index;
	int result, began = 0;

	*batch_id_out = NULL;
	if (count == 0) {
		*cause = kagent_strdup("a batch needs at least one problem");
		return -EINVAL;
	}
	for (index = 0; index < count; index++)
		if (problems[index].path == NULL || problems[index].path[0] == '\0') {
			*cause = kagent_asprintf("problem %zu of the batch has no path", index + 1);
			return -EINVAL;
		}
	store__stamp(stamp);
	if (getrandom(&random_bits, sizeof random_bits, 0) != sizeof random_bits)
		random_bits = (uint32_t)getpid() ^ (uint32_t)clock();
	batch_id = kagent_asprintf("b-%s-%08x", stamp, random_bits);

	pthread_mutex_lock(&store->lock);
	if ((result = store__begin(store, cause)) < 0)
		goto out;
	began = 1;
	result = store__prepare(store,
				"INSERT INTO batches (id, created_at, state, settings, problems)"
				" VALUES (?1, " STORE_NOW ", 'queued', ?2, ?3)",
				&statement, cause);
	if (result < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	if (settings != NULL)
		store__bind_json(statement, 2, settings);
	else
		sqlite3_bind_text(statement, 2, "{}", -1, SQLITE_STATIC);
	sqlite3_bind_int64(statement, 3, (sqlite3_int64)count);
	if ((result = store__run(store, statement, "creating a batch", cause)) < 0)
		goto out;
	sqlite3_finalize(statement);
	statement = NULL;

	result = store__prepare(store,
				"INSERT INTO sessions (id, batch_id, position, problem_path,"
				" problem, level, state, created_at)"
				" VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', " STORE_NOW ")",
				&statement, cause);
	if (result < 0)
		goto out;
	for (index = 0; index < count; index++) {
		/* The run id: the batch's stamp and random bits make it unique across batches,
		 * the position within it. */
		char *run_id = kagent_asprintf("%s-%08x-%04zu", stamp, random_bits, index + 1);
		char *name = store__problem_name(&problems[index]);

		sqlite3_reset(statement);
		store__bind_text(statement, 1, run_id);
		store__bind_text(statement, 2, batch_id);
		sqlite3_bind_int64(statement, 3, (sqlite3_int64)index + 1);
		store__bind_text(statement, 4, problems[index].path);
		store__bind_text(statement, 5, name);
		if (problems[index].level > 0)
			sqlite3_bind_int(statement, 6, problems[index].level);
		else
			sqlite3_bind_null(statement, 6);
		result = store__run(store, statement, "queueing a session", cause);
		free(run_id);
		free(name);
		if (result < 0)
			goto out;
	}
	began = 0;
	if ((result = store__commit(store, cause)) < 0)
		goto out;
	*batch_id_out = batch_id;
	batch_id = NULL;
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	free(batch_id);
	return result;
}

#define STORE_BATCH_COLUMNS                                                                        \
	"b.id, b.created_at, b.state, b.settings, b.problems,"                                     \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'queued'),"       \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'running'),"      \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'done'),"         \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'failed'),"       \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'cancelled')"

static json_t *
store__batch_json(sqlite3_stmt *statement)
{
	return json_pack(
	    "{s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:I}}", "id",
	    store__column_string(statement, 0), "created_at", store__column_string(statement, 1),
	    "state", store__column_string(statement, 2), "settings",
	    store__column_json(statement, 3), "problems", store__column_integer(statement, 4),
	    "counts", "queued", (json_int_t)sqlite3_column_int64(statement, 5), "running",
	    (json_int_t)sqlite3_column_int64(statement, 6), "done",
	    (json_int_t)sqlite3_column_int64(statement, 7), "failed",
	    (json_int_t)sqlite3_column_int64(statement, 8), "cancelled",
	    (json_int_t)sqlite3_column_int64(statement, 9));
}

#define STORE_SESSION_COLUMNS                                                                      \
	"id, batch_id, position, problem_path, problem, level, state, gpu, attempts, resume,"      \
	" created_at, started_at, finished_at, trace_path, result"

static json_t *
store__session_json(sqlite3_stmt *statement)
{
	json_t *session = json_object();

	json_object_set_new(session, "id", store__column_string(statement, 0));
	json_object_set_new(session, "batch_id", store__column_string(statement, 1));
	json_object_set_new(session, "position", store__column_integer(statement, 2));
	json_object_set_new(session, "problem_path", store__column_string(statement, 3));
	json_object_set_new(session, "problem", store__column_string(statement, 4));
	json_object_set_new(session, "level", store__column_integer(statement, 5));
	json_object_set_new(session, "state", store__column_string(statement, 6));
	json_object_set_new(session, "gpu", store__column_string(statement, 7));
	json_object_set_new(session, "attempts", store__column_integer(statement, 8));
	json_object_set_new(session, "resume", json_boolean(sqlite3_column_int(statement, 9)));
	json_object_set_new(session, "created_at", store__column_string(statement, 10));
	json_object_set_new(session, "started_at", store__column_string(statement, 11));
	json_object_set_new(session, "finished_at", store__column_string(statement, 12));
	json_object_set_new(session, "trace_path", store__column_string(statement, 13));
	json_object_set_new(session, "result", store__column_json(statement, 14));
	return session;
}

int
kagent_store_batch_list(struct kagent_store *store, json_t **batches_out, char **cause)
{
	sqlite3_stmt *statement = NULL;
	json_t *batches = json_array();
	int result, code;

	*batches_out = NULL;
	pthread_mutex_lock(&store->lock);
	result = store__prepare(store,
				"SELECT " STORE_BATCH_COLUMNS " FROM batches b"
				" ORDER BY b.created_at DESC, b.rowid DESC",
				&statement, cause);
	if (result < 0)
		goto out;
	while ((code = sqlite3_step(statement)) == SQLITE_ROW)
		json_array_append_new(batches, store__batch_json(statement));
	if (code != SQLITE_DONE) {
		result = store__fail(store, code, "listing batches", cause);
		goto out;
	}
	*batches_out = batches;
	batches = NULL;
out:
	sqlite3_finalize(statement);
	pthread_mutex_unlock(&store->lock);
	json_decref(batches);
	return result;
}

static int
store__no_batch(const char *batch_id, char **cause)
{
	*cause = kagent_asprintf("no batch %s", batch_id);
	return -ENOENT;
}

static int
store__no_session(const char *session_id, char **cause)
{
	*cause = kagent_asprintf("no session %s", session_id);
	return -ENOENT;
}

int
kagent_store_batch_get(struct kagent_store *store, const char *batch_id, json_t **batch_out,
		       char **cause)
{
	sqlite3_stmt *statement = NULL;
	json_t *batch = NULL, *sessions;
	int result, code, began = 0;

	*batch_out = NULL;
	pthread_mutex_lock(&store->lock);
	/* A read transaction, so the batch and its sessions are one snapshot. */
	if ((result = store__exec(store, "BEGIN", "starting a read", cause)) < 0)
		goto out;
	began = 1;
	result =
	    store__prepare(store, "SELECT " STORE_BATCH_COLUMNS " FROM batches b WHERE b.id = ?1",
			   &statement, cause);
	if (result < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	code = sqlite3_step(statement);
	if (code == SQLITE_DONE) {
		result = store__no_batch(batch_id, cause);
		goto out;
	}
	if (code != SQLITE_ROW) {
		result = store__fail(store, code, "reading a batch", cause);
		goto out;
	}
	batch = store__batch_json(statement);
	sqlite3_finalize(statement);
	statement = NULL;
	result = store__prepare(store,
				"SELECT " STORE_SESSION_COLUMNS " FROM sessions WHERE batch_id = ?1"
				" ORDER BY position",
				&statement, cause);
	if (result < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	sessions = json_array();
	json_object_set_new(batch, "sessions", sessions);
	while ((code = sqlite3_step(statement)) == SQLITE_ROW)
		json_array_append_new(sessions, store__session_json(statement));
	if (code != SQLITE_DONE) {
		result = store__fail(store, code, "reading a batch's sessions", cause);
		goto out;
	}
	*batch_out = batch;
	batch = NULL;
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	json_decref(batch);
	return result;
}

int
kagent_store_batch_cancel(struct kagent_store *store, const char *batch_id, json_t **running_out,
			  char **cause)
{
	sqlite3_stmt *statement = NULL;
	json_t *running = json_array();
	const char *state;
	int result, code, began = 0;

	*running_out = NULL;
	pthread_mutex_lock(&store->lock);
	if ((result = store__begin(store, cause)) < 0)
		goto out;
	began = 1;
	if ((result = store__prepare(store, "SELECT state FROM batches WHERE id = ?1", &statement,
				     cause)) < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	code = sqlite3_step(statement);
	if (code == SQLITE_DONE) {
		result = store__no_batch(batch_id, cause);
		goto out;
	}
	if (code != SQLITE_ROW) {
		result = store__fail(store, code, "reading a batch", cause);
		goto out;
	}
	state = (const char *)sqlite3_column_text(statement, 0);
	if (state != NULL && (strcmp(state, "done") == 0 || strcmp(state, "cancelled") == 0)) {
		*cause = kagent_asprintf("batch %s is already %s", batch_id, state);
		result = -EALREADY;
		goto out;
	}
	sqlite3_finalize(statement);
	statement = NULL;

	if ((result =
		 store__prepare(store,
				"UPDATE sessions SET state = 'cancelled', finished_at = " STORE_NOW
				" WHERE batch_id = ?1 AND state = 'queued'",
				&statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	if ((result = store__run(store, statement, "cancelling queued sessions", cause)) < 0)
		goto out;
	sqlite3_finalize(statement);
	statement = NULL;

	if ((result = store__prepare(store,
				     "SELECT id FROM sessions WHERE batch_id = ?1 AND"
				     " state = 'running' ORDER BY position",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	while ((code = sqlite3_step(statement)) == SQLITE_ROW)
		json_array_append_new(running, store__column_string(statement, 0));
	if (code != SQLITE_DONE) {
		result = store__fail(store, code, "listing running sessions", cause);
		goto out;
	}
	sqlite3_finalize(statement);
	statement = NULL;

	if ((result = store__prepare(store, "UPDATE batches SET state = 'cancelled' WHERE id = ?1",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, batch_id);
	if ((result = store__run(store, statement, "cancelling a batch", cause)) < 0)
		goto out;
	began = 0;
	if ((result = store__commit(store, cause)) < 0)
		goto out;
	*running_out = running;
	running = NULL;
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	json_decref(running);
	return result;
}

/* ---- sessions ---- */

void
kagent_store_claim_free(struct kagent_store_claim *claim)
{
	if (claim == NULL)
		return;
	free(claim->session_id);
	free(claim->batch_id);
	free(claim->problem_path);
	free(claim->problem);
	free(claim->trace_path);
	json_decref(claim->settings);
	free(claim);
}

int
kagent_store_session_claim(struct kagent_store *store, const char *gpu,
			   struct kagent_store_claim **claim_out, char **cause)
{
	sqlite3_stmt *statement = NULL;
	struct kagent_store_claim *claim = NULL;
	int result, code, began = 0;

	*claim_out = NULL;
	pthread_mutex_lock(&store->lock);
	/* The write lock first: the choice and the update are then one step no other
	 * connection can interleave with (docs/store.md). */
	if ((result = store__begin(store, cause)) < 0)
		goto out;
	began = 1;
	result = store__prepare(
	    store,
	    "UPDATE sessions SET state = 'running', gpu = ?1, attempts = attempts + 1,"
	    " started_at = COALESCE(started_at, " STORE_NOW ")"
	    " WHERE id = (SELECT s.id FROM sessions s JOIN batches b ON b.id = s.batch_id"
	    "  WHERE s.state = 'queued' ORDER BY b.served, b.rowid, s.position LIMIT 1)"
	    " RETURNING id, batch_id, problem_path, problem, level, attempts, resume, trace_path",
	    &statement, cause);
	if (result < 0)
		goto out;
	store__bind_text(statement, 1, gpu);
	code = sqlite3_step(statement);
	if (code == SQLITE_DONE)
		goto commit;
	if (code != SQLITE_ROW) {
		result = store__fail(store, code, "claiming a session", cause);
		goto out;
	}
	claim = kagent_calloc(1, sizeof *claim);
	claim->session_id = store__column_strdup(statement, 0);
	claim->batch_id = store__column_strdup(statement, 1);
	claim->problem_path = store__column_strdup(statement, 2);
	claim->problem = store__column_strdup(statement, 3);
	claim->level = sqlite3_column_int(statement, 4);
	claim->attempt = sqlite3_column_int(statement, 5);
	claim->resume = sqlite3_column_int(statement, 6);
	claim->trace_path = store__column_strdup(statement, 7);
	if ((result = store__run(store, statement, "claiming a session", cause)) < 0)
		goto out;
	sqlite3_finalize(statement);
	statement = NULL;

	/* The batch was served now: it goes behind every other batch with queued work. */
	result = store__prepare(store,
				"UPDATE batches SET served = (SELECT MAX(served) FROM batches) + 1,"
				" state = CASE WHEN state = 'queued' THEN 'running' ELSE state END"
				" WHERE id = ?1 RETURNING settings",
				&statement, cause);
	if (result < 0)
		goto out;
	store__bind_text(statement, 1, claim->batch_id);
	code = sqlite3_step(statement);
	if (code != SQLITE_ROW) {
		result = store__fail(store, code, "updating the claimed session's batch", cause);
		goto out;
	}
	claim->settings = store__column_json(statement, 0);
	if ((result = store__run(store, statement, "updating the claimed session's batch", cause)) <
	    0)
		goto out;
commit:
	began = 0;
	if ((result = store__commit(store, cause)) < 0)
		goto out;
	*claim_out = claim;
	claim = NULL;
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	kagent_store_claim_free(claim);
	return result;
}

int
kagent_store_session_set_trace(struct kagent_store *store, const char *session_id,
			       const char *trace_path, char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result;

	pthread_mutex_lock(&store->lock);
	if ((result = store__prepare(store, "UPDATE sessions SET trace_path = ?2 WHERE id = ?1",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	store__bind_text(statement, 2, trace_path);
	if ((result = store__run(store, statement, "recording a trace path", cause)) < 0)
		goto out;
	if (sqlite3_changes(store->db) == 0)
		result = store__no_session(session_id, cause);
out:
	sqlite3_finalize(statement);
	pthread_mutex_unlock(&store->lock);
	return result;
}

int
kagent_store_session_finish(struct kagent_store *store, const char *session_id,
			    enum kagent_store_session_state state, const json_t *result_json,
			    char **cause)
{
	sqlite3_stmt *statement = NULL;
	char *batch_id = NULL;
	const char *current;
	int result, code, began = 0;

	if (state != KAGENT_STORE_DONE && state != KAGENT_STORE_FAILED &&
	    state != KAGENT_STORE_CANCELLED) {
		*cause = kagent_asprintf("a session cannot finish as %s",
					 kagent_store_session_state_name(state));
		return -EINVAL;
	}
	pthread_mutex_lock(&store->lock);
	if ((result = store__begin(store, cause)) < 0)
		goto out;
	began = 1;
	if ((result = store__prepare(store, "SELECT state, batch_id FROM sessions WHERE id = ?1",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	code = sqlite3_step(statement);
	if (code == SQLITE_DONE) {
		result = store__no_session(session_id, cause);
		goto out;
	}
	if (code != SQLITE_ROW) {
		result = store__fail(store, code, "reading a session", cause);
		goto out;
	}
	current = (const char *)sqlite3_column_text(statement, 0);
	if (current == NULL || strcmp(current, "running") != 0) {
		*cause = kagent_asprintf("session %s is %s, not running", session_id,
					 current != NULL ? current : "in no state");
		result = -EALREADY;
		goto out;
	}
	batch_id = store__column_strdup(statement, 1);
	sqlite3_finalize(statement);
	statement = NULL;

	if ((result = store__prepare(store,
				     "UPDATE sessions SET state = ?2, result = ?3, resume = 0,"
				     " finished_at = " STORE_NOW " WHERE id = ?1",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	store__bind_text(statement, 2, kagent_store_session_state_name(state));
	store__bind_json(statement, 3, result_json);
	if ((result = store__run(store, statement, "finishing a session", cause)) < 0 ||
	    (result = store__refresh_batches(store, batch_id, cause)) < 0)
		goto out;
	began = 0;
	result = store__commit(store, cause);
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	free(batch_id);
	return result;
}

int
kagent_store_session_cancel(struct kagent_store *store, const char *session_id, int *running_out,
			    char **cause)
{
	sqlite3_stmt *statement = NULL;
	char *batch_id = NULL;
	const char *current;
	int result, code, began = 0;

	*running_out = 0;
	pthread_mutex_lock(&store->lock);
	if ((result = store__begin(store, cause)) < 0)
		goto out;
	began = 1;
	if ((result = store__prepare(store, "SELECT state, batch_id FROM sessions WHERE id = ?1",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	code = sqlite3_step(statement);
	if (code == SQLITE_DONE) {
		result = store__no_session(session_id, cause);
		goto out;
	}
	if (code != SQLITE_ROW) {
		result = store__fail(store, code, "reading a session", cause);
		goto out;
	}
	current = (const char *)sqlite3_column_text(statement, 0);
	if (current != NULL && strcmp(current, "running") == 0) {
		/* Its owner interrupts it and finishes it as cancelled when it stops. */
		*running_out = 1;
		goto out;
	}
	if (current == NULL || strcmp(current, "queued") != 0) {
		*cause = kagent_asprintf("session %s is already %s", session_id,
					 current != NULL ? current : "in no state");
		result = -EALREADY;
		goto out;
	}
	batch_id = store__column_strdup(statement, 1);
	sqlite3_finalize(statement);
	statement = NULL;

	if ((result = store__prepare(store,
				     "UPDATE sessions SET state = 'cancelled', resume = 0,"
				     " finished_at = " STORE_NOW " WHERE id = ?1",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	if ((result = store__run(store, statement, "cancelling a session", cause)) < 0 ||
	    (result = store__refresh_batches(store, batch_id, cause)) < 0)
		goto out;
	began = 0;
	result = store__commit(store, cause);
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	free(batch_id);
	return result;
}

int
kagent_store_session_get(struct kagent_store *store, const char *session_id, json_t **session_out,
			 char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result, code;

	*session_out = NULL;
	pthread_mutex_lock(&store->lock);
	if ((result = store__prepare(store,
				     "SELECT " STORE_SESSION_COLUMNS " FROM sessions WHERE id = ?1",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	code = sqlite3_step(statement);
	if (code == SQLITE_ROW)
		*session_out = store__session_json(statement);
	else if (code == SQLITE_DONE)
		result = store__no_session(session_id, cause);
	else
		result = store__fail(store, code, "reading a session", cause);
out:
	sqlite3_finalize(statement);
	pthread_mutex_unlock(&store->lock);
	return result;
}

int
kagent_store_recover(struct kagent_store *store, int *recovered_out, char **cause)
{
	int result, began = 0, recovered = 0;

	if (recovered_out != NULL)
		*recovered_out = 0;
	pthread_mutex_lock(&store->lock);
	if ((result = store__begin(store, cause)) < 0)
		goto out;
	began = 1;
	/* A cancelled batch's running sessions were being interrupted: they end cancelled. */
	result = store__exec(
	    store,
	    "UPDATE sessions SET state = 'cancelled', resume = 0, finished_at = " STORE_NOW
	    " WHERE state = 'running' AND batch_id IN"
	    " (SELECT id FROM batches WHERE state = 'cancelled')",
	    "cancelling sessions of cancelled batches", cause);
	if (result < 0)
		goto out;
	/* The others go back to the queue under the same run id. resume only where the
	 * session had said where its trace is: before that, nothing was written to resume
	 * from, and the run starts as it would have. */
	result = store__exec(store,
			     "UPDATE sessions SET state = 'queued', gpu = NULL,"
			     " resume = CASE WHEN trace_path IS NOT NULL THEN 1 ELSE resume END"
			     " WHERE state = 'running'",
			     "requeueing running sessions", cause);
	if (result < 0)
		goto out;
	recovered = sqlite3_changes(store->db);
	if ((result = store__refresh_batches(store, NULL, cause)) < 0)
		goto out;
	began = 0;
	if ((result = store__commit(store, cause)) < 0)
		goto out;
	if (recovered_out != NULL)
		*recovered_out = recovered;
out:
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	return result;
}

/* ---- variants ---- */

int
kagent_store_variant_record(struct kagent_store *store, const struct kagent_store_variant *variant,
			    int *inserted_out, char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result;

	if (inserted_out != NULL)
		*inserted_out = 0;
	pthread_mutex_lock(&store->lock);
	result = store__prepare(store,
				"INSERT INTO variants (session_id, variant_id, parent, verdict,"
				" speedup_vs_eager, speedup_vs_compile, credited, created_at)"
				" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, " STORE_NOW ")"
				" ON CONFLICT (session_id, variant_id) DO NOTHING",
				&statement, cause);
	if (result < 0)
		goto out;
	store__bind_text(statement, 1, variant->session_id);
	store__bind_text(statement, 2, variant->variant_id);
	store__bind_text(statement, 3, variant->parent);
	store__bind_json(statement, 4, variant->verdict);
	sqlite3_bind_double(statement, 5, variant->speedup_vs_eager);
	sqlite3_bind_double(statement, 6, variant->speedup_vs_compile);
	sqlite3_bind_int(statement, 7, variant->credited != 0);
	result = store__run(store, statement, "recording a variant", cause);
	if (result == -EEXIST) {
		/* The only constraint left once the conflict is ignored: the session. */
		free(*cause);
		result = store__no_session(variant->session_id, cause);
		goto out;
	}
	if (result == 0 && inserted_out != NULL)
		*inserted_out = sqlite3_changes(store->db) > 0;
out:
	sqlite3_finalize(statement);
	pthread_mutex_unlock(&store->lock);
	return result;
}

int
kagent_store_variant_commit(struct kagent_store *store, const char *session_id,
			    const char *variant_id, const char *commit_id, int *first_out,
			    char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result, code, began = 0, first = 0;

	if (first_out != NULL)
		*first_out = 0;
	pthread_mutex_lock(&store->lock);
	if ((result = store__begin(store, cause)) < 0)
		goto out;
	began = 1;
	if ((result = store__prepare(store,
				     "UPDATE variants SET committed = 1, commit_id = ?3"
				     " WHERE session_id = ?1 AND variant_id = ?2 AND committed = 0",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	store__bind_text(statement, 2, variant_id);
	store__bind_text(statement, 3, commit_id);
	if ((result = store__run(store, statement, "marking a variant committed", cause)) < 0)
		goto out;
	first = sqlite3_changes(store->db) > 0;
	sqlite3_finalize(statement);
	statement = NULL;
	if (!first) {
		if ((result = store__prepare(store,
					     "SELECT 1 FROM variants WHERE session_id = ?1 AND"
					     " variant_id = ?2",
					     &statement, cause)) < 0)
			goto out;
		store__bind_text(statement, 1, session_id);
		store__bind_text(statement, 2, variant_id);
		code = sqlite3_step(statement);
		if (code == SQLITE_DONE) {
			*cause = kagent_asprintf("session %s has no variant %s recorded",
						 session_id, variant_id);
			result = -ENOENT;
			goto out;
		}
		if (code != SQLITE_ROW) {
			result = store__fail(store, code, "reading a variant", cause);
			goto out;
		}
	}
	began = 0;
	if ((result = store__commit(store, cause)) < 0)
		goto out;
	if (first_out != NULL)
		*first_out = first;
out:
	sqlite3_finalize(statement);
	if (began)
		store__rollback(store);
	pthread_mutex_unlock(&store->lock);
	return result;
}

int
kagent_store_variant_list(struct kagent_store *store, const char *session_id, json_t **variants_out,
			  char **cause)
{
	sqlite3_stmt *statement = NULL;
	json_t *variants = json_array();
	int result, code;

	*variants_out = NULL;
	pthread_mutex_lock(&store->lock);
	if ((result =
		 store__prepare(store,
				"SELECT variant_id, parent, verdict, speedup_vs_eager,"
				" speedup_vs_compile, credited, committed, commit_id,"
				" created_at FROM variants WHERE session_id = ?1 ORDER BY rowid",
				&statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, session_id);
	while ((code = sqlite3_step(statement)) == SQLITE_ROW)
		json_array_append_new(
		    variants, json_pack("{s:o, s:o, s:o, s:f, s:f, s:b, s:b, s:o, s:o}", "variant",
					store__column_string(statement, 0), "parent",
					store__column_string(statement, 1), "verdict",
					store__column_json(statement, 2), "speedup_vs_eager",
					sqlite3_column_double(statement, 3), "speedup_vs_compile",
					sqlite3_column_double(statement, 4), "credited",
					sqlite3_column_int(statement, 5), "committed",
					sqlite3_column_int(statement, 6), "commit",
					store__column_string(statement, 7), "created_at",
					store__column_string(statement, 8)));
	if (code != SQLITE_DONE) {
		result = store__fail(store, code, "listing variants", cause);
		goto out;
	}
	*variants_out = variants;
	variants = NULL;
out:
	sqlite3_finalize(statement);
	pthread_mutex_unlock(&store->lock);
	json_decref(variants);
	return result;
}

/* ---- baselines ---- */

int
kagent_store_baseline_get(struct kagent_store *store, const char *problem_sha256,
			  const char *device, json_t **timings_out, char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result, code;

	*timings_out = NULL;
	pthread_mutex_lock(&store->lock);
	if ((result = store__prepare(store,
				     "SELECT timings FROM baselines WHERE problem_sha256 = ?1 AND"
				     " device = ?2",
				     &statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, problem_sha256);
	store__bind_text(statement, 2, device);
	code = sqlite3_step(statement);
	if (code == SQLITE_ROW)
		*timings_out = store__column_json(statement, 0);
	else if (code == SQLITE_DONE) {
		*cause =
		    kagent_asprintf("no baselines for problem %s on %s", problem_sha256, device);
		result = -ENOENT;
	} else
		result = store__fail(store, code, "reading baselines", cause);
out:
	sqlite3_finalize(statement);
	pthread_mutex_unlock(&store->lock);
	return result;
}

int
kagent_store_baseline_put(struct kagent_store *store, const char *problem_sha256,
			  const char *device, const json_t *timings, char **cause)
{
	sqlite3_stmt *statement = NULL;
	int result;

	if (timings == NULL) {
		*cause = kagent_strdup("no baseline timings to store");
		return -EINVAL;
	}
	pthread_mutex_lock(&store->lock);
	if ((result =
		 store__prepare(store,
				"INSERT INTO baselines (problem_sha256, device, timings,"
				" updated_at) VALUES (?1, ?2, ?3, " STORE_NOW ")"
				" ON CONFLICT (problem_sha256, device) DO UPDATE SET"
				" timings = excluded.timings, updated_at = excluded.updated_at",
				&statement, cause)) < 0)
		goto out;
	store__bind_text(statement, 1, problem_sha256);
	store__bind_text(statement, 2, device);
	store__bind_json(statement, 3, timings);
	result = store__run(store, statement, "storing baselines", cause);
out:
	sqlite3_finalize(statement);
	pthread_mutex_unlock(&store->lock);
	return result;
}

/* ---- the thread pool ---- */

struct store__request {
	uv_work_t work; /* work.data is the request */
	struct kagent_store *store;
	kagent_store_work_function function;
	kagent_store_after_function after;
	void *data;
	int status;
	char *cause;
};

/* On a pool thread: the store functions take the store's lock themselves. */
static void
store__work(uv_work_t *work)
{
	struct store__request *request = work->data;

	request->status = request->function(request->store, request->data, &request->cause);
}

static void
store__after_work(uv_work_t *work, int status)
{
	struct store__request *request = work->data;

	if (status == UV_ECANCELED) {
		request->status = -ECANCELED;
		free(request->cause);
		request->cause = kagent_strdup("the store call was cancelled before it ran");
	}
	if (request->after != NULL)
		request->after(request->status, request->cause, request->data);
	free(request->cause);
	free(request);
}

int
kagent_store_submit(struct kagent_store *store, uv_loop_t *loop, kagent_store_work_function work,
		    kagent_store_after_function after, void *data)
{
	struct store__request *request = kagent_calloc(1, sizeof *request);
	int status;

	request->work.data = request;
	request->store = store;
	request->function = work;
	request->after = after;
	request->data = data;
	status = uv_queue_work(loop, &request->work, store__work, store__after_work);
	if (status < 0)
		free(request);
	return status;
}
