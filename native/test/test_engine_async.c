/* Statements run off the caller's thread (vfs/async.c), as an event loop's binding runs
** its COMMITs:
**  - 16 connections of one thread each hold a write transaction; their COMMITs go to
**    mw_exec_async together: every one commits, the callbacks come from other threads,
**    and they share data syncs (fewer syncs than commits: the group commit groups them,
**    which one thread committing in turn never lets it do); when one of them loses,
**    only that one is refused (each thread's phase two publishes its own stash only;
**    stashes wait 2 ms, MW_PAUSE_AT=lane_stashed:2, so that they meet; the round with a
**    loser runs LOSER_ROUNDS times: with one, the mutant lane-stash-owner-origin survived
**    a CI run);
**  - a transaction over main and an attached database, committed on another thread
**    while a further connection of the first thread holds a write lock: both halves or
**    neither (the databases of one transaction are found through the thread that began
**    writing it, not the one that commits);
**  - a lost commit reports SQLITE_BUSY_SNAPSHOT through the callback, and the
**    connection is usable after ROLLBACK;
**  - mw_exec_wait returns only once a queued statement ran (then sqlite3_close is safe);
**    mw_exec_async_start's record polls -1 until the statement ended, then its code;
**    mw_exec_tracked runs on the calling thread; bad arguments are SQLITE_MISUSE;
**  - afterwards no lane is counted as stashed (db.c). */
#include "test_engine_util.h"
#include "core/db.h"

#include <poll.h>

#define N 16
#define ROUNDS 10
#define LOSER_ROUNDS 8

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ndone;
static int32_t rcs[N];
static pthread_t main_thread;
static int on_other_thread;

