/*
** ltx.c: the bytes of an LTX file and its place in a Litestream file replica
** (docs/replication.md gives the layout; these are public facts of superfly/ltx v0.5.2
** as Litestream 0.5.17 reads them, written here from that description).
**
** A file: a 100-byte header (big-endian), one frame per page in ascending page order
** (page number, flags 0x0001, the length of an LZ4 block, the block), a 6-byte end
** marker, the page index (uvarint page number, offset, size per frame; a 0; its length
** as a u64), then the post-apply checksum (0: flag 0x2, "no database checksums") and the
** file checksum, a CRC-64 of the header, the frames' headers with their pages
** uncompressed, the end marker, the index and the post-apply field, with bit 63 set.
** The pages are stored as literal-only LZ4 blocks: valid LZ4 that any decoder expands
** to the page itself (no compression: the replica costs disk, not CPU per commit).
**
** Owns: the LTX encoding, the replica's paths (ltx/<level>/<min>-<max>.ltx), the
** temporary name and the atomic publication, the scan for the highest TXID.
** Never touches: the engine's log, the database file, what the pages mean.
*/
#include "mw_internal.h"
#include "replica/ltx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR_SIZE 100
#define FLAG_NO_CHECKSUM 0x2u
#define PAGE_FLAG_SIZE 0x0001u
#define CHECKSUM_FLAG (1ull << 63)
#define BUF_SIZE (256u * 1024u)

/* ---------------------------------------------------------------- CRC-64 (ISO) */

/* Reflected ISO polynomial x^64 + x^4 + x^3 + x + 1, eight bytes a step ("slicing by
** 8": table k gives the CRC of a byte followed by k zero bytes): byte by byte, the CRC
** of every page written was a fifth of a busy database's CPU (perf, 16 writers). */
static uint64_t crc_table[8][256];
static int crc_ready;

static void crc_init(void) {
  if (__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE)) return;
  /* Two threads may fill the tables at once: they write the same values. */
  for (uint64_t i = 0; i < 256; i++) {
    uint64_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xD800000000000000ull : c >> 1;
    __atomic_store_n(&crc_table[0][i], c, __ATOMIC_RELAXED);
  }
  for (int k = 1; k < 8; k++)
    for (int i = 0; i < 256; i++) {
      uint64_t prev = __atomic_load_n(&crc_table[k - 1][i], __ATOMIC_RELAXED);
      __atomic_store_n(&crc_table[k][i], (prev >> 8) ^ crc_table[0][prev & 0xFF], __ATOMIC_RELAXED);
    }
  __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

uint64_t mw_ltx_crc64(uint64_t crc, const void *data, size_t n) {
  crc_init();
  const unsigned char *p = data;
  uint64_t c = ~crc;
  while (n >= 8) {
    /* The next 8 bytes, first byte lowest (any host byte order). */
    uint64_t w = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
                 (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
                 (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
    c ^= w;
    c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^ crc_table[5][(c >> 16) & 0xFF] ^
        crc_table[4][(c >> 24) & 0xFF] ^ crc_table[3][(c >> 32) & 0xFF] ^
        crc_table[2][(c >> 40) & 0xFF] ^ crc_table[1][(c >> 48) & 0xFF] ^ crc_table[0][c >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
  return ~c;
}

/* ---------------------------------------------------------------- encoding */

static void be16(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 8);
  p[1] = (unsigned char)v;
}
static void be32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (24 - 8 * i));
}
static void be64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (56 - 8 * i));
}
static size_t uvarint(unsigned char *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (unsigned char)v;
  return n;
}

uint32_t mw_ltx_lock_page(int page_size) { return (uint32_t)(0x40000000u / (uint32_t)page_size) + 1; }

/* The LZ4 block of a page stored as literals: token 0xF0 (15 literals, more follow),
** then (page_size - 15) as bytes of 255 and a last byte below 255, then the page. */
static size_t lz4_prefix(unsigned char *p, int page_size) {
  size_t n = 0, rest = (size_t)page_size - 15;
  p[n++] = 0xF0;
  while (rest >= 255) {
    p[n++] = 0xFF;
    rest -= 255;
  }
  p[n++] = (unsigned char)rest;
  return n;
}

