/*
** Three-way merge of a table b-tree leaf page (type 13), docs/design/rebase.md.
**
** A table leaf is a list of cells in increasing rowid order; each cell is one
** row (payload size, rowid, the local payload, the first overflow page). The
** merge compares each side with the base row by row (a row changed when its cell
** bytes differ), refuses when the two sides' changes meet or when a row the
** transaction read changed, and otherwise builds the page from theirs' rows with
** ours' changes applied. The page it builds is packed (no free blocks, no
** fragments): SQLite accepts any layout whose cells lie in the content area.
**
** Owns: the merge rules for table leaves and the building of such a page.
** Never: reads overflow pages or other pages, allocates, keeps state. A malformed
** side is refused (MW_LEAF_MALFORMED), never trusted; nothing is read outside
** [0, usable size) of any side.
*/
#include "btree/btree_page.h"
#include "rebase/rebase.h"

#include <string.h>

typedef struct row {
  int64_t key;
  uint32_t off, size; /* the cell in its page (size: at least 4, as SQLite counts it) */
  uint32_t ovfl;      /* nonzero: the row spills to overflow pages */
  int from_ours;      /* in the merged list: the cell is ours' (else theirs') */
} row;

/* One change of ours: the new cell (side OURS), or none for a deleted row. */
typedef struct change {
  int64_t key;
  const row *now;     /* 0: deleted */
  const row *was;     /* 0: inserted */
} change;

static const char *const result_names[MW_LEAF_RESULT_COUNT] = {
    "ok", "bad_args", "not_table_leaf", "malformed", "same_row",
    "read_changed", "overflow", "does_not_fit", "empty",
};

const char *mw_leaf_merge_result_name(int result) {
  if (result < 0 || result >= MW_LEAF_RESULT_COUNT) return "unknown";
  return result_names[result];
}

static size_t max_rows(uint32_t page_size) { return (page_size - 8) / 6 + 1; }

size_t mw_leaf_merge_scratch_size(uint32_t page_size) {
  /* rows of base, ours, theirs and the merged page; ours' changes, up to one for each
  ** row of base (deleted) and one for each row of ours (inserted) */
  return max_rows(page_size) * (4 * sizeof(row) + 2 * sizeof(change));
}

/* A varint (mw_get_varint), the one-byte case inline: most payload sizes and rowids. */
static inline uint32_t varint(const unsigned char *p, const unsigned char *end, uint64_t *v) {
  if (p < end && p[0] < 0x80) {
    *v = p[0];
    return 1;
  }
  return mw_get_varint(p, end, v);
}

/* Reads every row of a table leaf, in page order, checking that keys increase. The
** commit path runs this under its stripes, three pages a merge: a row whose payload
** stays on the page (nearly all) is read here directly, with the page's largest local
** payload computed once; a row that spills goes through mw_btree_cell. */
static mw_leaf_merge_result read_rows(const unsigned char *page, uint32_t pgno, uint32_t ps,
                                      uint32_t us, row *out, size_t *n) {
  mw_btree_hdr h;
  int rc = mw_btree_header(page, pgno, ps, us, &h);
  if (rc == MW_PAGE_NOT_BTREE || (rc == MW_PAGE_OK && h.type != MW_BTREE_LEAF_TABLE))
    return MW_LEAF_NOT_TABLE_LEAF;
  if (rc != MW_PAGE_OK) return MW_LEAF_MALFORMED;
  const uint64_t max_local = us - 35; /* a table leaf's (btree.c: maxLeaf) */
  const unsigned char *end = page + us;
  for (uint32_t i = 0; i < h.ncell; i++) {
    const unsigned char *ptr = page + h.cell_array + 2 * i;
    uint32_t pc = ((uint32_t)ptr[0] << 8) | ptr[1];
    uint64_t payload = 0, key = 0;
    uint32_t a, b;
    if (pc < h.content || pc + 4 > us) return MW_LEAF_MALFORMED;
    if ((a = varint(page + pc, end, &payload)) == 0 || payload > 0x7fffffffu) return MW_LEAF_MALFORMED;
    if ((b = varint(page + pc + a, end, &key)) == 0) return MW_LEAF_MALFORMED;
    if (payload <= max_local) {
      uint64_t size = a + b + payload;
      if (size < 4) size = 4; /* the smallest cell SQLite writes */
      if (pc + size > us) return MW_LEAF_MALFORMED;
      out[i] = (row){ (int64_t)key, pc, (uint32_t)size, 0, 0 };
    } else {
      mw_cell_info c;
      if (mw_btree_cell(page, &h, i, &c) != MW_PAGE_OK) return MW_LEAF_MALFORMED;
      out[i] = (row){ c.key, c.off, c.size, c.ovfl, 0 };
    }
    if (i > 0 && out[i].key <= out[i - 1].key) return MW_LEAF_MALFORMED;
  }
  *n = h.ncell;
  return MW_LEAF_OK;
}

static int same_cell(const unsigned char *pa, const row *a, const unsigned char *pb, const row *b) {
  return a->size == b->size && memcmp(pa + a->off, pb + b->off, a->size) == 0;
}

