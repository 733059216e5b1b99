/*
** commit.c: publishes a lane's commit, in this order (docs/design/core.md "Validation"), one
** function a step:
**  1. collect: copy the write set out of the private WAL (outside every lock);
**  2. reserve: room in the log (SQLITE_FULL before anything is assigned);
**  3. lock_stripes: the stripes of every page written or read, ascending;
**  4. validate: pages written, pages read, the schema cookie, page 1's fields;
**  5. arm, then assign: the file's mark back on if a checkpoint took it off
**     (db.c); the epoch and the log offset together (under db->mu);
**  6. install: the versions (not yet visible), then unlock the stripes;
**  7. make_durable: a turn holder hands the turn over first (the next holder's
**     snapshot includes this installed commit, turn.c / db.c; mw_mp=1: once the
**     record is published, mp_publish); append the record
**     to the log, wait for the group sync;
**  8. make_visible: strictly in epoch order.
** Relocation (growth.c, docs/design/growth.md) plugs in at step 4 where the only
** conflict is growth; rebase (rebase.c, section 9) where the conflicts are on table
** leaf pages and the transaction declared the rows it read. A transaction that writes several engine databases
** (attached ones) goes through mw_commit_group: steps 1-4 for every database
** before step 5 for any, so that it commits all or nothing.
**
** The read set is complete (docs/design/core.md, "Validation"): it holds every page
** read through xRead since the last cold start of the lane (lane.c) and every page
** this lane's commits wrote since then, because SQLite may use both from its cache
** without reading them again. Every one of them is validated against the snapshot.
**
** Owns: validation and publication. Never touches: the database file, SQLite.
*/
#include "engine.h"
#include "compact/compact.h"
#include "core/commit.h"
#include "core/datafile.h"
#include "core/db.h"
#include "core/gate.h"
#include "core/pageset.h"
#include "core/store.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "growth/growth.h"
#include "platform/crash.h"
#include "processes/mp.h"
#include "rebase/rebase.h"

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
  int rc = SQLITE_OK;
  const unsigned char *view = vv ? mw_store_image(&db->store, c, vv, &rc) : b;
  const unsigned char *newest = vn && view ? mw_store_image(&db->store, c, vn, &rc) : b;
  if (view == 0 || newest == 0) return rc;
  *pView = mw_get32(view + 40);
  *pNewest = mw_get32(newest + 40);
  *pSize = mw_get32(newest + 28);
  *pMeta = memcmp(view + 44, newest + 44, 48) != 0;
  return SQLITE_OK;
}

/* ---- the interior-table routing exception (step 4; docs/design/core.md "Validation") ---- */

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
  int rc = SQLITE_OK;
  const unsigned char *old = 0;
  if (vv) {
    old = mw_store_image(&l->db->store, c, vv, &rc);
    if (old == 0) return 0; /* unreadable: not the same (the commit is refused) */
  } else {
    if (mw_db_read_file(l->db, pgno, l->pgbuf, 0, pgsz) != SQLITE_OK) return 0;
    old = l->pgbuf;
  }
  const unsigned char *newest = mw_store_image(&l->db->store, c, &c->v[c->n - 1], &rc);
  if (newest == 0) return 0;
  route *ro = 0, *rn = 0;
  int no = parse_routes(old, pgsz, &ro);
  int nn = no < 0 ? -1 : parse_routes(newest, pgsz, &rn);
  int same = no > 0 && nn > 0;
  for (int i = 0; same && i < no; i++) {
    if (!mw_pageset_has(&l->rs, ro[i].child)) continue;
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
  /* A version that cannot be read counts as routing: the commit is then refused. */
  int rc = SQLITE_OK;
  const unsigned char *newest = mw_store_image(&l->db->store, c, &c->v[c->n - 1], &rc);
  if (newest == 0 || interior_type(newest[0])) return 1;
  const mw_pver *vv = mw_chain_view(c, l->snap, l->own, l->nown);
  if (vv) {
    const unsigned char *view = mw_store_image(&l->db->store, c, vv, &rc);
    return view == 0 || interior_type(view[0]);
  }
  unsigned char t = 0;
  if (mw_db_read_file(l->db, pgno, &t, 0, 1) != SQLITE_OK) return 1;
  return interior_type(t);
}

/* Children of the interior b-tree pages this commit writes. A page read but not
** written can still decide the structure the commit writes: balance_quick takes the
** divider of a new right-most leaf from the old right-most leaf, which it reads and
** never writes. So such a child is validated even when mw_readcheck=0. */
static int children_of_written(const uint32_t *wp, unsigned char *const *img, int nw, int pgsz,
                               mw_pageset *out) {
  for (int i = 0; i < nw; i++) {
    const unsigned char *p = img[i] + (wp[i] == 1 ? 100 : 0);
    int room = pgsz - (wp[i] == 1 ? 100 : 0);
    if (!interior_type(p[0])) continue;
    int ncell = (p[3] << 8) | p[4];
    if (12 + 2 * ncell > room) continue; /* malformed: its reads are validated anyway */
    mw_pageset_add(out, mw_get32(p + 8));
    for (int k = 0; k < ncell; k++) {
      int off = (p[12 + 2 * k] << 8) | p[13 + 2 * k];
      if (off >= 12 && off + 4 <= room) mw_pageset_add(out, mw_get32(p + off));
    }
  }
  return out->failed ? SQLITE_NOMEM : SQLITE_OK;
}

