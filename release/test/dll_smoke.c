/*
** release/test/dll_smoke.c: loads a released shared library and extension at run
** time, as Bun, Deno and the sqlite3 shell do, and uses them: opens a database
** through the "multiwriter" VFS (registered when the library initialises), writes
** and reads it, calls mw_version() in SQL and mw_stats(), checks the SQLite source
** id, loads the extension into the library's SQLite, and checks that a transaction
** whose thread ended is released (the thread tokens of owner.c: a TLS destructor on
** POSIX, a fiber-local slot's callback on Windows). Built for Windows and run
** under Wine by release/check.mjs; it builds and runs on POSIX hosts too.
**
**   dll_smoke <shared library> <extension> <folder for the database>
*/
#include "sqlite3.h"
#include "multiwriter.h" /* MW_STAT_* */

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef _WIN32
#  define WIN32_LEAN_AND_MEAN
#  include <windows.h>
typedef HMODULE lib_t;
static lib_t lib_open(const char *p) { return LoadLibraryA(p); }
static void *lib_sym(lib_t l, const char *n) { return (void *)GetProcAddress(l, n); }
static void sleep_ms(int ms) { Sleep((DWORD)ms); }
typedef HANDLE thread_t;
static int thread_run(thread_t *t, void *(*fn)(void *)) {
  *t = CreateThread(0, 0, (LPTHREAD_START_ROUTINE)(void *)fn, 0, 0, 0);
  return *t != 0;
}
static void thread_join(thread_t t) {
  WaitForSingleObject(t, INFINITE);
  CloseHandle(t);
}
#else
#  include <dlfcn.h>
#  include <pthread.h>
#  include <unistd.h>
typedef void *lib_t;
static lib_t lib_open(const char *p) { return dlopen(p, RTLD_NOW | RTLD_LOCAL); }
static void *lib_sym(lib_t l, const char *n) { return dlsym(l, n); }
static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }
typedef pthread_t thread_t;
static int thread_run(thread_t *t, void *(*fn)(void *)) { return pthread_create(t, 0, fn, 0) == 0; }
static void thread_join(thread_t t) { pthread_join(t, 0); }
#endif

#include "counting_check.h"

/* The functions used, looked up by name as an FFI would. */
static struct {
  int (*open_v2)(const char *, sqlite3 **, int, const char *);
  int (*close_v2)(sqlite3 *);
  int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
  const char *(*errmsg)(sqlite3 *);
  const char *(*sourceid)(void);
  int (*enable_load_extension)(sqlite3 *, int);
  int (*load_extension)(sqlite3 *, const char *, const char *, char **);
  void (*free)(void *);
  const char *(*mw_version)(void);
  int (*mw_stats)(sqlite3 *, const char *, int64_t *, int);
} f;

static char got[256];
static int keep_first(void *arg, int n, char **vals, char **names) {
  (void)arg;
  (void)names;
  if (n > 0 && vals[0]) snprintf(got, sizeof got, "%s", vals[0]);
  return 0;
}

static int sql(sqlite3 *db, const char *q) {
  char *err = 0;
  got[0] = 0;
  int rc = f.exec(db, q, keep_first, 0, &err);
  if (rc != SQLITE_OK) fprintf(stderr, "%s: %s\n", q, err ? err : "?");
  if (err) f.free(err);
  return rc;
}

/* A connection whose read transaction is begun by a thread that then ends. */
static sqlite3 *orphan_db;
static int orphan_begun;
static void *orphan_thread(void *arg) {
  (void)arg;
  orphan_begun = sql(orphan_db, "begin; select count(*) from t") == SQLITE_OK; /* not u */
  return 0;
}

