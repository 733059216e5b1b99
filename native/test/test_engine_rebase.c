/* Rebase (mw_rebase=1, engine.md section 9, native/src/rebase): a commit that lost
** only because others changed other rows of the same table leaf pages is published
** with its rows merged into the newest pages, when it declared the rows it read
** (MW_FCNTL_REBASE_ROWS). Checked here:
**   - two updates of different rows of one leaf both commit, the second rebased, and
**     the page holds both (integrity through the engine and stock SQLite after);
**   - inserts and a delete merge the same way;
**   - refused as before: the same row changed on both sides; a declared read row
**     changed; no declaration; mw_rebase=0; a write of page 1 (the table grew a page);
**     an index leaf both sides changed; a row with overflow pages;
**   - the rebased snapshot may not read through the engine or commit again, and the
**     next transaction sees the merged page;
**   - a storm: 8 threads add to counters in rows of one page (declared, so most
**     conflicts merge), and the sum equals the committed increments. */
#include "test_engine_util.h"

static const char *path;
static const char *const on = "mw_rebase=1";

static void declare(sqlite3 *db, const int64_t *rows, int n) {
  CHECK_RC(mw_rebase_rows_declare(db, 0, rows, n), SQLITE_OK);
}

static void reset_table(void) {
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "DROP TABLE IF EXISTS t; DROP TABLE IF EXISTS ix; DROP TABLE IF EXISTS other");
  tu_exec(db, "CREATE TABLE other(x)");
  tu_exec(db, "INSERT INTO other VALUES(1)");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, pad TEXT)");
  /* 20 rows of ~60 bytes: one leaf (the root page itself). */
  tu_exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<20) "
              "INSERT INTO t SELECT i, 0, printf('%.50c', 'p') FROM n");
  tu_exec(db, "CREATE TABLE ix(id INTEGER PRIMARY KEY, k INTEGER)");
  tu_exec(db, "CREATE INDEX ix_k ON ix(k)");
  tu_exec(db, "INSERT INTO ix SELECT id, id FROM t");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

/* a and b each run one statement in a transaction opened at the same snapshot; b
** commits first. a declares the rows ra[0..na-1] and row 20, which it reads to start
** its snapshot (na < 0: no declaration). Returns a's COMMIT result. */
static int race(sqlite3 *a, const char *sa, const int64_t *ra, int na, sqlite3 *b,
                const char *sb) {
  tu_exec(a, "BEGIN");
  tu_exec(b, "BEGIN");
  CHECK(tu_int(a, "SELECT id FROM t WHERE id = 20") == 20); /* both snapshots start here */
  CHECK(tu_int(b, "SELECT id FROM t WHERE id = 20") == 20);
  tu_exec(a, sa);
  tu_exec(b, sb);
  const int64_t r20 = 20;
  if (na >= 0) declare(a, ra, na);
  if (na >= 0) declare(a, &r20, 1);
  CHECK_RC(tu_try(b, "COMMIT"), SQLITE_OK);
  int rc = tu_try(a, "COMMIT");
  if (rc != SQLITE_OK && !sqlite3_get_autocommit(a)) tu_exec(a, "ROLLBACK");
  return rc;
}

