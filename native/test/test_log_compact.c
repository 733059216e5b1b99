/* Compaction: mw_log_compacted(base) rewrites the log with only the records after
** base and the new base in its header; the old log and the new one replay to the same
** state; a failure before the rename leaves the old log in use (not sticky), a failed
** directory sync after it is sticky; the switch runs under concurrent committers
** without losing or reordering a record and without failing a wait; one process's
** switches reuse the file the switch before replaced (check_recycle); the last close's
** mw_log_emptied leaves the log a header alone in place, with no room, and refuses
** while records past its base exist (check_emptied). */
#include "test_log_util.h"

#include <errno.h>
#include <pthread.h>

#define PS 1024
#define MAXP 3
#define STEP (128 * 1024)

static char dir[256], db[300], logp[320];

static uint64_t rec_len(uint64_t e) { return MW_REC_HDR_SIZE + (uint64_t)tl_npages(e, MAXP) * (4 + PS); }

static void expect_log(uint64_t want_base, uint64_t want_last) {
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  if (seen.bad || base != want_base || last != want_last)
    printf("log: bad=%d base=%llu (want %llu) last=%llu (want %llu)\n", seen.bad, (unsigned long long)base,
           (unsigned long long)want_base, (unsigned long long)last, (unsigned long long)want_last);
  CHECK(!seen.bad && base == want_base && last == want_last);
  CHECK(seen.count == want_last - want_base);
  if (seen.count) CHECK(seen.first == want_base + 1);
  uint64_t size = MW_LOG_HDR_SIZE;
  for (uint64_t e = want_base + 1; e <= want_last; e++) size += rec_len(e);
  CHECK(mw_log_size(log) == size && tl_file_size(logp) == size);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
}

static int fail_op; /* read by the hook on the log's grower thread too */
/* The thread that calls mw_log_compacted: the hooks below count or slow only its own
** calls (a switch runs on its caller's thread), not the grower's nor a committer's,
** whose number and pace depend on the disk under the test (tmpfs: its syncs cost nothing). */
static pthread_t switch_thread;
static int on_switch_thread(void) { return pthread_equal(pthread_self(), switch_thread); }

