/*
** release/test/platform_test.c: checks the contract of native/src/platform/platform.h
** against one implementation: platform_posix.c on the host, platform_win.c in the
** Windows build (run under Wine where it is installed, see release/check.mjs).
** Files, offsets past 4 GiB, short reads, gathered writes, truncate and
** preallocation, delete, rename and hard links of open files, UTF-8 names, threads, mutexes, condition variables with
** a timeout, the clock and sleeping.
**
**   zig build platform-test            host build, run
**   zig build platform-test-windows    Windows build in zig-out/release-test/
*/
#include "mw_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counting_check.h"

static char dir[512];

static const char *path_of(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s", dir, name);
  return buf;
}

static void test_files(void) {
  char p[600];
  /* A UTF-8 name outside ASCII: "données-é.bin". */
  const char *name = path_of("donn\xc3\xa9" "es-\xc3\xa9.bin", p, sizeof p);
  int err = 0;
  mw_fd fd = MW_FD_INVALID;

  CHECK(mw_file_delete(name, &err) == SQLITE_OK); /* absent: still OK */
  CHECK(!mw_file_exists(name));
  CHECK(mw_file_open(name, 0, &fd, &err) == SQLITE_CANTOPEN); /* no create */
  CHECK(mw_file_open(name, 1, &fd, &err) == SQLITE_OK);
  CHECK(mw_file_exists(name));

  uint64_t size = 1;
  CHECK(mw_file_size(fd, &size, &err) == SQLITE_OK && size == 0);

  /* Plain write and read back at an offset. */
  CHECK(mw_file_pwrite(fd, "hello", 5, 100, &err) == SQLITE_OK);
  char buf[16];
  memset(buf, 'x', sizeof buf);
  CHECK(mw_file_pread(fd, buf, 5, 100, &err) == SQLITE_OK && memcmp(buf, "hello", 5) == 0);
  CHECK(mw_file_size(fd, &size, &err) == SQLITE_OK && size == 105);
  /* The gap reads as zeros. */
  CHECK(mw_file_pread(fd, buf, 4, 10, &err) == SQLITE_OK && memcmp(buf, "\0\0\0\0", 4) == 0);

  /* A read across the end: short read, the rest zero-filled. */
  memset(buf, 'x', sizeof buf);
  CHECK(mw_file_pread(fd, buf, 10, 100, &err) == SQLITE_IOERR_SHORT_READ);
  CHECK(memcmp(buf, "hello\0\0\0\0\0", 10) == 0);
  /* A read wholly past the end. */
  memset(buf, 'x', sizeof buf);
  CHECK(mw_file_pread(fd, buf, 8, 4096, &err) == SQLITE_IOERR_SHORT_READ);
  CHECK(memcmp(buf, "\0\0\0\0\0\0\0\0", 8) == 0);

  /* Gathered writes: small pieces (one buffer on Windows), then pieces over 1 MiB
  ** (written one by one on Windows), with an empty piece in between. */
  mw_iovec v[4] = { { "ab", 2 }, { "", 0 }, { "cde", 3 }, { "f", 1 } };
  CHECK(mw_file_pwritev(fd, v, 4, 200, &err) == SQLITE_OK);
  CHECK(mw_file_pread(fd, buf, 6, 200, &err) == SQLITE_OK && memcmp(buf, "abcdef", 6) == 0);
  size_t big = (size_t)1 << 20;
  unsigned char *a = malloc(big), *b = malloc(big), *back = malloc(2 * big + 1);
  CHECK(a && b && back);
  if (a && b && back) {
    memset(a, 0xa5, big);
    memset(b, 0x5a, big);
    mw_iovec w[3] = { { a, big }, { "!", 1 }, { b, big } };
    CHECK(mw_file_pwritev(fd, w, 3, 4096, &err) == SQLITE_OK);
    CHECK(mw_file_pread(fd, back, 2 * big + 1, 4096, &err) == SQLITE_OK);
    CHECK(memcmp(back, a, big) == 0 && back[big] == '!' && memcmp(back + big + 1, b, big) == 0);
  }
  free(a);
  free(b);
  free(back);

  /* Offsets past 4 GiB need the high half of the offset (sparse on most systems). */
  uint64_t beyond = ((uint64_t)1 << 32) + 8;
  CHECK(mw_file_pwrite(fd, "far", 3, beyond, &err) == SQLITE_OK);
  memset(buf, 0, sizeof buf);
  CHECK(mw_file_pread(fd, buf, 3, beyond, &err) == SQLITE_OK && memcmp(buf, "far", 3) == 0);
  CHECK(mw_file_pread(fd, buf, 5, 100, &err) == SQLITE_OK && memcmp(buf, "hello", 5) == 0);
  CHECK(mw_file_size(fd, &size, &err) == SQLITE_OK && size == beyond + 3);

  /* Truncate down, then preallocate up: the new range reads as zeros, the old data stays. */
  CHECK(mw_file_truncate(fd, 103, &err) == SQLITE_OK);
  CHECK(mw_file_size(fd, &size, &err) == SQLITE_OK && size == 103);
  CHECK(mw_file_preallocate(fd, 65536 + 100, &err) == SQLITE_OK);
  CHECK(mw_file_size(fd, &size, &err) == SQLITE_OK && size >= 65536 + 100);
  memset(buf, 'x', sizeof buf);
  CHECK(mw_file_pread(fd, buf, 8, 100, &err) == SQLITE_OK && memcmp(buf, "hel\0\0\0\0\0", 8) == 0);
  /* Preallocating less than the size changes nothing. */
  CHECK(mw_file_preallocate(fd, 10, &err) == SQLITE_OK);
  CHECK(mw_file_size(fd, &size, &err) == SQLITE_OK && size >= 65536 + 100);

  CHECK(mw_file_datasync(fd, 0, &err) == SQLITE_OK);
  CHECK(mw_file_datasync(fd, 1, &err) == SQLITE_OK);
  CHECK(mw_file_sync(fd, &err) == SQLITE_OK);
  CHECK(mw_dir_sync(name, &err) == SQLITE_OK);

  /* A second handle sees the same bytes (files are shared between connections). */
  mw_fd fd2 = MW_FD_INVALID;
  CHECK(mw_file_open(name, 0, &fd2, &err) == SQLITE_OK);
  memset(buf, 0, sizeof buf);
  CHECK(mw_file_pread(fd2, buf, 3, 100, &err) == SQLITE_OK && memcmp(buf, "hel", 3) == 0);
  CHECK(mw_file_close(fd2) == SQLITE_OK);

  /* Deleting an open file works (POSIX semantics, FILE_SHARE_DELETE on Windows). */
  CHECK(mw_file_delete(name, &err) == SQLITE_OK);
  CHECK(mw_file_close(fd) == SQLITE_OK);
  CHECK(!mw_file_exists(name));
  CHECK(mw_file_delete(name, &err) == SQLITE_OK);

  /* A file in a missing folder cannot be opened, and the OS error is kept. */
  err = 0;
  CHECK(mw_file_open(path_of("missing-dir/x.bin", p, sizeof p), 1, &fd, &err) == SQLITE_CANTOPEN);
  CHECK(err != 0);
}

