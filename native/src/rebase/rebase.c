/*
** rebase.c: rebase on the commit path (docs/design/rebase.md). Called by commit.c
** at step 4 when a write conflict is on a page that existed at the snapshot and the
** transaction may be rebased.
**
** A page image does not show which rows a transaction read: SQLite reads a whole
** page to find one row. Nor every row it wrote: a write of the value a row already
** had leaves the page's bytes as they were. So a rebase needs the transaction's word
** for it. The caller (the package's binding, or a C program), after the transaction's
** first write, declares the rowids of every row its statements read or wrote (MW_FCNTL_REBASE_ROWS)
** and promises that they touched no other rows: point statements by rowid, no range
** or scan, no trigger, no foreign key check. Without a declaration nothing is
** rebased. With one, a conflict on a table leaf page is merged row by row
** (leaf_merge.c): refused when a row both sides changed, or a declared row changed
** since the snapshot. Only when every page the commit writes is a b-tree leaf: an
** interior page written means a rebalance moved rows between leaves, whose key
** ranges the merge would then break; an overflow or pointer-map page, a change the
** leaves do not show. Every other page the transaction read or wrote is validated as
** before, so reads of other pages (an index, an interior page) need no declaration.
**
** After a rebased commit, the connection's SQLite holds its own version of the
** merged pages, not the published one. So its snapshot may neither read through
** the engine (a page would mix the two views) nor commit again; it ends cold
** (lane.c), as after a refusal.
**
** Owns: the declared rows, the choice of conflicts to rebase, the merged images,
** the rebase counters. Never touches: the store's chains (it only reads them,
** under the caller's stripes), the log, the epochs, the lane's WAL.
*/
#include "engine.h"
#include "btree/btree_page.h"
#include "core/store.h"
#include "growth/growth.h"
#include "rebase/rebase.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int mw_rebase_declare(mw_lane *l, const int64_t *rowids, int n) {
  if (n < 0 || (n > 0 && rowids == 0)) return SQLITE_MISUSE;
  /* Only in a write transaction, which ends when its write lock goes (lane.c forgets the
  ** declaration there). Not the snapshot alone: a statement left pending keeps SQLite's
  ** read snapshot across COMMIT and ROLLBACK, so one snapshot can span transactions, and a
  ** declaration made in one (even one that wrote nothing) would cover the next. */
  if (!l->in_snap || !l->write_lock) {
    sqlite3_log(SQLITE_MISUSE, "multiwriter: rows declared outside a write transaction on %s: "
                "declare them after the transaction's first write, before COMMIT", l->db->path);
    return SQLITE_MISUSE;
  }
  if (n > INT_MAX / 2 - l->rb_n) {
    l->rb_failed = 1;
    return SQLITE_TOOBIG;
  }
  if (l->rb_n + n > l->rb_cap) {
    int cap = l->rb_cap ? l->rb_cap : 16;
    while (cap < l->rb_n + n) cap *= 2;
    int64_t *r = realloc(l->rb_rows, (size_t)cap * sizeof(int64_t));
    if (r == 0) {
      l->rb_failed = 1; /* the declaration is incomplete: nothing is rebased */
      return SQLITE_NOMEM;
    }
    l->rb_rows = r;
    l->rb_cap = cap;
  }
  if (n > 0) memcpy(l->rb_rows + l->rb_n, rowids, (size_t)n * sizeof(int64_t));
  l->rb_n += n;
  l->rb_sorted = 0;
  l->rb_declared = 1;
  return SQLITE_OK;
}

void mw_rebase_forget(mw_lane *l) {
  l->rb_n = 0;
  l->rb_declared = 0;
  l->rb_failed = 0;
  if (l->rb_cap > 4096) {
    free(l->rb_rows);
    l->rb_rows = 0;
    l->rb_cap = 0;
  }
}

int mw_rebase_candidate(const mw_lane *l, uint32_t pgno, int writes_page1) {
  return l->rebase && l->rb_declared && !l->rb_failed && l->nown == 0 && !writes_page1 &&
         !l->db->mp && pgno > 1 && pgno <= l->snap_size;
}

int mw_rebase_write_set_ok(const uint32_t *wp, unsigned char *const *img, int nw) {
  for (int i = 0; i < nw; i++)
    if (wp[i] == 1 || (img[i][0] != MW_BTREE_LEAF_INDEX && img[i][0] != MW_BTREE_LEAF_TABLE))
      return 0;
  return 1;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

int mw_rebase_page(mw_lane *l, uint32_t pgno, unsigned char *img, const mw_chain *c,
                   int *pMerged) {
  mw_db *db = l->db;
  uint32_t pgsz = (uint32_t)db->page_size;
  *pMerged = 0;
  if (c == 0 || c->n == 0) return SQLITE_OK; /* no newer version: not a conflict */
  if (!l->rb_sorted && l->rb_n > 1) {
    qsort(l->rb_rows, (size_t)l->rb_n, sizeof(int64_t), cmp_i64);
  }
  l->rb_sorted = 1;
  size_t need = mw_leaf_merge_scratch_size(pgsz);
  unsigned char *base_buf = malloc(pgsz), *out = malloc(pgsz);
  void *scratch = malloc(need);
  int rc = base_buf && out && scratch ? SQLITE_OK : SQLITE_NOMEM;
  const unsigned char *base = 0, *theirs = 0, *page1 = 0;
  if (rc == SQLITE_OK) base = mw_snap_page(l, pgno, base_buf, &rc);
  if (rc == SQLITE_OK) theirs = mw_store_image(&db->store, c, &c->v[c->n - 1], &rc);
  /* The usable size: the reserved bytes per page (page 1, byte 20) never change in a
  ** database's life (SQLite sets them at creation or VACUUM, which writes page 1). */
  if (rc == SQLITE_OK && theirs) page1 = mw_snap_page(l, 1, out, &rc);
  if (rc == SQLITE_OK && (theirs == 0 || page1 == 0)) rc = SQLITE_IOERR_READ;
  if (rc == SQLITE_OK) {
    uint32_t usable = pgsz - page1[20];
    int nchanged = 0;
    mw_leaf_merge_result r =
        mw_merge_table_leaf(base, img, theirs, pgno, pgsz, usable, l->rb_rows,
                            (size_t)l->rb_n, out, scratch, need, &nchanged);
    if (r == MW_LEAF_OK) {
      memcpy(img, out, pgsz);
      *pMerged = 1;
    } else {
      l->stats[MW_STAT_REBASE_REFUSED]++;
    }
  }
  free(base_buf);
  free(out);
  free(scratch);
  return rc;
}
