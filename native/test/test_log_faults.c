/* The log on a full disk and after I/O errors: SQLITE_FULL from reserve with nothing
** assigned and commits working again once space is back (injected ENOSPC, and a real
** 1 MiB tmpfs when this process may mount one); a failed data sync or write is sticky:
** every later commit fails until the log is reopened, and recovery keeps what was
** acknowledged. */
#include "test_log_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>

#define PS 4096
#define MAXP 1
#define STEP (64 * 1024)

static char dir[256], db[300], mnt[256];
static int mounted;

/* The hook fails fail_count calls (-1: all) of fail_op with fail_errno. The log's
** grower thread calls it too: the counters are atomic. */
static int fail_op, fail_errno, fail_count;
static int fault(int op, mw_fd fd) {
  (void)fd;
  if (op != __atomic_load_n(&fail_op, __ATOMIC_SEQ_CST)) return 0;
  int c = __atomic_load_n(&fail_count, __ATOMIC_SEQ_CST);
  while (c != 0) {
    if (c < 0 || __atomic_compare_exchange_n(&fail_count, &c, c - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return __atomic_load_n(&fail_errno, __ATOMIC_SEQ_CST);
  }
  return 0;
}
static void arm(int op, int err, int count) {
  __atomic_store_n(&fail_op, op, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fail_errno, err, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fail_count, count, __ATOMIC_SEQ_CST);
}
static void disarm(void) { __atomic_store_n(&fail_count, 0, __ATOMIC_SEQ_CST); }

static void cleanup_mount(void) {
  if (mounted) { umount(mnt); mounted = 0; }
  if (mnt[0]) rmdir(mnt);
}

static void reopen_expect(const char *dbp, uint64_t want_last) {
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  CHECK_RC(tl_open(dbp, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(!seen.bad && last == want_last && seen.count == want_last - 1);
  CHECK_RC(mw_log_close(log, 1), SQLITE_OK);
}

/* Commits until reserve fails; returns that result (the epoch is not consumed). */
static int commit_until_full(mw_log *log, uint64_t *pEpoch, int limit) {
  for (int i = 0; i < limit; i++) {
    int rc = tl_commit(log, PS, pEpoch, MAXP, 0, 0);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

/* Opens the log of db with the usual step and commits n records (epochs from 2). */
static mw_log *open_committed(int n, uint64_t *pEpoch) {
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  *pEpoch = 2;
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK_RC(commit_until_full(log, pEpoch, n), SQLITE_OK);
  return log;
}

static void injected_enospc(void) {
  uint64_t epoch;
  mw_log *log = open_committed(5, &epoch);
  /* The disk is full from now on: the commit that needs more room fails in reserve. */
  arm(MW_OP_PREALLOC, ENOSPC, -1);
  uint64_t before = mw_log_size(log);
  int rc = commit_until_full(log, &epoch, 100);
  CHECK_RC(rc, SQLITE_FULL);
  uint64_t at_full = mw_log_size(log);
  CHECK(at_full > before); /* the preallocated room was used first */
  uint64_t e_full = epoch;
  CHECK_RC(mw_log_reserve(log, mw_log_record_size(log, 1)), SQLITE_FULL);
  CHECK(mw_log_size(log) == at_full && epoch == e_full); /* nothing assigned */
  /* Space is back: commits work again without reopening. */
  disarm();
  CHECK_RC(commit_until_full(log, &epoch, 40), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  reopen_expect(db, epoch - 1);
  printf("injected ENOSPC: SQLITE_FULL after %llu commits, then 40 more\n", (unsigned long long)(e_full - 2));
}

static void real_tmpfs(void) {
  /* A mount namespace of this process alone (it must have no threads yet): the tmpfs
  ** disappears with the process however it ends, even killed. */
  if (unshare(CLONE_NEWNS) != 0 || mount(0, "/", 0, MS_REC | MS_PRIVATE, 0) != 0) {
    printf("tmpfs full-disk test skipped: no private mount namespace (%s)\n", strerror(errno));
    return;
  }
  snprintf(mnt, sizeof(mnt), "/tmp/mwlog-tmpfs.XXXXXX");
  CHECK(mkdtemp(mnt) != 0);
  atexit(cleanup_mount);
  if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) {
    printf("tmpfs full-disk test skipped: mount not permitted (%s)\n", strerror(errno));
    rmdir(mnt);
    mnt[0] = 0;
    return;
  }
  mounted = 1;
  char fdb[300], filler[300];
  snprintf(fdb, sizeof(fdb), "%s/f.db", mnt);
  snprintf(filler, sizeof(filler), "%s/filler", mnt);
  /* Take half of the disk with another file, to give it back later. */
  int fd = open(filler, O_CREAT | O_WRONLY, 0644);
  CHECK(fd >= 0);
  static unsigned char junk[64 * 1024];
  memset(junk, 0x5a, sizeof(junk));
  for (int i = 0; i < 8; i++) CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
  CHECK(close(fd) == 0);

  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0, epoch = 2;
  /* A step of 192 KiB does not divide the 512 KiB left: the last whole step does not
  ** fit, and the log must then take just the room of each record. */
  CHECK_RC(tl_open(fdb, PS, 1, 192 * 1024, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  int rc = commit_until_full(log, &epoch, 1000);
  CHECK_RC(rc, SQLITE_FULL);
  uint64_t n_full = epoch - 2;
  CHECK(n_full > 110 && n_full < 130); /* 512 KiB / 4132 bytes = 126 */
  uint64_t at_full = mw_log_size(log);
  CHECK_RC(mw_log_reserve(log, mw_log_record_size(log, 1)), SQLITE_FULL);
  CHECK(mw_log_size(log) == at_full);
  CHECK(unlink(filler) == 0);
  CHECK_RC(commit_until_full(log, &epoch, 60), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  reopen_expect(fdb, epoch - 1);
  printf("tmpfs of 1 MiB: SQLITE_FULL after %llu commits, 60 more once space was back\n",
         (unsigned long long)n_full);
  cleanup_mount();
}

/* A failed data sync (or write) poisons the log: that wait and every later call fail,
** even once the disk is healthy again; recovery keeps the acknowledged commits. */
static void sticky(int op, int err, int want) {
  uint64_t epoch;
  mw_log *log = open_committed(10, &epoch);
  uint64_t acked = epoch - 1;
  /* One failed sync is enough (whichever thread meets it, the log is poisoned); writes
  ** fail until disarmed, as the grower's writes of zeros may meet the first one. */
  arm(op, err, op == MW_OP_DATASYNC ? 1 : -1);
  CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), want);
  disarm();
  CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, 0), want);          /* reserve fails */
  CHECK_RC(mw_log_reserve(log, mw_log_record_size(log, 1)), want);
  CHECK_RC(mw_log_wait_durable(log, MW_LOG_HDR_SIZE + 1), want);    /* even an old offset */
  CHECK_RC(mw_log_compacted(log, 3), want);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  /* The failed commit may or may not have reached the file; the acknowledged ones did. */
  tl_seen s2;
  uint64_t base = 0, last = 0;
  CHECK_RC(tl_open(db, PS, 1, STEP, MAXP, &s2, &log, &base, &last), SQLITE_OK);
  CHECK(!s2.bad && last >= acked && last <= acked + 1);
  CHECK_RC(mw_log_close(log, 1), SQLITE_OK);
}

/* An assigned record that is never submitted (the engine failed in between): the
** commits behind it wait, and mw_log_fail wakes them up with the error. */
typedef struct waiter { mw_log *log; uint64_t end; int rc, done; } waiter;
static void *wait_thread(void *p) {
  waiter *w = p;
  w->rc = mw_log_wait_durable(w->log, w->end);
  __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static void abandoned(void) {
  uint64_t epoch;
  mw_log *log = open_committed(3, &epoch);
  uint64_t bytes = mw_log_record_size(log, 1);
  CHECK_RC(mw_log_reserve(log, bytes), SQLITE_OK);
  CHECK_RC(mw_log_reserve(log, bytes), SQLITE_OK);
  (void)mw_log_assign(log, epoch++, bytes); /* never submitted */
  tl_rec r;
  tl_build(&r, PS, epoch, MAXP);
  uint64_t off = mw_log_assign(log, epoch, bytes);
  CHECK_RC(mw_log_submit(log, off, epoch, tl_dbpages(epoch), 0, r.n, r.pgnos,
                         (const unsigned char *const *)r.img), SQLITE_OK);
  tl_free(&r);
  waiter w = { log, off + bytes, -1, 0 };
  pthread_t t;
  CHECK(pthread_create(&t, 0, wait_thread, &w) == 0);
  mw_sleep_us(20000);
  CHECK(!__atomic_load_n(&w.done, __ATOMIC_SEQ_CST)); /* stuck behind the hole */
  mw_log_fail(log, SQLITE_IOERR_WRITE);
  for (int i = 0; i < 5000 && !__atomic_load_n(&w.done, __ATOMIC_SEQ_CST); i++) mw_sleep_us(1000);
  CHECK(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST));
  pthread_join(t, 0);
  CHECK_RC(w.rc, SQLITE_IOERR_WRITE);
  CHECK_RC(mw_log_reserve(log, bytes), SQLITE_IOERR_WRITE);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  reopen_expect(db, 4); /* the three commits before the hole */
}

int main(void) {
  alarm(120); /* a hang (a broken wake-up) fails the test instead of the CI run */
  tl_set_hook(fault); /* installed once, before any log (and its grower) exists */
  tl_mkdir(dir, sizeof(dir), "mwlog-faults");
  snprintf(db, sizeof(db), "%s/f.db", dir);
  real_tmpfs(); /* first: unshare needs a process without threads */
  injected_enospc();
  sticky(MW_OP_DATASYNC, EIO, SQLITE_IOERR_FSYNC);
  sticky(MW_OP_WRITE, EIO, SQLITE_IOERR_WRITE);
  sticky(MW_OP_WRITE, ENOSPC, SQLITE_FULL); /* a write that fails for room is sticky too */
  abandoned();
  tl_rmdir(dir);
  printf("test_log_faults: ok\n");
  return 0;
}
