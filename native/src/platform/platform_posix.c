/*
** platform_posix.c: the file calls and threads of platform.h for Linux, macOS,
** Android and iOS. Owns nothing but system calls; never calls SQLite.
*/
#ifndef _WIN32
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE
#endif
#include "mw_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int fail(int rc, int *pErrno) {
  if (pErrno) *pErrno = errno;
  return rc;
}

static int io_error_for(int err, int fallback) {
  return (err == ENOSPC || err == EDQUOT) ? SQLITE_FULL : fallback;
}

mw_fault_hook_fn mw_fault_hook = 0;

/* Asks the test hook whether this call must fail; if so errno holds its answer. */
static int injected(int op, int fd) {
  mw_fault_hook_fn hook = __atomic_load_n(&mw_fault_hook, __ATOMIC_ACQUIRE);
  if (!hook) return 0;
  int e = hook(op, fd);
  if (e == 0) return 0;
  errno = e;
  return 1;
}

int mw_cond_timedwait_ms(mw_cond *c, mw_mutex *m, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  return pthread_cond_timedwait(c, m, &ts) == ETIMEDOUT;
}

int mw_thread_start(mw_thread *t, void *(*fn)(void *), void *arg) {
  return pthread_create(t, 0, fn, arg);
}

void mw_thread_join(mw_thread t) { pthread_join(t, 0); }

void mw_thread_detach(mw_thread t) { pthread_detach(t); }

int mw_wake_pair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return -1;
  int ok = 1;
  for (int i = 0; i < 2; i++) ok &= fcntl(fds[i], F_SETFD, FD_CLOEXEC) == 0;
  int fl = fcntl(fds[1], F_GETFL);
  ok &= fl != -1 && fcntl(fds[1], F_SETFL, fl | O_NONBLOCK) == 0;
#if defined(SO_NOSIGPIPE)
  int one = 1; /* macOS, iOS: no MSG_NOSIGNAL */
  ok &= setsockopt(fds[1], SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) == 0;
#endif
  if (!ok) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  return 0;
}

void mw_wake_pair_close(int fds[2]) {
  /* close() of a socket only fails on a bad descriptor or a signal; the descriptor is gone
  ** either way on Linux and macOS: nothing to retry. */
  (void)close(fds[0]);
  (void)close(fds[1]);
}

void mw_wake_send(int fd) {
#if defined(MSG_NOSIGNAL)
  const int flags = MSG_NOSIGNAL;
#else
  const int flags = 0;
#endif
  char one = 1;
  /* EAGAIN: the reader has bytes to read already; EPIPE: it is gone. Nothing to do. */
  (void)send(fd, &one, 1, flags);
}

uint64_t mw_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mw_process_id(void) { return (uint64_t)getpid(); }

void mw_at_fork_child(void (*fn)(void)) { (void)pthread_atfork(0, 0, fn); }

void mw_at_process_exit(void (*fn)(void)) {
  /* A failed registration leaves the database as a crash would: nothing is lost. */
  (void)atexit(fn);
#if defined(__linux__)
  (void)at_quick_exit(fn);
#endif
}

