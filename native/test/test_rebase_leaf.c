/* The three-way merge of a table leaf page (native/src/rebase/leaf_merge.c), checked
** against SQLite itself: 600 random rounds, each
**   - makes base.db with stock SQLite (rollback journal: the file holds every page): one
**     table whose root, page 2, is a leaf of 5 to 40 rows;
**   - copies it twice and changes each copy with stock SQLite: "ours" and "theirs" each
**     update, insert and delete a few random rows;
**   - merges page 2 of the three files, with a few random rows declared read;
**   - expects what the rows say: refused as same_row or read_changed at the first row
**     that theirs changed and that ours changed or declared read; otherwise merged (or
**     does_not_fit). A merged page is written into a copy of theirs, which must pass
**     integrity_check and hold theirs' rows with ours' changes applied.
** Also: malformed and foreign pages are refused, never trusted. */
#include "test_engine_util.h"
#include "rebase/rebase.h"

#define PS 4096
#define KEYS 200
#define VLEN 401
#define HOT 60 /* keys drawn from 1..HOT: the two sides meet often */

typedef struct rows { int has[KEYS + 1]; char v[KEYS + 1][VLEN + 1]; } rows;

static uint64_t seed = 0x1eaf5eedull;
static uint64_t rnd(void) {
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return seed;
}

static const char *file_in(const char *name) { return tu_db_path("rebase_leaf", name); }

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  CHECK(a && b);
  char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, a)) > 0) CHECK(fwrite(buf, 1, n, b) == n);
  fclose(a);
  CHECK(fclose(b) == 0);
}

static long page_of(const char *path, uint32_t pgno, unsigned char *out) {
  FILE *f = fopen(path, "rb");
  CHECK(f != 0);
  CHECK(fseek(f, (long)(pgno - 1) * PS, SEEK_SET) == 0);
  CHECK(fread(out, 1, PS, f) == PS);
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long size = ftell(f);
  fclose(f);
  return size;
}

static void put_page(const char *path, uint32_t pgno, const unsigned char *in) {
  FILE *f = fopen(path, "r+b");
  CHECK(f != 0);
  CHECK(fseek(f, (long)(pgno - 1) * PS, SEEK_SET) == 0);
  CHECK(fwrite(in, 1, PS, f) == PS);
  CHECK(fclose(f) == 0);
}

static void load(const char *path, rows *r) {
  memset(r, 0, sizeof *r);
  sqlite3 *db = tu_open_stock(path, SQLITE_OPEN_READONLY);
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT id, v FROM t", -1, &st, 0), SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int k = sqlite3_column_int(st, 0);
    CHECK(k >= 1 && k <= KEYS);
    r->has[k] = 1;
    snprintf(r->v[k], sizeof r->v[k], "%s", (const char *)sqlite3_column_text(st, 1));
  }
  sqlite3_finalize(st);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

static int vmax = 60; /* the longest value of the round: 60 or 400 (a page nearly full) */
static void random_value(char *v) {
  int len = 1 + (int)(rnd() % (uint64_t)vmax);
  for (int i = 0; i < len; i++) v[i] = (char)('a' + rnd() % 26);
  v[len] = 0;
}

