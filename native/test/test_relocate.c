/* Relocation on pages built by stock SQLite (design section 7):
**  1. the page reader finds exactly the references SQLite itself follows
**     (compared with the dbstat virtual table, which walks every b-tree and
**     overflow chain) on table and index leaves and interiors, WITHOUT ROWID
**     tables, overflow chains and payloads straddling every local-size
**     boundary, for several page sizes and reserved-byte counts;
**  2. a simulated relocation of a real file (its last g pages renumbered past
**     a gap, the gap filled by freelist pages, merged page 1) passes
**     integrity_check with identical content;
**  3. every precondition and every missed or doubled reference is refused
**     and leaves the write set untouched;
**  4. corrupted pages never make it read out of bounds (random corruption).
*/
#include "test_relocate_util.h"

#include <time.h>

typedef struct cfg {
  int page_size, reserve;
} cfg;

/* Inserts rows that make table and index leaves and interiors, overflow chains
** and payloads around each local-size boundary. */
static void make_db(const char *path, int ps, int reserve, int scale) {
  unlink(path);
  sqlite3 *db = open_db(path);
  char sql[256];
  snprintf(sql, sizeof sql, "PRAGMA page_size=%d", ps);
  exec(db, sql);
  if (reserve > 0) {
    int r = reserve;
    CHECK_RC(sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &r), SQLITE_OK);
  }
  exec(db,
       "CREATE TABLE t1(id INTEGER PRIMARY KEY, a INT, b TEXT);"
       "CREATE INDEX i1 ON t1(b, a);"
       "CREATE TABLE t2(id INTEGER PRIMARY KEY, v BLOB);"
       "CREATE INDEX i2 ON t2(v);"
       "CREATE TABLE t3(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;"
       "CREATE TABLE t4(x, y);");
  CHECK(query_int(db, "PRAGMA page_size") == ps);
  int u = ps - reserve;
  int xl = u - 35, xi = (u - 12) * 64 / 255 - 23;
  exec(db, "BEGIN");
  sqlite3_stmt *i1, *i2, *i3, *i4;
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t1(a, b) VALUES(?1, substr(hex(randomblob(?2)), 1, ?2))", -1, &i1, NULL), SQLITE_OK);
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t2(v) VALUES(randomblob(?1))", -1, &i2, NULL), SQLITE_OK);
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t3 VALUES(printf('%06d', ?1) || substr(hex(randomblob(?2)), 1, ?2), randomblob(?1 % 50))", -1, &i3, NULL), SQLITE_OK);
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t4 VALUES(?1, randomblob(?2))", -1, &i4, NULL), SQLITE_OK);
  for (int i = 0; i < 1500 * scale; i++) {
    sqlite3_bind_int(i1, 1, (int)rnd_below(1000000));
    sqlite3_bind_int(i1, 2, 1 + (int)rnd_below(60));
    CHECK_RC(sqlite3_step(i1), SQLITE_DONE);
    sqlite3_reset(i1);
  }
  /* blob lengths around the table-leaf and index boundaries: payload = X,
  ** X + 1, and where the surplus of the local formula crosses X */
  int lens[512], nl = 0;
  for (int d = -12; d <= 6; d++) {
    lens[nl++] = xl - 5 + d;
    lens[nl++] = xl + (u - 4) - 5 + d;
    lens[nl++] = xi - 6 + d;
    lens[nl++] = xi + (u - 4) - 6 + d;
  }
  for (int i = 0; i < 12 * scale; i++) lens[nl++] = (int)rnd_below((uint32_t)(3 * u));
  for (int i = 0; i < nl; i++) {
    if (lens[i] < 0) continue;
    sqlite3_bind_int(i2, 1, lens[i]);
    CHECK_RC(sqlite3_step(i2), SQLITE_DONE);
    sqlite3_reset(i2);
    sqlite3_bind_int(i3, 1, i);
    sqlite3_bind_int(i3, 2, lens[i] > 6 ? lens[i] - 6 : 0);
    CHECK_RC(sqlite3_step(i3), SQLITE_DONE);
    sqlite3_reset(i3);
  }
  for (int i = 0; i < 400 * scale; i++) {
    sqlite3_bind_int(i4, 1, i);
    sqlite3_bind_int(i4, 2, (int)rnd_below(40));
    CHECK_RC(sqlite3_step(i4), SQLITE_DONE);
    sqlite3_reset(i4);
  }
  sqlite3_finalize(i1);
  sqlite3_finalize(i2);
  sqlite3_finalize(i3);
  sqlite3_finalize(i4);
  exec(db, "COMMIT");
  sqlite3_close(db);
}

/* ---- 1. references: the page reader against dbstat ---- */

typedef struct edge {
  uint32_t from, kind, cell, to;
} edge;

static int cmp_edge(const void *x, const void *y) {
  const edge *a = x, *b = y;
  if (a->from != b->from) return a->from < b->from ? -1 : 1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->cell != b->cell) return a->cell < b->cell ? -1 : 1;
  if (a->to != b->to) return a->to < b->to ? -1 : 1;
  return 0;
}

typedef struct stat_row {
  char *name, *path;
  uint32_t pgno, ncell;
  int overflow;
} stat_row;

static int cmp_stat(const void *x, const void *y) {
  const stat_row *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  return c ? c : strcmp(a->path, b->path);
}

