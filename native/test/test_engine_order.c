/* Visibility in epoch order, and acknowledgement only after the group sync, with
** mixed synchronous levels (issue 8, "make the tests honest").
**
** The platform layer's fault hook holds the log's data sync of connection A (a
** synchronous=FULL commit, epoch e) closed like a gate. While it is closed:
**  - A's COMMIT has not returned (a FULL commit is acknowledged once synced);
**  - no new snapshot sees A's row (e is not durable, so not visible);
**  - connection B (synchronous=NORMAL) commits epoch e+1 on another table: its
**    record is written, so it is ready, but it must not become visible before e
**    (epochs become visible as a prefix), and its COMMIT must not return before
**    its epoch is visible; no snapshot sees B's row either.
** Then a turn holder H (issue 10: the turn does not wait for the disk) begins while
** the gate is still closed: its snapshot is the installed prefix, so it reads A's
** row, but its (read-only) transaction must not end before A's sync: its COMMIT
** has not returned, and ordinary snapshots still see neither row.
** Opening the gate lets all three through; then both rows are seen.
** Each check is a fact that holds for every interleaving of a correct engine; the
** waits only bound how long a broken engine has to show itself. The background
** compactor is stopped meanwhile: its log switch waits for the sync in flight and
** holds writes back, which would stop B's write while the gate is closed. */
#include "test_engine_internals.h"
#include "compact/compact.h"
#include "core/db.h"

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_closed;       /* data syncs of gate_thread wait while set */
static pthread_t gate_thread; /* A's thread */
static int gate_set;          /* gate_thread is valid */
static int sync_entered;      /* A's data sync reached the gate */
static pthread_t b_thread;
static int b_set, b_wrote;    /* B wrote to the log */

static int hook(int op, mw_fd fd) {
  (void)fd;
  pthread_mutex_lock(&gate_mu);
  pthread_t self = pthread_self();
  if (op == MW_OP_DATASYNC && gate_set && pthread_equal(self, gate_thread)) {
    sync_entered = 1;
    pthread_cond_broadcast(&gate_cv);
    while (gate_closed) pthread_cond_wait(&gate_cv, &gate_mu);
  }
  if (op == MW_OP_WRITE && b_set && pthread_equal(self, b_thread)) {
    b_wrote = 1;
    pthread_cond_broadcast(&gate_cv);
  }
  pthread_mutex_unlock(&gate_mu);
  return 0;
}

typedef struct writer { sqlite3 *db; const char *sql; int done; int rc; } writer;

/* H: a turn holder's read-only transaction; seen = rows of ta it read (+1). */
typedef struct holder { sqlite3 *db; int seen; int done; int rc; } holder;

