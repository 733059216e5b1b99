/*
** Relocation (design section 7): a transaction that grew the database from N0
** to N0+g pages while other commits grew it to N1 gets its new pages renumbered
** to N1+1..N1+g, every reference to them rewritten, and a page 1 merged from
** the newest committed one.
**
** Safety rests on one check: every new page must be referenced exactly once
** from the write set (by a child, right-most, overflow or overflow-next
** pointer). A reference the parser missed leaves a page with zero references,
** a field wrongly taken for a reference gives one two: either way the
** relocation is refused and nothing is modified (all checks run before the
** first write).
**
** Owns: the preconditions on page 1, the classification of written pages, the
** renumbering and the merged page 1.
** Never: allocates, keeps state, touches a page outside the write set, or
** modifies anything when it refuses.
*/
#include "mw_internal.h"
#include "btree/btree_page.h"
#include "growth/relocate.h"

#include <string.h>

#define UNSET 0xffffffffu
#define MAX_PGNO 0xfffffffeu /* SQLite's largest page count */

enum { K_NONE = 0, K_BTREE = 1, K_OVFL = 2 };

static const char *const reason_names[MW_RELOC_REASON_COUNT] = {
    "ok",          "bad_args",     "not_first_commit", "no_page1",        "format_changed",
    "schema_changed", "autovacuum", "freelist_changed", "page1_changed", "size_mismatch",
    "shrunk",      "too_big",      "lock_page",        "dup_page",        "not_range",
    "malformed",   "unknown_page", "ambiguous",        "ref_missing",     "ref_duplicate",
};

const char *mw_reloc_reason_name(int reason) {
  if (reason < 0 || reason >= MW_RELOC_REASON_COUNT) return "unknown";
  return reason_names[reason];
}

/* Scratch layout, n = write-set size (g <= n once the range check passed):
** slot_ws[n], slot_off[n] (the one reference to new page N0+1+s), idx[n] (write
** set sorted by page number), work[n] (overflow pages still to follow), kind[n]. */
size_t mw_reloc_scratch_size(size_t n) { return n * (4 * sizeof(uint32_t) + 1) + 8; }

typedef struct reloc_ctx {
  const mw_reloc_args *a;
  const mw_wpage *ws;
  size_t n;
  uint32_t n0, g, lock_page;
  uint32_t *slot_ws, *slot_off, *idx, *work;
  uint8_t *kind;
  size_t nwork;
  uint32_t cur; /* write-set index of the page being read */
  uint32_t bad_pgno;
} reloc_ctx;

static int cmp_pgno(const void *x, const void *y, const void *c) {
  const mw_wpage *ws = c;
  uint32_t a = ws[*(const uint32_t *)x].pgno, b = ws[*(const uint32_t *)y].pgno;
  return a < b ? -1 : a > b;
}

static uint32_t lookup(const reloc_ctx *r, uint32_t pgno) {
  size_t lo = 0, hi = r->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint32_t p = r->ws[r->idx[mid]].pgno;
    if (p == pgno) return r->idx[mid];
    if (p < pgno) lo = mid + 1;
    else hi = mid;
  }
  return UNSET;
}

/* The callback values are reasons, all above MW_PAGE_MALFORMED. */
static int on_ref(void *ctx, mw_ref_kind kind, uint32_t cell, uint32_t off, uint32_t target) {
  reloc_ctx *r = ctx;
  (void)cell;
  uint32_t here = r->ws[r->cur].pgno;
  /* a reference past the transaction's end, to page 0 or to the lock-byte page */
  if (target == 0 || target > r->n0 + r->g || target == r->lock_page) {
    r->bad_pgno = here;
    return MW_RELOC_MALFORMED;
  }
  uint32_t j = lookup(r, target);
  if (j != UNSET) {
    if (kind == MW_REF_CHILD || kind == MW_REF_RIGHT) {
      if (r->kind[j] != K_BTREE) { /* a child that is no b-tree page */
        r->bad_pgno = target;
        return MW_RELOC_MALFORMED;
      }
    } else if (r->kind[j] == K_BTREE) {
      r->bad_pgno = target;
      return MW_RELOC_AMBIGUOUS;
    } else if (r->kind[j] == K_NONE) {
      r->kind[j] = K_OVFL;
      r->work[r->nwork++] = j; /* each page enters once: K_NONE -> K_OVFL */
    }
  }
  if (target > r->n0) {
    /* page 1 is replaced by the merged page 1: a reference there would be lost */
    if (here == 1) {
      r->bad_pgno = 1;
      return MW_RELOC_MALFORMED;
    }
    uint32_t s = target - r->n0 - 1;
    if (r->slot_ws[s] != UNSET) {
      r->bad_pgno = target;
      return MW_RELOC_REF_DUPLICATE;
    }
    r->slot_ws[s] = r->cur;
    r->slot_off[s] = off;
  }
  return 0;
}

static int differs(const unsigned char *a, const unsigned char *b, uint32_t from, uint32_t to) {
  return memcmp(a + from, b + from, to - from) != 0;
}

