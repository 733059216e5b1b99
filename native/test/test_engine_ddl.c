/* DDL among concurrent writers: four threads insert and update rows (retrying
** refused commits) while a fifth creates and drops an index over the same table,
** and adds columns. A commit whose snapshot predates a schema change is refused
** (schema cookie); a schema change validates everything it read, so an index is
** never built from rows that changed under it; the hot-spot turn lets the DDL
** through even while writers keep committing. integrity_check compares every
** index with its table at the end.
** First, deterministically: a transaction whose snapshot predates a CREATE INDEX
** inserts a row (it writes only the table's leaf, which the index build read but did
** not change, and not page 1). Only the schema cookie refuses it; without that check
** the row would be committed without its index entry and integrity_check fails.
** Then create_race: two connections create one table at once; the refused one must
** see the table in its next statement. */
#include "test_engine_util.h"
#include <sched.h>

#define WRITERS 4
#define OPS 150

typedef struct worker { int id; const char *path; int64_t done, retries; } worker;

static int exec_retry(sqlite3 *db, const char *sql, int64_t *retries) {
  for (;;) {
    int rc = tu_try(db, sql);
    if (rc == SQLITE_OK) return rc;
    if (rc != SQLITE_BUSY_SNAPSHOT && rc != SQLITE_SCHEMA) {
      fprintf(stderr, "%s: %d %s\n", sql, rc, sqlite3_errmsg(db));
      exit(1);
    }
    (*retries)++;
    sched_yield();
  }
}

