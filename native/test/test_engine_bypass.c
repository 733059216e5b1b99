/* PRAGMAs that reach an engine file without naming it, and what they may not do:
** lose an acknowledged write.
**
** A connection whose main database is not on the engine (":memory:", or a file of the
** plain unix VFS) ATTACHes an engine file and runs an unqualified PRAGMA. SQLite
** applies an unqualified locking_mode or journal_mode to every attached database, but
** sends SQLITE_FCNTL_PRAGMA only to main's file, so the engine never sees it:
**  - locking_mode=EXCLUSIVE: SQLite then skips the shared-memory locks, so the lane
**    never begins a snapshot; a commit frame written outside one was accepted and
**    dropped (10 writes "succeeded", none was in the file after close);
**  - journal_mode=DELETE (and the other rollback modes): SQLite closes the WAL and
**    writes pages straight into the main file, whose writes the engine discards.
** Each write after such a PRAGMA must now fail, and every write that succeeded must be
** in the file: the test counts the writes that returned SQLITE_OK (autocommit and
** BEGIN...COMMIT, the PRAGMA run before and after the ATTACH) and compares with
** what a stock connection reads after the last close, along with another engine
** connection's writes. A qualified PRAGMA, or one on an engine main, is refused by
** name (test_engine_options). */
#include "test_engine_util.h"

static const char *pragmas[] = {
  "PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=DELETE", "PRAGMA journal_mode=TRUNCATE",
  "PRAGMA journal_mode=PERSIST", "PRAGMA journal_mode=MEMORY", "PRAGMA journal_mode=OFF",
};
#define NPRAGMAS (int)(sizeof pragmas / sizeof pragmas[0])

/* Runs sql; 1 when it succeeded. */
static int ok(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, 0, 0, 0) == SQLITE_OK; }

static char outcome[200];

/* Runs the PRAGMA and keeps what it answered, for the report line. */
static void pragma_result(sqlite3 *m, int k) {
  sqlite3_stmt *st = 0;
  int rc = sqlite3_prepare_v2(m, pragmas[k], -1, &st, 0);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    snprintf(outcome, sizeof outcome, "answered %s", (const char *)sqlite3_column_text(st, 0));
  else if (rc == SQLITE_DONE)
    snprintf(outcome, sizeof outcome, "done");
  else
    snprintf(outcome, sizeof outcome, "failed: %s", sqlite3_errmsg(m));
  sqlite3_finalize(st);
}

/* One case: main is ":memory:" or a stock file; the PRAGMA runs before or after the
** ATTACH. Returns the writes acknowledged through the bypassing connection. */
static int one_case(const char *dir, int k, int stock_main, int pragma_first) {
  char path[400], mainpath[400], sql[600];
  snprintf(path, sizeof path, "%s/x%d-%d-%d.db", dir, k, stock_main, pragma_first);
  snprintf(mainpath, sizeof mainpath, "%s/main%d-%d-%d.db", dir, k, stock_main, pragma_first);
  sqlite3 *e = tu_open(path, "");
  tu_exec(e, "CREATE TABLE t(src, n)");

  sqlite3 *m = 0;
  CHECK_RC(sqlite3_open_v2(stock_main ? mainpath : ":memory:", &m,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "unix"),
           SQLITE_OK);
  sqlite3_busy_timeout(m, 2000);
  if (stock_main) tu_exec(m, "PRAGMA journal_mode=WAL");
  snprintf(sql, sizeof sql, "ATTACH 'file:%s?vfs=multiwriter' AS a", path);
  if (pragma_first) pragma_result(m, k);
  /* An ATTACH after locking_mode=EXCLUSIVE fails: reading the schema opens the WAL in
  ** exclusive mode, which is refused (then every write below fails too). */
  int attached = ok(m, sql);
  CHECK(attached || pragma_first);
  if (!pragma_first) pragma_result(m, k);

  int acked = 0;
  for (int i = 0; i < 5; i++) {
    snprintf(sql, sizeof sql, "INSERT INTO a.t VALUES('m', %d)", i);
    acked += ok(m, sql);
  }
  for (int i = 0; i < 5; i++) {
    if (!ok(m, "BEGIN")) continue;
    snprintf(sql, sizeof sql, "INSERT INTO a.t VALUES('m', %d)", 10 + i);
    int wrote = ok(m, sql);
    if (ok(m, "COMMIT")) acked += wrote;
    else (void)ok(m, "ROLLBACK");
  }
  /* Back to normal locking, an attached file takes writes again. */
  if (attached && strstr(pragmas[k], "locking_mode")) {
    tu_exec(m, "PRAGMA locking_mode=NORMAL");
    tu_exec(m, "INSERT INTO a.t VALUES('m', 99)");
    acked++;
  }
  for (int i = 0; i < 5; i++) {
    snprintf(sql, sizeof sql, "INSERT INTO t VALUES('e', %d)", i);
    tu_exec(e, sql);
  }
  /* What the bypassing connection reads must be what is there. */
  sqlite3_stmt *st = 0;
  if (sqlite3_prepare_v2(m, "SELECT count(*) FROM a.t WHERE src='m'", -1, &st, 0) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && acked == 0)
    CHECK(sqlite3_column_int(st, 0) == 0);
  sqlite3_finalize(st);
  CHECK_RC(sqlite3_close(m), SQLITE_OK);
  CHECK(tu_int(e, "SELECT count(*) FROM t WHERE src='m'") == acked);
  CHECK(tu_int(e, "SELECT count(*) FROM t WHERE src='e'") == 5);
  CHECK_RC(sqlite3_close(e), SQLITE_OK);

  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(s));
  int64_t in_file = tu_int(s, "SELECT count(*) FROM t WHERE src='m'");
  if (in_file != acked) {
    fprintf(stderr, "%s, main %s, %s the ATTACH: %d writes acknowledged, %lld in the file\n",
            pragmas[k], stock_main ? "stock file" : ":memory:", pragma_first ? "before" : "after",
            acked, (long long)in_file);
    exit(1);
  }
  CHECK(tu_int(s, "SELECT count(*) FROM t WHERE src='e'") == 5);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  return acked;
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("bypass");
  for (int k = 0; k < NPRAGMAS; k++)
    for (int stock_main = 0; stock_main < 2; stock_main++)
      for (int first = 0; first < 2; first++) {
        int acked = one_case(dir, k, stock_main, first);
        printf("test_engine_bypass: %s, main %s, %s the ATTACH (%s): %d of 10 writes "
               "acknowledged, all in the file\n", pragmas[k], stock_main ? "stock file" : ":memory:",
               first ? "before" : "after", outcome, acked);
      }
  tu_rmdir();
  printf("test_engine_bypass: ok\n");
  return 0;
}