static const stat_row *find_stat(const stat_row *rows, size_t n, const char *name, const char *path) {
  stat_row key = {(char *)name, (char *)path, 0, 0, 0};
  return bsearch(&key, rows, n, sizeof *rows, cmp_stat);
}

typedef struct edge_list {
  edge *e;
  size_t n, cap;
  uint32_t from;
} edge_list;

static void add_edge(edge_list *l, uint32_t from, uint32_t kind, uint32_t cell, uint32_t to) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 1024;
    l->e = realloc(l->e, l->cap * sizeof(edge));
    CHECK(l->e != NULL);
  }
  l->e[l->n++] = (edge){from, kind, cell, to};
}

static int collect(void *ctx, mw_ref_kind kind, uint32_t cell, uint32_t off, uint32_t target) {
  edge_list *l = ctx;
  (void)off;
  add_edge(l, l->from, kind, cell, target);
  return 0;
}

static void check_refs_match_dbstat(const char *path, const unsigned char *file, size_t len,
                                    uint32_t ps, uint32_t us) {
  sqlite3 *db = open_db(path);
  sqlite3_stmt *st = NULL;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT name, path, pageno, ncell, pagetype='overflow' FROM dbstat", -1, &st, NULL), SQLITE_OK);
  stat_row *rows = NULL;
  size_t n = 0, cap = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      rows = realloc(rows, cap * sizeof *rows);
      CHECK(rows != NULL);
    }
    rows[n].name = strdup((const char *)sqlite3_column_text(st, 0));
    rows[n].path = strdup((const char *)sqlite3_column_text(st, 1));
    rows[n].pgno = (uint32_t)sqlite3_column_int64(st, 2);
    rows[n].ncell = (uint32_t)sqlite3_column_int64(st, 3);
    rows[n].overflow = sqlite3_column_int(st, 4);
    n++;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  CHECK(n == len / ps); /* every page belongs to a b-tree: no freelist */
  qsort(rows, n, sizeof *rows, cmp_stat);

  /* what SQLite follows: parent -> child by cell index, cell -> overflow chain */
  edge_list want = {0}, got = {0};
  char parent[4096];
  for (size_t i = 0; i < n; i++) {
    const char *p = rows[i].path;
    if (strcmp(p, "/") == 0) continue;
    if (rows[i].overflow) {
      const char *slash = strrchr(p, '/');
      CHECK(slash != NULL);
      size_t plen = (size_t)(slash - p) + 1;
      memcpy(parent, p, plen);
      parent[plen] = 0;
      char *e;
      uint32_t cell = (uint32_t)strtoul(slash + 1, &e, 16);
      CHECK(*e == '+');
      uint32_t k = (uint32_t)strtoul(e + 1, NULL, 16);
      if (k == 0) {
        const stat_row *par = find_stat(rows, n, rows[i].name, parent);
        CHECK(par != NULL);
        add_edge(&want, par->pgno, MW_REF_OVERFLOW, cell, rows[i].pgno);
      } else {
        snprintf(parent + plen, sizeof parent - plen, "%.3x+%.6x", cell, k - 1);
        const stat_row *prev = find_stat(rows, n, rows[i].name, parent);
        CHECK(prev != NULL);
        add_edge(&want, prev->pgno, MW_REF_NEXT, 0, rows[i].pgno);
      }
    } else {
      size_t plen = strlen(p) - 1; /* drop the trailing '/' */
      while (plen > 0 && p[plen - 1] != '/') plen--;
      memcpy(parent, p, plen);
      parent[plen] = 0;
      uint32_t cell = (uint32_t)strtoul(p + plen, NULL, 16);
      const stat_row *par = find_stat(rows, n, rows[i].name, parent);
      CHECK(par != NULL);
      add_edge(&want, par->pgno, cell == par->ncell ? MW_REF_RIGHT : MW_REF_CHILD, cell, rows[i].pgno);
    }
  }
  /* what the page reader finds */
  size_t btree_pages = 0, ovfl_pages = 0;
  for (size_t i = 0; i < n; i++) {
    const unsigned char *page = file + (size_t)(rows[i].pgno - 1) * ps;
    if (rows[i].overflow) {
      ovfl_pages++;
      uint32_t next = mw_get4(page);
      if (next) add_edge(&got, rows[i].pgno, MW_REF_NEXT, 0, next);
      continue;
    }
    btree_pages++;
    got.from = rows[i].pgno;
    CHECK_RC(mw_btree_refs(page, rows[i].pgno, ps, us, collect, &got), MW_PAGE_OK);
  }
  qsort(want.e, want.n, sizeof(edge), cmp_edge);
  qsort(got.e, got.n, sizeof(edge), cmp_edge);
  size_t kinds[5] = {0};
  for (size_t i = 0; i < want.n; i++) kinds[want.e[i].kind]++;
  if (want.n != got.n || memcmp(want.e, got.e, want.n * sizeof(edge)) != 0) {
    fprintf(stderr, "reference mismatch: dbstat %zu, reader %zu\n", want.n, got.n);
    for (size_t i = 0; i < want.n && i < got.n; i++) {
      if (cmp_edge(&want.e[i], &got.e[i]) != 0) {
        fprintf(stderr, "  first difference: dbstat %u-%u/%u->%u, reader %u-%u/%u->%u\n",
                want.e[i].from, want.e[i].kind, want.e[i].cell, want.e[i].to, got.e[i].from,
                got.e[i].kind, got.e[i].cell, got.e[i].to);
        break;
      }
    }
    exit(1);
  }
  /* the database must exercise every kind of reference */
  CHECK(kinds[MW_REF_CHILD] > 0 && kinds[MW_REF_RIGHT] > 0 && kinds[MW_REF_OVERFLOW] > 0 &&
        kinds[MW_REF_NEXT] > 0);
  printf("  %u/%u: %zu pages (%zu b-tree, %zu overflow), %zu references match dbstat\n", ps, us,
         n, btree_pages, ovfl_pages, want.n);
  for (size_t i = 0; i < n; i++) {
    free(rows[i].name);
    free(rows[i].path);
  }
  free(rows);
  free(want.e);
  free(got.e);
}

