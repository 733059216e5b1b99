/* Differences from stock SQLite that SQLite's own test suite found, each checked as
** a user would see it (docs/sqlite-tests.md):
**  - auto_vacuum=OFF (and any value SQLite reads as NONE) is accepted; FULL and
**    INCREMENTAL on a new, empty database take effect (the engine writes it again,
**    empty, in that mode) and read back at once; on a database with content they are
**    ignored as in stock SQLite, and VACUUM applies them;
**  - PRAGMA mmap_size reads back 0 (the engine never maps the file), not -1;
**  - SQLITE_FCNTL_VFSNAME names the engine: "multiwriter/unix";
**  - SQLITE_FCNTL_LOCKSTATE (PRAGMA lock_status) reads the level SQLite holds on the
**    main file, as a stock connection in WAL mode reads it, not the engine's
**    unlocked handle's;
**  - PRAGMA page_size with another size on a new, empty database takes effect (the
**    engine created the file at open, so SQLite alone would ignore it silently): it
**    reads back at once, other connections see it at their next transaction, the
**    file has it after close (a stock connection reads it); not while another
**    connection is in a transaction; once the database has a table, a new size is
**    ignored as stock SQLite ignores it;
**  - compaction's memory is not SQLite's (sqlite3_memory_used, heap limits);
**  - a crash inside that reformat leaves an empty database that opens;
**  - the engine's VFS passes xSetSystemCall/xGetSystemCall/xNextSystemCall to its
**    root VFS (SQLite's test_syscall.c overrides system calls that way);
**  - a file that is not a database opens, and fails at the first query with
**    SQLITE_NOTADB, as with stock SQLite (it was refused at open); one whose write
**    version makes it read-only to SQLite opens read-only, as with stock SQLite.
** And the engine's own file control MW_FCNTL_COMMIT_SYNCS follows PRAGMA synchronous
** (a binding commits off its event loop only what waits for a sync). */
#include "test_engine_util.h"

#include <signal.h>
#include <sys/wait.h>

/* A crash in the middle of the reformat (a child aborted at each of its crash
** points) leaves the empty database of either page size, which opens, takes a table
** and reads back through stock SQLite. */
static void reformat_crash(const char *self, const char *dir, const char *point) {
  char path[400];
  snprintf(path, sizeof path, "%s/crash-%s.db", dir, point);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    setenv("MW_CRASH_AT", point, 1);
    const char *emu = getenv("MW_TEST_EMULATOR");
    if (emu && *emu) execlp(emu, emu, self, "reformat-child", path, (char *)0);
    else execl(self, self, "reformat-child", path, (char *)0);
    _exit(4);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
  sqlite3 *db = tu_open(path, "");
  int64_t ps = tu_int(db, "PRAGMA page_size");
  CHECK(ps == 4096 || ps == 1024);
  CHECK(tu_int(db, "SELECT count(*) FROM sqlite_schema") == 0);
  CHECK(tu_integrity_ok(db));
  tu_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(randomblob(3000))");
  CHECK(tu_int(db, "PRAGMA page_size") == ps);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  sqlite3 *st = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(st));
  CHECK(tu_int(st, "PRAGMA page_size") == ps && tu_int(st, "SELECT count(*) FROM t") == 1);
  CHECK_RC(sqlite3_close(st), SQLITE_OK);
  printf("test_engine_pragmas: crash at %s: page size %lld after the reopen\n", point, (long long)ps);
}

/* The root VFS's system calls through the engine's VFS (test_syscall.c needs them). */
static int (*real_open)(const char *, int, int);
static int opens;
static int counting_open(const char *z, int f, int m) {
  opens++;
  return real_open(z, f, m);
}

