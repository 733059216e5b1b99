/* Differences from stock SQLite that SQLite's own test suite found, each checked as
** a user would see it (docs/sqlite-tests.md):
**  - auto_vacuum=OFF (and any value SQLite reads as NONE) is accepted; FULL,
**    INCREMENTAL, 1 and 2 stay refused with the engine's message;
**  - PRAGMA mmap_size reads back 0 (the engine never maps the file), not -1;
**  - SQLITE_FCNTL_VFSNAME names the engine: "multiwriter/unix";
**  - PRAGMA page_size with another size on a new, empty database is refused with a
**    message (the engine created the file at open, so SQLite would ignore it
**    silently); the same size is accepted; once the database has a table, a new
**    size is ignored as stock SQLite ignores it. */
#include "test_engine_util.h"

static void expect_error(sqlite3 *db, const char *sql, const char *needle) {
  char *err = 0;
  int rc = sqlite3_exec(db, sql, 0, 0, &err);
  if (rc == SQLITE_OK || err == 0 || strstr(err, needle) == 0) {
    fprintf(stderr, "%s: rc %d, message '%s', wanted '%s'\n", sql, rc, err ? err : "", needle);
    exit(1);
  }
  sqlite3_free(err);
}

int main(void) {
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
  const char *refused[] = { "FULL", "incremental", "1", "2" };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA auto_vacuum=%s", refused[i]);
    expect_error(db, sql, "auto_vacuum");
    CHECK(tu_int(db, "PRAGMA auto_vacuum") == 0);
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

  /* page_size on the new database (the vendored build's default is 4096). */
  CHECK(tu_int(db, "PRAGMA page_size") == 4096);
  expect_error(db, "PRAGMA page_size=8192", "page_size=8192");
  expect_error(db, "PRAGMA page_size=1024", "with page size 4096");
  tu_exec(db, "PRAGMA page_size=4096");
  tu_exec(db, "PRAGMA page_size=1000"); /* not a page size: ignored, as stock */
  CHECK(tu_int(db, "PRAGMA page_size") == 4096);

  /* Still a working database. */
  tu_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 1);
  CHECK(tu_integrity_ok(db));
  tu_exec(db, "PRAGMA page_size=8192"); /* not empty any more: ignored, as stock */
  CHECK(tu_int(db, "PRAGMA page_size") == 4096);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_pragmas: ok\n");
  return 0;
}
