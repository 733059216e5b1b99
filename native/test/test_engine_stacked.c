/* VFSes stacked over the engine (docs/sqlite-tests.md, "stacked VFS"):
**  - a shim that passes every call through (shared memory included) works: rows
**    committed through it are there after close and reopen;
**  - a shim that keeps its own shared memory (as SQLite's testvfs does) is refused
**    at open with a message, instead of losing the rows at close;
**  - a shim that opens the file under a name of its own (as multiplex does) is
**    refused at open with a message, instead of corrupting the database;
**  - a connection through another VFS (unix-dotfile) to a file the engine has open
**    in this process is refused the same way. */
#include "test_engine_util.h"

typedef struct shim_file {
  sqlite3_file base;
  sqlite3_file *real;          /* the engine's file, right after this struct */
  char *own_name;              /* rename shim: the name it opened the file under */
} shim_file;

static sqlite3_vfs *below;     /* the engine */
static int own_shm;            /* 1: this shim keeps its own shared memory */
static int rename_main;        /* 1: this shim opens the main file under its own name */
static void *own_region;       /* the shim's own shared memory (one region) */

#define REAL(f) (((shim_file *)(f))->real)
static int s_close(sqlite3_file *f) {
  shim_file *p = (shim_file *)f;
  int rc = p->real->pMethods ? p->real->pMethods->xClose(p->real) : SQLITE_OK;
  sqlite3_free_filename(p->own_name);
  return rc;
}
static int s_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xRead(REAL(f), b, n, o); }
static int s_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xWrite(REAL(f), b, n, o); }
static int s_trunc(sqlite3_file *f, sqlite3_int64 n) { return REAL(f)->pMethods->xTruncate(REAL(f), n); }
static int s_sync(sqlite3_file *f, int fl) { return REAL(f)->pMethods->xSync(REAL(f), fl); }
static int s_size(sqlite3_file *f, sqlite3_int64 *n) { return REAL(f)->pMethods->xFileSize(REAL(f), n); }
static int s_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int s_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int s_check(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int s_fcntl(sqlite3_file *f, int op, void *a) { return REAL(f)->pMethods->xFileControl(REAL(f), op, a); }
static int s_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int s_devchar(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int s_shmmap(sqlite3_file *f, int i, int sz, int ext, void volatile **pp) {
  if (!own_shm) return REAL(f)->pMethods->xShmMap(REAL(f), i, sz, ext, pp);
  CHECK(i == 0);
  if (own_region == 0 && ext) own_region = calloc(1, (size_t)sz);
  *pp = own_region;
  return SQLITE_OK;
}
static int s_shmlock(sqlite3_file *f, int o, int n, int fl) {
  return own_shm ? SQLITE_OK : REAL(f)->pMethods->xShmLock(REAL(f), o, n, fl);
}
static void s_shmbarrier(sqlite3_file *f) {
  if (!own_shm) REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int s_shmunmap(sqlite3_file *f, int del) {
  return own_shm ? SQLITE_OK : REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static const sqlite3_io_methods shim_methods = {
  2, s_close, s_read, s_write, s_trunc, s_sync, s_size, s_lock, s_unlock, s_check,
  s_fcntl, s_sector, s_devchar, s_shmmap, s_shmlock, s_shmbarrier, s_shmunmap, 0, 0
};

static int shim_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
  shim_file *p = (shim_file *)f;
  memset(p, 0, sizeof(*p));
  p->real = (sqlite3_file *)&p[1];
  const char *pass = name;
  if (rename_main && name) {
    /* Like multiplex: a filename object of its own, with the same path. */
    p->own_name = (char *)sqlite3_create_filename(name, "", "", 0, 0);
    if (p->own_name == 0) return SQLITE_NOMEM;
    pass = p->own_name;
  }
  int rc = below->xOpen(below, pass, p->real, flags, out);
  if (rc != SQLITE_OK) {
    sqlite3_free_filename(p->own_name);
    p->own_name = 0;
    return rc;
  }
  p->base.pMethods = &shim_methods;
  return SQLITE_OK;
}
static int shim_delete(sqlite3_vfs *v, const char *z, int d) { return below->xDelete(below, z, d); }
static int shim_access(sqlite3_vfs *v, const char *z, int fl, int *r) { return below->xAccess(below, z, fl, r); }
static int shim_full(sqlite3_vfs *v, const char *z, int n, char *o) { return below->xFullPathname(below, z, n, o); }
static int shim_random(sqlite3_vfs *v, int n, char *z) { return below->xRandomness(below, n, z); }
static int shim_sleep(sqlite3_vfs *v, int us) { return below->xSleep(below, us); }
static int shim_time(sqlite3_vfs *v, double *t) { return below->xCurrentTime(below, t); }

static sqlite3_vfs shim_vfs;

static void register_shim(void) {
  below = sqlite3_vfs_find("multiwriter");
  CHECK(below != 0);
  shim_vfs.iVersion = 1;
  shim_vfs.szOsFile = (int)sizeof(shim_file) + below->szOsFile;
  shim_vfs.mxPathname = below->mxPathname;
  shim_vfs.zName = "shim";
  shim_vfs.xOpen = shim_open;
  shim_vfs.xDelete = shim_delete;
  shim_vfs.xAccess = shim_access;
  shim_vfs.xFullPathname = shim_full;
  shim_vfs.xRandomness = shim_random;
  shim_vfs.xSleep = shim_sleep;
  shim_vfs.xCurrentTime = shim_time;
  CHECK_RC(sqlite3_vfs_register(&shim_vfs, 0), SQLITE_OK);
}

static sqlite3 *open_vfs(const char *path, const char *vfs, int *rc, char *msg, size_t n) {
  sqlite3 *db = 0;
  *rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs);
  snprintf(msg, n, "%s", db ? sqlite3_errmsg(db) : "");
  if (*rc != SQLITE_OK) {
    sqlite3_close(db);
    return 0;
  }
  return db;
}

static void expect_refused(const char *path, const char *vfs, const char *needle) {
  int rc;
  char msg[600];
  sqlite3 *db = open_vfs(path, vfs, &rc, msg, sizeof msg);
  if (db != 0 || strstr(msg, needle) == 0) {
    fprintf(stderr, "open through %s: rc %d '%s', wanted a refusal with '%s'\n", vfs, rc, msg, needle);
    exit(1);
  }
}

int main(void) {
  const char *path = tu_db_path("stacked", "s.db");
  register_shim();
  int rc;
  char msg[600];

  /* Pass-through shim: works, and the rows stay. */
  sqlite3 *db = open_vfs(path, "shim", &rc, msg, sizeof msg);
  if (db == 0) { fprintf(stderr, "pass-through shim refused: %s\n", msg); exit(1); }
  CHECK(tu_stat(db, MW_STAT_ENGINE) == 1);
  tu_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1),(2),(3)");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 3);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  db = open_vfs(path, "shim", &rc, msg, sizeof msg);
  CHECK(db != 0);
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 3);

  /* While it is open: a connection through another VFS (not the root one, whose
  ** connections the engine does not check) to the same file is refused. */
  expect_refused(path, "unix-dotfile", "is open through the engine in this process");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);

  /* A shim with shared memory of its own: refused at open, nothing lost. */
  own_shm = 1;
  expect_refused(path, "shim", "keeps its own shared memory");
  own_shm = 0;

  /* A shim that renames the file: refused at open. The engine holds the database
  ** open through a first, direct connection (the shim's open then finds it open). */
  sqlite3 *direct = tu_open(path, "");
  rename_main = 1;
  expect_refused(path, "shim", "is open through the engine in this process");
  /* ... and when the shim's connection is the first one too. */
  CHECK_RC(sqlite3_close(direct), SQLITE_OK);
  expect_refused(path, "shim", "is open through the engine in this process");
  rename_main = 0;

  db = tu_open(path, "");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 3);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  free(own_region);
  tu_rmdir();
  printf("test_engine_stacked: ok\n");
  return 0;
}
