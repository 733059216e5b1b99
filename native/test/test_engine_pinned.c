/* A reader that never ends pins every version written since its snapshot: the
** engine counts them (MW_STAT_PINNED_VERSIONS) and warns through sqlite3_log once
** they pass 10000, instead of growing silently; once the reader ends, they go. */
#include "test_engine_util.h"
#include "platform/platform.h"

static int warned; /* set by SQLite's log callback on the compactor thread */
static void on_log(void *arg, int code, const char *msg) {
  (void)arg;
  if (code == SQLITE_WARNING && strstr(msg, "multiwriter:") && strstr(msg, "kept only for a snapshot"))
    __atomic_store_n(&warned, 1, __ATOMIC_SEQ_CST);
}

int main(void) {
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_LOG, on_log, (void *)0), SQLITE_OK);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("pinned");
  char path[300];
  snprintf(path, sizeof path, "%s/p.db", dir);
  sqlite3 *w = tu_open(path, ""), *r = tu_open(path, "");
  tu_exec(w, "PRAGMA synchronous=NORMAL; CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER)");
  tu_exec(w, "INSERT INTO c VALUES(1, 0)");
  tu_exec(r, "BEGIN");
  CHECK(tu_int(r, "SELECT v FROM c") == 0);
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(w, "UPDATE c SET v=v+1", -1, &st, 0), SQLITE_OK);
  for (int i = 0; i < 10200; i++) {
    CHECK_RC(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  /* The warning and, below, the versions' release come from the compactor's ticks (a
  ** background worker, every 200 ms): 30 s for them, not 3, for a loaded emulator. */
  for (int k = 0; k < 1500 && !__atomic_load_n(&warned, __ATOMIC_SEQ_CST); k++) mw_sleep_us(20000);
  int64_t pinned = tu_stat(w, MW_STAT_PINNED_VERSIONS);
  printf("test_engine_pinned: %lld versions pinned, warned %d\n", (long long)pinned, __atomic_load_n(&warned, __ATOMIC_SEQ_CST));
  CHECK(__atomic_load_n(&warned, __ATOMIC_SEQ_CST));
  CHECK(pinned >= 10000);
  CHECK(tu_int(r, "SELECT v FROM c") == 0);
  tu_exec(r, "COMMIT");
  CHECK(tu_int(r, "SELECT v FROM c") == 10200);
  for (int k = 0; k < 1500 && pinned != 0; k++) {
    mw_sleep_us(20000);
    pinned = tu_stat(w, MW_STAT_PINNED_VERSIONS);
  }
  CHECK(pinned == 0);
  CHECK_RC(sqlite3_close(r), SQLITE_OK);
  CHECK_RC(sqlite3_close(w), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_pinned: ok\n");
  return 0;
}
