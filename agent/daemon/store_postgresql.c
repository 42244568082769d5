/*
 * The store on PostgreSQL (store_backend.h, docs/store.md), through libpq: one queue shared
 * by the daemons of several machines. Its schema's migrations (the same tables as SQLite's,
 * in PostgreSQL's types, with a rowid column where the shared SQL orders by insertion),
 * statements with $N parameters sent as text, and LISTEN/NOTIFY on a second connection
 * watched by a uv_poll_t on the daemon's loop, so idle daemons wake when work is queued.
 */
#include "store_backend.h"

#include "kagent/base/alloc.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The channel NOTIFY and LISTEN share. */
#define POSTGRESQL_STORE_CHANNEL "kagent_queue"

/* Any fixed key: the advisory lock that serialises migrations across daemons. */
#define POSTGRESQL_STORE_SCHEMA_LOCK "SELECT pg_advisory_xact_lock(7240514)"

/* A released migration is never edited: a change is a new entry at the end (docs/store.md). */
static const struct store_migration store_postgresql__migrations[] = {
    {1, "batches, sessions, variants and baselines",
     /* Times as the same ISO 8601 text SQLite keeps; leases in seconds since 1970, by the
      * server's clock, so that the machines' clocks never have to agree. */
     "CREATE FUNCTION kagent_now() RETURNS text LANGUAGE sql STABLE AS"
     " $$ SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') $$;"
     "CREATE FUNCTION kagent_epoch() RETURNS double precision LANGUAGE sql VOLATILE AS"
     " $$ SELECT extract(epoch FROM clock_timestamp())::double precision $$;"
     "CREATE TABLE batches ("
     " rowid BIGSERIAL UNIQUE,"
     " id TEXT PRIMARY KEY,"
     " created_at TEXT NOT NULL,"
     " state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'cancelled')),"
     " settings TEXT NOT NULL,"
     " problems BIGINT NOT NULL,"
     " served BIGINT NOT NULL DEFAULT 0);"
     "CREATE TABLE sessions ("
     " id TEXT PRIMARY KEY,"
     " batch_id TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,"
     " position BIGINT NOT NULL,"
     " problem_path TEXT NOT NULL,"
     " problem TEXT NOT NULL,"
     " level BIGINT,"
     " state TEXT NOT NULL"
     "  CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),"
     " gpu TEXT,"
     " attempts BIGINT NOT NULL DEFAULT 0,"
     " resume BIGINT NOT NULL DEFAULT 0,"
     " created_at TEXT NOT NULL,"
     " started_at TEXT,"
     " finished_at TEXT,"
     " trace_path TEXT,"
     " result TEXT,"
     " UNIQUE (batch_id, position));"
     "CREATE TABLE variants ("
     " rowid BIGSERIAL UNIQUE,"
     " session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
     " variant_id TEXT NOT NULL,"
     " parent TEXT,"
     " verdict TEXT,"
     " speedup_vs_eager DOUBLE PRECISION NOT NULL DEFAULT 0,"
     " speedup_vs_compile DOUBLE PRECISION NOT NULL DEFAULT 0,"
     " credited BIGINT NOT NULL DEFAULT 0,"
     " committed BIGINT NOT NULL DEFAULT 0,"
     " commit_id TEXT,"
     " created_at TEXT NOT NULL,"
     " PRIMARY KEY (session_id, variant_id));"
     "CREATE TABLE baselines ("
     " problem_sha256 TEXT NOT NULL,"
     " device TEXT NOT NULL,"
     " timings TEXT NOT NULL,"
     " updated_at TEXT NOT NULL,"
     " PRIMARY KEY (problem_sha256, device));"},
    {2, "an index of sessions by state, for the claim and the batch counts",
     "CREATE INDEX sessions_by_state ON sessions (state, batch_id, position);"},
    {3, "leases, daemon and GPU identities, trace records",
     "ALTER TABLE sessions ADD COLUMN owner TEXT;"
     "ALTER TABLE sessions ADD COLUMN lease_until DOUBLE PRECISION;"
     "ALTER TABLE sessions ADD COLUMN gpu_name TEXT;"
     /* a cancel asked of a running session, for the daemon that runs it */
     "ALTER TABLE sessions ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE variants ADD COLUMN gpu_name TEXT;"
     "CREATE TABLE trace_records ("
     " session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
     " seq BIGINT NOT NULL,"
     " record TEXT NOT NULL,"
     " PRIMARY KEY (session_id, seq));"},
};

/* Server messages (NOTICE: "relation already exists, skipping") are not the daemon's log. */
static void
store_postgresql__quiet(void *data, const char *message)
{
	(void)data;
	(void)message;
}

