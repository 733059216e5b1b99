/*
** store.c: the page store. Committed page versions (page, epoch) -> image, in
** per-page chains sorted by epoch, behind MW_STRIPES lock stripes (page mod N).
** Readers copy bytes under the stripe lock; nothing else is global. A lazy version
** (mw_mp=1: another process's page, known by its offset in the log) gets its image
** on first use through the loader its owner set (db.c), under the stripe lock.
**
** Owns: chains, images, the per-stripe hash tables, garbage collection.
** Never touches: files, SQLite, epochs' visibility (the caller passes the epochs).
*/
#include "engine.h"
#include "core/store.h"

#include <stdlib.h>
#include <string.h>

static uint32_t slot_hash(uint32_t pgno, uint32_t cap) {
  return ((pgno / MW_STRIPES) * 2654435761u) & (cap - 1);
}

int mw_store_init(mw_store *s, int page_size, uint32_t cache_pages) {
  memset(s, 0, sizeof(*s));
  s->page_size = page_size;
  s->base_cap = cache_pages / MW_STRIPES;
  for (int i = 0; i < MW_STRIPES; i++) mw_mutex_init(&s->stripe[i].mu);
  return SQLITE_OK;
}

static void chain_free(mw_chain *c) {
  for (uint32_t i = 0; i < c->n; i++) free(c->v[i].img);
  free(c->v);
  free(c);
}

void mw_store_free(mw_store *s) {
  for (int i = 0; i < MW_STRIPES; i++) {
    mw_stripe *st = &s->stripe[i];
    for (uint32_t j = 0; j < st->cap; j++)
      if (st->slot[j]) chain_free(st->slot[j]);
    free(st->slot);
    st->slot = 0;
    st->cap = st->count = 0;
    mw_mutex_destroy(&st->mu);
  }
}

void mw_store_lock(mw_store *s, int stripe) { mw_mutex_lock(&s->stripe[stripe].mu); }
void mw_store_unlock(mw_store *s, int stripe) { mw_mutex_unlock(&s->stripe[stripe].mu); }

mw_chain *mw_store_chain_locked(mw_store *s, uint32_t pgno) {
  mw_stripe *st = &s->stripe[mw_stripe_of(pgno)];
  if (st->cap == 0) return 0;
  for (uint32_t h = slot_hash(pgno, st->cap);; h = (h + 1) & (st->cap - 1)) {
    mw_chain *c = st->slot[h];
    if (c == 0) return 0;
    if (c->pgno == pgno) return c;
  }
}

static int stripe_grow(mw_stripe *st) {
  uint32_t ncap = st->cap ? st->cap * 2 : 64;
  mw_chain **ns = calloc(ncap, sizeof(*ns));
  if (ns == 0) return SQLITE_NOMEM;
  for (uint32_t i = 0; i < st->cap; i++) {
    mw_chain *c = st->slot[i];
    if (c == 0) continue;
    uint32_t h = slot_hash(c->pgno, ncap);
    while (ns[h]) h = (h + 1) & (ncap - 1);
    ns[h] = c;
  }
  free(st->slot);
  st->slot = ns;
  st->cap = ncap;
  return SQLITE_OK;
}

/* Removes the chain at slot i with backward-shift deletion (no tombstones). */
static void stripe_remove_at(mw_stripe *st, uint32_t i) {
  uint32_t mask = st->cap - 1;
  st->slot[i] = 0;
  st->count--;
  for (uint32_t j = (i + 1) & mask; st->slot[j]; j = (j + 1) & mask) {
    mw_chain *c = st->slot[j];
    uint32_t h = slot_hash(c->pgno, st->cap);
    /* c may move to the hole i when its home h is not in (i, j] cyclically. */
    int in_range = (i <= j) ? (h > i && h <= j) : (h > i || h <= j);
    if (!in_range) {
      st->slot[i] = c;
      st->slot[j] = 0;
      i = j;
    }
  }
}