/* Wine, not Windows: it refuses to replace a file that is open (MoveFileEx and the
** POSIX-semantics rename of Windows 10 1607+ alike), which Windows itself does. */
static int under_wine(void) {
#ifdef _WIN32
  HMODULE ntdll = GetModuleHandleA("ntdll.dll");
  return ntdll && GetProcAddress(ntdll, "wine_get_version") != NULL;
#else
  return 0;
#endif
}

/* The log switch's names (native/src/durability/log_switch.c): while the log is open, a hard
** link keeps it as the spare, the new file (open) is renamed over the log (open), the old
** handle is closed, and the next switch renames the spare back into use. */
static void test_names(void) {
  char lp[600], tp[600], sp[600];
  const char *log = path_of("n.db-mw", lp, sizeof lp);
  const char *tmp = path_of("n.db-mw.tmp", tp, sizeof tp);
  const char *spare = path_of("n.db-mw.spare", sp, sizeof sp);
  int err = 0;
  mw_fd lfd = MW_FD_INVALID, tfd = MW_FD_INVALID, fd = MW_FD_INVALID;
  char buf[4];
  CHECK(mw_file_open(log, 1, &lfd, &err) == SQLITE_OK);
  CHECK(mw_file_pwrite(lfd, "old", 3, 0, &err) == SQLITE_OK);
  CHECK(mw_file_open(tmp, 1, &tfd, &err) == SQLITE_OK);
  CHECK(mw_file_pwrite(tfd, "new", 3, 0, &err) == SQLITE_OK);

  CHECK(mw_file_link(log, spare, &err) == SQLITE_OK);
  err = 0;
  CHECK(mw_file_link(log, spare, &err) != SQLITE_OK && err != 0); /* the name is taken */
  int rc = mw_file_rename(tmp, log, &err);
  if (rc != SQLITE_OK && under_wine()) {
    printf("platform_test: Wine refused to rename over an open file (error %d): "
           "renamed after closing it\n", err);
    CHECK(mw_file_close(lfd) == SQLITE_OK);
    lfd = MW_FD_INVALID;
    rc = mw_file_rename(tmp, log, &err);
  }
  CHECK(rc == SQLITE_OK);
  CHECK(!mw_file_exists(tmp));
  CHECK(mw_file_open(log, 0, &fd, &err) == SQLITE_OK);
  CHECK(mw_file_pread(fd, buf, 3, 0, &err) == SQLITE_OK && memcmp(buf, "new", 3) == 0);
  CHECK(mw_file_close(fd) == SQLITE_OK);
  if (lfd != MW_FD_INVALID) CHECK(mw_file_close(lfd) == SQLITE_OK);

  CHECK(mw_file_rename(spare, tmp, &err) == SQLITE_OK);
  CHECK(!mw_file_exists(spare));
  CHECK(mw_file_open(tmp, 0, &fd, &err) == SQLITE_OK);
  CHECK(mw_file_pread(fd, buf, 3, 0, &err) == SQLITE_OK && memcmp(buf, "old", 3) == 0);
  CHECK(mw_file_close(fd) == SQLITE_OK);
  CHECK(mw_file_close(tfd) == SQLITE_OK);
  CHECK(mw_file_delete(tmp, &err) == SQLITE_OK && mw_file_delete(log, &err) == SQLITE_OK);
  CHECK(!mw_file_exists(tmp) && !mw_file_exists(log));
}

