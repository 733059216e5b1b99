/* test_faults: every file and memory call of the engine failed in turn, and the
** database reopened and checked after each.
**
** The places where a call can fail, counted separately:
**   - the root VFS: the engine reaches the database file (and SQLite its temporary
**     files) through the VFS it registered over; here that is a wrapper of "unix"
**     (ff_vfs below) installed as the engine's root before the first open;
**   - the platform layer's fault hook (platform.h): the log's and the compactor's
**     own file calls (open, read, write, data sync, sync, preallocate, truncate,
**     size, directory sync, delete, rename);
**   - memory: SQLite's allocator (SQLITE_CONFIG_MALLOC wrapped: SQLite's own
**     allocations and the engine's sqlite3_malloc/mprintf), and libc's malloc, calloc
**     and realloc, which the engine calls directly (interposed below; not under
**     ASan/TSan, whose allocators cannot be wrapped this way);
**   - threads: pthread_create (interposed, not under the sanitizers either).
** Each class runs with a fault at call n for n = 1, 2, ... until a run makes fewer
** than n calls of that class (every call has been failed once):
**   vfs-once        call n fails (EIO-like code of the method, CANTOPEN for xOpen)
**   vfs-always      call n and every later one fail
**   vfs-short       write n writes half of its bytes, then fails with SQLITE_FULL, and
**                   every later write fails so (the disk is full)
**   sync-once       sync n fails with EIO (xSync, data sync, sync, directory sync),
**                   later ones succeed (the data of the failed one may be lost)
**   plat-once       platform call n fails with EIO
**   plat-always     platform call n and every later one fail with EIO
**   plat-enospc     write or preallocation n and every later one fail with ENOSPC
**   plat-short      write n of the log (pwritev) writes half of its bytes, every later
**                   one fails with ENOSPC: half a record stays in the file
**   sqlmem-once/-always, libcmem-once/-always: allocation n (and later) returns NULL
**   thread-once     thread start n fails with EAGAIN (interposed pthread_create)
** A run is a child process (fork): it copies a template database (a few rows, and a
** log with records not yet compacted, so the open recovers), opens it twice through
** the engine, commits transactions alternately on both connections (one row and
** one counter update each; some rows with overflow pages; with mw_log_max_mb=1 the
** file classes see a compaction of the log in the middle), and closes (the last close
** compacts and removes the log); before the close it checks, through the other
** connection, that exactly the acknowledged transactions are visible and that
** integrity_check (when it can run) is ok. Every COMMIT that returned SQLITE_OK is written to
** memory shared with the parent; every error must be a clear one (IOERR, FULL,
** NOMEM, CANTOPEN; see note_error). The parent then reopens the database without
** faults and checks: the open works, integrity_check is ok, the template rows are
** there, every acknowledged commit is there, each counter equals its connection's
** rows (no half transaction), and after the close the file passes integrity_check
** through the stock "unix" VFS with the same rows. A crash or a hang (alarm) of the
** child fails the test, and under ASan a leak (the child exits through LeakSanitizer).
**
** Env: MW_TEST_SCALE < 1 tests every (1/scale)-th n only (and a sanitizer build every
** other one of those); MW_FAULTS_ONLY=<class> runs one class; MW_FAULTS_N=<n> one n
** (with MW_FAULTS_ONLY, to reproduce); MW_FAULTS_TRACE=1 prints the stack of the failed
** call; MW_FAULTS_VERBOSE=1 every error the workload meets.
*/
#include "test_engine_util.h"
#include "platform/platform.h"

#include <errno.h>
#if defined(__GLIBC__)
#include <execinfo.h> /* MW_FAULTS_TRACE: glibc only */
#endif
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FT_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define FT_SANITIZER 1
#endif
#endif
#ifndef FT_SANITIZER
#define FT_SANITIZER 0
#endif

/* ---------------------------------------------------------------- fault state */

enum {
  CL_NONE = 0, CL_VFS, CL_VFS_WRITE, CL_SYNC, CL_PLAT, CL_PLAT_SPACE, CL_PLAT_SHORT,
  CL_SQLMEM, CL_LIBCMEM, CL_THREAD
};
enum { M_ONCE = 0, M_ALWAYS };

/* Set in the child before the workload; the parent never arms anything. Engine
** threads (the log's grower, the compactor) make calls too: the counter is atomic. */
static int ft_class, ft_mode;
static long ft_n;       /* the call to fail (1-based); 0: count only */
static long ft_calls;   /* calls of ft_class so far */
static int ft_hit;      /* call ft_n happened */

