/* Interior table page merge (design section 7):
**  1. synthetic pages: the merge rules (keep ours, take theirs where only they
**     changed a range, add both sides' new children) and every refusal;
**  2. real databases: two copies of one database grow concurrently in
**     different parts of one table (leaf splits, an append at the right edge,
**     a new overflow chain); the second is relocated past the first, its root
**     interior page merged, and the published file must pass integrity_check
**     and hold exactly the rows of both transactions. Overlapping growth is
**     refused.
*/
#include "test_relocate_util.h"

/* ---- 1. synthetic pages ---- */

typedef struct kv {
  uint32_t child;
  int64_t key; /* ignored for the last entry (right-most pointer) */
} kv;

/* Builds a type-5 page independently of merge.c: cells packed at the end. */
static void build(unsigned char *page, uint32_t ps, uint32_t us, const kv *e, size_t n) {
  memset(page, 0, ps);
  memset(page + us, 0xA5, ps - us); /* reserved tail: must be preserved */
  uint32_t top = us;
  for (size_t i = 0; i + 1 < n; i++) {
    unsigned char tmp[16];
    uint64_t v = (uint64_t)e[i].key;
    size_t len = 0;
    mw_put4(tmp, e[i].child);
    if (v >> 56) { /* 9 bytes: eight 7-bit groups, then 8 bits */
      tmp[12] = (unsigned char)v;
      uint64_t hi = v >> 8;
      for (int j = 7; j >= 0; j--, hi >>= 7) tmp[4 + j] = (unsigned char)((hi & 0x7f) | 0x80);
      len = 9;
    } else {
      unsigned char grp[9];
      int k = 0;
      do {
        grp[k++] = v & 0x7f;
        v >>= 7;
      } while (v);
      for (int j = k - 1; j >= 0; j--) tmp[4 + len++] = (unsigned char)(grp[j] | (j ? 0x80 : 0));
    }
    top -= (uint32_t)(4 + len);
    memcpy(page + top, tmp, 4 + len);
    page[12 + 2 * i] = (unsigned char)(top >> 8);
    page[13 + 2 * i] = (unsigned char)top;
  }
  page[0] = 5;
  page[3] = (unsigned char)((n - 1) >> 8);
  page[4] = (unsigned char)(n - 1);
  page[5] = (unsigned char)(top >> 8);
  page[6] = (unsigned char)top;
  mw_put4(page + 8, e[n - 1].child);
}

/* Reads a type-5 page back into (child, key) pairs; checks header fields. */
static size_t read_back(const unsigned char *page, uint32_t ps, uint32_t us, kv *e) {
  mw_btree_hdr h;
  CHECK_RC(mw_btree_header(page, 2, ps, us, &h), MW_PAGE_OK);
  CHECK(h.type == 5);
  CHECK(mw_get2(page + 1) == 0 && page[7] == 0); /* no freeblock, no fragments */
  uint32_t lowest = us;
  for (uint32_t i = 0; i < h.ncell; i++) {
    mw_cell_info c;
    CHECK_RC(mw_btree_cell(page, &h, i, &c), MW_PAGE_OK);
    e[i] = (kv){c.child, c.key};
    if (c.off < lowest) lowest = c.off;
  }
  CHECK(h.content == lowest); /* content area starts at the lowest cell */
  e[h.ncell] = (kv){h.right, 0};
  for (uint32_t x = 0; x < ps - us; x++) CHECK(page[us + x] == 0xA5);
  return h.ncell + 1;
}

typedef struct wrote_set {
  const uint32_t *pages[2];
  size_t n[2];
} wrote_set;

static int wrote_cb(void *ctx, int side, uint32_t pgno) {
  const wrote_set *w = ctx;
  for (size_t i = 0; i < w->n[side]; i++)
    if (w->pages[side][i] == pgno) return 1;
  return 0;
}

static unsigned char pb[4096], po[4096], pt[4096], out[4096];
static unsigned char scratch_buf[1 << 20];