/* Every page type appears, and payloads straddle both local-size limits. */
static void check_coverage(const unsigned char *file, size_t len, uint32_t ps, uint32_t us) {
  int types[16] = {0};
  int at_max[2] = {0}, over_max[2] = {0}, surplus_kept[2] = {0}, surplus_min[2] = {0};
  uint32_t xl = us - 35, xi = (us - 12) * 64 / 255 - 23, m = (us - 12) * 32 / 255 - 23;
  for (uint32_t pg = 1; pg <= len / ps; pg++) {
    const unsigned char *page = file + (size_t)(pg - 1) * ps;
    mw_btree_hdr h;
    if (mw_btree_header(page, pg, ps, us, &h) != MW_PAGE_OK) continue;
    types[h.type]++;
    for (uint32_t i = 0; i < h.ncell; i++) {
      mw_cell_info c;
      CHECK_RC(mw_btree_cell(page, &h, i, &c), MW_PAGE_OK);
      if (h.type == MW_BTREE_INTERIOR_TABLE) continue;
      int t = h.type == MW_BTREE_LEAF_TABLE;
      uint32_t x = t ? xl : xi;
      if (c.payload == x) at_max[t]++;
      if (c.payload == x + 1) over_max[t]++;
      if (c.payload > x) {
        uint64_t surplus = m + (c.payload - m) % (us - 4);
        if (surplus <= x) surplus_kept[t]++;
        else surplus_min[t]++;
      }
    }
  }
  CHECK(types[2] > 0 && types[5] > 0 && types[10] > 0 && types[13] > 0);
  for (int t = 0; t < 2; t++) CHECK(at_max[t] > 0 && over_max[t] > 0 && surplus_kept[t] > 0 && surplus_min[t] > 0);
}

/* ---- 2. simulated relocation of a real file ---- */

typedef struct sim {
  uint32_t ps, us, npages, n0, n1, g;
  unsigned char *file;   /* the original file */
  unsigned char *pages;  /* write-set images */
  mw_wpage *ws;
  size_t nws;
  unsigned char snap1[65536], cur1[65536];
  mw_reloc_args args;
  void *scratch;
  size_t scratch_len;
} sim;

/* The transaction grew the file from n0 to npages; others grew it to n0 + d.
** The write set is every page of the file, in a shuffled order. */
static void sim_setup(sim *s, unsigned char *file, size_t len, uint32_t ps, uint32_t us,
                      uint32_t n0, uint32_t d) {
  memset(&s->args, 0, sizeof s->args);
  s->ps = ps;
  s->us = us;
  s->file = file;
  s->npages = (uint32_t)(len / ps);
  s->n0 = n0;
  s->n1 = n0 + d;
  s->g = s->npages - n0;
  s->nws = s->npages;
  s->pages = malloc(len);
  s->ws = malloc((s->nws + 1) * sizeof(mw_wpage)); /* + 1: room for a mutator */
  CHECK(s->pages != NULL && s->ws != NULL);
  memcpy(s->pages, file, len);
  for (size_t i = 0; i < s->nws; i++) s->ws[i] = (mw_wpage){(uint32_t)i + 1, s->pages + i * ps};
  for (size_t i = s->nws - 1; i > 0; i--) {
    size_t j = rnd_below((uint32_t)i + 1);
    mw_wpage t = s->ws[i];
    s->ws[i] = s->ws[j];
    s->ws[j] = t;
  }
  memcpy(s->snap1, file, ps);
  mw_put4(s->snap1 + 28, n0);
  memcpy(s->cur1, file, ps);
  uint32_t counter = mw_get4(file + 24) + 7;
  mw_put4(s->cur1 + 24, counter);
  mw_put4(s->cur1 + 92, counter);
  mw_put4(s->cur1 + 28, s->n1);
  mw_put4(s->cur1 + 32, d ? n0 + 1 : 0); /* the others' pages: one trunk + leaves */
  mw_put4(s->cur1 + 36, d);
  s->args = (mw_reloc_args){ps, us, s->snap1, n0, s->cur1, s->n1, 1};
  s->scratch_len = mw_reloc_scratch_size(s->nws);
  s->scratch = malloc(s->scratch_len);
  CHECK(s->scratch != NULL);
}

static void sim_free(sim *s) {
  free(s->pages);
  free(s->ws);
  free(s->scratch);
}

static size_t ws_index(const sim *s, uint32_t pgno) {
  for (size_t i = 0; i < s->nws; i++)
    if (s->ws[i].pgno == pgno) return i;
  CHECK(!"page not in the write set");
  return 0;
}

