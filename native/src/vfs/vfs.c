/*
** vfs.c: registers the "multiwriter" VFS over the default VFS, parses the mw* URI
** options of a main database, and hands each file to the right methods:
**   - the main database of an engine open -> lane.c (mw_main_methods)
**   - its "-wal"                          -> lane.c (mw_wal_methods, in memory)
**   - everything else (and mw=0)          -> the root VFS, untouched
**   - VACUUM INTO's output, while the thread asked for it (mw_plain_output)
**                                         -> the root VFS: a plain database
** A refused open (bad option) gets a file whose writes fail and whose message the
** auto-extension returns from sqlite3_open (mw_check_open).
**
** Owns: the VFS object, option parsing, the refused-open file.
** Never touches: page contents, the store, epochs.
*/
#include "engine.h"
#include "core/db.h"
#include "vfs/lane.h"
#include "vfs/vfs.h"

#include <stdlib.h>
#include <string.h>

static sqlite3_vfs mw_vfs;
static sqlite3_vfs *root_vfs;
static mw_mutex register_mutex = MW_MUTEX_INIT;

sqlite3_vfs *mw_root_vfs(void) { return root_vfs; }

/* ---------------------------------------------------------------- options */

static int parse_bool(const char *v, int *out) {
  if (v == 0) return 0;
  if (!strcmp(v, "1") || !sqlite3_stricmp(v, "true") || !sqlite3_stricmp(v, "on") ||
      !sqlite3_stricmp(v, "yes")) { *out = 1; return 1; }
  if (!strcmp(v, "0") || !sqlite3_stricmp(v, "false") || !sqlite3_stricmp(v, "off") ||
      !sqlite3_stricmp(v, "no")) { *out = 0; return 1; }
  return 0;
}

static int parse_uint(const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (v == 0 || *v == 0) return 0;
  uint64_t x = 0;
  for (const char *p = v; *p; p++) {
    if (*p < '0' || *p > '9') return 0;
    x = x * 10 + (uint64_t)(*p - '0');
    if (x > hi) return 0;
  }
  if (x < lo) return 0;
  *out = x;
  return 1;
}

/* mw_wait's default: on in the loadable extension, whose hosts (the sqlite3 shell, C
** programs) do not run a statement again; a build may set it (SQLite's Tcl suite,
** scripts/sqlite-tcl, runs as the shell does). */
#ifndef MW_WAIT_DEFAULT
#ifdef MW_EXTENSION
#define MW_WAIT_DEFAULT 1
#else
#define MW_WAIT_DEFAULT 0
#endif
#endif

int mw_opts_parse(const char *zName, mw_opts *o, char **pzErr) {
  /* Every field: an option added later starts off, never as the caller's stack held it
  ** (mw_rebase did: test_engine_rebase found it on on aarch64-gnu only). */
  memset(o, 0, sizeof *o);
  o->engine = 1;
  o->readcheck = 1;
  o->log_max_bytes = (uint64_t)64 << 20;
  o->ltx_keep = 2;
  o->wait = MW_WAIT_DEFAULT;
  *pzErr = 0;
  for (int i = 0;; i++) {
    const char *key = sqlite3_uri_key(zName, i);
    if (key == 0) break;
    if (sqlite3_strnicmp(key, "mw", 2) != 0) continue;
    const char *v = sqlite3_uri_parameter(zName, key);
    int b = 0;
    uint64_t u = 0;
    if (!strcmp(key, "mw")) {
      if (!parse_bool(v, &b)) goto bad_value;
      o->engine = b;
    } else if (!strcmp(key, "mw_readcheck")) {
      if (!parse_bool(v, &b)) goto bad_value;
      o->readcheck = b;
    } else if (!strcmp(key, "mw_fullfsync")) {
      if (!parse_bool(v, &b)) goto bad_value;
      o->fullfsync = b;
    } else if (!strcmp(key, "mw_log_max_mb")) {
      if (!parse_uint(v, 1, 1u << 20, &u)) goto bad_value;
      o->log_max_bytes = u << 20;
    } else if (!strcmp(key, "mw_profile")) {
      if (v && !strcmp(v, "small")) o->small = 1;
      else if (v && !strcmp(v, "default")) o->small = 0;
      else goto bad_value;
    } else if (!strcmp(key, "mw_mp")) {
      if (!parse_bool(v, &b)) goto bad_value;
      o->mp = b;
    } else if (!strcmp(key, "mw_rebase")) {
      if (!parse_bool(v, &b)) goto bad_value;
      o->rebase = b;
    } else if (!strcmp(key, "mw_wait")) {
      if (!parse_bool(v, &b)) goto bad_value;
      o->wait = b;
    } else if (!strcmp(key, "mw_ltx_dir")) {
      if (v == 0 || v[0] == 0) goto bad_value;
      o->ltx_dir = v;
    } else if (!strcmp(key, "mw_ltx_keep")) {
      if (!parse_uint(v, 0, 1000, &u)) goto bad_value;
      o->ltx_keep = (int)u;
    } else {
      *pzErr = sqlite3_mprintf("multiwriter: unknown URI parameter '%s'", key);
      return SQLITE_ERROR;
    }
    continue;
  bad_value:
    *pzErr = sqlite3_mprintf("multiwriter: bad value '%s' for URI parameter '%s'", v ? v : "",
                             key);
    return SQLITE_ERROR;
  }
  if (o->small && o->log_max_bytes > ((uint64_t)8 << 20)) o->log_max_bytes = (uint64_t)8 << 20;
  return SQLITE_OK;
}

