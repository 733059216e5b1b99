/* Group commit: a lone committer pays one write and one data sync per commit on its
** own thread; many committers share syncs (groups form), a write overlaps a sync, every
** acknowledged record is in the file and a sync began after it was submitted; recovery
** returns every record in epoch order; synchronous=OFF writes without syncing. */
#include "test_log_util.h"
#include "durability/log_private.h" /* stop_growth */

#include <pthread.h>

#define PS 4096
#define MAXP 2
#define STEP (256 * 1024)
#define THREADS 8
#define PER_THREAD 60

static char dir[256], db[300];

static uint64_t tl_file_size_of_log(mw_log *log) {
  (void)log;
  char p[320];
  snprintf(p, sizeof(p), "%s-mw", db);
  return tl_file_size(p);
}

static pthread_t main_thread;
static int writes, syncs, prealloc;              /* counted by the hook (atomics) */
static int committer_writes;                      /* writes on the committers' threads */
static _Thread_local int is_committer;
static int writes_main, syncs_main, prealloc_main; /* ... on the committing thread */
static int zeroing_main, zero_writes_main; /* its growth's zeros: from the prealloc to the sync */
static int in_commit, prealloc_in_commit;
/* hold: a growth waits (30 s at most) for release, while the main thread commits 5 times
** (5 s was the bound: a loaded disk's syncs can take a second each) */
static int hold_prealloc, in_prealloc;
static int slow_sync_us;   /* the hook sleeps this long inside each data sync */
static int in_sync;        /* a data sync is in progress (set around the sleep) */
static int overlapped;     /* committers' writes that started while a sync was in progress */

/* The end of the contiguous run of complete, valid records that were in the file when
** the latest data sync started: what that sync makes durable. A commit may only be
** acknowledged once this passes its record. */
static uint64_t sync_prefix = MW_LOG_HDR_SIZE, next_scan_epoch = 2;
static pthread_mutex_t scan_mu = PTHREAD_MUTEX_INITIALIZER;
static int scan_on;

static void scan_prefix(int fd) {
  pthread_mutex_lock(&scan_mu);
  unsigned char hdr[MW_LOG_HDR_SIZE];
  CHECK(pread(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr));
  uint64_t salt;
  memcpy(&salt, hdr + MW_LOG_HDR_SALT, 8);
  uint64_t off = __atomic_load_n(&sync_prefix, __ATOMIC_SEQ_CST);
  static unsigned char rec[MW_REC_HDR_SIZE + 64 * (4 + PS)];
  for (;;) {
    if (pread(fd, rec, MW_REC_HDR_SIZE, (off_t)off) != MW_REC_HDR_SIZE) break;
    uint32_t magic, n;
    uint64_t epoch, ck;
    memcpy(&magic, rec, 4);
    memcpy(&n, rec + MW_REC_NPAGES, 4);
    memcpy(&epoch, rec + MW_REC_EPOCH, 8);
    memcpy(&ck, rec + MW_REC_CKSUM, 8);
    if (magic != MW_REC_MAGIC || epoch != next_scan_epoch || n > 64) break;
    size_t blen = (size_t)n * (4 + PS);
    if (pread(fd, rec + MW_REC_HDR_SIZE, blen, (off_t)(off + MW_REC_HDR_SIZE)) != (ssize_t)blen) break;
    if (mw_log_checksum(mw_log_checksum(salt, rec, MW_REC_CKSUM), rec + MW_REC_HDR_SIZE, blen) != ck) break;
    off += MW_REC_HDR_SIZE + blen;
    next_scan_epoch++;
  }
  __atomic_store_n(&sync_prefix, off, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&scan_mu);
}

