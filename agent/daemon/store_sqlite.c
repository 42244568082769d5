/*
 * The store on SQLite (store_backend.h, docs/store.md): one file in WAL mode, its schema's
 * migrations, statements with $N parameters, and the two functions the shared SQL calls
 * (kagent_now, kagent_epoch), registered on each connection.
 */
#include "store_backend.h"

#include "kagent/base/alloc.h"
#include "kagent/base/fileio.h"

#include <errno.h>
#include <libgen.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a call waits for another connection's write lock (another daemon, a
 * kagent command reading the file) before it fails with -EBUSY. */
#define SQLITE_STORE_BUSY_TIMEOUT_MS 10000

/* A released migration is never edited: a change is a new entry at the end (docs/store.md). */
static const struct store_migration store_sqlite__migrations[] = {
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
    {3, "leases, daemon and GPU identities, trace records",
     "ALTER TABLE sessions ADD COLUMN owner TEXT;"
     "ALTER TABLE sessions ADD COLUMN lease_until REAL;"
     "ALTER TABLE sessions ADD COLUMN gpu_name TEXT;"
     /* a cancel asked of a running session, for the daemon that runs it */
     "ALTER TABLE sessions ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE variants ADD COLUMN gpu_name TEXT;"
     "CREATE TABLE trace_records ("
     " session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
     " seq INTEGER NOT NULL,"
     " record TEXT NOT NULL,"
     " PRIMARY KEY (session_id, seq));"},
};