static void *run_h(void *arg) {
  holder *h = arg;
  tu_exec(h->db, "BEGIN");
  int64_t n = tu_int(h->db, "SELECT count(*) FROM ta");
  __atomic_store_n(&h->seen, (int)n + 1, __ATOMIC_SEQ_CST);
  h->rc = tu_try(h->db, "COMMIT");
  __atomic_store_n(&h->done, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static void *run_a(void *arg) {
  writer *w = arg;
  pthread_mutex_lock(&gate_mu);
  gate_thread = pthread_self();
  gate_set = 1;
  pthread_mutex_unlock(&gate_mu);
  w->rc = tu_try(w->db, w->sql);
  __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static void *run_b(void *arg) {
  writer *w = arg;
  pthread_mutex_lock(&gate_mu);
  b_thread = pthread_self();
  b_set = 1;
  pthread_mutex_unlock(&gate_mu);
  w->rc = tu_try(w->db, w->sql);
  __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
  return 0;
}

/* Waits (at most ms) until *flag is set under gate_mu. */
static int wait_flag(int *flag, int ms) {
  pthread_mutex_lock(&gate_mu);
  for (int i = 0; i < ms && !*flag; i++) {
    pthread_mutex_unlock(&gate_mu);
    mw_sleep_us(1000);
    pthread_mutex_lock(&gate_mu);
  }
  int v = *flag;
  pthread_mutex_unlock(&gate_mu);
  return v;
}

static int64_t count_of(sqlite3 *db, const char *table) {
  char sql[100];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  return tu_int(db, sql);
}

int main(void) {
  const char *path = tu_db_path("order", "o.db");
  sqlite3 *a = tu_open(path, "");
  mw_db *db = tu_db_of(a);
  sqlite3 *b = tu_open(path, "");
  sqlite3 *r = tu_open(path, "");
  sqlite3 *hc = tu_open(path, "");
  /* Two tables: A and B write different leaves, so neither conflicts with the
  ** other; neither insert grows the file (both roots have room). */
  tu_exec(a, "CREATE TABLE ta(id INTEGER PRIMARY KEY, v TEXT)");
  tu_exec(a, "CREATE TABLE tb(id INTEGER PRIMARY KEY, v TEXT)");
  tu_exec(a, "INSERT INTO ta VALUES(1, 'seed'); INSERT INTO tb VALUES(1, 'seed')");
  tu_exec(a, "PRAGMA synchronous=FULL");
  tu_exec(b, "PRAGMA synchronous=NORMAL");
  CHECK(count_of(r, "ta") == 1 && count_of(r, "tb") == 1);
  /* H's schema is loaded now: loading it later would be a read transaction of its
  ** own, which (a turn holder's) could not end before A's sync either. */
  CHECK(count_of(hc, "ta") == 1);

  mw_compactor_stop(db);
  gate_closed = 1;
  __atomic_store_n(&mw_fault_hook, hook, __ATOMIC_SEQ_CST);
  writer wa = { a, "INSERT INTO ta VALUES(2, 'A')", 0, -1 };
  writer wb = { b, "INSERT INTO tb VALUES(2, 'B')", 0, -1 };
  pthread_t ta, tb;
  CHECK(pthread_create(&ta, 0, run_a, &wa) == 0);
  /* A's commit may only return after its data sync: it reaches the gate first. */
  for (int i = 0; i < 60000 && !__atomic_load_n(&wa.done, __ATOMIC_SEQ_CST); i++)
    if (wait_flag(&sync_entered, 1)) break;
  if (__atomic_load_n(&wa.done, __ATOMIC_SEQ_CST)) {
    fprintf(stderr, "test_engine_order: a synchronous=FULL commit returned (rc %d) "
                    "without waiting for its data sync\n", wa.rc);
    exit(1);
  }
  CHECK(sync_entered);
  CHECK(count_of(r, "ta") == 1); /* not durable: not visible */

  CHECK(pthread_create(&tb, 0, run_b, &wb) == 0);
  /* B's record is written behind A's (the write does not wait for A's sync). From
  ** then on, a broken engine makes B visible or returns B's COMMIT within
  ** microseconds: watch for a second. */
  CHECK(wait_flag(&b_wrote, 60000));
  for (int i = 0; i < 100; i++) {
    CHECK(!__atomic_load_n(&wa.done, __ATOMIC_SEQ_CST));
    if (__atomic_load_n(&wb.done, __ATOMIC_SEQ_CST)) {
      fprintf(stderr, "test_engine_order: B's commit (epoch e+1, rc %d) returned while "
                      "epoch e was not durable\n", wb.rc);
      exit(1);
    }
    int64_t na = count_of(r, "ta"), nb = count_of(r, "tb");
    if (na != 1 || nb != 1) {
      fprintf(stderr, "test_engine_order: a snapshot sees ta=%lld tb=%lld rows before "
                      "A's sync finished (wanted 1 and 1)\n", (long long)na, (long long)nb);
      exit(1);
    }
    mw_sleep_us(10000);
  }

  /* H holds the turn (as after a run of refusals: its heat is at the top). */
  tu_lane_of(hc)->heat = MW_HEAT_MAX;
  int64_t early0 = __atomic_load_n(&mw_early_snapshots, __ATOMIC_SEQ_CST);
  holder wh = { hc, 0, 0, -1 };
  pthread_t th;
  CHECK(pthread_create(&th, 0, run_h, &wh) == 0);
  for (int i = 0; i < 60000 && !__atomic_load_n(&wh.seen, __ATOMIC_SEQ_CST); i++) mw_sleep_us(1000);
  int seen = __atomic_load_n(&wh.seen, __ATOMIC_SEQ_CST) - 1;
  if (seen != 2 || __atomic_load_n(&mw_early_snapshots, __ATOMIC_SEQ_CST) == early0) {
    fprintf(stderr, "test_engine_order: the turn holder read %d rows of ta (wanted 2: A's "
                    "commit is installed); the early hand-over did not run\n", seen);
    exit(1);
  }
  for (int i = 0; i < 20; i++) {
    if (__atomic_load_n(&wh.done, __ATOMIC_SEQ_CST)) {
      fprintf(stderr, "test_engine_order: the turn holder's transaction, which read A's "
                      "commit, ended (rc %d) before A's sync\n", wh.rc);
      exit(1);
    }
    CHECK(!__atomic_load_n(&wa.done, __ATOMIC_SEQ_CST));
    CHECK(!__atomic_load_n(&wb.done, __ATOMIC_SEQ_CST));
    CHECK(count_of(r, "ta") == 1 && count_of(r, "tb") == 1);
    mw_sleep_us(10000);
  }

  pthread_mutex_lock(&gate_mu);
  gate_closed = 0;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
  CHECK(pthread_join(ta, 0) == 0);
  CHECK(pthread_join(tb, 0) == 0);
  CHECK(pthread_join(th, 0) == 0);
  CHECK_RC(wh.rc, SQLITE_OK);
  __atomic_store_n(&mw_fault_hook, (mw_fault_hook_fn)0, __ATOMIC_SEQ_CST);
  CHECK_RC(mw_compactor_start(db), SQLITE_OK);
  CHECK_RC(wa.rc, SQLITE_OK);
  CHECK_RC(wb.rc, SQLITE_OK);
  CHECK(count_of(r, "ta") == 2 && count_of(r, "tb") == 2);
  CHECK(tu_stat(b, MW_STAT_COMMIT_EPOCH) == tu_stat(a, MW_STAT_COMMIT_EPOCH) + 1);
  CHECK(tu_integrity_ok(r));
  CHECK_RC(sqlite3_close(hc), SQLITE_OK);
  CHECK_RC(sqlite3_close(r), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_order: ok\n");
  return 0;
}
