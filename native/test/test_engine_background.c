/*
** The background workers are shared by every open database of the process
** (background.c): many open databases cost a bounded number of threads, an idle one
** costs no wake-up, a commit wakes its compactor again, and the last close stops
** every worker.
**
** Shown to fail: with a thread per database (the pool's cap ignored) the thread
** bound fails; with the compactor ticking while idle (compactor_step returning TICK
** always) "idle costs nothing" fails; without the wake at the end of a committing
** transaction (mw_compact_dirty_locked) the second compaction never comes.
*/
#include "test_engine_util.h"

#include <dirent.h>

#define MAX_WORKERS 4   /* MW_BG_WORKERS */
#define RUNTIME_SLACK 2 /* threads a sanitizer's runtime may start on its own (TSan) */

/* Threads of this process (Linux), or -1 where /proc cannot tell (qemu-user lists
** its own threads too). */
static int os_threads(void) {
#ifdef __linux__
  if (getenv("MW_TEST_EMULATOR")) return -1;
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != 0;)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
#else
  return -1;
#endif
}

/* Waits up to `secs` for db's compactions to reach `want`. */
static int wait_compactions(sqlite3 *db, int64_t want, int secs) {
  for (int i = 0; i < secs * 20; i++) {
    if (tu_stat(db, MW_STAT_COMPACTIONS) >= want) return 1;
    usleep(50000);
  }
  return 0;
}

int main(void) {
  const char *scale_env = getenv("MW_TEST_SCALE");
  double scale = scale_env ? atof(scale_env) : 1.0;
  int ndb = (int)(200 * (scale > 0 ? scale : 1.0));
  if (ndb < 8) ndb = 8;
  char *path0 = strdup(tu_db_path("background", "db0.db"));
  CHECK(path0 != 0);
  int before = os_threads();

  sqlite3 **dbs = calloc((size_t)ndb, sizeof *dbs);
  CHECK(dbs != 0);
  for (int i = 0; i < ndb; i++) {
    char path[400];
    snprintf(path, sizeof path, "%s/db%d.db", tu_dir, i);
    dbs[i] = tu_open(path, "");
    tu_exec(dbs[i], "CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  }

  /* 1. Bounded threads, whatever the number of databases. */
  int64_t workers = tu_stat(dbs[0], MW_STAT_BACKGROUND_THREADS);
  CHECK(workers >= 1 && workers <= MAX_WORKERS);
  int during = os_threads();
  if (before >= 0 && during >= 0) CHECK(during - before <= MAX_WORKERS + RUNTIME_SLACK);

  /* 2. The shared workers compact every database (the timer: about 5 s). */
  for (int i = 0; i < ndb; i++) CHECK(wait_compactions(dbs[i], 1, 60));

  /* 3. An idle database costs no wake-up: once compacted with no snapshot open, its
  ** compactor does not run at all (it ticked every 200 ms with a thread of its own). */
  int idle = 0;
  for (int t = 0; t < 20 && !idle; t++) {
    int64_t a = tu_stat(dbs[0], MW_STAT_COMPACTOR_RUNS);
    usleep(1000000);
    idle = tu_stat(dbs[0], MW_STAT_COMPACTOR_RUNS) == a;
  }
  CHECK(idle);

  /* 4. A commit wakes it: the new row reaches the database file. */
  int64_t c0 = tu_stat(dbs[0], MW_STAT_COMPACTIONS);
  tu_exec(dbs[0], "INSERT INTO t VALUES (2)");
  CHECK(wait_compactions(dbs[0], c0 + 1, 60));
  CHECK(tu_int(dbs[0], "SELECT count(*) FROM t") == 2);

  /* 5. The last close stops every worker. */
  for (int i = 0; i < ndb; i++) CHECK_RC(sqlite3_close(dbs[i]), SQLITE_OK);
  int after = os_threads();
  if (before >= 0 && after >= 0) CHECK(after - before <= RUNTIME_SLACK);
  sqlite3 *check = tu_open_stock(path0, SQLITE_OPEN_READONLY);
  CHECK(tu_int(check, "SELECT count(*) FROM t") == 2);
  CHECK(tu_integrity_ok(check));
  sqlite3_close(check);

  free(dbs);
  free(path0);
  tu_rmdir();
  printf("test_engine_background: ok (%d databases, %lld workers)\n", ndb, (long long)workers);
  return 0;
}
