/* Commits acknowledged once written (PRAGMA synchronous=NORMAL) are durable within a
** bound (compact.h, MW_UNSYNCED_MAX_MS: two ticks of the compactor and the sync), in one
** process as across processes (test_mp "normal"): stock SQLite in WAL mode syncs them
** at its next checkpoint only, the engine's compaction timer every 5 s.
**
** A NORMAL connection commits in bursts: no burst syncs the log (the commits do not
** wait for a sync); after each, the log is synced within 3 s, long before the
** compaction timer. A FULL connection then commits: every commit syncs, and an idle
** database syncs nothing more (the tick syncs only what was left unsynced). */
#include "test_engine_util.h"

#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("unsynced");
  char path[300];
  snprintf(path, sizeof path, "%s/u.db", dir);
  sqlite3 *n = tu_open(path, "");
  tu_exec(n, "PRAGMA synchronous=NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
  /* Let the creation's own sync (the first compaction may follow) settle. */
  usleep(600000);
  for (int burst = 0; burst < 3; burst++) {
    int64_t before = tu_stat(n, MW_STAT_LOG_SYNCS);
    uint64_t b0 = now_ns();
    for (int i = 0; i < 200; i++) tu_exec(n, "INSERT INTO t(v) VALUES (randomblob(300))");
    int64_t after = tu_stat(n, MW_STAT_LOG_SYNCS);
    /* The ticks of the burst (slow under an emulator or a sanitizer): one sync each. */
    int64_t ticks = (int64_t)((now_ns() - b0) / 200000000u) + 1;
    /* The bound: MW_UNSYNCED_MAX_MS (400 ms) and a sync, which a loaded disk can make
    ** last a second or more (2 s left 1.6 s for the sync and the worker's wait for a
    ** core); well below the compaction timer (5 s) that syncs them without the tick:
    ** burst 0 ends some 0.7 s after the open, bursts 1 and 2 just after the compaction
    ** that synced the one before, so each waits 4.3 s or more for it. */
    uint64_t t0 = now_ns();
    while (tu_stat(n, MW_STAT_LOG_SYNCS) == after) {
      if (now_ns() - t0 > 3000000000ull) {
        fprintf(stderr, "test_engine_unsynced: burst %d: 200 NORMAL commits still unsynced "
                "after 3 s\n", burst);
        CHECK(0);
      }
      usleep(1000);
    }
    double lag = (double)(now_ns() - t0) / 1e9;
    printf("test_engine_unsynced: burst %d: 200 NORMAL commits, %lld syncs during them, "
           "synced %.3f s after the last\n", burst, (long long)(after - before), lag);
    /* A sync now and then by the tick (every 200 ms), none per commit. */
    CHECK(after - before <= 2 * ticks + 2 && after - before < 100);
  }
  /* FULL: each commit syncs; once idle, nothing is left for the tick. */
  sqlite3 *f = tu_open(path, "");
  tu_exec(f, "PRAGMA synchronous=FULL");
  int64_t before = tu_stat(f, MW_STAT_LOG_SYNCS);
  for (int i = 0; i < 20; i++) tu_exec(f, "INSERT INTO t(v) VALUES (randomblob(300))");
  int64_t after = tu_stat(f, MW_STAT_LOG_SYNCS);
  CHECK(after - before >= 20);
  usleep(1000000);
  int64_t idle = tu_stat(f, MW_STAT_LOG_SYNCS) - after;
  printf("test_engine_unsynced: 20 FULL commits, %lld syncs; %lld more in 1 s idle\n",
         (long long)(after - before), (long long)idle);
  CHECK(idle <= 1); /* a compaction may run meanwhile: it syncs the database file */
  CHECK(tu_int(n, "SELECT count(*) FROM t") == 620);
  CHECK_RC(sqlite3_close(f), SQLITE_OK);
  CHECK_RC(sqlite3_close(n), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_unsynced: ok\n");
  return 0;
}