static void *writer(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  for (int i = 0; i < OPS; i++) {
    char sql[300];
    int k = w->id * 100000 + i;
    snprintf(sql, sizeof sql,
             "BEGIN; INSERT INTO t(k, v) VALUES(%d, %d); UPDATE t SET v = v + 1 WHERE k = %d; COMMIT",
             k, i % 17, w->id * 100000 + i / 2);
    for (;;) {
      int rc = tu_try(db, sql);
      if (rc == SQLITE_OK) break;
      tu_try(db, "ROLLBACK");
      if (rc != SQLITE_BUSY_SNAPSHOT && rc != SQLITE_SCHEMA) {
        fprintf(stderr, "writer: %d %s\n", rc, sqlite3_errmsg(db));
        exit(1);
      }
      w->retries++;
      sched_yield();
    }
    w->done++;
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void *ddl(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  for (int i = 0; i < 5; i++) {
    exec_retry(db, "CREATE INDEX t_v ON t(v)", &w->retries);
    char sql[100];
    snprintf(sql, sizeof sql, "ALTER TABLE t ADD COLUMN c%d", i);
    exec_retry(db, sql, &w->retries);
    exec_retry(db, "DROP INDEX t_v", &w->retries);
    w->done++;
  }
  exec_retry(db, "CREATE INDEX t_v ON t(v)", &w->retries);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

/* The last worker changes the schema, the others write. */
static void *ddl_worker(void *arg) {
  return ((worker *)arg)->id == WRITERS ? ddl(arg) : writer(arg);
}

static void stale_schema_case(const char *dir) {
  char path[300];
  snprintf(path, sizeof path, "%s/stale.db", dir);
  sqlite3 *c1 = tu_open(path, "");
  sqlite3 *c2 = tu_open(path, "");
  tu_exec(c1, "CREATE TABLE s(k INTEGER PRIMARY KEY, v INTEGER)");
  tu_exec(c1, "INSERT INTO s VALUES(1, 10), (2, 20)");
  tu_exec(c1, "BEGIN");
  CHECK(tu_int(c1, "SELECT count(*) FROM s") == 2); /* the snapshot: schema without index */
  tu_exec(c2, "CREATE INDEX s_v ON s(v)");
  tu_exec(c1, "INSERT INTO s VALUES(3, 30)");
  int rc = tu_try(c1, "COMMIT");
  if (rc != SQLITE_BUSY_SNAPSHOT) {
    fprintf(stderr, "test_engine_ddl: a commit from before CREATE INDEX returned %d, wanted "
                    "SQLITE_BUSY_SNAPSHOT\n", rc);
    exit(1);
  }
  CHECK(tu_stat(c1, MW_STAT_CONFLICT_SCHEMA) == 1);
  tu_try(c1, "ROLLBACK");
  /* Again on the new schema: the row and its index entry. */
  tu_exec(c1, "INSERT INTO s VALUES(3, 30)");
  CHECK(tu_int(c2, "SELECT count(*) FROM s INDEXED BY s_v WHERE v >= 0") == 3);
  CHECK(tu_integrity_ok(c2));
  CHECK_RC(sqlite3_close(c1), SQLITE_OK);
  CHECK_RC(sqlite3_close(c2), SQLITE_OK);
}

/* Two connections create one table at once (CREATE TABLE IF NOT EXISTS, each with the
** schema loaded before); the loser's CREATE is refused, and its next statement must see
** the winner's table. Its retry once started from the snapshot it was refused on,
** before the winner's commit was visible: "no such table" in most rounds. */
typedef struct creator { const char *path; pthread_barrier_t *bar; int refused; } creator;

static void *create_and_insert(void *arg) {
  creator *c = arg;
  sqlite3 *db = tu_open(c->path, "");
  sqlite3_busy_timeout(db, 5000);
  CHECK(tu_int(db, "SELECT count(*) FROM sqlite_master") == 1); /* the schema, loaded */
  pthread_barrier_wait(c->bar);
  int rc = tu_try(db, "CREATE TABLE IF NOT EXISTS n(id INTEGER PRIMARY KEY)");
  CHECK(rc == SQLITE_OK || rc == SQLITE_BUSY_SNAPSHOT);
  c->refused = rc != SQLITE_OK;
  rc = tu_try(db, "INSERT INTO n DEFAULT VALUES");
  if (rc != SQLITE_OK && rc != SQLITE_BUSY_SNAPSHOT) {
    fprintf(stderr, "test_engine_ddl: create_race: after %s CREATE: %d %s\n",
            c->refused ? "a refused" : "its", rc, sqlite3_errmsg(db));
    CHECK(0);
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static int create_race(const char *dir) {
  int refused = 0;
  for (int r = 0; r < 100; r++) {
    char path[400];
    snprintf(path, sizeof path, "%s/create%d.db", dir, r);
    sqlite3 *db = tu_open(path, "");
    tu_exec(db, "CREATE TABLE x(a)");
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, 0, 2);
    creator c[2] = { { path, &bar, 0 }, { path, &bar, 0 } };
    pthread_t th[2];
    for (int k = 0; k < 2; k++) CHECK(pthread_create(&th[k], 0, create_and_insert, &c[k]) == 0);
    for (int k = 0; k < 2; k++) CHECK(pthread_join(th[k], 0) == 0);
    pthread_barrier_destroy(&bar);
    refused += c[0].refused + c[1].refused;
    CHECK_RC(sqlite3_close(db), SQLITE_OK);
  }
  return refused;
}

int main(void) {
  const char *path = tu_db_path("ddl", "d.db");
  stale_schema_case(tu_dir);
  int refused = create_race(tu_dir);
  sqlite3 *setup = tu_open(path, "");
  tu_exec(setup, "CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER)");
  worker w[WRITERS + 1];
  memset(w, 0, sizeof w);
  for (int i = 0; i <= WRITERS; i++) {
    w[i].id = i;
    w[i].path = path;
  }
  tu_threads(WRITERS + 1, ddl_worker, w, sizeof w[0]);
  int64_t retries = 0;
  for (int i = 0; i <= WRITERS; i++) retries += w[i].retries;
  CHECK(w[WRITERS].done == 5);
  CHECK(tu_int(setup, "SELECT count(*) FROM t") == WRITERS * OPS);
  CHECK(tu_int(setup, "SELECT count(*) FROM pragma_table_info('t')") == 7);
  CHECK(tu_int(setup, "SELECT count(*) FROM t INDEXED BY t_v WHERE v >= 0") == WRITERS * OPS);
  CHECK(tu_integrity_ok(setup));
  CHECK_RC(sqlite3_close(setup), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_ddl: create_race: 100 rounds, %d CREATEs refused, each then saw the "
         "table\n", refused);
  printf("test_engine_ddl: %lld retries: ok\n", (long long)retries);
  return 0;
}
