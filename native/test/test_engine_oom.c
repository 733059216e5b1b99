/* Allocation failures of SQLite's allocator reach the caller (issue 12). SQLite's
** fault tests (malloc*.test) fail the n-th sqlite3_malloc and expect the statement to
** fail unless the failure was benign (a path SQLite marks as able to go on without
** the memory). An engine path that allocates with SQLite's allocator and goes on
** another way when that fails hides the failure: the statement succeeds where the
** harness expected an error (is_engine_wal's name of the -wal in xAccess/xDelete,
** needs_conversion's at open). Here every allocation of an open and a first read,
** of a new file and of an existing WAL-mode one, is failed in turn; a round that
** failed a non-benign allocation must end in an error. */
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
  tu_rmdir();
  printf("test_engine_oom: ok\n");
  return 0;
}
