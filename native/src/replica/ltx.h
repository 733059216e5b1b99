/*
** ltx.h: LTX files (the format of Litestream 0.5, superfly/ltx v0.5.2; the facts in
** docs/replication.md) in a Litestream file replica: one file is written page by page
** (ltx.c buffers it), published atomically under its level and TXID range, and the
** replica's directories are scanned for the highest TXID.
*/
#ifndef MW_LTX_H
#define MW_LTX_H

#include "mw_internal.h"

#define MW_LTX_LEVEL_L0 0          /* one file per run of commits */
#define MW_LTX_LEVEL_SNAPSHOT 9    /* "0000000000000001-<N>.ltx": the whole database at N */

typedef struct mw_ltx_writer mw_ltx_writer;

/* Starts the file of TXIDs [min_txid, max_txid] at `level` of the replica `dir`, for a
** database of `commit` pages of page_size bytes after it, stamped `ms` (milliseconds
** since the Unix epoch: its header and its mtime). Written to a temporary name until
** mw_ltx_publish. */
int mw_ltx_begin(const char *dir, int level, uint64_t min_txid, uint64_t max_txid,
                 int page_size, uint32_t commit, int64_t ms, mw_ltx_writer **out);
/* The next page: page numbers strictly ascending, none above commit, never the lock
** page (mw_ltx_lock_page); page 1's bytes 18-19 are written as 2 (WAL mode). */
int mw_ltx_page(mw_ltx_writer *w, uint32_t pgno, const unsigned char *img);
/* Ends the file (end marker, page index, trailer), syncs it, gives it its mtime and
** renames it to its name, then syncs the directory; frees w whatever the outcome (a
** failed file's temporary name is removed). */
int mw_ltx_publish(mw_ltx_writer *w);
/* Drops an unfinished file. */
void mw_ltx_abandon(mw_ltx_writer *w);

/* The page holding byte 2^30 of the database, which SQLite never uses. */
uint32_t mw_ltx_lock_page(int page_size);

/* The highest TXID of any file of the replica (0: none), every level; with
** remove_unfinished, removes the temporary files a crash left behind (never while another
** process may be writing one). */
int mw_ltx_scan(const char *dir, int remove_unfinished, uint64_t *pMax);

/* Every published file of a level: fn(ctx, min, max) until it returns non-zero. */
int mw_ltx_list(const char *dir, int level, int (*fn)(void *ctx, uint64_t lo, uint64_t hi),
                void *ctx);
/* Removes the file [lo, hi] of a level (SQLITE_OK when it is gone already). */
int mw_ltx_remove(const char *dir, int level, uint64_t lo, uint64_t hi);

/* CRC-64 (ISO polynomial, reflected, Go's crc64.ISO) of n bytes, continuing from crc
** (0 to start). */
uint64_t mw_ltx_crc64(uint64_t crc, const void *data, size_t n);

#endif /* MW_LTX_H */