const mw_pver *mw_chain_view(const mw_chain *c, uint64_t snap, const uint64_t *own, int nown) {
  /* Own epochs are newer than snap; check them from the newest version down. */
  if (nown > 0) {
    for (uint32_t i = c->n; i > 0; i--) {
      const mw_pver *v = &c->v[i - 1];
      if (v->epoch <= snap) return v;
      for (int k = 0; k < nown; k++)
        if (own[k] == v->epoch) return v;
    }
    return 0;
  }
  /* Binary search: the last version with epoch <= snap. */
  uint32_t lo = 0, hi = c->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (c->v[mid].epoch <= snap) lo = mid + 1; else hi = mid;
  }
  return lo ? &c->v[lo - 1] : 0;
}

/* Frees the versions older than the newest one <= oldest (nobody can read them).
** Versions are in epoch order (mw_chain_view's search relies on it too): the scan stops
** at the first one above oldest, so that the common case, nothing to free, costs one
** comparison (a whole scan of every chain at each install and each collection was a
** visible part of 16 processes' catch-ups). */
static void chain_prune(mw_stripe *st, mw_chain *c, uint64_t oldest) {
  uint32_t keep_from = 0;
  while (keep_from + 1 < c->n && c->v[keep_from + 1].epoch <= oldest) keep_from++;
  if (keep_from == 0) return;
  for (uint32_t i = 0; i < keep_from; i++) {
    if (c->v[i].epoch == 0) st->nbase--;
    free(c->v[i].img);
  }
  memmove(c->v, c->v + keep_from, (c->n - keep_from) * sizeof(mw_pver));
  c->n -= keep_from;
}

/* Doubles the room of a chain's version array; NULL (array unchanged, still owned
** by the chain) when out of memory. */
static mw_pver *grow_versions_raw(mw_chain *c) {
  uint32_t ncap = c->cap ? c->cap * 2 : 2;
  mw_pver *nv = realloc(c->v, ncap * sizeof(*nv));
  if (nv == 0) return 0;
  c->v = nv;
  c->cap = ncap;
  return nv;
}

static int install_version(mw_store *s, uint32_t pgno, uint64_t epoch, unsigned char *img,
                           uint64_t at, uint64_t oldest);

int mw_store_install_locked(mw_store *s, uint32_t pgno, uint64_t epoch, unsigned char *img,
                            uint64_t oldest) {
  return install_version(s, pgno, epoch, img, 0, oldest);
}

/* img, or (img 0) a lazy version at log offset `at`. */
static int install_version(mw_store *s, uint32_t pgno, uint64_t epoch, unsigned char *img,
                           uint64_t at, uint64_t oldest) {
  mw_stripe *st = &s->stripe[mw_stripe_of(pgno)];
  mw_chain *c = mw_store_chain_locked(s, pgno);
  if (c == 0) {
    if ((st->count + 1) * 4 > st->cap * 3 && stripe_grow(st) != SQLITE_OK) {
      free(img);
      return SQLITE_NOMEM;
    }
    c = calloc(1, sizeof(*c));
    if (c == 0) {
      free(img);
      return SQLITE_NOMEM;
    }
    c->pgno = pgno;
    uint32_t h = slot_hash(pgno, st->cap);
    while (st->slot[h]) h = (h + 1) & (st->cap - 1);
    st->slot[h] = c;
    st->count++;
  }
  /* Pruned only when full: the common install appends without reading the versions
  ** (with mw_mp=1 every process installs every other process's records, and that read
  ** was a cache miss in most of them). Garbage collection prunes every chain too. */
  if (c->n == c->cap) chain_prune(st, c, oldest);
  if (c->n == c->cap) {
    uint32_t ncap = c->cap ? c->cap * 2 : 2;
    mw_pver *nv = realloc(c->v, ncap * sizeof(*nv));
    if (nv == 0) {
      free(img);
      return SQLITE_NOMEM;
    }
    c->v = nv;
    c->cap = ncap;
  }
  c->v[c->n].epoch = epoch;
  c->v[c->n].img = img;
  c->v[c->n].at = at;
  c->n++;
  return SQLITE_OK;
}

