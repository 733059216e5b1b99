/* A compaction makes the database file durable before it cuts the log (issue 8,
** "make the tests honest"; docs/design/compact.md).
**
** The compactor writes pages into the database file, syncs it, and only then moves
** the log's base (mw_log_compacted: the new log replaces the old one by a rename).
** Cutting the log first would leave, after a power loss, a log without the records
** and a file without their pages. This program watches the order directly: it
** defines libc's pwrite/pwrite64/fdatasync/fsync (Linux; every call goes on to the
** kernel with syscall(2)) to see writes and syncs of the database file, and the
** platform layer's fault hook to see the log's rename, and the truncation by which
** the last close empties the log in place (mw_log_emptied: no new file for a log it
** deletes next). At every such cut the database file must have no write that was not
** synced since; the last close must cut by emptying. */
#include "test_engine_internals.h"
#include "compact/compact.h"

#if !defined(__linux__)
int main(void) {
  printf("test_engine_compact_sync: needs Linux (/proc/self/fd, syscall): skipped\n");
  return 0;
}
#else
#include <sys/syscall.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const char *db_suffix = "/cs.db";
static int db_dirty;      /* a write to the database file not synced since */
static int db_writes, db_syncs, renames, empties, violations;
static int watching_empties; /* set once the log exists: its creation truncates it too */

/* 1 when fd's file path ends with suffix. */
static int fd_path_ends(int fd, const char *suffix) {
  char link[64], target[512];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = 0;
  size_t len = (size_t)n, sl = strlen(suffix);
  return len >= sl && strcmp(target + len - sl, suffix) == 0;
}
static int is_db(int fd) { return fd_path_ends(fd, db_suffix); }
static int is_log(int fd) { return fd_path_ends(fd, "/cs.db-mw"); }

static void note_write(int fd) {
  if (!is_db(fd)) return;
  pthread_mutex_lock(&mu);
  db_dirty = 1;
  db_writes++;
  pthread_mutex_unlock(&mu);
}

static int note_sync(int fd, long r) {
  if (r == 0 && is_db(fd)) {
    pthread_mutex_lock(&mu);
    db_dirty = 0;
    db_syncs++;
    pthread_mutex_unlock(&mu);
  }
  return (int)r;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  note_write(fd);
  return (ssize_t)syscall(SYS_pwrite64, fd, buf, n, off);
}
#if defined(__GLIBC__) /* musl has no separate 64-bit names (and no off64_t) */
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
  note_write(fd);
  return (ssize_t)syscall(SYS_pwrite64, fd, buf, n, off);
}
#endif
int fdatasync(int fd) { return note_sync(fd, syscall(SYS_fdatasync, fd)); }
int fsync(int fd) { return note_sync(fd, syscall(SYS_fsync, fd)); }

static int hook(int op, mw_fd fd) {
  /* Only the log's switch after a compaction renames; only the last close truncates
  ** the log once it exists. */
  int empty = op == MW_OP_TRUNCATE && __atomic_load_n(&watching_empties, __ATOMIC_SEQ_CST) &&
              is_log(fd);
  if (op == MW_OP_RENAME || empty) {
    pthread_mutex_lock(&mu);
    if (empty) empties++;
    else renames++;
    if (db_dirty) violations++;
    pthread_mutex_unlock(&mu);
  }
  return 0;
}

int main(void) {
  const char *path = tu_db_path("compact-sync", "cs.db");
  __atomic_store_n(&mw_fault_hook, hook, __ATOMIC_SEQ_CST);
  sqlite3 *w = tu_open(path, "mw_log_max_mb=1");
  __atomic_store_n(&watching_empties, 1, __ATOMIC_SEQ_CST);
  mw_db *db = tu_db_of(w);
  mw_compactor_stop(db); /* compactions run here, one at a time (the engine's rule) */
  tu_exec(w, "CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)");
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < 40; i++) tu_exec(w, "INSERT INTO t(pad) VALUES(randomblob(3000))");
    tu_exec(w, "UPDATE t SET pad = randomblob(3000) WHERE id % 7 = 0");
    CHECK_RC(mw_compact_now(db, 0), SQLITE_OK); /* writes, syncs, cuts the log */
  }
  /* Commits the last close compacts (with nothing left to compact it leaves the log as
  ** the last compaction did: its base already the last epoch). */
  for (int i = 0; i < 5; i++) tu_exec(w, "INSERT INTO t(pad) VALUES(randomblob(3000))");
  CHECK(tu_integrity_ok(w));
  CHECK_RC(sqlite3_close(w), SQLITE_OK); /* the last close compacts once more */
  __atomic_store_n(&mw_fault_hook, (mw_fault_hook_fn)0, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&mu);
  int r = renames, e = empties, v = violations, nw = db_writes, ns = db_syncs;
  pthread_mutex_unlock(&mu);
  printf("test_engine_compact_sync: %d log cuts by a switch, %d by emptying it in place, %d "
         "writes and %d syncs of the database file\n", r, e, nw, ns);
  CHECK(nw > 0 && ns > 0); /* the shim saw the file */
  CHECK(r >= 4);
  CHECK(e == 1); /* the last close */
  if (v) {
    fprintf(stderr, "test_engine_compact_sync: %d of %d log cuts happened while the database "
                    "file had writes that were not synced\n", v, r + e);
    exit(1);
  }
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READONLY);
  CHECK(tu_int(s, "SELECT count(*) FROM t") == 165);
  CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_compact_sync: ok\n");
  return 0;
}
#endif