/* One commit on its way to publication. */
typedef struct commit {
  mw_lane *l;
  uint32_t db_pages;           /* size after the commit (the lane's own view, then
                                  the published one) */
  uint32_t lane_pages;         /* the lane's own view of the size after it */
  int nw;                      /* write set: wp sorted by page, img the images */
  uint32_t *wp;
  unsigned char **img;
  int nr;                      /* pages read and not written, sorted (not page 1) */
  uint32_t *rp;
  uint32_t *merge;             /* interior table pages to merge (growth.c) */
  int nmerge, merged, relocated, writes_page1, allow_growth;
  int *rebase;                 /* indexes into wp of the pages to rebase (rebase.c) */
  int nrebase, rebased, allow_rebase;
  uint32_t grown;              /* size after a relocated commit */
  uint64_t mask;               /* stripes to hold */
  int locked, installed;
  int mp_locked;               /* holds the publication lock of mw_mp=1 (mp.c) */
  int armed;                   /* counted among the commits arming (db.c) */
  int synced;                  /* acknowledged once synced (FULL, EXTRA), not written */
  uint32_t view_cookie;
  int conflict;                /* MW_STAT_CONFLICT_* when refused */
  uint64_t epoch;
  mw_pending *pe;
  uint64_t rec_bytes, offset;
  int reserved;
} commit;

static void commit_free(commit *c) {
  if (!c->installed && c->img)
    for (int i = 0; i < c->nw; i++) free(c->img[i]);
  free(c->img);
  free(c->wp);
  free(c->rp);
  free(c->merge);
  free(c->rebase);
  memset(c, 0, sizeof(*c));
}

/* 1. The write set: every page of frames [from, to), the last frame of a page
** winning; the read set less the pages written and page 1 (the cookie and the
** header check cover it). */
static int collect(commit *c, mw_lane *l, uint64_t from, uint64_t to, uint32_t db_pages) {
  int pgsz = l->db->page_size;
  uint64_t fsz = (uint64_t)pgsz + FRAME_HDR;
  int nframes = (int)(to - from);
  c->l = l;
  c->db_pages = c->lane_pages = db_pages;
  wpage *w = malloc((size_t)nframes * sizeof(*w));
  c->wp = malloc((size_t)nframes * sizeof(uint32_t));
  c->img = calloc((size_t)nframes, sizeof(*c->img));
  c->merge = malloc((size_t)nframes * sizeof(uint32_t));
  c->rebase = malloc((size_t)nframes * sizeof(int));
  if (w == 0 || c->wp == 0 || c->img == 0 || c->merge == 0 || c->rebase == 0) {
    free(w);
    return SQLITE_NOMEM;
  }
  for (int i = 0; i < nframes; i++) {
    w[i].frame = from + (uint64_t)i;
    w[i].pgno = mw_get32(l->wal + WAL_HDR + w[i].frame * fsz);
  }
  qsort(w, (size_t)nframes, sizeof(*w), cmp_wpage);
  int nw = 0;
  for (int i = 0; i < nframes; i++) {
    if (nw > 0 && w[nw - 1].pgno == w[i].pgno) continue;
    w[nw++] = w[i];
  }
  for (int i = 0; i < nw; i++) {
    c->wp[i] = w[i].pgno;
    c->img[i] = malloc((size_t)pgsz);
    if (c->img[i] == 0) {
      c->nw = i;
      free(w);
      return SQLITE_NOMEM;
    }
    memcpy(c->img[i], l->wal + WAL_HDR + w[i].frame * fsz + FRAME_HDR, (size_t)pgsz);
  }
  c->nw = nw;
  free(w);
  c->writes_page1 = nw > 0 && c->wp[0] == 1;
  if (l->rs.count) {
    c->rp = malloc((size_t)l->rs.count * sizeof(uint32_t));
    if (c->rp == 0) return SQLITE_NOMEM;
    for (uint32_t i = 0; i < l->rs.cap; i++) {
      uint32_t p = l->rs.slot[i];
      if (p && p != 1 && !in_sorted(c->wp, nw, p)) c->rp[c->nr++] = p;
    }
    qsort(c->rp, (size_t)c->nr, sizeof(uint32_t), cmp_u32);
  }
  return SQLITE_OK;
}

/* Refusals that need no validation (a broken log, a relocated snapshot), and room
** for the epoch in the lane's list of own commits: nothing may fail once the commit
** is published. */
static int precheck(commit *c) {
  mw_lane *l = c->l;
  if (l->db->broken) return l->db->broken;
  if (l->nown == l->cap_own) {
    int ncap = l->cap_own ? l->cap_own * 2 : 4;
    uint64_t *no = realloc(l->own, (size_t)ncap * sizeof(uint64_t));
    if (no == 0) return SQLITE_NOMEM;
    l->own = no;
    l->cap_own = ncap;
  }
  /* A relocated commit renumbered pages this snapshot's WAL still uses (the next
  ** snapshot starts at or after it). */
  if (l->reloc_epoch > l->snap) {
    l->stats[MW_STAT_RELOCATE_REFUSED]++;
    l->stats[MW_STAT_RELOCATE_STALE]++;
    c->conflict = MW_STAT_CONFLICT_WRITE;
  }
  /* A rebased commit published pages this snapshot's SQLite holds in its own version
  ** (rebase.c). */
  if (l->rebase_epoch > l->snap) c->conflict = MW_STAT_CONFLICT_WRITE;
  return SQLITE_OK;
}

