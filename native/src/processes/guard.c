/*
** guard.c: what keeps an engine database safe from everything outside this
** process's engine (docs/design/processes.md):
**   - the lock: while the engine has the file open, its own handle on the file
**     holds SQLite's EXCLUSIVE lock (SHARED for a read-only file). Every SQLite
**     connection, stock or engine, in any other process, takes SHARED before it
**     reads the file and keeps it while in WAL mode, so another process is refused
**     with SQLITE_BUSY (a stock connection) or at open (the engine, db.c), and the
**     engine is refused while a stock connection has the file open. The lock is the
**     root VFS's: byte locks (fcntl) that the kernel drops when the process dies,
**     and through the root VFS so that SQLite's own bookkeeping of POSIX locks
**     keeps them when another handle of this process on the file is closed.
**   - with mw_mp=1 (several processes), the lock is shared: each process holds a
**     write lock on one byte of SQLite's SHARED range of its own (the first free
**     one), through a handle of its own (an open file description lock, which closing
**     another handle of the process never drops). Engine processes never conflict;
**     a stock connection, which takes a read lock on the whole range before it reads
**     anything, gets SQLITE_BUSY, and an engine process is refused at open while a
**     stock connection has the file open. Where the system has no such locks (macOS),
**     the lock is SQLite's SHARED: stock connections may then read the header, and the
**     mark below refuses them ("file is not a database").
**   - the mark: while the log may hold commits that the file does not (from the
**     first open until the last close has compacted everything), bytes 18 and 19
**     of the file's header (the write and read format versions, 2 in WAL mode) are
**     MW_HDR_MARK. Stock SQLite refuses to read a file whose read version is above 2
**     ("file is not a database"), so after a crash, with no process left to hold a
**     lock, no stock connection reads a half-compacted file or writes rows that the
**     log's replay would overwrite. The engine sees 2: reads through this handle
**     give 2 back, writes of the header put the mark in.
**
** Owns: the engine's handle on the database file (db->data), the lock, the mark.
** Never touches: the log, the page store, lanes.
*/
#include "engine.h"
#include "processes/guard.h"

#include <stdlib.h>
#include <string.h>

typedef struct guard_file {
  sqlite3_file base;
  sqlite3_file *inner;         /* the file through the root VFS, after this struct */
  int readonly;
  int marking;                 /* writes of bytes 18..19 put the mark in */
  int locked;                  /* SHARED or EXCLUSIVE held (see mw_guard_lock) */
  int exclusive;               /* of which EXCLUSIVE */
  mw_fd shared_byte;           /* the handle holding this process's byte (mw_mp=1),
                                  MW_FD_INVALID when none */
  mw_fd fixed_byte;            /* with SQLite's lock bytes moved: the handle holding a
                                  byte at their usual place (mw_guard_lock) */
} guard_file;

/* SQLite's lock bytes in the database file (os.h): SHARED_FIRST = PENDING_BYTE + 2,
** SHARED_SIZE bytes. */
#define MW_PENDING_BYTE 0x40000000u
#define MW_SHARED_FIRST (MW_PENDING_BYTE + 2)
#define MW_SHARED_SIZE 510

#define HDR_VERSIONS 18        /* offset of the write and read version bytes */

static size_t inner_offset(void) { return (sizeof(guard_file) + 15) & ~(size_t)15; }

/* Puts value v into the bytes 18 and 19 that fall inside [off, off+n) of buf, where
** they hold `from` (any value when from < 0). */
static void patch_versions(unsigned char *buf, int n, sqlite3_int64 off, int from, int v) {
  for (sqlite3_int64 b = HDR_VERSIONS; b < HDR_VERSIONS + 2; b++) {
    if (b < off || b >= off + n) continue;
    unsigned char *p = buf + (b - off);
    if (from < 0 || *p == from) *p = (unsigned char)v;
  }
}

static int overlaps_versions(int n, sqlite3_int64 off) {
  return off < HDR_VERSIONS + 2 && off + n > HDR_VERSIONS;
}

static int g_close(sqlite3_file *f) {
  guard_file *g = (guard_file *)f;
  int rc = SQLITE_OK;
  if (g->inner->pMethods) rc = g->inner->pMethods->xClose(g->inner); /* drops the lock */
  g->inner->pMethods = 0;
  if (g->shared_byte != MW_FD_INVALID) (void)mw_file_close(g->shared_byte);
  g->shared_byte = MW_FD_INVALID;
  if (g->fixed_byte != MW_FD_INVALID) (void)mw_file_close(g->fixed_byte);
  g->fixed_byte = MW_FD_INVALID;
  return rc;
}

