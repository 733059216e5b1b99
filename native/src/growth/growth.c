/*
** growth.c: concurrent growth on the commit path (docs/design/growth.md,
** docs/relocation.md section 4). Called by commit.c at its "relocation hook" when
** the only write conflicts of a snapshot's first commit are page 1, pages past the
** snapshot's end, and interior table pages both sides changed.
**
** It renumbers the write set's new pages to follow the newest end (mw_relocate),
** builds the merged page 1, and merges the interior table pages three ways
** (mw_merge_interior_table). Everything happens on the commit's own copies of the
** page images: a refusal leaves nothing published, the caller just refuses the
** commit.
**
** Owns: the classification of growth conflicts and the calls into relocate.c and
** merge.c. Never touches: the store's chains (it only reads them), the log, the
** epochs, the lane's WAL. The caller holds every stripe of the store, so page 1's
** newest version (and with it the newest size N1) cannot change until the commit
** is assigned its epoch: every commit that changes the size writes page 1.
*/
#include "engine.h"
#include "btree/btree_page.h"
#include "core/datafile.h"
#include "core/store.h"
#include "growth/growth.h"
#include "growth/relocate.h"

#include <stdlib.h>
#include <string.h>

int mw_growth_candidate(mw_lane *l, uint32_t pgno, const unsigned char *ours,
                        const mw_chain *c) {
  if (pgno == 1 || pgno > l->snap_size) return 1;
  /* Interior table page on both sides: the merge decides (not when the newest version
  ** cannot be read: the commit is then refused as any conflict). */
  if (ours[0] != MW_BTREE_INTERIOR_TABLE || c == 0 || c->n == 0) return 0;
  int rc = SQLITE_OK;
  const unsigned char *newest = mw_store_image(&l->db->store, c, &c->v[c->n - 1], &rc);
  return newest && newest[0] == MW_BTREE_INTERIOR_TABLE;
}

typedef struct wrote_ctx {
  mw_lane *l;
  const uint32_t *wp;
  int nw;
} wrote_ctx;

static int wrote(void *ctx, int side, uint32_t pgno) {
  wrote_ctx *w = ctx;
  if (side == MW_SIDE_OURS) {
    int lo = 0, hi = w->nw;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (w->wp[mid] < pgno) lo = mid + 1; else hi = mid;
    }
    return lo < w->nw && w->wp[lo] == pgno;
  }
  /* Theirs: a version newer than the snapshot (the caller holds every stripe). */
  mw_chain *c = mw_store_chain_locked(&w->l->db->store, pgno);
  return c && c->n && c->v[c->n - 1].epoch > w->l->snap;
}

/* Page pgno as the snapshot saw it, into buf when it must come from the file. */
const unsigned char *mw_snap_page(mw_lane *l, uint32_t pgno, unsigned char *buf, int *rc) {
  mw_chain *c = mw_store_chain_locked(&l->db->store, pgno);
  const mw_pver *v = c ? mw_chain_view(c, l->snap, l->own, l->nown) : 0;
  if (v) {
    const unsigned char *img = mw_store_image(&l->db->store, c, v, rc);
    return img ? img : buf;
  }
  *rc = mw_db_read_file(l->db, pgno, buf, 0, l->db->page_size);
  return buf;
}

typedef struct sort_ent { uint32_t pgno; unsigned char *img; } sort_ent;
static int cmp_ent(const void *a, const void *b) {
  uint32_t x = ((const sort_ent *)a)->pgno, y = ((const sort_ent *)b)->pgno;
  return x < y ? -1 : x > y;
}

static void count_reloc(mw_lane *l, int reason) {
  l->stats[MW_STAT_RELOCATE_REFUSED]++;
  if (reason == MW_RELOC_LOCK_PAGE) l->stats[MW_STAT_RELOCATE_LOCK_PAGE]++;
  else if (reason == MW_RELOC_NOT_FIRST_COMMIT) l->stats[MW_STAT_RELOCATE_STALE]++;
  else if (reason == MW_RELOC_FREELIST_CHANGED || reason == MW_RELOC_PAGE1_CHANGED)
    l->stats[MW_STAT_RELOCATE_PAGE1]++;
  else if (reason >= MW_RELOC_DUP_PAGE)
    l->stats[MW_STAT_RELOCATE_UNSAFE]++;
}