/* 2. Room in the log first. */
static int reserve(commit *c) {
  mw_db *db = c->l->db;
  c->rec_bytes = mw_log_record_size(db->log, c->nw);
  int rc = mw_log_reserve(db->log, c->rec_bytes);
  if (rc == SQLITE_FULL) c->l->stats[MW_STAT_CONFLICT_FULL]++;
  c->reserved = rc == SQLITE_OK;
  return rc;
}

static void unreserve(commit *c) {
  if (c->reserved) mw_log_unreserve(c->l->db->log, c->rec_bytes);
  c->reserved = 0;
}

/* 3. The stripes of every page touched, ascending (page 1 always: the cookie). */
static uint64_t stripe_mask(const commit *c) {
  uint64_t mask = (uint64_t)1 << mw_stripe_of(1);
  for (int i = 0; i < c->nw; i++) mask |= (uint64_t)1 << mw_stripe_of(c->wp[i]);
  for (int i = 0; i < c->nr; i++) mask |= (uint64_t)1 << mw_stripe_of(c->rp[i]);
  return mask;
}

static void lock_stripes(mw_store *s, uint64_t mask) {
  for (int i = 0; i < MW_STRIPES; i++)
    if (mask & ((uint64_t)1 << i)) mw_store_lock(s, i);
}

static void unlock_stripes(mw_store *s, uint64_t mask) {
  for (int i = MW_STRIPES - 1; i >= 0; i--)
    if (mask & ((uint64_t)1 << i)) mw_store_unlock(s, i);
}

/* 4a. Pages written: a version newer than the snapshot that is not the snapshot's
** own is a write conflict, unless growth (*pGrowth) or a rebase (c->rebase) may
** resolve it. */
static void validate_writes(commit *c, int *pGrowth) {
  mw_lane *l = c->l;
  mw_store *s = &l->db->store;
  *pGrowth = 0;
  c->nmerge = 0;
  c->nrebase = 0;
  for (int i = 0; !c->conflict && i < c->nw; i++) {
    mw_chain *ch = mw_store_chain_locked(s, c->wp[i]);
    if (ch == 0 || ch->n == 0) continue;
    uint64_t e = ch->v[ch->n - 1].epoch;
    if (e <= l->snap || is_own(l, e)) continue;
    /* Growth (page 1, pages past the snapshot's end, interior table pages both
    ** changed) of a snapshot's first commit may still commit (growth.c). */
    if (c->allow_growth && c->writes_page1 && l->nown == 0 &&
        mw_growth_candidate(l, c->wp[i], c->img[i], ch)) {
      *pGrowth = 1;
      if (c->wp[i] != 1 && c->wp[i] <= l->snap_size) c->merge[c->nmerge++] = c->wp[i];
    } else if (c->allow_rebase && mw_rebase_candidate(l, c->wp[i], c->writes_page1)) {
      c->rebase[c->nrebase++] = i;
    } else {
      c->conflict = MW_STAT_CONFLICT_WRITE;
    }
  }
}

/* 4b'. Rebase: merge the newest version of each page into the commit's image, row
** by row (rebase.c); one refusal refuses the commit. The images are the commit's
** copies: a refusal leaves nothing published. */
static int validate_rebase(commit *c) {
  mw_lane *l = c->l;
  if (c->nrebase > 0 && !mw_rebase_write_set_ok(c->wp, c->img, c->nw)) {
    l->stats[MW_STAT_REBASE_REFUSED]++;
    c->conflict = MW_STAT_CONFLICT_WRITE;
    return SQLITE_OK;
  }
  for (int k = 0; k < c->nrebase; k++) {
    int i = c->rebase[k], merged = 0;
    mw_chain *ch = mw_store_chain_locked(&l->db->store, c->wp[i]);
    int rc = mw_rebase_page(l, c->wp[i], c->img[i], ch, &merged);
    if (rc != SQLITE_OK) return rc;
    if (!merged) {
      c->conflict = MW_STAT_CONFLICT_WRITE;
      return SQLITE_OK;
    }
  }
  c->rebased = c->nrebase;
  return SQLITE_OK;
}

