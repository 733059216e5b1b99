/*
** Concurrent growth: page-level machinery for relocation and interior merge
** (design section 7, docs/relocation.md explains the format facts).
**
** Two parts, one file each, over the b-tree page reader (btree/btree_page.h), all
** pure functions over page images: no global state, no locks, no allocation (callers
** pass scratch buffers), no I/O, no SQLite calls. The commit path calls them under
** its own locks.
**  - relocate.c:   renumbers a transaction's new pages to follow the current
**    end of the database, rewrites every reference to them, builds the merged
**    page 1, or refuses with a reason.
**  - merge.c:      three-way merge of an interior table b-tree page.
*/
#ifndef MW_RELOCATE_H
#define MW_RELOCATE_H

#include <stddef.h>
#include <stdint.h>

#include "btree/btree_page.h"

/* ---------------------------------------------------------------------------
** Relocation (relocate.c)
*/

/* A page of the transaction's write set. mw_relocate() rewrites `data` in
** place and changes `pgno` of the renumbered pages. */
typedef struct mw_wpage {
  uint32_t pgno;
  unsigned char *data; /* page_size bytes */
} mw_wpage;

typedef struct mw_reloc_args {
  uint32_t page_size;
  uint32_t usable_size;            /* page_size - page 1 byte 20 */
  const unsigned char *snap_page1; /* page 1 at the transaction's snapshot */
  uint32_t snap_npages;            /* N0: database size in pages at the snapshot */
  const unsigned char *cur_page1;  /* newest committed page 1 */
  uint32_t cur_npages;             /* N1: newest committed size in pages */
  int first_commit;                /* nonzero: the snapshot has not committed before */
} mw_reloc_args;

/* Why a relocation was refused. Stable numbering: used as counter indexes. */
typedef enum mw_reloc_reason {
  MW_RELOC_OK = 0,
  MW_RELOC_BAD_ARGS,         /* geometry, null pointer, scratch too small, page 0 */
  MW_RELOC_NOT_FIRST_COMMIT, /* the snapshot committed before: page numbers stale */
  MW_RELOC_NO_PAGE1,         /* the write set has no page 1 */
  MW_RELOC_FORMAT_CHANGED,   /* bytes 16..21 differ between snapshot and newest */
  MW_RELOC_SCHEMA_CHANGED,   /* schema cookie (40..43) differs */
  MW_RELOC_AUTOVACUUM,       /* bytes 52..55 nonzero: pointer-map pages exist */
  MW_RELOC_FREELIST_CHANGED, /* the transaction changed bytes 32..39 */
  MW_RELOC_PAGE1_CHANGED,    /* page 1 changed beyond 24..31 and 92..99 */
  MW_RELOC_SIZE_MISMATCH,    /* a page 1 size field disagrees with N0 or N1 */
  MW_RELOC_SHRUNK,           /* N1 < N0, or the transaction shrank the file */
  MW_RELOC_TOO_BIG,          /* N1 + growth exceeds the largest page number */
  MW_RELOC_LOCK_PAGE,        /* the old or the new range holds the lock-byte page */
  MW_RELOC_DUP_PAGE,         /* one page number twice in the write set */
  MW_RELOC_NOT_RANGE,        /* new pages are not exactly N0+1..N0+g */
  MW_RELOC_MALFORMED,        /* a page does not parse, or a reference is impossible */
  MW_RELOC_UNKNOWN_PAGE,     /* a written page is neither a b-tree page nor reached
                                as an overflow page from the write set */
  MW_RELOC_AMBIGUOUS,        /* a page reached as overflow page looks like a b-tree page */
  MW_RELOC_REF_MISSING,      /* a new page is referenced zero times */
  MW_RELOC_REF_DUPLICATE,    /* a new page is referenced more than once */
  MW_RELOC_REASON_COUNT
} mw_reloc_reason;

const char *mw_reloc_reason_name(int reason);