int mw_growth_apply(mw_lane *l, uint32_t *wp, unsigned char **img, int nw,
                    const uint32_t *merge, int nmerge, uint32_t *pDbPages, int *pMerged) {
  mw_db *db = l->db;
  uint32_t pgsz = (uint32_t)db->page_size;
  int rc = SQLITE_OK;
  *pMerged = 0;
  unsigned char *buf1 = malloc(pgsz), *bufn = malloc(pgsz), *bufb = malloc(pgsz);
  unsigned char *out = malloc(pgsz);
  mw_wpage *ws = malloc((size_t)nw * sizeof(*ws));
  sort_ent *se = malloc((size_t)nw * sizeof(*se));
  size_t rscr = mw_reloc_scratch_size((size_t)nw), mscr = mw_merge_scratch_size(pgsz);
  void *scratch = malloc(rscr > mscr ? rscr : mscr);
  if (!buf1 || !bufn || !bufb || !out || !ws || !se || !scratch) { rc = SQLITE_NOMEM; goto done; }

  /* Page 1 at the snapshot and the newest page 1 (the latest assigned epoch that
  ** wrote it: the caller holds its stripe). */
  const unsigned char *snap1 = mw_snap_page(l, 1, buf1, &rc);
  if (rc != SQLITE_OK) goto done;
  mw_chain *c1 = mw_store_chain_locked(&db->store, 1);
  const unsigned char *cur1 = 0;
  if (c1 && c1->n) {
    cur1 = mw_store_image(&db->store, c1, &c1->v[c1->n - 1], &rc);
    if (cur1 == 0) goto done;
  } else {
    rc = mw_db_read_file(db, 1, bufn, 0, (int)pgsz);
    if (rc != SQLITE_OK) goto done;
    cur1 = bufn;
  }

  mw_reloc_args a;
  memset(&a, 0, sizeof a);
  a.page_size = pgsz;
  a.usable_size = pgsz - cur1[20];
  a.snap_page1 = snap1;
  a.snap_npages = l->snap_size;
  a.cur_page1 = cur1;
  a.cur_npages = mw_get32(cur1 + 28);
  a.first_commit = l->nown == 0;
  for (int i = 0; i < nw; i++) { ws[i].pgno = wp[i]; ws[i].data = img[i]; }
  mw_reloc_info info;
  mw_reloc_reason why = mw_relocate(&a, ws, (size_t)nw, scratch, rscr, &info);
  if (why != MW_RELOC_OK) {
    count_reloc(l, why);
    rc = SQLITE_BUSY_SNAPSHOT;
    goto done;
  }
  /* Renumbered: keep the write set sorted by page (commit.c searches it). */
  for (int i = 0; i < nw; i++) { se[i].pgno = ws[i].pgno; se[i].img = ws[i].data; }
  qsort(se, (size_t)nw, sizeof *se, cmp_ent);
  for (int i = 0; i < nw; i++) { wp[i] = se[i].pgno; img[i] = se[i].img; }

  /* Interior table pages both sides changed (page numbers <= N0: not renumbered). */
  wrote_ctx wc = { l, wp, nw };
  for (int m = 0; m < nmerge; m++) {
    uint32_t p = merge[m];
    int k = -1;
    for (int i = 0; i < nw && k < 0; i++)
      if (wp[i] == p) k = i;
    mw_chain *c = mw_store_chain_locked(&db->store, p);
    if (k < 0 || c == 0 || c->n == 0) { rc = SQLITE_BUSY_SNAPSHOT; goto done; }
    const unsigned char *base = mw_snap_page(l, p, bufb, &rc);
    if (rc != SQLITE_OK) goto done;
    const unsigned char *theirs = mw_store_image(&db->store, c, &c->v[c->n - 1], &rc);
    if (theirs == 0) goto done;
    mw_merge_result mr = mw_merge_interior_table(base, img[k], theirs, p, pgsz,
                                                 a.usable_size, wrote, &wc, out, scratch, mscr);
    if (mr != MW_MERGE_OK) {
      l->stats[MW_STAT_MERGE_REFUSED]++;
      rc = SQLITE_BUSY_SNAPSHOT;
      goto done;
    }
    memcpy(img[k], out, pgsz);
    (*pMerged)++;
  }
  *pDbPages = info.to + info.count;

done:
  free(buf1);
  free(bufn);
  free(bufb);
  free(out);
  free(ws);
  free(se);
  free(scratch);
  return rc;
}