/* 4b. Growth: relocate the new pages past the newest end and merge the interior
** pages both sides changed. The caller holds every stripe. A merged page routes
** searches this transaction made: every child it read must keep its key range in
** the other side's version, or the transaction read a range that changed. */
static int validate_growth(commit *c) {
  mw_lane *l = c->l;
  int grc = mw_growth_apply(l, c->wp, c->img, c->nw, c->merge, c->nmerge, &c->grown, &c->merged);
  if (grc == SQLITE_BUSY_SNAPSHOT) {
    c->conflict = MW_STAT_CONFLICT_WRITE;
    return SQLITE_OK;
  }
  if (grc != SQLITE_OK) return grc;
  c->relocated = 1;
  for (int i = 0; i < c->nmerge; i++) {
    mw_chain *ch = mw_store_chain_locked(&l->db->store, c->merge[i]);
    if (ch && ch->n && !same_routes(l, ch, c->merge[i])) {
      c->conflict = MW_STAT_CONFLICT_READ;
      return SQLITE_OK;
    }
  }
  /* Reads past the snapshot's end were of this transaction's own new pages. */
  int k = 0;
  for (int i = 0; i < c->nr; i++)
    if (c->rp[i] <= l->snap_size) c->rp[k++] = c->rp[i];
  c->nr = k;
  return SQLITE_OK;
}

/* A blind lane (lane.c) read pages from SQLite's cache that its read set lacks: any
** commit of another connection since its snapshot may have changed one. Exact under
** the stripes: every committer holds page 1's from its validation to its install, so
** no epoch is assigned meanwhile. */
static int others_committed(mw_lane *l) {
  mw_mutex_lock(&l->db->mu);
  uint64_t newest = l->db->assigned;
  mw_mutex_unlock(&l->db->mu);
  return newest - l->snap != (uint64_t)l->nown;
}

/* 4c. Pages read. With mw_readcheck (the default), and always for a schema change,
** every page read that changed since the snapshot refuses the commit, except an
** interior table page that still routes every key range read the same way. With
** mw_readcheck=0 only the pages that decide structure are validated: interior
** pages, and the children of the interior pages this commit writes. Page 1's
** header fields (44..91) are a read too, also for a relocated commit (which builds
** its page 1 from the newest one). */
static int validate_reads(commit *c, int meta_changed) {
  mw_lane *l = c->l;
  mw_store *s = &l->db->store;
  int ddl = c->writes_page1 && mw_get32(c->img[0] + 40) != c->view_cookie;
  int full = l->readcheck || ddl;
  /* A page read could not be recorded (no memory): the read set is incomplete. */
  if (l->rs.failed) return SQLITE_NOMEM;
  if (l->blind && others_committed(l)) {
    c->conflict = MW_STAT_CONFLICT_READ;
    return SQLITE_OK;
  }
  if (full && meta_changed && (!c->writes_page1 || c->relocated)) {
    c->conflict = MW_STAT_CONFLICT_READ;
    return SQLITE_OK;
  }
  mw_pageset kids = { 0 };
  int rc = full ? SQLITE_OK
                : children_of_written(c->wp, c->img, c->nw, l->db->page_size, &kids);
  for (int i = 0; rc == SQLITE_OK && !c->conflict && i < c->nr; i++) {
    mw_chain *ch = mw_store_chain_locked(s, c->rp[i]);
    if (ch == 0 || ch->n == 0) continue;
    uint64_t e = ch->v[ch->n - 1].epoch;
    if (e <= l->snap || is_own(l, e)) continue;
    int check = full || routes(l, ch, c->rp[i]) || mw_pageset_has(&kids, c->rp[i]);
    if (check && !same_routes(l, ch, c->rp[i])) c->conflict = MW_STAT_CONFLICT_READ;
  }
  mw_pageset_free(&kids);
  return rc;
}

/* 4. Validate under the stripes (c->mask held). Sets c->conflict on a refusal.
** With growth allowed, a growth conflict takes every stripe and starts again. */
static int validate(commit *c) {
  mw_lane *l = c->l;
  mw_store *s = &l->db->store;
  const uint64_t all = MW_STRIPES >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << MW_STRIPES) - 1);
  for (;;) {
    uint32_t newest_cookie = 0, newest_size = 0;
    int meta_changed = 0, growth = 0;
    int rc = page1_check(l, &c->view_cookie, &newest_cookie, &newest_size, &meta_changed);
    if (rc != SQLITE_OK) return rc;
    if (c->view_cookie != newest_cookie) {
      c->conflict = MW_STAT_CONFLICT_SCHEMA;
      return SQLITE_OK;
    }
    validate_writes(c, &growth);
    if (c->conflict) return SQLITE_OK;
    if (growth && c->mask != all) {
      unlock_stripes(s, c->mask);
      c->mask = all;
      lock_stripes(s, c->mask);
      continue;
    }
    if (growth) {
      rc = validate_growth(c);
      if (rc != SQLITE_OK || c->conflict) return rc;
    }
    rc = validate_reads(c, meta_changed);
    if (rc != SQLITE_OK || c->conflict) return rc;
    /* Last: a merge is work wasted when the reads refuse the commit anyway. */
    rc = validate_rebase(c);
    if (rc != SQLITE_OK || c->conflict) return rc;
    /* The size after this commit. Every change of the size writes page 1 (the
    ** in-header size, bytes 28..31), and every committer holds page 1's stripe:
    ** a commit that does not write page 1 keeps the newest size, not the one of
    ** its older snapshot (which would cut off pages that others added). */
    if (!c->writes_page1) c->db_pages = newest_size;
    /* A page past that end was cut off since the snapshot (auto-vacuum shrinks the
    ** database): a commit that does not write page 1 cannot bring it back, so its
    ** write there would be lost. */
    if (!c->writes_page1 && c->nw > 0 && c->wp[c->nw - 1] > c->db_pages) {
      c->conflict = MW_STAT_CONFLICT_WRITE;
      return SQLITE_OK;
    }
    if (c->relocated) c->db_pages = c->grown;
    return SQLITE_OK;
  }
}

