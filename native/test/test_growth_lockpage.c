/* Writers that relocate while the database crosses the lock-byte page (the page
** holding byte 2^30, which SQLite never uses): page size 65536, a file of 16379
** pages (a 1 GiB blob whose overflow chain is written sparsely: only each page's
** next pointer), then 8 threads insert rows and 100 KB blobs concurrently, so the
** file grows past page 16385. A relocation whose old or new range holds that page
** must be refused (counted as MW_STAT_RELOCATE_LOCK_PAGE; one case is built
** deterministically with two connections first), the transaction retried,
** and every commit must end correct: all rows there, integrity_check passes
** through the engine and, after the last close, through Debian's stock sqlite3. */
#include "test_engine_util.h"
#include "growth/relocate.h"
#include <fcntl.h>
#include <unistd.h>

#define PGSZ 65536u
#define THREADS 8
#define TXNS 12
#define ROWS 20

static const char *path;

static int put_varint(unsigned char *p, uint64_t v) {
  unsigned char tmp[10];
  int n = 0;
  do {
    tmp[n++] = (unsigned char)(v & 0x7f);
    v >>= 7;
  } while (v);
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(tmp[n - 1 - i] | (i < n - 1 ? 0x80 : 0));
  return n;
}

/* Page 2 of big(k, v) gets one row: k = 1, a zero blob whose overflow chain is
** exactly pages 4..m; page 1 says the file has m pages. */
static void make_big(uint32_t m) {
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0);
  unsigned char *pg = calloc(1, PGSZ);
  CHECK(pg != 0);
  uint32_t usable = PGSZ;
  uint32_t minl = (usable - 12) * 32 / 255 - 23;
  uint64_t payload = minl + (uint64_t)(m - 3) * (usable - 4); /* K = M: exact pages */
  int ovfl = 0;
  CHECK(mw_local_payload(MW_BTREE_LEAF_TABLE, payload, usable, &ovfl) == minl && ovfl);
  /* Record header, 7 bytes: its length, NULL for k (the rowid), a 5-byte serial type. */
  uint64_t blob = payload - 7;
  unsigned char cell[16 + 8300];
  int n = put_varint(cell, payload);
  n += put_varint(cell + n, 1);
  unsigned char *rec = cell + n;
  rec[0] = 7;
  rec[1] = 0;
  int st = put_varint(rec + 2, blob * 2 + 12);
  CHECK(st == 5);
  memset(rec + 7, 0, minl - 7);
  n += (int)minl;
  mw_put4(cell + n, 4);
  n += 4;
  uint32_t off = PGSZ - (uint32_t)n;
  pg[0] = MW_BTREE_LEAF_TABLE;
  pg[4] = 1;
  pg[5] = (unsigned char)(off >> 8);
  pg[6] = (unsigned char)off;
  pg[8] = (unsigned char)(off >> 8);
  pg[9] = (unsigned char)off;
  memcpy(pg + off, cell, (size_t)n);
  CHECK(pwrite(fd, pg, PGSZ, PGSZ) == (ssize_t)PGSZ);
  for (uint32_t p = 4; p <= m; p++) {
    unsigned char nx[4];
    mw_put4(nx, p < m ? p + 1 : 0);
    CHECK(pwrite(fd, nx, 4, (off_t)(p - 1) * PGSZ) == 4);
  }
  CHECK(ftruncate(fd, (off_t)m * PGSZ) == 0);
  unsigned char sz[4];
  mw_put4(sz, m);
  CHECK(pwrite(fd, sz, 4, 28) == 4);
  CHECK(fsync(fd) == 0);
  CHECK(close(fd) == 0);
  free(pg);
}

typedef struct worker { int id; int64_t retries, lockpage, reloc, refused; } worker;

