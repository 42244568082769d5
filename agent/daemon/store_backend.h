/*
 * The store's backends (docs/store.md), private to agent/daemon/: store.c holds the queue's
 * logic once, written in the SQL both engines speak, and each backend (store_sqlite.c,
 * store_postgresql.c) gives it a connection, parameterised statements, its schema's
 * migrations and the few phrases where the dialects differ. Parameters are written $1, $2...
 * in every backend; rows come back as text (NULL for SQL NULL). A backend's *cause is the
 * engine's own message; store.c adds the store's name and what it was doing. A backend calls
 * nothing of store.c (store.c chooses the backends, so the modules form no circle).
 */
#ifndef KAGENT_STORE_BACKEND_H
#define KAGENT_STORE_BACKEND_H

#include <stddef.h>
#include <uv.h>

enum store_value_kind {
	STORE_VALUE_NULL,
	STORE_VALUE_TEXT,
	STORE_VALUE_INTEGER,
	STORE_VALUE_REAL,
};

/* One parameter of a statement; text is borrowed. */
struct store_value {
	enum store_value_kind kind;
	const char *text;
	long long integer;
	double real;
};

#define STORE_TEXT(value)                                                                          \
	((struct store_value){.kind = (value) != NULL ? STORE_VALUE_TEXT : STORE_VALUE_NULL,       \
			      .text = (value)})
#define STORE_INTEGER(value) ((struct store_value){.kind = STORE_VALUE_INTEGER, .integer = (value)})
#define STORE_REAL(value) ((struct store_value){.kind = STORE_VALUE_REAL, .real = (value)})

/* The rows a statement returned: cells[row * column_count + column], each malloc'd text or NULL.
 * store.c frees them, also after a failure (a backend leaves what it had filled). */
struct store_rows {
	size_t row_count;
	size_t column_count;
	char **cells;
};

/* One step of a backend's schema: versions mean the same tables in every backend. */
struct store_migration {
	int version;
	const char *description;
	const char *sql; /* several statements, no parameters */
};

struct store_backend {
	const char *name; /* "sqlite", "postgresql" */
	const struct store_migration *migrations;
	size_t migration_count;
	const char *begin_write; /* a transaction that will write */
	const char *begin_read;	 /* a read-only snapshot */
	/* Run first in a migration's transaction so two daemons never migrate at once, or NULL
	 * where begin_write already excludes every other writer. */
	const char *schema_lock;
	/* Appended to the claim's choice of a session (row locks across machines), or "". */
	const char *claim_lock;
	/* The claim and its batch's update as one statement (data-modifying WITH), committed
	 * on its own; else two statements in a begin_write transaction. */
	int one_statement_claim;
	/* Run in a transaction that queued work, so idle daemons wake; NULL: none. */
	const char *notify;
	/* location: what follows the scheme's prefix ("sqlite:" is stripped, a PostgreSQL URL
	 * is kept whole); name: how messages name the store (no password). */
	int (*connect)(const char *location, const char *name, void **connection, char **cause);
	void (*disconnect)(void *connection);
	/* Statements without parameters or rows (migrations, COMMIT). */
	int (*script)(void *connection, const char *name, const char *sql, char **cause);
	/* One statement: its rows into *rows (may be NULL), the rows it changed into *changes
	 * (may be NULL). 0, or a negative errno: -EEXIST a constraint, -EBUSY locked, -EAGAIN a
	 * serialisation failure or deadlock (the transaction may be tried again). */
	int (*query)(void *connection, const char *name, const char *sql,
		     const struct store_value *values, size_t count, struct store_rows *rows,
		     long long *changes, char **cause);
	/* Starts waking (wake(data) on the loop) whenever another connection ran notify: a
	 * second connection watched on the loop; NULL where the backend has none. */
	int (*listen)(const char *location, const char *name, uv_loop_t *loop,
		      void (*wake)(void *data), void *data, void **listener, char **cause);
	void (*listen_stop)(void *listener);
};

extern const struct store_backend kagent_store_sqlite_backend;
extern const struct store_backend kagent_store_postgresql_backend;

#endif
