/* Helpers of the relocation and merge tests: temp databases built by stock
** SQLite, whole-file reads and writes, integrity_check, a content digest. */
#ifndef MW_TEST_RELOCATE_UTIL_H
#define MW_TEST_RELOCATE_UTIL_H

#include "sqlite3.h"
#include "growth/relocate.h"
#include "test_util.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tdir[64];

static inline void tmp_cleanup(void);

/* the directory goes away on any exit, failed checks included */
static inline void tmp_init(void) {
  strcpy(tdir, "/tmp/mw-reloc-XXXXXX");
  CHECK(mkdtemp(tdir) != NULL);
  CHECK(atexit(tmp_cleanup) == 0);
}

static inline void tmp_cleanup(void) {
  if (tdir[0] == 0) return;
  DIR *d = opendir(tdir);
  if (d != NULL) {
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      snprintf(p, sizeof p, "%s/%s", tdir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(tdir);
  tdir[0] = 0;
}

static inline const char *tpath(const char *name) {
  static char buf[4][256];
  static int next;
  char *p = buf[next++ & 3];
  snprintf(p, 256, "%s/%s", tdir, name);
  return p;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}
static inline uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() % n); }

static inline void exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK) {
    fprintf(stderr, "exec failed (%d): %s\n  in: %.200s\n", rc, err ? err : "?", sql);
    exit(1);
  }
}

static inline sqlite3 *open_db(const char *path) {
  sqlite3 *db = NULL;
  CHECK_RC(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix"),
           SQLITE_OK);
  return db;
}

static inline int64_t query_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  CHECK_RC(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  CHECK_RC(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static inline unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long n = ftell(f);
  CHECK(n > 0);
  CHECK(fseek(f, 0, SEEK_SET) == 0);
  unsigned char *b = malloc((size_t)n);
  CHECK(b != NULL);
  CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

static inline void write_file(const char *path, const unsigned char *b, size_t len) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  CHECK(fwrite(b, 1, len, f) == len);
  CHECK(fclose(f) == 0);
}

static inline void copy_file(const char *from, const char *to) {
  size_t n;
  unsigned char *b = read_file(from, &n);
  write_file(to, b, n);
  free(b);
}

/* 1 when PRAGMA integrity_check says ok; prints what it says otherwise */
static inline int integrity_ok(const char *path) {
  sqlite3 *db = open_db(path);
  sqlite3_stmt *st = NULL;
  CHECK_RC(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
  int ok = 1, rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *msg = (const char *)sqlite3_column_text(st, 0);
    if (rows++ == 0 && strcmp(msg, "ok") == 0) continue;
    ok = 0;
    if (rows < 6) fprintf(stderr, "  integrity_check: %s\n", msg);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return ok;
}

static inline uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* Order-independent digest of every row of every table, plus row counts. */
static inline uint64_t digest(const char *path) {
  sqlite3 *db = open_db(path);
  sqlite3_stmt *tabs = NULL;
  CHECK_RC(sqlite3_prepare_v2(db,
                              "SELECT name FROM sqlite_schema WHERE type='table' AND name NOT "
                              "LIKE 'sqlite_%' ORDER BY name",
                              -1, &tabs, NULL),
           SQLITE_OK);
  uint64_t total = 0;
  while (sqlite3_step(tabs) == SQLITE_ROW) {
    char sql[256];
    const char *name = (const char *)sqlite3_column_text(tabs, 0);
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", name);
    total = fnv(total, name, strlen(name));
    sqlite3_stmt *st = NULL;
    CHECK_RC(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    uint64_t sum = 0, count = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      uint64_t h = 0xcbf29ce484222325ull;
      for (int c = 0; c < sqlite3_column_count(st); c++) {
        int t = sqlite3_column_type(st, c);
        h = fnv(h, &t, sizeof t);
        const void *b = sqlite3_column_blob(st, c);
        int n = sqlite3_column_bytes(st, c);
        if (b != NULL) h = fnv(h, b, (size_t)n);
      }
      sum += h;
      count++;
    }
    CHECK_RC(rc, SQLITE_DONE);
    sqlite3_finalize(st);
    total = fnv(total, &sum, sizeof sum);
    total = fnv(total, &count, sizeof count);
  }
  sqlite3_finalize(tabs);
  sqlite3_close(db);
  return total;
}

#endif
