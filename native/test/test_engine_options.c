/* Options, PRAGMAs and the file's life cycle:
**  - an unknown mw* URI parameter or a bad value fails sqlite3_open with a message
**    that names it; a connection with another mw_mp than the
**    ones of this process open on the file is refused; good
**    values open; mw=0 opens stock SQLite (no engine statistics);
**  - journal_mode other than WAL and locking_mode=EXCLUSIVE are refused with a
**    clear message; auto_vacuum on a database with a table is ignored (as stock
**    SQLite ignores it until a VACUUM); synchronous is accepted;
**  - a rollback-mode file is converted to WAL at open; a leftover real -wal is
**    checkpointed first (its commit is not lost);
**  - after the last close only the .db is left, and Debian's stock sqlite3 (when
**    installed at /usr/bin/sqlite3) opens it and passes integrity_check. */
#include "test_engine_util.h"

static void expect_open_error(const char *path, const char *params, const char *needle) {
  char uri[600];
  snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter&%s", path, params);
  sqlite3 *db = 0;
  int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0);
  const char *msg = db ? sqlite3_errmsg(db) : "";
  if (rc == SQLITE_OK || strstr(msg, needle) == 0) {
    fprintf(stderr, "open with %s: rc %d, message '%s', wanted '%s'\n", params, rc, msg, needle);
    exit(1);
  }
  sqlite3_close(db);
}

