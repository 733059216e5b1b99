/*
** btree_page.h: reading SQLite b-tree pages (btree_page.c): header, cells, local
** payload, every page reference a page holds, and the byte helpers and the sort the
** page-level code shares. Used by growth/ (relocation, interior merge) and rebase/
** (leaf merge); docs/relocation.md gives the format facts.
**
** Pure functions over page images: no global state, no locks, no allocation, no I/O,
** no SQLite calls.
*/
#ifndef MW_BTREE_PAGE_H
#define MW_BTREE_PAGE_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------
** b-tree pages (btree_page.c)
*/

/* Page type bytes (flags byte of the b-tree page header). */
#define MW_BTREE_INTERIOR_INDEX 2
#define MW_BTREE_INTERIOR_TABLE 5
#define MW_BTREE_LEAF_INDEX 10
#define MW_BTREE_LEAF_TABLE 13

/* Results of the page readers. */
#define MW_PAGE_OK 0
#define MW_PAGE_NOT_BTREE 1 /* the type byte is not one of the four types */
#define MW_PAGE_MALFORMED 2 /* a field points outside the page or is impossible */

/* Header of a b-tree page, as read by mw_btree_header(). */
typedef struct mw_btree_hdr {
  uint32_t hdr;        /* offset of the page header: 100 on page 1, else 0 */
  uint32_t type;       /* one of MW_BTREE_* */
  uint32_t leaf;       /* 1 for types 10 and 13 */
  uint32_t ncell;      /* number of cells */
  uint32_t cell_array; /* offset of the first cell pointer */
  uint32_t content;    /* start of the cell content area (0 in the file = 65536) */
  uint32_t right;      /* right-most child (interior pages), else 0 */
  uint32_t usable;     /* usable size the page was read with */
} mw_btree_hdr;

/* One cell, as read by mw_btree_cell(). */
typedef struct mw_cell_info {
  uint32_t off;      /* offset of the cell in the page */
  uint32_t size;     /* bytes of the cell on this page (local part) */
  uint32_t child;    /* left child (interior pages), else 0 */
  int64_t key;       /* the integer key (table pages), else 0 */
  uint64_t payload;  /* payload size (types 2, 10, 13), else 0 */
  uint32_t local;    /* bytes of payload stored on this page */
  uint32_t ovfl_off; /* offset of the 4-byte first-overflow-page number, 0 = none */
  uint32_t ovfl;     /* first overflow page, 0 = none */
} mw_cell_info;

/* Kinds of page references. */
typedef enum mw_ref_kind {
  MW_REF_CHILD = 1,    /* left-child pointer of an interior cell */
  MW_REF_RIGHT = 2,    /* right-most pointer of an interior page header */
  MW_REF_OVERFLOW = 3, /* first overflow page of a cell */
  MW_REF_NEXT = 4      /* next-page pointer of an overflow page (relocate.c) */
} mw_ref_kind;

/* Called once per reference: `cell` is the cell index (ncell for the right-most
** pointer), `off` the byte offset of the 4-byte big-endian page number in the
** page, `target` its value. Return 0 to continue; any other value stops the
** enumeration and is returned by mw_btree_refs() unchanged (so use values that
** differ from MW_PAGE_*). */
typedef int (*mw_ref_fn)(void *ctx, mw_ref_kind kind, uint32_t cell, uint32_t off,
                         uint32_t target);

uint32_t mw_get4(const unsigned char *p);
void mw_put4(unsigned char *p, uint32_t v);
uint32_t mw_get2(const unsigned char *p);
/* SQLite varint at p: up to 8 bytes of 7 bits, the 9th byte gives 8 bits. Returns the
** number of bytes read, 0 when the varint would run past `end`. */
uint32_t mw_get_varint(const unsigned char *p, const unsigned char *end, uint64_t *v);

/* In-place heapsort (no allocation, unlike some qsort implementations). */
void mw_sort(void *base, size_t n, size_t size,
             int (*cmp)(const void *a, const void *b, const void *ctx), const void *ctx);

/* 1 when page_size is a power of two in 512..65536 and usable_size is in
** 480..page_size (the limits SQLite enforces when it opens a file). */
int mw_page_geometry_ok(uint32_t page_size, uint32_t usable_size);

/* The page holding byte offset 2^30 (SQLite's PENDING_BYTE): never used. */
uint32_t mw_lock_byte_page(uint32_t page_size);

/* Bytes of a payload of `payload` bytes kept on a page of `type`, SQLite's
** formula (btreePayloadToLocal). *has_overflow is set to 1 when the rest
** spills to overflow pages. */
uint32_t mw_local_payload(uint32_t type, uint64_t payload, uint32_t usable_size,
                          int *has_overflow);

/* Reads and checks the header of b-tree page `pgno` (its header is at offset
** 100 on page 1). Returns MW_PAGE_OK, MW_PAGE_NOT_BTREE or MW_PAGE_MALFORMED. */
int mw_btree_header(const unsigned char *page, uint32_t pgno, uint32_t page_size,
                    uint32_t usable_size, mw_btree_hdr *h);

/* Reads cell i (0 <= i < h->ncell) of a page whose header was read by
** mw_btree_header(). Never reads outside the usable part of the page. */
int mw_btree_cell(const unsigned char *page, const mw_btree_hdr *h, uint32_t i,
                  mw_cell_info *c);

/* Enumerates every page reference of b-tree page `pgno`: child pointers,
** the right-most pointer and first-overflow pointers. A reference to page 0
** is MW_PAGE_MALFORMED. Returns MW_PAGE_*, or the callback's stop value. */
int mw_btree_refs(const unsigned char *page, uint32_t pgno, uint32_t page_size,
                  uint32_t usable_size, mw_ref_fn fn, void *ctx);

#endif /* MW_BTREE_PAGE_H */