static int preallocs; /* counted by count_prealloc */
static int count_prealloc(int op, mw_fd fd) {
  (void)fd;
  if (op == MW_OP_PREALLOC && on_switch_thread()) __atomic_add_fetch(&preallocs, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static int fault(int op, mw_fd fd) { (void)fd; return op == __atomic_load_n(&fail_op, __ATOMIC_SEQ_CST) ? EIO : 0; }

/* Concurrent part: committers plus a compactor that compacts up to the highest epoch
** below which every commit is acknowledged (what the engine's compactor may do). */
#define THREADS 4
#define PER_THREAD 80
static mw_mutex pub;
static uint64_t next_epoch;
static unsigned char acked[THREADS * PER_THREAD + 8];
static int done_threads, failures, compactions;
static uint64_t compacted_to = 1;

typedef struct { mw_log *log; } arg_t;

static void *committer(void *p) {
  mw_log *log = ((arg_t *)p)->log;
  for (int i = 0; i < PER_THREAD; i++) {
    /* At each quarter wait (10 s at most) until the compactor switched the log again,
    ** so that several switches happen under committers however fast the disk is. */
    if (i > 0 && i % (PER_THREAD / 4) == 0) {
      int want = i / (PER_THREAD / 4);
      for (int w = 0; w < 20000 && __atomic_load_n(&compactions, __ATOMIC_SEQ_CST) < want; w++) mw_sleep_us(500);
    }
    tl_rec r;
    uint64_t max = mw_log_record_size(log, MAXP);
    if (mw_log_reserve(log, max) != SQLITE_OK) { __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST); continue; }
    mw_mutex_lock(&pub);
    uint64_t e = next_epoch++;
    tl_build(&r, PS, e, MAXP);
    uint64_t bytes = mw_log_record_size(log, r.n);
    mw_log_unreserve(log, max - bytes);
    uint64_t off = mw_log_assign(log, e, bytes);
    mw_mutex_unlock(&pub);
    int rc = mw_log_submit(log, off, e, tl_dbpages(e), 0, r.n, r.pgnos, (const unsigned char *const *)r.img);
    tl_free(&r);
    if (rc == SQLITE_OK) rc = mw_log_wait_durable(log, off + bytes);
    if (rc != SQLITE_OK) __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    else __atomic_store_n(&acked[e], 1, __ATOMIC_SEQ_CST);
    mw_sleep_us(200); /* keeps the run long enough for several switches on a fast disk */
  }
  __atomic_add_fetch(&done_threads, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static void *compactor(void *p) {
  mw_log *log = ((arg_t *)p)->log;
  uint64_t base = 1;
  while (__atomic_load_n(&done_threads, __ATOMIC_SEQ_CST) < THREADS) {
    uint64_t t = base;
    while (t + 1 < sizeof(acked) && __atomic_load_n(&acked[t + 1], __ATOMIC_SEQ_CST)) t++;
    if (t > base) {
      if (mw_log_compacted(log, t) != SQLITE_OK) __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
      else {
        __atomic_add_fetch(&compactions, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&compacted_to, t, __ATOMIC_SEQ_CST);
      }
      base = t;
    }
    mw_sleep_us(500);
  }
  return 0;
}

/* Slow parts of a switch (the sync of the new file, the directory sync), stretched
** by the fault hook: commits must keep completing meanwhile (issue 10: a committer
** that waited for the switch held up every queued writer). */
#define SLOW_US 150000
static int slow_armed, slow_calls;
static uint64_t slow_done, done_during_slow; /* commits completed (all / while slowed) */
static int stop_slow;
static int slow_fault(int op, mw_fd fd) {
  (void)fd;
  if ((op == MW_OP_SYNC || op == MW_OP_DIRSYNC) && __atomic_load_n(&slow_armed, __ATOMIC_SEQ_CST) &&
      on_switch_thread()) {
    uint64_t before = __atomic_load_n(&slow_done, __ATOMIC_SEQ_CST);
    mw_sleep_us(SLOW_US);
    /* ... and on, until 3 commits completed (15 s at most): a loaded machine (a slow
    ** disk's syncs, a committer without a core) may complete fewer in 150 ms, while a
    ** committer blocked through the switch completes none however long it lasts. */
    for (int w = 0; w < 15000 && __atomic_load_n(&slow_done, __ATOMIC_SEQ_CST) < before + 3; w++)
      mw_sleep_us(1000);
    uint64_t after = __atomic_load_n(&slow_done, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&done_during_slow, after - before, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&slow_calls, 1, __ATOMIC_SEQ_CST);
  }
  return 0;
}
static uint64_t slow_epoch = 2, slow_acked = 1;
static void *slow_committer(void *p) {
  mw_log *log = ((arg_t *)p)->log;
  while (!__atomic_load_n(&stop_slow, __ATOMIC_SEQ_CST)) {
    uint64_t e = slow_epoch;
    if (tl_commit(log, PS, &slow_epoch, MAXP, 0, 0) != SQLITE_OK) {
      __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
      break;
    }
    __atomic_store_n(&slow_acked, e, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&slow_done, 1, __ATOMIC_SEQ_CST);
    /* At a disk's pace whatever the disk: where syncs cost nothing (tmpfs) the committer
    ** used up the room left while the switch holds growth (two steps, 256 KiB here)
    ** within the first slowed sync, and then waited, as designed (4 to 149 commits
    ** during the two slowed syncs in five runs). At 5 ms a commit it needs 180 KiB at most. */
    mw_sleep_us(5000);
  }
  return 0;
}

static mw_file_id identity(const char *path) {
  mw_file_id id;
  CHECK_RC(mw_file_identity(path, &id, 0), SQLITE_OK);
  return id;
}

/* The log opened, closed with its removal and opened again: a fresh one. */
static void open_fresh(tl_seen *seen, mw_log **log, uint64_t *base, uint64_t *last) {
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, seen, log, base, last), SQLITE_OK);
  CHECK_RC(mw_log_close(*log, 1), SQLITE_OK);
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, seen, log, base, last), SQLITE_OK);
}