/* The errno for a failed statement, by its SQLSTATE class (PostgreSQL's appendix A). */
static int
store_postgresql__errno(const PGresult *result, PGconn *connection)
{
	const char *state = result != NULL ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : NULL;

	if (PQstatus(connection) == CONNECTION_BAD)
		return -ECONNRESET;
	if (state == NULL)
		return -EIO;
	if (strncmp(state, "23", 2) == 0)
		return -EEXIST; /* integrity constraint violation */
	if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0)
		return -EAGAIN; /* serialization failure, deadlock: try again */
	if (strcmp(state, "55P03") == 0)
		return -EBUSY; /* lock not available */
	if (strncmp(state, "28", 2) == 0 || strcmp(state, "42501") == 0)
		return -EACCES;
	if (strcmp(state, "53100") == 0)
		return -ENOSPC;
	if (strcmp(state, "53200") == 0)
		return -ENOMEM;
	if (strncmp(state, "08", 2) == 0 || strncmp(state, "57", 2) == 0)
		return -ECONNRESET;
	return -EIO;
}

static int
store_postgresql__fail(PGconn *connection, const PGresult *result, const char *name, char **cause)
{
	const char *message =
	    result != NULL ? PQresultErrorMessage(result) : PQerrorMessage(connection);
	size_t length = strlen(message);

	/* libpq's messages end in a newline. */
	while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == ' '))
		length--;
	(void)name;
	*cause = kagent_strndup(message, length);
	return store_postgresql__errno(result, connection);
}

/* A connection lost (the server restarted, the network dropped) is opened again once before
 * the next statement; if that fails too, the statement fails and the caller tries later. */
static int
store_postgresql__ready(PGconn *connection, const char *name, char **cause)
{
	if (PQstatus(connection) == CONNECTION_OK)
		return 0;
	PQreset(connection);
	if (PQstatus(connection) == CONNECTION_OK)
		return 0;
	return store_postgresql__fail(connection, NULL, name, cause);
}

static int
store_postgresql__open(const char *location, const char *name, PGconn **connection_out,
		       char **cause)
{
	PGconn *connection = PQconnectdb(location);

	*connection_out = NULL;
	if (PQstatus(connection) != CONNECTION_OK) {
		/* Refused, unknown host, bad password: the cause says which. */
		store_postgresql__fail(connection, NULL, name, cause);
		PQfinish(connection);
		return -ECONNREFUSED;
	}
	PQsetNoticeProcessor(connection, store_postgresql__quiet, NULL);
	*connection_out = connection;
	return 0;
}

static int
store_postgresql__connect(const char *location, const char *name, void **connection_out,
			  char **cause)
{
	PGconn *connection = NULL;
	int result = store_postgresql__open(location, name, &connection, cause);

	*connection_out = connection;
	return result;
}

static void
store_postgresql__disconnect(void *connection)
{
	PQfinish(connection);
}

static int
store_postgresql__script(void *connection, const char *name, const char *sql, char **cause)
{
	PGresult *result;
	int status;

	if ((status = store_postgresql__ready(connection, name, cause)) < 0)
		return status;
	result = PQexec(connection, sql);
	status =
	    PQresultStatus(result) == PGRES_COMMAND_OK || PQresultStatus(result) == PGRES_TUPLES_OK
		? 0
		: store_postgresql__fail(connection, result, name, cause);
	PQclear(result);
	return status;
}

static int
store_postgresql__query(void *connection, const char *name, const char *sql,
			const struct store_value *values, size_t count, struct store_rows *rows,
			long long *changes, char **cause)
{
	const char **texts = kagent_calloc(count + 1, sizeof *texts);
	char **owned = kagent_calloc(count + 1, sizeof *owned);
	PGresult *result = NULL;
	size_t index;
	int status;

	if (rows != NULL)
		*rows = (struct store_rows){0};
	if ((status = store_postgresql__ready(connection, name, cause)) < 0)
		goto out;
	/* Every parameter as text: the server infers its type from where it is used. */
	for (index = 0; index < count; index++) {
		switch (values[index].kind) {
		case STORE_VALUE_NULL:
			break;
		case STORE_VALUE_TEXT:
			texts[index] = values[index].text;
			break;
		case STORE_VALUE_INTEGER:
			owned[index] = kagent_asprintf("%lld", values[index].integer);
			texts[index] = owned[index];
			break;
		case STORE_VALUE_REAL:
			owned[index] = kagent_asprintf("%.17g", values[index].real);
			texts[index] = owned[index];
			break;
		}
	}
	result = PQexecParams(connection, sql, (int)count, NULL, texts, NULL, NULL, 0);
	if (PQresultStatus(result) != PGRES_COMMAND_OK &&
	    PQresultStatus(result) != PGRES_TUPLES_OK) {
		status = store_postgresql__fail(connection, result, name, cause);
		goto out;
	}
	if (rows != NULL && PQresultStatus(result) == PGRES_TUPLES_OK) {
		size_t row_count = (size_t)PQntuples(result), columns = (size_t)PQnfields(result);

		rows->row_count = row_count;
		rows->column_count = columns;
		rows->cells = kagent_calloc(row_count * columns + 1, sizeof *rows->cells);
		for (size_t row = 0; row < row_count; row++)
			for (size_t column = 0; column < columns; column++)
				if (!PQgetisnull(result, (int)row, (int)column))
					rows->cells[row * columns + column] = kagent_strdup(
					    PQgetvalue(result, (int)row, (int)column));
	}
	if (changes != NULL)
		*changes = strtoll(PQcmdTuples(result), NULL, 10);
out:
	PQclear(result);
	for (index = 0; index < count; index++)
		free(owned[index]);
	free(owned);
	free(texts);
	return status;
}