/* Each transaction on a connection of its own: a connection's losses and heat (the
** hot-spot queue, turn.c) start from zero, so the transactions overlap and relocate
** instead of queueing one after the other; the queue has its own tests. */
static void *inserter(void *arg) {
  worker *w = arg;
  for (int t = 0; t < TXNS; t++) {
    sqlite3 *db = tu_open(path, "");
    sqlite3_stmt *ins = 0;
    CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?, ?, ?)", -1, &ins, 0), SQLITE_OK);
    for (;;) {
      tu_exec(db, "BEGIN");
      for (int r = 0; r < ROWS; r++) {
        int64_t k = (int64_t)w->id * 1000000 + t * ROWS + r;
        sqlite3_bind_int64(ins, 1, k);
        sqlite3_bind_text(ins, 2, "some text of a row", -1, SQLITE_STATIC);
        if (r == 0) sqlite3_bind_zeroblob(ins, 3, 100000); else sqlite3_bind_null(ins, 3);
        CHECK_RC(sqlite3_step(ins), SQLITE_DONE);
        sqlite3_reset(ins);
      }
      int rc = tu_try(db, "COMMIT");
      if (rc == SQLITE_OK) break;
      CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
      w->retries++;
    }
    sqlite3_finalize(ins);
    w->lockpage += tu_stat(db, MW_STAT_RELOCATE_LOCK_PAGE);
    w->reloc += tu_stat(db, MW_STAT_RELOCATIONS);
    w->refused += tu_stat(db, MW_STAT_RELOCATE_REFUSED);
    CHECK_RC(sqlite3_close(db), SQLITE_OK);
  }
  return 0;
}

int main(void) {
  path = tu_db_path("growth-lockpage", "l.db");
  uint32_t lock_page = mw_lock_byte_page(PGSZ);
  CHECK(lock_page == 16385);

  /* A stock connection lays out the schema: page 2 big, page 3 t. */
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  tu_exec(s, "PRAGMA page_size=65536; PRAGMA journal_mode=WAL;"
             "CREATE TABLE big(k INTEGER PRIMARY KEY, v BLOB);"
             "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT, b BLOB)");
  CHECK(tu_int(s, "PRAGMA page_count") == 3);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  make_big(lock_page - 6);

  sqlite3 *db = tu_open(path, "");
  CHECK(tu_int(db, "PRAGMA page_count") == lock_page - 6);
  CHECK(tu_int(db, "SELECT typeof(v) = 'blob' FROM big") == 1);

  /* Deterministic first: a's snapshot has 16379 pages, b grows to 16381, a's four
  ** new pages (16380..16383) would move to 16382..16385, onto page 16385: refused. */
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  tu_exec(a, "BEGIN");
  CHECK(tu_int(a, "SELECT count(*) FROM t") == 0);
  tu_exec(b, "INSERT INTO big VALUES(2, zeroblob(150000))");
  CHECK(tu_int(b, "PRAGMA page_count") == lock_page - 4);
  tu_exec(a, "INSERT INTO t VALUES(-1, 'a', zeroblob(300000))");
  CHECK_RC(tu_try(a, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(a, MW_STAT_RELOCATE_LOCK_PAGE) == 1);
  tu_exec(a, "INSERT INTO t VALUES(-1, 'a', zeroblob(300000))"); /* at the newest: fine */
  CHECK(tu_int(b, "PRAGMA page_count") > lock_page);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);

  worker w[THREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < THREADS; i++) w[i].id = i;
  tu_threads(THREADS, inserter, w, sizeof w[0]);
  int64_t retries = 0, lockpage = 0, reloc = 0, refused = 0;
  for (int i = 0; i < THREADS; i++) {
    retries += w[i].retries;
    lockpage += w[i].lockpage;
    reloc += w[i].reloc;
    refused += w[i].refused;
  }
  int64_t pages = tu_int(db, "PRAGMA page_count");
  printf("test_growth_lockpage: %lld pages (lock-byte page %u), %lld retries, %lld relocations, "
         "%lld refused, %lld of them across the lock-byte page\n",
         (long long)pages, lock_page, (long long)retries, (long long)reloc, (long long)refused,
         (long long)lockpage);
  CHECK(pages > lock_page + 20);
  CHECK(reloc > 0);
  CHECK(tu_int(db, "SELECT count(*) FROM big") == 2);
  CHECK(tu_int(db, "SELECT count(*) FROM t") == THREADS * TXNS * ROWS + 1);
  CHECK(tu_int(db, "SELECT count(*) FROM t WHERE b IS NOT NULL AND length(b) = 100000") ==
        THREADS * TXNS);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);

  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "test \"$(/usr/bin/sqlite3 '%s' 'PRAGMA integrity_check; SELECT count(*) FROM t')\" = "
           "\"$(printf 'ok\\n%d')\"", path, THREADS * TXNS * ROWS + 1);
  sqlite3 *st = tu_stock_check("test_growth_lockpage", path, cmd);
  if (st) { /* no Debian sqlite3 here: the vendored library, plain unix VFS */
    CHECK(tu_int(st, "SELECT count(*) FROM t") == THREADS * TXNS * ROWS + 1);
    CHECK_RC(sqlite3_close(st), SQLITE_OK);
  }
  tu_rmdir();

  printf("test_growth_lockpage: ok\n");
  return 0;
}
