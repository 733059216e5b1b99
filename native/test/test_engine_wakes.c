/*
** Wake-ups on the commit path (issue 35): what a commit costs in other threads'
** context switches.
**
**  1. background.c: a wake of a job that is running, or already due as early, does not
**     signal the workers (the worker that runs it looks at the due time when the step
**     ends); a wake that makes it due earlier does, and the job runs again.
**  2. log_group.c and background.c: commits past the log's limit (each kicks the
**     compactor, which is then due or running) and reservations during a log switch
**     (which holds growth: the grower could do nothing) do not signal the workers: one
**     writer commits 3000 transactions of 3 KB with mw_log_max_mb=1 and the workers
**     are signalled fewer than once per 20 commits (a few times per compaction).
**  3. commit.c: with synchronous=OFF, a committer that finds its group written makes
**     the whole group visible (every installed epoch whose record is written and that
**     is acknowledged once written), so that its followers find their epoch visible
**     instead of being woken one after the other: 16 threads commit, and the count of
**     commits made visible by another committer (db->visible_by_other) is
**     above zero (in at most 10 rounds), and every row is there. And a committer that finds its group's write
**     in progress spins briefly before it sleeps: some of those spins saw the write end
**     (log->write_spin_hits > 0).
**
** Shown to fail (scripts/mutants.mjs): mw_bg_wake signalling while the job runs
** (bg-wake-signal-while-running) fails part 1 at "no signal while running" (1000
** signals); reservations waking the grower while a switch holds growth
** (log-grower-wake-held) fail part 2 at "signals per commit" (about 560 signals for
** 3000 commits); make_visible counting only synced epochs as ready
** (visible-written-group-off) fails part 3 at "visible by other" (0); no spin
** (log-write-no-spin) fails it at "spun for the write" (0).
*/
#include "test_engine_internals.h"
#include "durability/log_private.h"
#include "platform/background.h"

#include <time.h>

static mw_mutex mu = MW_MUTEX_INIT;
static mw_cond cv = MW_COND_INIT;
static int entered, release_step, steps;

static uint64_t blocking_step(void *arg) {
  (void)arg;
  mw_mutex_lock(&mu);
  steps++;
  entered = 1;
  mw_cond_broadcast(&cv);
  while (!release_step) mw_cond_wait(&cv, &mu);
  mw_mutex_unlock(&mu);
  return 0;
}

static uint64_t counting_step(void *arg) {
  (void)arg;
  mw_mutex_lock(&mu);
  steps++;
  mw_cond_broadcast(&cv);
  mw_mutex_unlock(&mu);
  return 0;
}

static void wait_steps(int want) {
  mw_mutex_lock(&mu);
  for (int i = 0; i < 500 && steps < want; i++) mw_cond_timedwait_ms(&cv, &mu, 10);
  int got = steps;
  mw_mutex_unlock(&mu);
  CHECK(got >= want);
}

static void part_background(void) {
  static mw_bg_job a, b;
  CHECK_RC(mw_bg_add(&a, blocking_step, 0, 0), SQLITE_OK);
  mw_bg_wake(&a, 0);
  mw_mutex_lock(&mu);
  while (!entered) mw_cond_wait(&cv, &mu);
  mw_mutex_unlock(&mu);
  int64_t s0 = mw_bg_wake_signals();
  for (int i = 0; i < 1000; i++) mw_bg_wake(&a, 0);
  int64_t running = mw_bg_wake_signals() - s0;
  fprintf(stderr, "signals for 1000 wakes of a running job: %lld\n", (long long)running);
  CHECK(running == 0); /* no signal while running */
  mw_mutex_lock(&mu);
  release_step = 1;
  mw_cond_broadcast(&cv);
  mw_mutex_unlock(&mu);
  wait_steps(2); /* the wakes during the step are not lost: it runs again */
  mw_bg_remove(&a);

  mw_mutex_lock(&mu);
  steps = 0;
  mw_mutex_unlock(&mu);
  CHECK_RC(mw_bg_add(&b, counting_step, 0, 0), SQLITE_OK);
  s0 = mw_bg_wake_signals();
  mw_bg_wake(&b, (uint64_t)60 * 1000000000u);
  for (int i = 0; i < 1000; i++) mw_bg_wake(&b, (uint64_t)60 * 1000000000u);
  int64_t due = mw_bg_wake_signals() - s0;
  fprintf(stderr, "signals for 1001 wakes of a job due in 60 s: %lld\n", (long long)due);
  CHECK(due == 1); /* only the first moved its due time */
  mw_bg_wake(&b, 0); /* earlier: signals, and it runs now */
  CHECK(mw_bg_wake_signals() - s0 == 2);
  wait_steps(1);
  mw_bg_remove(&b);
}