/* Writes the published state: write set at its new numbers, the gap n0+1..n1 as
** a freelist trunk with leaves (what the other commits' pages look like to
** integrity_check). */
static void sim_write(const sim *s, const char *path) {
  uint32_t total = s->n1 + s->g;
  unsigned char *out = calloc(total, s->ps);
  CHECK(out != NULL);
  for (size_t i = 0; i < s->nws; i++) {
    CHECK(s->ws[i].pgno >= 1 && s->ws[i].pgno <= total);
    memcpy(out + (size_t)(s->ws[i].pgno - 1) * s->ps, s->ws[i].data, s->ps);
  }
  uint32_t d = s->n1 - s->n0;
  if (d > 0) {
    unsigned char *trunk = out + (size_t)s->n0 * s->ps;
    mw_put4(trunk, 0);
    mw_put4(trunk + 4, d - 1);
    for (uint32_t k = 0; k + 1 < d; k++) mw_put4(trunk + 8 + 4 * k, s->n0 + 2 + k);
  }
  write_file(path, out, (size_t)total * s->ps);
  free(out);
}

/* existing overflow pages whose chain continues into the new range: their
** next pointers must be rewritten too */
static int straddling_chains;
static double relocate_us_per_page = -1;

static void check_relocation(const char *dbpath, unsigned char *file, size_t len, uint32_t ps,
                             uint32_t us, uint32_t n0, uint32_t d, uint64_t want_digest) {
  sim s;
  sim_setup(&s, file, len, ps, us, n0, d);
  for (uint32_t p = 2; p <= n0; p++) {
    const unsigned char *page = file + (size_t)(p - 1) * ps;
    if (!(page[0] == 2 || page[0] == 5 || page[0] == 10 || page[0] == 13) && mw_get4(page) > n0)
      straddling_chains++;
  }
  mw_reloc_info info;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  mw_reloc_reason r = mw_relocate(&s.args, s.ws, s.nws, s.scratch, s.scratch_len, &info);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (ps == 4096 && n0 < s.npages / 2) /* a large write set: cost per written page */
    relocate_us_per_page = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 +
                            (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / (double)s.nws;
  if (r != MW_RELOC_OK) {
    fprintf(stderr, "relocation %u->%u refused: %s (page %u)\n", n0, n0 + d,
            mw_reloc_reason_name(r), info.bad_pgno);
    exit(1);
  }
  CHECK(info.from == n0 && info.to == n0 + d && info.count == s.g);
  const unsigned char *p1 = s.ws[ws_index(&s, 1)].data;
  CHECK(mw_get4(p1 + 24) == mw_get4(s.cur1 + 24) + 1);
  CHECK(mw_get4(p1 + 92) == mw_get4(p1 + 24));
  CHECK(mw_get4(p1 + 28) == s.n1 + s.g);
  CHECK(memcmp(p1 + 96, file + 96, 4) == 0);
  CHECK(memcmp(p1 + 32, s.cur1 + 32, 8) == 0);
  sim_write(&s, dbpath);
  if (!integrity_ok(dbpath)) {
    fprintf(stderr, "relocation %u->%u (+%u pages): integrity_check failed\n", n0, n0 + d, s.g);
    exit(1);
  }
  CHECK(digest(dbpath) == want_digest);
  sim_free(&s);
}

/* ---- 3. refusals ---- */

/* Runs mw_relocate on a fresh copy of the simulation after `mutate`, expects
** `want` (or `want2`), and checks that nothing was modified. */
typedef void (*mutator)(sim *s, void *arg);

static void expect_refusal(unsigned char *file, size_t len, uint32_t ps, uint32_t us, uint32_t n0,
                           uint32_t d, mutator mutate, void *arg, mw_reloc_reason want,
                           mw_reloc_reason want2, const char *what) {
  sim s;
  sim_setup(&s, file, len, ps, us, n0, d);
  mutate(&s, arg);
  unsigned char *before = malloc(len);
  mw_wpage *ws_before = malloc(s.nws * sizeof(mw_wpage));
  CHECK(before != NULL && ws_before != NULL);
  memcpy(before, s.pages, len);
  memcpy(ws_before, s.ws, s.nws * sizeof(mw_wpage));
  mw_reloc_info info;
  mw_reloc_reason r = mw_relocate(&s.args, s.ws, s.nws, s.scratch, s.scratch_len, &info);
  if (r != want && r != want2) {
    fprintf(stderr, "%s: got %s (page %u), wanted %s\n", what, mw_reloc_reason_name(r),
            info.bad_pgno, mw_reloc_reason_name(want));
    exit(1);
  }
  CHECK(memcmp(before, s.pages, len) == 0);
  CHECK(memcmp(ws_before, s.ws, s.nws * sizeof(mw_wpage)) == 0);
  printf("    refused (%s): %s\n", mw_reloc_reason_name(r), what);
  free(before);
  free(ws_before);
  sim_free(&s);
}

/* finds, in the write set, a reference of `kind` to a new page; returns the
** write-set index, sets *off and *target */
typedef struct find_ref {
  uint32_t kind, n0, off, target, found;
} find_ref;

static int find_cb(void *ctx, mw_ref_kind kind, uint32_t cell, uint32_t off, uint32_t target) {
  find_ref *f = ctx;
  (void)cell;
  if (kind == f->kind && target > f->n0) {
    f->off = off;
    f->target = target;
    f->found = 1;
    return 100;
  }
  return 0;
}

static size_t find_ref_typed(sim *s, uint32_t kind, int from_new, int type, uint32_t *off,
                             uint32_t *target);

/* type 0: any b-tree page type */
static size_t find_ref_in(sim *s, uint32_t kind, int from_new, uint32_t *off, uint32_t *target) {
  return find_ref_typed(s, kind, from_new, 0, off, target);
}

static size_t find_ref_typed(sim *s, uint32_t kind, int from_new, int type, uint32_t *off,
                             uint32_t *target) {
  for (size_t i = 0; i < s->nws; i++) {
    if ((s->ws[i].pgno > s->n0) != from_new || s->ws[i].pgno == 1) continue;
    if (type != 0 && s->ws[i].data[0] != type) continue;
    find_ref f = {kind, s->n0, 0, 0, 0};
    mw_btree_refs(s->ws[i].data, s->ws[i].pgno, s->ps, s->us, find_cb, &f);
    if (f.found) {
      *off = f.off;
      *target = f.target;
      return i;
    }
  }
  CHECK(!"no such reference in the write set");
  return 0;
}

static int is_btree(const sim *s, uint32_t pgno) {
  uint8_t t = s->file[(size_t)(pgno - 1) * s->ps];
  return t == 2 || t == 5 || t == 10 || t == 13;
}

static int page_type(const sim *s, uint32_t pgno) { return s->file[(size_t)(pgno - 1) * s->ps]; }

/* Points the reference of `kind` found by find_ref_in at the first new page that
** `fits`; 0 when no new page fits (the write set is unchanged). */
static int repoint(sim *s, uint32_t kind, int from_new, int (*fits)(const sim *, uint32_t, uint32_t)) {
  uint32_t off, target;
  size_t i = find_ref_in(s, kind, from_new, &off, &target);
  for (uint32_t p = s->n0 + 1; p <= s->npages; p++) {
    if (fits(s, p, target)) {
      mw_put4(s->ws[i].data + off, p);
      return 1;
    }
  }
  return 0;
}

static int other_same_type(const sim *s, uint32_t p, uint32_t target) {
  return p != target && is_btree(s, p) && page_type(s, p) == page_type(s, target);
}
static int other_btree(const sim *s, uint32_t p, uint32_t target) { return p != target && is_btree(s, p); }
static int other_overflow(const sim *s, uint32_t p, uint32_t target) { return p != target && !is_btree(s, p); }
static int any_btree(const sim *s, uint32_t p, uint32_t target) { (void)target; return is_btree(s, p); }

static void m_child_to_other(sim *s, void *arg) {
  (void)arg;
  /* another new b-tree page: it now has two references, `target` none */
  repoint(s, MW_REF_CHILD, 0, other_same_type);
}

static void m_right_to_other(sim *s, void *arg) {
  if (!repoint(s, MW_REF_RIGHT, (int)(intptr_t)arg, other_btree)) CHECK(!"no other new b-tree page");
}

static void m_overflow_to_other(sim *s, void *arg) {
  (void)arg;
  if (!repoint(s, MW_REF_OVERFLOW, 1, other_overflow)) CHECK(!"no other new overflow page");
}

static void m_overflow_to_btree(sim *s, void *arg) {
  (void)arg;
  repoint(s, MW_REF_OVERFLOW, 1, any_btree);
}

/* cuts an overflow chain of new pages: the rest of the chain is unreferenced */
static void m_cut_chain(sim *s, void *arg) {
  (void)arg;
  for (size_t i = 0; i < s->nws; i++) {
    uint32_t p = s->ws[i].pgno;
    if (p > s->n0 && !is_btree(s, p) && mw_get4(s->ws[i].data) > s->n0) {
      mw_put4(s->ws[i].data, 0);
      return;
    }
  }
  CHECK(!"no chain of new pages");
}

/* drops from the write set an existing page that references a new page, as
** if the transaction had written it but the parser never saw it */
static void m_drop_parent(sim *s, void *arg) {
  uint32_t off, target;
  /* a table interior: it holds no overflow pointers, so only the reference goes */
  size_t i = find_ref_typed(s, (uint32_t)(intptr_t)arg, 0, MW_BTREE_INTERIOR_TABLE, &off, &target);
  s->ws[i] = s->ws[--s->nws];
}

static void m_drop_new_page(sim *s, void *arg) {
  (void)arg;
  s->ws[ws_index(s, s->npages - 1)] = s->ws[--s->nws];
}

static void m_dup_page(sim *s, void *arg) {
  (void)arg;
  s->ws[ws_index(s, 3)].pgno = 2;
}

static void m_beyond_end(sim *s, void *arg) {
  (void)arg;
  s->ws[ws_index(s, s->npages)].pgno = s->npages + 1;
}

/* one more new page that nothing references, as a page the transaction put
** on the freelist would be (its page 1 freelist fields unchanged); a trunk
** page with no leaves looks the same */
static void m_new_free_page(sim *s, void *arg) {
  static unsigned char extra[65536];
  memset(extra, 0, sizeof extra);
  (void)arg;
  s->ws[s->nws++] = (mw_wpage){s->npages + 1, extra};
  s->scratch_len = mw_reloc_scratch_size(s->nws);
  free(s->scratch);
  s->scratch = malloc(s->scratch_len);
  CHECK(s->scratch != NULL);
  mw_put4(s->ws[ws_index(s, 1)].data + 28, s->npages + 1);
}

static void m_not_first(sim *s, void *arg) {
  (void)arg;
  s->args.first_commit = 0;
}

static void m_no_page1(sim *s, void *arg) {
  (void)arg;
  s->ws[ws_index(s, 1)] = s->ws[--s->nws];
}

/* arg: byte offset of page 1 to change in the transaction's page 1 */
static void m_txn_page1(sim *s, void *arg) { s->ws[ws_index(s, 1)].data[(intptr_t)arg] ^= 1; }
static void m_cur_page1(sim *s, void *arg) { s->cur1[(intptr_t)arg] ^= 1; }
static void m_snap_size(sim *s, void *arg) {
  (void)arg;
  s->args.snap_npages--;
}
static void m_shrunk(sim *s, void *arg) {
  (void)arg;
  s->args.cur_npages = s->n0 - 1;
  mw_put4(s->cur1 + 28, s->n0 - 1);
}

/* a page of the given type with an impossible cell pointer */
static void m_bad_cell(sim *s, void *arg) {
  for (size_t i = 0; i < s->nws; i++) {
    unsigned char *p = s->ws[i].data;
    if (s->ws[i].pgno != 1 && p[0] == (intptr_t)arg && mw_get2(p + 3) > 0) {
      uint32_t ca = p[0] == 13 || p[0] == 10 ? 8 : 12;
      p[ca] = 0xff;
      p[ca + 1] = 0xff;
      return;
    }
  }
  CHECK(!"no page of that type");
}

/* an existing leaf removed from the write set leaves its overflow pages
** unreached: they could be anything, so they are refused */
static void m_orphan_overflow(sim *s, void *arg) {
  (void)arg;
  for (size_t i = 0; i < s->nws; i++) {
    if (s->ws[i].pgno > s->n0 || s->ws[i].pgno == 1) continue;
    find_ref f = {MW_REF_OVERFLOW, 0, 0, 0, 0};
    mw_btree_refs(s->ws[i].data, s->ws[i].pgno, s->ps, s->us, find_cb, &f);
    if (!f.found || f.target > s->n0) continue;
    /* and it must not reference new pages itself */
    find_ref f2 = {MW_REF_OVERFLOW, s->n0, 0, 0, 0}, f3 = {MW_REF_CHILD, s->n0, 0, 0, 0},
             f4 = {MW_REF_RIGHT, s->n0, 0, 0, 0};
    mw_btree_refs(s->ws[i].data, s->ws[i].pgno, s->ps, s->us, find_cb, &f2);
    mw_btree_refs(s->ws[i].data, s->ws[i].pgno, s->ps, s->us, find_cb, &f3);
    mw_btree_refs(s->ws[i].data, s->ws[i].pgno, s->ps, s->us, find_cb, &f4);
    if (f2.found || f3.found || f4.found) continue;
    s->ws[i] = s->ws[--s->nws];
    return;
  }
  CHECK(!"no existing page with an existing overflow chain");
}

static void check_refusals(unsigned char *file, size_t len, uint32_t ps, uint32_t us, uint32_t n0,
                           uint32_t n0_mid) {
  const mw_reloc_reason none = MW_RELOC_OK;
  (void)none;
  expect_refusal(file, len, ps, us, n0, 3, m_child_to_other, NULL, MW_RELOC_REF_DUPLICATE,
                 MW_RELOC_REF_MISSING, "child pointer moved to another new page");
  expect_refusal(file, len, ps, us, n0, 3, m_right_to_other, (void *)(intptr_t)1,
                 MW_RELOC_REF_DUPLICATE, MW_RELOC_REF_MISSING,
                 "right-most pointer of a new page moved to another new page");
  expect_refusal(file, len, ps, us, n0, 3, m_overflow_to_other, NULL, MW_RELOC_REF_DUPLICATE,
                 MW_RELOC_REF_MISSING, "overflow pointer moved to another new overflow page");
  expect_refusal(file, len, ps, us, n0, 3, m_overflow_to_btree, NULL, MW_RELOC_AMBIGUOUS,
                 MW_RELOC_AMBIGUOUS, "overflow pointer to a new b-tree page");
  expect_refusal(file, len, ps, us, n0, 3, m_cut_chain, NULL, MW_RELOC_UNKNOWN_PAGE,
                 MW_RELOC_REF_MISSING, "overflow chain cut: the rest is unreferenced");
  expect_refusal(file, len, ps, us, n0, 3, m_drop_parent, (void *)(intptr_t)MW_REF_CHILD,
                 MW_RELOC_REF_MISSING, MW_RELOC_REF_MISSING,
                 "the page holding a child pointer to a new page is not seen");
  expect_refusal(file, len, ps, us, n0, 3, m_drop_parent, (void *)(intptr_t)MW_REF_RIGHT,
                 MW_RELOC_REF_MISSING, MW_RELOC_REF_MISSING,
                 "the page holding a right-most pointer to a new page is not seen");
  expect_refusal(file, len, ps, us, n0_mid, 3, m_orphan_overflow, NULL, MW_RELOC_UNKNOWN_PAGE,
                 MW_RELOC_UNKNOWN_PAGE, "written overflow pages reached from no written page");
  expect_refusal(file, len, ps, us, n0, 3, m_new_free_page, NULL, MW_RELOC_UNKNOWN_PAGE,
                 MW_RELOC_REF_MISSING, "a new page on the freelist");
  expect_refusal(file, len, ps, us, n0, 3, m_drop_new_page, NULL, MW_RELOC_NOT_RANGE,
                 MW_RELOC_NOT_RANGE, "a new page missing from the write set");
  expect_refusal(file, len, ps, us, n0, 3, m_beyond_end, NULL, MW_RELOC_NOT_RANGE,
                 MW_RELOC_NOT_RANGE, "a page past the transaction's end");
  expect_refusal(file, len, ps, us, n0, 3, m_dup_page, NULL, MW_RELOC_DUP_PAGE,
                 MW_RELOC_DUP_PAGE, "one page number twice");
  expect_refusal(file, len, ps, us, n0, 3, m_not_first, NULL, MW_RELOC_NOT_FIRST_COMMIT,
                 MW_RELOC_NOT_FIRST_COMMIT, "second commit of a snapshot");
  expect_refusal(file, len, ps, us, n0, 3, m_no_page1, NULL, MW_RELOC_NO_PAGE1,
                 MW_RELOC_NO_PAGE1, "no page 1 in the write set");
  expect_refusal(file, len, ps, us, n0, 3, m_txn_page1, (void *)(intptr_t)60,
                 MW_RELOC_PAGE1_CHANGED, MW_RELOC_PAGE1_CHANGED, "user_version changed");
  expect_refusal(file, len, ps, us, n0, 3, m_txn_page1, (void *)(intptr_t)(ps - 8 - (ps - us)),
                 MW_RELOC_PAGE1_CHANGED, MW_RELOC_PAGE1_CHANGED, "page 1 b-tree content changed");
  expect_refusal(file, len, ps, us, n0, 3, m_txn_page1, (void *)(intptr_t)39,
                 MW_RELOC_FREELIST_CHANGED, MW_RELOC_FREELIST_CHANGED, "freelist count changed");
  expect_refusal(file, len, ps, us, n0, 3, m_txn_page1, (void *)(intptr_t)35,
                 MW_RELOC_FREELIST_CHANGED, MW_RELOC_FREELIST_CHANGED, "freelist head changed");
  expect_refusal(file, len, ps, us, n0, 3, m_txn_page1, (void *)(intptr_t)43,
                 MW_RELOC_SCHEMA_CHANGED, MW_RELOC_SCHEMA_CHANGED, "the transaction changed the schema");
  expect_refusal(file, len, ps, us, n0, 3, m_cur_page1, (void *)(intptr_t)43,
                 MW_RELOC_SCHEMA_CHANGED, MW_RELOC_SCHEMA_CHANGED, "a newer commit changed the schema");
  for (intptr_t b = 16; b <= 21; b++)
    expect_refusal(file, len, ps, us, n0, 3, m_cur_page1, (void *)b, MW_RELOC_FORMAT_CHANGED,
                   MW_RELOC_FORMAT_CHANGED, "a newer page 1 differs in bytes 16..21");
  expect_refusal(file, len, ps, us, n0, 3, m_cur_page1, (void *)(intptr_t)55,
                 MW_RELOC_AUTOVACUUM, MW_RELOC_AUTOVACUUM, "auto-vacuum database");
  expect_refusal(file, len, ps, us, n0, 3, m_snap_size, NULL, MW_RELOC_SIZE_MISMATCH,
                 MW_RELOC_SIZE_MISMATCH, "snapshot size disagrees with its page 1");
  expect_refusal(file, len, ps, us, n0, 3, m_shrunk, NULL, MW_RELOC_SHRUNK, MW_RELOC_SHRUNK,
                 "the newest state is smaller than the snapshot");
  expect_refusal(file, len, ps, us, n0, 3, m_bad_cell, (void *)(intptr_t)13, MW_RELOC_MALFORMED,
                 MW_RELOC_MALFORMED, "table leaf with a cell pointer outside the page");
  expect_refusal(file, len, ps, us, n0, 3, m_bad_cell, (void *)(intptr_t)5, MW_RELOC_MALFORMED,
                 MW_RELOC_MALFORMED, "table interior with a cell pointer outside the page");
}

/* Preconditions that need no write set beyond page 1: the lock-byte page in
** either range, and page numbers past SQLite's limit. */
static void check_limits(void) {
  static unsigned char p1[65536], snap[65536], cur[65536];
  uint32_t ps = 65536, lock = mw_lock_byte_page(ps);
  CHECK(lock == 16385);
  memset(p1, 0, sizeof p1);
  memcpy(p1, "SQLite format 3", 16);
  p1[16] = 0;
  p1[17] = 1; /* 65536 */
  p1[18] = p1[19] = 1;
  p1[21] = 64;
  p1[22] = p1[23] = 32;
  p1[100] = 13;
  struct {
    uint32_t n0, n1, end;
    mw_reloc_reason want;
  } cases[] = {
      {16380, 16380, 16390, MW_RELOC_LOCK_PAGE},       /* old range crosses */
      {100, 16383, 105, MW_RELOC_LOCK_PAGE},           /* new range crosses */
      {100, 16384, 105, MW_RELOC_LOCK_PAGE},           /* new range starts on it */
      {100, 16385, 105, MW_RELOC_NOT_RANGE},           /* after it: fine (then the write set) */
      {100, 0xfffffff0u, 200, MW_RELOC_TOO_BIG},
  };
  mw_wpage ws[1];
  static unsigned char scratch[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(snap, p1, ps);
    mw_put4(snap + 28, cases[i].n0);
    memcpy(cur, p1, ps);
    mw_put4(cur + 28, cases[i].n1);
    static unsigned char txn[65536];
    memcpy(txn, p1, ps);
    mw_put4(txn + 28, cases[i].end);
    ws[0] = (mw_wpage){1, txn};
    mw_reloc_args a = {ps, ps, snap, cases[i].n0, cur, cases[i].n1, 1};
    mw_reloc_reason r = mw_relocate(&a, ws, 1, scratch, sizeof scratch, NULL);
    if (r != cases[i].want) {
      fprintf(stderr, "limit case %zu: got %s\n", i, mw_reloc_reason_name(r));
      exit(1);
    }
  }
  /* a lock-byte page number in the write set is refused */
  printf("  lock-byte page and page-number limits refused\n");
}

/* ---- 4. random corruption: refused or relocated, never out of bounds ---- */

static void check_corruption(unsigned char *file, size_t len, uint32_t ps, uint32_t us, uint32_t n0,
                             int rounds) {
  int refused = 0, passed = 0;
  for (int round = 0; round < rounds; round++) {
    sim s;
    sim_setup(&s, file, len, ps, us, n0, 2);
    int hits = 1 + (int)rnd_below(4);
    for (int h = 0; h < hits; h++) {
      unsigned char *p = s.ws[rnd_below((uint32_t)s.nws)].data;
      /* mostly headers, pointer arrays and cell starts */
      uint32_t off = rnd_below(3) ? rnd_below(64) : rnd_below(ps);
      p[off] = (unsigned char)rnd();
    }
    unsigned char *before = malloc(len);
    CHECK(before != NULL);
    memcpy(before, s.pages, len);
    mw_reloc_reason r = mw_relocate(&s.args, s.ws, s.nws, s.scratch, s.scratch_len, NULL);
    if (r != MW_RELOC_OK) {
      CHECK(memcmp(before, s.pages, len) == 0);
      refused++;
    } else {
      passed++;
    }
    free(before);
    sim_free(&s);
  }
  printf("  %d corrupted write sets: %d refused, %d relocated (damage outside references)\n",
         rounds, refused, passed);
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  tmp_init();
  const cfg cfgs[] = {{512, 0}, {512, 32}, {1024, 33}, {4096, 0}, {4096, 8}, {65536, 0}};
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
    uint32_t ps = (uint32_t)cfgs[c].page_size, us = ps - (uint32_t)cfgs[c].reserve;
    const char *path = tpath("src.db");
    make_db(path, (int)ps, cfgs[c].reserve, ps >= 65536 ? 1 : ps >= 4096 ? 3 : 2);
    size_t len;
    unsigned char *file = read_file(path, &len);
    CHECK(file[20] == ps - us);
    CHECK(integrity_ok(path));
    check_coverage(file, len, ps, us);
    check_refs_match_dbstat(path, file, len, ps, us);

    sqlite3 *db = open_db(path);
    uint32_t maxroot = (uint32_t)query_int(db, "SELECT max(rootpage) FROM sqlite_schema");
    sqlite3_close(db);
    uint64_t want = digest(path);
    uint32_t npages = (uint32_t)(len / ps);
    /* new pages: everything after the last root page (roots are named by the
    ** schema, not by b-tree pointers: a real growth never creates one) */
    /* and one that cuts an overflow chain: its existing head points into the range */
    uint32_t cut = npages;
    for (uint32_t p = maxroot + 1; p < npages && cut == npages; p++) {
      const unsigned char *page = file + (size_t)(p - 1) * ps;
      if (!(page[0] == 2 || page[0] == 5 || page[0] == 10 || page[0] == 13) && mw_get4(page) > p)
        cut = p;
    }
    uint32_t n0s[] = {maxroot, maxroot + 1, (maxroot + npages) / 2, cut, npages - 1, npages};
    uint32_t ds[] = {0, 1, 5, 37};
    int runs = 0;
    for (size_t i = 0; i < 6; i++) {
      for (size_t j = 0; j < 4; j++) {
        if (ps >= 65536 && (i + j) % 2) continue; /* keep the big pages quick */
        check_relocation(tpath("reloc.db"), file, len, ps, us, n0s[i], (uint32_t)ds[j], want);
        runs++;
      }
    }
    printf("  %u/%u: %d relocations of up to %u pages pass integrity_check with identical rows\n",
           ps, us, runs, npages - maxroot);
    if (ps == 1024 || ps == 4096) {
      printf("  refusals (%u/%u):\n", ps, us);
      check_refusals(file, len, ps, us, maxroot, (maxroot + npages) / 2);
    }
    if (ps <= 1024) check_corruption(file, len, ps, us, maxroot, ps == 512 ? 300 : 150);
    free(file);
  }
  CHECK(straddling_chains > 0);
  printf("  %d existing overflow pages chained into a new range were rewritten\n", straddling_chains);
  printf("  mw_relocate: %.2f us per written 4 KiB page\n", relocate_us_per_page);
  check_limits();
  tmp_cleanup();
  printf("test_relocate: ok\n");
  return 0;
}