/* ---------------------------------------------------------------- refused open */
/* A refused open gets a file of its own that touches nothing on disk: it reads
** as an empty database, so that sqlite3_open gets as far as the auto-extension,
** and refuses every write and the wal-index. */

static int err_close(sqlite3_file *f) {
  mw_file *p = (mw_file *)f;
  sqlite3_free(p->err);
  p->err = 0;
  return SQLITE_OK;
}
/* The header read of sqlite3BtreeOpen is the only read a refused main database
** needs before the auto-extension fails the open; a refused ATTACH fails on the
** next read (its message cannot reach the caller, but it does not go unnoticed). */
static int err_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
  mw_file *p = (mw_file *)f;
  if (p->reads++ > 0) return SQLITE_CANTOPEN;
  memset(b, 0, (size_t)n);
  return SQLITE_IOERR_SHORT_READ;
}
/* What the refused file answers: the engine's memory or I/O error when that was why
** (an ATTACH meets it here: it runs no auto-extension to report the open's message),
** else SQLITE_CANTOPEN. */
static int err_code(sqlite3_file *f) {
  int rc = ((mw_file *)f)->err_rc, prim = rc & 0xff;
  return prim == SQLITE_NOMEM || prim == SQLITE_IOERR || prim == SQLITE_FULL ? rc : SQLITE_CANTOPEN;
}
static int err_refuse_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
  return err_code(f);
}
static int err_refuse_trunc(sqlite3_file *f, sqlite3_int64 n) { return err_code(f); }
static int err_sync(sqlite3_file *f, int flags) { return SQLITE_OK; }
static int err_size(sqlite3_file *f, sqlite3_int64 *n) {
  *n = 0;
  return SQLITE_OK;
}
static int err_lock(sqlite3_file *f, int l) { return err_code(f); }
static int err_unlock(sqlite3_file *f, int l) { return SQLITE_OK; }
static int err_check(sqlite3_file *f, int *r) { *r = 0; return SQLITE_OK; }
static int err_fcntl(sqlite3_file *f, int op, void *arg) { return SQLITE_NOTFOUND; }
static int err_sector(sqlite3_file *f) { return 4096; }
static int err_devchar(sqlite3_file *f) { return 0; }
static int err_shmmap(sqlite3_file *f, int i, int sz, int ext, void volatile **pp) {
  *pp = 0;
  return err_code(f);
}
static int err_shmlock(sqlite3_file *f, int o, int n, int fl) { return err_code(f); }
static void err_shmbarrier(sqlite3_file *f) {}
static int err_shmunmap(sqlite3_file *f, int del) { return SQLITE_OK; }

static const sqlite3_io_methods mw_err_methods = {
  2, err_close, err_read, err_refuse_write, err_refuse_trunc, err_sync, err_size,
  err_lock, err_unlock, err_check, err_fcntl, err_sector, err_devchar,
  err_shmmap, err_shmlock, err_shmbarrier, err_shmunmap, 0, 0
};

