/* The foundation: the vendored SQLite is the recorded version, the multiwriter
** VFS is registered at start, and mw_version() answers in SQL. */
#include "sqlite3.h"
#include "multiwriter.h"
#include "test_util.h"
#include <string.h>

int main(void) {
  CHECK(strcmp(sqlite3_libversion(), "3.54.1") == 0);
  CHECK(strncmp(sqlite3_sourceid(), "2026-10-16 14:45:20 555e07ef33f69a0957d24d8e555b702464a131d6f1607f4c3c1e4551e8e6ca76", 84) == 0);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  CHECK(sqlite3_vfs_find("multiwriter") != 0);
  sqlite3 *db = 0;
  CHECK_RC(sqlite3_open_v2("file::memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, 0), SQLITE_OK);
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT mw_version()", -1, &st, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(st), SQLITE_ROW);
  CHECK(strcmp((const char *)sqlite3_column_text(st, 0), MW_VERSION) == 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  printf("test_foundation: ok\n");
  return 0;
}
