/* Helpers of the engine tests: temp database paths, opening through the engine,
** running SQL with checks, reading the per-connection statistics. */
#ifndef MW_TEST_ENGINE_UTIL_H
#define MW_TEST_ENGINE_UTIL_H
#include "sqlite3.h"
#include "multiwriter.h"
#include "test_util.h"
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

static void tu_exec(sqlite3 *db, const char *sql) {
  char *err = 0;
  int rc = sqlite3_exec(db, sql, 0, 0, &err);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "exec %s: %d %s\n", sql, rc, err ? err : "");
    exit(1);
  }
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
#endif
