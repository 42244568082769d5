/*
 * The daemon's store (include/kagent/daemon/store.h, docs/store.md): the queue's logic once,
 * over a backend chosen by the URL (store_backend.h: store_sqlite.c, store_postgresql.c).
 * Migrations, batches, the atomic claim with its lease, the heartbeat that renews leases,
 * recovery and takeover of sessions whose daemon is gone, variants, baselines, trace records,
 * and the bridge that runs these calls on libuv's thread pool.
 */
#include "kagent/daemon/store.h"

#include "store_backend.h"

#include "kagent/base/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* A lease lasts this long unless kagent_store_set_lease says otherwise. */
#define STORE_DEFAULT_LEASE_SECONDS 30.0

/* A transaction that met a serialisation failure or a deadlock is tried this often. */
#define STORE_TRANSACTION_TRIES 5

/*
 * Two connections, each used by one thread at a time behind its lock: one for writes and
 * one for read-only snapshots, so that a read (the API's GET /v1/batches/ID) never waits
 * behind a write transaction (a group of trace copies, a claim): WAL and PostgreSQL's MVCC
 * let a reader run beside the writer. Why not a connection per thread: the work runs on
 * libuv's pool threads, which kagent does not own and cannot close a connection on when
 * they end; SQLite lets one writer at a time into a file anyway, and each call is one short
 * transaction (docs/store.md says why PostgreSQL's calls block on the pool too).
 */
struct kagent_store {
	const struct store_backend *backend;
	void *connection;
	/* The read-only snapshots' connection; NULL where reads share connection (an SQLite
	 * :memory: store is private to its connection). */
	void *reader;
	pthread_mutex_t reader_lock;
	char *location; /* what the backend connects to */
	char *name;	/* how messages name the store: the URL without its password */
	char *identity; /* host:pid:random, the owner of this connection's claims */
	char *gpu_name; /* kept with every claim and verdict; NULL when unknown */
	double lease_seconds;
	void *listener;
	pthread_mutex_t lock;
};

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

/* Every backend's migrations end at the same version: they describe the same tables. */
int
kagent_store_schema_version(void)
{
	const struct store_backend *backend = &kagent_store_sqlite_backend;

	return backend->migrations[backend->migration_count - 1].version;
}

/* ---- rows ---- */

static void
store__rows_clear(struct store_rows *rows)
{
	if (rows->cells != NULL)
		for (size_t index = 0; index < rows->row_count * rows->column_count; index++)
			free(rows->cells[index]);
	free(rows->cells);
	*rows = (struct store_rows){0};
}

/* The cell's text, or NULL for SQL NULL or a cell past the end. */
static const char *
store__cell(const struct store_rows *rows, size_t row, size_t column)
{
	if (row >= rows->row_count || column >= rows->column_count)
		return NULL;
	return rows->cells[row * rows->column_count + column];
}

static json_t *
store__cell_string(const struct store_rows *rows, size_t row, size_t column)
{
	const char *text = store__cell(rows, row, column);

	return text != NULL ? json_string(text) : json_null();
}

static long long
store__cell_long(const struct store_rows *rows, size_t row, size_t column)
{
	const char *text = store__cell(rows, row, column);

	return text != NULL ? strtoll(text, NULL, 10) : 0;
}

static json_t *
store__cell_integer(const struct store_rows *rows, size_t row, size_t column)
{
	if (store__cell(rows, row, column) == NULL)
		return json_null();
	return json_integer(store__cell_long(rows, row, column));
}

static double
store__cell_real(const struct store_rows *rows, size_t row, size_t column)
{
	const char *text = store__cell(rows, row, column);

	return text != NULL ? strtod(text, NULL) : 0.0;
}

/* A JSON column: the value it holds, or null (also for text that does not parse). */
static json_t *
store__cell_json(const struct store_rows *rows, size_t row, size_t column)
{
	const char *text = store__cell(rows, row, column);
	json_t *value = text != NULL ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;

	return value != NULL ? value : json_null();
}

static char *
store__cell_strdup(const struct store_rows *rows, size_t row, size_t column)
{
	const char *text = store__cell(rows, row, column);

	return text != NULL ? kagent_strdup(text) : NULL;
}

/* ---- statements ---- */

/* Names the store and what failed in front of the engine's message. */
static int
store__failed(struct kagent_store *store, int status, const char *what, char **cause)
{
	char *message = *cause;

	*cause = kagent_asprintf("store %s: %s: %s", store->name, what,
				 message != NULL ? message : "failed");
	free(message);
	return status;
}

static int
store__query(struct kagent_store *store, const char *what, const char *sql,
	     const struct store_value *values, size_t count, struct store_rows *rows,
	     long long *changes, char **cause)
{
	int status = store->backend->query(store->connection, store->name, sql, values, count, rows,
					   changes, cause);

	if (status < 0 && rows != NULL)
		store__rows_clear(rows);
	return status < 0 ? store__failed(store, status, what, cause) : 0;
}

static int
store__script(struct kagent_store *store, const char *what, const char *sql, char **cause)
{
	int status = store->backend->script(store->connection, store->name, sql, cause);

	return status < 0 ? store__failed(store, status, what, cause) : 0;
}

