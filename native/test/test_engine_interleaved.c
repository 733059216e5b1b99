/* Several connections of one thread, each with a write transaction open at once: what
** an event loop does when its transactions span an await (the package's
** transactionAsync). The engine infers "one transaction over several databases" from
** the engine write locks the thread holds, so a commit made while another connection
** of the thread holds a write lock waits for SQLite's phase two (lane.c). A commit that
** found only its own lane there is an ordinary commit and must behave as one:
**  - growth: two connections grow the file from the same size (a row with overflow
**    pages each, into two tables); the second commits while a third connection holds
**    a write lock, and needs relocation (its new pages collide with the first's). It
**    was refused (SQLITE_BUSY_SNAPSHOT: the group path does not relocate);
**  - processes (mw_mp=1): any such commit was refused with SQLITE_ERROR (the group path
**    is not built for shared logs).
**  - rebase: a commit that waits for phase two still has its declaration there.
** A real transaction over main and an attached database, with another connection of the
** thread holding a write lock meanwhile, still commits both halves (the group path). */
#include "test_engine_util.h"

static void growth(const char *dir, const char *params) {
  char path[400];
  snprintf(path, sizeof path, "%s/growth%s.db", dir, *params ? "-mp" : "");
  sqlite3 *a = tu_open(path, params), *b = tu_open(path, params), *c = tu_open(path, params);
  tu_exec(a, "CREATE TABLE g1(k INTEGER PRIMARY KEY, v); CREATE TABLE g2(k INTEGER PRIMARY KEY, v); "
             "CREATE TABLE side(x)");
  tu_exec(c, "BEGIN; INSERT INTO side VALUES(1)"); /* holds a write lock throughout */
  /* Both grow the file from the same size: b's new pages are relocated past a's. */
  tu_exec(a, "BEGIN; INSERT INTO g1 VALUES(1, randomblob(20000))");
  tu_exec(b, "BEGIN; INSERT INTO g2 VALUES(1, randomblob(20000))");
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_OK);
  int rc = tu_try(b, "COMMIT");
  if (rc != SQLITE_OK) {
    fprintf(stderr, "test_engine_interleaved: %s: the second commit, another write lock held: %d %s\n",
            *params ? params : "one process", rc, sqlite3_errmsg(b));
    exit(1);
  }
  CHECK(tu_stat(b, MW_STAT_RELOCATIONS) >= 1);
  CHECK_RC(tu_try(c, "COMMIT"), SQLITE_OK);
  CHECK(tu_int(c, "SELECT length(v) FROM g1") == 20000 && tu_int(c, "SELECT length(v) FROM g2") == 20000);
  CHECK(tu_int(c, "SELECT count(*) FROM side") == 1);
  CHECK(tu_integrity_ok(c));
  printf("test_engine_interleaved: growth%s%s: 3 write transactions open at once on one thread, "
         "all committed (%lld relocation)\n", *params ? " with " : "", params,
         (long long)tu_stat(b, MW_STAT_RELOCATIONS));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  CHECK_RC(sqlite3_close(c), SQLITE_OK);
}

/* A transaction over main and an attached database, committed while another
** connection of the thread holds a write lock: both halves or neither. */
static void attached(const char *dir) {
  sqlite3 *a, *o, *c; /* c holds another write lock of this thread */
  tu_attached_pair(dir, &a, &o, &c);
  tu_exec(a, "BEGIN; UPDATE main.acct SET n = n - 10; UPDATE b.acct SET n = n + 10");
  tu_exec(o, "UPDATE acct SET n = n + 1"); /* b changes first: the whole commit is refused */
  CHECK(tu_try(a, "COMMIT") != SQLITE_OK);
  if (!sqlite3_get_autocommit(a)) tu_exec(a, "ROLLBACK");
  CHECK(tu_int(a, "SELECT n FROM main.acct") == 100 && tu_int(a, "SELECT n FROM b.acct") == 101);
  tu_exec(a, "BEGIN; UPDATE main.acct SET n = n - 10; UPDATE b.acct SET n = n + 10");
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_OK);
  CHECK_RC(tu_try(c, "COMMIT"), SQLITE_OK);
  CHECK(tu_int(c, "SELECT n FROM acct") == 90 && tu_int(o, "SELECT n FROM acct") == 111);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(o), SQLITE_OK);
  CHECK_RC(sqlite3_close(c), SQLITE_OK);
  printf("test_engine_interleaved: main + attached with another write lock held: both halves or neither\n");
}

/* Rebase (mw_rebase=1) of a commit made while another connection of the thread holds
** a write lock: the commit waits for SQLite's phase two, which comes after SQLite let
** the write lock go; the declaration must still be there (it was forgotten with the
** lock, and every such commit was refused). */
static void rebase_stashed(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/rebase.db", dir);
  sqlite3 *a = tu_open(path, "mw_rebase=1"), *b = tu_open(path, "mw_rebase=1"), *c = tu_open(path, "mw_rebase=1");
  tu_exec(a, "CREATE TABLE r(id INTEGER PRIMARY KEY, v); CREATE TABLE side(x); "
             "INSERT INTO r VALUES(1, 0), (2, 0), (3, 0)"); /* one leaf */
  tu_exec(c, "BEGIN; INSERT INTO side VALUES(1)"); /* holds a write lock throughout */
  int64_t rows[1];
  tu_exec(a, "BEGIN; UPDATE r SET v = v + 1 WHERE id = 1");
  rows[0] = 1;
  CHECK_RC(mw_rebase_rows_declare(a, 0, rows, 1), SQLITE_OK);
  tu_exec(b, "BEGIN; UPDATE r SET v = v + 1 WHERE id = 2");
  rows[0] = 2;
  CHECK_RC(mw_rebase_rows_declare(b, 0, rows, 1), SQLITE_OK);
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_OK);
  CHECK_RC(tu_try(b, "COMMIT"), SQLITE_OK); /* the same leaf changed: merged */
  CHECK(tu_stat(b, MW_STAT_REBASES) == 1);
  CHECK_RC(tu_try(c, "COMMIT"), SQLITE_OK);
  CHECK(tu_int(c, "SELECT sum(v) FROM r") == 2 && tu_int(c, "SELECT v FROM r WHERE id = 3") == 0);
  CHECK(tu_integrity_ok(c));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  CHECK_RC(sqlite3_close(c), SQLITE_OK);
  printf("test_engine_interleaved: rebase with another write lock held: merged\n");
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("interleaved");
  growth(dir, "");
  growth(dir, "mw_mp=1");
  attached(dir);
  rebase_stashed(dir);
  tu_rmdir();
  printf("test_engine_interleaved: ok\n");
  return 0;
}