/* Nonzero when this call of class cls must fail: 2 for call n itself, 1 for a later
** one (mode always). */
static int ft_fire(int cls) {
  if (__atomic_load_n(&ft_class, __ATOMIC_RELAXED) != cls) return 0;
  long c = __atomic_add_fetch(&ft_calls, 1, __ATOMIC_SEQ_CST);
  if (ft_n == 0 || c < ft_n) return 0;
  if (c == ft_n) {
    __atomic_store_n(&ft_hit, 1, __ATOMIC_SEQ_CST);
#if defined(__GLIBC__)
    if (getenv("MW_FAULTS_TRACE")) { /* where the fault is: MW_FAULTS_TRACE=1 with MW_FAULTS_N */
      void *pcs[32];
      backtrace_symbols_fd(pcs, backtrace(pcs, 32), 2);
    }
#endif
    return 2;
  }
  return ft_mode == M_ALWAYS;
}

/* ---------------------------------------------------------------- memory */

/* SQLite's allocator, wrapped. in_sqlite keeps its calls of libc's malloc out of the
** libc class. */
static sqlite3_mem_methods ft_mem_orig;
static _Thread_local int in_sqlite;

static void *ft_sq_malloc(int n) {
  if (ft_fire(CL_SQLMEM)) return 0;
  in_sqlite++;
  void *p = ft_mem_orig.xMalloc(n);
  in_sqlite--;
  return p;
}
static void ft_sq_free(void *p) {
  in_sqlite++;
  ft_mem_orig.xFree(p);
  in_sqlite--;
}
static void *ft_sq_realloc(void *p, int n) {
  if (ft_fire(CL_SQLMEM)) return 0;
  in_sqlite++;
  void *q = ft_mem_orig.xRealloc(p, n);
  in_sqlite--;
  return q;
}
static int ft_sq_size(void *p) { return ft_mem_orig.xSize(p); }
static int ft_sq_roundup(int n) { return ft_mem_orig.xRoundup(n); }
static int ft_sq_init(void *a) { return ft_mem_orig.xInit(a); }
static void ft_sq_shutdown(void *a) { ft_mem_orig.xShutdown(a); }

#if !FT_SANITIZER && defined(__GLIBC__)
#define FT_LIBC_MALLOC 1
/* glibc's own entry points: the interposed names below forward to them. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

void *malloc(size_t n) {
  if (!in_sqlite && ft_fire(CL_LIBCMEM)) {
    errno = ENOMEM;
    return 0;
  }
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
  if (!in_sqlite && ft_fire(CL_LIBCMEM)) {
    errno = ENOMEM;
    return 0;
  }
  return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
  if (!in_sqlite && ft_fire(CL_LIBCMEM)) {
    errno = ENOMEM;
    return 0;
  }
  return __libc_realloc(p, n);
}
#else
#define FT_LIBC_MALLOC 0
#endif

/* ---------------------------------------------------------------- threads */

#if !FT_SANITIZER && defined(__GLIBC__)
#include <dlfcn.h>
#define FT_THREADS 1
/* The engine starts threads (the log's grower, the compactor): thread-once makes the
** n-th pthread_create fail with EAGAIN, as when the process is out of threads. */
int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
  if (!real) return EAGAIN;
  if (ft_fire(CL_THREAD)) return EAGAIN;
  return real(t, attr, fn, arg);
}
#else
#define FT_THREADS 0
#endif

/* ---------------------------------------------------------------- platform hook */

static int ft_platform(int op, mw_fd fd) {
  (void)fd;
  if (ft_class == CL_SYNC) {
    if (op == MW_OP_DATASYNC || op == MW_OP_SYNC || op == MW_OP_DIRSYNC) return ft_fire(CL_SYNC) ? EIO : 0;
    return 0;
  }
  if (ft_class == CL_PLAT_SPACE) {
    if (op == MW_OP_WRITE || op == MW_OP_PREALLOC) return ft_fire(CL_PLAT_SPACE) ? ENOSPC : 0;
    return 0;
  }
  return ft_fire(CL_PLAT) ? EIO : 0;
}

/* ---------------------------------------------------------------- short writes of the log */

#if defined(__linux__)
#include <sys/syscall.h>
#include <sys/uio.h>
#define FT_SHORT_WRITES 1
/* The platform layer writes the log with pwritev(2) and retries what a short write
** left: plat-short makes write n to a "-mw" file write half of its bytes, and every
** later one fail with ENOSPC, so that half a record stays in the file. Other writes
** (SQLite's use pwrite64) go to the kernel untouched. */
static int is_log_fd(int fd) {
  char link[64], path[512];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = 0;
  return strstr(path, "-mw") != 0;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
  if (__atomic_load_n(&ft_class, __ATOMIC_RELAXED) == CL_PLAT_SHORT && is_log_fd(fd)) {
    int f = ft_fire(CL_PLAT_SHORT);
    if (f) {
      if (f == 1) {
        errno = ENOSPC;
        return -1;
      }
      size_t total = 0;
      for (int i = 0; i < cnt; i++) total += iov[i].iov_len;
      struct iovec part[64];
      size_t want = total / 2, got = 0;
      int k = 0;
      for (; k < cnt && k < 64 && got < want; k++) {
        part[k] = iov[k];
        if (part[k].iov_len > want - got) part[k].iov_len = want - got;
        got += part[k].iov_len;
      }
      if (k == 0) {
        errno = ENOSPC;
        return -1;
      }
      return syscall(SYS_pwritev, fd, part, k, (long)off, (long)((uint64_t)off >> 32));
    }
  }
  return syscall(SYS_pwritev, fd, iov, cnt, (long)off, (long)((uint64_t)off >> 32));
}
#else
#define FT_SHORT_WRITES 0
#endif