typedef struct index_entry {
  uint32_t pgno;
  uint64_t offset, size;
} index_entry;

struct mw_ltx_writer {
  char *path, *tmp;            /* the file's name in the replica, and its temporary one */
  mw_fd fd;
  int page_size;
  uint32_t commit, last_pgno;
  int64_t ms;
  uint64_t crc;                /* the file checksum so far */
  uint64_t off;                /* bytes of the file so far (written or buffered) */
  unsigned char *buf;
  size_t nbuf;
  index_entry *idx;
  size_t nidx, cap;
  int rc;                      /* the first error: every later call returns it */
};

static int flush(mw_ltx_writer *w) {
  if (w->rc == SQLITE_OK && w->nbuf) {
    w->rc = mw_file_pwrite(w->fd, w->buf, w->nbuf, w->off - w->nbuf, 0);
    w->nbuf = 0;
  }
  return w->rc;
}

/* n bytes into the file; `sum`: they count in the file checksum. */
static void put(mw_ltx_writer *w, const void *data, size_t n, int sum) {
  if (w->rc != SQLITE_OK) return;
  if (sum) w->crc = mw_ltx_crc64(w->crc, data, n);
  const unsigned char *p = data;
  while (n > 0 && w->rc == SQLITE_OK) {
    size_t k = BUF_SIZE - w->nbuf < n ? BUF_SIZE - w->nbuf : n;
    memcpy(w->buf + w->nbuf, p, k);
    w->nbuf += k;
    w->off += k;
    p += k;
    n -= k;
    if (w->nbuf == BUF_SIZE) flush(w);
  }
}

static char *level_dir(const char *dir, int level) {
  return sqlite3_mprintf("%s/ltx/%d", dir, level);
}

static int make_dirs(const char *dir, int level) {
  char *ltx = sqlite3_mprintf("%s/ltx", dir);
  char *lvl = level_dir(dir, level);
  int rc = ltx && lvl ? SQLITE_OK : SQLITE_NOMEM;
  if (rc == SQLITE_OK) rc = mw_dir_make(dir, 0);
  if (rc == SQLITE_OK) rc = mw_dir_make(ltx, 0);
  if (rc == SQLITE_OK) rc = mw_dir_make(lvl, 0);
  sqlite3_free(ltx);
  sqlite3_free(lvl);
  return rc;
}

static void writer_free(mw_ltx_writer *w) {
  if (w->fd != MW_FD_INVALID) mw_file_close(w->fd);
  sqlite3_free(w->path);
  sqlite3_free(w->tmp);
  free(w->buf);
  free(w->idx);
  free(w);
}

int mw_ltx_begin(const char *dir, int level, uint64_t min_txid, uint64_t max_txid,
                 int page_size, uint32_t commit, int64_t ms, mw_ltx_writer **out) {
  *out = 0;
  if (min_txid < 1 || max_txid < min_txid || page_size < 512 || page_size > 65536 ||
      (page_size & (page_size - 1)))
    return SQLITE_MISUSE;
  int rc = make_dirs(dir, level);
  if (rc != SQLITE_OK) return rc;
  mw_ltx_writer *w = calloc(1, sizeof(*w));
  if (!w) return SQLITE_NOMEM;
  w->fd = MW_FD_INVALID;
  w->page_size = page_size;
  w->commit = commit;
  w->ms = ms;
  w->buf = malloc(BUF_SIZE);
  w->path = sqlite3_mprintf("%s/ltx/%d/%016llx-%016llx.ltx", dir, level,
                            (unsigned long long)min_txid, (unsigned long long)max_txid);
  w->tmp = w->path ? sqlite3_mprintf("%s.tmp", w->path) : 0;
  rc = w->buf && w->path && w->tmp ? SQLITE_OK : SQLITE_NOMEM;
  if (rc == SQLITE_OK) rc = mw_file_delete(w->tmp, 0);
  if (rc == SQLITE_OK) rc = mw_file_open(w->tmp, 1, &w->fd, 0);
  if (rc == SQLITE_OK) rc = mw_file_truncate(w->fd, 0, 0);
  if (rc != SQLITE_OK) {
    writer_free(w);
    return rc;
  }
  unsigned char h[HDR_SIZE];
  memset(h, 0, sizeof(h));
  memcpy(h, "LTX1", 4);
  be32(h + 4, FLAG_NO_CHECKSUM);
  be32(h + 8, (uint32_t)page_size);
  be32(h + 12, commit);
  be64(h + 16, min_txid);
  be64(h + 24, max_txid);
  be64(h + 32, (uint64_t)ms);
  /* 40 pre-apply checksum, 48 WAL offset, 56 WAL size, 64/68 WAL salts, 72 node id,
  ** 80..99 reserved: all zero. */
  put(w, h, sizeof(h), 1);
  *out = w;
  return SQLITE_OK;
}

