/*
** release/test/dll_smoke.c: loads a released shared library and extension at run
** time, as Bun, Deno and the sqlite3 shell do, and uses them: opens a database
** through the "multiwriter" VFS (registered when the library initialises), writes
** and reads it, calls mw_version() in SQL and mw_stats(), checks the SQLite source
** id, and loads the extension into the library's SQLite. Built for Windows and run
** under Wine by release/check.mjs; it builds and runs on POSIX hosts too.
**
**   dll_smoke <shared library> <extension> <folder for the database>
*/
#include "sqlite3.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef _WIN32
#  define WIN32_LEAN_AND_MEAN
#  include <windows.h>
typedef HMODULE lib_t;
static lib_t lib_open(const char *p) { return LoadLibraryA(p); }
static void *lib_sym(lib_t l, const char *n) { return (void *)GetProcAddress(l, n); }
#else
#  include <dlfcn.h>
typedef void *lib_t;
static lib_t lib_open(const char *p) { return dlopen(p, RTLD_NOW | RTLD_LOCAL); }
static void *lib_sym(lib_t l, const char *n) { return dlsym(l, n); }
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
  CHECK(sql(db, "drop table t") == SQLITE_OK);
  CHECK(f.close_v2(db) == SQLITE_OK);

  printf("dll_smoke: %d passed, %d failed (%s)\n", checks - failures, failures, argv[1]);
  return failures ? 1 : 0;
}
