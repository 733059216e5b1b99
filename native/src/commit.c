/*
** commit.c: publishes a lane's commit, in the order of engine.md section 5:
**  1. copy the write set out of the private WAL (outside every lock);
**  2. reserve room in the log (SQLITE_FULL before anything is assigned);
**  3. lock the stripes of every page written or read, ascending;
**  4. validate: pages written, pages read, the schema cookie;
**  5. assign the epoch and the log offset together (under db->mu);
**  6. install the versions (not yet visible), unlock the stripes;
**  7. append the record to the log and wait for the group sync;
**  8. make the epoch visible, strictly in epoch order.
** Relocation (relocate.c, engine.md section 7) plugs in at step 4 where the only
** conflict is growth: see the comment "relocation hook" below.
**
** Owns: validation and publication. Never touches: the database file, SQLite.
*/
#include "engine.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define WAL_HDR 32
#define FRAME_HDR 24

typedef struct wpage { uint32_t pgno; uint64_t frame; } wpage;

static int cmp_wpage(const void *a, const void *b) {
  const wpage *x = a, *y = b;
  if (x->pgno != y->pgno) return x->pgno < y->pgno ? -1 : 1;
  /* Later frames first: the last frame of a page wins. */
  return x->frame > y->frame ? -1 : x->frame < y->frame;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int is_own(const mw_lane *l, uint64_t e) {
  for (int i = 0; i < l->nown; i++)
    if (l->own[i] == e) return 1;
  return 0;
}

static int in_sorted(const uint32_t *a, int n, uint32_t v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (a[mid] < v) lo = mid + 1; else hi = mid;
  }
  return lo < n && a[lo] == v;
}

/* Page 1 as the lane sees it against the newest page 1, under page 1's stripe:
** the schema cookie (bytes 40..43) of both, the newest database size (28..31), and
** whether the other header fields a transaction can read (44..91: user_version,
** application_id, ...) changed. Page 1 is not in the read set: its size, change
** counter and freelist change with every growth, and only writers of page 1 (who
** conflict on it) depend on those. */
static int page1_check(mw_lane *l, uint32_t *pView, uint32_t *pNewest, uint32_t *pSize,
                       int *pMeta) {
  mw_db *db = l->db;
  mw_chain *c = mw_store_chain_locked(&db->store, 1);
  const mw_pver *vv = c ? mw_chain_view(c, l->snap, l->own, l->nown) : 0;
  const mw_pver *vn = (c && c->n) ? &c->v[c->n - 1] : 0;
  unsigned char b[92];
  if (vv == 0 || vn == 0) {
    int rc = mw_db_read_file(db, 1, b + 28, 28, 64);
    if (rc != SQLITE_OK) return rc;
  }
  const unsigned char *view = vv ? vv->img : b;
  const unsigned char *newest = vn ? vn->img : b;
  *pView = mw_get32(view + 40);
  *pNewest = mw_get32(newest + 40);
  *pSize = mw_get32(newest + 28);
  *pMeta = memcmp(view + 44, newest + 44, 48) != 0;
  return SQLITE_OK;
}

/* ---- the interior-table routing exception (engine.md section 5, step 4) ---- */

typedef struct route { uint32_t child; int64_t lo, hi; } route; /* keys in (lo, hi] */

static int get_varint(const unsigned char *p, const unsigned char *end, int64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < 9; i++) {
    if (p + i >= end) return 0;
    if (i == 8) {
      v = (v << 8) | p[i];
      *out = (int64_t)v;
      return 1;
    }
    v = (v << 7) | (p[i] & 0x7f);
    if (!(p[i] & 0x80)) {
      *out = (int64_t)v;
      return 1;
    }
  }
  return 0;
}