static int run(const char *cmd) {
  int rc = system(cmd);
  return rc;
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("options");
  char path[300], side[340];
  snprintf(path, sizeof path, "%s/o.db", dir);

  expect_open_error(path, "mw_bogus=1", "unknown URI parameter 'mw_bogus'");
  expect_open_error(path, "mw_readcheck=2", "bad value '2' for URI parameter 'mw_readcheck'");
  expect_open_error(path, "mw_log_max_mb=0", "'mw_log_max_mb'");
  expect_open_error(path, "mw_log_max_mb=abc", "'mw_log_max_mb'");
  expect_open_error(path, "mw_profile=huge", "'mw_profile'");
  expect_open_error(path, "mw_fullfsync=maybe", "'mw_fullfsync'");
  expect_open_error(path, "mw=2", "'mw'");
  expect_open_error(path, "mw_mp=maybe", "'mw_mp'");
  expect_open_error(path, "mw_rebase=2", "'mw_rebase'");
  /* A refused open created nothing. */
  CHECK(access(path, F_OK) != 0);

  sqlite3 *db = tu_open(path, "mw_readcheck=1&mw_log_max_mb=4&mw_profile=small&mw_fullfsync=0&mw_mp=0&mw_rebase=1");
  CHECK(tu_stat(db, MW_STAT_ENGINE) == 1);
  expect_open_error(path, "mw_mp=1", "every connection must open it the same way");
  tu_exec(db, "CREATE TABLE t(x)");
  tu_expect_error(db, "PRAGMA journal_mode=DELETE", "journal_mode=DELETE is not supported");
  tu_expect_error(db, "PRAGMA journal_mode=memory", "journal_mode=memory is not supported");
  tu_expect_error(db, "PRAGMA locking_mode=EXCLUSIVE", "locking_mode=EXCLUSIVE is not supported");
  tu_exec(db, "PRAGMA auto_vacuum=FULL");
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == 0);
  tu_exec(db, "PRAGMA auto_vacuum=2");
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == 0);
  tu_exec(db, "PRAGMA journal_mode=WAL");
  tu_exec(db, "PRAGMA locking_mode=NORMAL");
  tu_exec(db, "PRAGMA auto_vacuum=NONE");
  tu_exec(db, "PRAGMA synchronous=NORMAL");
  tu_exec(db, "PRAGMA synchronous=FULL");
  tu_exec(db, "INSERT INTO t VALUES(1)");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 1);
  /* mw=0 on a file the engine has open in this process is refused. */
  expect_open_error(path, "mw=0", "is open through the engine in this process");
  /* A refused ATTACH fails too (its message cannot reach the caller). */
  {
    char sql[700];
    snprintf(sql, sizeof sql, "ATTACH 'file:%s/att.db?vfs=multiwriter&mw_bogus=1' AS att", dir);
    CHECK(tu_try(db, sql) != SQLITE_OK);
    snprintf(side, sizeof side, "%s/att.db", dir);
    CHECK(access(side, F_OK) != 0);
  }
  /* mw=0 on another file: stock SQLite, no engine. */
  snprintf(side, sizeof side, "%s/stock.db", dir);
  sqlite3 *st = tu_open(side, "mw=0");
  CHECK(tu_stat(st, MW_STAT_ENGINE) == 0);
  tu_exec(st, "CREATE TABLE s(x); INSERT INTO s VALUES(1)");
  CHECK_RC(sqlite3_close(st), SQLITE_OK);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  snprintf(side, sizeof side, "%s-mw", path);
  CHECK(access(side, F_OK) != 0);
  snprintf(side, sizeof side, "%s-wal", path);
  CHECK(access(side, F_OK) != 0);

  /* A rollback-mode database is converted to WAL at open. */
  char rb[300];
  snprintf(rb, sizeof rb, "%s/rollback.db", dir);
  sqlite3 *s = 0;
  CHECK_RC(sqlite3_open_v2(rb, &s, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix"), SQLITE_OK);
  tu_exec(s, "PRAGMA journal_mode=DELETE; CREATE TABLE r(x); INSERT INTO r VALUES(42)");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  db = tu_open(rb, "");
  CHECK(tu_int(db, "SELECT x FROM r") == 42);
  tu_exec(db, "INSERT INTO r VALUES(43)");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);

  /* A leftover real -wal with a commit in it is checkpointed first. */
  char wl[300];
  snprintf(wl, sizeof wl, "%s/leftover.db", dir);
  CHECK_RC(sqlite3_open_v2(wl, &s, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix"), SQLITE_OK);
  tu_exec(s, "PRAGMA journal_mode=WAL; CREATE TABLE w(x); PRAGMA wal_checkpoint(TRUNCATE);");
  sqlite3 *hold = 0;
  CHECK_RC(sqlite3_open_v2(wl, &hold, SQLITE_OPEN_READWRITE, "unix"), SQLITE_OK);
  tu_exec(hold, "PRAGMA wal_autocheckpoint=0; INSERT INTO w VALUES(7)");
  /* Keep the -wal: persist it on close. */
  int persist = 1;
  CHECK_RC(sqlite3_file_control(hold, "main", SQLITE_FCNTL_PERSIST_WAL, &persist), SQLITE_OK);
  CHECK_RC(sqlite3_file_control(s, "main", SQLITE_FCNTL_PERSIST_WAL, &persist), SQLITE_OK);
  tu_exec(hold, "PRAGMA wal_autocheckpoint=0");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  /* Simulate a crash of the stock writer: copy the files away while it is open. */
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s.copy' && cp '%s-wal' '%s.copy-wal'", wl, wl, wl, wl);
  CHECK(run(cmd) == 0);
  CHECK_RC(sqlite3_close(hold), SQLITE_OK);
  char copy[320];
  snprintf(copy, sizeof copy, "%s.copy", wl);
  db = tu_open(copy, "");
  CHECK(tu_int(db, "SELECT x FROM w") == 7);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  snprintf(side, sizeof side, "%s-wal", copy);
  CHECK(access(side, F_OK) != 0);

  /* Debian's stock sqlite3 reads what the engine left. */
  if (access("/usr/bin/sqlite3", X_OK) == 0) {
    snprintf(cmd, sizeof cmd,
             "test \"$(/usr/bin/sqlite3 '%s' 'PRAGMA integrity_check; SELECT count(*) FROM t; PRAGMA journal_mode;' | tr '\\n' ' ')\" = 'ok 1 wal '",
             path);
    CHECK(run(cmd) == 0);
    snprintf(cmd, sizeof cmd,
             "test \"$(/usr/bin/sqlite3 '%s' 'PRAGMA integrity_check; SELECT group_concat(x) FROM r;' | tr '\\n' ' ')\" = 'ok 42,43 '",
             rb);
    CHECK(run(cmd) == 0);
  } else {
    printf("test_engine_options: /usr/bin/sqlite3 missing, stock CLI check skipped\n");
  }
  tu_rmdir();
  printf("test_engine_options: ok\n");
  return 0;
}
