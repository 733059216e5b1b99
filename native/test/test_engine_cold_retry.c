/* A read transaction that begins while another connection commits all the time
** (lane.c, snap_begin). A warm lane whose snapshot moved on goes cold: it zeroes its
** wal-index header, so SQLite drops its cache, and SQLite takes the read lock again.
** That retry must not go cold once more for the commits that came in between: it
** did, and a reader slower than the commits went cold at every try until SQLite gave
** up after 100 of them with SQLITE_PROTOCOL (first seen in test_mp refresh_switch,
** whose timing no longer reaches it reliably). Here every read begins after a new
** commit (so its lane goes cold), and a pause point holds each retry after a cold
** start for 1 ms (MW_PAUSE_AT=lane_cold_retry:1, set for a child run of this program)
** while a thread commits without syncing, so that every retry finds new commits:
** every read must succeed and see the rows grow. */
#include "test_engine_util.h"
#include "test_spawn_util.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define READS 40

static const char *db_path;
static int stop;
static long committed; /* the writer's commits so far */

static void *writer(void *arg) {
  (void)arg;
  sqlite3 *w = tu_open(db_path, "");
  tu_exec(w, "PRAGMA synchronous=OFF"); /* many commits in each of the reader's pauses */
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    int rc = tu_try(w, "INSERT INTO t(v) VALUES (randomblob(20))");
    CHECK(rc == SQLITE_OK || (rc & 0xff) == SQLITE_BUSY);
    if (rc == SQLITE_OK) __atomic_add_fetch(&committed, 1, __ATOMIC_RELEASE);
  }
  CHECK_RC(sqlite3_close(w), SQLITE_OK);
  return 0;
}

static int child(const char *path) {
  db_path = path;
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  sqlite3 *r = tu_open(path, "");
  CHECK(tu_int(r, "SELECT count(*) FROM t") == 1); /* the reader's lane is warm from here */
  pthread_t th;
  CHECK(pthread_create(&th, 0, writer, 0) == 0);
  int64_t last = 0;
  for (int i = 0; i < READS; i++) {
    /* A commit the last read did not see: this one's lane goes cold. (Waiting for the
    ** counter to move was not enough: the writer counts a commit after COMMIT returned,
    ** so the last read could already hold the commit counted next, and under TSan on a
    ** loaded machine a read then found no new row: 3 runs in 150, at 248cc50 too.) The
    ** table holds 1 + the acknowledged commits, and the last read saw `last` rows. */
    while (1 + __atomic_load_n(&committed, __ATOMIC_ACQUIRE) <= last) usleep(100);
    sqlite3_stmt *st = 0;
    CHECK_RC(sqlite3_prepare_v2(r, "SELECT count(*) FROM t", -1, &st, 0), SQLITE_OK);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
      fprintf(stderr, "test_engine_cold_retry: read %d while commits go on: %d %s\n", i,
              sqlite3_extended_errcode(r), sqlite3_errmsg(r));
      exit(1);
    }
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    CHECK(n > last);
    last = n;
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  CHECK(pthread_join(th, 0) == 0);
  long commits = __atomic_load_n(&committed, __ATOMIC_ACQUIRE);
  CHECK(tu_int(r, "SELECT count(*) FROM t") == 1 + commits);
  CHECK_RC(sqlite3_close(r), SQLITE_OK);
  printf("test_engine_cold_retry: %d reads, each begun after a new commit while commits went "
         "on (%ld commits): all read\n", READS, commits);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);
  const char *path = tu_db_path("coldretry", "c.db");
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB); INSERT INTO t(v) VALUES (1)");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  char *args[] = { "child", (char *)path, 0 };
  pid_t pid = tu_spawn(tu_abs_exe(argv[0]), "MW_PAUSE_AT", "lane_cold_retry:1", args);
  CHECK(tu_wait_status(pid) == 0);
  tu_rmdir();
  printf("test_engine_cold_retry: ok\n");
  return 0;
}
