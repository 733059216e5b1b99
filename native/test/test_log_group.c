/* Group commit: a lone committer pays one write and one data sync per commit on its
** own thread; many committers share syncs (groups form), a write overlaps a sync, every
** acknowledged record is in the file and a sync began after it was submitted; recovery
** returns every record in epoch order; synchronous=OFF writes without syncing. */
#include "test_log_util.h"

#include <pthread.h>

#define PS 4096
#define MAXP 2
#define STEP (256 * 1024)
#define THREADS 8
#define PER_THREAD 60

static char dir[256], db[300];

static pthread_t main_thread;
static int writes, syncs, prealloc, off_thread; /* counted by the hook (atomics) */
static int slow_sync_us;   /* the hook sleeps this long inside each data sync */
static int in_sync;        /* a data sync is in progress (set around the sleep) */
static int overlapped;     /* writes that started while a sync was in progress */

static int count_hook(int op, mw_fd fd) {
  (void)fd;
  if (!pthread_equal(pthread_self(), main_thread)) __atomic_add_fetch(&off_thread, 1, __ATOMIC_RELAXED);
  if (op == MW_OP_WRITE) {
    __atomic_add_fetch(&writes, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&in_sync, __ATOMIC_SEQ_CST)) __atomic_add_fetch(&overlapped, 1, __ATOMIC_RELAXED);
  }
  if (op == MW_OP_DATASYNC) {
    __atomic_add_fetch(&syncs, 1, __ATOMIC_SEQ_CST);
    if (slow_sync_us) {
      __atomic_store_n(&in_sync, 1, __ATOMIC_SEQ_CST);
      mw_sleep_us((unsigned)slow_sync_us);
      __atomic_store_n(&in_sync, 0, __ATOMIC_SEQ_CST);
    }
  }
  if (op == MW_OP_PREALLOC) __atomic_add_fetch(&prealloc, 1, __ATOMIC_RELAXED);
  return 0;
}

static void reset_counts(void) {
  writes = syncs = prealloc = off_thread = overlapped = 0;
}

typedef struct worker {
  mw_log *log;
  mw_mutex *pub;
  uint64_t *next_epoch;
  int bad;
} worker;

static void *run_worker(void *arg) {
  worker *w = arg;
  for (int i = 0; i < PER_THREAD; i++) {
    int s0 = __atomic_load_n(&syncs, __ATOMIC_SEQ_CST);
    uint64_t end = 0;
    if (tl_commit(w->log, PS, w->next_epoch, MAXP, w->pub, &end) != SQLITE_OK) w->bad = 1;
    /* Acknowledged: a sync started after this commit began, and its bytes are there. */
    if (__atomic_load_n(&syncs, __ATOMIC_SEQ_CST) <= s0) w->bad = 2;
  }
  return 0;
}

static void check_recovered(uint64_t want_last, int sync_mode) {
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  CHECK_RC(tl_open(db, PS, sync_mode, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(!seen.bad);
  CHECK(base == 1 && last == want_last);
  CHECK(seen.first == 2 && seen.last == want_last && seen.count == want_last - 1);
  CHECK_RC(mw_log_close(log, 1), SQLITE_OK);
}

int main(void) {
  main_thread = pthread_self();
  tl_mkdir(dir, sizeof(dir), "mwlog-group");
  snprintf(db, sizeof(db), "%s/g.db", dir);

  /* One committer: exactly one write and one data sync per commit (plus one of each
  ** per preallocation step), all on the committing thread (no background thread). */
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  reset_counts();
  mw_fault_hook = count_hook;
  uint64_t epoch = 2;
  const int lone = 100;
  for (int i = 0; i < lone; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  mw_fault_hook = 0;
  printf("lone committer: %d commits, %d writes, %d syncs, %d preallocations\n", lone, writes, syncs, prealloc);
  /* Each growth of the file (one step) writes its zeros and syncs them once. */
  CHECK(prealloc >= 1 && prealloc <= 4);
  CHECK(writes == lone + prealloc && syncs == lone + prealloc && off_thread == 0);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_recovered(epoch - 1, 1);

  /* Many committers: groups form (fewer syncs than commits), writes overlap syncs,
  ** every record comes back in epoch order. A slow sync (1 ms more) makes it certain
  ** on any disk. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(last == 1);
  reset_counts();
  slow_sync_us = 1000;
  mw_fault_hook = count_hook;
  mw_mutex pub;
  mw_mutex_init(&pub);
  epoch = 2;
  pthread_t th[THREADS];
  worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i].log = log;
    w[i].pub = &pub;
    w[i].next_epoch = &epoch;
    w[i].bad = 0;
    CHECK(pthread_create(&th[i], 0, run_worker, &w[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], 0);
    CHECK(w[i].bad == 0);
  }
  mw_fault_hook = 0;
  slow_sync_us = 0;
  const int commits = THREADS * PER_THREAD;
  printf("%d committers: %d commits, %d writes, %d syncs, %d writes during a sync\n", THREADS, commits,
         writes, syncs, overlapped);
  CHECK(epoch - 2 == (uint64_t)commits);
  CHECK(syncs < commits / 2);
  CHECK(writes < commits);
  CHECK(overlapped > 0);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  mw_mutex_destroy(&pub);
  check_recovered(epoch - 1, 1);

  /* synchronous=OFF: written, never synced, all recovered. */
  CHECK_RC(tl_open(db, PS, 0, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  reset_counts();
  mw_fault_hook = count_hook;
  epoch = 2;
  for (int i = 0; i < 50; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  mw_fault_hook = 0;
  CHECK(syncs == 0 && writes == 50); /* no zeros written without syncs */
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_recovered(epoch - 1, 0);

  tl_rmdir(dir);
  printf("test_log_group: ok\n");
  return 0;
}
