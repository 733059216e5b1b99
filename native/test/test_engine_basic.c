/* The engine end to end on two connections of one thread: commits are seen by
** the next transaction of the other connection, a write-write conflict refuses
** the second committer with SQLITE_BUSY_SNAPSHOT (and the loser can retry), a
** snapshot stays stable while others commit, and after the last close the file
** is an ordinary WAL database that a stock connection reads. */
#include "test_engine_util.h"

int main(void) {
  const char *path = tu_db_path("basic", "a.db");

  sqlite3 *a = tu_open(path, "");
  sqlite3 *b = tu_open(path, "");
  CHECK(tu_stat(a, MW_STAT_ENGINE) == 1);
  tu_exec(a, "CREATE TABLE t(k INTEGER PRIMARY KEY, v)");
  tu_exec(a, "INSERT INTO t VALUES(1, 10), (2, 20)");
  CHECK(tu_int(b, "SELECT sum(v) FROM t") == 30);

  /* Snapshot isolation: b's open read transaction does not see a's commit. */
  tu_exec(b, "BEGIN");
  CHECK(tu_int(b, "SELECT v FROM t WHERE k=1") == 10);
  tu_exec(a, "UPDATE t SET v=11 WHERE k=1");
  CHECK(tu_int(b, "SELECT v FROM t WHERE k=1") == 10);
  /* b now writes the same row: the first committer (a) wins. */
  tu_exec(b, "UPDATE t SET v=12 WHERE k=1");
  int rc = tu_try(b, "COMMIT");
  CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(b, MW_STAT_CONFLICT_WRITE) + tu_stat(b, MW_STAT_CONFLICT_READ) == 1);
  /* SQLite rolled the transaction back itself (sqlite3VdbeHalt); retry works. */
  CHECK(sqlite3_get_autocommit(b));
  tu_exec(b, "UPDATE t SET v=v+1 WHERE k=1");
  CHECK(tu_int(a, "SELECT v FROM t WHERE k=1") == 12);
  CHECK(tu_stat(b, MW_STAT_COMMIT_EPOCH) > tu_stat(b, MW_STAT_SNAPSHOT_EPOCH));

  /* Disjoint rows on one page also conflict (page-level), disjoint tables do not. */
  tu_exec(a, "CREATE TABLE u(k INTEGER PRIMARY KEY, v)");
  tu_exec(a, "INSERT INTO u VALUES(1, 1)");
  tu_exec(a, "BEGIN");
  tu_exec(a, "UPDATE t SET v=v+1 WHERE k=2");
  tu_exec(b, "BEGIN");
  tu_exec(b, "UPDATE u SET v=v+1 WHERE k=1");
  tu_exec(b, "COMMIT");
  tu_exec(a, "COMMIT");
  CHECK(tu_int(a, "SELECT v FROM u") == 2);
  CHECK(tu_int(b, "SELECT v FROM t WHERE k=2") == 21);

  /* Growth: many rows, pages split. */
  tu_exec(a, "BEGIN");
  for (int i = 0; i < 2000; i++) {
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%d, randomblob(100))", 100 + i);
    tu_exec(a, sql);
  }
  tu_exec(a, "COMMIT");
  CHECK(tu_int(b, "SELECT count(*) FROM t") == 2002);
  CHECK(tu_integrity_ok(b));

  /* A transaction of more than 1000 frames: SQLite checkpoints the private WAL
  ** after it (wal_autocheckpoint); the engine discards those writes. */
  tu_exec(a, "CREATE TABLE big(k INTEGER PRIMARY KEY, v)");
  tu_exec(a, "BEGIN");
  tu_exec(a, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<3000) "
             "INSERT INTO big SELECT x, randomblob(2000) FROM c");
  tu_exec(a, "COMMIT");
  CHECK(tu_int(a, "SELECT count(*) FROM big") == 3000);
  CHECK(tu_int(b, "SELECT count(*) FROM big") == 3000);
  /* DELETE frees pages, VACUUM rebuilds and shrinks the file. */
  tu_exec(a, "DELETE FROM big WHERE k > 100");
  int64_t before = tu_int(b, "PRAGMA page_count");
  tu_exec(b, "VACUUM");
  CHECK(tu_int(a, "PRAGMA page_count") < before);
  CHECK(tu_int(a, "SELECT count(*) FROM big") == 100);
  CHECK(tu_integrity_ok(a));

  /* Several commits in one snapshot: a SELECT still steps (its read transaction
  ** stays open) while the same connection commits twice in autocommit mode. The
  ** second commit is validated against the first (its own epoch), the rows it
  ** reads come from its own commits, and another connection's commit to a page
  ** this snapshot read refuses the next one. */
  tu_exec(a, "CREATE TABLE m(k INTEGER PRIMARY KEY, v)");
  tu_exec(a, "INSERT INTO m VALUES(1, 0), (2, 0)");
  sqlite3_stmt *cur = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "SELECT k FROM m ORDER BY k", -1, &cur, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(cur), SQLITE_ROW);
  int64_t snap = tu_stat(a, MW_STAT_SNAPSHOT_EPOCH);
  tu_exec(a, "UPDATE m SET v=v+1 WHERE k=1");
  int64_t e1 = tu_stat(a, MW_STAT_COMMIT_EPOCH);
  tu_exec(a, "UPDATE m SET v=v+1 WHERE k=1");
  int64_t e2 = tu_stat(a, MW_STAT_COMMIT_EPOCH);
  CHECK(tu_stat(a, MW_STAT_SNAPSHOT_EPOCH) == snap);
  CHECK(e1 > snap && e2 > e1);
  CHECK(tu_int(a, "SELECT v FROM m WHERE k=1") == 2);
  CHECK(tu_int(b, "SELECT v FROM m WHERE k=1") == 2);
  /* b changes the page a's snapshot read: a's next commit must be refused. */
  tu_exec(b, "UPDATE m SET v=100 WHERE k=2");
  CHECK_RC(tu_try(a, "UPDATE m SET v=v+1 WHERE k=1"), SQLITE_BUSY_SNAPSHOT);
  CHECK_RC(sqlite3_step(cur), SQLITE_ROW);
  sqlite3_finalize(cur);
  CHECK(tu_int(a, "SELECT v FROM m WHERE k=1") == 2);
  CHECK(tu_int(a, "SELECT v FROM m WHERE k=2") == 100);

  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);

  /* After the last close: a plain WAL database, no -wal, no log. */
  char side[320];
  snprintf(side, sizeof side, "%s-wal", path);
  CHECK(access(side, F_OK) != 0);
  snprintf(side, sizeof side, "%s-mw", path);
  CHECK(access(side, F_OK) != 0);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_int(s, "SELECT count(*) FROM t") == 2002);
  CHECK(tu_int(s, "SELECT v FROM t WHERE k=1") == 12);
  CHECK(tu_integrity_ok(s));
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(s, "PRAGMA journal_mode", -1, &st, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(st), SQLITE_ROW);
  CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0);
  sqlite3_finalize(st);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);

  /* Reopen through the engine: the data is there. */
  a = tu_open(path, "");
  CHECK(tu_int(a, "SELECT count(*) FROM t") == 2002);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_basic: ok\n");
  return 0;
}