static void done(int64_t id, int32_t rc) {
  pthread_mutex_lock(&mu);
  rcs[id] = rc;
  ndone++;
  if (!pthread_equal(pthread_self(), main_thread)) on_other_thread++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void wait_done(int n) {
  pthread_mutex_lock(&mu);
  while (ndone < n) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

static void reset(void) {
  pthread_mutex_lock(&mu);
  ndone = 0;
  on_other_thread = 0;
  pthread_mutex_unlock(&mu);
}

/* Each connection of c begins a write transaction on its own row. */
static void begin_all(sqlite3 **c) {
  char sql[200];
  for (int i = 0; i < N; i++) {
    snprintf(sql, sizeof sql, "BEGIN; UPDATE t SET v = randomblob(3000) WHERE id = %d", i);
    tu_exec(c[i], sql);
  }
}

/* Their COMMITs sent off this thread together; back once every one ended. */
static void commit_all(sqlite3 **c) {
  reset();
  for (int i = 0; i < N; i++) CHECK_RC(mw_exec_async(c[i], "COMMIT", i, done), SQLITE_OK);
  wait_done(N);
}

static void grouped(const char *dir) {
  char path[400], sql[200];
  snprintf(path, sizeof path, "%s/group.db", dir);
  sqlite3 *c[N];
  for (int i = 0; i < N; i++) c[i] = tu_open(path, "");
  tu_exec(c[0], "CREATE TABLE t(id INTEGER PRIMARY KEY, v)");
  tu_exec(c[0], "BEGIN");
  for (int i = 0; i < N; i++) {
    snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%d, zeroblob(3000))", i);
    tu_exec(c[0], sql); /* a row a page: the updates below do not conflict */
  }
  tu_exec(c[0], "COMMIT");
  int64_t syncs0 = tu_stat(c[0], MW_STAT_LOG_SYNCS); /* the database's log's count */
  /* Rounds: commits on several threads at once must each stay their own transaction
  ** (a stash found by another thread's phase two grouped them, and refused some). */
  for (int round = 0; round < ROUNDS; round++) {
    begin_all(c);
    commit_all(c);
    for (int i = 0; i < N; i++) {
      if (rcs[i] != SQLITE_OK)
        fprintf(stderr, "round %d, commit %d: %s\n", round, i, sqlite3_errmsg(c[i]));
      CHECK_RC(rcs[i], SQLITE_OK);
      CHECK(sqlite3_get_autocommit(c[i]));
    }
    CHECK(on_other_thread == N);
  }
  /* Rounds where one commit loses (another connection changed its row first): only
  ** that one is refused. Grouped with the others' stashes, it took them down with it
  ** (whether they meet is up to the threads: several rounds, so that a grouping shows). */
  sqlite3 *x = tu_open(path, "");
  int refused = 0;
  for (int round = 0; round < LOSER_ROUNDS; round++) {
    begin_all(c);
    tu_exec(x, "UPDATE t SET v = randomblob(3000) WHERE id = 0");
    commit_all(c);
    CHECK_RC(rcs[0], SQLITE_BUSY);
    CHECK_RC(sqlite3_extended_errcode(c[0]), SQLITE_BUSY_SNAPSHOT);
    if (!sqlite3_get_autocommit(c[0])) tu_exec(c[0], "ROLLBACK");
    for (int i = 1; i < N; i++) {
      if (rcs[i] != SQLITE_OK) refused++;
      CHECK(sqlite3_get_autocommit(c[i]));
    }
  }
  if (refused) fprintf(stderr, "test_engine_async: %d unrelated commits refused with the loser\n", refused);
  CHECK(refused == 0);
  CHECK_RC(sqlite3_close(x), SQLITE_OK);
  int64_t syncs = tu_stat(c[0], MW_STAT_LOG_SYNCS) - syncs0;
  CHECK(tu_int(c[0], "SELECT count(*) FROM t WHERE v <> zeroblob(3000)") == N);
  printf("test_engine_async: %d rounds of %d commits on other threads at once: %lld data syncs\n",
         ROUNDS, N, (long long)syncs);
  for (int i = 0; i < N; i++) {
    mw_exec_wait(c[i]);
    CHECK_RC(sqlite3_close(c[i]), SQLITE_OK);
  }
}

static void attached_and_lost(const char *dir) {
  sqlite3 *a, *o, *c; /* c holds another write lock of this thread */
  tu_attached_pair(dir, &a, &o, &c);
  /* b changes first: the whole commit is refused, main is not half committed. */
  tu_exec(a, "BEGIN; UPDATE main.acct SET n = n - 10; UPDATE b.acct SET n = n + 10");
  tu_exec(o, "UPDATE acct SET n = n + 1");
  reset();
  CHECK_RC(mw_exec_async(a, "COMMIT", 0, done), SQLITE_OK);
  wait_done(1);
  CHECK(rcs[0] != SQLITE_OK);
  if (!sqlite3_get_autocommit(a)) tu_exec(a, "ROLLBACK");
  CHECK(tu_int(a, "SELECT n FROM main.acct") == 100 && tu_int(a, "SELECT n FROM b.acct") == 101);
  /* Again, unopposed: both halves. */
  tu_exec(a, "BEGIN; UPDATE main.acct SET n = n - 10; UPDATE b.acct SET n = n + 10");
  reset();
  CHECK_RC(mw_exec_async(a, "COMMIT", 0, done), SQLITE_OK);
  wait_done(1);
  CHECK_RC(rcs[0], SQLITE_OK);
  CHECK_RC(tu_try(c, "COMMIT"), SQLITE_OK);
  CHECK(tu_int(c, "SELECT n FROM acct") == 90 && tu_int(o, "SELECT n FROM acct") == 111);

  /* A plain lost commit: SQLITE_BUSY_SNAPSHOT through the callback, then usable. */
  tu_exec(c, "BEGIN; UPDATE acct SET n = n + 1");
  tu_exec(a, "UPDATE main.acct SET n = n + 5");
  reset();
  CHECK_RC(mw_exec_async(c, "COMMIT", 0, done), SQLITE_OK);
  wait_done(1);
  CHECK_RC(rcs[0], SQLITE_BUSY); /* sqlite3_exec's primary code */
  CHECK_RC(sqlite3_extended_errcode(c), SQLITE_BUSY_SNAPSHOT);
  if (!sqlite3_get_autocommit(c)) tu_exec(c, "ROLLBACK");
  CHECK(tu_int(c, "SELECT n FROM acct") == 95);

  /* mw_exec_wait: returns after the queued statement ran; then close is safe. */
  tu_exec(c, "BEGIN; UPDATE acct SET n = n + 1");
  CHECK_RC(mw_exec_async(c, "COMMIT", 0, 0), SQLITE_OK);
  mw_exec_wait(c);
  CHECK(sqlite3_get_autocommit(c));
  CHECK(tu_int(o, "SELECT n FROM acct") == 111 && tu_int(a, "SELECT n FROM main.acct") == 96);
  CHECK_RC(mw_exec_tracked(c, "UPDATE acct SET n = n + 1"), SQLITE_OK);
  CHECK(tu_int(a, "SELECT n FROM main.acct") == 97);
  CHECK_RC(mw_exec_tracked(0, "SELECT 1"), SQLITE_MISUSE);
  CHECK_RC(mw_exec_async(c, 0, 0, done), SQLITE_MISUSE);
  mw_exec_wait(0); /* nothing to wait for */

  /* Polled (mw_exec_async_start): -1 while it runs, then the code, once (rec freed). A
  ** lost commit polls as SQLITE_BUSY; the winner's as SQLITE_OK. */
  tu_exec(c, "BEGIN; UPDATE acct SET n = n + 1");
  tu_exec(a, "BEGIN; UPDATE main.acct SET n = n + 1");
  void *rc1 = mw_exec_async_start(c, "COMMIT", 0);
  CHECK(rc1 != 0);
  int r1, polls = 0;
  while ((r1 = mw_exec_async_result(rc1)) == -1) polls++, usleep(100);
  CHECK_RC(r1, SQLITE_OK);
  CHECK(sqlite3_get_autocommit(c)); /* ended when it said so, not before */
  /* With a wake pair: the byte comes once the record says it ended. */
  int32_t rfd = -1;
  void *wake = mw_wake_open(&rfd);
  CHECK(wake != 0 && rfd >= 0);
  void *rc2 = mw_exec_async_start(a, "COMMIT", wake);
  CHECK(rc2 != 0);
  char byte;
  struct pollfd pfd = { rfd, POLLIN, 0 };
  CHECK(poll(&pfd, 1, 20000) == 1); /* the wake, within 20 s (a commit takes ms) */
  CHECK(read(rfd, &byte, 1) == 1 && byte == 1);
  /* Done reading: let go (the pair closes with the statement's reference, if it has not
  ** gone yet, else now; the sanitizers' leak check sees a pair never freed). */
  mw_wake_close(wake);
  int r2 = mw_exec_async_result(rc2);
  CHECK_RC(r2, SQLITE_BUSY);
  if (!sqlite3_get_autocommit(a)) tu_exec(a, "ROLLBACK");
  CHECK(tu_int(a, "SELECT n FROM main.acct") == 98);
  CHECK(mw_exec_async_start(0, "COMMIT", 0) == 0 && mw_exec_async_start(c, 0, 0) == 0);
  CHECK_RC(mw_exec_async_result(0), SQLITE_MISUSE);
  CHECK(mw_wake_open(0) == 0);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(o), SQLITE_OK);
  CHECK_RC(sqlite3_close(c), SQLITE_OK);
  printf("test_engine_async: attached transaction committed on another thread: both halves or "
         "neither; a lost commit reported; mw_exec_wait; polled (%d polls)\n", polls);
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  main_thread = pthread_self();
  /* A stash waits 2 ms before its phase two: the commits running at once all stash
  ** before any publishes, so a phase two that took another thread's stash is seen. */
  setenv("MW_PAUSE_AT", "lane_stashed:2", 1);
  const char *dir = tu_tmpdir("async");
  grouped(dir);
  attached_and_lost(dir);
  /* Every stash was spent or rolled back: none left counted (a count left above 1
  ** would send every later phase two through the walk of all lanes, db.c). */
  CHECK(mw_db_stashes_now() == 0);
  tu_rmdir();
  printf("test_engine_async: ok\n");
  return 0;
}
