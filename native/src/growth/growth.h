/*
** growth.h: concurrent growth on the commit path (growth.c, docs/design/growth.md);
** the page-level machinery is relocate.h's.
*/
#ifndef MW_GROWTH_H
#define MW_GROWTH_H

#include "engine.h"

/* growth.c: called by mw_commit under every stripe. */
/* 1 when a write conflict on pgno is one that relocation or the interior merge
** may resolve: page 1, a page past the snapshot's end, or an interior table page
** on both sides. c is the page's chain. */
int mw_growth_candidate(mw_lane *l, uint32_t pgno, const unsigned char *ours,
                        const mw_chain *c);
/* Relocates the write set (wp sorted, img) past the newest end and merges the
** interior table pages merge[0..nmerge-1]. SQLITE_OK: wp/img renumbered (still
** sorted), *pDbPages the new size, *pMerged the pages merged. SQLITE_BUSY_SNAPSHOT:
** refused (reason counted; the images may be half rewritten: drop them). */
int mw_growth_apply(mw_lane *l, uint32_t *wp, unsigned char **img, int nw,
                    const uint32_t *merge, int nmerge, uint32_t *pDbPages, int *pMerged);

/* growth.c: page pgno as the lane's snapshot sees it (the store's version, or the
** file's into buf). Caller holds the page's stripe. */
const unsigned char *mw_snap_page(mw_lane *l, uint32_t pgno, unsigned char *buf, int *rc);

#endif /* MW_GROWTH_H */
