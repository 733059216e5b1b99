/* crash_powerloss.h: power loss for the engine's log, inside one test process.
**
** Included by test_crash.c only (it defines libc's pwritev, pread, fdatasync, fsync,
** ftruncate, fstat and close for the whole program). While pl_active is set, writes
** to a file whose name contains "-mw" (the log "<db>-mw" and its "<db>-mw.tmp") are
** kept in memory and reach the file only when the program syncs that descriptor
** (fdatasync/fsync). A process killed before the sync loses them, as a machine losing
** power loses what was never synced; a plain SIGKILL would not (the kernel's page
** cache keeps what was written). Reads, size queries, truncation and close of the
** descriptor first apply what is pending, in order: that can only make the file more
** complete than a real power loss would, never less, so a correct engine never fails
** because of the shim. Other files (the database, written by SQLite) pass through.
** Every call outside the shim goes to the kernel with syscall(2): no libc wrapper and
** no sanitizer interceptor is involved.
*/
#ifndef MW_CRASH_POWERLOSS_H
#define MW_CRASH_POWERLOSS_H

#if !defined(__linux__)
/* The shim needs Linux (syscall(2), /proc/self/fd): elsewhere no power-loss rounds. */
#define MW_HAVE_POWERLOSS 0
static volatile int pl_active;
static volatile long *pl_stats;
#else
#define MW_HAVE_POWERLOSS 1

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static volatile int pl_active;       /* set in a writer child after fork */
static pthread_mutex_t pl_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct pl_write {
  struct pl_write *next;
  int fd;
  off_t off;
  size_t n;
  unsigned char data[];
} pl_write;

static pl_write *pl_head, *pl_tail;   /* pending writes, oldest first */
/* Statistics, [0] writes kept, [1] writes applied later: the test points this at
** memory shared with its children, to see that the shim really worked. */
static volatile long *pl_stats;
enum { PL_MAXFD = 4096 };
static signed char pl_kind[PL_MAXFD]; /* 0 unknown, 1 log, 2 other */

static long pl_sys_pwrite(int fd, const void *buf, size_t n, off_t off) {
  return syscall(SYS_pwrite64, fd, buf, n, off);
}

/* 1 when fd is one of the log's files. Caller holds pl_mu. */
static int pl_is_log_locked(int fd) {
  if (fd < 0 || fd >= PL_MAXFD) return 0;
  if (pl_kind[fd] == 0) {
    char link[64], path[512];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n > 0 ? n : 0] = 0;
    pl_kind[fd] = (n > 0 && strstr(path, "-mw")) ? 1 : 2;
  }
  return pl_kind[fd] == 1;
}

/* Applies the pending writes of fd, in order. Caller holds pl_mu. */
static int pl_flush_locked(int fd) {
  pl_write **pp = &pl_head, *last = 0;
  while (*pp) {
    pl_write *w = *pp;
    if (w->fd != fd) {
      last = w;
      pp = &w->next;
      continue;
    }
    size_t done = 0;
    while (done < w->n) {
      long r = pl_sys_pwrite(fd, w->data + done, w->n - done, w->off + (off_t)done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return -1; /* errno from the kernel: the caller's call fails with it */
      done += (size_t)r;
    }
    *pp = w->next;
    if (pl_tail == w) pl_tail = last;
    free(w);
    if (pl_stats) pl_stats[1]++;
  }
  return 0;
}

/* Applies what is pending for fd when fd is a log file (before reads etc.). */
static int pl_settle(int fd) {
  if (!pl_active) return 0;
  pthread_mutex_lock(&pl_mu);
  int r = pl_is_log_locked(fd) ? pl_flush_locked(fd) : 0;
  pthread_mutex_unlock(&pl_mu);
  return r;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
  if (pl_active) {
    pthread_mutex_lock(&pl_mu);
    if (pl_is_log_locked(fd)) {
      size_t n = 0;
      for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
      pl_write *w = malloc(sizeof *w + n);
      if (!w) {
        pthread_mutex_unlock(&pl_mu);
        errno = ENOMEM;
        return -1;
      }
      w->next = 0;
      w->fd = fd;
      w->off = off;
      w->n = n;
      size_t at = 0;
      for (int i = 0; i < cnt; i++) {
        memcpy(w->data + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
      }
      if (pl_tail) pl_tail->next = w;
      else pl_head = w;
      pl_tail = w;
      if (pl_stats) pl_stats[0]++;
      pthread_mutex_unlock(&pl_mu);
      return (ssize_t)n;
    }
    pthread_mutex_unlock(&pl_mu);
  }
  return syscall(SYS_pwritev, fd, iov, cnt, (long)off, (long)((uint64_t)off >> 32));
}

ssize_t pread(int fd, void *buf, size_t n, off_t off) {
  if (pl_settle(fd) != 0) return -1;
  return syscall(SYS_pread64, fd, buf, n, off);
}

int fdatasync(int fd) {
  if (pl_settle(fd) != 0) return -1;
  return (int)syscall(SYS_fdatasync, fd);
}

int fsync(int fd) {
  if (pl_settle(fd) != 0) return -1;
  return (int)syscall(SYS_fsync, fd);
}

int ftruncate(int fd, off_t size) {
  if (pl_settle(fd) != 0) return -1;
  return (int)syscall(SYS_ftruncate, fd, size);
}

int fstat(int fd, struct stat *st) {
  if (pl_settle(fd) != 0) return -1;
  return (int)syscall(SYS_fstat, fd, st);
}

int close(int fd) {
  if (pl_active) {
    pthread_mutex_lock(&pl_mu);
    if (pl_is_log_locked(fd)) (void)pl_flush_locked(fd);
    if (fd >= 0 && fd < PL_MAXFD) pl_kind[fd] = 0; /* the number may be reused */
    pthread_mutex_unlock(&pl_mu);
  }
  return (int)syscall(SYS_close, fd);
}

#endif /* __linux__ */
#endif
