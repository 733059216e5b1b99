/*
** Three-way merge of an interior table b-tree page (type 5) that both the
** committing transaction (ours) and commits published since its snapshot
** (theirs) changed (design section 7).
**
** A type-5 page is a list of children with key ranges: cell i routes keys in
** (key[i-1], key[i]] to its child, the right-most pointer routes keys above the
** last key. The merge works on whole ranges rather than upper keys alone: a
** child whose upper key one side kept can still lose its lower part to a new
** sibling on that side, and a side that changed a child's range must be the
** only one to do so. The result is then checked to cover the key space
** exactly once, in increasing order.
**
** Owns: the merge rules and the building of a type-5 page.
** Never: reads the children (their own conflicts are the caller's to
** validate, helped by the `wrote` callback), allocates, or keeps state.
*/
#include "mw_internal.h"
#include "btree/btree_page.h"
#include "growth/relocate.h"

#include <string.h>

typedef struct ent {
  int64_t lo, hi;      /* range (lo, hi]; see has_lo / has_hi */
  uint32_t child;
  uint8_t has_lo;      /* 0: no lower bound (first child) */
  uint8_t has_hi;      /* 0: no upper bound (right-most pointer) */
  uint8_t src;         /* side the range was taken from, for the written check */
} ent;

enum { SRC_NONE = 0, SRC_OURS = 1, SRC_THEIRS = 2 };

static const char *const result_names[MW_MERGE_RESULT_COUNT] = {
    "ok", "bad_args", "not_table_interior", "malformed", "not_increasing",
    "both_changed", "child_missing", "gap", "written_child", "does_not_fit",
};

const char *mw_merge_result_name(int result) {
  if (result < 0 || result >= MW_MERGE_RESULT_COUNT) return "unknown";
  return result_names[result];
}

static size_t max_entries(uint32_t page_size) { return (page_size - 8) / 6 + 1; }

/* base, ours, theirs: one page each; the result: at most ours + theirs */
size_t mw_merge_scratch_size(uint32_t page_size) {
  return 5 * max_entries(page_size) * sizeof(ent) + sizeof(int64_t);
}

static int by_child(const void *x, const void *y, const void *c) {
  (void)c;
  uint32_t a = ((const ent *)x)->child, b = ((const ent *)y)->child;
  return a < b ? -1 : a > b;
}

/* +inf (has_hi == 0) sorts last */
static int by_upper(const void *x, const void *y, const void *c) {
  (void)c;
  const ent *a = x, *b = y;
  if (!a->has_hi || !b->has_hi) return (int)b->has_hi - (int)a->has_hi;
  return a->hi < b->hi ? -1 : a->hi > b->hi;
}

static int same_range(const ent *a, const ent *b) {
  if (a->has_lo != b->has_lo || a->has_hi != b->has_hi) return 0;
  if (a->has_lo && a->lo != b->lo) return 0;
  if (a->has_hi && a->hi != b->hi) return 0;
  return 1;
}

/* Reads one side into e[] sorted by child. */
static mw_merge_result read_side(const unsigned char *page, uint32_t pgno, uint32_t ps,
                                 uint32_t us, ent *e, size_t *count) {
  mw_btree_hdr h;
  int rc = mw_btree_header(page, pgno, ps, us, &h);
  if (rc == MW_PAGE_NOT_BTREE) return MW_MERGE_NOT_TABLE_INTERIOR;
  if (rc != MW_PAGE_OK) return MW_MERGE_MALFORMED;
  if (h.type != MW_BTREE_INTERIOR_TABLE) return MW_MERGE_NOT_TABLE_INTERIOR;
  for (uint32_t i = 0; i < h.ncell; i++) {
    mw_cell_info c;
    if (mw_btree_cell(page, &h, i, &c) != MW_PAGE_OK) return MW_MERGE_MALFORMED;
    if (i > 0 && c.key <= e[i - 1].hi) return MW_MERGE_NOT_INCREASING;
    e[i].child = c.child;
    e[i].has_lo = i > 0;
    e[i].lo = i > 0 ? e[i - 1].hi : 0;
    e[i].has_hi = 1;
    e[i].hi = c.key;
    e[i].src = SRC_NONE;
  }
  e[h.ncell].child = h.right;
  e[h.ncell].has_lo = h.ncell > 0;
  e[h.ncell].lo = h.ncell > 0 ? e[h.ncell - 1].hi : 0;
  e[h.ncell].has_hi = 0;
  e[h.ncell].hi = 0;
  e[h.ncell].src = SRC_NONE;
  *count = h.ncell + 1;
  mw_sort(e, *count, sizeof(ent), by_child, NULL);
  for (size_t i = 1; i < *count; i++)
    if (e[i].child == e[i - 1].child) return MW_MERGE_MALFORMED; /* one child twice */
  return MW_MERGE_OK;
}

static uint32_t varint_len(uint64_t v) {
  if (v >> 56) return 9;
  uint32_t n = 1;
  while (v >>= 7) n++;
  return n;
}

/* SQLite's putVarint: big-endian 7-bit groups, 9 bytes (last one 8 bits) above 2^56 */
static void put_varint(unsigned char *p, uint64_t v) {
  uint32_t n = varint_len(v);
  if (n == 9) {
    p[8] = (unsigned char)v;
    v >>= 8;
    for (int i = 7; i >= 0; i--) {
      p[i] = (unsigned char)((v & 0x7f) | 0x80);
      v >>= 7;
    }
    return;
  }
  for (int i = (int)n - 1; i >= 0; i--) {
    p[i] = (unsigned char)((v & 0x7f) | (i == (int)n - 1 ? 0 : 0x80));
    v >>= 7;
  }
}

