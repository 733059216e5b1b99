/* auto_vacuum through the engine, with many writers at once:
**  - FULL and INCREMENTAL, set on the new database, hold after every commit: the
**    pointer map stays right (integrity_check checks every entry), the database
**    shrinks (FULL at every commit, INCREMENTAL at PRAGMA incremental_vacuum), no
**    row is lost or doubled, and stock SQLite reads the file after the last close;
**  - concurrent growth is never relocated on such a database (renumbered pages would
**    need pointer-map entries the relocation does not write): those commits conflict
**    and their transactions run again (boundary()). Two checks refuse it: relocate.c
**    refuses any database with bytes 52..55 of page 1 set, and the new pointer-map
**    page, which is no b-tree page, fails relocation's reference check; the test
**    checks the outcome (refused, never relocated, integrity), which needs both gone
**    to fail.
**  - the reformat (db.c): without it PRAGMA auto_vacuum reads 0 after FULL on the
**    new database and the test fails at once. */
#include "test_engine_util.h"

#define WORKERS 4
#define ROUNDS 120

typedef struct worker {
  const char *path;
  int id, mode;
  int64_t rows, sum; /* what this worker's committed transactions left */
  int64_t retries;
} worker;

/* Runs one transaction until it commits; 1 when it committed, 0 never. */
static void run_txn(worker *w, sqlite3 *db, const char *sql) {
  for (int attempt = 0;; attempt++) {
    char *err = 0;
    int rc = sqlite3_exec(db, sql, 0, 0, &err);
    if (rc == SQLITE_OK) return;
    int ext = sqlite3_extended_errcode(db);
    sqlite3_free(err);
    sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
    if ((rc & 0xff) != SQLITE_BUSY || attempt > 100000) {
      fprintf(stderr, "worker %d: %s: rc %d (%d)\n", w->id, sql, rc, ext);
      exit(1);
    }
    w->retries++;
    if (attempt % 8 == 7) usleep(100);
  }
}

static void *work(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  char sql[512];
  uint64_t seq = 0;
  for (int r = 0; r < ROUNDS; r++) {
    /* Three rows of this worker with big payloads (overflow pages), then every
    ** other round the older half of its rows goes: pages are freed and, in FULL
    ** mode, the file shrinks at that commit. */
    int64_t base = (int64_t)w->id * 1000000 + (int64_t)seq;
    seq += 3;
    snprintf(sql, sizeof sql,
             "BEGIN; INSERT INTO t VALUES(%lld, %d, randomblob(1500));"
             "INSERT INTO t VALUES(%lld, %d, randomblob(200));"
             "INSERT INTO t VALUES(%lld, %d, randomblob(3000)); COMMIT",
             (long long)base, w->id, (long long)base + 1, w->id, (long long)base + 2, w->id);
    run_txn(w, db, sql);
    w->rows += 3;
    w->sum += 3 * base + 3;
    if (r % 2 == 1) {
      int64_t cut = (int64_t)w->id * 1000000 + (int64_t)(seq / 2);
      /* The rows to go, counted in the same snapshot as the delete. */
      for (;;) {
        int rc = sqlite3_exec(db, "BEGIN", 0, 0, 0);
        CHECK_RC(rc, SQLITE_OK);
        snprintf(sql, sizeof sql, "SELECT count(*), coalesce(sum(id),0) FROM t WHERE w=%d AND id<%lld",
                 w->id, (long long)cut);
        sqlite3_stmt *st = 0;
        CHECK_RC(sqlite3_prepare_v2(db, sql, -1, &st, 0), SQLITE_OK);
        CHECK_RC(sqlite3_step(st), SQLITE_ROW);
        int64_t n = sqlite3_column_int64(st, 0), s = sqlite3_column_int64(st, 1);
        sqlite3_finalize(st);
        snprintf(sql, sizeof sql, "DELETE FROM t WHERE w=%d AND id<%lld", w->id, (long long)cut);
        rc = sqlite3_exec(db, sql, 0, 0, 0);
        if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
        if (rc == SQLITE_OK) {
          w->rows -= n;
          w->sum -= s;
          break;
        }
        CHECK((rc & 0xff) == SQLITE_BUSY);
        sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
        w->retries++;
      }
    }
    if (w->mode == 2 && r % 5 == 4) run_txn(w, db, "PRAGMA incremental_vacuum(20)");
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void check_rows(sqlite3 *db, worker *ws) {
  for (int i = 0; i < WORKERS; i++) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM t WHERE w=%d", i);
    int64_t n = tu_int(db, sql);
    snprintf(sql, sizeof sql, "SELECT coalesce(sum(id),0) FROM t WHERE w=%d", i);
    int64_t s = tu_int(db, sql);
    if (n != ws[i].rows || s != ws[i].sum) {
      fprintf(stderr, "worker %d: %lld rows (sum %lld), expected %lld (sum %lld)\n", i,
              (long long)n, (long long)s, (long long)ws[i].rows, (long long)ws[i].sum);
      exit(1);
    }
  }
}

static void run_mode(const char *dir, int mode) {
  char path[400];
  snprintf(path, sizeof path, "%s/av%d.db", dir, mode);
  /* A 1 MiB log: compactions run (and truncate the file) while the workers shrink and
  ** grow the database. */
  sqlite3 *db = tu_open(path, "mw_log_max_mb=1");
  tu_exec(db, mode == 1 ? "PRAGMA auto_vacuum=FULL" : "PRAGMA auto_vacuum=INCREMENTAL");
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == mode);
  tu_exec(db, "PRAGMA page_size=1024"); /* many pages, many pointer-map entries */
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER, pad BLOB);"
              "CREATE INDEX t_w ON t(w, id)");
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == mode);

  worker ws[WORKERS];
  memset(ws, 0, sizeof ws);
  for (int i = 0; i < WORKERS; i++) {
    ws[i].path = path;
    ws[i].id = i;
    ws[i].mode = mode;
  }
  tu_threads(WORKERS, work, ws, sizeof ws[0]);

  CHECK(tu_integrity_ok(db));
  check_rows(db, ws);
  CHECK(tu_int(db, "PRAGMA auto_vacuum") == mode);
  CHECK(tu_int(db, "PRAGMA page_size") == 1024);
  if (mode == 2) tu_exec(db, "PRAGMA incremental_vacuum");
  /* Shrunk: no free page is left behind, in either mode now. */
  CHECK(tu_int(db, "PRAGMA freelist_count") == 0);
  int64_t pages = tu_int(db, "PRAGMA page_count");
  tu_exec(db, "DELETE FROM t");
  if (mode == 2) tu_exec(db, "PRAGMA incremental_vacuum");
  int64_t after = tu_int(db, "PRAGMA page_count");
  CHECK(after < pages && after <= 5);
  for (int i = 0; i < WORKERS; i++) ws[i].rows = ws[i].sum = 0;
  /* Grows again over the pages cut off. */
  tu_exec(db, "INSERT INTO t VALUES(1, 0, randomblob(20000))");
  ws[0].rows = 1;
  ws[0].sum = 1;
  CHECK(tu_integrity_ok(db));
  check_rows(db, ws);
  CHECK(tu_stat(db, MW_STAT_COMPACTIONS) > 2);
  int64_t retries = 0;
  for (int i = 0; i < WORKERS; i++) retries += ws[i].retries;
  printf("test_engine_autovacuum: mode %d: %lld pages at the end of the run, %lld retries, "
         "%lld compactions\n", mode, (long long)pages, (long long)retries,
         (long long)tu_stat(db, MW_STAT_COMPACTIONS));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);

  /* Stock SQLite reads the file after the last close: the mode, the rows. */
  sqlite3 *st = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(st));
  CHECK(tu_int(st, "PRAGMA auto_vacuum") == mode);
  /* The compactions truncated the file to the database's size. */
  FILE *f = fopen(path, "rb");
  CHECK(f != 0 && fseek(f, 0, SEEK_END) == 0);
  long bytes = ftell(f);
  fclose(f);
  CHECK(bytes == (long)tu_int(st, "PRAGMA page_count") * 1024);
  CHECK(tu_int(st, "PRAGMA page_size") == 1024);
  check_rows(st, ws);
  CHECK_RC(sqlite3_close(st), SQLITE_OK);
}