/* A refused or failed commit before step 5: nothing was assigned or installed. */
static int refuse(commit *c, int rc) {
  mw_lane *l = c->l;
  if (c->locked) unlock_stripes(&l->db->store, c->mask);
  c->locked = 0;
  if (c->armed) {
    mw_mutex_lock(&l->db->mu);
    mw_db_disarm_locked(l->db);
    mw_mutex_unlock(&l->db->mu);
  }
  c->armed = 0;
  if (c->mp_locked) mw_mp_commit_end(l->db, SQLITE_ABORT, 0, 0);
  c->mp_locked = 0;
  unreserve(c);
  if (c->conflict) {
    l->stats[c->conflict]++;
    l->losses++;
    l->heat += (MW_HEAT_MAX - l->heat) >> 2;
    l->lost_turn = l->held_turn;
    rc = SQLITE_BUSY_SNAPSHOT;
  }
  /* SQLite rolls back; whatever it keeps of this snapshot is not the lane's. */
  l->must_reset = 1;
  /* A turn holder may have read commits not yet durable: its COMMIT does not
  ** return before they are, refused or not. It is done writing: the next in line
  ** need not wait for those syncs. */
  if (l->held_turn) {
#ifdef MW_TAIL_TRACE
    uint64_t t0 = mw_now_ns();
#endif
    mw_db_turn_pass(l->db, l);
    mw_db_wait_snapshot_durable(l->db, l);
    MW_TAIL(mw_tail.refuse_ns += mw_now_ns() - t0);
  }
  /* The commit it lost to may not be visible yet (a commit becomes visible once synced;
  ** mw_mp=1: another process's, once some process synced it). Run again at once, the
  ** transaction would start from the same snapshot and see neither it nor, for a table
  ** that commit created, the table: after two CREATE TABLE IF NOT EXISTS at once, the
  ** loser's next INSERT failed with "no such table" (test_engine_ddl create_race with
  ** threads, test_mp create_race with processes). So it waits until what it was checked
  ** against is visible: a sync at most (mw_mp=1: run by itself if nobody else does). */
  if (c->conflict) mw_db_wait_assigned_visible(l->db);
  MW_TAIL(mw_tail.refused++);
  return rc;
}

/* 5a. The file's mark on before anything reaches the log: a checkpoint takes it off
** when the log holds nothing the file lacks (db.c, "the mark while open"). */
static int arm(commit *c) {
  int rc = mw_db_arm(c->l->db);
  c->armed = rc == SQLITE_OK;
  return rc;
}

/* 5. The epoch and the log offset, together. */
static void assign(commit *c) {
  mw_db *db = c->l->db;
  mw_mutex_lock(&db->mu);
  if (c->armed) mw_db_disarm_locked(db); /* from here the epoch says the log has it */
  c->armed = 0;
  while (db->assigned - db->visible >= MW_RING - 1) mw_cond_wait(&db->cv, &db->mu);
  c->epoch = ++db->assigned;
  c->pe = &db->ring[c->epoch % MW_RING];
  c->pe->epoch = c->epoch;
  c->pe->size = c->db_pages;
  c->pe->ready = 0;
  c->pe->installed = 0;
  c->pe->end = 0;
  c->pe->foreign = 0;
  /* As make_durable decides (c->synced): below FULL, acknowledged once written. */
  c->pe->ack_written = c->l->sync_level < 2;
  c->offset = mw_log_assign(db->log, c->epoch, c->rec_bytes);
  c->pe->end = c->offset + c->rec_bytes;
  c->reserved = 0;
  mw_mutex_unlock(&db->mu);
}

/* 6. Install (not visible yet: epoch > visible); the caller unlocks after. */
static int install(commit *c) {
  mw_db *db = c->l->db;
  int rc = SQLITE_OK;
  uint64_t oldest = __atomic_load_n(&db->oldest, __ATOMIC_ACQUIRE);
  for (int i = 0; i < c->nw; i++) {
    /* The store owns img[i] from here (it frees it on failure); the pointer stays
    ** valid until this epoch is visible: only versions older than the oldest
    ** snapshot are ever pruned. */
    int irc = mw_store_install_locked(&db->store, c->wp[i], c->epoch, c->img[i], oldest);
    if (irc != SQLITE_OK && rc == SQLITE_OK) rc = irc;
  }
  c->installed = 1;
  /* A turn holder's snapshot may include it from now on (db.c), never an epoch
  ** whose install failed (that one breaks the log in make_durable). */
  if (rc == SQLITE_OK) __atomic_store_n(&c->pe->installed, 1, __ATOMIC_RELEASE);
  return rc;
}

/* mw_mp=1: the record is written whole (rc SQLITE_OK: published) or given up, and
** the publication lock released. A turn holder hands the turn over here, not at
** install: the next holder may be another process, whose catch-up finds only
** published records. */
static void mp_publish(commit *c, int rc, uint64_t end) {
  mw_mp_commit_end(c->l->db, rc, c->epoch, end);
  c->mp_locked = 0;
  if (c->l->held_turn) mw_db_turn_pass(c->l->db, c->l);
}