/* The transaction of a thread that ended is released by the compactor (which runs
** once the log passes mw_log_max_mb: 1 MiB here), and compaction passes it; the
** connection's next read of the file in it (a table it never read, so no page of it
** is in SQLite's cache) fails with SQLITE_IOERR until it is rolled back. The
** connection is not used before: a live thread that uses it joins the transaction. */
static void check_thread_end(const char *dir) {
  char uri[1024];
  snprintf(uri, sizeof uri, "file:%s/dll-thread-end.db?vfs=multiwriter&mw_log_max_mb=1", dir);
  sqlite3 *w = 0;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
  CHECK(f.open_v2(uri, &w, flags, 0) == SQLITE_OK);
  CHECK(f.open_v2(uri, &orphan_db, flags, 0) == SQLITE_OK);
  if (failures) return;
  CHECK(sql(w, "drop table if exists t; drop table if exists u; create table t(x); "
               "create table u(x); insert into u values (1)") == SQLITE_OK);
  thread_t t;
  CHECK(thread_run(&t, orphan_thread));
  thread_join(t);
  CHECK(orphan_begun);
  int64_t st[MW_STAT_COUNT_V1], compactions0 = -1;
  int passed = 0;
  for (int i = 0; i < 1000 && !passed; i++) {
    CHECK(sql(w, "insert into t values (randomblob(50000))") == SQLITE_OK);
    CHECK(f.mw_stats(w, "main", st, MW_STAT_COUNT_V1) == SQLITE_OK);
    if (compactions0 < 0) compactions0 = st[MW_STAT_COMPACTIONS];
    passed = st[MW_STAT_COMPACTIONS] > compactions0 + 1 && st[MW_STAT_PINNED_VERSIONS] < 50;
    sleep_ms(5);
  }
  if (!passed)
    fprintf(stderr, "the ended thread's transaction still pins: %lld versions, %lld compactions\n",
            (long long)st[MW_STAT_PINNED_VERSIONS], (long long)st[MW_STAT_COMPACTIONS]);
  CHECK(passed);
  char *err = 0;
  int rc = f.exec(orphan_db, "select count(*) from u", 0, 0, &err);
  if (err) f.free(err);
  CHECK((rc & 0xff) == SQLITE_IOERR);
  /* SQLite rolled back on that error, or else ROLLBACK does; then it works again. */
  (void)f.exec(orphan_db, "rollback", 0, 0, 0);
  CHECK(sql(orphan_db, "select count(*) from u") == SQLITE_OK && strcmp(got, "1") == 0);
  CHECK(f.close_v2(orphan_db) == SQLITE_OK);
  CHECK(f.close_v2(w) == SQLITE_OK);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: dll_smoke <shared library> <extension> <folder>\n");
    return 2;
  }
  lib_t lib = lib_open(argv[1]);
  CHECK(lib != 0);
  if (!lib) return 1;
#define LOOKUP(field, name) CHECK((*(void **)&f.field = lib_sym(lib, name)) != 0)
  LOOKUP(open_v2, "sqlite3_open_v2");
  LOOKUP(close_v2, "sqlite3_close_v2");
  LOOKUP(exec, "sqlite3_exec");
  LOOKUP(errmsg, "sqlite3_errmsg");
  LOOKUP(sourceid, "sqlite3_sourceid");
  LOOKUP(enable_load_extension, "sqlite3_enable_load_extension");
  LOOKUP(load_extension, "sqlite3_load_extension");
  LOOKUP(free, "sqlite3_free");
  LOOKUP(mw_version, "mw_version");
  LOOKUP(mw_stats, "mw_stats");
  if (failures) return 1;

  /* The library is the vendored SQLite. */
  CHECK(strcmp(f.sourceid(), SQLITE_SOURCE_ID) == 0);

  char uri[1024];
  snprintf(uri, sizeof uri, "file:%s/dll-smoke.db?vfs=multiwriter", argv[3]);
  sqlite3 *db = 0;
  int rc = f.open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0);
  CHECK(rc == SQLITE_OK);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "open %s: %s\n", uri, db ? f.errmsg(db) : "?");
    return 1;
  }
  CHECK(sql(db, "drop table if exists t; create table t(x); insert into t values (1), (2), (39)") == SQLITE_OK);
  CHECK(sql(db, "select sum(x) from t") == SQLITE_OK && strcmp(got, "42") == 0);
  /* The SQL function comes with the library (auto-extension) ... */
  CHECK(sql(db, "select mw_version()") == SQLITE_OK && strcmp(got, f.mw_version()) == 0);
  int64_t stats[4] = { -1, -1, -1, -1 };
  CHECK(f.mw_stats(db, "main", stats, 4) == SQLITE_OK);
  /* ... and the extension loads into it too (registration is idempotent). */
  CHECK(f.enable_load_extension(db, 1) == SQLITE_OK);
  char *err = 0;
  rc = f.load_extension(db, argv[2], 0, &err);
  CHECK(rc == SQLITE_OK);
  if (rc != SQLITE_OK) fprintf(stderr, "load_extension %s: %s\n", argv[2], err ? err : "?");
  if (err) f.free(err);
  CHECK(sql(db, "select mw_version()") == SQLITE_OK && strcmp(got, f.mw_version()) == 0);
  check_thread_end(argv[3]);
  CHECK(sql(db, "drop table t") == SQLITE_OK);
  CHECK(f.close_v2(db) == SQLITE_OK);

  printf("dll_smoke: %d passed, %d failed (%s)\n", checks - failures, failures, argv[1]);
  return failures ? 1 : 0;
}