/* A few random updates, inserts and deletes through stock SQLite. */
static void change(const char *path, int nops) {
  sqlite3 *db = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  for (int i = 0; i < nops; i++) {
    char v[VLEN + 1], q[600];
    random_value(v);
    int k = 1 + (int)(rnd() % HOT);
    switch (rnd() % 3) {
      case 0: snprintf(q, sizeof q, "INSERT OR REPLACE INTO t VALUES(%d, '%s')", k, v); break;
      case 1: snprintf(q, sizeof q, "UPDATE t SET v = '%s' WHERE id = %d", v, k); break;
      default: snprintf(q, sizeof q, "DELETE FROM t WHERE id = %d", k); break;
    }
    tu_exec(db, q);
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

/* base.db from base_sql, ours.db and theirs.db its copies changed by their SQL; page 2 of
** each into the buffers. */
static void three(const char *const paths[3], const char *base_sql, const char *ours_sql,
                  const char *theirs_sql, unsigned char *pages[3]) {
  remove(paths[0]);
  sqlite3 *db = tu_open_stock(paths[0], SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  tu_exec(db, base_sql);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  const char *sql[3] = { 0, ours_sql, theirs_sql };
  for (int i = 1; i < 3; i++) {
    copy_file(paths[0], paths[i]);
    db = tu_open_stock(paths[i], SQLITE_OPEN_READWRITE);
    tu_exec(db, sql[i]);
    CHECK_RC(sqlite3_close(db), SQLITE_OK);
  }
  for (int i = 0; i < 3; i++) (void)page_of(paths[i], 2, pages[i]);
}

static int differs(const rows *a, const rows *b, int k) {
  return a->has[k] != b->has[k] || (a->has[k] && strcmp(a->v[k], b->v[k]) != 0);
}

int main(void) {
  char *p_base = strdup(file_in("base.db")), *p_ours = strdup(file_in("ours.db"));
  char *p_theirs = strdup(file_in("theirs.db")), *p_out = strdup(file_in("out.db"));
  size_t scratch_size = mw_leaf_merge_scratch_size(PS);
  void *scratch = malloc(scratch_size);
  unsigned char base[PS], ours[PS], theirs[PS], out[PS];
  int counts[MW_LEAF_RESULT_COUNT] = { 0 }, skipped = 0;
  const int rounds = 600;
  for (int round = 0; round < rounds; round++) {
    remove(p_base);
    sqlite3 *db = tu_open_stock(p_base, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    tu_exec(db, "PRAGMA page_size=4096; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    vmax = rnd() % 3 ? 60 : 400;
    /* Short values: 5 to 40 rows. Long ones: rows until about 3,500 bytes of values. */
    int n = vmax == 60 ? 5 + (int)(rnd() % 36) : 1000, bytes = 0;
    for (int i = 0; i < n && bytes < 3500; i++) {
      char v[VLEN + 1], q[600];
      random_value(v);
      if (vmax > 60) bytes += (int)strlen(v);
      snprintf(q, sizeof q, "INSERT OR REPLACE INTO t VALUES(%d, '%s')", 1 + (int)(rnd() % HOT), v);
      tu_exec(db, q);
    }
    CHECK_RC(sqlite3_close(db), SQLITE_OK);
    copy_file(p_base, p_ours);
    copy_file(p_base, p_theirs);
    change(p_ours, 1 + (int)(rnd() % 4));
    change(p_theirs, 1 + (int)(rnd() % 6));
    long sb = page_of(p_base, 2, base), so = page_of(p_ours, 2, ours), st = page_of(p_theirs, 2, theirs);
    /* Only rounds where page 2 stayed a leaf and no side grew the file. */
    if (base[0] != 13 || ours[0] != 13 || theirs[0] != 13 || so != sb || st != sb) {
      skipped++;
      continue;
    }
    rows rb, ro, rt;
    load(p_base, &rb);
    load(p_ours, &ro);
    load(p_theirs, &rt);
    int64_t reads[3];
    size_t nreads = rnd() % 4;
    for (size_t i = 0; i < nreads; i++) reads[i] = 1 + (int64_t)(rnd() % HOT);
    for (size_t i = 1; i < nreads; i++) /* sorted, as the engine passes them */
      for (size_t j = i; j > 0 && reads[j - 1] > reads[j]; j--) {
        int64_t x = reads[j];
        reads[j] = reads[j - 1];
        reads[j - 1] = x;
      }
    /* What the rows say: the first key theirs changed that ours changed or read. */
    int want = MW_LEAF_OK, nours = 0;
    for (int k = 1; k <= KEYS; k++) nours += differs(&rb, &ro, k);
    for (int k = 1; k <= KEYS && want == MW_LEAF_OK; k++) {
      if (!differs(&rb, &rt, k)) continue;
      int read = 0;
      for (size_t i = 0; i < nreads; i++) read |= reads[i] == k;
      if (differs(&rb, &ro, k)) want = MW_LEAF_SAME_ROW;
      else if (read) want = MW_LEAF_READ_CHANGED;
    }
    int left = 0; /* rows of the merge: theirs' with ours' changes */
    for (int k = 1; k <= KEYS; k++) left += differs(&rb, &ro, k) ? ro.has[k] : rt.has[k];
    if (want == MW_LEAF_OK && left == 0) want = MW_LEAF_EMPTY;
    int changed = -1;
    mw_leaf_merge_result r = mw_merge_table_leaf(base, ours, theirs, 2, PS, PS, reads, nreads, out,
                                                 scratch, scratch_size, &changed);
    counts[r]++;
    CHECK(changed == nours);
    if (r != want && !(want == MW_LEAF_OK && r == MW_LEAF_DOES_NOT_FIT)) {
      fprintf(stderr, "round %d: merge says %s, the rows say %s\n", round,
              mw_leaf_merge_result_name(r), mw_leaf_merge_result_name(want));
      exit(1);
    }
    if (r != MW_LEAF_OK) continue;
    copy_file(p_theirs, p_out);
    put_page(p_out, 2, out);
    rows rm, want_rows = rt;
    for (int k = 1; k <= KEYS; k++)
      if (differs(&rb, &ro, k)) {
        want_rows.has[k] = ro.has[k];
        memcpy(want_rows.v[k], ro.v[k], sizeof ro.v[k]);
      }
    sqlite3 *m = tu_open_stock(p_out, SQLITE_OPEN_READONLY);
    CHECK(tu_integrity_ok(m));
    CHECK_RC(sqlite3_close(m), SQLITE_OK);
    load(p_out, &rm);
    for (int k = 1; k <= KEYS; k++) {
      if (!differs(&rm, &want_rows, k)) continue;
      fprintf(stderr, "round %d: row %d is %s '%s', wanted %s '%s'\n", round, k,
              rm.has[k] ? "there" : "absent", rm.v[k], want_rows.has[k] ? "there" : "absent",
              want_rows.v[k]);
      exit(1);
    }
  }
  printf("test_rebase_leaf: %d rounds (%d skipped: a split or growth):", rounds, skipped);
  for (int i = 0; i < MW_LEAF_RESULT_COUNT; i++)
    if (counts[i]) printf(" %s %d", mw_leaf_merge_result_name(i), counts[i]);
  printf("\n");
  CHECK(counts[MW_LEAF_OK] > rounds / 5);
  CHECK(counts[MW_LEAF_SAME_ROW] > 0 && counts[MW_LEAF_READ_CHANGED] > 0);
  CHECK(counts[MW_LEAF_DOES_NOT_FIT] > 0);

  /* Each side deleted one of the two rows: no row would be left. */
  const char *const paths[3] = { p_base, p_ours, p_theirs };
  unsigned char *pages[3] = { base, ours, theirs };
  three(paths, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES(1, 'a'), (2, 'b')",
        "DELETE FROM t WHERE id = 1", "DELETE FROM t WHERE id = 2", pages);
  int nc;
  CHECK(mw_merge_table_leaf(base, ours, theirs, 2, PS, PS, 0, 0, out, scratch, scratch_size, &nc) ==
        MW_LEAF_EMPTY);
  CHECK(nc == 1);

  /* More changes than a page has cells: ours deletes each of 480 tiny rows and inserts
  ** 480 others (960 changes; a 4 KiB page holds at most 682 cells). The scratch must
  ** hold them all (under ASan an overrun is a report). */
  three(paths,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<480) "
        "INSERT INTO t SELECT i * 2, NULL FROM n",
        "DELETE FROM t; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<480) "
        "INSERT INTO t SELECT i * 2 - 1, NULL FROM n",
        "UPDATE t SET v = 'x' WHERE id = 2000", pages);
  CHECK(base[0] == 13 && ours[0] == 13);
  CHECK(mw_merge_table_leaf(base, ours, theirs, 2, PS, PS, 0, 0, out, scratch, scratch_size, &nc) ==
        MW_LEAF_OK);
  CHECK(nc == 960);

  /* Refused, never trusted: not a table leaf, a cell pointer out of the page, keys out of
  ** order, page 1, a short scratch. */
  memcpy(out, base, PS);
  out[0] = 10;
  int ch;
  CHECK(mw_merge_table_leaf(base, out, theirs, 2, PS, PS, 0, 0, ours, scratch, scratch_size, &ch) ==
        MW_LEAF_NOT_TABLE_LEAF);
  memcpy(out, base, PS);
  out[8] = 0xff, out[9] = 0xff;
  CHECK(mw_merge_table_leaf(base, out, theirs, 2, PS, PS, 0, 0, ours, scratch, scratch_size, &ch) ==
        MW_LEAF_MALFORMED);
  memcpy(out, base, PS);
  if (((out[3] << 8) | out[4]) >= 2) { /* swap the first two cell pointers */
    unsigned char t0 = out[8], t1 = out[9];
    out[8] = out[10], out[9] = out[11], out[10] = t0, out[11] = t1;
    CHECK(mw_merge_table_leaf(base, out, theirs, 2, PS, PS, 0, 0, ours, scratch, scratch_size, &ch) ==
          MW_LEAF_MALFORMED);
  }
  CHECK(mw_merge_table_leaf(base, base, base, 1, PS, PS, 0, 0, out, scratch, scratch_size, &ch) ==
        MW_LEAF_BAD_ARGS);
  CHECK(mw_merge_table_leaf(base, base, base, 2, PS, PS, 0, 0, out, scratch, scratch_size - 1, &ch) ==
        MW_LEAF_BAD_ARGS);
  free(scratch);
  free(p_base);
  free(p_ours);
  free(p_theirs);
  free(p_out);
  tu_rmdir();
  printf("test_rebase_leaf: ok\n");
  return 0;
}