enum { THREADS = 4, ROUNDS = 20000 };
static mw_mutex counter_mutex = MW_MUTEX_INIT;
static long counter = 0;

static void *count_up(void *arg) {
  (void)arg;
  for (int i = 0; i < ROUNDS; i++) {
    mw_mutex_lock(&counter_mutex);
    counter++;
    mw_mutex_unlock(&counter_mutex);
  }
  return 0;
}

static mw_mutex flag_mutex;
static mw_cond flag_cond;
static int flag = 0;

static void *raise_flag(void *arg) {
  mw_sleep_us((unsigned)(uintptr_t)arg);
  mw_mutex_lock(&flag_mutex);
  flag = 1;
  mw_cond_signal(&flag_cond);
  mw_mutex_unlock(&flag_mutex);
  return 0;
}

static void test_threads(void) {
  mw_thread t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(mw_thread_start(&t[i], count_up, 0) == 0);
  for (int i = 0; i < THREADS; i++) mw_thread_join(t[i]);
  CHECK(counter == (long)THREADS * ROUNDS);

  mw_mutex_init(&flag_mutex);
  mw_cond_init(&flag_cond);
  /* Nobody signals: the wait times out after about the time asked. */
  mw_mutex_lock(&flag_mutex);
  uint64_t t0 = mw_now_ns();
  CHECK(mw_cond_timedwait_ms(&flag_cond, &flag_mutex, 30) == 1);
  uint64_t waited = mw_now_ns() - t0;
  mw_mutex_unlock(&flag_mutex);
  CHECK(waited >= 25000000ull && waited < 5000000000ull);

  /* Signalled before the timeout: 0, well before 10 s. */
  mw_thread s;
  CHECK(mw_thread_start(&s, raise_flag, (void *)(uintptr_t)5000) == 0);
  mw_mutex_lock(&flag_mutex);
  t0 = mw_now_ns();
  int timed_out = 0;
  while (!flag && !timed_out) timed_out = mw_cond_timedwait_ms(&flag_cond, &flag_mutex, 10000);
  mw_mutex_unlock(&flag_mutex);
  mw_thread_join(s);
  CHECK(!timed_out && flag == 1);
  CHECK(mw_now_ns() - t0 < 5000000000ull);
  mw_cond_destroy(&flag_cond);
  mw_mutex_destroy(&flag_mutex);
}

static void test_clock(void) {
  uint64_t a = mw_now_ns();
  mw_sleep_us(2000);
  uint64_t b = mw_now_ns();
  CHECK(b > a);
  CHECK(b - a >= 1500000ull);      /* slept about 2 ms at least */
  CHECK(b - a < 2000000000ull);    /* and not seconds */
  uint64_t prev = mw_now_ns();
  int backwards = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t now = mw_now_ns();
    if (now < prev) backwards++;
    prev = now;
  }
  CHECK(backwards == 0);
}

int main(int argc, char **argv) {
  snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : ".");
  test_files();
  test_names();
  test_threads();
  test_clock();
  printf("platform_test: %d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
