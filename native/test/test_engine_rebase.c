/* Rebase (mw_rebase=1, docs/design/rebase.md, native/src/rebase): a commit that lost
** only because others changed other rows of the same table leaf pages is published
** with its rows merged into the newest pages, when it declared the rows it read and
** wrote (MW_FCNTL_REBASE_ROWS). Checked here:
**   - two updates of different rows of one leaf both commit, the second rebased, and
**     the page holds both (integrity through the engine and stock SQLite after);
**   - inserts and a delete merge the same way;
**   - refused as before: the same row changed on both sides; a declared row changed
**     (read, or written with the value it had); no declaration; mw_rebase=0; a write of
**     page 1 (the table grew a page); an index leaf both sides changed; a row with
**     overflow pages; a rebalance (an interior page written: the leaves' key ranges
**     moved, and a merge would put the other side's row outside its leaf's range);
**   - a declaration is refused outside a write transaction and ends with it, also
**     when a pending statement keeps the snapshot across transactions;
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
** commits first. a declares the rows ra[0..na-1] (those its statement read or wrote)
** and row 20, which it reads to start its snapshot (na < 0: no declaration). Returns
** a's COMMIT result. */
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
  const int64_t r1 = 1, r3 = 3;
  CHECK_RC(race(a, "UPDATE t SET a = a + 1 WHERE id = 3", &r3, 1, b,
                "UPDATE t SET a = a + 10 WHERE id = 4"), SQLITE_OK);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 1);
  CHECK(tu_stat(a, MW_STAT_CONFLICT_WRITE) == 0);
  CHECK(tu_int(b, "SELECT a FROM t WHERE id = 3") == 1);
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 4") == 10);
  CHECK(tu_int(a, "SELECT sum(a) FROM t") == 11);

  /* An insert against an update, then an insert against an insert, a delete
  ** against an update; the read row (5) did not change on the other side. */
  const int64_t r5_100[] = { 5, 100 }, r101 = 101;
  CHECK_RC(race(a, "INSERT INTO t VALUES(100, 7, 'x')", r5_100, 2, b,
                "UPDATE t SET a = a + 100 WHERE id = 6"), SQLITE_OK);
  CHECK_RC(race(a, "INSERT INTO t VALUES(101, 8, 'y')", &r101, 1, b,
                "INSERT INTO t VALUES(102, 9, 'z')"), SQLITE_OK);
  CHECK_RC(race(a, "DELETE FROM t WHERE id = 1", &r1, 1, b,
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

/* A declaration belongs to a write transaction and ends with it: refused outside a
** transaction, before its first write (also when a pending statement already holds a
** snapshot), and one made in a transaction that rolled back does not cover the next,
** also in a snapshot that a pending statement keeps across both. */
static void declaration_scope(void) {
  reset_table();
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  const int64_t r17 = 17;
  CHECK_RC(mw_rebase_rows_declare(a, 0, &r17, 1), SQLITE_MISUSE);
  tu_exec(a, "BEGIN");
  CHECK_RC(mw_rebase_rows_declare(a, 0, &r17, 1), SQLITE_MISUSE); /* no snapshot yet */
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 17") == 0);
  CHECK_RC(mw_rebase_rows_declare(a, 0, &r17, 1), SQLITE_MISUSE); /* no write yet */
  tu_exec(a, "UPDATE t SET a = 7 WHERE id = 17");
  declare(a, &r17, 1);
  tu_exec(a, "ROLLBACK");
  /* The next transaction declares nothing: its conflict is refused. */
  tu_exec(a, "BEGIN");
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 17") == 0);
  tu_exec(b, "UPDATE t SET a = 1 WHERE id = 18");
  tu_exec(a, "UPDATE t SET a = a + 1 WHERE id = 17");
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 0);

  /* The same with a statement pending across both transactions (SQLite keeps its read
  ** snapshot across COMMIT and ROLLBACK then): the rolled-back declaration must not
  ** cover the second transaction, whose write of row 19's own value the merge cannot
  ** see (b's change of row 19 would win). */
  sqlite3_stmt *hold = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "SELECT x FROM other", -1, &hold, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(hold), SQLITE_ROW);
  tu_exec(a, "BEGIN");
  CHECK_RC(mw_rebase_rows_declare(a, 0, &r17, 1), SQLITE_MISUSE); /* a snapshot, no write */
  tu_exec(a, "UPDATE t SET a = 7 WHERE id = 17");
  declare(a, &r17, 1);
  tu_exec(a, "ROLLBACK");
  tu_exec(b, "UPDATE t SET a = 9 WHERE id = 19");
  tu_exec(a, "BEGIN");
  tu_exec(a, "UPDATE t SET a = 0 WHERE id = 19"); /* its value in a's snapshot */
  tu_exec(a, "UPDATE t SET a = 5 WHERE id = 16");
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 0);
  sqlite3_finalize(hold);
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 19") == 9);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* A rebalance: a's insert of a large row into a full leaf moves rows into its siblings
** and rewrites their dividers in the parent, with no new page (page 1 unchanged); b
** meanwhile inserts a row at the top of that leaf's old range. Merging the leaf would
** keep b's row under a divider that now ends below it (integrity_check fails, the row
** cannot be found): refused, since the commit writes an interior page. */
static void rebalance(void) {
  sqlite3 *s = tu_open(path, "");
  tu_exec(s, "DROP TABLE IF EXISTS big");
  tu_exec(s, "CREATE TABLE big(id INTEGER PRIMARY KEY, pad TEXT)");
  /* Appended in order: full leaves of about 19 rows of 200 bytes. */
  tu_exec(s, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<100) "
             "INSERT INTO big SELECT i * 10, printf('%.200c', 'b') FROM n");
  /* Room in the later leaves: every other row of the middle gone. */
  tu_exec(s, "DELETE FROM big WHERE id > 200 AND id < 800 AND id % 20 = 0");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  int64_t pages = tu_int(a, "PRAGMA page_count");
  const int64_t r15 = 15;
  tu_exec(a, "BEGIN");
  tu_exec(b, "BEGIN");
  CHECK(tu_int(a, "SELECT id FROM big WHERE id = 10") == 10);
  CHECK(tu_int(b, "SELECT id FROM big WHERE id = 10") == 10);
  tu_exec(a, "INSERT INTO big VALUES(15, printf('%.1500c', 'x'))");
  tu_exec(b, "INSERT INTO big VALUES(185, 'theirs')");
  declare(a, &r15, 1);
  CHECK_RC(tu_try(b, "COMMIT"), SQLITE_OK);
  int rc = tu_try(a, "COMMIT");
  int64_t after = tu_int(b, "PRAGMA page_count");
  printf("test_engine_rebase: rebalance: %lld pages before, %lld after, commit %d\n",
         (long long)pages, (long long)after, rc);
  CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_integrity_ok(b));
  CHECK(tu_int(b, "SELECT count(*) FROM big WHERE id = 185") == 1);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