static mw_merge_result merge3(const kv *b, size_t nb, const kv *o, size_t no, const kv *t,
                              size_t nt, uint32_t ps, uint32_t us, wrote_set *w) {
  build(pb, ps, us, b, nb);
  build(po, ps, us, o, no);
  build(pt, ps, us, t, nt);
  CHECK(mw_merge_scratch_size(ps) <= sizeof scratch_buf);
  return mw_merge_interior_table(pb, po, pt, 2, ps, us, w ? wrote_cb : NULL, w, out, scratch_buf,
                                 mw_merge_scratch_size(ps));
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void expect_merge(const kv *b, size_t nb, const kv *o, size_t no, const kv *t, size_t nt,
                         const kv *want, size_t nw, const char *what) {
  mw_merge_result r = merge3(b, nb, o, no, t, nt, 1024, 1000, NULL);
  if (r != MW_MERGE_OK) {
    fprintf(stderr, "%s: refused (%s)\n", what, mw_merge_result_name(r));
    exit(1);
  }
  kv got[64];
  size_t n = read_back(out, 1024, 1000, got);
  CHECK(n == nw);
  for (size_t i = 0; i < n; i++) {
    CHECK(got[i].child == want[i].child);
    if (i + 1 < n) CHECK(got[i].key == want[i].key);
  }
  printf("  merged: %s\n", what);
}

static void expect_refused(mw_merge_result want, const kv *b, size_t nb, const kv *o, size_t no,
                           const kv *t, size_t nt, wrote_set *w, uint32_t ps, uint32_t us,
                           const char *what) {
  memset(out, 0x5A, sizeof out);
  mw_merge_result r = merge3(b, nb, o, no, t, nt, ps, us, w);
  if (r != want) {
    fprintf(stderr, "%s: got %s, wanted %s\n", what, mw_merge_result_name(r),
            mw_merge_result_name(want));
    exit(1);
  }
  printf("  refused (%s): %s\n", mw_merge_result_name(r), what);
}

static void synthetic(void) {
  const kv base[] = {{10, 100}, {11, 200}, {12, 300}, {13, 0}};
  /* ours split 10 (new 20 takes the low part), theirs appended after 13 */
  {
    const kv o[] = {{20, 50}, {10, 100}, {11, 200}, {12, 300}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 200}, {12, 300}, {13, 400}, {30, 0}};
    const kv w[] = {{20, 50}, {10, 100}, {11, 200}, {12, 300}, {13, 400}, {30, 0}};
    expect_merge(base, N(base), o, N(o), t, N(t), w, N(w), "ours split a child, theirs appended");
  }
  /* theirs moved the bound between 11 and 12 (both ranges theirs), ours split 10 */
  {
    const kv o[] = {{10, 60}, {21, 100}, {11, 200}, {12, 300}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 250}, {12, 300}, {13, 0}};
    const kv w[] = {{10, 60}, {21, 100}, {11, 250}, {12, 300}, {13, 0}};
    expect_merge(base, N(base), o, N(o), t, N(t), w, N(w), "theirs changed a bound only they touched");
  }
  /* negative and 9-byte keys survive */
  {
    const kv b2[] = {{10, -5}, {11, 0}};
    const kv o[] = {{10, -5}, {11, 0}};
    const kv t[] = {{10, -5}, {11, (int64_t)1 << 60}, {31, 0}};
    expect_merge(b2, N(b2), o, N(o), t, N(t), t, N(t), "negative and 9-byte keys");
  }

  /* refusals */
  {
    const kv o[] = {{10, 90}, {20, 100}, {11, 200}, {12, 300}, {13, 0}};
    const kv t[] = {{10, 80}, {30, 100}, {11, 200}, {12, 300}, {13, 0}};
    expect_refused(MW_MERGE_BOTH_CHANGED, base, N(base), o, N(o), t, N(t), NULL, 1024, 1000,
                   "both changed the bound of one child");
  }
  {
    /* 11 keeps its upper key on both sides, but ours took its low part and
    ** theirs moved its lower bound: comparing upper keys alone would accept */
    const kv o[] = {{10, 100}, {20, 150}, {11, 200}, {12, 300}, {13, 0}};
    const kv t[] = {{10, 120}, {11, 200}, {12, 300}, {13, 0}};
    expect_refused(MW_MERGE_BOTH_CHANGED, base, N(base), o, N(o), t, N(t), NULL, 1024, 1000,
                   "both changed the range of one child from different ends");
  }
  {
    const kv o[] = {{10, 100}, {11, 200}, {12, 250}, {40, 300}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 200}, {12, 260}, {40, 300}, {13, 0}};
    expect_refused(MW_MERGE_BOTH_CHANGED, base, N(base), o, N(o), t, N(t), NULL, 1024, 1000,
                   "both changed one child");
  }
  {
    const kv o[] = {{10, 100}, {12, 300}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 200}, {12, 300}, {13, 0}};
    expect_refused(MW_MERGE_CHILD_MISSING, base, N(base), o, N(o), t, N(t), NULL, 1024, 1000,
                   "a base child missing from ours");
    expect_refused(MW_MERGE_CHILD_MISSING, base, N(base), t, N(t), o, N(o), NULL, 1024, 1000,
                   "a base child missing from theirs");
  }
  {
    const kv o[] = {{10, 100}, {11, 200}, {12, 300}, {14, 350}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 200}, {12, 300}, {14, 360}, {13, 0}};
    expect_refused(MW_MERGE_BOTH_CHANGED, base, N(base), o, N(o), t, N(t), NULL, 1024, 1000,
                   "both added the same child (so both changed its neighbour)");
  }
  {
    const kv o[] = {{10, 100}, {11, 200}, {20, 150}, {12, 300}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 200}, {12, 300}, {13, 0}};
    expect_refused(MW_MERGE_NOT_INCREASING, base, N(base), o, N(o), t, N(t), NULL, 1024, 1000,
                   "ours has keys out of order");
    expect_refused(MW_MERGE_NOT_INCREASING, base, N(base), t, N(t), o, N(o), NULL, 1024, 1000,
                   "theirs has keys out of order");
    const kv dup[] = {{10, 100}, {11, 100}, {12, 300}, {13, 0}};
    expect_refused(MW_MERGE_NOT_INCREASING, dup, N(dup), t, N(t), t, N(t), NULL, 1024, 1000,
                   "base has two equal keys");
  }
  {
    const kv o[] = {{10, 100}, {11, 200}, {10, 300}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 200}, {12, 300}, {13, 0}};
    expect_refused(MW_MERGE_MALFORMED, base, N(base), o, N(o), t, N(t), NULL, 1024, 1000,
                   "one child twice in a page");
  }
  {
    /* theirs split 12 (12 keeps the low part): ours wrote 12 */
    const kv o[] = {{10, 100}, {11, 200}, {12, 300}, {13, 0}};
    const kv t[] = {{10, 100}, {11, 200}, {12, 250}, {30, 300}, {13, 0}};
    uint32_t ours_wrote[] = {12}, theirs_wrote[] = {30};
    wrote_set w = {{ours_wrote, theirs_wrote}, {1, 1}};
    expect_refused(MW_MERGE_WRITTEN_CHILD, base, N(base), o, N(o), t, N(t), &w, 1024, 1000,
                   "theirs moved the range of a child ours wrote");
    /* ours split 11: theirs wrote 11 */
    const kv o2[] = {{10, 100}, {11, 150}, {20, 200}, {12, 300}, {13, 0}};
    uint32_t ours2[] = {11, 20}, theirs2[] = {11};
    wrote_set w2 = {{ours2, theirs2}, {2, 1}};
    expect_refused(MW_MERGE_WRITTEN_CHILD, base, N(base), o2, N(o2), base, N(base), &w2, 1024,
                   1000, "ours moved the range of a child theirs wrote");
    /* same pages, nobody wrote the other's child: merged */
    wrote_set w3 = {{ours2, theirs_wrote}, {2, 1}};
    CHECK_RC(merge3(base, N(base), o2, N(o2), t, N(t), 1024, 1000, &w3), MW_MERGE_OK);
  }
  {
    /* each side alone fits a 512-byte page, both together do not */
    kv b2[2] = {{10, 1000000}, {11, 0}}, o[60], t[60];
    size_t no = 0, nt = 0;
    o[no++] = (kv){10, 1000000};
    for (int i = 0; i < 40; i++) o[no++] = (kv){(uint32_t)(100 + i), 1000001 + i};
    o[no++] = (kv){11, 0};
    t[nt++] = (kv){10, 500000};
    for (int i = 0; i < 40; i++) t[nt++] = (kv){(uint32_t)(200 + i), 500001 + i};
    t[nt - 1].key = 1000000;
    t[nt++] = (kv){11, 0};
    /* t: 10 gets (-inf,500000], new 200..239, the last of them ends at 1000000 */
    expect_refused(MW_MERGE_DOES_NOT_FIT, b2, 2, o, no, t, nt, NULL, 512, 480,
                   "the merged cells do not fit the page");
  }
  {
    build(pb, 1024, 1000, base, N(base));
    memcpy(po, pb, 1024);
    memcpy(pt, pb, 1024);
    po[0] = 13;
    CHECK_RC(mw_merge_interior_table(pb, po, pt, 2, 1024, 1000, NULL, NULL, out, scratch_buf,
                                     sizeof scratch_buf),
             MW_MERGE_NOT_TABLE_INTERIOR);
    po[0] = 2;
    CHECK_RC(mw_merge_interior_table(pb, po, pt, 2, 1024, 1000, NULL, NULL, out, scratch_buf,
                                     sizeof scratch_buf),
             MW_MERGE_NOT_TABLE_INTERIOR);
    po[0] = 5;
    po[12] = 0xff; /* cell pointer outside the page */
    CHECK_RC(mw_merge_interior_table(pb, po, pt, 2, 1024, 1000, NULL, NULL, out, scratch_buf,
                                     sizeof scratch_buf),
             MW_MERGE_MALFORMED);
    CHECK_RC(mw_merge_interior_table(pb, pb, pt, 1, 1024, 1000, NULL, NULL, out, scratch_buf,
                                     sizeof scratch_buf),
             MW_MERGE_BAD_ARGS);
    CHECK_RC(mw_merge_interior_table(pb, pb, pt, 2, 1024, 1000, NULL, NULL, out, scratch_buf, 16),
             MW_MERGE_BAD_ARGS);
    printf("  refused: leaf, index page, malformed page, page 1, small scratch\n");
  }
}