/* Details of the last call, for counters and messages. */
typedef struct mw_reloc_info {
  uint32_t from;     /* N0 */
  uint32_t to;       /* N1 */
  uint32_t count;    /* g: new pages renumbered */
  uint32_t bad_pgno; /* page a refusal is about (write-set numbering), 0 if none */
} mw_reloc_info;

/* Scratch bytes mw_relocate() needs for a write set of n pages. */
size_t mw_reloc_scratch_size(size_t n);

/* Renumbers the new pages N0+1..N0+g of the write set to N1+1..N1+g, rewrites
** every reference to them in every page of the write set (new and existing),
** checks that each new page is referenced exactly once, and replaces the
** write set's page 1 image with the merged page 1 (newest committed page 1,
** change counter + 1 at 24 and 92, size N1+g at 28, bytes 96..99 of the
** transaction). Returns MW_RELOC_OK, or the refusal reason; on refusal the
** write set is left exactly as it was. `info` may be null. */
mw_reloc_reason mw_relocate(const mw_reloc_args *a, mw_wpage *ws, size_t n,
                            void *scratch, size_t scratch_len, mw_reloc_info *info);

/* ---------------------------------------------------------------------------
** Interior table page merge (merge.c)
*/

typedef enum mw_merge_result {
  MW_MERGE_OK = 0,
  MW_MERGE_BAD_ARGS,       /* geometry, page 1, null pointer, scratch too small */
  MW_MERGE_NOT_TABLE_INTERIOR, /* a side is not an interior table page (type 5) */
  MW_MERGE_MALFORMED,      /* a side does not parse, or names one child twice */
  MW_MERGE_NOT_INCREASING, /* keys of a side, or of the result, not strictly increasing */
  MW_MERGE_BOTH_CHANGED,   /* both sides changed the key range of the same child,
                              or both added the same child */
  MW_MERGE_CHILD_MISSING,  /* a base child is missing from one side */
  MW_MERGE_GAP,            /* the merged ranges leave a hole or overlap */
  MW_MERGE_WRITTEN_CHILD,  /* a child whose range one side set was written by the other */
  MW_MERGE_DOES_NOT_FIT,   /* the merged cells do not fit in one page */
  MW_MERGE_RESULT_COUNT
} mw_merge_result;

const char *mw_merge_result_name(int result);

/* Sides for mw_wrote_fn. */
#define MW_SIDE_OURS 0
#define MW_SIDE_THEIRS 1

/* Answers whether `side` wrote page `pgno` since the snapshot (ours: the
** write set after relocation; theirs: commits published since the snapshot). */
typedef int (*mw_wrote_fn)(void *ctx, int side, uint32_t pgno);

/* Scratch bytes mw_merge_interior_table() needs. */
size_t mw_merge_scratch_size(uint32_t page_size);

/* Three-way merge of interior table page `pgno` (not page 1): each side is a
** list of (child, key range), the right-most pointer has upper bound +inf.
** A child keeps the range of the side that changed it (ours when neither did);
** children new on either side are added. Refused when both sides changed the
** range of one child, a base child is missing from a side, the result's ranges
** are not contiguous and increasing, a child whose range one side set was
** written by the other side (needs `wrote`; with a null `wrote` the caller
** must have validated that itself), or the cells do not fit. `ours` must
** already be relocated. On success `out` (page_size bytes) holds the page,
** built like SQLite builds one: no freeblocks, no fragments, cell content
** packed at the end of the usable area, the reserved tail copied from ours. */
mw_merge_result mw_merge_interior_table(const unsigned char *base,
                                        const unsigned char *ours,
                                        const unsigned char *theirs, uint32_t pgno,
                                        uint32_t page_size, uint32_t usable_size,
                                        mw_wrote_fn wrote, void *wrote_ctx,
                                        unsigned char *out, void *scratch,
                                        size_t scratch_len);

#endif /* MW_RELOCATE_H */
