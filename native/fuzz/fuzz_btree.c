/* fuzz_btree: libFuzzer target for the b-tree page reader (btree_page.c) and its
** users: relocation (relocate.c), the interior-page merge (merge.c) and rebase's
** leaf merge (rebase/leaf_merge.c).
**
** Input: byte 0 page size (512 << (b % 8), 65536 at most), byte 1 reserved bytes at
** the end of each page, byte 2 the mode, the rest page images (each in a buffer of
** exactly the page size, zero-padded, so that ASan sees any read past a page;
** MW_FUZZ_VERBOSE=1 prints the result of each merge and relocation):
**   mode 0: every page read with mw_btree_header/mw_btree_cell/mw_btree_refs as page
**           1 and as page 2; every cell and reference must lie in the usable area;
**   mode 1: mw_merge_interior_table(base, ours, theirs); a merged page must read back
**           as an interior table page with strictly increasing keys;
**   mode 2: mw_relocate on a write set made of page 1 (the snapshot's page 1 with the
**           header fields relocation needs, unless byte 3 says raw) and the pages
**           that follow; a refusal must leave the write set untouched, a success must
**           leave every new page referenced exactly once, under its new number;
**   mode 3: mw_merge_table_leaf(base, ours, theirs) with up to 3 declared rows from
**           bytes 3-4; a merged page must read back as a table leaf with strictly
**           increasing keys, every cell in the usable area.
*/
#include "mw_internal.h"
#include "rebase/rebase.h"
#include "growth/relocate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAGES 12

static void fail(const char *why) {
  fprintf(stderr, "fuzz_btree: %s\n", why);
  abort();
}

/* ---- mode 0 */

typedef struct refs_ctx { uint32_t usable, n; } refs_ctx;

static int on_ref(void *ctx, mw_ref_kind kind, uint32_t cell, uint32_t off, uint32_t target) {
  refs_ctx *r = ctx;
  if (kind < MW_REF_CHILD || kind > MW_REF_OVERFLOW) fail("unknown reference kind");
  if ((uint64_t)off + 4 > r->usable) fail("reference outside the usable area");
  if (target == 0) fail("a reference to page 0 was reported");
  (void)cell;
  r->n++;
  return 0;
}

static void read_page(const unsigned char *page, uint32_t pgno, uint32_t ps, uint32_t us) {
  mw_btree_hdr h;
  if (mw_btree_header(page, pgno, ps, us, &h) == MW_PAGE_OK) {
    for (uint32_t i = 0; i < h.ncell; i++) {
      mw_cell_info c;
      if (mw_btree_cell(page, &h, i, &c) != MW_PAGE_OK) continue;
      if ((uint64_t)c.off + c.size > us) fail("cell outside the usable area");
      if (c.ovfl_off && (uint64_t)c.ovfl_off + 4 > us) fail("overflow pointer outside the page");
    }
  }
  refs_ctx r = { us, 0 };
  (void)mw_btree_refs(page, pgno, ps, us, on_ref, &r);
}

/* ---- mode 1 */

static int wrote(void *ctx, int side, uint32_t pgno) {
  unsigned bits = *(const unsigned *)ctx;
  return (bits >> ((pgno + (uint32_t)side) % 8)) & 1;
}

/* A merged page must read back as a page of the type, every cell readable, keys strictly
** increasing. Returns its number of cells. */
static uint32_t read_back(const unsigned char *out, uint32_t pgno, uint32_t ps, uint32_t us,
                          uint32_t type) {
  mw_btree_hdr h;
  if (mw_btree_header(out, pgno, ps, us, &h) != MW_PAGE_OK || h.type != type)
    fail("the merged page does not read as a page of its type");
  int64_t prev = 0;
  for (uint32_t i = 0; i < h.ncell; i++) {
    mw_cell_info c;
    if (mw_btree_cell(out, &h, i, &c) != MW_PAGE_OK) fail("a merged cell does not read");
    if (i > 0 && c.key <= prev) fail("merged keys not increasing");
    prev = c.key;
  }
  return h.ncell;
}