/* ---------------------------------------------------------------- fault VFS */

/* A file of the fault VFS: the wrapper, then the real file of "unix". */
typedef struct ff_file {
  sqlite3_file base;
  sqlite3_file *real;
} ff_file;

static sqlite3_vfs ff_vfs, *ff_root;
#define REAL(f) (((ff_file *)(f))->real)

/* The result of a method call that is to fail (SQLITE_OK: go on). */
static int ff_fault(int code) { return ft_fire(CL_VFS) ? code : SQLITE_OK; }

static int ff_close(sqlite3_file *f) {
  int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
  f->pMethods = 0;
  return rc;
}
static int ff_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off) {
  int rc = ff_fault(SQLITE_IOERR_READ);
  return rc ? rc : REAL(f)->pMethods->xRead(REAL(f), b, n, off);
}
static int ff_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 off) {
  int fire = ft_class == CL_VFS_WRITE ? ft_fire(CL_VFS_WRITE) : 0;
  if (fire) {
    /* A short write: part of the bytes reach the file, then the disk is full. */
    if (fire == 2 && n > 1) (void)REAL(f)->pMethods->xWrite(REAL(f), b, n / 2, off);
    return SQLITE_FULL;
  }
  int rc = ff_fault(SQLITE_IOERR_WRITE);
  return rc ? rc : REAL(f)->pMethods->xWrite(REAL(f), b, n, off);
}
static int ff_truncate(sqlite3_file *f, sqlite3_int64 size) {
  int rc = ff_fault(SQLITE_IOERR_TRUNCATE);
  return rc ? rc : REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int ff_sync(sqlite3_file *f, int flags) {
  if (ft_class == CL_SYNC) return ft_fire(CL_SYNC) ? SQLITE_IOERR_FSYNC : REAL(f)->pMethods->xSync(REAL(f), flags);
  int rc = ff_fault(SQLITE_IOERR_FSYNC);
  return rc ? rc : REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int ff_size(sqlite3_file *f, sqlite3_int64 *size) {
  int rc = ff_fault(SQLITE_IOERR_FSTAT);
  return rc ? rc : REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int ff_lock(sqlite3_file *f, int l) {
  int rc = ff_fault(SQLITE_IOERR_LOCK);
  return rc ? rc : REAL(f)->pMethods->xLock(REAL(f), l);
}
static int ff_unlock(sqlite3_file *f, int l) {
  int rc = ff_fault(SQLITE_IOERR_UNLOCK);
  return rc ? rc : REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int ff_check(sqlite3_file *f, int *out) {
  int rc = ff_fault(SQLITE_IOERR_CHECKRESERVEDLOCK);
  return rc ? rc : REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int ff_fcntl(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int ff_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int ff_devchar(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int ff_shmmap(sqlite3_file *f, int i, int sz, int ext, void volatile **pp) {
  int rc = ff_fault(SQLITE_IOERR_SHMMAP);
  return rc ? rc : REAL(f)->pMethods->xShmMap(REAL(f), i, sz, ext, pp);
}
static int ff_shmlock(sqlite3_file *f, int o, int n, int fl) {
  return REAL(f)->pMethods->xShmLock(REAL(f), o, n, fl);
}
static void ff_shmbarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int ff_shmunmap(sqlite3_file *f, int del) { return REAL(f)->pMethods->xShmUnmap(REAL(f), del); }
static int ff_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp) {
  *pp = 0; /* no memory mapping: every read goes through xRead, where it can fail */
  return SQLITE_OK;
}
static int ff_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) { return SQLITE_OK; }

static const sqlite3_io_methods ff_methods = {
  3, ff_close, ff_read, ff_write, ff_truncate, ff_sync, ff_size, ff_lock, ff_unlock,
  ff_check, ff_fcntl, ff_sector, ff_devchar, ff_shmmap, ff_shmlock, ff_shmbarrier,
  ff_shmunmap, ff_fetch, ff_unfetch
};

static int ff_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
  ff_file *p = (ff_file *)f;
  p->base.pMethods = 0;
  p->real = (sqlite3_file *)((char *)p + ((sizeof(ff_file) + 15) & ~(size_t)15));
  int rc = ff_fault(SQLITE_CANTOPEN);
  if (rc) return rc;
  rc = ff_root->xOpen(ff_root, name, p->real, flags, out);
  if (rc == SQLITE_OK) p->base.pMethods = &ff_methods;
  else if (p->real->pMethods) { p->real->pMethods->xClose(p->real); }
  return rc;
}
static int ff_delete(sqlite3_vfs *vfs, const char *name, int syncdir) {
  int rc = ff_fault(SQLITE_IOERR_DELETE);
  return rc ? rc : ff_root->xDelete(ff_root, name, syncdir);
}
static int ff_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
  int rc = ff_fault(SQLITE_IOERR_ACCESS);
  return rc ? rc : ff_root->xAccess(ff_root, name, flags, out);
}
static int ff_fullpath(sqlite3_vfs *vfs, const char *z, int n, char *out) {
  return ff_root->xFullPathname(ff_root, z, n, out);
}
static void *ff_dlopen(sqlite3_vfs *vfs, const char *z) { return ff_root->xDlOpen(ff_root, z); }
static void ff_dlerror(sqlite3_vfs *vfs, int n, char *z) { ff_root->xDlError(ff_root, n, z); }
static void (*ff_dlsym(sqlite3_vfs *vfs, void *h, const char *z))(void) { return ff_root->xDlSym(ff_root, h, z); }
static void ff_dlclose(sqlite3_vfs *vfs, void *h) { ff_root->xDlClose(ff_root, h); }
static int ff_random(sqlite3_vfs *vfs, int n, char *z) { return ff_root->xRandomness(ff_root, n, z); }
static int ff_sleep(sqlite3_vfs *vfs, int us) { return ff_root->xSleep(ff_root, us); }
static int ff_time(sqlite3_vfs *vfs, double *t) { return ff_root->xCurrentTime(ff_root, t); }
static int ff_lasterr(sqlite3_vfs *vfs, int n, char *z) { return ff_root->xGetLastError(ff_root, n, z); }
static int ff_time64(sqlite3_vfs *vfs, sqlite3_int64 *t) { return ff_root->xCurrentTimeInt64(ff_root, t); }

/* Makes the fault VFS the root of the engine: the engine takes the default VFS as
** its root when it registers, so it is unregistered, the fault VFS made the default,
** and the engine registered again. */
static void install_fault_vfs(void) {
  ff_root = sqlite3_vfs_find("unix");
  CHECK(ff_root != 0 && ff_root->iVersion >= 2);
  memset(&ff_vfs, 0, sizeof ff_vfs);
  ff_vfs.iVersion = 2;
  ff_vfs.szOsFile = (int)(((sizeof(ff_file) + 15) & ~(size_t)15) + (size_t)ff_root->szOsFile);
  ff_vfs.mxPathname = ff_root->mxPathname;
  ff_vfs.zName = "faultvfs";
  ff_vfs.xOpen = ff_open;
  ff_vfs.xDelete = ff_delete;
  ff_vfs.xAccess = ff_access;
  ff_vfs.xFullPathname = ff_fullpath;
  ff_vfs.xDlOpen = ff_dlopen;
  ff_vfs.xDlError = ff_dlerror;
  ff_vfs.xDlSym = ff_dlsym;
  ff_vfs.xDlClose = ff_dlclose;
  ff_vfs.xRandomness = ff_random;
  ff_vfs.xSleep = ff_sleep;
  ff_vfs.xCurrentTime = ff_time;
  ff_vfs.xGetLastError = ff_lasterr;
  ff_vfs.xCurrentTimeInt64 = ff_time64;
  sqlite3_vfs *mw = sqlite3_vfs_find("multiwriter");
  CHECK(mw != 0);
  CHECK_RC(sqlite3_vfs_unregister(mw), SQLITE_OK);
  CHECK_RC(sqlite3_vfs_register(&ff_vfs, 1), SQLITE_OK);
  CHECK_RC(mw_register(), SQLITE_OK);
  CHECK_RC(sqlite3_vfs_register(ff_root, 1), SQLITE_OK); /* "unix" the default again */
}

/* ---------------------------------------------------------------- the workload */

enum { TEMPLATE_ROWS = 20, BIG_TXNS = 72, SMALL_TXNS = 6, MAX_TXNS = 128, MAX_BAD = 8 };

/* What a child reports (MAP_SHARED). */
typedef struct report {
  long calls;              /* calls of the class made */
  int hit;                 /* the n-th call happened */
  int opened;              /* connections that opened */
  int acked[MAX_TXNS];     /* 1: COMMIT returned SQLITE_OK */
  int nerr;                /* errors met */
  int nbad;                /* errors that are not clear */
  char bad[MAX_BAD][160];  /* their codes and messages */
  int codes[64];           /* primary result codes met, by code */
  int compactions;         /* compactions seen by the last connection before it closed */
  int oom_conflicts;       /* SQLITE_BUSY_SNAPSHOT after a failed allocation */
  char live[160];          /* what the check in the faulted process found wrong */
  int nomem_commits;       /* COMMITs that returned SQLITE_NOMEM */
} report;

static report *rep;
static char dir[256], db[320];
static const char *fnames[] = { "f.db", "f.db-mw" };
static unsigned char *tpl[2];
static size_t tpl_len[2];

/* An error is clear when its code says what went wrong: an I/O error, a full disk,
** no memory, a file that cannot be opened (an open the engine refuses keeps the code
** of its cause, vfs.c). One exception, counted apart: a failed allocation while
** recording a read makes lane.c refuse the commit as a read conflict
** (SQLITE_BUSY_SNAPSHOT): safe (the caller retries), though not NOMEM. */
static void note_error(sqlite3 *conn, int rc, const char *what) {
  int prim = rc & 0xff;
  rep->nerr++;
  if (prim < 64) rep->codes[prim]++;
  const char *msg = conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc);
  int clear = prim == SQLITE_IOERR || prim == SQLITE_FULL || prim == SQLITE_NOMEM ||
              prim == SQLITE_CANTOPEN;
  if (rc == SQLITE_BUSY_SNAPSHOT && ft_class == CL_LIBCMEM) {
    clear = 1;
    rep->oom_conflicts++;
  }
  if (getenv("MW_FAULTS_VERBOSE")) fprintf(stderr, "  %s: rc %d (%s)\n", what, rc, msg ? msg : "");
  if (!clear && rep->nbad < MAX_BAD) {
    snprintf(rep->bad[rep->nbad], sizeof rep->bad[0], "%s: rc %d (%s)", what, rc, msg ? msg : "");
  }
  if (!clear) rep->nbad++;
}

static sqlite3 *open_engine(const char *params, int *prc) {
  char uri[600];
  snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter%s%s", db, *params ? "&" : "", params);
  sqlite3 *c = 0;
  int rc = sqlite3_open_v2(uri, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI |
                                        SQLITE_OPEN_NOMUTEX, 0);
  *prc = rc == SQLITE_OK ? rc : (c ? sqlite3_extended_errcode(c) : rc);
  if (rc != SQLITE_OK) {
    note_error(c, rc, "open");
    sqlite3_close(c);
    return 0;
  }
  sqlite3_busy_timeout(c, 2000);
  return c;
}

/* Transaction i on connection conn: one row (every third with overflow pages) and
** the connection's counter. */
static int txn(sqlite3 *c, int i, int conn) {
  char sql[300];
  snprintf(sql, sizeof sql,
           "BEGIN; INSERT INTO t VALUES(%d, %d, randomblob(%d)); "
           "UPDATE c SET n = n + 1 WHERE conn = %d; COMMIT;",
           1000 + i, conn, i % 3 == 0 ? 9000 : 300, conn);
  int rc = sqlite3_exec(c, sql, 0, 0, 0);
  if (rc != SQLITE_OK) {
    rc = sqlite3_extended_errcode(c);
    note_error(c, rc, "commit");
    if ((rc & 0xff) == SQLITE_NOMEM) rep->nomem_commits++;
    (void)sqlite3_exec(c, "ROLLBACK", 0, 0, 0);
  }
  return rc;
}

/* Still in the faulted process, through a connection: exactly the acknowledged
** transactions are visible (a failed COMMIT is not), and integrity_check, when it
** can run, finds nothing. An error on the way must be a clear one. */
static void live_check(sqlite3 *c, int ntx) {
  int acked = 0;
  for (int i = 0; i < ntx; i++) acked += rep->acked[i];
  sqlite3_stmt *st = 0;
  int rc = sqlite3_prepare_v2(c, "SELECT count(*) FROM t WHERE id >= 1000", -1, &st, 0);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    int visible = sqlite3_column_int(st, 0);
    if (visible != acked) {
      snprintf(rep->live, sizeof rep->live, "%d rows visible, %d commits acknowledged",
               visible, acked);
    }
  } else {
    note_error(c, sqlite3_extended_errcode(c), "count");
  }
  sqlite3_finalize(st);
  if (rep->live[0]) return;
  st = 0;
  /* A fault that fires during the check itself (call n comes late when the engine's
  ** background threads made fewer calls before it) fails one of its reads. */
  int hit_before = __atomic_load_n(&ft_hit, __ATOMIC_SEQ_CST);
  rc = sqlite3_prepare_v2(c, "PRAGMA integrity_check", -1, &st, 0);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  int hit = __atomic_load_n(&ft_hit, __ATOMIC_SEQ_CST);
  int failing_now = (hit && !hit_before) || (hit && ft_mode == M_ALWAYS);
  if (rc == SQLITE_ROW) {
    /* SQLite reports a page it could not read as a row ("... error code=N", "failed to
    ** get page N"), not as an error: with reads failing, that is the I/O error, not
    ** damage. */
    const char *r = (const char *)sqlite3_column_text(st, 0);
    if (!r || (strcmp(r, "ok") != 0 && !failing_now && strstr(r, "error code=") == 0))
      snprintf(rep->live, sizeof rep->live, "integrity_check: %s", r ? r : "?");
  } else {
    note_error(c, sqlite3_extended_errcode(c), "integrity_check");
  }
  sqlite3_finalize(st);
}

static const char *params_of(int big) { return big ? "mw_log_max_mb=1" : ""; }

/* The child of one run: the workload under the armed fault. Never returns. */
static void run_child(int cls, int mode, long n, int big) {
  alarm(60); /* a hang fails the run */
  ft_mode = mode;
  ft_n = n;
  __atomic_store_n(&ft_class, cls, __ATOMIC_SEQ_CST);
  int rc;
  sqlite3 *c[2];
  c[0] = open_engine(params_of(big), &rc);
  c[1] = c[0] ? open_engine(params_of(big), &rc) : 0;
  rep->opened = (c[0] != 0) + (c[1] != 0);
  int ntx = big ? BIG_TXNS : SMALL_TXNS;
  for (int i = 0; i < ntx && c[0]; i++) {
    int k = c[1] ? i % 2 : 0;
    if (txn(c[k], i, k) == SQLITE_OK) rep->acked[i] = 1;
  }
  if (c[0]) live_check(c[c[1] ? 1 : 0], ntx);
  /* The compactor runs in the background: the run without faults waits for it (30 s
  ** at most, not 2: on a loaded emulator its work, CPU-bound, is many times slower). */
  for (int w = 0; c[0] && w < (n == 0 && big ? 3000 : 1); w++) {
    int64_t s[MW_STAT_COUNT];
    if (mw_stats(c[0], 0, s, MW_STAT_COUNT) == SQLITE_OK) rep->compactions = (int)s[MW_STAT_COMPACTIONS];
    if (rep->compactions > 0) break;
    mw_sleep_us(10000);
  }
  /* sqlite3_close reports no I/O error (SQLite ignores xClose's); a failure of the
  ** last close's compaction shows in the next open. */
  if (c[1]) CHECK_RC(sqlite3_close(c[1]), SQLITE_OK);
  if (c[0]) CHECK_RC(sqlite3_close(c[0]), SQLITE_OK);
  __atomic_store_n(&ft_class, CL_NONE, __ATOMIC_SEQ_CST);
  rep->calls = __atomic_load_n(&ft_calls, __ATOMIC_SEQ_CST);
  rep->hit = ft_hit;
  if (FT_SANITIZER) {
    /* LeakSanitizer runs at exit: whatever a failed call left allocated is reported
    ** (and fails the run), once SQLite has freed what it keeps. */
    sqlite3_shutdown();
    exit(0);
  }
  _exit(0);
}

/* ---------------------------------------------------------------- files */

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static unsigned char *slurp(const char *path, size_t *len) {
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long n = ftell(f);
  CHECK(n >= 0 && fseek(f, 0, SEEK_SET) == 0);
  unsigned char *b = malloc((size_t)n + 1);
  CHECK(b != 0);
  CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* Every file of the directory removed, the template's files written back. */
static void restore(void) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -f '%s'/*", dir);
  CHECK(system(cmd) == 0);
  for (int i = 0; i < 2; i++) {
    if (!tpl[i]) continue;
    char p[400];
    path_of(p, sizeof p, fnames[i]);
    FILE *f = fopen(p, "wb");
    CHECK(f != 0);
    CHECK(fwrite(tpl[i], 1, tpl_len[i], f) == tpl_len[i]);
    CHECK(fclose(f) == 0);
  }
}

/* The template: tables, rows, and a log with records (the child exits without
** closing, as a crashed process would). */
static void make_template(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    sqlite3 *c = tu_open(db, "");
    tu_exec(c, "CREATE TABLE t(id INTEGER PRIMARY KEY, conn INT, v BLOB);"
               "CREATE TABLE c(conn INTEGER PRIMARY KEY, n INT);"
               "INSERT INTO c VALUES(0, 0), (1, 0);");
    for (int i = 1; i <= TEMPLATE_ROWS; i++) {
      char sql[200];
      snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%d, 2, randomblob(%d))", i, i % 4 == 0 ? 5000 : 200);
      tu_exec(c, sql);
    }
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int i = 0; i < 2; i++) {
    char p[400];
    path_of(p, sizeof p, fnames[i]);
    tpl[i] = slurp(p, &tpl_len[i]);
  }
  CHECK(tpl[1] != 0 && tpl_len[1] > 64); /* the log holds records to recover */
}

