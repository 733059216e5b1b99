/*
** Reading SQLite b-tree pages: header, cells, local payload, and the page
** references a page holds (child pointers, right-most pointer, first overflow
** page of each cell). The facts it rests on, with their places in the vendored
** sqlite3.c, are in docs/relocation.md.
**
** Owns: the page-format knowledge used by relocate.c, merge.c and rebase/leaf_merge.c.
** Never: writes a page, allocates, keeps state, or reads outside
** [0, usable size) of a page whatever the page holds; a malformed page is
** reported (MW_PAGE_MALFORMED), never trusted.
*/
#include "mw_internal.h"
#include "btree/btree_page.h"

#include <string.h>

uint32_t mw_get4(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

void mw_put4(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

uint32_t mw_get2(const unsigned char *p) { return ((uint32_t)p[0] << 8) | p[1]; }

int mw_page_geometry_ok(uint32_t page_size, uint32_t usable_size) {
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0) return 0;
  return usable_size >= 480 && usable_size <= page_size;
}

uint32_t mw_lock_byte_page(uint32_t page_size) {
  /* PENDING_BYTE_PAGE: (0x40000000 / page size) + 1 */
  return (uint32_t)(0x40000000u / page_size) + 1;
}

uint32_t mw_get_varint(const unsigned char *p, const unsigned char *end, uint64_t *v) {
  uint64_t x = 0;
  for (uint32_t i = 0; i < 8; i++) {
    if (p + i >= end) return 0;
    x = (x << 7) | (p[i] & 0x7f);
    if ((p[i] & 0x80) == 0) {
      *v = x;
      return i + 1;
    }
  }
  if (p + 8 >= end) return 0;
  *v = (x << 8) | p[8];
  return 9;
}

uint32_t mw_local_payload(uint32_t type, uint64_t payload, uint32_t usable_size,
                          int *has_overflow) {
  /* lockBtree(): maxLocal/minLocal for index pages, maxLeaf/minLeaf for table
  ** leaves; minLeaf == minLocal. */
  uint32_t min_local = (usable_size - 12) * 32 / 255 - 23;
  uint32_t max_local = type == MW_BTREE_LEAF_TABLE ? usable_size - 35
                                                   : (usable_size - 12) * 64 / 255 - 23;
  *has_overflow = 0;
  if (type == MW_BTREE_INTERIOR_TABLE) return 0;
  if (payload <= max_local) return (uint32_t)payload;
  *has_overflow = 1;
  /* btreePayloadToLocal(): as much as fits so that overflow pages are full */
  uint64_t surplus = min_local + (payload - min_local) % (usable_size - 4);
  return surplus <= max_local ? (uint32_t)surplus : min_local;
}

int mw_btree_header(const unsigned char *page, uint32_t pgno, uint32_t page_size,
                    uint32_t usable_size, mw_btree_hdr *h) {
  if (!mw_page_geometry_ok(page_size, usable_size) || pgno == 0) return MW_PAGE_MALFORMED;
  memset(h, 0, sizeof *h);
  h->hdr = pgno == 1 ? 100 : 0;
  h->usable = usable_size;
  h->type = page[h->hdr];
  switch (h->type) {
    case MW_BTREE_INTERIOR_INDEX:
    case MW_BTREE_INTERIOR_TABLE: h->leaf = 0; break;
    case MW_BTREE_LEAF_INDEX:
    case MW_BTREE_LEAF_TABLE: h->leaf = 1; break;
    default: return MW_PAGE_NOT_BTREE;
  }
  h->cell_array = h->hdr + (h->leaf ? 8 : 12);
  h->ncell = mw_get2(page + h->hdr + 3);
  /* MX_CELL: at most (page size - 8) / 6 cells fit */
  if (h->ncell > (page_size - 8) / 6) return MW_PAGE_MALFORMED;
  uint32_t array_end = h->cell_array + 2 * h->ncell;
  h->content = mw_get2(page + h->hdr + 5);
  if (h->content == 0) h->content = 65536;
  /* the pointer array ends before the content area, which ends at the usable end */
  if (array_end > usable_size || h->content < array_end || h->content > usable_size)
    return MW_PAGE_MALFORMED;
  if (!h->leaf) {
    h->right = mw_get4(page + h->hdr + 8);
    if (h->right == 0) return MW_PAGE_MALFORMED;
  }
  return MW_PAGE_OK;
}

int mw_btree_cell(const unsigned char *page, const mw_btree_hdr *h, uint32_t i,
                  mw_cell_info *c) {
  const unsigned char *end = page + h->usable;
  if (i >= h->ncell) return MW_PAGE_MALFORMED;
  memset(c, 0, sizeof *c);
  uint32_t pc = mw_get2(page + h->cell_array + 2 * i);
  /* a cell lies inside the content area (checkTreePage checks the same) */
  if (pc < h->content || pc + 4 > h->usable) return MW_PAGE_MALFORMED;
  c->off = pc;
  const unsigned char *p = page + pc;
  uint64_t v;
  uint32_t n;
  if (!h->leaf) {
    c->child = mw_get4(p);
    if (c->child == 0) return MW_PAGE_MALFORMED;
    p += 4;
  }
  if (h->type == MW_BTREE_INTERIOR_TABLE) {
    /* 4-byte child, varint key, no payload */
    if ((n = mw_get_varint(p, end, &v)) == 0) return MW_PAGE_MALFORMED;
    c->key = (int64_t)v;
    c->size = 4 + n;
    return MW_PAGE_OK;
  }
  if ((n = mw_get_varint(p, end, &v)) == 0) return MW_PAGE_MALFORMED;
  p += n;
  /* SQLite keeps payload sizes in 32 bits; SQLITE_MAX_LENGTH is below 2^31 */
  if (v > 0x7fffffffu) return MW_PAGE_MALFORMED;
  c->payload = v;
  if (h->type == MW_BTREE_LEAF_TABLE) {
    if ((n = mw_get_varint(p, end, &v)) == 0) return MW_PAGE_MALFORMED;
    c->key = (int64_t)v;
    p += n;
  }
  int ovf;
  c->local = mw_local_payload(h->type, c->payload, h->usable, &ovf);
  uint32_t head = (uint32_t)(p - (page + pc));
  if (ovf) {
    c->size = head + c->local + 4;
    if ((uint64_t)pc + c->size > h->usable) return MW_PAGE_MALFORMED;
    c->ovfl_off = pc + head + c->local;
    c->ovfl = mw_get4(page + c->ovfl_off);
    if (c->ovfl == 0) return MW_PAGE_MALFORMED;
  } else {
    c->size = head + c->local;
    if (c->size < 4) c->size = 4; /* the smallest cell SQLite writes */
    if ((uint64_t)pc + c->size > h->usable) return MW_PAGE_MALFORMED;
  }
  return MW_PAGE_OK;
}

int mw_btree_refs(const unsigned char *page, uint32_t pgno, uint32_t page_size,
                  uint32_t usable_size, mw_ref_fn fn, void *ctx) {
  mw_btree_hdr h;
  int rc = mw_btree_header(page, pgno, page_size, usable_size, &h);
  if (rc != MW_PAGE_OK) return rc;
  for (uint32_t i = 0; i < h.ncell; i++) {
    mw_cell_info c;
    if ((rc = mw_btree_cell(page, &h, i, &c)) != MW_PAGE_OK) return rc;
    if (!h.leaf && (rc = fn(ctx, MW_REF_CHILD, i, c.off, c.child)) != 0) return rc;
    if (c.ovfl_off && (rc = fn(ctx, MW_REF_OVERFLOW, i, c.ovfl_off, c.ovfl)) != 0) return rc;
  }
  if (!h.leaf && (rc = fn(ctx, MW_REF_RIGHT, h.ncell, h.hdr + 8, h.right)) != 0) return rc;
  return MW_PAGE_OK;
}

static void swap_bytes(unsigned char *a, unsigned char *b, size_t size) {
  for (size_t i = 0; i < size; i++) {
    unsigned char t = a[i];
    a[i] = b[i];
    b[i] = t;
  }
}

static void sift_down(unsigned char *base, size_t root, size_t n, size_t size,
                      int (*cmp)(const void *, const void *, const void *), const void *ctx) {
  for (;;) {
    size_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size, ctx) < 0) child++;
    if (cmp(base + root * size, base + child * size, ctx) >= 0) return;
    swap_bytes(base + root * size, base + child * size, size);
    root = child;
  }
}

void mw_sort(void *base, size_t n, size_t size,
             int (*cmp)(const void *a, const void *b, const void *ctx), const void *ctx) {
  unsigned char *b = base;
  if (n < 2) return;
  for (size_t i = n / 2; i-- > 0;) sift_down(b, i, n, size, cmp, ctx);
  for (size_t end = n - 1; end > 0; end--) {
    swap_bytes(b, b + end * size, size);
    sift_down(b, 0, end, size, cmp, ctx);
  }
}
