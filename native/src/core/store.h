/*
** store.h: the page store (store.c): committed page versions by (page, epoch) in
** chains behind lock stripes, the database file's pages it caches, garbage
** collection. The types are in engine.h.
*/
#ifndef MW_STORE_H
#define MW_STORE_H

#include "engine.h"

/* cache_pages: how many pages read from the database file the store keeps (as
** version epoch 0: the file's content, which every snapshot older than the chain's
** first version sees), so that the next transactions do not read them again. */
int mw_store_init(mw_store *s, int page_size, uint32_t cache_pages);
/* Keeps a copy of a whole page that a reader at snapshot `snap` just read from the
** file (no version <= snap existed). */
void mw_store_cache_file_page(mw_store *s, uint32_t pgno, const void *img, uint64_t snap);
void mw_store_free(mw_store *s);
static inline int mw_stripe_of(uint32_t pgno) { return (int)(pgno % MW_STRIPES); }
void mw_store_lock(mw_store *s, int stripe);
void mw_store_unlock(mw_store *s, int stripe);

/* Under the stripe lock: the chain of pgno, or NULL. */
mw_chain *mw_store_chain_locked(mw_store *s, uint32_t pgno);
/* The version a view sees: newest with epoch <= snap or epoch in own[0..nown-1]. */
const mw_pver *mw_chain_view(const mw_chain *c, uint64_t snap, const uint64_t *own, int nown);
/* Under the stripe lock: appends a version (epoch newer than every other of the
** chain) and frees the versions that no snapshot >= oldest can read. The store owns
** img afterwards. Returns SQLITE_NOMEM (img freed) on failure. */
int mw_store_install_locked(mw_store *s, uint32_t pgno, uint64_t epoch, unsigned char *img,
                            uint64_t oldest);
/* Installs a log record's pages at `epoch`, each under its stripe, passing `prune` to
** mw_store_install_locked: with images (npages of s->page_size bytes, back to back),
** copies of them; without (images 0), lazy versions at the log offsets ats[i].
** SQLITE_NOMEM when a copy cannot be made (the pages before it are installed).
** Lazy versions (mw_mp=1): another process's pages are read from the log only when
** somebody needs the image (most are never read by this process: they are superseded
** or compacted first); set_loader gives the function that reads them. */
int mw_store_install_record(mw_store *s, uint64_t epoch, int npages, const uint32_t *pgnos,
                            const unsigned char *images, const uint64_t *ats, uint64_t prune);
void mw_store_set_loader(mw_store *s, mw_store_loader load, void *ctx);
/* Under the page's stripe lock: the image of version v of chain c, read first if lazy;
** 0 when that read failed (*pRc says why). */
const unsigned char *mw_store_image(mw_store *s, const mw_chain *c, const mw_pver *v, int *pRc);
/* Copies bytes [off, off+amt) of the page as seen by the view into buf: 1 when found,
** 0 when the store has no version for the view, or a negative SQLite code (negated)
** when a lazy version could not be read. */
int mw_store_read(mw_store *s, uint32_t pgno, uint64_t snap, const uint64_t *own, int nown,
                  void *buf, int off, int amt);
/* Garbage collection: frees versions older than the newest one <= oldest, drops
** chains whose only version is <= min(oldest, compacted). *pPinned receives the
** versions kept only for snapshots older than `visible`; *pChains the chains left. */
void mw_store_gc(mw_store *s, uint64_t oldest, uint64_t compacted, uint64_t visible,
                 int64_t *pPinned, int64_t *pChains);

/* Collects the newest version <= upto of every page changed after `since`: *pOut is
** malloc'ed (free the array with free), its images are the store's own, not copies.
** The caller pins `upto` (db->compacting, compact.c): pruning keeps the newest version
** <= upto of every page, garbage collection is the caller's, and no image changes once
** installed, so the images stay whole until the pin goes. */
int mw_store_collect(mw_store *s, uint64_t since, uint64_t upto, mw_page_out **pOut, int *pN);

#endif /* MW_STORE_H */