/* Preconditions on the page 1 images (design section 7). */
static mw_reloc_reason check_page1(const mw_reloc_args *a, const unsigned char *txn) {
  const unsigned char *snap = a->snap_page1, *cur = a->cur_page1;
  uint32_t u = a->usable_size;
  uint32_t ps = mw_get2(snap + 16) == 1 ? 65536 : mw_get2(snap + 16);
  if (ps != a->page_size || a->page_size - snap[20] != u) return MW_RELOC_BAD_ARGS;
  if (differs(snap, cur, 16, 22)) return MW_RELOC_FORMAT_CHANGED;
  if (differs(snap, cur, 40, 44) || differs(snap, txn, 40, 44)) return MW_RELOC_SCHEMA_CHANGED;
  /* auto-vacuum keeps pointer-map pages that would need rewriting too */
  if (mw_get4(snap + 52) || mw_get4(cur + 52) || mw_get4(txn + 52)) return MW_RELOC_AUTOVACUUM;
  if (differs(snap, txn, 32, 40)) return MW_RELOC_FREELIST_CHANGED;
  /* the pager rewrites 24..27 (counter), 92..95 (version-valid-for) and 96..99
  ** (library version) of every page 1 it writes; the b-tree sets 28..31 */
  if (differs(snap, txn, 0, 24) || differs(snap, txn, 32, 92) || differs(snap, txn, 100, u))
    return MW_RELOC_PAGE1_CHANGED;
  if (mw_get4(snap + 28) != a->snap_npages || mw_get4(cur + 28) != a->cur_npages)
    return MW_RELOC_SIZE_MISMATCH;
  return MW_RELOC_OK;
}

/* mw_relocate, step 1: the arguments, and the index of page 1 in the write set (*pP1). */
static mw_reloc_reason check_args(const mw_reloc_args *a, const mw_wpage *ws, size_t n,
                                  const void *scratch, size_t scratch_len, size_t *pP1) {
  if (a == NULL || ws == NULL || n == 0 || n > 0xfffffffeu || a->snap_page1 == NULL ||
      a->cur_page1 == NULL || !mw_page_geometry_ok(a->page_size, a->usable_size) ||
      scratch == NULL || scratch_len < mw_reloc_scratch_size(n))
    return MW_RELOC_BAD_ARGS;
  if (!a->first_commit) return MW_RELOC_NOT_FIRST_COMMIT;
  size_t p1 = n;
  for (size_t i = 0; i < n; i++) {
    if (ws[i].data == NULL || ws[i].pgno == 0) return MW_RELOC_BAD_ARGS;
    if (ws[i].pgno == 1) p1 = i;
  }
  if (p1 == n) return MW_RELOC_NO_PAGE1;
  *pP1 = p1;
  return MW_RELOC_OK;
}

/* Step 2: the scratch carved into the context's arrays (4-byte aligned). */
static void carve(reloc_ctx *r, const mw_reloc_args *a, mw_wpage *ws, size_t n, uint32_t n0,
                  uint32_t g, uint32_t lock, void *scratch) {
  uintptr_t base = ((uintptr_t)scratch + 3) & ~(uintptr_t)3;
  memset(r, 0, sizeof *r);
  r->a = a;
  r->ws = ws;
  r->n = n;
  r->n0 = n0;
  r->g = g;
  r->lock_page = lock;
  r->slot_ws = (uint32_t *)base;
  r->slot_off = r->slot_ws + n;
  r->idx = r->slot_off + n;
  r->work = r->idx + n;
  r->kind = (uint8_t *)(r->work + n);
}

/* Step 3: the write set by page number: no duplicates, nothing past the new end nor on
** the lock-byte page, and exactly N0+1..N0+g above N0. */
static mw_reloc_reason check_range(reloc_ctx *r, uint32_t end, mw_reloc_info *info) {
  const mw_wpage *ws = r->ws;
  size_t n = r->n;
  for (size_t i = 0; i < n; i++) r->idx[i] = (uint32_t)i;
  mw_sort(r->idx, n, sizeof(uint32_t), cmp_pgno, r->ws);
  size_t above = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t p = ws[r->idx[i]].pgno;
    if (i > 0 && p == ws[r->idx[i - 1]].pgno) {
      info->bad_pgno = p;
      return MW_RELOC_DUP_PAGE;
    }
    if (p > end) {
      info->bad_pgno = p;
      return MW_RELOC_NOT_RANGE;
    }
    if (p == r->lock_page) { /* SQLite never writes the lock-byte page */
      info->bad_pgno = p;
      return MW_RELOC_MALFORMED;
    }
    if (p > r->n0) above++;
  }
  if (above != r->g) return MW_RELOC_NOT_RANGE; /* distinct and <= end: the range has a hole */
  return MW_RELOC_OK;
}