/* 7. Durable: synchronous=FULL/EXTRA (the default) is acknowledged once synced; OFF
** and NORMAL once written, as stock SQLite's WAL acknowledges them without a sync,
** and the record says so (MW_REC_F_ACK_WRITTEN: other processes make it visible once
** published). A later synced commit covers this one (the log is written as a prefix),
** the compactor syncs the log before it moves anything into the database file, and
** its tick syncs whatever is left unsynced (compact.c, MW_UNSYNCED_MAX_MS). */
static int make_durable(commit *c, int rc) {
  mw_db *db = c->l->db;
  uint64_t end = c->offset + c->rec_bytes;
  if (rc != SQLITE_OK) {
    /* Assigned but not submittable: poison the log, or the commits behind this
    ** offset would wait forever. */
    mw_log_fail(db->log, rc);
    if (c->mp_locked) mp_publish(c, rc, end);
    return rc;
  }
  c->synced = c->l->sync_level >= 2;
  rc = mw_log_submit(db->log, c->offset, c->epoch, c->db_pages,
                     c->synced ? 0 : MW_REC_F_ACK_WRITTEN, c->nw, c->wp,
                     (const unsigned char *const *)c->img);
  mw_crash_point("commit_after_submit");
  if (c->mp_locked) {
    /* mw_mp=1: the record is written whole before the others may write after it.
    ** Acknowledged once written, it still becomes visible after the records before
    ** it: another process's that waits for its sync is waited for. */
    if (rc == SQLITE_OK) rc = mw_log_wait_written(db->log, end);
    mp_publish(c, rc, end);
    if (rc == SQLITE_OK)
      rc = c->synced ? mw_mp_wait_durable(db, end) : mw_mp_wait_foreign(db, c->epoch, c->offset);
  } else if (rc == SQLITE_OK) {
    rc = c->synced ? mw_log_wait_durable(db->log, end) : mw_log_wait_written(db->log, end);
  }
  mw_crash_point("commit_before_visible");
  return rc;
}

/* 8. Visible in epoch order: the prefix of ready epochs advances; returns once this
** epoch is visible. A failed write or sync breaks the database: nothing after it
** may become visible. */
static int make_visible(commit *c, int rc) {
  mw_db *db = c->l->db;
  /* Every installed epoch whose record lies in the durable prefix is ready, whoever
  ** committed it: the first committer back from a group sync makes the whole group
  ** visible, instead of each waking the next in turn. An epoch acknowledged once
  ** written (synchronous below FULL) is ready once its record lies in the written
  ** prefix, so without syncs too a group becomes visible at once (issue 35: each
  ** committer used to wait here for the one before it to come back and mark its own
  ** epoch, a second sleep and wake per commit after the wait for the group write).
  ** Not with mw_mp=1, where what is written by this process is not what is published.
  ** (Read before db->mu: the log's mutex is never taken under it.) */
  uint64_t durable = 0, written = 0;
  if (rc == SQLITE_OK) mw_log_ack_ends(db->log, &durable, &written);
  if (db->mp) written = 0;
  mw_mutex_lock(&db->mu);
  if (rc != SQLITE_OK) {
    if (!db->broken) db->broken = rc;
    mw_cond_broadcast(&db->cv);
    mw_mutex_unlock(&db->mu);
    return rc;
  }
  /* Already visible (made so by another committer): its ring slot may be reused. */
  if (db->visible < c->epoch) c->pe->ready = 1;
  else db->visible_by_other++;
  /* mw_mp=1: this commit's sync covered the others' records before it. */
  if (db->mp) mw_mp_mark_locked(db, c->synced ? c->epoch : 0);
  uint64_t was_visible = db->visible;
  while (db->visible < db->assigned) {
    mw_pending *nx = &db->ring[(db->visible + 1) % MW_RING];
    if (nx->epoch != db->visible + 1) break;
    int durable_now = nx->end != 0 && (nx->end <= durable || (nx->ack_written && nx->end <= written)) &&
                      __atomic_load_n(&nx->installed, __ATOMIC_ACQUIRE);
    if (!nx->ready && !durable_now) break;
    db->visible++;
    db->visible_size = nx->size;
    db->visible_end = nx->end;
    nx->ready = 0;
  }
  /* Wake the committers (and a full ring) only when something became visible. */
  if (db->visible != was_visible) mw_cond_broadcast(&db->cv);
  while (db->visible < c->epoch && !db->broken) mw_cond_wait(&db->cv, &db->mu);
  if (db->visible < c->epoch) rc = db->broken;
  db->log_bytes = mw_log_size(db->log);
  int kick = db->log_bytes > db->opts.log_max_bytes;
  mw_mutex_unlock(&db->mu);
  if (kick) mw_compact_kick(db);
  return rc;
}