/* Turns an SQLite failure into a negative errno and a cause naming what failed. */
static int
store_sqlite__fail(sqlite3 *db, const char *name, int code, char **cause)
{
	(void)name;
	*cause = kagent_strdup(db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(code));
	switch (code & 0xff) {
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

/* kagent_now(): UTC as ISO 8601 text, sortable and JSON as is. */
static void
store_sqlite__now(sqlite3_context *context, int count, sqlite3_value **values)
{
	char text[32];
	time_t now = time(NULL);
	struct tm utc;

	(void)count;
	(void)values;
	gmtime_r(&now, &utc);
	strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
	sqlite3_result_text(context, text, -1, SQLITE_TRANSIENT);
}

/* kagent_epoch(): seconds since 1970 with a fraction, what leases expire by. */
static void
store_sqlite__epoch(sqlite3_context *context, int count, sqlite3_value **values)
{
	struct timespec now;

	(void)count;
	(void)values;
	clock_gettime(CLOCK_REALTIME, &now);
	sqlite3_result_double(context, (double)now.tv_sec + (double)now.tv_nsec / 1e9);
}

/* Creates the folder of path (0700: the store holds prompts, settings and endpoints). */
static int
store_sqlite__make_folder(const char *path, char **cause)
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

static int
store_sqlite__script(void *connection, const char *name, const char *sql, char **cause)
{
	int code = sqlite3_exec(connection, sql, NULL, NULL, NULL);

	return code == SQLITE_OK ? 0 : store_sqlite__fail(connection, name, code, cause);
}

static void
store_sqlite__disconnect(void *connection)
{
	sqlite3_close(connection);
}

static int
store_sqlite__connect(const char *location, const char *name, void **connection_out, char **cause)
{
	sqlite3 *db = NULL;
	int result, code;

	*connection_out = NULL;
	if ((result = store_sqlite__make_folder(location, cause)) < 0)
		return result;
	/* NOMUTEX: the store's own lock serialises each connection. */
	code = sqlite3_open_v2(
	    location, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (code != SQLITE_OK) {
		result = store_sqlite__fail(db, name, code, cause);
		goto out;
	}
	sqlite3_busy_timeout(db, SQLITE_STORE_BUSY_TIMEOUT_MS);
	sqlite3_create_function(db, "kagent_now", 0, SQLITE_UTF8, NULL, store_sqlite__now, NULL,
				NULL);
	sqlite3_create_function(db, "kagent_epoch", 0, SQLITE_UTF8, NULL, store_sqlite__epoch, NULL,
				NULL);
	/* WAL: readers (the API, kagent commands) never wait for the writer, nor it for them.
	 * synchronous = NORMAL: a commit is written to the WAL but not fsynced (the WAL is
	 * fsynced at checkpoints). A killed process loses nothing (the OS holds what it wrote);
	 * a power cut or an OS crash may lose the last transactions, never the file's
	 * consistency, and what a lost transaction held is in the trace files, which resume
	 * reads. FULL would cost an fsync per commit: per turn of every session. */
	if ((result = store_sqlite__script(db, name, "PRAGMA journal_mode = WAL", cause)) < 0 ||
	    (result = store_sqlite__script(db, name, "PRAGMA synchronous = NORMAL", cause)) < 0 ||
	    (result = store_sqlite__script(db, name, "PRAGMA foreign_keys = ON", cause)) < 0)
		goto out;
	*connection_out = db;
	db = NULL;
out:
	sqlite3_close(db);
	return result;
}

/* SQLite reads $1 as a parameter named "$1", numbered by first appearance; ?1 is numbered by
 * its digits, which is what the shared SQL means. Quoted text is left alone. */
static char *
store_sqlite__numbered(const char *sql)
{
	char *copy = kagent_strdup(sql), *scan;
	int quoted = 0;

	for (scan = copy; *scan != '\0'; scan++) {
		if (*scan == '\'')
			quoted = !quoted;
		else if (!quoted && *scan == '$' && scan[1] >= '0' && scan[1] <= '9')
			*scan = '?';
	}
	return copy;
}

static int
store_sqlite__query(void *connection, const char *name, const char *sql,
		    const struct store_value *values, size_t count, struct store_rows *rows,
		    long long *changes, char **cause)
{
	sqlite3 *db = connection;
	sqlite3_stmt *statement = NULL;
	char *numbered = store_sqlite__numbered(sql);
	size_t index, capacity = 0;
	int result = 0, code, columns;

	if (rows != NULL)
		*rows = (struct store_rows){0};
	code = sqlite3_prepare_v2(db, numbered, -1, &statement, NULL);
	if (code != SQLITE_OK) {
		result = store_sqlite__fail(db, name, code, cause);
		goto out;
	}
	for (index = 0; index < count; index++) {
		int position = (int)index + 1;

		switch (values[index].kind) {
		case STORE_VALUE_NULL:
			sqlite3_bind_null(statement, position);
			break;
		case STORE_VALUE_TEXT:
			sqlite3_bind_text(statement, position, values[index].text, -1,
					  SQLITE_TRANSIENT);
			break;
		case STORE_VALUE_INTEGER:
			sqlite3_bind_int64(statement, position, values[index].integer);
			break;
		case STORE_VALUE_REAL:
			sqlite3_bind_double(statement, position, values[index].real);
			break;
		}
	}
	columns = sqlite3_column_count(statement);
	while ((code = sqlite3_step(statement)) == SQLITE_ROW) {
		if (rows == NULL)
			continue;
		if ((rows->row_count + 1) * (size_t)columns > capacity) {
			capacity = capacity == 0 ? (size_t)columns * 4 : capacity * 2;
			rows->cells = kagent_realloc(rows->cells, capacity * sizeof *rows->cells);
		}
		for (int column = 0; column < columns; column++) {
			const unsigned char *text = sqlite3_column_text(statement, column);

			rows->cells[rows->row_count * (size_t)columns + (size_t)column] =
			    text != NULL ? kagent_strdup((const char *)text) : NULL;
		}
		rows->row_count++;
	}
	if (rows != NULL)
		rows->column_count = (size_t)columns;
	if (code != SQLITE_DONE) {
		result = store_sqlite__fail(db, name, code, cause);
		goto out;
	}
	if (changes != NULL)
		*changes = sqlite3_changes(db);
out:
	sqlite3_finalize(statement);
	free(numbered);
	return result;
}

const struct store_backend kagent_store_sqlite_backend = {
    .name = "sqlite",
    .migrations = store_sqlite__migrations,
    .migration_count = sizeof store_sqlite__migrations / sizeof store_sqlite__migrations[0],
    /* IMMEDIATE takes the write lock at the start, so two writers never both read and then
     * collide on the upgrade (which SQLite answers with SQLITE_BUSY, past the busy timeout).
     * Holding the file's only write lock also makes the claim's choice and update one step. */
    .begin_write = "BEGIN IMMEDIATE",
    .begin_read = "BEGIN",
    .schema_lock = NULL,
    .claim_lock = "",
    .one_statement_claim = 0, /* SQLite's WITH holds no UPDATE */
    .notify = NULL,
    .connect = store_sqlite__connect,
    .disconnect = store_sqlite__disconnect,
    .script = store_sqlite__script,
    .query = store_sqlite__query,
    .listen = NULL,
    .listen_stop = NULL,
};