static int g_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
  guard_file *g = (guard_file *)f;
  int rc = g->inner->pMethods->xRead(g->inner, buf, n, off);
  if ((rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ) && overlaps_versions(n, off))
    patch_versions(buf, n, off, MW_HDR_MARK, 2);
  return rc;
}

static int g_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
  guard_file *g = (guard_file *)f;
  if (!g->marking || !overlaps_versions(n, off))
    return g->inner->pMethods->xWrite(g->inner, buf, n, off);
  unsigned char *copy = malloc((size_t)n);
  if (copy == 0) return SQLITE_IOERR_NOMEM;
  memcpy(copy, buf, (size_t)n);
  patch_versions(copy, n, off, -1, MW_HDR_MARK);
  int rc = g->inner->pMethods->xWrite(g->inner, copy, n, off);
  free(copy);
  return rc;
}

static int g_truncate(sqlite3_file *f, sqlite3_int64 size) {
  guard_file *g = (guard_file *)f;
  return g->inner->pMethods->xTruncate(g->inner, size);
}
static int g_sync(sqlite3_file *f, int flags) {
  guard_file *g = (guard_file *)f;
  return g->inner->pMethods->xSync(g->inner, flags);
}
static int g_size(sqlite3_file *f, sqlite3_int64 *pSize) {
  guard_file *g = (guard_file *)f;
  return g->inner->pMethods->xFileSize(g->inner, pSize);
}
/* The lock is this file's business (mw_guard_lock): nobody else moves it. */
static int g_lock(sqlite3_file *f, int level) { return SQLITE_OK; }
static int g_unlock(sqlite3_file *f, int level) { return SQLITE_OK; }
static int g_check(sqlite3_file *f, int *pRes) {
  *pRes = 0;
  return SQLITE_OK;
}
static int g_fcntl(sqlite3_file *f, int op, void *arg) { return SQLITE_NOTFOUND; }
static int g_sector(sqlite3_file *f) {
  guard_file *g = (guard_file *)f;
  return g->inner->pMethods->xSectorSize(g->inner);
}
static int g_devchar(sqlite3_file *f) {
  guard_file *g = (guard_file *)f;
  return g->inner->pMethods->xDeviceCharacteristics(g->inner);
}

/* Version 1: no shared memory, no mapping (the engine never asks for them here). */
static const sqlite3_io_methods guard_methods = {
  1, g_close, g_read, g_write, g_truncate, g_sync, g_size, g_lock, g_unlock, g_check,
  g_fcntl, g_sector, g_devchar, 0, 0, 0, 0, 0, 0
};

int mw_guard_open(sqlite3_vfs *root, const char *zPath, sqlite3_file **pOut) {
  *pOut = 0;
  guard_file *g = calloc(1, inner_offset() + (size_t)root->szOsFile);
  if (g == 0) return SQLITE_NOMEM;
  g->inner = (sqlite3_file *)((char *)g + inner_offset());
  int outFlags = 0;
  /* The unix VFS falls back to read-only when the file cannot be written. */
  int rc = root->xOpen(root, zPath, g->inner, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MAIN_DB,
                       &outFlags);
  if (rc != SQLITE_OK) {
    free(g);
    return rc;
  }
  g->readonly = (outFlags & SQLITE_OPEN_READONLY) != 0;
  g->shared_byte = MW_FD_INVALID;
  g->fixed_byte = MW_FD_INVALID;
  g->base.pMethods = &guard_methods;
  *pOut = &g->base;
  return SQLITE_OK;
}

void mw_guard_free(sqlite3_file *f) {
  if (f == 0) return;
  if (f->pMethods) f->pMethods->xClose(f);
  free(f);
}

int mw_guard_readonly(sqlite3_file *f) { return ((guard_file *)f)->readonly; }

/* SQLite's lock bytes sit where sqlite3_test_control(SQLITE_TESTCTRL_PENDING_BYTE) put
** them, for the whole process; SQLite's test suite moves them in its own process only, so
** a child process it starts locks elsewhere. The root VFS's locks then keep nothing out:
** a process whose bytes moved also holds a byte at their usual place (an engine or stock
** process there conflicts with it), so that two engine processes never share a file
** unawares. (A call with 0 reads the place without moving it.) */
static int lock_bytes_moved(void) {
  return (unsigned)sqlite3_test_control(SQLITE_TESTCTRL_PENDING_BYTE, 0) != MW_PENDING_BYTE;
}