/* Step 4: every reference to a new page found. Every page whose type byte says b-tree
** is read as one; the others must be reached as overflow pages from the write set;
** every new page must be referenced. */
static mw_reloc_reason find_refs(reloc_ctx *r, mw_reloc_info *info) {
  const mw_reloc_args *a = r->a;
  const mw_wpage *ws = r->ws;
  size_t n = r->n;
  for (size_t i = 0; i < n; i++) {
    uint32_t t = ws[i].data[ws[i].pgno == 1 ? 100 : 0];
    r->kind[i] = (t == MW_BTREE_INTERIOR_INDEX || t == MW_BTREE_INTERIOR_TABLE ||
                  t == MW_BTREE_LEAF_INDEX || t == MW_BTREE_LEAF_TABLE)
                     ? K_BTREE
                     : K_NONE;
  }
  for (uint32_t s = 0; s < r->g; s++) r->slot_ws[s] = UNSET;
  for (size_t i = 0; i < n; i++) {
    if (r->kind[i] != K_BTREE) continue;
    r->cur = (uint32_t)i;
    int rc = mw_btree_refs(ws[i].data, ws[i].pgno, a->page_size, a->usable_size, on_ref, r);
    if (rc == MW_PAGE_OK) continue;
    if (rc == MW_PAGE_MALFORMED || rc == MW_PAGE_NOT_BTREE) {
      info->bad_pgno = ws[i].pgno;
      return MW_RELOC_MALFORMED;
    }
    info->bad_pgno = r->bad_pgno;
    return (mw_reloc_reason)rc;
  }
  /* overflow chains: the first 4 bytes of an overflow page are the next page */
  while (r->nwork > 0) {
    uint32_t j = r->work[--r->nwork];
    uint32_t next = mw_get4(ws[j].data);
    if (next == 0) continue;
    r->cur = j;
    int rc = on_ref(r, MW_REF_NEXT, 0, 0, next);
    if (rc != 0) {
      info->bad_pgno = r->bad_pgno;
      return (mw_reloc_reason)rc;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (r->kind[i] == K_NONE) {
      info->bad_pgno = ws[i].pgno;
      return MW_RELOC_UNKNOWN_PAGE;
    }
  }
  for (uint32_t s = 0; s < r->g; s++) {
    if (r->slot_ws[s] == UNSET) {
      info->bad_pgno = r->n0 + 1 + s;
      return MW_RELOC_REF_MISSING;
    }
  }
  return MW_RELOC_OK;
}

/* Step 5, once every check passed (nothing here can fail): the references and the new
** pages moved past N1, page 1 the current one with the new size and a new counter. */
static void rewrite(reloc_ctx *r, mw_wpage *ws, size_t p1, uint32_t n1) {
  const mw_reloc_args *a = r->a;
  for (uint32_t s = 0; s < r->g; s++) mw_put4(ws[r->slot_ws[s]].data + r->slot_off[s], n1 + 1 + s);
  for (size_t i = 0; i < r->n; i++)
    if (ws[i].pgno > r->n0) ws[i].pgno += n1 - r->n0;
  unsigned char *pg1 = ws[p1].data;
  unsigned char version[4];
  memcpy(version, pg1 + 96, 4);
  memmove(pg1, a->cur_page1, a->page_size);
  uint32_t counter = mw_get4(a->cur_page1 + 24) + 1;
  mw_put4(pg1 + 24, counter);
  mw_put4(pg1 + 92, counter);
  mw_put4(pg1 + 28, n1 + r->g);
  memcpy(pg1 + 96, version, 4);
}

mw_reloc_reason mw_relocate(const mw_reloc_args *a, mw_wpage *ws, size_t n, void *scratch,
                            size_t scratch_len, mw_reloc_info *info) {
  mw_reloc_info local_info;
  if (info == NULL) info = &local_info;
  memset(info, 0, sizeof *info);
  size_t p1 = 0;
  if (a == NULL) return MW_RELOC_BAD_ARGS;
  info->from = a->snap_npages;
  info->to = a->cur_npages;
  mw_reloc_reason why = check_args(a, ws, n, scratch, scratch_len, &p1);
  if (why == MW_RELOC_OK) why = check_page1(a, ws[p1].data);
  if (why != MW_RELOC_OK) return why;

  uint32_t n0 = a->snap_npages, n1 = a->cur_npages, end = mw_get4(ws[p1].data + 28);
  if (end < n0 || n1 < n0) return MW_RELOC_SHRUNK;
  uint32_t g = end - n0;
  info->count = g;
  if ((uint64_t)n1 + g > MAX_PGNO) return MW_RELOC_TOO_BIG;
  uint32_t lock = mw_lock_byte_page(a->page_size);
  if (g > 0 && ((lock > n0 && lock <= n0 + g) || (lock > n1 && lock <= n1 + g)))
    return MW_RELOC_LOCK_PAGE;

  reloc_ctx r;
  carve(&r, a, ws, n, n0, g, lock, scratch);
  why = check_range(&r, end, info);
  if (why == MW_RELOC_OK) why = find_refs(&r, info);
  if (why != MW_RELOC_OK) return why;
  rewrite(&r, ws, p1, n1);
  return MW_RELOC_OK;
}
