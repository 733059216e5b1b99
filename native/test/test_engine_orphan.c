/* A transaction whose threads all ended (a terminated Worker) must not pin versions
** forever: the compactor releases its snapshot (db.c, owner.c), compaction passes
** it, and the connection's next use in that transaction fails cleanly (never a read
** of freed versions, never a commit) until it is rolled back. A transaction handed
** from one thread to another that used it stays whole when the first one ends. */
#include "test_engine_util.h"
#include "platform/platform.h"

static int released_logged, refused_logged;
static void on_log(void *arg, int code, const char *msg) {
  (void)arg;
  if (strstr(msg, "whose threads all ended")) __atomic_store_n(&released_logged, 1, __ATOMIC_SEQ_CST);
  if ((code & 0xff) == SQLITE_IOERR && strstr(msg, "the thread that began this transaction"))
    __atomic_store_n(&refused_logged, 1, __ATOMIC_SEQ_CST);
}

static sqlite3 *o_read, *o_write, *o_close;

/* Begins a read transaction on two connections and a write transaction on a third,
** then ends without ending any of them. */
static void *orphan_thread(void *arg) {
  (void)arg;
  tu_exec(o_read, "BEGIN");
  CHECK(tu_int(o_read, "SELECT sum(v) FROM c") == 200);
  tu_exec(o_close, "BEGIN");
  CHECK(tu_int(o_close, "SELECT count(*) FROM c") == 200);
  tu_exec(o_write, "BEGIN; INSERT INTO e VALUES(NULL, 'orphan')");
  return 0;
}

static void commit_many(sqlite3 *w, int n) {
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(w, "UPDATE c SET v=v+1 WHERE id=?1", -1, &st, 0), SQLITE_OK);
  for (int i = 0; i < n; i++) {
    sqlite3_bind_int(st, 1, 1 + i % 200);
    CHECK_RC(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
}

/* Hand-over: A begins, B continues (a read that reaches the engine), A ends, the
** compactor runs, B commits. */
static sqlite3 *h;
static int a_began, b_read, a_gone, b_done, b_rc;
static void post(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST); }
static void await_flag(int *flag) {
  while (!__atomic_load_n(flag, __ATOMIC_SEQ_CST)) mw_sleep_us(1000);
}

static void *thread_a(void *arg) {
  (void)arg;
  tu_exec(h, "BEGIN");
  CHECK(tu_int(h, "SELECT v FROM c WHERE id=7") >= 1);
  post(&a_began);
  await_flag(&b_read);
  return 0; /* ends with the transaction open */
}

static void *thread_b(void *arg) {
  (void)arg;
  await_flag(&a_began);
  CHECK(tu_int(h, "SELECT count(*) FROM d") == 300); /* pages not cached: xRead */
  post(&b_read);
  await_flag(&a_gone);
  b_rc = tu_try(h, "UPDATE c SET v=v+1000 WHERE id=7");
  if (b_rc == SQLITE_OK) b_rc = tu_try(h, "COMMIT");
  post(&b_done);
  return 0;
}

