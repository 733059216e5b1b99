/* crash_powerloss.h: power loss for the engine's files, inside one test process.
**
** Included by test_crash.c only (it defines libc's pwritev, pwrite, pread, fdatasync,
** fsync, ftruncate, fstat, their *64 names, and close for the whole program).
** While pl_active is set, writes to a file whose name contains "-mw" (the log
** "<db>-mw" and its "<db>-mw.tmp") or ends with pl_db_suffix (the database file, which
** the compactor writes through SQLite's unix VFS) are kept in memory and reach the
** file only when the program syncs that file (fdatasync/fsync on any descriptor of
** the same inode). A process killed before the sync loses them, as a machine losing
** power loses what was never synced; a plain SIGKILL would not (the kernel's page
** cache keeps what was written). Reads and size queries see the pending writes laid
** over the file without applying them. Truncation and close of the file first apply
** what is pending, in order: that can only make the file more complete than a real
** power loss would, never less, so a correct engine never fails because of the shim.
** Other files (SQLite's -wal and -shm, pipes) pass through. Renames and directory
** syncs are not modelled (a rename is durable at once).
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
static const char *pl_db_suffix;
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
  dev_t dev;
  ino_t ino;
  off_t off;
  size_t n;
  unsigned char data[];
} pl_write;

static pl_write *pl_head, *pl_tail;   /* pending writes, oldest first */
/* Statistics, [0] writes kept, [1] writes applied later: the test points this at
** memory shared with its children, to see that the shim really worked. */
static volatile long *pl_stats;
enum { PL_MAXFD = 4096 };
static signed char pl_kind[PL_MAXFD]; /* 0 unknown, 1 held back, 2 other */
static dev_t pl_dev[PL_MAXFD];
static ino_t pl_ino[PL_MAXFD];
static const char *pl_db_suffix;      /* e.g. "/crash.db": the database file too */

static long pl_sys_pwrite(int fd, const void *buf, size_t n, off_t off) {
  return syscall(SYS_pwrite64, fd, buf, n, off);
}

/* 1 when writes to fd are held back (a log file or the database). Caller holds pl_mu. */
static int pl_is_log_locked(int fd) {
  if (fd < 0 || fd >= PL_MAXFD) return 0;
  if (pl_kind[fd] == 0) {
    char link[64], path[512];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n > 0 ? n : 0] = 0;
    size_t len = strlen(path), sl = pl_db_suffix ? strlen(pl_db_suffix) : 0;
    int held = n > 0 && (strstr(path, "-mw") ||
                         (sl && len >= sl && strcmp(path + len - sl, pl_db_suffix) == 0));
    struct stat st;
    if (held && syscall(SYS_fstat, fd, &st) == 0) {
      pl_dev[fd] = st.st_dev;
      pl_ino[fd] = st.st_ino;
    } else {
      held = 0;
    }
    pl_kind[fd] = held ? 1 : 2;
  }
  return pl_kind[fd] == 1;
}

/* Applies the pending writes to the file of fd (any descriptor of it), in order.
** Caller holds pl_mu and checked pl_is_log_locked(fd). */
static int pl_flush_locked(int fd) {
  pl_write **pp = &pl_head, *last = 0;
  while (*pp) {
    pl_write *w = *pp;
    if (w->dev != pl_dev[fd] || w->ino != pl_ino[fd]) {
      last = w;
      pp = &w->next;
      continue;
    }
    size_t done = 0;
    while (done < w->n) {
      long r = pl_sys_pwrite(w->fd, w->data + done, w->n - done, w->off + (off_t)done);
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

/* Holds back a write to a held file; -2 when fd is not one (the caller writes). */
static ssize_t pl_hold(int fd, const struct iovec *iov, int cnt, off_t off) {
  if (!pl_active) return -2;
  pthread_mutex_lock(&pl_mu);
  if (!pl_is_log_locked(fd)) {
    pthread_mutex_unlock(&pl_mu);
    return -2;
  }
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
  w->dev = pl_dev[fd];
  w->ino = pl_ino[fd];
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

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
  ssize_t r = pl_hold(fd, iov, cnt, off);
  if (r != -2) return r;
  return syscall(SYS_pwritev, fd, iov, cnt, (long)off, (long)((uint64_t)off >> 32));
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  struct iovec one = { (void *)buf, n };
  ssize_t r = pl_hold(fd, &one, 1, off);
  if (r != -2) return r;
  return syscall(SYS_pwrite64, fd, buf, n, off);
}

/* A read sees the file as the process would: the bytes on file with the pending
** writes laid over them in order (nothing is applied: they stay lost on a crash). */
ssize_t pread(int fd, void *buf, size_t n, off_t off) {
  if (!pl_active) return syscall(SYS_pread64, fd, buf, n, off);
  pthread_mutex_lock(&pl_mu);
  if (!pl_is_log_locked(fd)) {
    pthread_mutex_unlock(&pl_mu);
    return syscall(SYS_pread64, fd, buf, n, off);
  }
  long r = syscall(SYS_pread64, fd, buf, n, off);
  if (r < 0) {
    pthread_mutex_unlock(&pl_mu);
    return r;
  }
  unsigned char *b = buf;
  off_t end = off + (off_t)n, got = off + r; /* got: end of the bytes known so far */
  for (pl_write *w = pl_head; w; w = w->next) {
    if (w->dev != pl_dev[fd] || w->ino != pl_ino[fd]) continue;
    off_t lo = w->off > off ? w->off : off;
    off_t hi = w->off + (off_t)w->n < end ? w->off + (off_t)w->n : end;
    if (lo >= hi) continue;
    if (lo > got) memset(b + (got - off), 0, (size_t)(lo - got)); /* a hole before it */
    memcpy(b + (lo - off), w->data + (lo - w->off), (size_t)(hi - lo));
    if (hi > got) got = hi;
  }
  pthread_mutex_unlock(&pl_mu);
  return (ssize_t)(got - off);
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

/* The size includes the pending writes that extend the file. */
int fstat(int fd, struct stat *st) {
  int r = (int)syscall(SYS_fstat, fd, st);
  if (r != 0 || !pl_active) return r;
  pthread_mutex_lock(&pl_mu);
  if (pl_is_log_locked(fd)) {
    for (pl_write *w = pl_head; w; w = w->next)
      if (w->dev == pl_dev[fd] && w->ino == pl_ino[fd] && w->off + (off_t)w->n > st->st_size)
        st->st_size = w->off + (off_t)w->n;
  }
  pthread_mutex_unlock(&pl_mu);
  return 0;
}

/* glibc: SQLite compiles with _FILE_OFFSET_BITS=64, so its calls go to the *64 names. On
** 64-bit Linux off64_t is off_t and struct stat64 has the layout of struct stat. musl has
** no *64 names (off_t is always 64 bits): the plain ones above are all it calls. */
#if !defined(__LP64__)
#error "crash_powerloss.h: 64-bit Linux only (SQLite's *64 calls need their own wrappers)"
#elif defined(__GLIBC__)
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) { return pwrite(fd, buf, n, off); }
ssize_t pread64(int fd, void *buf, size_t n, off64_t off) { return pread(fd, buf, n, off); }
int ftruncate64(int fd, off64_t size) { return ftruncate(fd, size); }
int fstat64(int fd, struct stat64 *st) { return fstat(fd, (struct stat *)st); }
#endif

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