/* JSON as compact text for a statement (NULL for NULL); the caller frees it. */
static char *
store__json_text(const json_t *value)
{
	return value != NULL ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/*
 * Runs body in one write transaction, under the store's lock: committed when it returns 0,
 * rolled back otherwise (begin NULL: body is one statement, a transaction of its own). A
 * serialisation failure or deadlock (PostgreSQL's answer when two daemons' transactions cross)
 * rolls back and runs body again, a few times.
 */
typedef int (*store__body)(struct kagent_store *store, void *data, char **cause);

static void store__rollback(struct kagent_store *store);

static int
store__transaction(struct kagent_store *store, const char *begin, store__body body, void *data,
		   char **cause)
{
	int status = 0;

	pthread_mutex_lock(&store->lock);
	for (int attempt = 1; attempt <= STORE_TRANSACTION_TRIES; attempt++) {
		if (begin != NULL &&
		    (status = store__script(store, "starting a transaction", begin, cause)) < 0)
			break;
		status = body(store, data, cause);
		if (status == 0 && begin != NULL)
			status = store__script(store, "committing", "COMMIT", cause);
		if (status == 0)
			break;
		if (begin != NULL)
			store__rollback(store);
		if (status != -EAGAIN || attempt == STORE_TRANSACTION_TRIES)
			break;
		free(*cause);
		*cause = NULL;
	}
	pthread_mutex_unlock(&store->lock);
	return status;
}

static int
store__write(struct kagent_store *store, store__body body, void *data, char **cause)
{
	return store__transaction(store, store->backend->begin_write, body, data, cause);
}

/* A rollback that fails leaves nothing to undo: the transaction is gone either way. */
static void
store__rollback(struct kagent_store *store)
{
	char *cause = NULL;

	store->backend->script(store->connection, store->name, "ROLLBACK", &cause);
	free(cause);
}

/*
 * Read-only calls: a snapshot, rolled back at the end (a read has nothing to commit), on the
 * reader's connection under the reader's lock, so a read never waits for a write in this
 * process. body gets a copy of the store whose connection is the reader (store__query runs
 * on the store's connection); a read body only runs statements, it takes no lock.
 */
static int
store__read(struct kagent_store *store, store__body body, void *data, char **cause)
{
	pthread_mutex_t *lock = store->reader != NULL ? &store->reader_lock : &store->lock;
	struct kagent_store reading = *store;
	int status;

	if (store->reader != NULL)
		reading.connection = store->reader;
	pthread_mutex_lock(lock);
	status = store__script(&reading, "starting a read", store->backend->begin_read, cause);
	if (status == 0) {
		status = body(&reading, data, cause);
		store__rollback(&reading);
	}
	pthread_mutex_unlock(lock);
	return status;
}

/* Wakes the daemons listening for queued work (PostgreSQL); sent when the transaction commits. */
static int
store__notify(struct kagent_store *store, char **cause)
{
	if (store->backend->notify == NULL)
		return 0;
	return store__script(store, "waking other daemons", store->backend->notify, cause);
}

/* ---- open, migrations ---- */

struct store__migration_step {
	int version_before; /* what the store was at */
	int applied;	    /* a migration ran in this step */
};

static int
store__newer(struct kagent_store *store, int version, char **cause)
{
	*cause = kagent_asprintf("store %s has schema version %d, newer than this kagent knows "
				 "(%d): it was written by a newer kagent; use that one",
				 store->name, version, kagent_store_schema_version());
	return -EPROTO;
}

/* One step: reads the version under the write lock (another daemon may be migrating the same
 * store) and applies the first migration the store lacks, with its schema_version row. */
static int
store__migrate_step(struct kagent_store *store, void *data, char **cause)
{
	struct store__migration_step *step = data;
	const struct store_backend *backend = store->backend;
	struct store_rows rows = {0};
	int status, version;

	step->applied = 0;
	if ((backend->schema_lock != NULL &&
	     (status = store__script(store, "locking the schema", backend->schema_lock, cause)) <
		 0) ||
	    (status = store__script(store, "creating schema_version",
				    "CREATE TABLE IF NOT EXISTS schema_version ("
				    " version INTEGER PRIMARY KEY,"
				    " description TEXT NOT NULL,"
				    " applied_at TEXT NOT NULL)",
				    cause)) < 0 ||
	    (status = store__query(store, "reading the schema version",
				   "SELECT COALESCE(MAX(version), 0) FROM schema_version", NULL, 0,
				   &rows, NULL, cause)) < 0)
		goto out;
	version = (int)store__cell_long(&rows, 0, 0);
	step->version_before = version;
	if (version > kagent_store_schema_version()) {
		status = store__newer(store, version, cause);
		goto out;
	}
	for (size_t index = 0; index < backend->migration_count; index++) {
		const struct store_migration *migration = &backend->migrations[index];
		struct store_value values[] = {STORE_INTEGER(migration->version),
					       STORE_TEXT(migration->description)};
		char *what;

		if (migration->version <= version)
			continue;
		what = kagent_asprintf("migration %d (%s)", migration->version,
				       migration->description);
		status = store__script(store, what, migration->sql, cause);
		free(what);
		if (status < 0 ||
		    (status = store__query(store, "recording a migration",
					   "INSERT INTO schema_version (version, description,"
					   " applied_at) VALUES ($1, $2, kagent_now())",
					   values, 2, NULL, NULL, cause)) < 0)
			goto out;
		step->applied = 1;
		break;
	}
out:
	store__rows_clear(&rows);
	return status;
}

/* Applies each missing migration in a transaction of its own. */
static int
store__migrate(struct kagent_store *store, char **cause)
{
	struct store__migration_step step;
	int status;

	do
		status = store__write(store, store__migrate_step, &step, cause);
	while (status == 0 && step.applied);
	return status;
}

/* The backend a URL names, and what it connects to: "sqlite:PATH", "sqlite://PATH" or a bare
 * PATH for SQLite; "postgresql://..." or "postgres://..." for PostgreSQL. */
static int
store__parse_url(const char *url, const struct store_backend **backend_out, char **location_out,
		 char **cause)
{
	const char *colon, *scan;

	if (url == NULL || url[0] == '\0') {
		*cause = kagent_strdup("the store URL is empty: give sqlite:PATH or "
				       "postgresql://HOST/DATABASE");
		return -EINVAL;
	}
	if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0) {
		*backend_out = &kagent_store_postgresql_backend;
		*location_out = kagent_strdup(url);
		return 0;
	}
	*backend_out = &kagent_store_sqlite_backend;
	if (strncmp(url, "sqlite:", 7) == 0) {
		url += 7;
		if (strncmp(url, "//", 2) == 0)
			url += 2;
		if (url[0] == '\0') {
			*cause = kagent_strdup("the store URL sqlite: names no file: give "
					       "sqlite:PATH");
			return -EINVAL;
		}
		*location_out = kagent_strdup(url);
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
			*cause = kagent_asprintf("store %s: unknown scheme \"%.*s\"; use "
						 "sqlite:PATH, postgresql://HOST/DATABASE (or ./%s "
						 "for a file name with a colon)",
						 url, (int)(colon - url), url, url);
			return -EPROTONOSUPPORT;
		}
	}
	*location_out = kagent_strdup(url);
	return 0;
}

/* The URL as messages show it: a password (user:secret@host) becomes "***". */
static char *
store__display_name(const char *url)
{
	const char *authority = strstr(url, "://"), *at, *colon, *slash;

	if (authority == NULL)
		return kagent_strdup(url);
	authority += 3;
	slash = strchr(authority, '/');
	at = strchr(authority, '@');
	if (at == NULL || (slash != NULL && at > slash))
		return kagent_strdup(url);
	colon = memchr(authority, ':', (size_t)(at - authority));
	if (colon == NULL)
		return kagent_strdup(url);
	return kagent_asprintf("%.*s:***%s", (int)(colon - url), url, at);
}

/* host:pid:random: a daemon on another machine, or a later one with the same pid, differs. */
static char *
store__identity(void)
{
	char host[256] = "";
	uint32_t random_bits = 0;

	if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
		strcpy(host, "localhost");
	if (getrandom(&random_bits, sizeof random_bits, 0) != sizeof random_bits)
		random_bits = (uint32_t)getpid() ^ (uint32_t)clock() ^ (uint32_t)time(NULL);
	return kagent_asprintf("%s:%ld:%08x", host, (long)getpid(), random_bits);
}

const char *
kagent_store_backend_name(const char *url)
{
	const struct store_backend *backend = NULL;
	char *location = NULL, *cause = NULL;

	if (store__parse_url(url, &backend, &location, &cause) < 0)
		backend = NULL;
	free(location);
	free(cause);
	return backend != NULL ? backend->name : NULL;
}

/* A store with its connection, not yet migrated. */
static int
store__connect(const char *url, struct kagent_store **store_out, char **cause)
{
	struct kagent_store *store = kagent_calloc(1, sizeof *store);
	int status;

	*store_out = NULL;
	pthread_mutex_init(&store->lock, NULL);
	pthread_mutex_init(&store->reader_lock, NULL);
	store->lease_seconds = STORE_DEFAULT_LEASE_SECONDS;
	if ((status = store__parse_url(url, &store->backend, &store->location, cause)) < 0)
		goto out;
	store->name = store__display_name(
	    store->backend == &kagent_store_sqlite_backend ? store->location : url);
	store->identity = store__identity();
	status = store->backend->connect(store->location, store->name, &store->connection, cause);
	if (status < 0) {
		status = store__failed(store, status, "opening", cause);
		goto out;
	}
	*store_out = store;
	store = NULL;
out:
	kagent_store_close(store);
	return status;
}

/* The reader's connection, once the schema is migrated. An SQLite :memory: database exists
 * only for the connection that made it, so there reads share the one connection. */