/* A VFS stacked above the engine (the connection's file is the stacked VFS's, the
** engine's file is under it) works only when it passes the engine the name SQLite
** gave it and the shared memory. Two ways it may not:
**  - it opens the file under a name of its own (multiplex): the engine then cannot
**    tell whose private WAL a "-wal" open is, and a real -wal on disk would hold
**    commits the engine never sees;
**  - it keeps its own shared memory (the suite's testvfs): SQLite's wal-index is
**    then not the connection's private one, and commits get lost.
** Either is refused here, at open, rather than losing data later. */
static int check_stacked(sqlite3 *db, sqlite3_file *top, char **pzErr) {
  const char *name = sqlite3_db_filename(db, "main");
  if (name == 0 || name[0] == 0) return SQLITE_OK;
  mw_lane *l = mw_lane_find(name);
  if (l == 0) {
    if (!mw_db_is_open(name)) return SQLITE_OK; /* not opened through the engine */
    *pzErr = sqlite3_mprintf("multiwriter: %s is open through the engine in this "
                             "process, but this connection's file is not the engine's "
                             "(another VFS, or a VFS stacked over the engine that "
                             "renames the file): not supported", name);
    return SQLITE_ERROR;
  }
  if (top->pMethods == &mw_main_methods) return SQLITE_OK; /* the engine's own file */
  if (top->pMethods->iVersion < 2 || top->pMethods->xShmMap == 0) return SQLITE_OK;
  /* Map region 0 through the stacked file: passed down, it reaches the lane. */
  int had = l->nregion;
  void volatile *mem = 0;
  int rc = top->pMethods->xShmMap(top, 0, 32768, 1, &mem);
  if (rc != SQLITE_OK) return SQLITE_OK; /* SQLite will meet the same error itself */
  int passed = had > 0 ? mem == l->region[0] : l->nregion > 0;
  if (had == 0) top->pMethods->xShmUnmap(top, 0);
  if (passed) return SQLITE_OK;
  *pzErr = sqlite3_mprintf("multiwriter: the VFS above the engine keeps its own shared "
                           "memory for %s; a VFS stacked over the engine must pass "
                           "xShmMap/xShmLock through to it", name);
  return SQLITE_ERROR;
}

int mw_check_open(sqlite3 *db, char **pzErr) {
  sqlite3_file *f = 0;
  char *err = 0;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK || f == 0)
    return SQLITE_OK;
  if (f->pMethods == 0) return SQLITE_OK; /* nothing opened yet (":memory:", "") */
  if (f->pMethods != &mw_err_methods) {
    /* Only a connection through another VFS can be stacked over the engine. The
    ** root VFS's own connections are skipped: the engine's private one converts a
    ** file while the registry is locked. */
    sqlite3_vfs *vfs = 0;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK ||
        vfs == 0 || vfs == &mw_vfs || vfs == root_vfs)
      return SQLITE_OK;
    int rc = check_stacked(db, f, &err);
    if (rc != SQLITE_OK && pzErr) *pzErr = err ? err : sqlite3_mprintf("multiwriter: out of memory");
    else sqlite3_free(err);
    return rc;
  }
  mw_file *p = (mw_file *)f;
  if (pzErr) *pzErr = sqlite3_mprintf("%s", p->err ? p->err : "multiwriter: open refused");
  return p->err_rc != SQLITE_OK ? p->err_rc : SQLITE_ERROR;
}

/* ---------------------------------------------------------------- VFS methods */

static sqlite3_file *real_of(mw_file *p) {
  return (sqlite3_file *)((char *)p + ((sizeof(mw_file) + 15) & ~(size_t)15));
}

/* "<db>-wal" of an open engine database? The database name is cut on the stack (libc's
** heap past 1 KiB): not from SQLite's allocator, whose failures (a heap limit, the
** test suite's fault injection) would otherwise turn into a wrong answer here. */
static int is_engine_wal(const char *zName) {
  if (zName == 0) return 0;
  size_t n = strlen(zName);
  if (n < 5 || strcmp(zName + n - 4, "-wal") != 0) return 0;
  char local[1024];
  char *db = n - 4 < sizeof(local) ? local : malloc(n - 3);
  if (db == 0) return 0;
  memcpy(db, zName, n - 4);
  db[n - 4] = 0;
  int yes = mw_db_is_open(db);
  if (db != local) free(db);
  return yes;
}