static int count_hook(int op, mw_fd fd) {
  int slow = __atomic_load_n(&slow_sync_us, __ATOMIC_SEQ_CST);
  if (op == MW_OP_DATASYNC && __atomic_load_n(&scan_on, __ATOMIC_SEQ_CST)) scan_prefix(fd);
  int on_main = pthread_equal(pthread_self(), main_thread);
  if (on_main && op == MW_OP_WRITE) writes_main++;
  if (on_main && op == MW_OP_WRITE && zeroing_main) zero_writes_main++;
  if (on_main && op == MW_OP_DATASYNC) syncs_main++;
  if (on_main && op == MW_OP_DATASYNC) zeroing_main = 0;
  if (on_main && op == MW_OP_PREALLOC) prealloc_main++;
  if (on_main && op == MW_OP_PREALLOC) zeroing_main = 1;
  if (op == MW_OP_WRITE) {
    __atomic_add_fetch(&writes, 1, __ATOMIC_RELAXED);
    if (is_committer) __atomic_add_fetch(&committer_writes, 1, __ATOMIC_RELAXED);
    if (is_committer && __atomic_load_n(&in_sync, __ATOMIC_SEQ_CST))
      __atomic_add_fetch(&overlapped, 1, __ATOMIC_RELAXED);
    /* Slow writes too: records stay assigned but unwritten while syncs start. */
    if (slow) mw_sleep_us((unsigned)slow / 5);
  }
  if (op == MW_OP_DATASYNC) {
    __atomic_add_fetch(&syncs, 1, __ATOMIC_SEQ_CST);
    if (slow) {
      __atomic_store_n(&in_sync, 1, __ATOMIC_SEQ_CST);
      mw_sleep_us((unsigned)slow);
      __atomic_store_n(&in_sync, 0, __ATOMIC_SEQ_CST);
    }
  }
  if (op == MW_OP_PREALLOC) __atomic_add_fetch(&prealloc, 1, __ATOMIC_RELAXED);
  if (op == MW_OP_PREALLOC && on_main && in_commit) prealloc_in_commit++; /* main's flag */
  if (op == MW_OP_PREALLOC && __atomic_load_n(&hold_prealloc, __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&in_prealloc, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 30000 && __atomic_load_n(&hold_prealloc, __ATOMIC_SEQ_CST); i++) mw_sleep_us(1000);
    __atomic_store_n(&in_prealloc, 0, __ATOMIC_SEQ_CST);
  }
  return 0;
}

#define LD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)

static void reset_counts(void) {
  __atomic_store_n(&writes, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&committer_writes, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&syncs, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&prealloc, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&overlapped, 0, __ATOMIC_SEQ_CST);
  writes_main = syncs_main = prealloc_main = 0; /* only the main thread touches these */
  zeroing_main = zero_writes_main = 0;
}

typedef struct worker {
  mw_log *log;
  mw_mutex *pub;
  uint64_t *next_epoch;
  int bad;
} worker;