static int
store__open_reader(struct kagent_store *store, char **cause)
{
	int status;

	if (store->backend == &kagent_store_sqlite_backend &&
	    strcmp(store->location, ":memory:") == 0)
		return 0;
	status = store->backend->connect(store->location, store->name, &store->reader, cause);
	return status < 0 ? store__failed(store, status, "opening a reader", cause) : 0;
}

int
kagent_store_open(const char *url, struct kagent_store **store_out, char **cause)
{
	struct kagent_store *store = NULL;
	int status;

	*store_out = NULL;
	if ((status = store__connect(url, &store, cause)) < 0)
		return status;
	if ((status = store__migrate(store, cause)) < 0 ||
	    (status = store__open_reader(store, cause)) < 0) {
		kagent_store_close(store);
		return status;
	}
	*store_out = store;
	return 0;
}

/* A daemon that stops gives its leases up: its sessions stay running (they are resumed, not
 * restarted) but any daemon may take them over at once instead of after the lease. */
static int
store__release_leases(struct kagent_store *store, void *data, char **cause)
{
	struct store_value values[] = {STORE_TEXT(store->identity)};

	(void)data;
	return store__query(store, "giving leases up",
			    "UPDATE sessions SET lease_until = 0 WHERE owner = $1 AND"
			    " state = 'running'",
			    values, 1, NULL, NULL, cause);
}

void
kagent_store_close(struct kagent_store *store)
{
	char *cause = NULL;

	if (store == NULL)
		return;
	if (store->connection != NULL) {
		if (store__write(store, store__release_leases, NULL, &cause) < 0)
			free(cause);
		store->backend->disconnect(store->connection);
	}
	if (store->reader != NULL)
		store->backend->disconnect(store->reader);
	pthread_mutex_destroy(&store->lock);
	pthread_mutex_destroy(&store->reader_lock);
	free(store->location);
	free(store->name);
	free(store->identity);
	free(store->gpu_name);
	free(store);
}

const char *
kagent_store_identity(const struct kagent_store *store)
{
	return store->identity;
}

const char *
kagent_store_backend(const struct kagent_store *store)
{
	return store->backend->name;
}

const char *
kagent_store_name(const struct kagent_store *store)
{
	return store->name;
}

int
kagent_store_set_lease(struct kagent_store *store, double seconds, char **cause)
{
	if (!(seconds >= 1.0 && seconds <= 86400.0)) {
		*cause = kagent_asprintf("a lease of %g s: give 1 to 86400 seconds", seconds);
		return -EINVAL;
	}
	store->lease_seconds = seconds;
	return 0;
}

double
kagent_store_lease(const struct kagent_store *store)
{
	return store->lease_seconds;
}

void
kagent_store_set_gpu_name(struct kagent_store *store, const char *gpu_name)
{
	free(store->gpu_name);
	store->gpu_name = gpu_name != NULL ? kagent_strdup(gpu_name) : NULL;
}

int
kagent_store_raw_query(const char *url, const char *sql, long long *value_out, char **cause)
{
	struct kagent_store *store = NULL;
	struct store_rows rows = {0};
	int status;

	if (value_out != NULL)
		*value_out = 0;
	if ((status = store__connect(url, &store, cause)) < 0)
		return status;
	/* Not through the transaction helper: the statement may be a script of several. */
	if (value_out == NULL)
		status = store__script(store, "running a statement", sql, cause);
	else if ((status = store__query(store, "running a query", sql, NULL, 0, &rows, NULL,
					cause)) == 0)
		*value_out = store__cell_long(&rows, 0, 0);
	store__rows_clear(&rows);
	store->backend->disconnect(store->connection);
	store->connection = NULL;
	kagent_store_close(store);
	return status;
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
	struct store_value values[] = {STORE_TEXT(batch_id)};

	return store__query(store, "updating batch states",
			    "UPDATE batches SET state = CASE"
			    " WHEN state = 'cancelled' THEN 'cancelled'"
			    " WHEN NOT EXISTS (SELECT 1 FROM sessions s WHERE"
			    "  s.batch_id = batches.id AND s.state IN ('queued', 'running'))"
			    "  THEN 'done'"
			    " WHEN EXISTS (SELECT 1 FROM sessions s WHERE s.batch_id = batches.id"
			    "  AND (s.state <> 'queued' OR s.attempts > 0)) THEN 'running'"
			    " ELSE 'queued' END"
			    " WHERE CAST($1 AS TEXT) IS NULL OR id = $1",
			    values, 1, NULL, NULL, cause);
}

struct store__batch_create {
	const json_t *settings;
	const struct kagent_store_problem *problems;
	size_t count;
	const char *stamp;
	uint32_t random_bits;
	const char *batch_id;
};

static int
store__batch_create(struct kagent_store *store, void *data, char **cause)
{
	struct store__batch_create *create = data;
	char *settings = create->settings != NULL ? store__json_text(create->settings) : NULL;
	struct store_value batch[] = {STORE_TEXT(create->batch_id),
				      STORE_TEXT(settings != NULL ? settings : "{}"),
				      STORE_INTEGER((long long)create->count)};
	int status;

	status = store__query(store, "creating a batch",
			      "INSERT INTO batches (id, created_at, state, settings, problems)"
			      " VALUES ($1, kagent_now(), 'queued', $2, $3)",
			      batch, 3, NULL, NULL, cause);
	free(settings);
	for (size_t index = 0; status == 0 && index < create->count; index++) {
		const struct kagent_store_problem *problem = &create->problems[index];
		/* The run id: the batch's stamp and random bits make it unique across batches,
		 * the position within it. */
		char *run_id =
		    kagent_asprintf("%s-%08x-%04zu", create->stamp, create->random_bits, index + 1);
		char *name = store__problem_name(problem);
		struct store_value session[] = {
		    STORE_TEXT(run_id),
		    STORE_TEXT(create->batch_id),
		    STORE_INTEGER((long long)index + 1),
		    STORE_TEXT(problem->path),
		    STORE_TEXT(name),
		    problem->level > 0 ? STORE_INTEGER(problem->level) : STORE_TEXT(NULL),
		};

		status = store__query(store, "queueing a session",
				      "INSERT INTO sessions (id, batch_id, position, problem_path,"
				      " problem, level, state, created_at)"
				      " VALUES ($1, $2, $3, $4, $5, $6, 'queued', kagent_now())",
				      session, 6, NULL, NULL, cause);
		free(run_id);
		free(name);
	}
	if (status == 0)
		status = store__notify(store, cause);
	return status;
}

int
kagent_store_batch_create(struct kagent_store *store, const json_t *settings,
			  const struct kagent_store_problem *problems, size_t count,
			  char **batch_id_out, char **cause)
{
	struct store__batch_create create = {
	    .settings = settings, .problems = problems, .count = count};
	char stamp[32], *batch_id;
	int status;

	*batch_id_out = NULL;
	if (count == 0) {
		*cause = kagent_strdup("a batch needs at least one problem");
		return -EINVAL;
	}
	for (size_t index = 0; index < count; index++)
		if (problems[index].path == NULL || problems[index].path[0] == '\0') {
			*cause = kagent_asprintf("problem %zu of the batch has no path", index + 1);
			return -EINVAL;
		}
	store__stamp(stamp);
	if (getrandom(&create.random_bits, sizeof create.random_bits, 0) !=
	    sizeof create.random_bits)
		create.random_bits = (uint32_t)getpid() ^ (uint32_t)clock();
	batch_id = kagent_asprintf("b-%s-%08x", stamp, create.random_bits);
	create.stamp = stamp;
	create.batch_id = batch_id;
	status = store__write(store, store__batch_create, &create, cause);
	if (status < 0) {
		free(batch_id);
		return status;
	}
	*batch_id_out = batch_id;
	return 0;
}