void mw_sleep_us(unsigned us) {
  struct timespec ts = { (time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

int mw_file_open(const char *path, int create, mw_fd *out, int *pErrno) {
  int fd;
  if (injected(MW_OP_OPEN, -1)) return fail(SQLITE_CANTOPEN, pErrno);
  do {
    fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return fail(SQLITE_CANTOPEN, pErrno);
  *out = fd;
  return SQLITE_OK;
}

int mw_file_close(mw_fd fd) {
  return close(fd) == 0 ? SQLITE_OK : SQLITE_IOERR_CLOSE;
}

int mw_file_pread(mw_fd fd, void *buf, size_t n, uint64_t off, int *pErrno) {
  unsigned char *p = buf;
  size_t done = 0;
  if (injected(MW_OP_READ, fd)) return fail(SQLITE_IOERR_READ, pErrno);
  while (done < n) {
    ssize_t got = pread(fd, p + done, n - done, (off_t)(off + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail(SQLITE_IOERR_READ, pErrno);
    }
    if (got == 0) {
      memset(p + done, 0, n - done);
      return SQLITE_IOERR_SHORT_READ;
    }
    done += (size_t)got;
  }
  return SQLITE_OK;
}

int mw_file_pwrite(mw_fd fd, const void *buf, size_t n, uint64_t off, int *pErrno) {
  mw_iovec one = { buf, n };
  return mw_file_pwritev(fd, &one, 1, off, pErrno);
}

int mw_file_pwritev(mw_fd fd, const mw_iovec *iov, int cnt, uint64_t off, int *pErrno) {
  /* Copy into struct iovec in batches, advancing past what each call wrote. */
  enum { BATCH = 1024 };
  struct iovec v[BATCH];
  int i = 0;
  size_t skip = 0; /* bytes of iov[i] already written */
  if (injected(MW_OP_WRITE, fd)) return fail(io_error_for(errno, SQLITE_IOERR_WRITE), pErrno);
  while (i < cnt) {
    int k = 0;
    for (int j = i; j < cnt && k < BATCH && k < IOV_MAX; j++) {
      size_t s = (j == i) ? skip : 0;
      if (iov[j].len == s) continue;
      v[k].iov_base = (void *)((const unsigned char *)iov[j].base + s);
      v[k].iov_len = iov[j].len - s;
      k++;
    }
    if (k == 0) break;
    ssize_t wrote = pwritev(fd, v, k, (off_t)off);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return fail(io_error_for(errno, SQLITE_IOERR_WRITE), pErrno);
    }
    if (wrote == 0) {
      errno = ENOSPC;
      return fail(SQLITE_FULL, pErrno);
    }
    off += (uint64_t)wrote;
    size_t left = (size_t)wrote;
    while (i < cnt && left > 0) {
      size_t rest = iov[i].len - skip;
      if (left >= rest) { left -= rest; i++; skip = 0; }
      else { skip += left; left = 0; }
    }
    while (i < cnt && iov[i].len == skip) { i++; skip = 0; }
  }
  return SQLITE_OK;
}

int mw_file_datasync(mw_fd fd, int full, int *pErrno) {
  if (injected(MW_OP_DATASYNC, fd)) return fail(SQLITE_IOERR_FSYNC, pErrno);
#if defined(__APPLE__)
  if (full && fcntl(fd, F_FULLFSYNC, 0) == 0) return SQLITE_OK;
  /* F_FULLFSYNC is not supported by every file system: fall back to fsync. */
  if (fsync(fd) != 0) return fail(SQLITE_IOERR_FSYNC, pErrno);
  return SQLITE_OK;
#else
  (void)full;
  int r;
  do { r = fdatasync(fd); } while (r != 0 && errno == EINTR);
  return r == 0 ? SQLITE_OK : fail(SQLITE_IOERR_FSYNC, pErrno);
#endif
}

int mw_file_writeback(mw_fd fd, uint64_t off, uint64_t len, int *pErrno) {
/* Bionic has sync_file_range only from API 26 (the minimum here is 24). */
#if defined(__linux__) && !defined(__ANDROID__)
  unsigned flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
  int r;
  do { r = sync_file_range(fd, (off_t)off, (off_t)len, flags); } while (r != 0 && errno == EINTR);
  /* Only a hint for the later data sync: a file system without it loses nothing. */
  if (r != 0 && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL && errno != ESPIPE)
    return fail(io_error_for(errno, SQLITE_IOERR_WRITE), pErrno);
#else
  (void)fd; (void)off; (void)len; (void)pErrno;
#endif
  return SQLITE_OK;
}

int mw_file_sync(mw_fd fd, int *pErrno) {
  int r;
  if (injected(MW_OP_SYNC, fd)) return fail(SQLITE_IOERR_FSYNC, pErrno);
  do { r = fsync(fd); } while (r != 0 && errno == EINTR);
  return r == 0 ? SQLITE_OK : fail(SQLITE_IOERR_FSYNC, pErrno);
}

int mw_file_preallocate(mw_fd fd, uint64_t size, int *pErrno) {
  uint64_t cur;
  if (injected(MW_OP_PREALLOC, fd)) return fail(io_error_for(errno, SQLITE_IOERR_TRUNCATE), pErrno);
  int rc = mw_file_size(fd, &cur, pErrno);
  if (rc != SQLITE_OK) return rc;
  if (cur >= size) return SQLITE_OK;
#if defined(__linux__)
  /* KEEP_SIZE would leave the size unchanged, but then every fdatasync must also
  ** write the size: extend the file so that later syncs of the range are data-only. */
  int r;
  do { r = fallocate(fd, 0, (off_t)cur, (off_t)(size - cur)); } while (r != 0 && errno == EINTR);
  if (r == 0) return SQLITE_OK;
  if (errno != EOPNOTSUPP && errno != ENOSYS) {
    return fail(io_error_for(errno, SQLITE_IOERR_TRUNCATE), pErrno);
  }
#endif
  /* No fallocate: write zeros so that the blocks are really reserved. */
  static const unsigned char zeros[65536];
  while (cur < size) {
    size_t n = (size - cur) < sizeof(zeros) ? (size_t)(size - cur) : sizeof(zeros);
    rc = mw_file_pwrite(fd, zeros, n, cur, pErrno);
    if (rc != SQLITE_OK) return rc;
    cur += n;
  }
  return SQLITE_OK;
}

int mw_file_truncate(mw_fd fd, uint64_t size, int *pErrno) {
  int r;
  if (injected(MW_OP_TRUNCATE, fd)) return fail(SQLITE_IOERR_TRUNCATE, pErrno);
  do { r = ftruncate(fd, (off_t)size); } while (r != 0 && errno == EINTR);
  return r == 0 ? SQLITE_OK : fail(SQLITE_IOERR_TRUNCATE, pErrno);
}

int mw_file_size(mw_fd fd, uint64_t *pSize, int *pErrno) {
  struct stat st;
  if (injected(MW_OP_SIZE, fd)) return fail(SQLITE_IOERR_FSTAT, pErrno);
  if (fstat(fd, &st) != 0) return fail(SQLITE_IOERR_FSTAT, pErrno);
  *pSize = (uint64_t)st.st_size;
  return SQLITE_OK;
}

int mw_dir_sync(const char *path, int *pErrno) {
  if (injected(MW_OP_DIRSYNC, -1)) return fail(SQLITE_IOERR_DIR_FSYNC, pErrno);
  size_t n = strlen(path);
  char *dir = malloc(n + 2);
  if (!dir) return SQLITE_NOMEM;
  memcpy(dir, path, n + 1);
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = 0;
  else if (slash) *slash = 0;
  else { dir[0] = '.'; dir[1] = 0; }
  int fd = open(dir, O_RDONLY | O_CLOEXEC);
  free(dir);
  if (fd < 0) return fail(SQLITE_IOERR_DIR_FSYNC, pErrno);
  int rc = SQLITE_OK;
  if (fsync(fd) != 0 && errno != EINVAL) rc = fail(SQLITE_IOERR_DIR_FSYNC, pErrno);
  close(fd);
  return rc;
}

int mw_dir_make(const char *path, int *pErrno) {
  if (mkdir(path, 0755) == 0) return SQLITE_OK;
  struct stat st;
  if (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return SQLITE_OK;
  return fail(SQLITE_CANTOPEN, pErrno);
}

int mw_dir_list(const char *path, int (*fn)(void *ctx, const char *name), void *ctx, int *pErrno) {
  DIR *d = opendir(path);
  if (d == 0) return errno == ENOENT ? SQLITE_OK : fail(SQLITE_IOERR_READ, pErrno);
  int rc = SQLITE_OK;
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (e == 0) {
      if (errno != 0) rc = fail(SQLITE_IOERR_READ, pErrno);
      break;
    }
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    rc = fn(ctx, e->d_name);
    if (rc != 0) break;
  }
  closedir(d);
  return rc;
}

int mw_file_set_mtime(mw_fd fd, int64_t ms, int *pErrno) {
  struct timespec ts[2];
  ts[0].tv_sec = (time_t)(ms / 1000);
  ts[0].tv_nsec = (long)(ms % 1000) * 1000000L;
  ts[1] = ts[0];
  if (futimens(fd, ts) != 0) return fail(SQLITE_IOERR, pErrno);
  return SQLITE_OK;
}

int mw_file_delete(const char *path, int *pErrno) {
  if (injected(MW_OP_DELETE, -1)) return fail(SQLITE_IOERR_DELETE, pErrno);
  if (unlink(path) == 0 || errno == ENOENT) return SQLITE_OK;
  return fail(SQLITE_IOERR_DELETE, pErrno);
}

int mw_file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int mw_file_identity(const char *path, mw_file_id *out, int *pErrno) {
  struct stat st;
  if (stat(path, &st) != 0) return fail(SQLITE_CANTOPEN, pErrno);
  out->dev = (uint64_t)st.st_dev;
  out->ino = (uint64_t)st.st_ino;
  return SQLITE_OK;
}

int mw_file_hold_byte(const char *path, const mw_file_id *id, uint64_t first, int n,
                      mw_fd *out) {
#ifdef F_OFD_SETLK
  int fd;
  do {
    fd = open(path, O_RDWR | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return SQLITE_CANTOPEN;
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != id->dev || (uint64_t)st.st_ino != id->ino) {
    close(fd);
    return SQLITE_CANTOPEN;
  }
  for (int i = 0; i < n; i++) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)(first + (uint64_t)i);
    fl.l_len = 1;
    int r;
    do {
      r = fcntl(fd, F_OFD_SETLK, &fl);
    } while (r != 0 && errno == EINTR);
    if (r == 0) {
      *out = fd;
      return SQLITE_OK;
    }
    if (errno == EAGAIN || errno == EACCES) continue;
    int e = errno;
    close(fd);
    return e == EINVAL ? SQLITE_NOTFOUND : SQLITE_IOERR_LOCK;
  }
  close(fd);
  return SQLITE_BUSY;
#else
  (void)path; (void)id; (void)first; (void)n; (void)out;
  return SQLITE_NOTFOUND;
#endif
}

int mw_file_rename(const char *from, const char *to, int *pErrno) {
  if (injected(MW_OP_RENAME, -1)) return fail(SQLITE_IOERR, pErrno);
  return rename(from, to) == 0 ? SQLITE_OK : fail(SQLITE_IOERR, pErrno);
}

int mw_file_link(const char *from, const char *to, int *pErrno) {
  if (injected(MW_OP_LINK, -1)) return fail(SQLITE_IOERR, pErrno);
  return link(from, to) == 0 ? SQLITE_OK : fail(SQLITE_IOERR, pErrno);
}
#endif /* !_WIN32 */