/* One process's switches reuse the file the switch before replaced (named <db>-mw.spare
** in between): no room of it is zeroed again, its old records never replay after a
** crash, and a failed rename leaves no spare that names the log in use. */
static void check_recycle(void) {
  char sparep[340];
  snprintf(sparep, sizeof(sparep), "%s.spare", logp);
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  open_fresh(&seen, &log, &base, &last);
  uint64_t epoch = last + 1;
  mw_file_id replaced = { 0, 0 };
  for (int round = 0; round < 4; round++) {
    /* Fewer records each round: the reused file's tail holds older ones. */
    for (int i = 0; i < 40 - 8 * round; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
    /* The grower's lead in place before each switch, as it is on a disk: where syncs
    ** cost nothing (tmpfs) the commits outran the grower, the file replaced held less
    ** room than the next switch asks for, and its reuse preallocated (3 of 4 runs). */
    CHECK_RC(mw_log_grow_ahead(log), SQLITE_OK);
    mw_file_id now = identity(logp);
    __atomic_store_n(&preallocs, 0, __ATOMIC_SEQ_CST);
    tl_set_hook(count_prealloc);
    CHECK_RC(mw_log_compacted(log, epoch - 6), SQLITE_OK);
    tl_set_hook(0);
    CHECK(mw_file_exists(sparep) && mw_file_id_eq(&now, (mw_file_id[]){ identity(sparep) }));
    if (round > 0) {
      mw_file_id id = identity(logp);
      CHECK(mw_file_id_eq(&id, &replaced));                  /* the spare became the log */
      CHECK(__atomic_load_n(&preallocs, __ATOMIC_SEQ_CST) == 0); /* with its room as it was */
    }
    replaced = now;
  }
  uint64_t keep_base = epoch - 6;
  /* Closed without removing, as a crash leaves it: recovery stops at the last record
  ** although older ones follow it in the file, and cuts them. */
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  CHECK(tl_file_size(logp) > MW_LOG_HDR_SIZE + 5 * rec_len(epoch - 1));
  expect_log(keep_base, epoch - 1);
  CHECK(!mw_file_exists(sparep)); /* open deletes a spare of an earlier life */

  /* A rename that fails after the link: the spare is removed again. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  for (int i = 0; i < 10; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  CHECK_RC(mw_log_compacted(log, epoch - 6), SQLITE_OK);
  for (int i = 0; i < 10; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  __atomic_store_n(&fail_op, MW_OP_RENAME, __ATOMIC_SEQ_CST);
  tl_set_hook(fault);
  CHECK(mw_log_compacted(log, epoch - 6) != SQLITE_OK);
  tl_set_hook(0);
  mw_file_id id = identity(logp);
  CHECK(!mw_file_exists(sparep) || !mw_file_id_eq(&id, (mw_file_id[]){ identity(sparep) }));
  for (int i = 0; i < 10; i++) {
    CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
    CHECK_RC(mw_log_compacted(log, epoch - 3), SQLITE_OK);
  }
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(epoch - 3, epoch - 1);
}

/* The last close (compact.c) empties the log in place once the database file holds
** every record: no new file, no room zeroed, no prealloc at all (a short-lived process
** spent most of its time on a switch to a new file of 12 MiB of room that its close
** deleted at once); reopened as a crash would leave it, the log replays nothing and
** starts at that base. Asked for a base below its last record: SQLITE_MISUSE, the log
** as it was. */
static void check_emptied(void) {
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  open_fresh(&seen, &log, &base, &last);
  uint64_t epoch = last + 1;
  for (int i = 0; i < 30; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  mw_file_id before = identity(logp);
  CHECK_RC(mw_log_emptied(log, epoch - 2), SQLITE_MISUSE);
  CHECK(mw_log_base(log) == base && mw_log_size(log) > MW_LOG_HDR_SIZE);
  __atomic_store_n(&preallocs, 0, __ATOMIC_SEQ_CST);
  tl_set_hook(count_prealloc);
  CHECK_RC(mw_log_emptied(log, epoch - 1), SQLITE_OK);
  tl_set_hook(0);
  CHECK(__atomic_load_n(&preallocs, __ATOMIC_SEQ_CST) == 0);
  mw_file_id after = identity(logp);
  CHECK(mw_file_id_eq(&before, &after)); /* the same file, no switch */
  CHECK(tl_file_size(logp) == MW_LOG_HDR_SIZE && mw_log_base(log) == epoch - 1);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(epoch - 1, epoch - 1);
  printf("emptied in place: %llu records dropped, the log a header alone\n",
         (unsigned long long)(epoch - 1 - base));
}

int main(void) {
  alarm(120); /* a hang (a broken wake-up) fails the test instead of the CI run */
  switch_thread = pthread_self();
  tl_mkdir(dir, sizeof(dir), "mwlog-compact");
  snprintf(db, sizeof(db), "%s/c.db", dir);
  snprintf(logp, sizeof(logp), "%s-mw", db);
  char tmpp[340];
  snprintf(tmpp, sizeof(tmpp), "%s.tmp", logp);

  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0, epoch = 2;
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  for (int i = 0; i < 40; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(1, 41);
  size_t old_n;
  unsigned char *old = tl_read_file(logp, &old_n);

  /* Misuse and no-ops. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK_RC(mw_log_compacted(log, 42), SQLITE_MISUSE);
  CHECK_RC(mw_log_compacted(log, 1), SQLITE_OK);

  /* A failure before the rename (copy, sync of the new file, the rename itself): the
  ** old log stays, nothing is sticky, the temporary file is gone. */
  int before_rename[] = { MW_OP_WRITE, MW_OP_SYNC, MW_OP_RENAME, MW_OP_PREALLOC };
  for (size_t i = 0; i < sizeof(before_rename) / sizeof(before_rename[0]); i++) {
    __atomic_store_n(&fail_op, before_rename[i], __ATOMIC_SEQ_CST);
    tl_set_hook(fault);
    CHECK(mw_log_compacted(log, 20) != SQLITE_OK);
    tl_set_hook(0);
    CHECK(!mw_file_exists(tmpp));
    CHECK(mw_log_size(log) == old_n);
    size_t n2;
    unsigned char *now = tl_read_file(logp, &n2);
    CHECK(n2 >= old_n && memcmp(now, old, old_n) == 0);
    free(now);
  }
  /* Compact to 20 in an open log and keep committing into the new file. */
  CHECK_RC(mw_log_compacted(log, 20), SQLITE_OK);
  uint64_t size20 = MW_LOG_HDR_SIZE;
  for (uint64_t e = 21; e <= 41; e++) size20 += rec_len(e);
  CHECK(mw_log_size(log) == size20);
  CHECK(!mw_file_exists(tmpp));
  for (int i = 0; i < 10; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(20, 51);

  /* Crash before the rename: the old log (base 1) with a leftover temporary file.
  ** It replays everything again (idempotent over a database that holds <= 20), and
  ** the leftover is removed at open. */
  size_t new_n;
  unsigned char *newer = tl_read_file(logp, &new_n);
  tl_write_file(logp, old, old_n);
  tl_write_file(tmpp, newer, new_n / 2);
  expect_log(1, 41);
  CHECK(!mw_file_exists(tmpp));
  tl_write_file(logp, newer, new_n);
  free(newer);

  /* A failed directory sync after the rename is sticky (the rename may not last). */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(base == 20 && last == 51);
  __atomic_store_n(&fail_op, MW_OP_DIRSYNC, __ATOMIC_SEQ_CST);
  tl_set_hook(fault);
  CHECK_RC(mw_log_compacted(log, 30), SQLITE_IOERR_DIR_FSYNC);
  tl_set_hook(0);
  CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), SQLITE_IOERR_DIR_FSYNC);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(30, 51);

  /* Compact everything: only the header is left. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK_RC(mw_log_compacted(log, 51), SQLITE_OK);
  CHECK(mw_log_size(log) == MW_LOG_HDR_SIZE);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(51, 51);
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 1), SQLITE_OK);
  CHECK(!mw_file_exists(logp));
  free(old);

  /* Switches under concurrent committers. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  mw_mutex_init(&pub);
  next_epoch = 2;
  arg_t a = { log };
  pthread_t th[THREADS], ct;
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], 0, committer, &a) == 0);
  CHECK(pthread_create(&ct, 0, compactor, &a) == 0);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], 0);
  pthread_join(ct, 0);
  CHECK(failures == 0);
  uint64_t final_last = next_epoch - 1;
  CHECK(final_last == 1 + THREADS * PER_THREAD);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  printf("%d compactions under %d committers\n", compactions, THREADS);
  CHECK(compactions >= 3);
  /* Every record after the last base survived the switches. */
  expect_log(compacted_to, final_last);
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  /* The compactor may already have gone past final_last - 7: then this is a no-op. */
  uint64_t want_base = compacted_to > final_last - 7 ? compacted_to : final_last - 7;
  CHECK_RC(mw_log_compacted(log, final_last - 7), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(want_base, final_last);
  mw_mutex_destroy(&pub);

  /* Commits during the slow parts of a switch. */
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 1), SQLITE_OK);
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(base == 1 && last == 1);
  failures = 0;
  pthread_t sc;
  arg_t sa = { log };
  CHECK(pthread_create(&sc, 0, slow_committer, &sa) == 0);
  for (int w = 0; w < 20000 && __atomic_load_n(&slow_done, __ATOMIC_SEQ_CST) < 20; w++) mw_sleep_us(500);
  tl_set_hook(slow_fault);
  __atomic_store_n(&slow_armed, 1, __ATOMIC_SEQ_CST);
  uint64_t sbase = __atomic_load_n(&slow_acked, __ATOMIC_SEQ_CST);
  CHECK(sbase > 1);
  CHECK_RC(mw_log_compacted(log, sbase), SQLITE_OK);
  __atomic_store_n(&slow_armed, 0, __ATOMIC_SEQ_CST);
  tl_set_hook(0);
  uint64_t during = __atomic_load_n(&done_during_slow, __ATOMIC_SEQ_CST);
  /* Keep committing a little into the new file, then stop. */
  uint64_t at = __atomic_load_n(&slow_done, __ATOMIC_SEQ_CST);
  for (int w = 0; w < 20000 && __atomic_load_n(&slow_done, __ATOMIC_SEQ_CST) < at + 10; w++) mw_sleep_us(500);
  __atomic_store_n(&stop_slow, 1, __ATOMIC_SEQ_CST);
  pthread_join(sc, 0);
  CHECK(failures == 0);
  printf("%llu commits completed during %d slowed syncs of a switch (%d ms or more each)\n",
         (unsigned long long)during, slow_calls, SLOW_US / 1000);
  CHECK(slow_calls >= 2);          /* the new file's sync and the directory sync */
  CHECK(during >= 3 * (uint64_t)slow_calls); /* none blocked through them */
  uint64_t slast = slow_epoch - 1;
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  expect_log(sbase, slast);

  check_recycle();
  check_emptied();
  tl_rmdir(dir);
  printf("test_log_compact: ok\n");
  return 0;
}