int main(void) {
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_LOG, on_log, (void *)0), SQLITE_OK);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("orphan");
  char path[300];
  snprintf(path, sizeof path, "%s/o.db", dir);
  sqlite3 *w = tu_open(path, "mw_log_max_mb=1");
  tu_exec(w, "PRAGMA synchronous=NORMAL;"
             "CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB);"
             "CREATE TABLE d(id INTEGER PRIMARY KEY, pad BLOB);"
             "CREATE TABLE e(id INTEGER PRIMARY KEY, s TEXT);"
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<200)"
             " INSERT INTO c SELECT i, 1, randomblob(300) FROM n;"
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<300)"
             " INSERT INTO d SELECT i, randomblob(300) FROM n;");
  o_read = tu_open(path, "");
  o_write = tu_open(path, "");
  o_close = tu_open(path, "");
  h = tu_open(path, "");

  pthread_t t;
  CHECK(pthread_create(&t, 0, orphan_thread, 0) == 0);
  CHECK(pthread_join(t, 0) == 0);
  int64_t compactions0 = tu_stat(w, MW_STAT_COMPACTIONS);

  /* The main thread commits on: the orphans' snapshots are released by the
  ** compactor, so the pinned versions go and a compaction passes them. */
  commit_many(w, 3000);
  int64_t pinned = -1, compactions = 0, log_bytes = 0;
  for (int k = 0; k < 400; k++) {
    commit_many(w, 5);
    pinned = tu_stat(w, MW_STAT_PINNED_VERSIONS);
    compactions = tu_stat(w, MW_STAT_COMPACTIONS);
    log_bytes = tu_stat(w, MW_STAT_LOG_BYTES);
    if (pinned < 50 && compactions > compactions0 + 1 && log_bytes < (1 << 20)) break;
    mw_sleep_us(20000);
  }
  printf("test_engine_orphan: pinned %lld, compactions %lld -> %lld, log %lld bytes\n",
         (long long)pinned, (long long)compactions0, (long long)compactions, (long long)log_bytes);
  CHECK(pinned < 50); /* the 5 commits of the last round at most */
  CHECK(compactions > compactions0 + 1);
  CHECK(log_bytes < (1 << 20));
  CHECK(__atomic_load_n(&released_logged, __ATOMIC_SEQ_CST));

  /* The released read transaction: a page not in SQLite's cache is refused (its
  ** versions may be gone; SQLite rolls back on that error, or else ROLLBACK does);
  ** then a new one works. */
  int rc = tu_try(o_read, "SELECT count(*) FROM d");
  printf("test_engine_orphan: released read gives %d (%s)\n", rc, sqlite3_errmsg(o_read));
  CHECK((rc & 0xff) == SQLITE_IOERR);
  CHECK(__atomic_load_n(&refused_logged, __ATOMIC_SEQ_CST));
  if (!sqlite3_get_autocommit(o_read)) tu_exec(o_read, "ROLLBACK");
  int64_t sum = tu_int(w, "SELECT sum(v) FROM c");
  CHECK(sum > 3000);
  tu_exec(o_read, "BEGIN");
  CHECK(tu_int(o_read, "SELECT sum(v) FROM c") == sum);
  CHECK(tu_int(o_read, "SELECT count(*) FROM d") == 300);
  tu_exec(o_read, "UPDATE c SET v=v+1 WHERE id=1; COMMIT");
  CHECK(tu_int(w, "SELECT sum(v) FROM c") == sum + 1);

  /* The released write transaction never commits, though SQLite's cache holds
  ** everything its statements need. */
  rc = tu_try(o_write, "INSERT INTO e VALUES(NULL, 'more'); COMMIT");
  printf("test_engine_orphan: released write gives %d (%s)\n", rc, sqlite3_errmsg(o_write));
  CHECK((rc & 0xff) == SQLITE_IOERR);
  if (!sqlite3_get_autocommit(o_write)) tu_exec(o_write, "ROLLBACK");
  CHECK(tu_int(w, "SELECT count(*) FROM e") == 0);
  tu_exec(o_write, "INSERT INTO e VALUES(NULL, 'after')");
  CHECK(tu_int(w, "SELECT count(*) FROM e") == 1);

  /* A released transaction's connection closes. */
  CHECK_RC(sqlite3_close(o_close), SQLITE_OK);
  CHECK_RC(sqlite3_close(o_write), SQLITE_OK);

  /* Hand-over: B used the transaction, so A's end releases nothing. */
  int64_t v7 = tu_int(w, "SELECT v FROM c WHERE id=7");
  pthread_t ta, tb;
  CHECK(pthread_create(&ta, 0, thread_a, 0) == 0);
  CHECK(pthread_create(&tb, 0, thread_b, 0) == 0);
  CHECK(pthread_join(ta, 0) == 0);
  /* Commits elsewhere (table e) for a while: the compactor runs its steps. */
  for (int k = 0; k < 40; k++) {
    tu_exec(w, "INSERT INTO e VALUES(NULL, 'tick')");
    mw_sleep_us(20000);
  }
  post(&a_gone);
  await_flag(&b_done);
  CHECK(pthread_join(tb, 0) == 0);
  printf("test_engine_orphan: hand-over commit gives %d\n", b_rc);
  CHECK_RC(b_rc, SQLITE_OK);
  CHECK(tu_int(w, "SELECT v FROM c WHERE id=7") == v7 + 1000);

  CHECK(tu_integrity_ok(w));
  CHECK_RC(sqlite3_close(h), SQLITE_OK);
  CHECK_RC(sqlite3_close(o_read), SQLITE_OK);
  CHECK_RC(sqlite3_close(w), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_orphan: ok\n");
  return 0;
}
