/* Helpers of the tests that look inside the engine: the lane and the database state
** behind a connection opened through it. */
#ifndef MW_TEST_ENGINE_INTERNALS_H
#define MW_TEST_ENGINE_INTERNALS_H
#include "test_engine_util.h"
#include "engine.h"
#include "vfs/lane.h"

static inline mw_lane *tu_lane_of(sqlite3 *c) {
  sqlite3_file *f = 0;
  CHECK_RC(sqlite3_file_control(c, "main", SQLITE_FCNTL_FILE_POINTER, &f), SQLITE_OK);
  CHECK(f != 0 && f->pMethods == &mw_main_methods);
  mw_lane *l = ((mw_file *)f)->lane;
  CHECK(l != 0 && l->db != 0);
  return l;
}

static inline mw_db *tu_db_of(sqlite3 *c) { return tu_lane_of(c)->db; }
#endif