/* Parses an interior table b-tree page (type 5) into its children and their key
** ranges. Returns the number of children, or -1 when the page is not one or is
** malformed (then no exception applies). */
static int parse_routes(const unsigned char *p, int pgsz, route **out) {
  if (p[0] != 0x05) return -1;
  int ncell = (p[3] << 8) | p[4];
  if (12 + 2 * ncell > pgsz) return -1;
  route *r = malloc((size_t)(ncell + 1) * sizeof(route));
  if (r == 0) return -1;
  int64_t lo = INT64_MIN;
  for (int i = 0; i < ncell; i++) {
    int off = (p[12 + 2 * i] << 8) | p[13 + 2 * i];
    int64_t key = 0;
    if (off < 12 || off + 5 > pgsz || !get_varint(p + off + 4, p + pgsz, &key) || key < lo) {
      free(r);
      return -1;
    }
    r[i].child = mw_get32(p + off);
    r[i].lo = lo;
    r[i].hi = key;
    lo = key;
  }
  r[ncell].child = mw_get32(p + 8);
  r[ncell].lo = lo;
  r[ncell].hi = INT64_MAX;
  *out = r;
  return ncell + 1;
}

/* 1 when the newest version of an interior table page still sends every key range
** this transaction went down (its children in the read set) to the same child with
** the same bounds: the transaction's searches would go the same way today. Never
** for index pages: their interior cells are rows. Caller holds the stripe. */
static int same_routes(mw_lane *l, const mw_chain *c, uint32_t pgno) {
  int pgsz = l->db->page_size;
  const mw_pver *vv = mw_chain_view(c, l->snap, l->own, l->nown);
  const unsigned char *old = vv ? vv->img : 0;
  if (old == 0) {
    if (mw_db_read_file(l->db, pgno, l->pgbuf, 0, pgsz) != SQLITE_OK) return 0;
    old = l->pgbuf;
  }
  route *ro = 0, *rn = 0;
  int no = parse_routes(old, pgsz, &ro);
  int nn = no < 0 ? -1 : parse_routes(c->v[c->n - 1].img, pgsz, &rn);
  int same = no > 0 && nn > 0;
  for (int i = 0; same && i < no; i++) {
    if (!mw_lane_read_set_has(l, ro[i].child)) continue;
    int found = 0;
    for (int j = 0; j < nn && !found; j++)
      if (rn[j].child == ro[i].child) found = rn[j].lo == ro[i].lo && rn[j].hi == ro[i].hi;
    same = found;
  }
  free(ro);
  free(rn);
  return same;
}

static int interior_type(unsigned char t) { return t == 0x02 || t == 0x05; }

/* 1 when the page was or became an interior b-tree page: it routes searches, so a
** commit that navigated through an older version of it may have put cells under
** the wrong parent. Caller holds the page's stripe. */
static int routes(mw_lane *l, const mw_chain *c, uint32_t pgno) {
  const mw_pver *vn = &c->v[c->n - 1];
  if (interior_type(vn->img[0])) return 1;
  const mw_pver *vv = mw_chain_view(c, l->snap, l->own, l->nown);
  if (vv) return interior_type(vv->img[0]);
  unsigned char t = 0;
  if (mw_db_read_file(l->db, pgno, &t, 0, 1) != SQLITE_OK) return 1;
  return interior_type(t);
}