/* After publication: the lane's view of its snapshot now includes this epoch, and
** every page written joins the read set (SQLite keeps them in its cache and WAL and
** will not read them through xRead again in this snapshot). */
static void finish(commit *c) {
  mw_lane *l = c->l;
  if (c->relocated) l->reloc_epoch = c->epoch;
  if (c->rebased) {
    l->rebase_epoch = c->epoch;
    l->stats[MW_STAT_REBASES]++;
  }
  /* A page that cannot be recorded sets rs.failed: the snapshot's next commit is
  ** refused, never this published one. */
  for (int i = 0; i < c->nw; i++) mw_pageset_add(&l->rs, c->wp[i]);
  l->own[l->nown++] = c->epoch; /* room made by precheck */
  l->cur_size = c->lane_pages; /* the lane's own view: its snapshot plus its commits */
  l->stats[MW_STAT_COMMITS]++;
  l->losses = 0;
  l->lost_turn = 0;
  /* Cools slowly in the turn (where it does not lose), fast outside it. */
  l->heat -= (l->heat >> (l->held_turn ? 7 : 3)) + (l->heat > 0);
  if (c->relocated) {
    l->stats[MW_STAT_RELOCATIONS]++;
    l->stats[MW_STAT_MERGES] += c->merged;
  }
}

/* Steps 7-8 and the lane's bookkeeping, for an installed commit (stripes released;
** rc: the result of the install). */
static int complete(commit *c, int rc) {
  /* The turn does not wait for the disk: the holder hands it over now, and the
  ** next holder's snapshot includes this commit (db.c); acknowledgements still
  ** wait for the sync below. With mw_mp=1, once published (mp_publish). */
  if (c->l->held_turn && !c->l->db->mp) mw_db_turn_pass(c->l->db, c->l);
#ifdef MW_TAIL_TRACE
  uint64_t t0 = mw_now_ns();
#endif
  rc = make_durable(c, rc);
#ifdef MW_TAIL_TRACE
  uint64_t t1 = mw_now_ns();
  mw_tail.durable_ns += t1 - t0;
#endif
  rc = make_visible(c, rc);
  MW_TAIL(mw_tail.visible_ns += mw_now_ns() - t1);
  if (rc != SQLITE_OK) {
    c->l->must_reset = 1;
    return rc;
  }
  finish(c);
  return SQLITE_OK;
}

int mw_commit(mw_lane *l, uint64_t from, uint64_t to, uint32_t db_pages) {
#ifdef MW_TAIL_TRACE
  uint64_t t_commit = mw_now_ns();
#endif
  commit c = { 0 };
  c.allow_growth = 1;
  c.allow_rebase = 1;
  mw_gate_commit_enter(l->db, l); /* after another lane's gated write (gate.c) */
  int rc = collect(&c, l, from, to, db_pages);
  if (rc == SQLITE_OK) rc = precheck(&c);
#ifdef MW_TAIL_TRACE
  uint64_t t_r = mw_now_ns();
#endif
  if (rc == SQLITE_OK && !c.conflict) rc = reserve(&c);
  MW_TAIL(mw_tail.reserve_ns += mw_now_ns() - t_r; t_r = mw_now_ns());
  if (rc == SQLITE_OK && !c.conflict && l->db->mp) {
    /* mw_mp=1: one commit at a time across processes, after the others' records. */
    rc = mw_mp_commit_begin(l->db, c.rec_bytes);
    c.mp_locked = rc == SQLITE_OK;
  }
  if (rc == SQLITE_OK && !c.conflict) {
    c.mask = stripe_mask(&c);
    lock_stripes(&l->db->store, c.mask);
    MW_TAIL(mw_tail.lock_ns += mw_now_ns() - t_r);
    c.locked = 1;
    rc = validate(&c);
  }
  if (rc == SQLITE_OK && !c.conflict) rc = arm(&c);
  if (rc != SQLITE_OK || c.conflict) {
    rc = refuse(&c, rc);
  } else {
    MW_TAIL(t_r = mw_now_ns());
    assign(&c);
    MW_TAIL(mw_tail.assign_ns += mw_now_ns() - t_r);
    rc = install(&c);
    unlock_stripes(&l->db->store, c.mask);
    c.locked = 0;
    rc = complete(&c, rc);
  }
  commit_free(&c);
  mw_gate_commit_leave(l->db);
  MW_TAIL(mw_tail.commit_ns += mw_now_ns() - t_commit);
  return rc;
}

/* ---------------------------------------------------------------- groups */

static int cmp_by_db(const void *a, const void *b) {
  const commit *x = *(commit *const *)a, *y = *(commit *const *)b;
  uintptr_t p = (uintptr_t)x->l->db, q = (uintptr_t)y->l->db;
  return p < q ? -1 : p > q;
}

static int sets_meet(const commit *a, const commit *b) {
  for (int i = 0; i < b->nw; i++)
    if (in_sorted(a->wp, a->nw, b->wp[i]) || mw_pageset_has(&a->l->rs, b->wp[i])) return 1;
  for (int i = 0; i < a->nw; i++)
    if (mw_pageset_has(&b->l->rs, a->wp[i])) return 1;
  return 0;
}