static void merges(void) {
  reset_table();
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  /* The reads are the statements' own rows: no declared rows beyond them. */
  CHECK_RC(race(a, "UPDATE t SET a = a + 1 WHERE id = 3", 0, 0, b,
                "UPDATE t SET a = a + 10 WHERE id = 4"), SQLITE_OK);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 1);
  CHECK(tu_stat(a, MW_STAT_CONFLICT_WRITE) == 0);
  CHECK(tu_int(b, "SELECT a FROM t WHERE id = 3") == 1);
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 4") == 10);
  CHECK(tu_int(a, "SELECT sum(a) FROM t") == 11);

  /* An insert against an update, then an insert against an insert, a delete
  ** against an update; the read row (5) did not change on the other side. */
  int64_t r5 = 5;
  CHECK_RC(race(a, "INSERT INTO t VALUES(100, 7, 'x')", &r5, 1, b,
                "UPDATE t SET a = a + 100 WHERE id = 6"), SQLITE_OK);
  CHECK_RC(race(a, "INSERT INTO t VALUES(101, 8, 'y')", 0, 0, b,
                "INSERT INTO t VALUES(102, 9, 'z')"), SQLITE_OK);
  CHECK_RC(race(a, "DELETE FROM t WHERE id = 1", 0, 0, b,
                "UPDATE t SET a = a + 1000 WHERE id = 2"), SQLITE_OK);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 4);
  CHECK(tu_int(b, "SELECT count(*) FROM t") == 22);
  CHECK(tu_int(b, "SELECT sum(a) FROM t") == 11 + 7 + 100 + 8 + 9 + 1000);
  CHECK(tu_int(b, "SELECT min(id) FROM t") == 2);
  CHECK(tu_integrity_ok(a));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);

  /* The file alone, read by stock SQLite. */
  char cmd[700];
  snprintf(cmd, sizeof cmd,
           "test \"$(/usr/bin/sqlite3 '%s' 'PRAGMA integrity_check; SELECT count(*), sum(a) FROM t')\" "
           "= \"$(printf 'ok\\n22|1135')\"", path);
  sqlite3 *st = tu_stock_check("test_engine_rebase", path, cmd);
  if (st) {
    CHECK(tu_int(st, "SELECT sum(a) FROM t") == 1135);
    CHECK_RC(sqlite3_close(st), SQLITE_OK);
  }
}

/* A declaration made before the transaction, on a connection whose SQLite kept its
** cache (a read-only transaction before, lane.c "warm transactions"): its next
** snapshot goes cold, and SQLite lets the first lock go unread and locks again. The
** declaration covers the transaction all the same. */
static void declared_early(void) {
  reset_table();
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 16") == 0); /* read-only: a stays warm */
  tu_exec(b, "UPDATE t SET a = 1 WHERE id = 16");          /* a's next snapshot moved */
  declare(a, 0, 0);
  tu_exec(a, "BEGIN");
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 17") == 0);
  tu_exec(b, "UPDATE t SET a = 1 WHERE id = 18");
  tu_exec(a, "UPDATE t SET a = a + 1 WHERE id = 17");
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_OK);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 1);
  CHECK(tu_int(a, "SELECT sum(a) FROM t") == 3);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