int mw_ltx_page(mw_ltx_writer *w, uint32_t pgno, const unsigned char *img) {
  if (w->rc != SQLITE_OK) return w->rc;
  if (pgno == 0 || pgno <= w->last_pgno || pgno > w->commit ||
      pgno == mw_ltx_lock_page(w->page_size))
    return w->rc = SQLITE_MISUSE;
  if (w->nidx == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 256;
    index_entry *n = realloc(w->idx, cap * sizeof(*n));
    if (!n) return w->rc = SQLITE_NOMEM;
    w->idx = n;
    w->cap = cap;
  }
  unsigned char lz[300];
  size_t nlz = lz4_prefix(lz, w->page_size);
  size_t block = nlz + (size_t)w->page_size;
  unsigned char fh[10];
  be32(fh, pgno);
  be16(fh + 4, PAGE_FLAG_SIZE);
  be32(fh + 6, (uint32_t)block);
  w->idx[w->nidx].pgno = pgno;
  w->idx[w->nidx].offset = w->off;
  w->idx[w->nidx].size = sizeof(fh) + block;
  w->nidx++;
  w->last_pgno = pgno;
  /* The checksum covers the frame header and the page as it is, not the LZ4 bytes. */
  put(w, fh, sizeof(fh), 1);
  put(w, lz, nlz, 0);
  if (pgno == 1 && w->page_size >= 100) {
    /* Page 1 as a stock reader expects it in WAL mode (never the engine's mark). */
    unsigned char head[100];
    memcpy(head, img, sizeof(head));
    head[18] = head[19] = 2;
    put(w, head, sizeof(head), 1);
    put(w, img + 100, (size_t)w->page_size - 100, 1);
  } else {
    put(w, img, (size_t)w->page_size, 1);
  }
  return w->rc;
}

void mw_ltx_abandon(mw_ltx_writer *w) {
  if (!w) return;
  if (w->fd != MW_FD_INVALID) {
    mw_file_close(w->fd);
    w->fd = MW_FD_INVALID;
  }
  (void)mw_file_delete(w->tmp, 0);
  writer_free(w);
}

int mw_ltx_publish(mw_ltx_writer *w) {
  unsigned char end[6] = { 0 };
  put(w, end, sizeof(end), 1);
  /* The page index: its entries, a 0, then their length (with the 0) as a u64. */
  unsigned char e[30];
  uint64_t len = 0;
  for (size_t i = 0; i < w->nidx; i++) {
    size_t n = uvarint(e, w->idx[i].pgno);
    n += uvarint(e + n, w->idx[i].offset);
    n += uvarint(e + n, w->idx[i].size);
    put(w, e, n, 1);
    len += n;
  }
  e[0] = 0;
  put(w, e, 1, 1);
  len += 1;
  be64(e, len);
  put(w, e, 8, 1);
  unsigned char trailer[16];
  be64(trailer, 0); /* post-apply checksum: none (flag 0x2) */
  w->crc = mw_ltx_crc64(w->crc, trailer, 8);
  be64(trailer + 8, w->crc | CHECKSUM_FLAG);
  put(w, trailer, sizeof(trailer), 0);
  int rc = flush(w);
  if (rc == SQLITE_OK) rc = mw_file_sync(w->fd, 0);
  /* Litestream's file replica takes a file's time from its mtime. */
  if (rc == SQLITE_OK) rc = mw_file_set_mtime(w->fd, w->ms, 0);
  if (rc == SQLITE_OK) {
    mw_file_close(w->fd);
    w->fd = MW_FD_INVALID;
    rc = mw_file_rename(w->tmp, w->path, 0);
  }
  if (rc == SQLITE_OK) rc = mw_dir_sync(w->path, 0);
  if (rc != SQLITE_OK) {
    mw_ltx_abandon(w);
    return rc;
  }
  writer_free(w);
  return SQLITE_OK;
}

