/* A full disk through the engine: when the log cannot grow (ENOSPC injected at
** the platform layer), COMMIT fails with SQLITE_FULL before anything is assigned,
** the transaction is rolled back, the same connection commits again once space is
** back (no reopen), and no acknowledged commit is lost. And when the database file
** cannot grow (a file size limit: EFBIG), the last close cannot compact: it says so
** through sqlite3_log, leaves the log and the mark, and the next open replays every
** row. */
#include "test_engine_util.h"
#include "platform/platform.h"
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

static int close_logged;
static void on_log(void *arg, int code, const char *msg) {
  (void)arg;
  (void)code;
  if (strstr(msg, "the last close of") && strstr(msg, "nothing is lost"))
    __atomic_store_n(&close_logged, 1, __ATOMIC_RELEASE);
}

/* The last close with the database file unable to grow. */
static void close_cannot_grow(const char *dir) {
  char path[300], log[320];
  snprintf(path, sizeof path, "%s/grow.db", dir);
  snprintf(log, sizeof log, "%s-mw", path);
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE g(id INTEGER PRIMARY KEY, pad BLOB)");
  for (int i = 0; i < 50; i++) tu_exec(db, "INSERT INTO g(pad) VALUES (randomblob(20000))");
  struct stat st;
  CHECK(stat(path, &st) == 0);
  CHECK(st.st_size < 100000); /* the rows are in the log, not yet in the file */
  struct rlimit was, small;
  CHECK(getrlimit(RLIMIT_FSIZE, &was) == 0);
  small = was;
  small.rlim_cur = (rlim_t)st.st_size + 4096;
  CHECK(signal(SIGXFSZ, SIG_IGN) != SIG_ERR); /* EFBIG instead of the signal */
  CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
  CHECK_RC(sqlite3_close(db), SQLITE_OK); /* SQLite passes no close error on */
  CHECK(setrlimit(RLIMIT_FSIZE, &was) == 0);
  CHECK(__atomic_load_n(&close_logged, __ATOMIC_ACQUIRE));
  CHECK(access(log, F_OK) == 0);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READONLY);
  CHECK(tu_try(s, "SELECT count(*) FROM sqlite_master") == SQLITE_NOTADB);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  db = tu_open(path, "");
  CHECK(tu_int(db, "SELECT count(*) FROM g") == 50);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  CHECK(access(log, F_OK) != 0);
  s = tu_open_stock(path, SQLITE_OPEN_READONLY);
  CHECK(tu_int(s, "SELECT count(*) FROM g") == 50);
  CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  printf("test_engine_full: a last close that could not grow the file said so; the log "
         "stayed and the next open replayed 50 rows\n");
}

/* Read by the log's grower on a background worker while the test sets it: atomic. */
static int disk_full;
static int hook(int op, mw_fd fd) {
  (void)fd;
  return __atomic_load_n(&disk_full, __ATOMIC_ACQUIRE) && op == MW_OP_PREALLOC ? ENOSPC : 0;
}

int main(void) {
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_LOG, on_log, (void *)0), SQLITE_OK);
  const char *path = tu_db_path("full", "f.db");
  /* The hook goes in before any engine thread exists (the workers start at the open). */
  mw_fault_hook = hook;
  sqlite3 *db = tu_open(path, "");
  sqlite3 *other = tu_open(path, "");
  tu_exec(db, "CREATE TABLE f(id INTEGER PRIMARY KEY, pad BLOB)");
  __atomic_store_n(&disk_full, 1, __ATOMIC_RELEASE);
  int acked = 0, rc = SQLITE_OK;
  for (int i = 1; i <= 200; i++) {
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO f VALUES(%d, randomblob(100000))", i);
    rc = tu_try(db, sql);
    if (rc != SQLITE_OK) break;
    acked = i;
  }
  CHECK_RC(rc, SQLITE_FULL);
  CHECK(acked > 0);
  CHECK(sqlite3_get_autocommit(db));
  CHECK(tu_stat(db, MW_STAT_CONFLICT_FULL) == 1);
  /* Still full: an explicit transaction fails at COMMIT too, and can be retried. */
  tu_exec(db, "BEGIN");
  tu_exec(db, "INSERT INTO f VALUES(100000, randomblob(100000))");
  CHECK_RC(tu_try(db, "COMMIT"), SQLITE_FULL);
  tu_try(db, "ROLLBACK");
  CHECK(tu_int(other, "SELECT count(*) FROM f") == acked);
  /* Space is back: the same connections commit again. */
  __atomic_store_n(&disk_full, 0, __ATOMIC_RELEASE);
  tu_exec(db, "INSERT INTO f VALUES(100000, randomblob(100000))");
  tu_exec(other, "INSERT INTO f VALUES(100001, zeroblob(10))");
  CHECK(tu_int(db, "SELECT count(*) FROM f") == acked + 2);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(other), SQLITE_OK);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  mw_fault_hook = 0; /* the last close joined the background workers */
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READONLY);
  CHECK(tu_int(s, "SELECT count(*) FROM f") == acked + 2);
  CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  close_cannot_grow(tu_dir);
  tu_rmdir();
  printf("test_engine_full: SQLITE_FULL after %d commits, then commits again: ok\n", acked);
  return 0;
}
