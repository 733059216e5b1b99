/* Concurrent growth on the commit path (growth.c, docs/design/growth.md):
**  - a later commit of a snapshot whose first commit was relocated is refused;
**  - 16 threads insert 100-row transactions into one table, each into its own key
**    range: relocations happen, retries stay rare, every row is there once;
**  - 16 threads insert interleaved keys into one table with an index (they share
**    leaves: many conflicts, but every row is there exactly once);
**  - integrity_check through the engine, and after the last close through Debian's
**    stock /usr/bin/sqlite3. */
#include "test_engine_util.h"

#define THREADS 16
#define TXNS 20
#define ROWS 100
#define SEED 400 /* rows per key range before the concurrent phase */

typedef struct worker {
  int id, interleaved;
  const char *path, *table;
  int64_t retries, commits, relocations, merges, refused, cw, cr;
} worker;

static void *inserter(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  char sql[200];
  snprintf(sql, sizeof sql, "INSERT INTO %s VALUES(?, ?)", w->table);
  sqlite3_stmt *ins = 0;
  CHECK_RC(sqlite3_prepare_v2(db, sql, -1, &ins, 0), SQLITE_OK);
  for (int t = 0; t < TXNS; t++) {
    for (;;) {
      tu_exec(db, "BEGIN");
      for (int r = 0; r < ROWS; r++) {
        int64_t n = (int64_t)t * ROWS + r;
        int64_t k = w->interleaved ? n * THREADS + w->id : (int64_t)w->id * 1000000 + SEED + n;
        char v[64];
        snprintf(v, sizeof v, "row %lld of thread %d, some padding text", (long long)k, w->id);
        sqlite3_bind_int64(ins, 1, k);
        sqlite3_bind_text(ins, 2, v, -1, SQLITE_TRANSIENT);
        CHECK_RC(sqlite3_step(ins), SQLITE_DONE);
        sqlite3_reset(ins);
      }
      int rc = tu_try(db, "COMMIT");
      if (rc == SQLITE_OK) break;
      CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
      CHECK(sqlite3_get_autocommit(db));
      w->retries++;
    }
  }
  sqlite3_finalize(ins);
  w->commits = tu_stat(db, MW_STAT_COMMITS);
  w->relocations = tu_stat(db, MW_STAT_RELOCATIONS);
  w->merges = tu_stat(db, MW_STAT_MERGES);
  w->refused = tu_stat(db, MW_STAT_RELOCATE_REFUSED);
  w->cw = tu_stat(db, MW_STAT_CONFLICT_WRITE);
  w->cr = tu_stat(db, MW_STAT_CONFLICT_READ);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void run_phase(const char *path, const char *table, int interleaved, int64_t *pRetries,
                      int64_t *pCommits, int64_t *pReloc, int64_t *pMerges) {
  worker w[THREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < THREADS; i++) {
    w[i].id = i;
    w[i].interleaved = interleaved;
    w[i].path = path;
    w[i].table = table;
  }
  tu_threads(THREADS, inserter, w, sizeof w[0]);
  int64_t retries = 0, commits = 0, reloc = 0, merges = 0, refused = 0, cw = 0, cr = 0;
  for (int i = 0; i < THREADS; i++) {
    retries += w[i].retries;
    commits += w[i].commits;
    reloc += w[i].relocations;
    merges += w[i].merges;
    refused += w[i].refused;
    cw += w[i].cw;
    cr += w[i].cr;
  }
  printf("test_growth: %s %s: %lld commits, %lld retries, %lld relocations, %lld merges, "
         "%lld relocations refused, conflicts: %lld write, %lld read\n",
         table, interleaved ? "interleaved" : "own ranges", (long long)commits,
         (long long)retries, (long long)reloc, (long long)merges, (long long)refused, (long long)cw,
         (long long)cr);
  *pRetries = retries;
  *pCommits = commits;
  *pReloc = reloc;
  *pMerges = merges;
}

/* Every key of the phase exactly once, nothing else. */
static void check_rows(sqlite3 *db, const char *table, int interleaved) {
  char sql[300];
  int64_t n = (int64_t)THREADS * (TXNS * ROWS + (interleaved ? 0 : SEED));
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  CHECK(tu_int(db, sql) == n);
  snprintf(sql, sizeof sql, "SELECT count(DISTINCT v) FROM %s", table);
  CHECK(tu_int(db, sql) == n);
  if (interleaved) {
    snprintf(sql, sizeof sql, "SELECT min(k) = 0 AND max(k) = %lld FROM %s", (long long)n - 1, table);
  } else {
    snprintf(sql, sizeof sql,
             "SELECT count(*) = 0 FROM %s WHERE k %% 1000000 >= %d + %d OR k / 1000000 >= %d "
             "OR v <> 'row ' || k || ' of thread ' || (k / 1000000) || ', some padding text'",
             table, SEED, TXNS * ROWS, THREADS);
  }
  CHECK(tu_int(db, sql) == 1);
}

/* A relocated first commit, then a second commit of the same snapshot: refused. */
static void stale_snapshot(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/stale.db", dir);
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  tu_exec(a, "CREATE TABLE g1(k INTEGER PRIMARY KEY, v BLOB); CREATE TABLE g2(k INTEGER PRIMARY KEY, v BLOB);"
             "CREATE TABLE h(k INTEGER PRIMARY KEY); INSERT INTO h VALUES(1)");
  sqlite3_stmt *cur = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "SELECT k FROM h", -1, &cur, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(cur), SQLITE_ROW); /* a's snapshot stays open */
  tu_exec(b, "INSERT INTO g1 VALUES(1, randomblob(20000))");
  tu_exec(a, "INSERT INTO g2 VALUES(1, randomblob(20000))"); /* grows past b: relocated */
  CHECK(tu_stat(a, MW_STAT_RELOCATIONS) == 1);
  CHECK_RC(tu_try(a, "INSERT INTO g2 VALUES(2, randomblob(300))"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_RELOCATE_STALE) == 1);
  sqlite3_finalize(cur);
  tu_exec(a, "INSERT INTO g2 VALUES(2, randomblob(300))"); /* a fresh snapshot: fine */
  CHECK(tu_int(b, "SELECT count(*) FROM g2") == 2);
  CHECK(tu_int(b, "SELECT length(v) FROM g2 WHERE k=1") == 20000);
  CHECK(tu_integrity_ok(b));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

int main(void) {
  const char *path = tu_db_path("growth", "g.db");
  stale_snapshot(tu_dir);

  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE own(k INTEGER PRIMARY KEY, v TEXT);"
              "CREATE TABLE mix(k INTEGER PRIMARY KEY, v TEXT); CREATE INDEX mix_v ON mix(v)");

  /* Each key range starts with rows of its own (several leaves apart): the ranges
  ** then share no leaf, as in a table that already holds data. Without that, the
  ** first transactions of all threads hit the same leaf: real conflicts. */
  tu_exec(db, "BEGIN");
  for (int t = 0; t < THREADS; t++) {
    char sql[300];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n + 1 < %d) "
             "INSERT INTO own SELECT %d * 1000000 + n, 'row ' || (%d * 1000000 + n) || ' of thread %d, "
             "some padding text' FROM c", SEED, t, t, t);
    tu_exec(db, sql);
  }
  tu_exec(db, "COMMIT");
  int64_t retries, commits, reloc, merges;
  run_phase(path, "own", 0, &retries, &commits, &reloc, &merges);
  CHECK(commits == (int64_t)THREADS * TXNS);
  CHECK(reloc > 0);
  CHECK(merges > 0);
  /* Without relocation nearly every concurrent insert is refused. */
  CHECK(retries * 5 < commits);
  check_rows(db, "own", 0);

  run_phase(path, "mix", 1, &retries, &commits, &reloc, &merges);
  CHECK(commits == (int64_t)THREADS * TXNS);
  check_rows(db, "mix", 1);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);

  /* The file after the last close, for Debian's stock sqlite3. */
  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "test \"$(/usr/bin/sqlite3 '%s' 'PRAGMA integrity_check; SELECT count(*) FROM own; "
           "SELECT count(*) FROM mix')\" = \"$(printf 'ok\\n%d\\n%d' )\"",
           path, THREADS * (TXNS * ROWS + SEED), THREADS * TXNS * ROWS);
  sqlite3 *st = tu_stock_check("test_growth", path, cmd);
  if (st) { /* no Debian sqlite3 here: the vendored library, plain unix VFS */
    check_rows(st, "own", 0);
    check_rows(st, "mix", 1);
    CHECK_RC(sqlite3_close(st), SQLITE_OK);
  }
  tu_rmdir();
  printf("test_growth: ok\n");
  return 0;
}