/* ---------------------------------------------------------------- the check */

static int verify_failed;

#define VCHECK(cond, ...)                                    \
  do {                                                       \
    if (!(cond)) {                                           \
      fprintf(stderr, "  check failed: %s: ", #cond);        \
      fprintf(stderr, __VA_ARGS__);                          \
      fprintf(stderr, "\n");                                 \
      verify_failed = 1;                                     \
      return;                                                \
    }                                                        \
  } while (0)

static int64_t q_int(sqlite3 *c, const char *sql, int *ok) {
  sqlite3_stmt *st = 0;
  int64_t v = -1;
  *ok = sqlite3_prepare_v2(c, sql, -1, &st, 0) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
  if (*ok) v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* Reopens without faults and checks what a user would. */
static void verify(const char *what, int big) {
  int rc, ok;
  char uri[600];
  snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter%s%s", db, big ? "&" : "", params_of(big));
  sqlite3 *c = 0;
  rc = sqlite3_open_v2(uri, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, 0);
  VCHECK(rc == SQLITE_OK, "%s: reopen: %d %s", what, rc, c ? sqlite3_errmsg(c) : "");
  int integ = tu_integrity_ok(c);
  int64_t tplrows = q_int(c, "SELECT count(*) FROM t WHERE id <= 20", &ok);
  int64_t rows = q_int(c, "SELECT count(*) FROM t", &ok);
  int64_t bad_counter = q_int(c,
      "SELECT count(*) FROM c WHERE n != (SELECT count(*) FROM t WHERE t.conn = c.conn)", &ok);
  int missing = -1;
  for (int i = 0; i < MAX_TXNS; i++) {
    if (!rep->acked[i]) continue;
    char sql[100];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM t WHERE id = %d", 1000 + i);
    if (q_int(c, sql, &ok) != 1) { missing = i; break; }
  }
  CHECK_RC(sqlite3_close(c), SQLITE_OK);
  VCHECK(integ, "%s: integrity_check through the engine", what);
  VCHECK(tplrows == TEMPLATE_ROWS, "%s: %lld template rows", what, (long long)tplrows);
  VCHECK(missing < 0, "%s: acknowledged commit %d lost", what, missing);
  VCHECK(bad_counter == 0, "%s: a counter disagrees with its rows (half a transaction)", what);
  char p[400];
  path_of(p, sizeof p, "f.db-mw");
  VCHECK(access(p, F_OK) != 0, "%s: the log is still there after a clean last close", what);
  sqlite3 *s = 0;
  VCHECK(sqlite3_open_v2(db, &s, SQLITE_OPEN_READWRITE, "unix") == SQLITE_OK, "%s: stock open", what);
  int sinteg = tu_integrity_ok(s);
  int64_t srows = q_int(s, "SELECT count(*) FROM t", &ok);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  VCHECK(sinteg, "%s: integrity_check through the stock unix VFS", what);
  VCHECK(srows == rows, "%s: stock sees %lld rows, the engine %lld", what, (long long)srows, (long long)rows);
}

/* ---------------------------------------------------------------- runs */

typedef struct fclass { const char *name; int cls, mode, big; } fclass;
static const fclass classes[] = {
  { "vfs-once", CL_VFS, M_ONCE, 1 },
  { "vfs-always", CL_VFS, M_ALWAYS, 1 },
  { "vfs-short", CL_VFS_WRITE, M_ALWAYS, 1 },
  { "sync-once", CL_SYNC, M_ONCE, 1 },
  { "plat-once", CL_PLAT, M_ONCE, 1 },
  { "plat-always", CL_PLAT, M_ALWAYS, 1 },
  { "plat-enospc", CL_PLAT_SPACE, M_ALWAYS, 1 },
  { "plat-short", CL_PLAT_SHORT, M_ALWAYS, 1 },
  { "sqlmem-once", CL_SQLMEM, M_ONCE, 0 },
  { "sqlmem-always", CL_SQLMEM, M_ALWAYS, 0 },
  { "libcmem-once", CL_LIBCMEM, M_ONCE, 0 },
  { "libcmem-always", CL_LIBCMEM, M_ALWAYS, 0 },
  { "thread-once", CL_THREAD, M_ONCE, 1 },
};

static int failures;

/* One run with the fault at call n (0: none); 1 when the n-th call happened. */
static int one_run(const fclass *fc, long n, long *pcalls) {
  restore();
  memset(rep, 0, sizeof *rep);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) run_child(fc->cls, fc->mode, n, fc->big);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  char what[120];
  snprintf(what, sizeof what, "%s n=%ld", fc->name, n);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "FAIL %s: the child %s %d\n", what, WIFSIGNALED(st) ? "died of signal" : "exited",
            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    failures++;
    return 0;
  }
  if (rep->live[0]) {
    fprintf(stderr, "FAIL %s: in the faulted process: %s\n", what, rep->live);
    failures++;
  }
  for (int i = 0; i < rep->nbad && i < MAX_BAD; i++) {
    fprintf(stderr, "FAIL %s: unclear error: %s\n", what, rep->bad[i]);
    failures++;
  }
  verify_failed = 0;
  verify(what, fc->big);
  if (verify_failed) {
    fprintf(stderr, "FAIL %s (reproduce: MW_FAULTS_ONLY=%s MW_FAULTS_N=%ld)\n", what, fc->name, n);
    failures++;
  }
  if (pcalls) *pcalls = rep->calls;
  return n == 0 || rep->hit;
}