#define STORE_BATCH_COLUMNS                                                                        \
	"b.id, b.created_at, b.state, b.settings, b.problems,"                                     \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'queued'),"       \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'running'),"      \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'done'),"         \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'failed'),"       \
	" (SELECT COUNT(*) FROM sessions s WHERE s.batch_id = b.id AND s.state = 'cancelled')"

static json_t *
store__batch_json(const struct store_rows *rows, size_t row)
{
	return json_pack(
	    "{s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:I, s:I}}", "id",
	    store__cell_string(rows, row, 0), "created_at", store__cell_string(rows, row, 1),
	    "state", store__cell_string(rows, row, 2), "settings", store__cell_json(rows, row, 3),
	    "problems", store__cell_integer(rows, row, 4), "counts", "queued",
	    (json_int_t)store__cell_long(rows, row, 5), "running",
	    (json_int_t)store__cell_long(rows, row, 6), "done",
	    (json_int_t)store__cell_long(rows, row, 7), "failed",
	    (json_int_t)store__cell_long(rows, row, 8), "cancelled",
	    (json_int_t)store__cell_long(rows, row, 9));
}

#define STORE_SESSION_COLUMNS                                                                      \
	"id, batch_id, position, problem_path, problem, level, state, gpu, attempts, resume,"      \
	" created_at, started_at, finished_at, trace_path, result, owner, gpu_name"

static json_t *
store__session_json(const struct store_rows *rows, size_t row)
{
	json_t *session = json_object();

	json_object_set_new(session, "id", store__cell_string(rows, row, 0));
	json_object_set_new(session, "batch_id", store__cell_string(rows, row, 1));
	json_object_set_new(session, "position", store__cell_integer(rows, row, 2));
	json_object_set_new(session, "problem_path", store__cell_string(rows, row, 3));
	json_object_set_new(session, "problem", store__cell_string(rows, row, 4));
	json_object_set_new(session, "level", store__cell_integer(rows, row, 5));
	json_object_set_new(session, "state", store__cell_string(rows, row, 6));
	json_object_set_new(session, "gpu", store__cell_string(rows, row, 7));
	json_object_set_new(session, "attempts", store__cell_integer(rows, row, 8));
	json_object_set_new(session, "resume", json_boolean(store__cell_long(rows, row, 9)));
	json_object_set_new(session, "created_at", store__cell_string(rows, row, 10));
	json_object_set_new(session, "started_at", store__cell_string(rows, row, 11));
	json_object_set_new(session, "finished_at", store__cell_string(rows, row, 12));
	json_object_set_new(session, "trace_path", store__cell_string(rows, row, 13));
	json_object_set_new(session, "result", store__cell_json(rows, row, 14));
	json_object_set_new(session, "owner", store__cell_string(rows, row, 15));
	json_object_set_new(session, "gpu_name", store__cell_string(rows, row, 16));
	return session;
}

struct store__lookup {
	const char *id;
	json_t *out;
};