/* ---- 2. real databases ---- */

static void insert_range(const char *path, int64_t lo, int n, int big) {
  sqlite3 *db = open_db(path);
  exec(db, "BEGIN");
  sqlite3_stmt *st;
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, CAST(printf('%060d', ?1) AS BLOB))", -1, &st, NULL), SQLITE_OK);
  for (int i = 0; i < n; i++) {
    sqlite3_bind_int64(st, 1, lo + i);
    CHECK_RC(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  if (big) {
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%lld, CAST(printf('%%05000d', 7) AS BLOB))",
             (long long)(lo + n));
    exec(db, sql);
  }
  exec(db, "COMMIT");
  sqlite3_close(db);
}

static int page_in(const uint32_t *list, size_t n, uint32_t p) {
  for (size_t i = 0; i < n; i++)
    if (list[i] == p) return 1;
  return 0;
}

/* ours inserts [a_lo, a_lo+a_n) (+ a big row), theirs [b_lo, b_lo+b_n); theirs
** commits first. want: the merge result for the root page 2. */
static void concurrent(const char *what, int64_t a_lo, int a_n, int a_big, int64_t b_lo, int b_n,
                       mw_merge_result want) {
  const char *base = tpath("base.db"), *a = tpath("a.db"), *b = tpath("b.db");
  unlink(base);
  sqlite3 *db = open_db(base);
  exec(db, "PRAGMA page_size=1024; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);");
  exec(db, "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 100 FROM n WHERE i < 29900) "
           "INSERT INTO t SELECT i, CAST(printf('%060d', i) AS BLOB) FROM n");
  sqlite3_close(db);
  copy_file(base, a);
  copy_file(base, b);
  insert_range(a, a_lo, a_n, a_big);
  insert_range(b, b_lo, b_n, 0);
  const char *exp = tpath("expected.db");
  copy_file(b, exp);
  insert_range(exp, a_lo, a_n, a_big);
  uint64_t want_digest = digest(exp);

  size_t lb, la, lt;
  unsigned char *fb = read_file(base, &lb), *fa = read_file(a, &la), *ft = read_file(b, &lt);
  const uint32_t ps = 1024, us = 1024;
  uint32_t n0 = (uint32_t)(lb / ps), na = (uint32_t)(la / ps), n1 = (uint32_t)(lt / ps);
  CHECK(fb[ps * 1] == 5); /* the root of t is an interior table page */

  /* ours: the pages the transaction changed and its new pages */
  mw_wpage *ws = malloc(na * sizeof *ws);
  uint32_t *ours = malloc(na * sizeof *ours), *theirs = malloc(n1 * sizeof *theirs);
  CHECK(ws != NULL && ours != NULL && theirs != NULL);
  size_t nws = 0, nth = 0;
  for (uint32_t p = 1; p <= na; p++) {
    if (p <= n0 && memcmp(fa + (p - 1) * ps, fb + (p - 1) * ps, ps) == 0) continue;
    ws[nws++] = (mw_wpage){p, fa + (size_t)(p - 1) * ps};
  }
  for (uint32_t p = 1; p <= n1; p++)
    if (p > n0 || memcmp(ft + (p - 1) * ps, fb + (p - 1) * ps, ps) != 0) theirs[nth++] = p;
  /* the only pages both changed: page 1 and the root */
  size_t both = 0;
  for (size_t i = 0; i < nws; i++) {
    /* new pages of both sides share numbers until relocation: not a conflict */
    if (ws[i].pgno > n0 || !page_in(theirs, nth, ws[i].pgno)) continue;
    both++;
    if (want == MW_MERGE_OK) CHECK(ws[i].pgno == 1 || ws[i].pgno == 2);
  }
  CHECK(both >= 2);

  size_t slen = mw_reloc_scratch_size(nws);
  void *scratch = malloc(slen);
  CHECK(scratch != NULL);
  mw_reloc_args args = {ps, us, fb, n0, ft, n1, 1};
  mw_reloc_info info;
  mw_reloc_reason r = mw_relocate(&args, ws, nws, scratch, slen, &info);
  if (r != MW_RELOC_OK) {
    fprintf(stderr, "%s: relocation refused: %s (page %u)\n", what, mw_reloc_reason_name(r),
            info.bad_pgno);
    exit(1);
  }
  CHECK(info.count == na - n0 && info.count > 0);
  for (size_t i = 0; i < nws; i++) ours[i] = ws[i].pgno;
  wrote_set w = {{ours, theirs}, {nws, nth}};

  size_t root = 0;
  while (ws[root].pgno != 2) root++;
  unsigned char merged[1024];
  size_t mlen = mw_merge_scratch_size(ps);
  void *mscratch = malloc(mlen);
  CHECK(mscratch != NULL);
  mw_merge_result m = mw_merge_interior_table(fb + ps, ws[root].data, ft + ps, 2, ps, us, wrote_cb,
                                              &w, merged, mscratch, mlen);
  if (m != want) {
    fprintf(stderr, "%s: merge %s, wanted %s\n", what, mw_merge_result_name(m),
            mw_merge_result_name(want));
    exit(1);
  }
  if (m == MW_MERGE_OK) {
    /* publish: theirs' file, then ours' pages at their new numbers */
    uint32_t total = n1 + info.count;
    unsigned char *pub = calloc(total, ps);
    CHECK(pub != NULL);
    memcpy(pub, ft, lt);
    for (size_t i = 0; i < nws; i++) {
      CHECK(ws[i].pgno <= total && (ws[i].pgno <= n0 || ws[i].pgno > n1));
      memcpy(pub + (size_t)(ws[i].pgno - 1) * ps, ws[i].pgno == 2 ? merged : ws[i].data, ps);
    }
    const char *out_path = tpath("published.db");
    write_file(out_path, pub, (size_t)total * ps);
    free(pub);
    if (!integrity_ok(out_path)) {
      fprintf(stderr, "%s: published file fails integrity_check\n", what);
      exit(1);
    }
    CHECK(digest(out_path) == want_digest);
    printf("  %s: %u new pages moved %u -> %u, root merged, integrity_check ok, rows identical\n",
           what, info.count, n0 + 1, n1 + 1);
  } else {
    printf("  %s: refused (%s)\n", what, mw_merge_result_name(m));
  }
  free(mscratch);
  free(scratch);
  free(ws);
  free(ours);
  free(theirs);
  free(fb);
  free(fa);
  free(ft);
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  tmp_init();
  synthetic();
  concurrent("splits in two distant leaves + overflow chain", 1001, 40, 1, 20001, 40, MW_MERGE_OK);
  concurrent("append at the right edge + split in the middle", 30001, 60, 1, 10001, 40, MW_MERGE_OK);
  concurrent("theirs appends, ours splits near the start", 2001, 30, 0, 30001, 50, MW_MERGE_OK);
  concurrent("both split the same leaf", 1001, 40, 0, 1041, 40, MW_MERGE_BOTH_CHANGED);
  concurrent("both append at the right edge", 30001, 40, 0, 30041, 40, MW_MERGE_BOTH_CHANGED);
  tmp_cleanup();
  printf("test_relocate_merge: ok\n");
  return 0;
}