/* ---------------------------------------------------------------- VACUUM INTO */
/* SQLite's VACUUM INTO attaches its output with the connection's VFS and refuses it when
** its size is not 0; an engine open would make a database of an empty file first, and
** convert one with content to WAL mode before SQLite refuses it. The package asks, around
** the steps of a VACUUM statement, that the next main-database open go through the root
** VFS, untouched: VACUUM INTO has no other. A file the engine has open in this process
** stays the engine's (SQLite then refuses it: its size is not 0). */
static _Thread_local int plain_output;

int mw_plain_output(int on) {
  int was = plain_output;
  plain_output = on != 0;
  return was;
}

static int mw_open(sqlite3_vfs *vfs, sqlite3_filename zName, sqlite3_file *f, int flags,
                   int *pOut) {
  sqlite3_vfs *root = root_vfs;
  mw_file *p = (mw_file *)f;
  if (zName && (flags & SQLITE_OPEN_MAIN_DB) && plain_output && !mw_db_is_open(zName)) {
    plain_output = 0;
    return root->xOpen(root, zName, f, flags, pOut);
  }
  if (zName && (flags & SQLITE_OPEN_MAIN_DB)) {
    mw_opts o;
    char *err = 0;
    int rc = mw_opts_parse(zName, &o, &err);
    if (rc == SQLITE_OK && !o.engine) {
      /* A stock connection would write a real -wal under the engine's feet. */
      if (!mw_db_is_open(zName)) return root->xOpen(root, zName, f, flags, pOut);
      err = sqlite3_mprintf("multiwriter: %s is open through the engine in this process; "
                            "mw=0 cannot open it at the same time", zName);
      rc = SQLITE_ERROR;
    }
    if (rc == SQLITE_OK) {
      memset(p, 0, sizeof(*p));
      p->real = real_of(p);
      rc = mw_lane_create(p, root, zName, flags, pOut, &o, &err);
      if (rc == SQLITE_OK) return SQLITE_OK;
      if (rc == MW_RC_STOCK_OPEN) {
        /* Not a database, or read-only for SQLite: opened as stock SQLite opens it
        ** (sqlite3_open succeeds; queries fail with SQLITE_NOTADB, or reads work and
        ** writes fail with SQLITE_READONLY), not refused at open. */
        sqlite3_free(err);
        memset(p, 0, sizeof(*p));
        return root->xOpen(root, zName, f, flags, pOut);
      }
      if (err == 0) return rc;
      /* The open itself worked up to the engine: report the engine's message. */
    }
    /* Refused: a file that touches nothing, so that sqlite3_open reaches the
    ** auto-extension, which fails the open with the message. */
    memset(p, 0, sizeof(*p));
    p->kind = MW_KIND_ERR;
    p->err = err;
    p->err_rc = rc; /* SQLITE_ERROR for options; the engine's I/O or memory error kept */
    p->base.pMethods = &mw_err_methods;
    if (pOut) *pOut = flags;
    return SQLITE_OK;
  }
  if (zName && (flags & SQLITE_OPEN_WAL)) {
    mw_lane *l = mw_lane_find(sqlite3_filename_database(zName));
    if (l) {
      memset(p, 0, sizeof(*p));
      p->kind = MW_KIND_WAL;
      p->lane = l;
      int rc = mw_lane_open_wal(l, f);
      if (rc == SQLITE_OK && pOut) *pOut = flags;
      return rc;
    }
  }
  return root->xOpen(root, zName, f, flags, pOut);
}

static int mw_delete(sqlite3_vfs *vfs, const char *zName, int syncDir) {
  if (is_engine_wal(zName)) return SQLITE_OK; /* the private WAL is in memory */
  return root_vfs->xDelete(root_vfs, zName, syncDir);
}

static int mw_access(sqlite3_vfs *vfs, const char *zName, int flags, int *pResOut) {
  if (is_engine_wal(zName)) {
    *pResOut = 0;
    return SQLITE_OK;
  }
  return root_vfs->xAccess(root_vfs, zName, flags, pResOut);
}