/* The rows that differ between base and a side, in key order: (was, now) pairs,
** either may be 0. Returns how many. */
static size_t diff(const unsigned char *pb, const row *b, size_t nb, const unsigned char *ps,
                   const row *s, size_t ns, change *out) {
  size_t i = 0, j = 0, n = 0;
  while (i < nb || j < ns) {
    if (j == ns || (i < nb && b[i].key < s[j].key)) {
      out[n++] = (change){ b[i].key, 0, &b[i] };
      i++;
    } else if (i == nb || s[j].key < b[i].key) {
      out[n++] = (change){ s[j].key, &s[j], 0 };
      j++;
    } else {
      if (!same_cell(pb, &b[i], ps, &s[j])) out[n++] = (change){ s[j].key, &s[j], &b[i] };
      i++;
      j++;
    }
  }
  return n;
}

/* 1 when key is among the changes' keys (sorted). */
static int changed(const change *c, size_t n, int64_t key) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c[mid].key < key) lo = mid + 1; else hi = mid;
  }
  return lo < n && c[lo].key == key;
}

mw_leaf_merge_result mw_merge_table_leaf(const unsigned char *base, const unsigned char *ours,
                                         const unsigned char *theirs, uint32_t pgno,
                                         uint32_t page_size, uint32_t usable_size,
                                         const int64_t *reads, size_t nreads,
                                         unsigned char *out, void *scratch,
                                         size_t scratch_size, int *pChanged) {
  *pChanged = 0;
  if (!base || !ours || !theirs || !out || !scratch || pgno <= 1 ||
      !mw_page_geometry_ok(page_size, usable_size) ||
      scratch_size < mw_leaf_merge_scratch_size(page_size) || (nreads && !reads))
    return MW_LEAF_BAD_ARGS;
  size_t cap = max_rows(page_size);
  row *rb = scratch, *ro = rb + cap, *rt = ro + cap, *rm = rt + cap;
  change *co = (change *)(rm + cap);
  size_t nb = 0, no = 0, nt = 0;
  mw_leaf_merge_result r;
  if ((r = read_rows(base, pgno, page_size, usable_size, rb, &nb)) != MW_LEAF_OK) return r;
  if ((r = read_rows(ours, pgno, page_size, usable_size, ro, &no)) != MW_LEAF_OK) return r;
  if ((r = read_rows(theirs, pgno, page_size, usable_size, rt, &nt)) != MW_LEAF_OK) return r;

  size_t nco = diff(base, rb, nb, ours, ro, no, co);
  *pChanged = (int)nco;
  for (size_t k = 0; k < nco; k++)
    if ((co[k].now && co[k].now->ovfl) || (co[k].was && co[k].was->ovfl)) return MW_LEAF_OVERFLOW;

  /* Theirs' changed rows, as a walk over base and theirs together: a row of ours'
  ** changes or of the reads that theirs changed refuses the merge. */
  size_t i = 0, j = 0, rd = 0;
  while (i < nb || j < nt) {
    int64_t key;
    int moved;
    if (j == nt || (i < nb && rb[i].key < rt[j].key)) {
      key = rb[i++].key, moved = 1;
    } else if (i == nb || rt[j].key < rb[i].key) {
      key = rt[j++].key, moved = 1;
    } else {
      key = rb[i].key;
      moved = !same_cell(base, &rb[i], theirs, &rt[j]);
      i++, j++;
    }
    if (!moved) continue;
    if (changed(co, nco, key)) return MW_LEAF_SAME_ROW;
    while (rd < nreads && reads[rd] < key) rd++;
    if (rd < nreads && reads[rd] == key) return MW_LEAF_READ_CHANGED;
  }

  /* Theirs' rows with ours' changes applied, in key order. */
  size_t nm = 0, k = 0;
  uint64_t bytes = 8;
  j = 0;
  while (j < nt || k < nco) {
    if (nm == cap) return MW_LEAF_DOES_NOT_FIT; /* more cells than any page holds */
    if (k == nco || (j < nt && rt[j].key < co[k].key)) {
      rm[nm] = rt[j++];
    } else {
      /* Not a row of theirs' (it would have refused above), or the same row unchanged. */
      if (j < nt && rt[j].key == co[k].key) j++;
      if (co[k].now == 0) { k++; continue; }
      rm[nm] = *co[k].now;
      rm[nm].from_ours = 1;
      k++;
    }
    bytes += 2 + rm[nm].size;
    nm++;
  }
  if (nm > cap - 1 || bytes > usable_size) return MW_LEAF_DOES_NOT_FIT;
  if (nm == 0) return MW_LEAF_EMPTY;

  /* The page: theirs' bytes past the usable size (the reserved region), zeros in
  ** the rest, the header, the pointer array, the cells from the end down. */
  memcpy(out + usable_size, theirs + usable_size, page_size - usable_size);
  memset(out, 0, usable_size);
  uint32_t top = usable_size;
  for (size_t m = 0; m < nm; m++) {
    top -= rm[m].size;
    memcpy(out + top, (rm[m].from_ours ? ours : theirs) + rm[m].off, rm[m].size);
    out[8 + 2 * m] = (unsigned char)(top >> 8);
    out[9 + 2 * m] = (unsigned char)top;
  }
  out[0] = MW_BTREE_LEAF_TABLE;
  out[3] = (unsigned char)(nm >> 8);
  out[4] = (unsigned char)nm;
  out[5] = (unsigned char)((top & 0xffff) >> 8); /* 65536 is written as 0 */
  out[6] = (unsigned char)top;
  return MW_LEAF_OK;
}