void mw_store_cache_file_page(mw_store *s, uint32_t pgno, const void *img, uint64_t snap) {
  int stripe = mw_stripe_of(pgno);
  mw_stripe *st = &s->stripe[stripe];
  if (s->base_cap == 0) return;
  mw_store_lock(s, stripe);
  mw_chain *c = mw_store_chain_locked(s, pgno);
  /* Already cached, or a version this snapshot sees appeared: leave it. */
  int skip = st->nbase >= s->base_cap || (c && c->n && c->v[0].epoch <= snap);
  unsigned char *copy = skip ? 0 : malloc((size_t)s->page_size);
  if (copy) {
    memcpy(copy, img, (size_t)s->page_size);
    if (c == 0) {
      /* A new chain holding only the file's version. */
      if (mw_store_install_locked(s, pgno, 0, copy, 0) == SQLITE_OK) st->nbase++;
    } else if (c->n == c->cap && grow_versions_raw(c) == 0) {
      free(copy);
    } else {
      memmove(c->v + 1, c->v, c->n * sizeof(mw_pver));
      c->v[0].epoch = 0;
      c->v[0].img = copy;
      c->v[0].at = 0;
      c->n++;
      st->nbase++;
    }
  }
  mw_store_unlock(s, stripe);
}

void mw_store_set_loader(mw_store *s, mw_store_loader load, void *ctx) {
  s->load = load;
  s->load_ctx = ctx;
}

const unsigned char *mw_store_image(mw_store *s, const mw_chain *c, const mw_pver *v, int *pRc) {
  *pRc = SQLITE_OK;
  if (v->img) return v->img;
  unsigned char *img = malloc((size_t)s->page_size);
  int rc = img == 0 ? SQLITE_NOMEM : s->load == 0 ? SQLITE_MISUSE : SQLITE_OK;
  if (rc == SQLITE_OK) rc = s->load(s->load_ctx, c->pgno, v->at, img);
  if (rc != SQLITE_OK) {
    free(img);
    *pRc = rc;
    return 0;
  }
  /* The chain is the store's, and the caller holds its stripe: the version keeps the
  ** image from now on. */
  mw_pver *w = (mw_pver *)v;
  w->img = img;
  w->at = 0;
  return img;
}

int mw_store_read(mw_store *s, uint32_t pgno, uint64_t snap, const uint64_t *own, int nown,
                  void *buf, int off, int amt) {
  int stripe = mw_stripe_of(pgno);
  int found = 0;
  mw_store_lock(s, stripe);
  mw_chain *c = mw_store_chain_locked(s, pgno);
  if (c) {
    const mw_pver *v = mw_chain_view(c, snap, own, nown);
    if (v) {
      int rc = SQLITE_OK;
      const unsigned char *img = mw_store_image(s, c, v, &rc);
      if (img) {
        memcpy(buf, img + off, (size_t)amt);
        found = 1;
      } else {
        found = -rc;
      }
    }
  }
  mw_store_unlock(s, stripe);
  return found;
}

