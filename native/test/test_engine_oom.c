/* Allocation failures of SQLite's allocator reach the caller (issue 12). SQLite's
** fault tests (malloc*.test) fail the n-th sqlite3_malloc and expect the statement to
** fail unless the failure was benign (a path SQLite marks as able to go on without
** the memory). An engine path that allocates with SQLite's allocator and goes on
** another way when that fails hides the failure: the statement succeeds where the
** harness expected an error (is_engine_wal's name of the -wal in xAccess/xDelete,
** needs_conversion's at open). Here every allocation of an open and a first read,
** of a new file and of an existing WAL-mode one, is failed in turn; a round that
** failed a non-benign allocation must end in an error. And an ATTACH of a new file and
** a transaction over both (SQLite's mallocD-4): there the error must be SQLITE_NOMEM,
** as the suite expects: the engine refuses the attached file (its conversion failed
** for want of memory), and an ATTACH, which runs no auto-extension to report the
** open's message, meets the refused file's methods, which once answered
** SQLITE_CANTOPEN ("unable to open database file") whatever the cause. */
#include "test_engine_util.h"

static sqlite3_mem_methods real;
static int count, fail_at, failed_hard, benign_depth;

static int failing(void) {
  if (fail_at <= 0 || ++count != fail_at) return 0;
  if (benign_depth == 0) failed_hard++;
  return 1;
}
static void *x_malloc(int n) { return failing() ? 0 : real.xMalloc(n); }
static void *x_realloc(void *p, int n) { return failing() ? 0 : real.xRealloc(p, n); }
static void x_free(void *p) { real.xFree(p); }
static int x_size(void *p) { return real.xSize(p); }
static int x_roundup(int n) { return real.xRoundup(n); }
static int x_init(void *a) { return real.xInit(a); }
static void x_shutdown(void *a) { real.xShutdown(a); }
static void benign_begin(void) { benign_depth++; }
static void benign_end(void) { benign_depth--; }

/* One round: open path through the engine and read from it, with the n-th
** allocation failed. 1 when no allocation was failed (the round went past them all). */
static int round_at(const char *path, int n, int *pHidden) {
  count = 0;
  failed_hard = 0;
  fail_at = n;
  sqlite3 *db = 0;
  char uri[400];
  snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter", path);
  int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", 0, 0, 0);
  int hard = failed_hard, reached = count >= n;
  fail_at = 0;
  sqlite3_close(db);
  if (hard && rc == SQLITE_OK) {
    fprintf(stderr, "%s: allocation %d failed (not benign) and the open and read succeeded\n",
            path, n);
    (*pHidden)++;
  }
  return !reached;
}

/* One ATTACH round: main open (no failure), then the ATTACH of a new file and a
** transaction over both with the n-th allocation failed. 1 when no allocation was
** failed. A non-benign failure must end in SQLITE_NOMEM. */
static void remove_db(const char *path);
static int attach_round(const char *path, const char *aux, int n, int *pWrong) {
  remove_db(aux);
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE IF NOT EXISTS t(x)");
  char sql[600];
  snprintf(sql, sizeof sql, "ATTACH 'file:%s?vfs=multiwriter' AS aux; CREATE TABLE aux.u(y); "
           "BEGIN; INSERT INTO t VALUES(1); INSERT INTO aux.u VALUES(2); COMMIT;", aux);
  count = 0;
  failed_hard = 0;
  fail_at = n;
  int rc = sqlite3_exec(db, sql, 0, 0, 0);
  int hard = failed_hard, reached = count >= n;
  fail_at = 0;
  if (hard && rc != SQLITE_NOMEM) {
    fprintf(stderr, "%s: allocation %d of the ATTACH failed (not benign): rc %d (%s), not "
            "SQLITE_NOMEM\n", aux, n, rc, sqlite3_errmsg(db));
    (*pWrong)++;
  }
  if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return !reached;
}

/* Removes the database and whatever an engine or stock open left beside it. */
static void remove_db(const char *path) {
  static const char *const suffix[] = { "", "-mw", "-wal", "-shm", "-journal", "-mwshm" };
  char f[400];
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    snprintf(f, sizeof f, "%s%s", path, suffix[i]);
    unlink(f);
  }
}

static int fail_each(const char *path, int fresh) {
  int hidden = 0, n = 1;
  for (;; n++) {
    if (fresh) remove_db(path);
    if (round_at(path, n, &hidden)) break;
    CHECK(n < 5000);
  }
  printf("test_engine_oom: %s (%s): %d allocations failed in turn, %d failures hidden\n", path,
         fresh ? "new file" : "existing WAL-mode file", n - 1, hidden);
  return hidden;
}

int main(void) {
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real), SQLITE_OK);
  sqlite3_mem_methods m = { x_malloc, x_free, x_realloc, x_size, x_roundup, x_init, x_shutdown, 0 };
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_MALLOC, &m), SQLITE_OK);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  CHECK_RC(sqlite3_test_control(SQLITE_TESTCTRL_BENIGN_MALLOC_HOOKS, benign_begin, benign_end),
           SQLITE_OK);
  const char *dir = tu_tmpdir("oom");
  char path[300];
  snprintf(path, sizeof path, "%s/oom.db", dir);
  int hidden = fail_each(path, 1);
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES(1)");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  hidden += fail_each(path, 0);
  CHECK(hidden == 0);
  char aux[300];
  snprintf(aux, sizeof aux, "%s/aux.db", dir);
  int wrong = 0, n = 1;
  for (; !attach_round(path, aux, n, &wrong); n++) CHECK(n < 20000);
  printf("test_engine_oom: ATTACH of a new file and a transaction over both: %d allocations "
         "failed in turn, %d not reported as SQLITE_NOMEM\n", n - 1, wrong);
  CHECK(wrong == 0);
  tu_rmdir();
  printf("test_engine_oom: ok\n");
  return 0;
}