/* One transaction over several engine databases: every commit is validated, with
** the stripes of every database held (databases in address order), before any is
** assigned an epoch; then each is published. No growth relocation here (it needs
** every stripe of its database and may retry). Two lanes of one database (a file
** attached under a second name) commit together only when neither touched a page
** the other wrote; otherwise the transaction is refused with SQLITE_ERROR, since a
** retry would fail the same way. Crash atomicity across the files is what stock
** WAL mode gives: none (each database's log is its own). */
static int commit_several(mw_lane **lanes, int n) {
  commit *cs = calloc((size_t)n, sizeof(commit));
  commit **order = calloc((size_t)n, sizeof(commit *));
  int *irc = calloc((size_t)n, sizeof(int)); /* results of install, made before any epoch */
  int rc = cs && order && irc ? SQLITE_OK : SQLITE_NOMEM;
  int conflict = 0, same_pages = 0;
  for (int i = 0; rc == SQLITE_OK && i < n; i++) {
    if (!lanes[i]->db->mp) continue;
    /* Not built: the publication locks of several databases in one order. */
    sqlite3_log(SQLITE_ERROR, "multiwriter: a transaction that writes several databases "
                              "is refused when one of them is open with mw_mp=1");
    rc = SQLITE_ERROR;
  }
  int gated = rc == SQLITE_OK ? n : 0;
  for (int i = 0; i < gated; i++) mw_gate_commit_enter(lanes[i]->db, lanes[i]);
  for (int i = 0; rc == SQLITE_OK && i < n; i++) {
    mw_lane *l = lanes[i];
    rc = collect(&cs[i], l, l->stash_from, l->stash_to, l->stash_pages);
    if (rc == SQLITE_OK) rc = precheck(&cs[i]);
    if (rc == SQLITE_OK) rc = reserve(&cs[i]);
    if (rc == SQLITE_OK) cs[i].mask = stripe_mask(&cs[i]);
    order[i] = &cs[i];
    conflict |= cs[i].conflict != 0;
  }
  if (rc == SQLITE_OK && !conflict) {
    qsort(order, (size_t)n, sizeof(commit *), cmp_by_db);
    /* One lock set per database: the union of its commits' stripes. */
    for (int i = 0; i < n; i++) {
      int first = i == 0 || order[i - 1]->l->db != order[i]->l->db;
      if (!first) continue;
      uint64_t mask = 0;
      for (int j = i; j < n && order[j]->l->db == order[i]->l->db; j++) mask |= order[j]->mask;
      for (int j = i; j < n && order[j]->l->db == order[i]->l->db; j++) {
        order[j]->mask = mask;
        if (j > i && sets_meet(order[i], order[j])) same_pages = 1;
      }
      lock_stripes(&order[i]->l->db->store, mask);
      order[i]->locked = 1;
    }
    for (int i = 0; rc == SQLITE_OK && !conflict && !same_pages && i < n; i++) {
      rc = validate(order[i]);
      conflict |= order[i]->conflict != 0;
    }
    for (int i = 0; rc == SQLITE_OK && !conflict && !same_pages && i < n; i++) rc = arm(order[i]);
  }
  if (rc != SQLITE_OK || conflict || same_pages) {
    for (int i = n - 1; order && i >= 0; i--)
      if (order[i] && order[i]->locked) unlock_stripes(&order[i]->l->db->store, order[i]->mask);
    for (int i = 0; cs && i < n; i++) {
      cs[i].locked = 0;
      if (cs[i].l) refuse(&cs[i], rc);
    }
    if (rc == SQLITE_OK) rc = same_pages ? SQLITE_ERROR : SQLITE_BUSY_SNAPSHOT;
    if (same_pages)
      sqlite3_log(SQLITE_ERROR, "multiwriter: one transaction wrote the same database "
                                "through two names and touched the same pages: refused");
  } else {
    /* Every commit is installed before any database's stripes are released, so
    ** that no other commit validates between two commits of one database. */
    for (int i = 0; i < n; i++) {
      assign(order[i]);
      irc[i] = install(order[i]);
    }
    for (int i = n - 1; i >= 0; i--)
      if (order[i]->locked) unlock_stripes(&order[i]->l->db->store, order[i]->mask);
    for (int i = 0; i < n; i++) {
      order[i]->locked = 0;
      int r = complete(order[i], irc[i]);
      if (rc == SQLITE_OK) rc = r;
    }
  }
  for (int i = 0; cs && i < n; i++) commit_free(&cs[i]);
  for (int i = 0; i < gated; i++) mw_gate_commit_leave(lanes[i]->db);
  free(cs);
  free(order);
  free(irc);
  return rc;
}

/* A group of one is a lane stashed only because another connection of its thread
** held a write lock (an event loop with several transactions open across awaits):
** an ordinary commit, with growth relocation, rebase and mw_mp=1
** (test_engine_interleaved). The caller has spent the stash (mw_db_unstash, before
** the wait for the sync); a refusal poisons the lanes. */
int mw_commit_group(mw_lane **lanes, int n) {
  mw_lane *one = lanes[0];
  int rc = n > 1 ? commit_several(lanes, n)
                 : mw_commit(one, one->stash_from, one->stash_to, one->stash_pages);
  for (int i = 0; i < n; i++) {
    mw_lane *l = lanes[i];
    if (rc == SQLITE_OK) {
      l->committed_frames = l->stash_to;
    } else {
      l->poisoned = 1;
      l->must_reset = 1;
    }
  }
  return rc;
}