static int mw_fullpath(sqlite3_vfs *vfs, const char *z, int n, char *out) {
  return root_vfs->xFullPathname(root_vfs, z, n, out);
}
static void *mw_dlopen(sqlite3_vfs *vfs, const char *z) { return root_vfs->xDlOpen(root_vfs, z); }
static void mw_dlerror(sqlite3_vfs *vfs, int n, char *z) { root_vfs->xDlError(root_vfs, n, z); }
static void (*mw_dlsym(sqlite3_vfs *vfs, void *h, const char *z))(void) {
  return root_vfs->xDlSym(root_vfs, h, z);
}
static void mw_dlclose(sqlite3_vfs *vfs, void *h) { root_vfs->xDlClose(root_vfs, h); }
static int mw_random(sqlite3_vfs *vfs, int n, char *z) { return root_vfs->xRandomness(root_vfs, n, z); }
static int mw_sleep(sqlite3_vfs *vfs, int us) { return root_vfs->xSleep(root_vfs, us); }
static int mw_time(sqlite3_vfs *vfs, double *t) { return root_vfs->xCurrentTime(root_vfs, t); }
static int mw_lasterr(sqlite3_vfs *vfs, int n, char *z) {
  return root_vfs->xGetLastError ? root_vfs->xGetLastError(root_vfs, n, z) : 0;
}
static int mw_time64(sqlite3_vfs *vfs, sqlite3_int64 *t) {
  if (root_vfs->iVersion >= 2 && root_vfs->xCurrentTimeInt64)
    return root_vfs->xCurrentTimeInt64(root_vfs, t);
  double d = 0;
  int rc = root_vfs->xCurrentTime(root_vfs, &d);
  *t = (sqlite3_int64)(d * 86400000.0);
  return rc;
}

/* The root VFS's system calls (test_syscall.c and other fault injectors reach the
** files that SQLite and the engine open through the root VFS this way; the log's
** own calls (platform_posix.c) are not among them). */
static int mw_set_syscall(sqlite3_vfs *vfs, const char *z, sqlite3_syscall_ptr p) {
  if (root_vfs->iVersion < 3 || root_vfs->xSetSystemCall == 0) return SQLITE_NOTFOUND;
  return root_vfs->xSetSystemCall(root_vfs, z, p);
}
static sqlite3_syscall_ptr mw_get_syscall(sqlite3_vfs *vfs, const char *z) {
  if (root_vfs->iVersion < 3 || root_vfs->xGetSystemCall == 0) return 0;
  return root_vfs->xGetSystemCall(root_vfs, z);
}
static const char *mw_next_syscall(sqlite3_vfs *vfs, const char *z) {
  if (root_vfs->iVersion < 3 || root_vfs->xNextSystemCall == 0) return 0;
  return root_vfs->xNextSystemCall(root_vfs, z);
}

int mw_register(void) {
  int rc = SQLITE_OK;
  mw_mutex_lock(&register_mutex);
  if (sqlite3_vfs_find(MW_VFS_NAME) == 0) {
    sqlite3_vfs *root = sqlite3_vfs_find(0);
    if (root == 0) {
      rc = SQLITE_ERROR;
    } else {
      root_vfs = root;
      memset(&mw_vfs, 0, sizeof(mw_vfs));
      mw_vfs.iVersion = 3;
      mw_vfs.szOsFile = (int)(((sizeof(mw_file) + 15) & ~(size_t)15) + (size_t)root->szOsFile);
      mw_vfs.mxPathname = root->mxPathname;
      mw_vfs.zName = MW_VFS_NAME;
      mw_vfs.xOpen = mw_open;
      mw_vfs.xDelete = mw_delete;
      mw_vfs.xAccess = mw_access;
      mw_vfs.xFullPathname = mw_fullpath;
      mw_vfs.xDlOpen = mw_dlopen;
      mw_vfs.xDlError = mw_dlerror;
      mw_vfs.xDlSym = mw_dlsym;
      mw_vfs.xDlClose = mw_dlclose;
      mw_vfs.xRandomness = mw_random;
      mw_vfs.xSleep = mw_sleep;
      mw_vfs.xCurrentTime = mw_time;
      mw_vfs.xGetLastError = mw_lasterr;
      mw_vfs.xCurrentTimeInt64 = mw_time64;
      mw_vfs.xSetSystemCall = mw_set_syscall;
      mw_vfs.xGetSystemCall = mw_get_syscall;
      mw_vfs.xNextSystemCall = mw_next_syscall;
      rc = sqlite3_vfs_register(&mw_vfs, 0);
    }
  }
  mw_mutex_unlock(&register_mutex);
  return rc;
}