static void merge(unsigned char **pg, int npg, uint32_t ps, uint32_t us, unsigned bits) {
  if (npg < 3) return;
  size_t slen = mw_merge_scratch_size(ps);
  void *scratch = malloc(slen);
  unsigned char *out = malloc(ps);
  if (!scratch || !out) fail("out of memory");
  uint32_t pgno = 2 + (bits >> 8) % 100;
  mw_merge_result rc = mw_merge_interior_table(pg[0], pg[1], pg[2], pgno, ps, us,
                                                (bits & 0x80) ? 0 : wrote, &bits, out, scratch, slen);
  if (getenv("MW_FUZZ_VERBOSE")) fprintf(stderr, "merge: %s\n", mw_merge_result_name(rc));
  if (rc == MW_MERGE_OK) {
    read_back(out, pgno, ps, us, MW_BTREE_INTERIOR_TABLE);
  } else if (rc >= MW_MERGE_RESULT_COUNT || !strcmp(mw_merge_result_name(rc), "unknown")) {
    fail("unknown merge result");
  }
  free(scratch);
  free(out);
}

/* ---- mode 3 */

static void leaf_merge(unsigned char **pg, int npg, uint32_t ps, uint32_t us, unsigned bits) {
  if (npg < 3) return;
  size_t slen = mw_leaf_merge_scratch_size(ps);
  void *scratch = malloc(slen);
  unsigned char *out = malloc(ps);
  if (!scratch || !out) fail("out of memory");
  int64_t reads[3] = { bits & 0xf, (bits >> 4) & 0xff, 1000 + (bits >> 12) };
  size_t nreads = bits % 4;
  int changed = 0;
  mw_leaf_merge_result rc = mw_merge_table_leaf(pg[0], pg[1], pg[2], 2, ps, us, reads, nreads,
                                                out, scratch, slen, &changed);
  if (getenv("MW_FUZZ_VERBOSE")) fprintf(stderr, "leaf merge: %s\n", mw_leaf_merge_result_name(rc));
  if (rc == MW_LEAF_OK) {
    if (read_back(out, 2, ps, us, MW_BTREE_LEAF_TABLE) == 0) fail("a merged leaf has no cell");
  } else if (rc >= MW_LEAF_RESULT_COUNT || !strcmp(mw_leaf_merge_result_name(rc), "unknown")) {
    fail("unknown leaf merge result");
  }
  free(scratch);
  free(out);
}

/* ---- mode 2 */

typedef struct count_ctx { uint32_t lo, hi; uint32_t *count; } count_ctx;

static int count_ref(void *ctx, mw_ref_kind kind, uint32_t cell, uint32_t off, uint32_t target) {
  count_ctx *c = ctx;
  (void)kind;
  (void)cell;
  (void)off;
  if (target >= c->lo && target <= c->hi) c->count[target - c->lo]++;
  return 0;
}

static void put4(unsigned char *p, uint32_t v) { mw_put4(p, v); }