/* ---------------------------------------------------------------- the replica */

typedef struct scan_ctx {
  const char *dir;             /* the level's directory */
  int remove_unfinished;
  uint64_t max;
  int rc;
} scan_ctx;

static int hex16(const char *s, uint64_t *v) {
  uint64_t x = 0;
  for (int i = 0; i < 16; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    x = (x << 4) | (uint64_t)d;
  }
  *v = x;
  return 1;
}

static int scan_entry(void *ctx, const char *name) {
  scan_ctx *s = ctx;
  size_t n = strlen(name);
  uint64_t lo = 0, hi = 0;
  if (n == 37 && name[16] == '-' && !strcmp(name + 33, ".ltx") && hex16(name, &lo) &&
      hex16(name + 17, &hi)) {
    if (hi > s->max) s->max = hi;
  } else if (s->remove_unfinished && n > 8 && !strcmp(name + n - 8, ".ltx.tmp")) {
    /* A file a crash left unpublished: never visible, never finished. */
    char *p = sqlite3_mprintf("%s/%s", s->dir, name);
    s->rc = p ? mw_file_delete(p, 0) : SQLITE_NOMEM;
    sqlite3_free(p);
    if (s->rc != SQLITE_OK) return 1;
  }
  return 0;
}

typedef struct list_ctx {
  int (*fn)(void *ctx, uint64_t lo, uint64_t hi);
  void *ctx;
} list_ctx;

static int list_entry(void *ctx, const char *name) {
  list_ctx *l = ctx;
  uint64_t lo = 0, hi = 0;
  if (strlen(name) == 37 && name[16] == '-' && !strcmp(name + 33, ".ltx") && hex16(name, &lo) &&
      hex16(name + 17, &hi))
    return l->fn(l->ctx, lo, hi);
  return 0;
}

int mw_ltx_list(const char *dir, int level, int (*fn)(void *ctx, uint64_t lo, uint64_t hi),
                void *ctx) {
  char *d = level_dir(dir, level);
  if (!d) return SQLITE_NOMEM;
  list_ctx l = { fn, ctx };
  int rc = mw_dir_list(d, list_entry, &l, 0);
  sqlite3_free(d);
  return rc;
}

int mw_ltx_remove(const char *dir, int level, uint64_t lo, uint64_t hi) {
  char *p = sqlite3_mprintf("%s/ltx/%d/%016llx-%016llx.ltx", dir, level, (unsigned long long)lo,
                            (unsigned long long)hi);
  if (!p) return SQLITE_NOMEM;
  int rc = mw_file_delete(p, 0);
  sqlite3_free(p);
  return rc;
}

int mw_ltx_scan(const char *dir, int remove_unfinished, uint64_t *pMax) {
  *pMax = 0;
  for (int level = 0; level <= 9; level++) {
    char *d = level_dir(dir, level);
    if (!d) return SQLITE_NOMEM;
    scan_ctx s = { d, remove_unfinished, 0, SQLITE_OK };
    int rc = mw_dir_list(d, scan_entry, &s, 0);
    sqlite3_free(d);
    if (rc == 1) rc = s.rc;
    if (rc != SQLITE_OK) return rc;
    if (s.max > *pMax) *pMax = s.max;
  }
  return SQLITE_OK;
}