int mw_commit(mw_lane *l, uint64_t from, uint64_t to, uint32_t db_pages) {
  mw_db *db = l->db;
  mw_store *s = &db->store;
  int pgsz = db->page_size;
  uint64_t fsz = (uint64_t)pgsz + FRAME_HDR;
  int rc = SQLITE_OK;
  int nframes = (int)(to - from);
  wpage *w = malloc((size_t)nframes * sizeof(*w));
  uint32_t *wp = malloc((size_t)nframes * sizeof(uint32_t));
  unsigned char **img = calloc((size_t)nframes, sizeof(*img));
  uint32_t *rp = 0;
  uint32_t *merge = 0;         /* interior table pages to merge (growth.c) */
  int nw = 0, nr = 0, nmerge = 0, relocated = 0, merged = 0;
  uint32_t grown = 0;          /* size after a relocated commit */
  int installed = 0;
  if (w == 0 || wp == 0 || img == 0) { rc = SQLITE_NOMEM; goto out; }

  /* 1. The write set: every page of the frames since the last commit. */
  for (int i = 0; i < nframes; i++) {
    w[i].frame = from + (uint64_t)i;
    w[i].pgno = mw_get32(l->wal + WAL_HDR + w[i].frame * fsz);
  }
  qsort(w, (size_t)nframes, sizeof(*w), cmp_wpage);
  for (int i = 0; i < nframes; i++) {
    if (nw > 0 && w[nw - 1].pgno == w[i].pgno) continue;
    w[nw++] = w[i];
  }
  for (int i = 0; i < nw; i++) {
    wp[i] = w[i].pgno;
    img[i] = malloc((size_t)pgsz);
    if (img[i] == 0) { rc = SQLITE_NOMEM; goto out; }
    memcpy(img[i], l->wal + WAL_HDR + w[i].frame * fsz + FRAME_HDR, (size_t)pgsz);
  }
  int writes_page1 = nw > 0 && wp[0] == 1;

  /* The read set, less the pages written and page 1 (the cookie covers it). */
  if (l->rs_count) {
    rp = malloc((size_t)l->rs_count * sizeof(uint32_t));
    if (rp == 0) { rc = SQLITE_NOMEM; goto out; }
    for (uint32_t i = 0; i < l->rs_cap; i++) {
      uint32_t p = l->rs[i];
      if (p && p != 1 && !in_sorted(wp, nw, p)) rp[nr++] = p;
    }
    qsort(rp, (size_t)nr, sizeof(uint32_t), cmp_u32);
  }

  if (db->broken) { rc = db->broken; goto out; }
  /* A relocated commit renumbered pages this snapshot's WAL still uses. */
  if (l->reloc_epoch > l->snap) { /* (the next snapshot starts at or after it) */
    l->stats[MW_STAT_CONFLICT_WRITE]++;
    l->stats[MW_STAT_RELOCATE_REFUSED]++;
    l->stats[MW_STAT_RELOCATE_STALE]++;
    l->losses++;
    rc = SQLITE_BUSY_SNAPSHOT;
    goto out;
  }
  merge = malloc((size_t)(nw ? nw : 1) * sizeof(uint32_t));
  if (merge == 0) { rc = SQLITE_NOMEM; goto out; }

#if MW_USE_LOG
  /* 2. Room in the log first. */
  uint64_t rec_bytes = mw_log_record_size(db->log, nw);
  rc = mw_log_reserve(db->log, rec_bytes);
  if (rc != SQLITE_OK) {
    if (rc == SQLITE_FULL) l->stats[MW_STAT_CONFLICT_FULL]++;
    goto out;
  }
#endif

  /* 3. Stripes of every page touched, ascending (page 1 always: the cookie). */
  uint64_t mask = (uint64_t)1 << mw_stripe_of(1);
  for (int i = 0; i < nw; i++) mask |= (uint64_t)1 << mw_stripe_of(wp[i]);
  for (int i = 0; i < nr; i++) mask |= (uint64_t)1 << mw_stripe_of(rp[i]);
  const uint64_t all = MW_STRIPES >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << MW_STRIPES) - 1);
  int conflict, growth;
