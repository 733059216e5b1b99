/* Helpers of the engine tests: temp database paths, opening through the engine or
** as a stock program would, running SQL with checks, reading the per-connection
** statistics, running workers on threads. */
#ifndef MW_TEST_ENGINE_UTIL_H
#define MW_TEST_ENGINE_UTIL_H
#include "sqlite3.h"
#include "multiwriter.h"
#include "test_util.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tu_dir[256];

/* A fresh directory under /tmp for this test program. */
static const char *tu_tmpdir(const char *name) {
  snprintf(tu_dir, sizeof tu_dir, "/tmp/mwtest-%s-%d", name, (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", tu_dir, tu_dir);
  CHECK(system(cmd) == 0);
  return tu_dir;
}

static char tu_file[320];

/* Initializes SQLite, makes the temp directory (tu_tmpdir) and returns the path of
** file in it. */
static const char *tu_db_path(const char *name, const char *file) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  snprintf(tu_file, sizeof tu_file, "%s/%s", tu_tmpdir(name), file);
  return tu_file;
}

static void tu_rmdir(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tu_dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tu_dir);
}

/* Opens path through the engine with extra URI parameters (may be ""). */
static sqlite3 *tu_open(const char *path, const char *params) {
  char uri[600];
  snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter%s%s", path, params && *params ? "&" : "",
           params ? params : "");
  sqlite3 *db = 0;
  int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI |
                                         SQLITE_OPEN_NOMUTEX, 0);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "open %s: %s\n", uri, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    exit(1);
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

/* Opens path through SQLite's plain unix VFS: no engine, as a stock program would. */
static sqlite3 *tu_open_stock(const char *path, int flags) {
  sqlite3 *s = 0;
  CHECK_RC(sqlite3_open_v2(path, &s, flags, "unix"), SQLITE_OK);
  return s;
}

static void tu_exec(sqlite3 *db, const char *sql) {
  char *err = 0;
  int rc = sqlite3_exec(db, sql, 0, 0, &err);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "exec %s: %d %s\n", sql, rc, err ? err : "");
    exit(1);
  }
}

/* Runs sql, which must fail with an error message containing needle (else exits). */
static void tu_expect_error(sqlite3 *db, const char *sql, const char *needle) {
  char *err = 0;
  int rc = sqlite3_exec(db, sql, 0, 0, &err);
  if (rc == SQLITE_OK || err == 0 || strstr(err, needle) == 0) {
    fprintf(stderr, "%s: rc %d, message '%s', wanted '%s'\n", sql, rc, err ? err : "", needle);
    exit(1);
  }
  sqlite3_free(err);
}

/* Runs sql and returns its extended result code (no check). */
static int tu_try(sqlite3 *db, const char *sql) {
  int rc = sqlite3_exec(db, sql, 0, 0, 0);
  return rc == SQLITE_OK ? rc : sqlite3_extended_errcode(db);
}

static int64_t tu_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = 0;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, 0);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "prepare %s: %s\n", sql, sqlite3_errmsg(db));
    exit(1);
  }
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    fprintf(stderr, "step %s: %d %s\n", sql, rc, sqlite3_errmsg(db));
    exit(1);
  }
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static int64_t tu_stat(sqlite3 *db, int which) {
  int64_t s[MW_STAT_COUNT];
  CHECK_RC(mw_stats(db, 0, s, MW_STAT_COUNT), SQLITE_OK);
  return s[which];
}

/* PRAGMA integrity_check through a connection: 1 when "ok". */
static int tu_integrity_ok(sqlite3 *db) {
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, 0), SQLITE_OK);
  int ok = sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
  if (!ok && sqlite3_column_text(st, 0)) fprintf(stderr, "integrity: %s\n", sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return ok;
}

/* After the last close, a stock reader: where Debian's /usr/bin/sqlite3 exists, cmd
** (a shell test that runs it) must succeed and 0 comes back; else a connection of the
** vendored library through the plain unix VFS, integrity checked, comes back for the
** caller's own checks (the caller closes it). */
static sqlite3 *tu_stock_check(const char *prog, const char *path, const char *cmd) {
  if (access("/usr/bin/sqlite3", X_OK) == 0) {
    CHECK(system(cmd) == 0);
    return 0;
  }
  printf("%s: no /usr/bin/sqlite3, checking with a stock connection\n", prog);
  sqlite3 *st = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(st));
  return st;
}

/* argv0 as an absolute path (a test that runs itself again in child processes may
** change directory first). */
static const char *tu_abs_exe(const char *argv0) {
  if (argv0[0] == '/') return argv0;
  static char abs_exe[1024];
  char cwd[512];
  CHECK(getcwd(cwd, sizeof cwd) != 0);
  snprintf(abs_exe, sizeof abs_exe, "%s/%s", cwd, argv0);
  return abs_exe;
}

/* Two engine databases of dir, main.db and other.db, each with acct(id, n) holding (1, 100);
** main.db also has side(x). *a has main.db with other.db ATTACHed as b, *o has other.db,
** and *c has main.db in a write transaction (a row into side): another write lock held by
** this thread while *a commits (the tests of transactions over several databases). */
static void tu_attached_pair(const char *dir, sqlite3 **a, sqlite3 **o, sqlite3 **c) {
  char m[400], x[400], sql[600];
  snprintf(m, sizeof m, "%s/main.db", dir);
  snprintf(x, sizeof x, "%s/other.db", dir);
  *a = tu_open(m, "");
  *o = tu_open(x, "");
  *c = tu_open(m, "");
  tu_exec(*o, "CREATE TABLE acct(id INTEGER PRIMARY KEY, n); INSERT INTO acct VALUES(1, 100)");
  tu_exec(*a, "CREATE TABLE acct(id INTEGER PRIMARY KEY, n); INSERT INTO acct VALUES(1, 100); "
              "CREATE TABLE side(x)");
  snprintf(sql, sizeof sql, "ATTACH 'file:%s?vfs=multiwriter' AS b", x);
  tu_exec(*a, sql);
  tu_exec(*c, "BEGIN; INSERT INTO side VALUES(1)");
}

/* Runs fn on n threads, the i-th on the worker at base + i * size, and waits for all. */
static void tu_threads(int n, void *(*fn)(void *), void *base, size_t size) {
  pthread_t *th = malloc(sizeof(pthread_t) * (size_t)n);
  CHECK(th != 0);
  for (int i = 0; i < n; i++) CHECK(pthread_create(&th[i], 0, fn, (char *)base + (size_t)i * size) == 0);
  for (int i = 0; i < n; i++) CHECK(pthread_join(th[i], 0) == 0);
  free(th);
}
#endif