static void refusals(void) {
  reset_table();
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  /* The same row on both sides. */
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 3", 0, 0, b, "UPDATE t SET a = 2 WHERE id = 3"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASE_REFUSED) == 1);
  /* A declared read of row 4, which the other side changed. */
  int64_t r4 = 4;
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 3", &r4, 1, b, "UPDATE t SET a = 3 WHERE id = 4"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASE_REFUSED) == 2);
  /* No declaration: refused as without rebase, before any merge. */
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 5", 0, -1, b, "UPDATE t SET a = 3 WHERE id = 6"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASE_REFUSED) == 2);
  /* An index leaf that both sides changed (rows 7 and 8 of ix, both indexed). */
  CHECK_RC(race(a, "UPDATE ix SET k = 70 WHERE id = 7", 0, 0, b, "UPDATE ix SET k = 80 WHERE id = 8"),
           SQLITE_BUSY_SNAPSHOT);
  /* A row with overflow pages (it needs new pages: page 1 is written too). */
  CHECK_RC(race(a, "UPDATE t SET pad = printf('%.9000c', 'o') WHERE id = 9", 0, 0, b,
                "UPDATE t SET a = 3 WHERE id = 10"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 0);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  /* mw_rebase=0 (the default): refused with the declaration. */
  a = tu_open(path, "");
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 11", 0, 0, b, "UPDATE t SET a = 3 WHERE id = 12"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 0);
  CHECK(tu_integrity_ok(a));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* A read statement keeps the snapshot open across a rebased autocommit write: the
** snapshot may not read through the engine or commit again; the next one sees the
** merged page. */
static void held_snapshot(void) {
  reset_table();
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  sqlite3_stmt *hold = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "SELECT id FROM ix", -1, &hold, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(hold), SQLITE_ROW);
  tu_exec(b, "UPDATE t SET a = 5 WHERE id = 14");
  declare(a, 0, 0);
  CHECK_RC(tu_try(a, "UPDATE t SET a = 4 WHERE id = 13"), SQLITE_OK);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 1);
  /* A page this snapshot never read (other's) would come from the engine: refused. */
  CHECK_RC(tu_try(a, "SELECT x FROM other"), SQLITE_BUSY_SNAPSHOT);
  /* Commit again in the same snapshot: refused. */
  declare(a, 0, 0);
  CHECK_RC(tu_try(a, "UPDATE t SET a = 6 WHERE id = 15"), SQLITE_BUSY_SNAPSHOT);
  /* The snapshot ends; the next one reads the merged page. */
  sqlite3_reset(hold);
  sqlite3_finalize(hold);
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 14") == 5);
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 13") == 4);
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 15") == 0);
  CHECK(tu_integrity_ok(a));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* ---- the storm ---- */
#define STORM_THREADS 8
#define STORM_ROWS 16
typedef struct storm_w {
  int id, commits, refused;
  int64_t rebases;
} storm_w;

static void *storm_run(void *arg) {
  storm_w *w = arg;
  sqlite3 *db = tu_open(path, on);
  sqlite3_stmt *up = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "UPDATE t SET a = a + 1 WHERE id = ?1", -1, &up, 0), SQLITE_OK);
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
  for (int n = 0; n < 300; n++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    int64_t row = 1 + (int64_t)(seed % STORM_ROWS);
    /* Odd threads declare before the transaction: the declaration must outlast the
    ** cold start, where SQLite lets its first snapshot go unread and locks again. */
    if (w->id % 2) declare(db, 0, 0);
    tu_exec(db, "BEGIN");
    sqlite3_bind_int64(up, 1, row);
    int rc = sqlite3_step(up);
    sqlite3_reset(up);
    if (rc != SQLITE_DONE) {
      tu_exec(db, "ROLLBACK");
      w->refused++;
      continue;
    }
    if (w->id % 2 == 0) declare(db, 0, 0);
    rc = tu_try(db, "COMMIT");
    if (rc == SQLITE_OK) {
      w->commits++;
    } else {
      CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
      w->refused++;
      if (!sqlite3_get_autocommit(db)) tu_exec(db, "ROLLBACK");
    }
  }
  sqlite3_finalize(up);
  w->rebases = tu_stat(db, MW_STAT_REBASES);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void storm(void) {
  reset_table();
  storm_w w[STORM_THREADS] = { 0 };
  for (int i = 0; i < STORM_THREADS; i++) w[i].id = i;
  tu_threads(STORM_THREADS, storm_run, w, sizeof w[0]);
  int commits = 0, refused = 0;
  int64_t rebases = 0;
  for (int i = 0; i < STORM_THREADS; i++) {
    commits += w[i].commits, refused += w[i].refused, rebases += w[i].rebases;
    CHECK(w[i].rebases > 0); /* those that declared early too */
  }
  sqlite3 *db = tu_open(path, "");
  int64_t sum = tu_int(db, "SELECT sum(a) FROM t");
  printf("test_engine_rebase: storm: %d commits (%lld rebased), %d refused, sum %lld\n", commits,
         (long long)rebases, refused, (long long)sum);
  CHECK(sum == commits);
  CHECK(rebases > 0);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

int main(void) {
  path = tu_db_path("rebase", "r.db");
  merges();
  declared_early();
  refusals();
  held_snapshot();
  storm();
  tu_rmdir();
  printf("test_engine_rebase: ok\n");
  return 0;
}