relock:
  for (int i = 0; i < MW_STRIPES; i++)
    if (mask & ((uint64_t)1 << i)) mw_store_lock(s, i);

  /* 4. Validate. */
  conflict = 0;
  growth = 0;
  nmerge = 0;
  uint32_t view_cookie = 0, newest_cookie = 0, newest_size = 0;
  int meta_changed = 0;
  rc = page1_check(l, &view_cookie, &newest_cookie, &newest_size, &meta_changed);
  if (rc == SQLITE_OK && view_cookie != newest_cookie) conflict = MW_STAT_CONFLICT_SCHEMA;
  for (int i = 0; rc == SQLITE_OK && !conflict && i < nw; i++) {
    mw_chain *c = mw_store_chain_locked(s, wp[i]);
    if (c && c->n) {
      uint64_t e = c->v[c->n - 1].epoch;
      if (e > l->snap && !is_own(l, e)) {
        /* Growth (page 1, pages past the snapshot's end, interior table pages
        ** both changed) may still commit: relocation hook below. */
        if (writes_page1 && l->nown == 0 && mw_growth_candidate(l, wp[i], img[i], c)) {
          growth = 1;
          if (wp[i] != 1 && wp[i] <= l->snap_size) merge[nmerge++] = wp[i];
        } else {
          conflict = MW_STAT_CONFLICT_WRITE;
        }
      }
    }
  }
  /* Relocation hook (engine.md section 7, relocate.h; issue 4). Everything it needs
  ** is at hand here, under the stripes: the write set (wp[i], img[i], sorted by page),
  ** the snapshot's page 1 (mw_chain_view(chain of 1, l->snap, l->own, l->nown), else
  ** the file), the newest page 1 (last version of chain 1), l->snap_size (N0) and
  ** newest_size (N1), first commit = (l->nown == 0). When the only write conflicts
  ** are page 1 and pages > N0: take the stripes of N1+1..N1+g too (release all and
  ** relock the union in ascending order, then validate again), call
  ** mw_relocate() on copies, validate the renumbered pages like any other, and go on
  ** with the renumbered write set and db_pages = N1 + g. The lane must then refuse
  ** any later commit of this snapshot (its WAL still has the old numbers): set a
  ** flag that makes the next mw_commit of the snapshot return SQLITE_BUSY_SNAPSHOT.
  ** Done so (growth.c): with every stripe held (relock once), so that page 1's
  ** newest version, the stripes of N1+1..N1+g and the merge's "theirs wrote"
  ** lookups are all stable until the epoch is assigned. */
  if (rc == SQLITE_OK && !conflict && growth) {
    if (mask != all) {
      for (int i = MW_STRIPES - 1; i >= 0; i--)
        if (mask & ((uint64_t)1 << i)) mw_store_unlock(s, i);
      mask = all;
      goto relock;
    }
    int grc = mw_growth_apply(l, wp, img, nw, merge, nmerge, &grown, &merged);
    if (grc == SQLITE_BUSY_SNAPSHOT) {
      conflict = MW_STAT_CONFLICT_WRITE;
    } else if (grc != SQLITE_OK) {
      rc = grc;
    } else {
      relocated = 1;
      /* Reads past the snapshot's end were of this transaction's own new pages. */
      int k = 0;
      for (int i = 0; i < nr; i++)
        if (rp[i] <= l->snap_size) rp[k++] = rp[i];
      nr = k;
    }
  }
  /* A schema change always validates its reads, whatever mw_readcheck says: an
  ** index built from rows another commit changed would be wrong. Without
  ** mw_readcheck the interior pages read are still validated: a commit that
  ** navigated through a stale parent would file cells under the wrong divider
  ** and corrupt the b-tree (the checker shows it); write skew stays possible. */
  int ddl = writes_page1 && mw_get32(img[0] + 40) != view_cookie;
  int full = l->readcheck || ddl;
  if (rc == SQLITE_OK && !conflict) {
    if (l->rs_failed || (full && meta_changed && !writes_page1)) conflict = MW_STAT_CONFLICT_READ;
    for (int i = 0; !conflict && i < nr; i++) {
      mw_chain *c = mw_store_chain_locked(s, rp[i]);
      if (c && c->n) {
        uint64_t e = c->v[c->n - 1].epoch;
        if (e > l->snap && !is_own(l, e) && (full || routes(l, c, rp[i])) &&
            !same_routes(l, c, rp[i]))
          conflict = MW_STAT_CONFLICT_READ;
      }
    }
  }
  if (rc != SQLITE_OK || conflict) {
    for (int i = MW_STRIPES - 1; i >= 0; i--)
      if (mask & ((uint64_t)1 << i)) mw_store_unlock(s, i);
#if MW_USE_LOG
    mw_log_unreserve(db->log, rec_bytes);
#endif
    if (conflict) {
      l->stats[conflict]++;
      l->losses++;
      rc = SQLITE_BUSY_SNAPSHOT;
    }
    goto out;
  }

  /* The size after this commit. Every change of the size writes page 1 (the
  ** in-header size, bytes 28..31), and every committer holds page 1's stripe:
  ** a commit that does not write page 1 keeps the newest size, not the one of its
  ** older snapshot (which would cut off pages that others added). */
  uint32_t lane_pages = db_pages;
  if (!writes_page1) db_pages = newest_size;
  if (relocated) db_pages = grown;

  /* 5. The epoch and the log offset, together. */
  mw_mutex_lock(&db->mu);
  while (db->assigned - db->visible >= MW_RING - 1) mw_cond_wait(&db->cv, &db->mu);
  uint64_t epoch = ++db->assigned;
  mw_pending *pe = &db->ring[epoch % MW_RING];
  pe->epoch = epoch;
  pe->size = db_pages;
  pe->ready = 0;
  pe->end = 0;
#if MW_USE_LOG
  uint64_t offset = mw_log_assign(db->log, epoch, rec_bytes);
  pe->end = offset + rec_bytes;