static void refusals(void) {
  reset_table();
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  const int64_t r3 = 3, r3_4[] = { 3, 4 }, r5 = 5, r7 = 7, r9 = 9, r11 = 11, r12 = 12;
  /* The same row on both sides; refused even when the declaration leaves that written
  ** row out (the merge sees ours changed it). */
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 3", &r3, 0, b, "UPDATE t SET a = 2 WHERE id = 3"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASE_REFUSED) == 1);
  /* A declared read of row 4, which the other side changed. */
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 3", r3_4, 2, b, "UPDATE t SET a = 3 WHERE id = 4"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASE_REFUSED) == 2);
  /* A write of the value row 12 already had (its cell bytes stay as they were), while
  ** the other side changed row 12: the declaration names it, so it is refused (merged,
  ** the other side's value would win, against the serial order). */
  CHECK(tu_int(a, "SELECT a FROM t WHERE id = 12") == 0);
  const int64_t r5_12[] = { 5, 12 };
  tu_exec(a, "BEGIN");
  tu_exec(b, "BEGIN");
  CHECK(tu_int(a, "SELECT id FROM t WHERE id = 20") == 20);
  CHECK(tu_int(b, "SELECT id FROM t WHERE id = 20") == 20);
  tu_exec(a, "UPDATE t SET a = 0 WHERE id = 12");
  tu_exec(a, "UPDATE t SET a = 55 WHERE id = 5");
  tu_exec(b, "UPDATE t SET a = 66 WHERE id = 12");
  declare(a, r5_12, 2);
  CHECK_RC(tu_try(b, "COMMIT"), SQLITE_OK);
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASE_REFUSED) == 3);
  /* No declaration: refused as without rebase, before any merge. */
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 5", &r5, -1, b, "UPDATE t SET a = 3 WHERE id = 6"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASE_REFUSED) == 3);
  /* An index leaf that both sides changed (rows 7 and 8 of ix, both indexed). */
  CHECK_RC(race(a, "UPDATE ix SET k = 70 WHERE id = 7", &r7, 1, b, "UPDATE ix SET k = 80 WHERE id = 8"),
           SQLITE_BUSY_SNAPSHOT);
  /* A row with overflow pages (it needs new pages: page 1 is written too). */
  CHECK_RC(race(a, "UPDATE t SET pad = printf('%.9000c', 'o') WHERE id = 9", &r9, 1, b,
                "UPDATE t SET a = 3 WHERE id = 10"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 0);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  /* mw_rebase=0 (the default): refused with the declaration. */
  a = tu_open(path, "");
  CHECK_RC(race(a, "UPDATE t SET a = 1 WHERE id = 11", &r11, 1, b, "UPDATE t SET a = 3 WHERE id = 12"),
           SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 0);
  CHECK(tu_integrity_ok(a));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* A read statement keeps the snapshot open across a rebased transaction: the snapshot
** may not read through the engine or commit again; the next one sees the merged page. */
static void held_snapshot(void) {
  reset_table();
  sqlite3 *a = tu_open(path, on), *b = tu_open(path, on);
  const int64_t r13 = 13, r15 = 15;
  sqlite3_stmt *hold = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "SELECT id FROM ix", -1, &hold, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(hold), SQLITE_ROW);
  tu_exec(b, "UPDATE t SET a = 5 WHERE id = 14");
  tu_exec(a, "BEGIN");
  tu_exec(a, "UPDATE t SET a = 4 WHERE id = 13");
  declare(a, &r13, 1);
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_OK);
  CHECK(tu_stat(a, MW_STAT_REBASES) == 1);
  /* A page this snapshot never read (other's) would come from the engine: refused. */
  CHECK_RC(tu_try(a, "SELECT x FROM other"), SQLITE_BUSY_SNAPSHOT);
  /* Commit again in the same snapshot: refused. */
  tu_exec(a, "BEGIN");
  tu_exec(a, "UPDATE t SET a = 6 WHERE id = 15");
  declare(a, &r15, 1);
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  if (!sqlite3_get_autocommit(a)) tu_exec(a, "ROLLBACK");
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
    tu_exec(db, "BEGIN");
    sqlite3_bind_int64(up, 1, row);
    int rc = sqlite3_step(up);
    sqlite3_reset(up);
    if (rc != SQLITE_DONE) {
      tu_exec(db, "ROLLBACK");
      w->refused++;
      continue;
    }
    declare(db, &row, 1);
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
    CHECK(w[i].rebases > 0);
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
  declaration_scope();
  refusals();
  rebalance();
  held_snapshot();
  storm();
  tu_rmdir();
  printf("test_engine_rebase: ok\n");
  return 0;
}