int main(void) {
  alarm(3000);
  signal(SIGPIPE, SIG_IGN);
  /* SQLite's allocator wrapped: before SQLite initializes. */
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_GETMALLOC, &ft_mem_orig), SQLITE_OK);
  static sqlite3_mem_methods wrapped;
  wrapped = ft_mem_orig;
  wrapped.xMalloc = ft_sq_malloc;
  wrapped.xFree = ft_sq_free;
  wrapped.xRealloc = ft_sq_realloc;
  wrapped.xSize = ft_sq_size;
  wrapped.xRoundup = ft_sq_roundup;
  wrapped.xInit = ft_sq_init;
  wrapped.xShutdown = ft_sq_shutdown;
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_MALLOC, &wrapped), SQLITE_OK);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  install_fault_vfs();
  __atomic_store_n(&mw_fault_hook, (mw_fault_hook_fn)ft_platform, __ATOMIC_SEQ_CST);

  snprintf(dir, sizeof dir, "/dev/shm/mwfaults.XXXXXX");
  if (!mkdtemp(dir)) {
    snprintf(dir, sizeof dir, "/tmp/mwfaults.XXXXXX");
    CHECK(mkdtemp(dir) != 0);
  }
  snprintf(db, sizeof db, "%s/f.db", dir);
  rep = mmap(0, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(rep != MAP_FAILED);
  make_template();

  double scale = getenv("MW_TEST_SCALE") ? atof(getenv("MW_TEST_SCALE")) : 1.0;
  long stride = scale > 0 && scale < 1 ? (long)(1.0 / scale + 0.5) : 1;
  if (FT_SANITIZER) stride *= 2; /* every other n: the plain build tries them all */
  const char *only = getenv("MW_FAULTS_ONLY");
  long only_n = getenv("MW_FAULTS_N") ? atol(getenv("MW_FAULTS_N")) : 0;

  for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++) {
    const fclass *fc = &classes[k];
    if (only && strcmp(only, fc->name) != 0) continue;
    if (fc->cls == CL_PLAT_SHORT && !FT_SHORT_WRITES) {
      printf("%-15s skipped: needs Linux\n", fc->name);
      continue;
    }
    if (fc->cls == CL_THREAD && !FT_THREADS) {
      printf("%-15s skipped: the sanitizer owns pthread_create in this build\n", fc->name);
      continue;
    }
    if (fc->cls == CL_LIBCMEM && !FT_LIBC_MALLOC) {
      printf("%-15s skipped: libc's allocator is the sanitizer's in this build\n", fc->name);
      continue;
    }
    int before = failures;
    long calls = 0;
    (void)one_run(fc, 0, &calls); /* no fault: the count, and the workload itself checked */
    CHECK(calls > 0);
    if (fc->big && fc->cls == CL_PLAT) CHECK(rep->compactions > 0); /* the log was compacted mid-run */
    int acked_min = MAX_TXNS, codes[64] = { 0 }, oom_conflicts = 0;
    long runs = 0, n = only_n ? only_n : 1;
    for (;; n += stride) {
      int hit = one_run(fc, n, 0);
      int a = 0;
      for (int i = 0; i < MAX_TXNS; i++) a += rep->acked[i];
      if (a < acked_min) acked_min = a;
      for (int i = 0; i < 64; i++) codes[i] += rep->codes[i];
      oom_conflicts += rep->oom_conflicts;
      runs++;
      /* The number of calls varies a little from run to run (the engine's threads):
      ** go on at least to the count of the run without a fault. */
      if ((!hit && n > calls) || only_n || failures - before > 5) break;
    }
    printf("%-15s %4ld calls (no fault), %4ld runs, fewest commits acknowledged %d; errors:", fc->name,
           calls, runs, acked_min);
    for (int i = 0; i < 64; i++)
      if (codes[i]) printf(" %s x%d", sqlite3_errstr(i), codes[i]);
    if (oom_conflicts) printf(" (of those, %d conflicts after a failed allocation)", oom_conflicts);
    printf("%s\n", failures > before ? "  FAILED" : "");
    fflush(stdout);
  }
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
  if (failures) {
    printf("test_faults: %d failures\n", failures);
    return 1;
  }
  printf("test_faults: ok\n");
  return 0;
}