#endif
  mw_mutex_unlock(&db->mu);

  /* 6. Install (not visible yet: epoch > visible), then unlock. */
  uint64_t oldest = __atomic_load_n(&db->oldest, __ATOMIC_ACQUIRE);
  for (int i = 0; i < nw; i++) {
    /* The store owns img[i] from here (it frees it on failure); the pointer stays
    ** valid until this epoch is visible: only versions older than the oldest
    ** snapshot are ever pruned. */
    int irc = mw_store_install_locked(s, wp[i], epoch, img[i], oldest);
    if (irc != SQLITE_OK && rc == SQLITE_OK) rc = irc;
  }
  installed = 1;
  for (int i = MW_STRIPES - 1; i >= 0; i--)
    if (mask & ((uint64_t)1 << i)) mw_store_unlock(s, i);

  /* 7. Durable. */
#if MW_USE_LOG
  if (rc != SQLITE_OK) {
    /* Assigned but not submittable: poison the log, or the commits behind this
    ** offset would wait forever. */
    mw_log_fail(db->log, rc);
  } else {
    rc = mw_log_submit(db->log, offset, epoch, db_pages, nw, wp,
                       (const unsigned char *const *)img);
    mw_crash_point("commit_after_submit");
    /* synchronous=FULL/EXTRA (the default): acknowledged once synced. OFF and
    ** NORMAL: once written, as stock SQLite's WAL acknowledges them without a
    ** sync; a later synced commit covers this one (the log is written as a
    ** prefix), and the compactor syncs the log before it moves anything into the
    ** database file. */
    if (rc == SQLITE_OK)
      rc = l->sync_level >= 2 ? mw_log_wait_durable(db->log, offset + rec_bytes)
                              : mw_log_wait_written(db->log, offset + rec_bytes);
  }
#endif
  mw_crash_point("commit_before_visible");

  /* 8. Visible in epoch order: the prefix of ready epochs advances. */
  mw_mutex_lock(&db->mu);
  if (rc != SQLITE_OK) {
    /* A failed write or sync: nothing after it may become visible. */
    if (!db->broken) db->broken = rc;
    mw_cond_broadcast(&db->cv);
    mw_mutex_unlock(&db->mu);
    goto out;
  }
  pe->ready = 1;
  uint64_t was_visible = db->visible;
  while (db->visible < db->assigned) {
    mw_pending *nx = &db->ring[(db->visible + 1) % MW_RING];
    if (nx->epoch != db->visible + 1 || !nx->ready) break;
    db->visible++;
    db->visible_size = nx->size;
    db->visible_end = nx->end;
    nx->ready = 0;
  }
  /* Wake the committers (and a full ring) only when something became visible. */
  if (db->visible != was_visible) mw_cond_broadcast(&db->cv);
  while (db->visible < epoch && !db->broken) mw_cond_wait(&db->cv, &db->mu);
  if (db->visible < epoch) rc = db->broken;
#if MW_USE_LOG
  db->log_bytes = mw_log_size(db->log);
  int kick = db->log_bytes > db->opts.log_max_bytes;
#else
  int kick = 0;
#endif
  mw_mutex_unlock(&db->mu);
  if (kick) mw_compact_kick(db);
  if (rc != SQLITE_OK) goto out;
  if (relocated) l->reloc_epoch = epoch;

  if (l->nown == l->cap_own) {
    int ncap = l->cap_own ? l->cap_own * 2 : 4;
    uint64_t *no = realloc(l->own, (size_t)ncap * sizeof(uint64_t));
    if (no == 0) { rc = SQLITE_NOMEM; goto out; } /* published; only our view fails */
    l->own = no;
    l->cap_own = ncap;
  }
  l->own[l->nown++] = epoch;
  l->cur_size = lane_pages; /* the lane's own view: its snapshot plus its commits */
  l->stats[MW_STAT_COMMITS]++;
  l->losses = 0;
  if (relocated) {
    l->stats[MW_STAT_RELOCATIONS]++;
    l->stats[MW_STAT_MERGES] += merged;
  }

out:
  if (!installed && img)
    for (int i = 0; i < nw; i++) free(img[i]);
  free(img);
  free(w);
  free(wp);
  free(rp);
  free(merge);
  return rc;
}
