/* The hot-spot turn's queue (turn.c): lanes that lost 8 commits in a row (or fewer:
** their heat queues them after 3) queue for the turn in FIFO order, the turn passes at the end of the holder's transaction,
** and a holder that never ends its transaction loses the turn after
** MW_TURN_HOLD_MS, so the next in line gets it. */
#include "test_engine_internals.h"
#include "platform/platform.h"
#include <pthread.h>
#include <unistd.h>

#define TURN_AFTER 8     /* MW_TURN_AFTER of engine.h */
#define TURN_HOLD_MS 500 /* MW_TURN_HOLD_MS of engine.h */

static const char *path;

/* Makes `c` lose n commits in a row against `o`. */
static void lose(sqlite3 *c, sqlite3 *o, int n) {
  for (int i = 0; i < n; i++) {
    tu_exec(c, "BEGIN");
    (void)tu_int(c, "SELECT v FROM t WHERE k=1");
    tu_exec(o, "UPDATE t SET v=v+1 WHERE k=1");
    tu_exec(c, "UPDATE t SET v=v+1 WHERE k=1");
    CHECK_RC(tu_try(c, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  }
}

typedef struct waiter {
  sqlite3 *db;
  int hold_ms;          /* keep the transaction open this long; <0: leave it open */
  uint64_t got_ns;      /* when its snapshot (and so the turn) was granted */
} waiter;

/* Waits until l is in the turn's queue (turn.c sets turn_queued under db->mu): 30 s at
** most. Waited for, not slept for: c must queue before d, and a keeps its place at the
** head only MW_TURN_HOLD_MS once another lane queues, so the time to here counts
** against a's hold (two fixed 100 ms sleeps and a loaded emulator could pass it). */
static void await_queued(mw_lane *l) {
  uint64_t t0 = mw_now_ns();
  for (;;) {
    mw_mutex_lock(&l->db->mu);
    int q = l->turn_queued;
    mw_mutex_unlock(&l->db->mu);
    if (q) return;
    CHECK(mw_now_ns() - t0 < 30000000000ull);
    usleep(200);
  }
}

static void *queued(void *arg) {
  waiter *w = arg;
  tu_exec(w->db, "BEGIN");
  (void)tu_int(w->db, "SELECT count(*) FROM t"); /* the snapshot starts here */
  __atomic_store_n(&w->got_ns, mw_now_ns(), __ATOMIC_SEQ_CST);
  if (w->hold_ms >= 0) {
    usleep((useconds_t)w->hold_ms * 1000u);
    tu_exec(w->db, "COMMIT");
  }
  return 0;
}

int main(void) {
  alarm(60); /* a turn that is never released would hang: fail instead */
  const char *dir = tu_tmpdir("growth-turn");
  char p[400];
  snprintf(p, sizeof p, "%s/t.db", dir);
  path = p;
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, ""), *c = tu_open(path, ""),
          *d = tu_open(path, "");
  tu_exec(a, "CREATE TABLE t(k INTEGER PRIMARY KEY, v); INSERT INTO t VALUES(1, 0), (2, 0)");
  lose(a, b, TURN_AFTER);
  lose(c, b, TURN_AFTER);
  lose(d, b, TURN_AFTER);
  /* Turns taken while losing (the heat queues a lane before its 8th loss). */
  int64_t ta0 = tu_stat(a, MW_STAT_TURNS), tc0 = tu_stat(c, MW_STAT_TURNS),
          td0 = tu_stat(d, MW_STAT_TURNS);

  /* a takes the turn and keeps its transaction open. */
  tu_exec(a, "BEGIN");
  (void)tu_int(a, "SELECT count(*) FROM t");
  CHECK(tu_stat(a, MW_STAT_TURNS) == ta0 + 1);

  /* c then d queue behind it (their lanes taken here: the threads use c and d). */
  mw_lane *lc = tu_lane_of(c), *ld = tu_lane_of(d);
  waiter wc = { c, 150, 0 }, wd = { d, -1, 0 };
  pthread_t tc, td;
  CHECK(pthread_create(&tc, 0, queued, &wc) == 0);
  await_queued(lc); /* c queued first */
  CHECK(pthread_create(&td, 0, queued, &wd) == 0);
  await_queued(ld);
  /* A lane that does not queue still gets through (its wait is bounded). */
  uint64_t t0 = mw_now_ns();
  tu_exec(b, "UPDATE t SET v=v+1 WHERE k=2");
  CHECK(mw_now_ns() - t0 < 2000000000ull);
  CHECK(__atomic_load_n(&wc.got_ns, __ATOMIC_SEQ_CST) == 0);
  CHECK(__atomic_load_n(&wd.got_ns, __ATOMIC_SEQ_CST) == 0);
  uint64_t end_a = mw_now_ns();
  tu_exec(a, "COMMIT"); /* the turn passes to c, first in line */
  CHECK(pthread_join(tc, 0) == 0);
  CHECK(pthread_join(td, 0) == 0);
  printf("test_growth_turn: c got the turn %.1f ms after a ended, d %.1f ms after\n",
         (double)(wc.got_ns - end_a) / 1e6, (double)(wd.got_ns - end_a) / 1e6);
  CHECK(wc.got_ns > end_a && wd.got_ns > wc.got_ns);
  CHECK(wd.got_ns - wc.got_ns >= 140000000ull); /* d waited for c's whole transaction */
  CHECK(tu_stat(c, MW_STAT_TURNS) == tc0 + 1);
  CHECK(tu_stat(d, MW_STAT_TURNS) == td0 + 1);

  /* d now holds the turn and never ends its transaction. c (still 8 losses
  ** behind it: its last transaction wrote nothing) queues behind d and gets the
  ** turn once d has kept its place MW_TURN_HOLD_MS. */
  t0 = mw_now_ns();
  tu_exec(c, "UPDATE t SET v=v+1 WHERE k=2");
  double ms = (double)(mw_now_ns() - t0) / 1e6;
  printf("test_growth_turn: c got the turn from a holder that never returns after %.1f ms\n", ms);
  CHECK(ms < 5.0 * TURN_HOLD_MS);
  CHECK(tu_stat(c, MW_STAT_TURNS) == tc0 + 2);
  CHECK(tu_stat(c, MW_STAT_COMMITS) == 1);

  tu_exec(d, "COMMIT");
  CHECK(tu_integrity_ok(a));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  CHECK_RC(sqlite3_close(c), SQLITE_OK);
  CHECK_RC(sqlite3_close(d), SQLITE_OK);
  tu_rmdir();
  printf("test_growth_turn: ok\n");
  return 0;
}
