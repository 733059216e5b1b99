/* A compaction keeps what it wrote in memory: commits after it do not read the database
** file.
**
** Every commit checks page 1's header (the schema cookie, the database size) under
** page 1's stripe. Before, a compaction followed by garbage collection dropped the
** pages it had written into the file, page 1 with them, and a lone writer (whose SQLite
** keeps page 1 in its own cache, so never reads it again through the engine) then read
** page 1's header from the file in every later commit: one pread under the lock that
** every committer takes. Garbage collection now keeps such a page's image as the
** file's cached copy while the store's cache has room.
**
** The test counts the engine's reads of the database file (its handle's xRead,
** wrapped) over 200 one-row commits after a compaction: none. It also checks the rows
** and that a second connection, which reads the pages through the engine, sees them. */
#include "test_engine_internals.h"
#include "compact/compact.h"

static sqlite3_io_methods counted;
static const sqlite3_io_methods *real;
static long reads;

static int counted_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off) {
  __atomic_fetch_add(&reads, 1, __ATOMIC_SEQ_CST);
  return real->xRead(f, b, n, off);
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("warm");
  char path[300];
  snprintf(path, sizeof path, "%s/w.db", dir);
  sqlite3 *w = tu_open(path, "");
  tu_exec(w, "PRAGMA synchronous=NORMAL; CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER, pad TEXT)");
  tu_exec(w, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<300) "
             "INSERT INTO c SELECT i, 0, printf('%.200c', 'x') FROM n");
  mw_db *db = tu_db_of(w);

  /* Everything into the file; garbage collection then runs on the compactor's next
  ** tick and drops (or keeps as cached) what the file holds: wait until no page has
  ** versions beyond the file's (30 s at most, not 2: the tick is a background worker's,
  ** which a loaded emulator can keep waiting for a core). */
  CHECK_RC(mw_compact_now(db, MW_COMPACT_ALL), SQLITE_OK);
  int64_t chains = -1;
  for (int k = 0; k < 3000 && chains != 0; k++) {
    mw_sleep_us(10000);
    chains = tu_stat(w, MW_STAT_STORE_CHAINS);
  }
  CHECK(chains == 0);

  real = db->data->pMethods;
  counted = *real;
  counted.xRead = counted_read;
  db->data->pMethods = &counted;

  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(w, "UPDATE c SET v = v + 1 WHERE id = ?", -1, &st, 0), SQLITE_OK);
  for (int i = 0; i < 200; i++) {
    CHECK_RC(sqlite3_bind_int(st, 1, 1 + (i * 7) % 300), SQLITE_OK);
    CHECK_RC(sqlite3_step(st), SQLITE_DONE);
    CHECK_RC(sqlite3_reset(st), SQLITE_OK);
  }
  CHECK_RC(sqlite3_finalize(st), SQLITE_OK);
  long n = __atomic_load_n(&reads, __ATOMIC_SEQ_CST);
  printf("test_engine_warm_store: %ld reads of the database file in 200 commits after a compaction\n", n);
  CHECK(n == 0);

  db->data->pMethods = real;
  CHECK(tu_int(w, "SELECT sum(v) FROM c") == 200);
  sqlite3 *r = tu_open(path, "");
  CHECK(tu_int(r, "SELECT sum(v) FROM c") == 200);
  CHECK(tu_integrity_ok(r));
  CHECK_RC(sqlite3_close(r), SQLITE_OK);
  CHECK_RC(sqlite3_close(w), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_warm_store: ok\n");
  return 0;
}