/* ---- LISTEN on the loop ---- */

struct store_postgresql__listener {
	PGconn *connection;
	uv_poll_t poll;
	void (*wake)(void *data);
	void *data;
	char *name;
};

static void
store_postgresql__listener_closed(uv_handle_t *handle)
{
	struct store_postgresql__listener *listener = handle->data;

	PQfinish(listener->connection);
	free(listener->name);
	free(listener);
}

/* The socket is readable: take what arrived and wake once for however many notifications. */
static void
store_postgresql__readable(uv_poll_t *poll, int status, int events)
{
	struct store_postgresql__listener *listener = poll->data;
	PGnotify *notification;
	int woken = 0;

	(void)events;
	if (status < 0 || !PQconsumeInput(listener->connection)) {
		/* The daemon still wakes on its heartbeat; only the prompt wake-up is lost. */
		fprintf(stderr,
			"kagentd: store %s: the LISTEN connection failed (%s); idle daemons now "
			"wake on the heartbeat only\n",
			listener->name,
			status < 0 ? uv_strerror(status) : PQerrorMessage(listener->connection));
		uv_poll_stop(poll);
		return;
	}
	while ((notification = PQnotifies(listener->connection)) != NULL) {
		PQfreemem(notification);
		woken = 1;
	}
	if (woken)
		listener->wake(listener->data);
}

static int
store_postgresql__listen(const char *location, const char *name, uv_loop_t *loop,
			 void (*wake)(void *data), void *data, void **listener_out, char **cause)
{
	struct store_postgresql__listener *listener = kagent_calloc(1, sizeof *listener);
	int status;

	*listener_out = NULL;
	listener->wake = wake;
	listener->data = data;
	listener->name = kagent_strdup(name);
	if ((status = store_postgresql__open(location, name, &listener->connection, cause)) < 0 ||
	    (status = store_postgresql__script(listener->connection, name,
					       "LISTEN " POSTGRESQL_STORE_CHANNEL, cause)) < 0)
		goto fail;
	if (PQsetnonblocking(listener->connection, 1) != 0) {
		status = store_postgresql__fail(listener->connection, NULL, name, cause);
		goto fail;
	}
	if ((status = uv_poll_init(loop, &listener->poll, PQsocket(listener->connection))) < 0) {
		*cause = kagent_asprintf("store %s: watching the LISTEN connection: %s", name,
					 uv_strerror(status));
		goto fail;
	}
	listener->poll.data = listener;
	uv_poll_start(&listener->poll, UV_READABLE, store_postgresql__readable);
	*listener_out = listener;
	return 0;
fail:
	PQfinish(listener->connection);
	free(listener->name);
	free(listener);
	return status;
}

static void
store_postgresql__listen_stop(void *listener_pointer)
{
	struct store_postgresql__listener *listener = listener_pointer;

	uv_poll_stop(&listener->poll);
	uv_close((uv_handle_t *)&listener->poll, store_postgresql__listener_closed);
}

const struct store_backend kagent_store_postgresql_backend = {
    .name = "postgresql",
    .migrations = store_postgresql__migrations,
    .migration_count = sizeof store_postgresql__migrations / sizeof store_postgresql__migrations[0],
    .begin_write = "BEGIN",
    /* One snapshot for a batch and its sessions. */
    .begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    .schema_lock = POSTGRESQL_STORE_SCHEMA_LOCK,
    /* Rows another daemon is claiming are passed over, not waited for. */
    .claim_lock = " FOR UPDATE OF s SKIP LOCKED",
    /* Four round trips (BEGIN, two statements, COMMIT) become one: the batch's row, which
     * every claim of a batch updates, is locked for one statement instead of two round
     * trips (bench/store_claims.py, docs/benchmarks.md). */
    .one_statement_claim = 1,
    .notify = "NOTIFY " POSTGRESQL_STORE_CHANNEL,
    .connect = store_postgresql__connect,
    .disconnect = store_postgresql__disconnect,
    .script = store_postgresql__script,
    .query = store_postgresql__query,
    .listen = store_postgresql__listen,
    .listen_stop = store_postgresql__listen_stop,
};