void mw_store_gc(mw_store *s, uint64_t oldest, uint64_t compacted, uint64_t visible,
                 int64_t *pPinned, int64_t *pChains) {
  int64_t pinned = 0, chains = 0;
  uint64_t drop_upto = oldest < compacted ? oldest : compacted;
  for (int i = 0; i < MW_STRIPES; i++) {
    mw_stripe *st = &s->stripe[i];
    mw_mutex_lock(&st->mu);
    uint32_t j = 0;
    while (j < st->cap) {
      mw_chain *c = st->slot[j];
      if (c == 0) { j++; continue; }
      chain_prune(st, c, oldest);
      /* A cached file page (epoch 0) alone stays while the cache has room. */
      int cached_only = c->n == 1 && c->v[0].epoch == 0;
      if (c->n == 1 && !cached_only && c->v[0].epoch <= drop_upto && c->v[0].img &&
          st->nbase < s->base_cap) {
        /* The file holds this version and every snapshot sees it or newer: it is the
        ** file's page now, kept as its cached copy. A compaction so does not drop the
        ** pages it wrote (page 1 among them, whose header every commit checks: a lone
        ** writer, whose SQLite never reads page 1 again, would read it from the file at
        ** each commit). */
        c->v[0].epoch = 0;
        c->v[0].at = 0;
        st->nbase++;
        j++;
        continue;
      }
      if (c->n == 1 && c->v[0].epoch <= drop_upto && (!cached_only || st->nbase > s->base_cap)) {
        /* The file holds this version and every snapshot sees it or newer. */
        if (cached_only) st->nbase--;
        stripe_remove_at(st, j);
        chain_free(c);
        continue; /* slot j may hold a shifted chain now */
      }
      if (cached_only) { j++; continue; }
      /* Versions older than the newest one <= visible live only for old snapshots. */
      for (uint32_t k = 0; k + 1 < c->n; k++)
        if (c->v[k + 1].epoch <= visible) pinned++;
      chains++;
      j++;
    }
    mw_mutex_unlock(&st->mu);
  }
  if (pPinned) *pPinned = pinned;
  if (pChains) *pChains = chains;
}

/* No copies: a compaction's pages were each copied out of the store, and the copies,
** megabytes a compaction under a steady load, went back to the system after it and
** came in again (page faults) at the next one. The array is libc's heap, like the rest
** of the engine, so that it never counts in SQLite's memory status or its heap limits
** (a background thread would make sqlite3_memory_used move while no statement runs,
** and a hard_heap_limit fail a compaction). */
int mw_store_collect(mw_store *s, uint64_t since, uint64_t upto, mw_page_out **pOut, int *pN) {
  mw_page_out *out = 0;
  int n = 0, cap = 0;
  int rc = SQLITE_OK;
  for (int i = 0; i < MW_STRIPES && rc == SQLITE_OK; i++) {
    mw_stripe *st = &s->stripe[i];
    mw_mutex_lock(&st->mu);
    for (uint32_t j = 0; j < st->cap && rc == SQLITE_OK; j++) {
      mw_chain *c = st->slot[j];
      if (c == 0) continue;
      const mw_pver *v = mw_chain_view(c, upto, 0, 0);
      if (v == 0 || v->epoch <= since) continue;
      if (n == cap) {
        int ncap = cap ? cap * 2 : 64;
        mw_page_out *no = realloc(out, (size_t)ncap * sizeof(*no));
        if (no == 0) { rc = SQLITE_NOMEM; break; }
        out = no;
        cap = ncap;
      }
      const unsigned char *img = mw_store_image(s, c, v, &rc);
      if (img == 0) break;
      out[n].pgno = c->pgno;
      out[n].img = img;
      n++;
    }
    mw_mutex_unlock(&st->mu);
  }
  if (rc != SQLITE_OK) {
    free(out);
    out = 0;
    n = 0;
  }
  *pOut = out;
  *pN = n;
  return rc;
}

int mw_store_install_record(mw_store *s, uint64_t epoch, int npages, const uint32_t *pgnos,
                            const unsigned char *images, const uint64_t *ats, uint64_t prune) {
  for (int i = 0; i < npages; i++) {
    unsigned char *img = 0;
    if (images) {
      img = malloc((size_t)s->page_size);
      if (img == 0) return SQLITE_NOMEM;
      memcpy(img, images + (size_t)i * (size_t)s->page_size, (size_t)s->page_size);
    }
    int stripe = mw_stripe_of(pgnos[i]);
    mw_store_lock(s, stripe);
    int rc = install_version(s, pgnos[i], epoch, img, images ? 0 : ats[i], prune);
    mw_store_unlock(s, stripe);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}
