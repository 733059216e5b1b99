/* Invariant workloads from many threads, each on its own connection:
**  - bank transfers between 20 accounts: every transaction reads two balances and
**    moves money; refused commits are retried. The sum never changes, neither in
**    the snapshots the threads read nor at the end.
**  - counters: each thread increments random counters; the sum of the counters
**    equals the increments that committed.
** Then the file after the last close holds the same, for a stock connection. */
#include "test_engine_util.h"
#include <sched.h>

#define THREADS 8
#define ACCOUNTS 20
#define TRANSFERS 150
#define INCREMENTS 150

typedef struct worker {
  int id;
  const char *path;
  int64_t retries, committed_incr;
  int bad_sum;
} worker;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *transfers(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  uint64_t seed = 977ull * (uint64_t)(w->id + 1);
  for (int n = 0; n < TRANSFERS; n++) {
    int a = (int)(rnd(&seed) % ACCOUNTS), b = (int)(rnd(&seed) % ACCOUNTS);
    if (a == b) b = (b + 1) % ACCOUNTS;
    int amount = 1 + (int)(rnd(&seed) % 50);
    for (;;) {
      char sql[300];
      tu_exec(db, "BEGIN");
      if (n % 10 == 0 && tu_int(db, "SELECT sum(balance) FROM acct") != ACCOUNTS * 1000) w->bad_sum++;
      snprintf(sql, sizeof sql, "SELECT balance FROM acct WHERE id=%d", a);
      int64_t ba = tu_int(db, sql);
      sched_yield();
      if (ba >= amount) {
        snprintf(sql, sizeof sql, "UPDATE acct SET balance=balance-%d WHERE id=%d", amount, a);
        tu_exec(db, sql);
        snprintf(sql, sizeof sql, "UPDATE acct SET balance=balance+%d WHERE id=%d", amount, b);
        tu_exec(db, sql);
      }
      int rc = tu_try(db, "COMMIT");
      if (rc == SQLITE_OK) break;
      CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
      CHECK(sqlite3_get_autocommit(db));
      w->retries++;
    }
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void *counters(void *arg);

/* Even workers transfer, odd ones increment. */
static void *bank_worker(void *arg) {
  return ((worker *)arg)->id % 2 ? counters(arg) : transfers(arg);
}

static void *counters(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  uint64_t seed = 31ull * (uint64_t)(w->id + 1);
  for (int n = 0; n < INCREMENTS; n++) {
    char sql[200];
    int c = (int)(rnd(&seed) % 10);
    snprintf(sql, sizeof sql, "UPDATE ctr SET n=n+1 WHERE id=%d", c);
    int rc = tu_try(db, sql); /* autocommit: one statement, one commit */
    if (rc == SQLITE_OK) w->committed_incr++;
    else {
      CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
      w->retries++;
    }
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

int main(void) {
  const char *path = tu_db_path("bank", "bank.db");
  sqlite3 *setup = tu_open(path, "");
  tu_exec(setup, "CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, pad TEXT)");
  /* Padding spreads the accounts over several pages. */
  for (int i = 0; i < ACCOUNTS; i++) {
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO acct VALUES(%d, 1000, printf('%%.900c', 'x'))", i);
    tu_exec(setup, sql);
  }
  tu_exec(setup, "CREATE TABLE ctr(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, pad TEXT)");
  for (int i = 0; i < 10; i++) {
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO ctr VALUES(%d, 0, printf('%%.1500c', 'y'))", i);
    tu_exec(setup, sql);
  }

  worker w[THREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < THREADS; i++) {
    w[i].id = i;
    w[i].path = path;
  }
  tu_threads(THREADS, bank_worker, w, sizeof w[0]);
  int64_t incr = 0, retries = 0;
  int bad = 0;
  for (int i = 0; i < THREADS; i++) {
    incr += w[i].committed_incr;
    retries += w[i].retries;
    bad += w[i].bad_sum;
  }
  int64_t sum = tu_int(setup, "SELECT sum(balance) FROM acct");
  int64_t ctr = tu_int(setup, "SELECT sum(n) FROM ctr");
  printf("test_engine_bank: sum %lld, counters %lld of %lld committed increments, %lld retries\n",
         (long long)sum, (long long)ctr, (long long)incr, (long long)retries);
  CHECK(bad == 0);
  CHECK(sum == ACCOUNTS * 1000);
  CHECK(ctr == incr);
  CHECK(tu_int(setup, "SELECT count(*) FROM acct WHERE balance < 0") == 0);
  CHECK(tu_integrity_ok(setup));
  CHECK_RC(sqlite3_close(setup), SQLITE_OK);

  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_int(s, "SELECT sum(balance) FROM acct") == ACCOUNTS * 1000);
  CHECK(tu_int(s, "SELECT sum(n) FROM ctr") == incr);
  CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_bank: ok\n");
  return 0;
}