static int
store__batch_list(struct kagent_store *store, void *data, char **cause)
{
	struct store__lookup *lookup = data;
	struct store_rows rows = {0};
	int status;

	status = store__query(store, "listing batches",
			      "SELECT " STORE_BATCH_COLUMNS " FROM batches b"
			      " ORDER BY b.created_at DESC, b.rowid DESC",
			      NULL, 0, &rows, NULL, cause);
	if (status == 0) {
		lookup->out = json_array();
		for (size_t row = 0; row < rows.row_count; row++)
			json_array_append_new(lookup->out, store__batch_json(&rows, row));
	}
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_batch_list(struct kagent_store *store, json_t **batches_out, char **cause)
{
	struct store__lookup lookup = {0};
	int status = store__read(store, store__batch_list, &lookup, cause);

	*batches_out = status == 0 ? lookup.out : NULL;
	return status;
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

/* The batch and its sessions, in one snapshot. */
static int
store__batch_get(struct kagent_store *store, void *data, char **cause)
{
	struct store__lookup *lookup = data;
	struct store_value values[] = {STORE_TEXT(lookup->id)};
	struct store_rows rows = {0};
	json_t *sessions;
	int status;

	status = store__query(store, "reading a batch",
			      "SELECT " STORE_BATCH_COLUMNS " FROM batches b WHERE b.id = $1",
			      values, 1, &rows, NULL, cause);
	if (status < 0)
		goto out;
	if (rows.row_count == 0) {
		status = store__no_batch(lookup->id, cause);
		goto out;
	}
	lookup->out = store__batch_json(&rows, 0);
	store__rows_clear(&rows);
	status = store__query(store, "reading a batch's sessions",
			      "SELECT " STORE_SESSION_COLUMNS " FROM sessions WHERE batch_id = $1"
			      " ORDER BY position",
			      values, 1, &rows, NULL, cause);
	if (status < 0)
		goto out;
	sessions = json_array();
	json_object_set_new(lookup->out, "sessions", sessions);
	for (size_t row = 0; row < rows.row_count; row++)
		json_array_append_new(sessions, store__session_json(&rows, row));
out:
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_batch_get(struct kagent_store *store, const char *batch_id, json_t **batch_out,
		       char **cause)
{
	struct store__lookup lookup = {.id = batch_id};
	int status = store__read(store, store__batch_get, &lookup, cause);

	if (status < 0) {
		json_decref(lookup.out);
		lookup.out = NULL;
	}
	*batch_out = lookup.out;
	return status;
}

static int
store__batch_cancel(struct kagent_store *store, void *data, char **cause)
{
	struct store__lookup *lookup = data;
	struct store_value values[] = {STORE_TEXT(lookup->id)};
	struct store_rows rows = {0};
	const char *state;
	int status;

	status = store__query(store, "reading a batch", "SELECT state FROM batches WHERE id = $1",
			      values, 1, &rows, NULL, cause);
	if (status < 0)
		goto out;
	if (rows.row_count == 0) {
		status = store__no_batch(lookup->id, cause);
		goto out;
	}
	state = store__cell(&rows, 0, 0);
	if (state != NULL && (strcmp(state, "done") == 0 || strcmp(state, "cancelled") == 0)) {
		*cause = kagent_asprintf("batch %s is already %s", lookup->id, state);
		status = -EALREADY;
		goto out;
	}
	store__rows_clear(&rows);
	if ((status = store__query(store, "cancelling queued sessions",
				   "UPDATE sessions SET state = 'cancelled', finished_at ="
				   " kagent_now() WHERE batch_id = $1 AND state = 'queued'",
				   values, 1, NULL, NULL, cause)) < 0 ||
	    (status = store__query(store, "listing running sessions",
				   "SELECT id FROM sessions WHERE batch_id = $1 AND"
				   " state = 'running' ORDER BY position",
				   values, 1, &rows, NULL, cause)) < 0 ||
	    (status = store__query(store, "cancelling a batch",
				   "UPDATE batches SET state = 'cancelled' WHERE id = $1", values,
				   1, NULL, NULL, cause)) < 0)
		goto out;
	json_decref(lookup->out);
	lookup->out = json_array();
	for (size_t row = 0; row < rows.row_count; row++)
		json_array_append_new(lookup->out, store__cell_string(&rows, row, 0));
out:
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_batch_cancel(struct kagent_store *store, const char *batch_id, json_t **running_out,
			  char **cause)
{
	struct store__lookup lookup = {.id = batch_id};
	int status = store__write(store, store__batch_cancel, &lookup, cause);

	if (status < 0) {
		json_decref(lookup.out);
		lookup.out = NULL;
	}
	*running_out = lookup.out;
	return status;
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

struct store__claim {
	const char *gpu;
	struct kagent_store_claim *claim;
};

/* The batch of a claimed session was served now: it goes behind every other batch with
 * queued work (round robin), and it has started. */
#define STORE_SERVE_BATCH                                                                          \
	"UPDATE batches SET served = (SELECT MAX(served) FROM batches) + 1,"                       \
	" state = CASE WHEN state = 'queued' THEN 'running' ELSE state END"

/*
 * The choice and the update are one statement: on SQLite under the file's write lock, on
 * PostgreSQL with the chosen row locked and rows other daemons hold skipped. A queued session
 * goes first by fairness; a running one whose lease ran out (its daemon is gone) is taken
 * over and resumed where it had said where its trace is.
 */
static int
store__claim(struct kagent_store *store, void *data, char **cause)
{
	struct store__claim *job = data;
	struct store_value values[] = {STORE_TEXT(job->gpu), STORE_TEXT(store->identity),
				       STORE_TEXT(store->gpu_name),
				       STORE_REAL(store->lease_seconds)};
	struct store_rows rows = {0};
	struct kagent_store_claim *claim;
	char *sql;
	int status;

	kagent_store_claim_free(job->claim);
	job->claim = NULL;
	sql = kagent_asprintf(
	    "%sUPDATE sessions SET state = 'running', gpu = $1, owner = $2, gpu_name = $3,"
	    " lease_until = kagent_epoch() + $4, attempts = attempts + 1,"
	    " cancel_requested = 0,"
	    " resume = CASE WHEN state = 'running' AND trace_path IS NOT NULL THEN 1"
	    "  ELSE resume END,"
	    " started_at = COALESCE(started_at, kagent_now())"
	    " WHERE id = (SELECT s.id FROM sessions s JOIN batches b ON b.id = s.batch_id"
	    "  WHERE s.state = 'queued' OR (s.state = 'running' AND b.state <> 'cancelled'"
	    "   AND s.lease_until < kagent_epoch())"
	    "  ORDER BY b.served, b.rowid, s.position LIMIT 1%s)"
	    " RETURNING id, batch_id, problem_path, problem, level, attempts, resume, trace_path"
	    "%s",
	    store->backend->one_statement_claim ? "WITH claimed AS (" : "",
	    store->backend->claim_lock,
	    store->backend->one_statement_claim ? "), served AS (" STORE_SERVE_BATCH
						  " WHERE id = (SELECT batch_id FROM claimed)"
						  " RETURNING settings)"
						  " SELECT claimed.*, served.settings"
						  " FROM claimed, served"
						: "");
	status = store__query(store, "claiming a session", sql, values, 4, &rows, NULL, cause);
	free(sql);
	if (status < 0 || rows.row_count == 0)
		goto out;
	claim = kagent_calloc(1, sizeof *claim);
	job->claim = claim;
	claim->session_id = store__cell_strdup(&rows, 0, 0);
	claim->batch_id = store__cell_strdup(&rows, 0, 1);
	claim->problem_path = store__cell_strdup(&rows, 0, 2);
	claim->problem = store__cell_strdup(&rows, 0, 3);
	claim->level = (int)store__cell_long(&rows, 0, 4);
	claim->attempt = (int)store__cell_long(&rows, 0, 5);
	claim->resume = (int)store__cell_long(&rows, 0, 6);
	claim->trace_path = store__cell_strdup(&rows, 0, 7);
	if (store->backend->one_statement_claim) {
		claim->settings = store__cell_json(&rows, 0, 8);
		goto out;
	}
	store__rows_clear(&rows);
	values[0] = STORE_TEXT(claim->batch_id);
	status = store__query(store, "updating the claimed session's batch",
			      STORE_SERVE_BATCH " WHERE id = $1 RETURNING settings", values, 1,
			      &rows, NULL, cause);
	if (status == 0)
		claim->settings = store__cell_json(&rows, 0, 0);
out:
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_session_claim(struct kagent_store *store, const char *gpu,
			   struct kagent_store_claim **claim_out, char **cause)
{
	struct store__claim job = {.gpu = gpu};
	/* One statement commits on its own: no transaction round trips while the batch's row,
	 * which every claim of the batch updates, is locked. */
	int status = store__transaction(
	    store, store->backend->one_statement_claim ? NULL : store->backend->begin_write,
	    store__claim, &job, cause);

	if (status < 0) {
		kagent_store_claim_free(job.claim);
		job.claim = NULL;
	}
	*claim_out = job.claim;
	return status;
}

int
kagent_store_session_set_trace(struct kagent_store *store, const char *session_id,
			       const char *trace_path, char **cause)
{
	struct store_value values[] = {STORE_TEXT(session_id), STORE_TEXT(trace_path)};
	long long changes = 0;
	int status;

	pthread_mutex_lock(&store->lock);
	status = store__query(store, "recording a trace path",
			      "UPDATE sessions SET trace_path = $2 WHERE id = $1", values, 2, NULL,
			      &changes, cause);
	pthread_mutex_unlock(&store->lock);
	if (status == 0 && changes == 0)
		status = store__no_session(session_id, cause);
	return status;
}

struct store__finish {
	const char *session_id;
	enum kagent_store_session_state state;
	const json_t *result;
	int cancel;	 /* kagent_store_session_cancel rather than finish */
	int running_out; /* cancel: the session is running, its owner ends it */
};

/* Finish and cancel: read the session's state (and owner), then end it. */
static int
store__finish(struct kagent_store *store, void *data, char **cause)
{
	struct store__finish *finish = data;
	struct store_value values[] = {STORE_TEXT(finish->session_id), STORE_TEXT(NULL),
				       STORE_TEXT(NULL)};
	struct store_rows rows = {0};
	const char *current, *owner;
	char *result_text = NULL;
	int status;

	/* The session's row, then its batch's (the order of the claim and the heartbeat, so
	 * that none of them waits on another in a cycle): the ends of one batch's sessions take
	 * turns, and the last one sees every other ended when it refreshes the batch's state.
	 * Without the batch's lock, two ends at once on PostgreSQL (READ COMMITTED) each saw the
	 * other's session still running, and the batch stayed 'running' for good. */
	status = store__query(store, "locking a session",
			      "UPDATE sessions SET state = state WHERE id = $1", values, 1, NULL,
			      NULL, cause);
	if (status == 0)
		status = store__query(store, "locking a session's batch",
				      "UPDATE batches SET state = state"
				      " WHERE id = (SELECT batch_id FROM sessions WHERE id = $1)",
				      values, 1, NULL, NULL, cause);
	if (status == 0)
		status = store__query(store, "reading a session",
				      "SELECT state, batch_id, owner FROM sessions WHERE id = $1",
				      values, 1, &rows, NULL, cause);
	if (status < 0)
		goto out;
	if (rows.row_count == 0) {
		status = store__no_session(finish->session_id, cause);
		goto out;
	}
	current = store__cell(&rows, 0, 0);
	owner = store__cell(&rows, 0, 2);
	if (finish->cancel) {
		if (current != NULL && strcmp(current, "running") == 0) {
			/* Its owner interrupts it: here, or on another machine at its heartbeat. */
			finish->running_out = 1;
			status =
			    store__query(store, "asking for a cancel",
					 "UPDATE sessions SET cancel_requested = 1 WHERE id = $1",
					 values, 1, NULL, NULL, cause);
			goto out;
		}
		if (current == NULL || strcmp(current, "queued") != 0) {
			*cause = kagent_asprintf("session %s is already %s", finish->session_id,
						 current != NULL ? current : "in no state");
			status = -EALREADY;
			goto out;
		}
	} else {
		if (current == NULL || strcmp(current, "running") != 0) {
			*cause =
			    kagent_asprintf("session %s is %s, not running", finish->session_id,
					    current != NULL ? current : "in no state");
			status = -EALREADY;
			goto out;
		}
		/* Another daemon took it over after this one's lease ran out: its end is that
		 * daemon's to write, not this one's. */
		if (owner != NULL && strcmp(owner, store->identity) != 0) {
			*cause = kagent_asprintf("session %s was taken over by daemon %s (this "
						 "daemon's lease ran out)",
						 finish->session_id, owner);
			status = -ESTALE;
			goto out;
		}
	}
	result_text = store__json_text(finish->result);
	values[1] = STORE_TEXT(kagent_store_session_state_name(
	    finish->cancel ? KAGENT_STORE_CANCELLED : finish->state));
	values[2] = STORE_TEXT(result_text);
	if ((status = store__query(store, "finishing a session",
				   "UPDATE sessions SET state = $2, result = $3, resume = 0,"
				   " lease_until = NULL, finished_at = kagent_now() WHERE id = $1",
				   values, 3, NULL, NULL, cause)) < 0)
		goto out;
	status = store__refresh_batches(store, store__cell(&rows, 0, 1), cause);
out:
	free(result_text);
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_session_finish(struct kagent_store *store, const char *session_id,
			    enum kagent_store_session_state state, const json_t *result,
			    char **cause)
{
	struct store__finish finish = {.session_id = session_id, .state = state, .result = result};

	if (state != KAGENT_STORE_DONE && state != KAGENT_STORE_FAILED &&
	    state != KAGENT_STORE_CANCELLED) {
		*cause = kagent_asprintf("a session cannot finish as %s",
					 kagent_store_session_state_name(state));
		return -EINVAL;
	}
	return store__write(store, store__finish, &finish, cause);
}

int
kagent_store_session_cancel(struct kagent_store *store, const char *session_id, int *running_out,
			    char **cause)
{
	struct store__finish finish = {.session_id = session_id, .cancel = 1};
	int status = store__write(store, store__finish, &finish, cause);

	*running_out = status == 0 ? finish.running_out : 0;
	return status;
}

static int
store__session_get(struct kagent_store *store, void *data, char **cause)
{
	struct store__lookup *lookup = data;
	struct store_value values[] = {STORE_TEXT(lookup->id)};
	struct store_rows rows = {0};
	int status;

	status = store__query(store, "reading a session",
			      "SELECT " STORE_SESSION_COLUMNS " FROM sessions WHERE id = $1",
			      values, 1, &rows, NULL, cause);
	if (status == 0 && rows.row_count == 0)
		status = store__no_session(lookup->id, cause);
	else if (status == 0)
		lookup->out = store__session_json(&rows, 0);
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_session_get(struct kagent_store *store, const char *session_id, json_t **session_out,
			 char **cause)
{
	struct store__lookup lookup = {.id = session_id};
	int status = store__read(store, store__session_get, &lookup, cause);

	*session_out = status == 0 ? lookup.out : NULL;
	return status;
}

/* ---- recovery, leases ---- */

/*
 * Whether the daemon owner (host:pid:random) is gone for certain: it ran on this host and
 * its process no longer exists. Anything else (another host, a live pid) is left to its lease.
 */
static int
store__owner_is_dead_here(const char *owner)
{
	const char *last = owner != NULL ? strrchr(owner, ':') : NULL, *pid_start;
	char host[256] = "";
	long pid;

	if (last == NULL || last == owner)
		return 0;
	for (pid_start = last - 1; pid_start > owner && *pid_start != ':'; pid_start--)
		;
	if (*pid_start != ':' || gethostname(host, sizeof host - 1) != 0)
		return 0;
	if ((size_t)(pid_start - owner) != strlen(host) ||
	    strncmp(owner, host, (size_t)(pid_start - owner)) != 0)
		return 0;
	pid = strtol(pid_start + 1, NULL, 10);
	if (pid <= 0)
		return 0;
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

struct store__recover {
	int recovered;
};

static int
store__recover(struct kagent_store *store, void *data, char **cause)
{
	struct store__recover *recover = data;
	struct store_rows rows = {0};
	int status, requeued = 0;

	recover->recovered = 0;
	status = store__query(store, "reading running sessions",
			      "SELECT s.id, s.owner, b.state,"
			      " CASE WHEN s.lease_until IS NULL OR s.lease_until < kagent_epoch()"
			      "  THEN 1 ELSE 0 END"
			      " FROM sessions s JOIN batches b ON b.id = s.batch_id"
			      " WHERE s.state = 'running' ORDER BY s.batch_id, s.position",
			      NULL, 0, &rows, NULL, cause);
	for (size_t row = 0; status == 0 && row < rows.row_count; row++) {
		const char *owner = store__cell(&rows, row, 1);
		const char *batch_state = store__cell(&rows, row, 2);
		struct store_value values[] = {STORE_TEXT(store__cell(&rows, row, 0)),
					       STORE_TEXT(owner)};
		long long changes = 0;

		if (store__cell_long(&rows, row, 3) == 0 && owner != NULL &&
		    !store__owner_is_dead_here(owner))
			continue; /* a live daemon's, or one whose lease has not run out yet */
		if (batch_state != NULL && strcmp(batch_state, "cancelled") == 0) {
			/* It was being interrupted: it ends cancelled. */
			status = store__query(store, "cancelling a session of a cancelled batch",
					      "UPDATE sessions SET state = 'cancelled', resume = 0,"
					      " lease_until = NULL, finished_at = kagent_now()"
					      " WHERE id = $1",
					      values, 1, NULL, NULL, cause);
			continue;
		}
		/* Back to the queue under the same run id; resume only where the session had
		 * said where its trace is: before that, nothing was written to resume from. */
		status = store__query(store, "requeueing a session",
				      "UPDATE sessions SET state = 'queued', gpu = NULL,"
				      " owner = NULL, lease_until = NULL,"
				      " resume = CASE WHEN trace_path IS NOT NULL THEN 1"
				      "  ELSE resume END"
				      " WHERE id = $1 AND state = 'running' AND"
				      " (CAST($2 AS TEXT) IS NULL OR owner = $2)",
				      values, 2, NULL, &changes, cause);
		requeued += (int)changes;
	}
	if (status == 0 && (status = store__refresh_batches(store, NULL, cause)) == 0 &&
	    requeued > 0)
		status = store__notify(store, cause);
	if (status == 0)
		recover->recovered = requeued;
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_recover(struct kagent_store *store, int *recovered_out, char **cause)
{
	struct store__recover recover = {0};
	int status = store__write(store, store__recover, &recover, cause);

	if (recovered_out != NULL)
		*recovered_out = status == 0 ? recover.recovered : 0;
	return status;
}

struct store__heartbeat {
	json_t *held;	   /* the running sessions this store holds, their leases renewed */
	json_t *cancelled; /* those of them a cancel reached elsewhere */
};

/* The first column of rows as an array of strings. */
static json_t *
store__id_array(const struct store_rows *rows)
{
	json_t *ids = json_array();

	for (size_t row = 0; row < rows->row_count; row++)
		json_array_append_new(ids, store__cell_string(rows, row, 0));
	return ids;
}

/* Renews this daemon's leases; lists its sessions cancelled through another daemon; ends the
 * sessions of cancelled batches whose daemon is gone. */
static int
store__heartbeat(struct kagent_store *store, void *data, char **cause)
{
	struct store__heartbeat *heartbeat = data;
	struct store_value values[] = {STORE_TEXT(store->identity),
				       STORE_REAL(store->lease_seconds)};
	struct store_rows held = {0}, cancelled = {0};
	long long reaped = 0;
	int status;

	status = store__query(store, "renewing leases",
			      "UPDATE sessions SET lease_until = kagent_epoch() + $2"
			      " WHERE owner = $1 AND state = 'running' RETURNING id",
			      values, 2, &held, NULL, cause);
	if (status == 0)
		status =
		    store__query(store, "reading cancels",
				 "SELECT s.id FROM sessions s JOIN batches b ON b.id = s.batch_id"
				 " WHERE s.owner = $1 AND s.state = 'running' AND"
				 " (s.cancel_requested = 1 OR b.state = 'cancelled')"
				 " ORDER BY s.id",
				 values, 1, &cancelled, NULL, cause);
	if (status == 0)
		status = store__query(
		    store, "ending sessions of cancelled batches",
		    "UPDATE sessions SET state = 'cancelled', resume = 0, lease_until = NULL,"
		    " finished_at = kagent_now() WHERE state = 'running' AND"
		    " lease_until < kagent_epoch() AND batch_id IN"
		    " (SELECT id FROM batches WHERE state = 'cancelled')",
		    NULL, 0, NULL, &reaped, cause);
	if (status == 0 && reaped > 0)
		status = store__refresh_batches(store, NULL, cause);
	json_decref(heartbeat->held);
	json_decref(heartbeat->cancelled);
	heartbeat->held = store__id_array(&held);
	heartbeat->cancelled = store__id_array(&cancelled);
	store__rows_clear(&held);
	store__rows_clear(&cancelled);
	return status;
}

int
kagent_store_heartbeat(struct kagent_store *store, json_t **held_out, json_t **cancelled_out,
		       char **cause)
{
	struct store__heartbeat heartbeat = {0};
	int status = store__write(store, store__heartbeat, &heartbeat, cause);

	if (held_out != NULL) {
		*held_out = status == 0 ? heartbeat.held : NULL;
		heartbeat.held = status == 0 ? NULL : heartbeat.held;
	}
	if (cancelled_out != NULL) {
		*cancelled_out = status == 0 ? heartbeat.cancelled : NULL;
		heartbeat.cancelled = status == 0 ? NULL : heartbeat.cancelled;
	}
	json_decref(heartbeat.held);
	json_decref(heartbeat.cancelled);
	return status;
}

int
kagent_store_listen(struct kagent_store *store, uv_loop_t *loop, void (*wake)(void *data),
		    void *data, char **cause)
{
	int status;

	if (store->backend->listen == NULL || store->listener != NULL)
		return 0;
	status = store->backend->listen(store->location, store->name, loop, wake, data,
					&store->listener, cause);
	return status < 0 ? store__failed(store, status, "listening", cause) : 0;
}

void
kagent_store_listen_stop(struct kagent_store *store)
{
	if (store->listener == NULL)
		return;
	store->backend->listen_stop(store->listener);
	store->listener = NULL;
}

/* ---- trace records ---- */

struct store__trace_append {
	const struct kagent_store_trace_line *lines;
	size_t count;
	int appended;
};

/* Each line as it is: the store keeps the text the trace file holds, nothing parsed. */
static int
store__trace_append(struct kagent_store *store, void *data, char **cause)
{
	struct store__trace_append *append = data;
	int status = 0;

	append->appended = 0;
	for (size_t index = 0; index < append->count; index++) {
		const struct kagent_store_trace_line *line = &append->lines[index];
		struct store_value values[] = {STORE_TEXT(line->session_id),
					       STORE_INTEGER(line->seq), STORE_TEXT(line->text)};
		long long changes = 0;

		status = store__query(store, "storing a trace record",
				      "INSERT INTO trace_records (session_id, seq, record)"
				      " VALUES ($1, $2, $3)"
				      " ON CONFLICT (session_id, seq) DO NOTHING",
				      values, 3, NULL, &changes, cause);
		if (status == -EEXIST) {
			/* The only constraint left once the conflict is ignored: the session. */
			free(*cause);
			status = store__no_session(line->session_id, cause);
		}
		if (status < 0)
			break;
		append->appended += (int)changes;
	}
	return status;
}

int
kagent_store_trace_append_lines(struct kagent_store *store,
				const struct kagent_store_trace_line *lines, size_t count,
				int *appended_out, char **cause)
{
	struct store__trace_append append = {.lines = lines, .count = count};
	int status;

	if (appended_out != NULL)
		*appended_out = 0;
	for (size_t index = 0; index < count; index++) {
		if (lines[index].seq < 1 || lines[index].session_id == NULL ||
		    lines[index].text == NULL) {
			*cause = kagent_asprintf("trace line %zu has no session, seq (1, 2, ...) "
						 "or text",
						 index + 1);
			return -EINVAL;
		}
	}
	if (count == 0)
		return 0;
	status = store__write(store, store__trace_append, &append, cause);
	if (status == 0 && appended_out != NULL)
		*appended_out = append.appended;
	return status;
}

int
kagent_store_trace_append(struct kagent_store *store, const char *session_id, const json_t *records,
			  int *appended_out, char **cause)
{
	struct kagent_store_trace_line *lines;
	size_t index, count;
	json_t *record;
	int status = 0;

	if (appended_out != NULL)
		*appended_out = 0;
	if (!json_is_array(records)) {
		*cause = kagent_strdup("trace records must be an array");
		return -EINVAL;
	}
	count = json_array_size(records);
	lines = kagent_calloc(count + 1, sizeof *lines);
	json_array_foreach(records, index, record)
	{
		json_t *seq = json_object_get(record, "seq");

		if (!json_is_integer(seq) || json_integer_value(seq) < 1) {
			*cause =
			    kagent_asprintf("trace record %zu has no seq (1, 2, ...)", index + 1);
			status = -EINVAL;
			count = index;
			goto out;
		}
		lines[index] = (struct kagent_store_trace_line){
		    .session_id = session_id,
		    .seq = json_integer_value(seq),
		    .text = store__json_text(record),
		};
	}
	status = kagent_store_trace_append_lines(store, lines, count, appended_out, cause);
out:
	for (index = 0; index < count; index++)
		free((char *)lines[index].text);
	free(lines);
	return status;
}

static int
store__trace_read(struct kagent_store *store, void *data, char **cause)
{
	struct store__lookup *lookup = data;
	struct store_value values[] = {STORE_TEXT(lookup->id)};
	struct store_rows rows = {0};
	int status;

	status = store__query(store, "reading trace records",
			      "SELECT record FROM trace_records WHERE session_id = $1"
			      " ORDER BY seq",
			      values, 1, &rows, NULL, cause);
	if (status == 0) {
		lookup->out = json_array();
		for (size_t row = 0; row < rows.row_count; row++)
			json_array_append_new(lookup->out, store__cell_json(&rows, row, 0));
	}
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_trace_read(struct kagent_store *store, const char *session_id, json_t **records_out,
			char **cause)
{
	struct store__lookup lookup = {.id = session_id};
	int status = store__read(store, store__trace_read, &lookup, cause);

	*records_out = status == 0 ? lookup.out : NULL;
	return status;
}

/* ---- variants ---- */

int
kagent_store_variant_record(struct kagent_store *store, const struct kagent_store_variant *variant,
			    int *inserted_out, char **cause)
{
	char *verdict = store__json_text(variant->verdict);
	struct store_value values[] = {
	    STORE_TEXT(variant->session_id),	   STORE_TEXT(variant->variant_id),
	    STORE_TEXT(variant->parent),	   STORE_TEXT(verdict),
	    STORE_REAL(variant->speedup_vs_eager), STORE_REAL(variant->speedup_vs_compile),
	    STORE_INTEGER(variant->credited != 0), STORE_TEXT(store->gpu_name),
	};
	long long changes = 0;
	int status;

	if (inserted_out != NULL)
		*inserted_out = 0;
	pthread_mutex_lock(&store->lock);
	status = store__query(store, "recording a variant",
			      "INSERT INTO variants (session_id, variant_id, parent, verdict,"
			      " speedup_vs_eager, speedup_vs_compile, credited, gpu_name,"
			      " created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, kagent_now())"
			      " ON CONFLICT (session_id, variant_id) DO NOTHING",
			      values, 8, NULL, &changes, cause);
	pthread_mutex_unlock(&store->lock);
	free(verdict);
	if (status == -EEXIST) {
		/* The only constraint left once the conflict is ignored: the session. */
		free(*cause);
		return store__no_session(variant->session_id, cause);
	}
	if (status == 0 && inserted_out != NULL)
		*inserted_out = changes > 0;
	return status;
}

struct store__commit {
	const char *session_id, *variant_id, *commit_id;
	int first;
};

static int
store__variant_commit(struct kagent_store *store, void *data, char **cause)
{
	struct store__commit *commit = data;
	struct store_value values[] = {STORE_TEXT(commit->session_id),
				       STORE_TEXT(commit->variant_id),
				       STORE_TEXT(commit->commit_id)};
	long long changes = 0, known = 0;
	struct store_rows rows = {0};
	int status;

	status = store__query(store, "marking a variant committed",
			      "UPDATE variants SET committed = 1, commit_id = $3"
			      " WHERE session_id = $1 AND variant_id = $2 AND committed = 0",
			      values, 3, NULL, &changes, cause);
	commit->first = status == 0 && changes > 0;
	if (status < 0 || commit->first)
		return status;
	status = store__query(store, "reading a variant",
			      "SELECT COUNT(*) FROM variants WHERE session_id = $1 AND"
			      " variant_id = $2",
			      values, 2, &rows, NULL, cause);
	known = store__cell_long(&rows, 0, 0);
	store__rows_clear(&rows);
	if (status == 0 && known == 0) {
		*cause = kagent_asprintf("session %s has no variant %s recorded",
					 commit->session_id, commit->variant_id);
		status = -ENOENT;
	}
	return status;
}

int
kagent_store_variant_commit(struct kagent_store *store, const char *session_id,
			    const char *variant_id, const char *commit_id, int *first_out,
			    char **cause)
{
	struct store__commit commit = {
	    .session_id = session_id, .variant_id = variant_id, .commit_id = commit_id};
	int status = store__write(store, store__variant_commit, &commit, cause);

	if (first_out != NULL)
		*first_out = status == 0 && commit.first;
	return status;
}

static int
store__variant_list(struct kagent_store *store, void *data, char **cause)
{
	struct store__lookup *lookup = data;
	struct store_value values[] = {STORE_TEXT(lookup->id)};
	struct store_rows rows = {0};
	int status;

	status = store__query(store, "listing variants",
			      "SELECT variant_id, parent, verdict, speedup_vs_eager,"
			      " speedup_vs_compile, credited, committed, commit_id, created_at,"
			      " gpu_name FROM variants WHERE session_id = $1 ORDER BY rowid",
			      values, 1, &rows, NULL, cause);
	if (status == 0) {
		lookup->out = json_array();
		for (size_t row = 0; row < rows.row_count; row++)
			json_array_append_new(
			    lookup->out,
			    json_pack("{s:o, s:o, s:o, s:f, s:f, s:b, s:b, s:o, s:o, s:o}",
				      "variant", store__cell_string(&rows, row, 0), "parent",
				      store__cell_string(&rows, row, 1), "verdict",
				      store__cell_json(&rows, row, 2), "speedup_vs_eager",
				      store__cell_real(&rows, row, 3), "speedup_vs_compile",
				      store__cell_real(&rows, row, 4), "credited",
				      (int)store__cell_long(&rows, row, 5), "committed",
				      (int)store__cell_long(&rows, row, 6), "commit",
				      store__cell_string(&rows, row, 7), "created_at",
				      store__cell_string(&rows, row, 8), "gpu_name",
				      store__cell_string(&rows, row, 9)));
	}
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_variant_list(struct kagent_store *store, const char *session_id, json_t **variants_out,
			  char **cause)
{
	struct store__lookup lookup = {.id = session_id};
	int status = store__read(store, store__variant_list, &lookup, cause);

	*variants_out = status == 0 ? lookup.out : NULL;
	return status;
}

/* ---- baselines ---- */

int
kagent_store_baseline_get(struct kagent_store *store, const char *problem_sha256,
			  const char *device, json_t **timings_out, char **cause)
{
	struct store_value values[] = {STORE_TEXT(problem_sha256), STORE_TEXT(device)};
	struct store_rows rows = {0};
	int status;

	*timings_out = NULL;
	pthread_mutex_lock(&store->lock);
	status = store__query(store, "reading baselines",
			      "SELECT timings FROM baselines WHERE problem_sha256 = $1 AND"
			      " device = $2",
			      values, 2, &rows, NULL, cause);
	pthread_mutex_unlock(&store->lock);
	if (status == 0 && rows.row_count == 0) {
		*cause =
		    kagent_asprintf("no baselines for problem %s on %s", problem_sha256, device);
		status = -ENOENT;
	} else if (status == 0) {
		*timings_out = store__cell_json(&rows, 0, 0);
	}
	store__rows_clear(&rows);
	return status;
}

int
kagent_store_baseline_put(struct kagent_store *store, const char *problem_sha256,
			  const char *device, const json_t *timings, char **cause)
{
	char *text;
	int status;

	if (timings == NULL) {
		*cause = kagent_strdup("no baseline timings to store");
		return -EINVAL;
	}
	text = store__json_text(timings);
	{
		struct store_value values[] = {STORE_TEXT(problem_sha256), STORE_TEXT(device),
					       STORE_TEXT(text)};

		pthread_mutex_lock(&store->lock);
		status =
		    store__query(store, "storing baselines",
				 "INSERT INTO baselines (problem_sha256, device, timings,"
				 " updated_at) VALUES ($1, $2, $3, kagent_now())"
				 " ON CONFLICT (problem_sha256, device) DO UPDATE SET"
				 " timings = excluded.timings, updated_at = excluded.updated_at",
				 values, 3, NULL, NULL, cause);
		pthread_mutex_unlock(&store->lock);
	}
	free(text);
	return status;
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