static void relocate(unsigned char **pg, int npg, uint32_t ps, uint32_t us, const uint8_t *ctl) {
  if (npg < 2) return;
  /* ctl: [0] raw page 1, [1] N0, [2] N1 - N0, [3] growth g, [4..] page numbers */
  uint32_t n0 = 2 + ctl[1] % 40, n1 = n0 + ctl[2] % 40;
  int n = npg - 1; /* pages besides the snapshot's page 1 image */
  uint32_t g = (uint32_t)(ctl[3] % (unsigned)n);
  unsigned char *snap1 = pg[0], *cur1 = malloc(ps), *txn1 = pg[1];
  if (!cur1) fail("out of memory");
  if (!(ctl[0] & 1)) {
    /* the header fields check_page1 wants, so that the fuzzer gets past them */
    put4(snap1 + 16, 0);
    snap1[16] = (unsigned char)(ps >> 8 & 0xff);
    snap1[17] = (unsigned char)(ps & 0xff);
    if (ps == 65536) { snap1[16] = 0; snap1[17] = 1; }
    snap1[20] = (unsigned char)(ps - us);
    snap1[21] = 64;
    memset(snap1 + 52, 0, 4);
    put4(snap1 + 28, n0);
    memcpy(txn1, snap1, ps);
    put4(txn1 + 28, n0 + g);
    put4(txn1 + 24, mw_get4(snap1 + 24) + 1);
    put4(txn1 + 92, mw_get4(snap1 + 24) + 1);
  }
  memcpy(cur1, snap1, ps);
  put4(cur1 + 28, n1);
  mw_wpage ws[MAX_PAGES];
  ws[0].pgno = 1;
  ws[0].data = txn1;
  for (int i = 1; i < n; i++) {
    ws[i].data = pg[i + 1];
    /* the first g pages are the new ones (unless the control byte says otherwise) */
    ws[i].pgno = (uint32_t)(i - 1) < g && !(ctl[0] & 2) ? n0 + (uint32_t)i : 1 + ctl[4 + i] % (n0 + g + 2);
  }
  mw_reloc_args a = { ps, us, snap1, n0, cur1, n1, 1 };
  unsigned char *copy[MAX_PAGES];
  uint32_t pg_before[MAX_PAGES];
  for (int i = 0; i < n; i++) {
    copy[i] = malloc(ps);
    if (!copy[i]) fail("out of memory");
    memcpy(copy[i], ws[i].data, ps);
    pg_before[i] = ws[i].pgno;
  }
  size_t slen = mw_reloc_scratch_size((size_t)n);
  void *scratch = malloc(slen);
  if (!scratch) fail("out of memory");
  mw_reloc_info info;
  mw_reloc_reason why = mw_relocate(&a, ws, (size_t)n, scratch, slen, &info);
  if (getenv("MW_FUZZ_VERBOSE")) fprintf(stderr, "relocate: %s, %u new pages\n", mw_reloc_reason_name(why), info.count);
  if (why != MW_RELOC_OK) {
    if (why >= MW_RELOC_REASON_COUNT) fail("unknown refusal reason");
    for (int i = 0; i < n; i++)
      if (ws[i].pgno != pg_before[i] || memcmp(copy[i], ws[i].data, ps) != 0)
        fail("a refused relocation changed the write set");
  } else if (info.count > 0) {
    /* every new page N1+1..N1+g referenced exactly once from the write set */
    uint32_t cnt[MAX_PAGES] = { 0 };
    count_ctx cc = { n1 + 1, n1 + info.count, cnt };
    if (info.count > MAX_PAGES) fail("more new pages than pages");
    for (int i = 0; i < n; i++) {
      (void)mw_btree_refs(ws[i].data, ws[i].pgno, ps, us, count_ref, &cc);
      if (ws[i].pgno > n0 && ws[i].pgno <= n1) fail("a page left between N0 and N1");
      uint32_t t = ws[i].data[ws[i].pgno == 1 ? 100 : 0];
      int btree = t == 2 || t == 5 || t == 10 || t == 13;
      uint32_t next = mw_get4(ws[i].data);
      if (!btree && next >= cc.lo && next <= cc.hi) cnt[next - cc.lo]++; /* overflow next */
    }
    for (uint32_t s = 0; s < info.count; s++)
      if (cnt[s] != 1) fail("a relocated page is not referenced exactly once");
  }
  for (int i = 0; i < n; i++) free(copy[i]);
  free(scratch);
  free(cur1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4 + 4 + MAX_PAGES) return 0;
  uint32_t ps = 512u << (data[0] % 8);
  if (ps > 65536) ps = 65536;
  uint32_t reserve = data[1];
  uint32_t us = ps - reserve;
  if (us < 480) us = ps;
  int mode = data[2] % 4;
  unsigned bits = data[3] | (unsigned)data[4] << 8;
  const uint8_t *ctl = data + 3; /* mode 2: 4 + MAX_PAGES control bytes */
  const uint8_t *body = data + 4 + 4 + MAX_PAGES;
  size_t blen = size - (4 + 4 + MAX_PAGES);
  if (blen > (size_t)ps * MAX_PAGES) blen = (size_t)ps * MAX_PAGES;
  int npg = (int)((blen + ps - 1) / ps);
  if (mode != 0 && npg < 3) npg = 3;
  unsigned char *pg[MAX_PAGES];
  for (int i = 0; i < npg; i++) {
    pg[i] = calloc(1, ps);
    if (!pg[i]) fail("out of memory");
    size_t from = (size_t)i * ps;
    if (from < blen) memcpy(pg[i], body + from, blen - from < ps ? blen - from : ps);
  }
  if (mode == 0) {
    for (int i = 0; i < npg; i++) {
      read_page(pg[i], 1, ps, us);
      read_page(pg[i], 2, ps, us);
    }
  } else if (mode == 1) {
    merge(pg, npg, ps, us, bits);
  } else if (mode == 3) {
    leaf_merge(pg, npg, ps, us, bits);
  } else {
    relocate(pg, npg, ps, us, ctl);
  }
  for (int i = 0; i < npg; i++) free(pg[i]);
  return 0;
}