static void part_kick(void) {
  const char *path = tu_db_path("wakes", "kick.db");
  sqlite3 *db = tu_open(path, "mw_log_max_mb=1");
  tu_exec(db, "PRAGMA synchronous=OFF; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t(v) VALUES (randomblob(3000))", -1, &st, 0),
           SQLITE_OK);
  int64_t s0 = mw_bg_wake_signals();
  int n = 3000;
  for (int i = 0; i < n; i++) {
    CHECK_RC(sqlite3_step(st), SQLITE_DONE);
    CHECK_RC(sqlite3_reset(st), SQLITE_OK);
  }
  int64_t signals = mw_bg_wake_signals() - s0;
  /* The log passed its limit several times: a compaction ends (a loaded machine may
  ** still be at the first one when the loop ends). */
  int64_t compactions = 0;
  for (int i = 0; i < 400 && (compactions = tu_stat(db, MW_STAT_COMPACTIONS)) < 1; i++)
    usleep(50000);
  fprintf(stderr, "%d commits past a 1 MiB log limit: %lld compactions, %lld signals\n", n,
          (long long)compactions, (long long)signals);
  CHECK(compactions >= 1); /* the limit was passed: the kick still works */
  CHECK(signals * 20 < n);  /* signals per commit */
  CHECK_RC(sqlite3_finalize(st), SQLITE_OK);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

#define THREADS 16
#define PER_THREAD 300
#define ROUNDS 10
static const char *group_path;
static int round_no;

static void *group_writer(void *arg) {
  int id = (int)(intptr_t)arg;
  sqlite3 *db = tu_open(group_path, "");
  tu_exec(db, "PRAGMA synchronous=OFF");
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t(id, v) VALUES (?, 'x')", -1, &st, 0), SQLITE_OK);
  for (int i = 0; i < PER_THREAD;) {
    CHECK_RC(sqlite3_bind_int64(st, 1, (int64_t)round_no * 100000000 + (int64_t)id * 1000000 + i),
             SQLITE_OK);
    int rc = sqlite3_step(st);
    CHECK_RC(sqlite3_reset(st), rc == SQLITE_DONE ? SQLITE_OK : rc);
    if (rc == SQLITE_DONE) i++;
    else CHECK((rc & 0xff) == SQLITE_BUSY);
  }
  CHECK_RC(sqlite3_finalize(st), SQLITE_OK);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void part_group(void) {
  group_path = tu_db_path("wakes", "group.db");
  sqlite3 *db = tu_open(group_path, "");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
  /* Rounds until both mechanisms showed (timing decides how often: on a loaded machine
  ** a round may see few of either; a broken one never shows in ROUNDS rounds). */
  mw_db *d = tu_db_of(db);
  int64_t sum = 0;
  uint64_t spin_hits = 0;
  for (round_no = 0; round_no < ROUNDS && (sum == 0 || spin_hits == 0);) {
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
      CHECK(pthread_create(&th[i], 0, group_writer, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], 0) == 0);
    round_no++;
    mw_mutex_lock(&d->mu);
    sum = d->visible_by_other;
    mw_mutex_unlock(&d->mu);
    mw_mutex_lock(&d->log->mu);
    spin_hits = d->log->write_spin_hits;
    mw_mutex_unlock(&d->log->mu);
  }
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(st), SQLITE_ROW);
  int64_t rows = sqlite3_column_int64(st, 0);
  CHECK_RC(sqlite3_finalize(st), SQLITE_OK);
  fprintf(stderr, "%d round(s) of %d commits: %lld made visible by another committer, %llu "
          "waits for the group's write ended while spinning\n", round_no, THREADS * PER_THREAD,
          (long long)sum, (unsigned long long)spin_hits);
  CHECK(rows == (int64_t)round_no * THREADS * PER_THREAD);
  CHECK(sum > 0);       /* visible by other */
  CHECK(spin_hits > 0); /* spun for the write */
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  part_background();
  part_kick();
  part_group();
  tu_rmdir();
  printf("test_engine_wakes: ok\n");
  return 0;
}