static void syscalls(const char *dir) {
  sqlite3_vfs *mw = sqlite3_vfs_find("multiwriter"), *ux = sqlite3_vfs_find("unix");
  CHECK(mw != 0 && ux != 0 && mw->iVersion >= 3 && mw->xGetSystemCall && mw->xSetSystemCall &&
        mw->xNextSystemCall);
  CHECK(mw->xGetSystemCall(mw, "open") == ux->xGetSystemCall(ux, "open"));
  CHECK(strcmp(mw->xNextSystemCall(mw, 0), ux->xNextSystemCall(ux, 0)) == 0);
  real_open = (int (*)(const char *, int, int))mw->xGetSystemCall(mw, "open");
  CHECK_RC(mw->xSetSystemCall(mw, "open", (sqlite3_syscall_ptr)counting_open), SQLITE_OK);
  char path[400];
  snprintf(path, sizeof path, "%s/sys.db", dir);
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE s(x)");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  CHECK(opens > 0);
  CHECK_RC(mw->xSetSystemCall(mw, "open", 0), SQLITE_OK); /* the default again */
  CHECK(mw->xGetSystemCall(mw, "open") == (sqlite3_syscall_ptr)real_open);
  CHECK(mw->xSetSystemCall(mw, "no_such_call", 0) == SQLITE_NOTFOUND);
}