/* Two transactions that grow the database at once past a pointer-map boundary: with
** 1024-byte pages the pointer-map pages are 2, 207, 412, ...; from 206 pages, each
** commit writes page 1, the new pointer-map page 207 and new pages after it, and
** nothing else of the other's: on a database without auto-vacuum, exactly the
** growth that relocation publishes. Here the second commit must conflict (and
** then commit on a fresh snapshot), never be relocated. */
static void boundary(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/edge.db", dir);
  sqlite3 *a = tu_open(path, "");
  tu_exec(a, "PRAGMA auto_vacuum=FULL; PRAGMA page_size=1024;"
             "CREATE TABLE fill(x); CREATE TABLE ta(x); CREATE TABLE tb(x)");
  /* Exactly 206 pages: rows of one page each in; FULL mode gives pages back at once
  ** when one goes. */
  int64_t n = tu_int(a, "PRAGMA page_count");
  for (int guard = 0; n != 206 && guard < 2000; guard++) {
    if (n < 206) tu_exec(a, "INSERT INTO fill VALUES(randomblob(600))");
    else tu_exec(a, "DELETE FROM fill WHERE rowid=(SELECT max(rowid) FROM fill)");
    n = tu_int(a, "PRAGMA page_count");
    if (n > 206 && guard % 7 == 6) tu_exec(a, "INSERT INTO fill VALUES(randomblob(100))");
  }
  CHECK(n == 206);
  sqlite3 *b = tu_open(path, "");
  tu_exec(a, "BEGIN; SELECT count(*) FROM ta");
  tu_exec(b, "BEGIN; SELECT count(*) FROM tb");
  tu_exec(a, "INSERT INTO ta VALUES(randomblob(3000)); COMMIT");
  CHECK(tu_int(a, "PRAGMA page_count") > 207);
  int64_t refused = tu_stat(b, MW_STAT_RELOCATE_REFUSED);
  int rc = tu_try(b, "INSERT INTO tb VALUES(randomblob(3000))");
  if (rc == SQLITE_OK) rc = tu_try(b, "COMMIT");
  CHECK(rc == SQLITE_BUSY_SNAPSHOT);
  tu_try(b, "ROLLBACK"); /* SQLite may have rolled back already */
  CHECK(tu_stat(b, MW_STAT_RELOCATIONS) == 0);
  CHECK(tu_stat(b, MW_STAT_RELOCATE_REFUSED) == refused + 1);
  tu_exec(b, "INSERT INTO tb VALUES(randomblob(3000))");
  CHECK(tu_integrity_ok(b));
  CHECK(tu_int(b, "SELECT count(*) FROM ta") == 1 && tu_int(b, "SELECT count(*) FROM tb") == 1);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  sqlite3 *st = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(st));
  CHECK_RC(sqlite3_close(st), SQLITE_OK);
  printf("test_engine_autovacuum: growth past a pointer-map page: refused, not relocated\n");
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("autovacuum");
  run_mode(dir, 1);
  run_mode(dir, 2);
  boundary(dir);
  tu_rmdir();
  printf("test_engine_autovacuum: ok\n");
  return 0;
}