mw_merge_result mw_merge_interior_table(const unsigned char *base, const unsigned char *ours,
                                        const unsigned char *theirs, uint32_t pgno,
                                        uint32_t page_size, uint32_t usable_size,
                                        mw_wrote_fn wrote, void *wrote_ctx, unsigned char *out,
                                        void *scratch, size_t scratch_len) {
  if (base == NULL || ours == NULL || theirs == NULL || out == NULL || scratch == NULL ||
      pgno < 2 || !mw_page_geometry_ok(page_size, usable_size) ||
      scratch_len < mw_merge_scratch_size(page_size))
    return MW_MERGE_BAD_ARGS;
  size_t max = max_entries(page_size);
  ent *eb = (ent *)(((uintptr_t)scratch + 7) & ~(uintptr_t)7);
  ent *eo = eb + max, *et = eo + max, *em = et + max; /* em: 2 * max */
  size_t nb, no, nt, nm = 0;
  mw_merge_result rc;
  if ((rc = read_side(base, pgno, page_size, usable_size, eb, &nb)) != MW_MERGE_OK) return rc;
  if ((rc = read_side(ours, pgno, page_size, usable_size, eo, &no)) != MW_MERGE_OK) return rc;
  if ((rc = read_side(theirs, pgno, page_size, usable_size, et, &nt)) != MW_MERGE_OK) return rc;

  /* join the three sides by child page number */
  size_t i = 0, j = 0, k = 0;
  while (i < nb || j < no || k < nt) {
    uint32_t c = 0xffffffffu;
    if (i < nb && eb[i].child < c) c = eb[i].child;
    if (j < no && eo[j].child < c) c = eo[j].child;
    if (k < nt && et[k].child < c) c = et[k].child;
    const ent *b = i < nb && eb[i].child == c ? &eb[i++] : NULL;
    const ent *o = j < no && eo[j].child == c ? &eo[j++] : NULL;
    const ent *t = k < nt && et[k].child == c ? &et[k++] : NULL;
    ent e;
    if (b != NULL) {
      if (o == NULL || t == NULL) return MW_MERGE_CHILD_MISSING;
      int oc = !same_range(o, b), tc = !same_range(t, b);
      if (oc && tc) return MW_MERGE_BOTH_CHANGED;
      e = tc ? *t : *o;
      e.src = tc ? SRC_THEIRS : oc ? SRC_OURS : SRC_NONE;
    } else if (o != NULL && t != NULL) {
      return MW_MERGE_BOTH_CHANGED; /* both sides added the same page */
    } else {
      e = o != NULL ? *o : *t;
      e.src = o != NULL ? SRC_OURS : SRC_THEIRS;
    }
    /* the side that set the range routes keys to content the other side wrote */
    if (wrote != NULL && e.src != SRC_NONE &&
        wrote(wrote_ctx, e.src == SRC_OURS ? MW_SIDE_THEIRS : MW_SIDE_OURS, c))
      return MW_MERGE_WRITTEN_CHILD;
    em[nm++] = e;
  }

  /* the result: strictly increasing upper keys, contiguous ranges, one +inf */
  mw_sort(em, nm, sizeof(ent), by_upper, NULL);
  for (size_t x = 0; x < nm; x++) {
    if (x + 1 < nm && !em[x].has_hi) return MW_MERGE_NOT_INCREASING; /* two right-most */
    if (x > 0 && em[x].has_hi && em[x].hi <= em[x - 1].hi) return MW_MERGE_NOT_INCREASING;
  }
  if (nm == 0 || em[0].has_lo || em[nm - 1].has_hi) return MW_MERGE_GAP;
  for (size_t x = 1; x < nm; x++)
    if (!em[x].has_lo || em[x].lo != em[x - 1].hi) return MW_MERGE_GAP;

  /* build the page: header, pointer array, cells packed at the usable end */
  size_t ncell = nm - 1, bytes = 12 + 2 * ncell;
  for (size_t x = 0; x < ncell; x++) bytes += 4 + varint_len((uint64_t)em[x].hi);
  if (bytes > usable_size) return MW_MERGE_DOES_NOT_FIT;
  memset(out, 0, usable_size);
  memcpy(out + usable_size, ours + usable_size, page_size - usable_size);
  uint32_t top = usable_size;
  for (size_t x = 0; x < ncell; x++) {
    uint32_t sz = 4 + varint_len((uint64_t)em[x].hi);
    top -= sz;
    mw_put4(out + top, em[x].child);
    put_varint(out + top + 4, (uint64_t)em[x].hi);
    out[12 + 2 * x] = (unsigned char)(top >> 8);
    out[12 + 2 * x + 1] = (unsigned char)top;
  }
  out[0] = MW_BTREE_INTERIOR_TABLE;
  out[3] = (unsigned char)(ncell >> 8);
  out[4] = (unsigned char)ncell;
  out[5] = (unsigned char)((top & 0xffff) >> 8); /* 65536 is stored as 0 */
  out[6] = (unsigned char)(top & 0xff);
  out[7] = 0;
  mw_put4(out + 8, em[nm - 1].child);
  return MW_MERGE_OK;
}