/* A file that is not a database opens as with stock SQLite: sqlite3_open succeeds,
** the first query fails with SQLITE_NOTADB, the file is left as it was; once
** replaced by nothing, the same name opens through the engine. */
static void not_a_database(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/text.db", dir);
  char text[600];
  memset(text, 'x', sizeof text);
  FILE *f = fopen(path, "wb");
  CHECK(f != 0 && fwrite(text, 1, sizeof text, f) == sizeof text && fclose(f) == 0);
  sqlite3 *db = tu_open(path, "");
  CHECK(tu_try(db, "SELECT count(*) FROM sqlite_schema") == SQLITE_NOTADB);
  CHECK(strstr(sqlite3_errmsg(db), "file is not a database") != 0);
  CHECK(tu_try(db, "CREATE TABLE t(x)") == SQLITE_NOTADB);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  char back[700];
  f = fopen(path, "rb");
  CHECK(f != 0);
  size_t n = fread(back, 1, sizeof back, f);
  fclose(f);
  CHECK(n == sizeof text && memcmp(back, text, sizeof text) == 0);
  CHECK(unlink(path) == 0);
  db = tu_open(path, "");
  CHECK(tu_stat(db, MW_STAT_ENGINE) == 1);
  tu_exec(db, "CREATE TABLE t(x)");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

/* A database whose header's write version is 3 is read-only to SQLite: the engine
** cannot convert it, and opens it as stock SQLite does (reads work, writes fail with
** SQLITE_READONLY) instead of refusing the open. */
static void read_only_version(const char *dir, int wal) {
  char path[400];
  snprintf(path, sizeof path, "%s/ro%d.db", dir, wal);
  sqlite3 *st = tu_open_stock(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (wal) tu_exec(st, "PRAGMA journal_mode=WAL"); /* read version 2 in the header */
  tu_exec(st, "CREATE TABLE t(x); INSERT INTO t VALUES(7)");
  CHECK_RC(sqlite3_close(st), SQLITE_OK);
  FILE *f = fopen(path, "r+b");
  CHECK(f != 0 && fseek(f, 18, SEEK_SET) == 0 && fputc(3, f) == 3 && fclose(f) == 0);
  sqlite3 *db = tu_open(path, "");
  CHECK(tu_int(db, "SELECT x FROM t") == 7);
  CHECK(sqlite3_db_readonly(db, "main") == 1);
  CHECK(tu_try(db, "INSERT INTO t VALUES(8)") == SQLITE_READONLY);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  f = fopen(path, "rb");
  CHECK(f != 0 && fseek(f, 18, SEEK_SET) == 0 && fgetc(f) == 3);
  fclose(f);
}

/* The whole file, for comparisons (the databases here are a few pages). */
static size_t file_bytes(const char *path, unsigned char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  CHECK(f != 0);
  size_t n = fread(buf, 1, cap, f);
  CHECK(n < cap);
  fclose(f);
  return n;
}

/* A read-only connection (mode=ro, SQLITE_OPEN_READONLY) changes no file. One that is
** not in WAL mode is read as stock SQLite reads it: not converted (before, the first
** read-only open through the engine switched the file to WAL mode for good). One in
** WAL mode is read through the engine, and its close leaves every byte as it was. */
static void read_only_connection(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/roconn.db", dir);
  sqlite3 *st = tu_open_stock(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  tu_exec(st, "CREATE TABLE t(x); INSERT INTO t VALUES(1),(2),(3)");
  CHECK_RC(sqlite3_close(st), SQLITE_OK);
  static unsigned char before[1 << 16], after[1 << 16];
  for (int wal = 0; wal < 2; wal++) {
    size_t n = file_bytes(path, before, sizeof before);
    sqlite3 *db = tu_open(path, "mode=ro");
    CHECK(tu_int(db, "SELECT count(*) FROM t") == 3);
    CHECK(sqlite3_db_readonly(db, "main") == 1);
    CHECK(tu_try(db, "INSERT INTO t VALUES(4)") == SQLITE_READONLY);
    int64_t s[MW_STAT_COUNT];
    int engine = mw_stats(db, 0, s, MW_STAT_COUNT) == SQLITE_OK && s[MW_STAT_ENGINE] == 1;
    CHECK(engine == wal);
    CHECK_RC(sqlite3_close(db), SQLITE_OK);
    CHECK(file_bytes(path, after, sizeof after) == n && memcmp(before, after, n) == 0);
    st = tu_open_stock(path, SQLITE_OPEN_READWRITE);
    CHECK(tu_int(st, "SELECT count(*) FROM t") == 3);
    sqlite3_stmt *q = 0;
    CHECK_RC(sqlite3_prepare_v2(st, "PRAGMA journal_mode", -1, &q, 0), SQLITE_OK);
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(q, 0), wal ? "wal" : "delete") == 0);
    sqlite3_finalize(q);
    CHECK_RC(sqlite3_close(st), SQLITE_OK);
    /* A read-write open through the engine converts it, for the second round. */
    db = tu_open(path, "");
    CHECK(tu_int(db, "SELECT count(*) FROM t") == 3);
    CHECK_RC(sqlite3_close(db), SQLITE_OK);
  }
}

/* mw_mp=1: an empty database is not written again under other processes: page_size
** and auto_vacuum on it fail with a message naming mw_mp=1, and change nothing. */
static void reformat_refused_mp(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/mp.db", dir);
  sqlite3 *c = tu_open(path, "mw_mp=1");
  int ps = (int)tu_int(c, "PRAGMA page_size");
  CHECK(tu_try(c, "PRAGMA page_size=8192") == SQLITE_ERROR);
  CHECK(strstr(sqlite3_errmsg(c), "mw_mp=1") != 0);
  CHECK(tu_try(c, "PRAGMA auto_vacuum=FULL") == SQLITE_ERROR);
  CHECK(tu_int(c, "PRAGMA page_size") == ps);
  CHECK(tu_int(c, "PRAGMA auto_vacuum") == 0);
  tu_exec(c, "CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  CHECK_RC(sqlite3_close(c), SQLITE_OK);
}

/* The main file's lock state at each step of a connection's life, through the engine
** and through stock SQLite in WAL mode (which keeps SHARED from its first read to its
** close, also across write transactions). */
static int lock_state(sqlite3 *db) {
  int level = -1;
  CHECK_RC(sqlite3_file_control(db, "main", SQLITE_FCNTL_LOCKSTATE, &level), SQLITE_OK);
  return level;
}

static void lock_states(const char *dir) {
  char mwp[512], stp[512];
  snprintf(mwp, sizeof mwp, "%s/lock-mw.db", dir);
  snprintf(stp, sizeof stp, "%s/lock-stock.db", dir);
  sqlite3 *st = tu_open_stock(stp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  tu_exec(st, "PRAGMA journal_mode=WAL");
  sqlite3 *mw = tu_open(mwp, "");
  const char *steps[] = { "CREATE TABLE t(x)", "BEGIN", "INSERT INTO t VALUES(1)",
                          "SELECT count(*) FROM t", "COMMIT", "SELECT count(*) FROM t" };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    tu_exec(st, steps[i]);
    tu_exec(mw, steps[i]);
    int want = lock_state(st), got = lock_state(mw);
    if (got != want || want != SQLITE_LOCK_SHARED) {
      fprintf(stderr, "lock state after %s: engine %d, stock %d\n", steps[i], got, want);
      exit(1);
    }
  }
  CHECK_RC(sqlite3_close(mw), SQLITE_OK);
  CHECK_RC(sqlite3_close(st), SQLITE_OK);
}

/* MW_FCNTL_COMMIT_SYNCS: 1 from FULL up, by name or number, 0 below; per connection. */
static int commit_syncs(sqlite3 *db) {
  int v = -1;
  CHECK_RC(sqlite3_file_control(db, "main", MW_FCNTL_COMMIT_SYNCS, &v), SQLITE_OK);
  return v;
}

static void commit_syncs_follow(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/syncs.db", dir);
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  CHECK(commit_syncs(a) == 1); /* SQLite's default in WAL mode: FULL */
  const char *set[] = { "NORMAL", "FULL", "off", "EXTRA", "1", "2", "0", "3", "normal" };
  const int want[] = { 0, 1, 0, 1, 0, 1, 0, 1, 0 };
  for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", set[i]);
    tu_exec(a, sql);
    CHECK(commit_syncs(a) == want[i]);
    CHECK(commit_syncs(b) == 1);
  }
  CHECK_RC(sqlite3_file_control(a, "main", MW_FCNTL_COMMIT_SYNCS, 0), SQLITE_MISUSE);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "reformat-child") == 0) {
    CHECK_RC(sqlite3_initialize(), SQLITE_OK);
    sqlite3 *c = tu_open(argv[2], "");
    tu_exec(c, "PRAGMA page_size=1024"); /* aborts at MW_CRASH_AT */
    return 0;
  }
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 1), SQLITE_OK); /* before initialize */
  const char *path = tu_db_path("pragmas", "p.db");
  sqlite3 *db = tu_open(path, "");
  CHECK(tu_stat(db, MW_STAT_ENGINE) == 1);

  /* auto_vacuum: SQLite's getAutoVacuum reads these as NONE. */
  const char *none[] = { "OFF", "off", "NONE", "0", "false", "no" };
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA auto_vacuum=%s", none[i]);
    tu_exec(db, sql);
    CHECK(tu_int(db, "PRAGMA auto_vacuum") == 0);
  }
  /* FULL / INCREMENTAL on the new database: read back at once, also by name. */
  const char *modes[] = { "FULL", "incremental", "1", "2", "NONE", "full" };
  const int want[] = { 1, 2, 1, 2, 0, 1 };
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA auto_vacuum=%s", modes[i]);
    tu_exec(db, sql);
    CHECK(tu_int(db, "PRAGMA auto_vacuum") == want[i]);
  }
  /* mmap_size: the limit in force, 0 (set or not). */
  CHECK(tu_int(db, "PRAGMA mmap_size") == 0);
  CHECK(tu_int(db, "PRAGMA mmap_size=1048576") == 0);
  CHECK(tu_int(db, "PRAGMA mmap_size") == 0);

  /* The VFS name of the main file names the engine over its root VFS. */
  char *name = 0;
  CHECK_RC(sqlite3_file_control(db, "main", SQLITE_FCNTL_VFSNAME, &name), SQLITE_OK);
  CHECK(name != 0);
  if (strcmp(name, "multiwriter/unix") != 0) {
    fprintf(stderr, "VFSNAME: '%s'\n", name);
    exit(1);
  }
  sqlite3_free(name);

  /* page_size on the new database (the vendored build's default is 4096): takes
  ** effect at once; a second connection, open before, sees it at its next
  ** transaction; one in a transaction keeps the database as it is. */
  sqlite3 *db2 = tu_open(path, "");
  CHECK(tu_int(db2, "PRAGMA page_size") == 4096);
  CHECK(tu_int(db, "PRAGMA page_size") == 4096);
  tu_exec(db, "PRAGMA page_size=8192");
  CHECK(tu_int(db, "PRAGMA page_size") == 8192);
  tu_exec(db, "PRAGMA page_size=1024");
  CHECK(tu_int(db, "PRAGMA page_size") == 1024);
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == 1); /* kept */
  tu_exec(db, "PRAGMA page_size=1000"); /* not a page size: ignored, as stock */
  CHECK(tu_int(db, "PRAGMA page_size") == 1024);
  CHECK(tu_int(db2, "SELECT count(*) FROM sqlite_schema") == 0);
  CHECK(tu_int(db2, "PRAGMA page_size") == 1024);
  tu_exec(db2, "BEGIN; SELECT count(*) FROM sqlite_schema");
  tu_exec(db, "PRAGMA page_size=2048"); /* db2 reads: not now */
  CHECK(tu_int(db, "PRAGMA page_size") == 1024);
  tu_exec(db2, "COMMIT");

  /* Still a working database, of that size. */
  tu_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
  tu_exec(db2, "INSERT INTO t VALUES(randomblob(5000))"); /* overflow pages of 1024 */
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 2);
  CHECK(tu_int(db2, "PRAGMA page_size") == 1024);
  CHECK(tu_integrity_ok(db));
  tu_exec(db, "PRAGMA page_size=8192"); /* not empty any more: ignored, as stock */
  CHECK(tu_int(db, "PRAGMA page_size") == 1024);
  tu_exec(db, "PRAGMA auto_vacuum=NONE"); /* ignored until a VACUUM, as stock */
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == 1);
  CHECK_RC(sqlite3_close(db2), SQLITE_OK);
  tu_exec(db, "VACUUM");
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == 0);
  CHECK(tu_int(db, "PRAGMA page_size") == 1024);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);

  /* The file has it: a stock connection reads the page size and the rows. */
  sqlite3 *st = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_int(st, "PRAGMA page_size") == 1024);
  CHECK(tu_int(st, "PRAGMA auto_vacuum") == 0);
  CHECK(tu_int(st, "SELECT count(*) FROM t") == 2);
  CHECK(tu_integrity_ok(st));
  CHECK_RC(sqlite3_close(st), SQLITE_OK);

  /* A new database opened again keeps the size chosen before any table. */
  const char *p2 = tu_file;
  snprintf(tu_file, sizeof tu_file, "%s/q.db", tu_dir);
  db = tu_open(p2, "");
  tu_exec(db, "PRAGMA auto_vacuum=INCREMENTAL; PRAGMA page_size=65536");
  CHECK(tu_int(db, "PRAGMA page_size") == 65536);
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == 2);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  db = tu_open(p2, "");
  CHECK(tu_int(db, "PRAGMA page_size") == 65536);
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == 2);
  tu_exec(db, "CREATE TABLE u(x); INSERT INTO u VALUES(randomblob(100000))");
  tu_exec(db, "DELETE FROM u; PRAGMA incremental_vacuum");
  CHECK(tu_int(db, "PRAGMA freelist_count") == 0);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);

  /* The compactor's copies of the pages it writes are the engine's memory, not
  ** SQLite's: the last close compacts ~1000 pages here, and SQLite's memory
  ** high-water mark must not move by their size (it did while they came from
  ** sqlite3_malloc: sqlite3_memory_used moved with no statement running, and a
  ** hard heap limit could fail a compaction; SQLite's vacuummem.test saw it). */
  snprintf(tu_file, sizeof tu_file, "%s/m.db", tu_dir);
  db = tu_open(tu_file, "");
  tu_exec(db, "CREATE TABLE m(x); WITH r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<4000)"
              " INSERT INTO m SELECT randomblob(900) FROM r");
  sqlite3_int64 cur = 0, hi = 0;
  CHECK_RC(sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur, &hi, 1), SQLITE_OK);
  CHECK(cur > 0); /* memory statistics on */
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  sqlite3_int64 cur2 = 0, hi2 = 0;
  CHECK_RC(sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur2, &hi2, 0), SQLITE_OK);
  if (hi2 > cur + (1 << 20)) {
    fprintf(stderr, "memory high-water rose by %lld bytes at the last close\n", (long long)(hi2 - cur));
    exit(1);
  }
  syscalls(tu_dir);
  lock_states(tu_dir);
  commit_syncs_follow(tu_dir);
  not_a_database(tu_dir);
  read_only_version(tu_dir, 0);
  read_only_version(tu_dir, 1);
  read_only_connection(tu_dir);
  reformat_crash(argv[0], tu_dir, "reformat_after_log");
  reformat_crash(argv[0], tu_dir, "reformat_after_write");
#ifndef _WIN32
  reformat_refused_mp(tu_dir);
#endif
  tu_rmdir();
  printf("test_engine_pragmas: ok\n");
  return 0;
}