int mw_guard_lock(sqlite3_file *f, const char *zPath, const mw_file_id *id) {
  guard_file *g = (guard_file *)f;
  sqlite3_file *in = g->inner;
  if (g->locked) return SQLITE_OK;
  int rc = in->pMethods->xLock(in, SQLITE_LOCK_SHARED);
  if (rc == SQLITE_OK && !g->readonly) rc = in->pMethods->xLock(in, SQLITE_LOCK_EXCLUSIVE);
  if (rc == SQLITE_OK && !g->readonly && g->fixed_byte == MW_FD_INVALID && lock_bytes_moved()) {
    rc = mw_file_hold_byte(zPath, id, MW_SHARED_FIRST, 1, &g->fixed_byte);
    if (rc == SQLITE_NOTFOUND) rc = SQLITE_OK; /* no such locks here: as before */
  }
  if (rc != SQLITE_OK) {
    /* A failed EXCLUSIVE may leave PENDING held: back to nothing. */
    in->pMethods->xUnlock(in, SQLITE_LOCK_NONE);
    return rc;
  }
  g->locked = 1;
  g->exclusive = !g->readonly;
  return SQLITE_OK;
}

int mw_guard_unlock(sqlite3_file *f) {
  guard_file *g = (guard_file *)f;
  if (!g->locked) return SQLITE_OK;
  g->locked = 0;
  g->exclusive = 0;
  if (g->fixed_byte != MW_FD_INVALID) {
    (void)mw_file_close(g->fixed_byte);
    g->fixed_byte = MW_FD_INVALID;
  }
  if (g->shared_byte != MW_FD_INVALID) {
    int rc = mw_file_close(g->shared_byte);
    g->shared_byte = MW_FD_INVALID;
    return rc;
  }
  return g->inner->pMethods->xUnlock(g->inner, SQLITE_LOCK_NONE);
}

int mw_guard_share(sqlite3_file *f, const char *zPath, const mw_file_id *id) {
  guard_file *g = (guard_file *)f;
  sqlite3_file *in = g->inner;
  if (g->shared_byte != MW_FD_INVALID) return SQLITE_OK;
  /* A byte lock of its own handle conflicts with this process's SQLite locks too:
  ** those go first (a stock connection that takes the file in between makes the
  ** byte lock fail: this open is then refused, as it would be a moment later). */
  if (g->locked) {
    int rc = in->pMethods->xUnlock(in, SQLITE_LOCK_NONE);
    if (rc != SQLITE_OK) return rc;
    g->locked = 0;
    g->exclusive = 0;
  }
  int rc = mw_file_hold_byte(zPath, id, MW_SHARED_FIRST, MW_SHARED_SIZE, &g->shared_byte);
  if (rc == SQLITE_NOTFOUND) rc = in->pMethods->xLock(in, SQLITE_LOCK_SHARED);
  if (rc == SQLITE_OK) g->locked = 1;
  return rc;
}

int mw_guard_marked(sqlite3_file *f, int *pMarked) {
  guard_file *g = (guard_file *)f;
  unsigned char v[2];
  int rc = g->inner->pMethods->xRead(g->inner, v, 2, HDR_VERSIONS);
  if (rc == SQLITE_IOERR_SHORT_READ) {
    *pMarked = 0;
    return SQLITE_OK;
  }
  *pMarked = rc == SQLITE_OK && v[0] == MW_HDR_MARK && v[1] == MW_HDR_MARK;
  return rc;
}

void mw_guard_keep_mark(sqlite3_file *f) { ((guard_file *)f)->marking = 1; }

int mw_guard_set_mark(sqlite3_file *f, int on) {
  guard_file *g = (guard_file *)f;
  if (g->readonly) return SQLITE_READONLY;
  unsigned char v[2];
  v[0] = v[1] = on ? MW_HDR_MARK : 2;
  int rc = g->inner->pMethods->xWrite(g->inner, v, 2, HDR_VERSIONS);
  /* Durable before the first commit can be (on), or before the log goes (off). */
  if (rc == SQLITE_OK) rc = g->inner->pMethods->xSync(g->inner, SQLITE_SYNC_NORMAL);
  if (rc == SQLITE_OK) g->marking = on;
  return rc;
}

int mw_guard_unmark_open(sqlite3_file *f) {
  guard_file *g = (guard_file *)f;
  if (g->readonly) return SQLITE_READONLY;
  static const unsigned char wal[2] = { 2, 2 };
  int rc = g->inner->pMethods->xWrite(g->inner, wal, 2, HDR_VERSIONS);
  if (rc == SQLITE_OK) rc = g->inner->pMethods->xSync(g->inner, SQLITE_SYNC_NORMAL);
  return rc;
}

int mw_guard_keeps_out(sqlite3_file *f) {
  guard_file *g = (guard_file *)f;
  return g->locked && (g->exclusive || g->shared_byte != MW_FD_INVALID);
}
