/*
** Rebase (docs/design/rebase.md): a commit that lost only
** because commits since its snapshot changed other rows of the same table leaf
** pages is published with its row changes replayed on the newest pages.
**
** Two parts, one file each:
**  - leaf_merge.c: the three-way merge of one table b-tree leaf page (type 13), a
**    pure function over page images: no state, no locks, no allocation (the caller
**    passes scratch), no I/O, no SQLite calls.
**  - rebase.c: the commit path's side: which write conflicts a rebase may resolve,
**    the images it merges (under the page's stripe), the rows the transaction
**    declared it read (MW_FCNTL_REBASE_ROWS), and the counters.
*/
#ifndef MW_REBASE_H
#define MW_REBASE_H

#include <stddef.h>
#include <stdint.h>

/* Why a leaf merge was refused. Stable numbering. */
typedef enum mw_leaf_merge_result {
  MW_LEAF_OK = 0,
  MW_LEAF_BAD_ARGS,       /* geometry, page 1, null pointer, scratch too small */
  MW_LEAF_NOT_TABLE_LEAF, /* a side is not a table leaf page (type 13) */
  MW_LEAF_MALFORMED,      /* a cell out of bounds, keys not strictly increasing */
  MW_LEAF_SAME_ROW,       /* a row that both sides changed */
  MW_LEAF_READ_CHANGED,   /* a row the transaction read was changed by theirs */
  MW_LEAF_OVERFLOW,       /* ours changed a row that spills to overflow pages */
  MW_LEAF_DOES_NOT_FIT,   /* the merged rows do not fit on one page */
  MW_LEAF_EMPTY,          /* no row would be left: SQLite removes such a page from its
                             parent (unless it is a root), which a merge cannot do */
  MW_LEAF_RESULT_COUNT
} mw_leaf_merge_result;

const char *mw_leaf_merge_result_name(int result);

/* Bytes of scratch mw_merge_table_leaf needs for pages of page_size bytes. */
size_t mw_leaf_merge_scratch_size(uint32_t page_size);

/* Three-way merge of table leaf page pgno (not page 1): `base` as the transaction's
** snapshot saw it, `ours` as the transaction wrote it, `theirs` the newest version.
** A row is its cell (the key, the local payload, the first overflow page); it
** changed on a side when its cell bytes differ from base's, or it appeared or went.
** The merge takes theirs and applies ours' changes, when:
**  - no row changed on both sides;
**  - no row in `reads` (sorted ascending; rowids of any table, so a match may be
**    another table's row: refusing then is only cautious) changed on theirs;
**  - no row ours changed had or has overflow pages (their pages would change too);
**  - the result fits, and holds at least one row.
** On MW_LEAF_OK, `out` (page_size bytes) holds the merged page: theirs' bytes past
** the usable size, a fresh header, the cells packed at the end, no free blocks.
** *pChanged receives the number of rows ours changed (also when refused). */
mw_leaf_merge_result mw_merge_table_leaf(const unsigned char *base, const unsigned char *ours,
                                         const unsigned char *theirs, uint32_t pgno,
                                         uint32_t page_size, uint32_t usable_size,
                                         const int64_t *reads, size_t nreads,
                                         unsigned char *out, void *scratch,
                                         size_t scratch_size, int *pChanged);

/* ---------------------------------------------------------------------------
** The commit path's side (rebase.c). The types are engine.h's.
*/
typedef struct mw_lane mw_lane;
typedef struct mw_chain mw_chain;

/* MW_FCNTL_REBASE_ROWS: adds rowids to the rows the transaction read or wrote, and
** marks them declared. SQLITE_MISUSE outside a write transaction (the write lock held). */
int mw_rebase_declare(mw_lane *l, const int64_t *rowids, int n);
/* At the end of the write transaction (its write lock released) and of the snapshot:
** the declaration covered that transaction only. */
void mw_rebase_forget(mw_lane *l);
/* 1 when a write conflict of this commit on pgno may be rebased: mw_rebase=1, the
** reads declared, the snapshot's first commit, no write of page 1 (no growth), one
** process, a page that existed at the snapshot. */
int mw_rebase_candidate(const mw_lane *l, uint32_t pgno, int writes_page1);
/* 1 when every page of the write set (wp, img) is a b-tree leaf other than page 1: no
** rebalance (interior pages), no overflow or pointer-map page. */
int mw_rebase_write_set_ok(const uint32_t *wp, unsigned char *const *img, int nw);
/* Merges the newest version of pgno (its chain c; the caller holds its stripe) into
** img, the commit's image. SQLITE_OK with *pMerged 1 (img rewritten) or 0 (refused,
** counted; img untouched), or an error. */
int mw_rebase_page(mw_lane *l, uint32_t pgno, unsigned char *img, const mw_chain *c,
                   int *pMerged);

#endif /* MW_REBASE_H */