static void *run_worker(void *arg) {
  worker *w = arg;
  is_committer = 1;
  for (int i = 0; i < PER_THREAD; i++) {
    int s0 = __atomic_load_n(&syncs, __ATOMIC_SEQ_CST);
    uint64_t end = 0;
    if (tl_commit(w->log, PS, w->next_epoch, MAXP, w->pub, &end) != SQLITE_OK) w->bad = 1;
    /* Acknowledged: a sync started after this commit began, and its bytes are there. */
    if (__atomic_load_n(&syncs, __ATOMIC_SEQ_CST) <= s0) w->bad = 2;
    /* ... and that sync started when the whole record was in the file. */
    if (__atomic_load_n(&sync_prefix, __ATOMIC_SEQ_CST) < end) w->bad = 3;
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

/* A close stops the grower after the chunk of zeros it is writing: the room it was
** adding (two steps ahead, set off by the first commit) would never be used. Before,
** the close waited for all of it and its sync: most of the close of a process that
** opened, committed once and closed. The grower's writes take 20 ms each here.
** And the first commit of the empty log zeroes a quarter step on its own path (16
** chunks of 64 KiB, then its record), not a whole step (64 chunks). */
static int grower_writes, first_commit_writes;
/* The log being closed (set just before its close), and the grower's writes that began
** once the close had set stop_growth: counted from the flag, not from a count read just
** before the close (a closing thread descheduled there on a loaded machine lets the
** grower start a chunk or two, 20 ms each, before its stop). */
static mw_log *closing_log;
static int writes_after_stop;
static int slow_grower_hook(int op, mw_fd fd) {
  (void)fd;
  if (op == MW_OP_WRITE && pthread_equal(pthread_self(), main_thread)) first_commit_writes++;
  if (op == MW_OP_WRITE && !pthread_equal(pthread_self(), main_thread)) {
    mw_log *l = __atomic_load_n(&closing_log, __ATOMIC_SEQ_CST);
    if (l && __atomic_load_n(&l->stop_growth, __ATOMIC_ACQUIRE))
      __atomic_add_fetch(&writes_after_stop, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&grower_writes, 1, __ATOMIC_SEQ_CST);
    mw_sleep_us(20000);
  }
  return 0;
}

static void check_close_stops_grower(void) {
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  const uint64_t step = 4u << 20; /* the lead, two steps: 128 chunks of 64 KiB */
  CHECK_RC(tl_open(db, PS, 1, step, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  uint64_t epoch = last + 1;
  CHECK(last == 1 && mw_log_size(log) == MW_LOG_HDR_SIZE); /* empty */
  __atomic_store_n(&grower_writes, 0, __ATOMIC_SEQ_CST);
  first_commit_writes = 0;
  tl_set_hook(slow_grower_hook);
  /* Grows its first room itself, then wakes the grower for the lead. */
  CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  printf("the first commit of an empty log: %d writes on its thread\n", first_commit_writes);
  CHECK(first_commit_writes == (int)(step / 4 / (64 * 1024)) + 1);
  for (int w = 0; w < 10000 && LD(grower_writes) < 2; w++) mw_sleep_us(500);
  int at_close = LD(grower_writes);
  CHECK(at_close >= 2); /* the grower is at work */
  __atomic_store_n(&writes_after_stop, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&closing_log, log, __ATOMIC_SEQ_CST);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK); /* the grower is joined: no hook call after */
  __atomic_store_n(&closing_log, (mw_log *)0, __ATOMIC_SEQ_CST);
  int after = LD(grower_writes) - at_close, after_stop = LD(writes_after_stop);
  tl_set_hook(0);
  printf("a close during the grower's room: %d chunk(s) of zeros written after it began, %d "
         "after its stop\n", after, after_stop);
  /* At most the chunk whose check of the stop raced the close's store. */
  CHECK(after_stop <= 1);
  /* The close stopped the grower at once: the rest of its room is over 100 chunks, and
  ** 32 would take a closing thread descheduled 640 ms. */
  CHECK(after < 32);
  check_recovered(epoch - 1, 1);
}

int main(void) {
  alarm(120); /* a hang (a broken wake-up) fails the test instead of the CI run */
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
  tl_set_hook(count_hook);
  uint64_t epoch = 2;
  const int lone = 100;
  for (int i = 0; i < lone; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  tl_set_hook(0);
  printf("lone committer: %d commits, %d writes and %d syncs on its thread, %d growths there, %d "
         "by the grower\n", lone, writes_main, syncs_main, prealloc_main, LD(prealloc) - prealloc_main);
  /* A growth made by the committer itself (when the grower was late) writes its zeros
  ** (in chunks of 64 KiB) and syncs them once; anything else on its thread is its own
  ** records. */
  CHECK(LD(prealloc) >= 1);
  CHECK(zero_writes_main >= prealloc_main);
  CHECK(writes_main == lone + zero_writes_main && syncs_main == lone + prealloc_main);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_recovered(epoch - 1, 1);

  /* Many committers: groups form (fewer syncs than commits), writes overlap syncs,
  ** every record comes back in epoch order. A slow sync (1 ms more) makes it certain
  ** on any disk. */
  /* One preallocation for the whole run: its zero fill and sync are not a group's. */
  CHECK_RC(tl_open(db, PS, 1, 8u << 20, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(last == 1);
  reset_counts();
  __atomic_store_n(&slow_sync_us, 1000, __ATOMIC_SEQ_CST);
  __atomic_store_n(&scan_on, 1, __ATOMIC_SEQ_CST);
  tl_set_hook(count_hook);
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
    if (w[i].bad) printf("committer %d: bad %d\n", i, w[i].bad);
    CHECK(w[i].bad == 0);
  }
  tl_set_hook(0);
  __atomic_store_n(&slow_sync_us, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&scan_on, 0, __ATOMIC_SEQ_CST);
  const int commits = THREADS * PER_THREAD;
  printf("%d committers: %d commits, %d writes (%d on their threads), %d syncs, %d writes during a "
         "sync\n", THREADS, commits, LD(writes), LD(committer_writes), LD(syncs), LD(overlapped));
  CHECK(epoch - 2 == (uint64_t)commits);
  CHECK(LD(syncs) < commits / 2);
  /* The records' writes, on the committers' threads (the grower writes its zeros in
  ** 64 KiB chunks on its own). */
  CHECK(LD(committer_writes) < commits);
  CHECK(LD(overlapped) > commits / 20);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  mw_mutex_destroy(&pub);
  check_recovered(epoch - 1, 1);

  /* With mw_log_grow_ahead called between commits (as a background thread would), no
  ** commit ever preallocates; on its return there are two steps of room. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK_RC(mw_log_grow_ahead(log), SQLITE_OK);
  CHECK(tl_file_size_of_log(log) - mw_log_size(log) >= 2 * STEP);
  reset_counts();
  prealloc_in_commit = 0;
  tl_set_hook(count_hook);
  epoch = 2;
  for (int i = 0; i < 100; i++) {
    CHECK_RC(mw_log_grow_ahead(log), SQLITE_OK);
    in_commit = 1;
    CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
    in_commit = 0;
  }
  tl_set_hook(0);
  printf("grow ahead: %d preallocations, %d inside commits\n", LD(prealloc), prealloc_in_commit);
  CHECK(LD(prealloc) >= 2 && prealloc_in_commit == 0);

  /* While the grower grows the file (held here), commits that fit the room left go
  ** on: commit until less than two steps are left (the grower starts), then 5 more. */
  __atomic_store_n(&hold_prealloc, 1, __ATOMIC_SEQ_CST);
  tl_set_hook(count_hook);
  for (int i = 0; !__atomic_load_n(&in_prealloc, __ATOMIC_SEQ_CST); i++) {
    CHECK(i < 100);
    CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
    if (tl_file_size_of_log(log) - mw_log_size(log) < 2 * STEP) {
      /* the reservation that left less than two steps woke the grower (a background
      ** worker: 30 s for it to get a core) */
      for (int k = 0; k < 30000 && !__atomic_load_n(&in_prealloc, __ATOMIC_SEQ_CST); k++) mw_sleep_us(1000);
      CHECK(__atomic_load_n(&in_prealloc, __ATOMIC_SEQ_CST));
    }
  }
  for (int i = 0; i < 5; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  CHECK(__atomic_load_n(&in_prealloc, __ATOMIC_SEQ_CST) == 1); /* done during the growth */
  __atomic_store_n(&hold_prealloc, 0, __ATOMIC_SEQ_CST);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK); /* joins the grower */
  log = 0;
  check_recovered(epoch - 1, 1);

  /* mw_log_wait_written: the record is in the file, no sync was needed for it; a
  ** later wait_durable syncs it. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  {
    epoch = last + 1;
    tl_rec r;
    uint64_t bytes;
    tl_build(&r, PS, epoch, MAXP);
    bytes = mw_log_record_size(log, r.n);
    CHECK_RC(mw_log_reserve(log, bytes), SQLITE_OK);
    uint64_t off = mw_log_assign(log, epoch, bytes);
    /* The first reservation left less than the grower's lead: let that growth (its
    ** zeros and sync) end before counting. */
    CHECK_RC(mw_log_grow_ahead(log), SQLITE_OK);
    reset_counts();
    tl_set_hook(count_hook);
    CHECK_RC(mw_log_submit(log, off, epoch, tl_dbpages(epoch), 0, r.n, r.pgnos,
                           (const unsigned char *const *)r.img), SQLITE_OK);
    CHECK_RC(mw_log_wait_written(log, off + bytes), SQLITE_OK);
    CHECK(LD(writes) == 1 && LD(syncs) == 0);
    CHECK_RC(mw_log_wait_durable(log, off + bytes), SQLITE_OK);
    CHECK(LD(writes) == 1 && LD(syncs) == 1);
    tl_set_hook(0);
    tl_free(&r);
    epoch++;
  }
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_recovered(epoch - 1, 1);

  /* synchronous=OFF: written, never synced, all recovered. */
  CHECK_RC(tl_open(db, PS, 0, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  reset_counts();
  tl_set_hook(count_hook);
  epoch = 2;
  for (int i = 0; i < 50; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  tl_set_hook(0);
  CHECK(LD(syncs) == 0 && LD(writes) == 50); /* no zeros written without syncs */
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_recovered(epoch - 1, 0);

  check_close_stops_grower();
  tl_rmdir(dir);
  printf("test_log_group: ok\n");
  return 0;
}
