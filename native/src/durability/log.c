/*
** log.c: the durable commit log "<db>-mw" of one database (log.h is the interface,
** log_format.h and docs/format.md the bytes): its record format, its open and
** recovery, its close. The log is four files that share log_private.h:
**   log.c         the checksum, the header, the reading of records, open and recovery
**                 (replay, the cut of a torn tail), the index of records, the close;
**   log_group.c   room (preallocation in steps, the grower) and group commit;
**   log_switch.c  the switch to a shorter log after a compaction, the restart in place;
**   log_shared.c  what only multi-process mode (mw_mp=1) calls.
**
** Owns (this file): the log file's opening and closing, its header, the reading and
** checking of records, recovery, and the sticky error of the log (set by any of the
** four, cleared only by a reopen).
** Never touches: the database file, the page store, SQLite (beyond result codes and
** sqlite3_mprintf for error messages).
**
** Offsets. Every offset the engine sees is logical: it only grows, across compactions.
** The byte at logical offset L lives at file offset L - shift; a compaction moves the
** records it keeps to the start of a new file and raises shift accordingly, so that
** offsets handed out before it stay meaningful (mw_log_wait_durable keeps working).
**
** Errors. SQLITE_FULL (or any error) while preallocating in mw_log_reserve is returned
** to that caller only: nothing was assigned, and the next reserve tries again. A failed
** write or sync, a failed submit (no memory), an epoch out of order, or a compaction
** that renamed the new log but could not sync the directory sets the sticky error:
** every later reserve, submit, wait and compaction fails with it until the log is
** closed and reopened (recovery then decides what is durable).
*/
#include "mw_internal.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "durability/log_private.h"
#include "platform/background.h"

#include <stdlib.h>
#include <string.h>

/* ---- checksum ---------------------------------------------------------------- */

#define CK1 0x9E3779B97F4A7C15ull
#define CK2 0xC2B2AE3D27D4EB4Full
#define CK3 0x165667B19E3779F9ull

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
/* Bijective in h for a fixed w and in w for a fixed h: one changed word always
** changes the lane, and every later step keeps it changed. */
static inline uint64_t ck_lane(uint64_t h, uint64_t w) { return rotl64(h ^ (w * CK1), 29) * CK2; }

uint64_t mw_log_checksum(uint64_t seed, const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t a = seed ^ CK1, b = seed ^ CK2, c = seed ^ CK3, d = rotl64(seed, 32);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a = ck_lane(a, rd64(p + i));
    b = ck_lane(b, rd64(p + i + 8));
    c = ck_lane(c, rd64(p + i + 16));
    d = ck_lane(d, rd64(p + i + 24));
  }
  for (; i + 8 <= n; i += 8) a = ck_lane(a, rd64(p + i));
  if (i < n) {
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    b = ck_lane(b, w);
  }
  uint64_t h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18);
  h ^= (uint64_t)n * CK3;
  h ^= h >> 33; h *= CK2; h ^= h >> 29; h *= CK3; h ^= h >> 32;
  return h;
}

/* Where page i of n is in a record's body (docs/format.md, "Record"): its number, its
** image. */
static uint64_t body_pgno_at(const mw_log *log, uint64_t i) {
  return log->features & MW_LOG_FEAT_PGNOS_FIRST ? 4u * i : i * (4u + (uint64_t)log->page_size);
}
static uint64_t body_image_at(const mw_log *log, uint64_t n, uint64_t i) {
  uint64_t ps = (uint64_t)log->page_size;
  return log->features & MW_LOG_FEAT_PGNOS_FIRST ? 4u * n + i * ps : i * (4u + ps) + 4u;
}

/* The bytes of a record (docs/format.md, "Record"): len bytes (rec_size) into buf. */
void mw_log_encode_record(const mw_log *log, unsigned char *buf, size_t len, uint64_t epoch,
                          uint32_t db_pages, uint32_t flags, int npages,
                          const uint32_t *pgnos, const unsigned char *const *images) {
  size_t ps = (size_t)log->page_size;
  unsigned char *h = buf;
  put32(h + MW_REC_OFF_MAGIC, MW_REC_MAGIC);
  put32(h + MW_REC_NPAGES, (uint32_t)npages);
  put64(h + MW_REC_EPOCH, epoch);
  put32(h + MW_REC_DBPAGES, db_pages);
  /* A version-1 file carries no flags (a build of that version reads none). The
  ** version changes under the log's mutex at a switch, read here without it. */
  uint32_t version = __atomic_load_n(&log->version, __ATOMIC_RELAXED);
  put32(h + MW_REC_FLAGS, version >= 2 ? flags & MW_REC_F_KNOWN : 0);
  unsigned char *body = h + MW_REC_HDR_SIZE;
  for (int i = 0; i < npages; i++) {
    put32(body + body_pgno_at(log, (uint64_t)i), pgnos[i]);
    memcpy(body + body_image_at(log, (uint64_t)npages, (uint64_t)i), images[i], ps);
  }
  uint64_t ck = mw_log_checksum(mw_log_checksum(log->salt, h, MW_REC_CKSUM), h + MW_REC_HDR_SIZE,
                                len - MW_REC_HDR_SIZE);
  put64(h + MW_REC_CKSUM, ck);
}

static void set_msg(char **pzErr, const char *fmt, const char *path, int rc) {
  if (pzErr) *pzErr = sqlite3_mprintf(fmt, path, rc);
}

void mw_log_build_header(unsigned char *h, int page_size, uint64_t base, uint64_t salt,
                         uint32_t features, uint64_t txid) {
  memset(h, 0, MW_LOG_HDR_SIZE);
  memcpy(h + MW_LOG_HDR_MAGIC, MW_LOG_MAGIC, 8);
  put32(h + MW_LOG_HDR_VERSION, MW_LOG_VERSION);
  put32(h + MW_LOG_HDR_BOM, MW_LOG_BOM);
  put32(h + MW_LOG_HDR_PAGE_SIZE, (uint32_t)page_size);
  put32(h + MW_LOG_HDR_FEATURES, features);
  put64(h + MW_LOG_HDR_BASE, base);
  put64(h + MW_LOG_HDR_SALT, salt);
  put64(h + MW_LOG_HDR_TXID, txid);
  put64(h + MW_LOG_HDR_CKSUM, mw_log_checksum(0, h, MW_LOG_HDR_CKSUM));
}

/* A salt that differs between logs (not a secret: it only keeps records of another
** log, or of an earlier life of this one, from checking out). */
static uint64_t new_salt(const void *addr) {
  static uint64_t counter;
  uint64_t in[3] = { mw_now_ns(), (uint64_t)(uintptr_t)addr, __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) };
  return mw_log_checksum(CK3, in, sizeof(in));
}

/* Index capacity for every record that may still be assigned; called with mu held. */
int mw_log_ensure_idx(mw_log *log, size_t extra) {
  size_t want = log->nidx + log->nres + extra;
  if (want <= log->capidx) return SQLITE_OK;
  size_t cap = log->capidx ? log->capidx : 64;
  while (cap < want) cap *= 2;
  mw_log_entry *p = realloc(log->idx, cap * sizeof(*p));
  if (!p) return SQLITE_NOMEM;
  log->idx = p;
  log->capidx = cap;
  return SQLITE_OK;
}

/* ---- open and recovery ------------------------------------------------------------- */

static int is_zero_from(mw_fd fd, uint64_t from, uint64_t size, int *nonzero) {
  unsigned char buf[65536];
  *nonzero = 0;
  while (from < size) {
    size_t n = size - from < sizeof(buf) ? (size_t)(size - from) : sizeof(buf);
    int rc = mw_file_pread(fd, buf, n, from, 0);
    if (rc != SQLITE_OK) return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_READ : rc;
    for (size_t i = 0; i < n; i++) {
      if (buf[i]) { *nonzero = 1; return SQLITE_OK; }
    }
    from += n;
  }
  return SQLITE_OK;
}

/* Writes a fresh header (log->base, log->salt, log->page_size, and every feature of
** this version) over an empty or record-less file and makes it durable. */
int mw_log_write_fresh(mw_log *log) {
  unsigned char h[MW_LOG_HDR_SIZE];
  log->features = MW_LOG_FEATURES;
  __atomic_store_n(&log->version, MW_LOG_VERSION, __ATOMIC_RELAXED);
  mw_log_build_header(h, log->page_size, log->base, log->salt, log->features, log->stream_txid);
  int rc = mw_file_truncate(log->fd, 0, 0);
  if (rc == SQLITE_OK) rc = mw_file_pwrite(log->fd, h, sizeof(h), 0, 0);
  if (rc == SQLITE_OK) rc = mw_file_sync(log->fd, 0);
  if (rc == SQLITE_OK) rc = mw_dir_sync(log->path, 0);
  return rc;
}

void mw_log_rec_reader_free(rec_reader *r) {
  free(r->body);
  free(r->images);
  free(r->pgnos);
  free(r->ats);
}

/* buf, grown to hold n items of `size` bytes (*cap counts the items it holds), or 0
** when out of memory (buf is then unchanged and still owned by the caller). */
static void *grow_buffer(void *buf, uint64_t *cap, uint64_t n, uint64_t size) {
  if (buf != 0 && n <= *cap) return buf;
  uint64_t ncap = n < 16 ? 16 : n;
  void *nb = realloc(buf, (size_t)(ncap * size));
  if (nb != 0) *cap = ncap;
  return nb;
}

/* Whether h is the header of a record of epoch `expect` that fits in `room` bytes;
** *pN receives its page count. */
static int rec_header_ok(const mw_log *log, const unsigned char *h, uint64_t room,
                         uint64_t expect, uint32_t *pN) {
  const uint64_t per_page = 4u + (uint64_t)log->page_size;
  uint32_t npages = get32(h + MW_REC_NPAGES);
  *pN = npages;
  return get32(h + MW_REC_OFF_MAGIC) == MW_REC_MAGIC && get64(h + MW_REC_EPOCH) == expect &&
         (get32(h + MW_REC_FLAGS) & ~MW_REC_F_KNOWN) == 0 && npages <= (room - MW_REC_HDR_SIZE) / per_page;
}

/* r->pgnos and r->ats grown for n pages. */
static int grow_lists(rec_reader *r, uint64_t n, int with_ats) {
  uint32_t *pgnos = grow_buffer(r->pgnos, &r->cap_pgnos, n, sizeof(uint32_t));
  if (pgnos == 0) return SQLITE_NOMEM;
  r->pgnos = pgnos;
  if (!with_ats) return SQLITE_OK;
  uint64_t *ats = grow_buffer(r->ats, &r->cap_ats, n, sizeof(uint64_t));
  if (ats == 0) return SQLITE_NOMEM;
  r->ats = ats;
  return SQLITE_OK;
}

/* Reads the header (into h) and the body (into r->body) of the record at physical
** offset `phys` of fd, `room` bytes of which may belong to records, expecting epoch
** `expect`, and takes its page numbers (r->pgnos); *pN receives its page count. SQLITE_DONE: no record there (a torn or
** damaged tail, or the end); any other code: the read or an allocation failed. */
static int read_body(mw_log *log, mw_fd fd, rec_reader *r, uint64_t phys, uint64_t room,
                     uint64_t expect, unsigned char h[MW_REC_HDR_SIZE], uint32_t *pN) {
  const uint64_t per_page = 4u + (uint64_t)log->page_size;
  if (room < MW_REC_HDR_SIZE) return SQLITE_DONE;
  int rc = mw_file_pread(fd, h, MW_REC_HDR_SIZE, phys, 0);
  if (rc != SQLITE_OK) return rc;
  uint32_t npages = 0;
  if (!rec_header_ok(log, h, room, expect, &npages)) return SQLITE_DONE;
  unsigned char *body = grow_buffer(r->body, &r->cap_body, npages, per_page);
  if (body == 0) return SQLITE_NOMEM;
  r->body = body;
  rc = grow_lists(r, npages, 0);
  if (rc != SQLITE_OK) return rc;
  uint64_t blen = (uint64_t)npages * per_page;
  if (blen) {
    rc = mw_file_pread(fd, r->body, (size_t)blen, phys + MW_REC_HDR_SIZE, 0);
    if (rc != SQLITE_OK) return rc;
  }
  for (uint32_t i = 0; i < npages; i++) r->pgnos[i] = get32(r->body + body_pgno_at(log, i));
  *pN = npages;
  return SQLITE_OK;
}

/* Reads the record at physical offset `phys` (see read_body) and checks it; on
** SQLITE_OK, h holds its header, r its pages (r->pgnos, r->imgs) and *pLen its length. */
static int read_record(mw_log *log, mw_fd fd, rec_reader *r, uint64_t phys, uint64_t room,
                       uint64_t expect, unsigned char h[MW_REC_HDR_SIZE], uint64_t *pLen) {
  const uint64_t ps = (uint64_t)log->page_size;
  uint32_t npages = 0;
  int rc = read_body(log, fd, r, phys, room, expect, h, &npages);
  if (rc != SQLITE_OK) return rc;
  uint64_t blen = (uint64_t)npages * (4u + ps);
  uint64_t ck = mw_log_checksum(mw_log_checksum(log->salt, h, MW_REC_CKSUM), r->body, (size_t)blen);
  if (ck != get64(h + MW_REC_CKSUM)) return SQLITE_DONE;
  if (log->features & MW_LOG_FEAT_PGNOS_FIRST) {
    r->imgs = r->body + body_image_at(log, npages, 0); /* back to back already */
  } else {
    unsigned char *images = grow_buffer(r->images, &r->cap_images, npages, ps);
    if (images == 0) return SQLITE_NOMEM;
    r->images = images;
    for (uint32_t i = 0; i < npages; i++)
      memcpy(r->images + (uint64_t)i * ps, r->body + body_image_at(log, npages, i), (size_t)ps);
    r->imgs = r->images;
  }
  *pLen = MW_REC_HDR_SIZE + blen;
  return SQLITE_OK;
}

/* Page numbers read with the header in one read, for records of up to this many pages
** (with the page numbers first). */
#define LIST_AHEAD 62

/* The page list of the published record at logical offset `off` (physical `phys`):
** its page numbers into r->pgnos and the logical offsets of its images into r->ats,
** without reading the images or checking the checksum (mw_log_follow): published
** records are whole. With the page numbers first, it reads 4 bytes a page, most
** often in one read with the header; else the whole record. */
int mw_log_read_page_list(mw_log *log, mw_fd fd, rec_reader *r, uint64_t phys, uint64_t off,
                          uint64_t room, uint64_t expect, unsigned char h[MW_REC_HDR_SIZE],
                          uint64_t *pLen) {
  uint32_t npages = 0;
  int rc;
  if (log->features & MW_LOG_FEAT_PGNOS_FIRST) {
    if (room < MW_REC_HDR_SIZE) return SQLITE_DONE;
    unsigned char head[MW_REC_HDR_SIZE + 4 * LIST_AHEAD];
    size_t got = room < sizeof(head) ? (size_t)room : sizeof(head);
    rc = mw_file_pread(fd, head, got, phys, 0);
    if (rc != SQLITE_OK) return rc;
    memcpy(h, head, MW_REC_HDR_SIZE);
    if (!rec_header_ok(log, h, room, expect, &npages)) return SQLITE_DONE;
    rc = grow_lists(r, npages, 1);
    if (rc != SQLITE_OK) return rc;
    /* Page numbers are u32 in this machine's order: read straight into the list. */
    uint64_t ahead = (got - MW_REC_HDR_SIZE) / 4;
    if (ahead > npages) ahead = npages;
    memcpy(r->pgnos, head + MW_REC_HDR_SIZE, (size_t)ahead * 4);
    if (npages > ahead) {
      rc = mw_file_pread(fd, r->pgnos + ahead, (size_t)(npages - ahead) * 4,
                         phys + MW_REC_HDR_SIZE + ahead * 4, 0);
      if (rc != SQLITE_OK) return rc;
    }
  } else {
    rc = read_body(log, fd, r, phys, room, expect, h, &npages);
    if (rc == SQLITE_OK) rc = grow_lists(r, npages, 1);
    if (rc != SQLITE_OK) return rc;
  }
  for (uint32_t i = 0; i < npages; i++)
    r->ats[i] = off + MW_REC_HDR_SIZE + body_image_at(log, npages, i);
  *pLen = rec_size(log->page_size, npages);
  return SQLITE_OK;
}

/* Replays the records after the header; returns the logical end of the last valid one
** in *pEnd. */
static int scan_records(mw_log *log, uint64_t size, mw_log_replay_fn replay, void *ctx,
                        uint64_t *pEnd) {
  uint64_t off = MW_LOG_HDR_SIZE;
  uint64_t expect = log->base + 1;
  rec_reader r = { 0 };
  int rc;
  for (;;) {
    unsigned char h[MW_REC_HDR_SIZE];
    uint64_t len = 0;
    rc = read_record(log, log->fd, &r, off, size - off, expect, h, &len);
    if (rc == SQLITE_DONE) {
      rc = SQLITE_OK; /* the end, or the tail recovery cuts */
      break;
    }
    if (rc != SQLITE_OK) break;
    uint32_t npages = get32(h + MW_REC_NPAGES);
    if (replay) {
      rc = replay(ctx, expect, get32(h + MW_REC_DBPAGES), (int)npages, r.pgnos, r.imgs);
      if (rc != SQLITE_OK) break;
    }
    rc = mw_log_ensure_idx(log, 1);
    if (rc != SQLITE_OK) break;
    log->idx[log->nidx].epoch = expect;
    log->idx[log->nidx].off = off;
    log->nidx++;
    log->last_epoch = expect;
    off += len;
    expect++;
  }
  /* The file was measured: running out of it early is a failing read, not a tail. */
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  mw_log_rec_reader_free(&r);
  *pEnd = off;
  return rc;
}

static void free_log(mw_log *log) {
  while (log->staged) {
    mw_staged *next = log->staged->next;
    free(log->staged);
    log->staged = next;
  }
  mw_log_free_spares(log);
  free(log->idx);
  free(log->path);
  free(log->tmp_path);
  free(log->spare_path);
  mw_cond_destroy(&log->cv);
  mw_cond_destroy(&log->cv_sync);
  mw_mutex_destroy(&log->mu);
  mw_mutex_destroy(&log->cmp_mu);
  free(log);
}

/* mw_log_open, step 1: the log's memory, names, locks and options. SQLITE_NOMEM
** (nothing left allocated) when out of memory. */
static int log_alloc(const char *db_path, const mw_log_options *opts, mw_log **pLog) {
  mw_log *log = calloc(1, sizeof(*log));
  if (!log) return SQLITE_NOMEM;
  size_t n = strlen(db_path);
  log->path = malloc(n + 4);
  log->tmp_path = malloc(n + 8);
  log->spare_path = malloc(n + 10);
  mw_mutex_init(&log->cmp_mu);
  mw_mutex_init(&log->mu);
  mw_cond_init(&log->cv);
  mw_cond_init(&log->cv_sync);
  log->fd = MW_FD_INVALID;
  log->mfd = MW_FD_INVALID;
  if (!log->path || !log->tmp_path || !log->spare_path) { free_log(log); return SQLITE_NOMEM; }
  memcpy(log->path, db_path, n);
  memcpy(log->path + n, "-mw", 4);
  memcpy(log->tmp_path, log->path, n + 3);
  memcpy(log->tmp_path + n + 3, ".tmp", 5);
  memcpy(log->spare_path, log->path, n + 3);
  memcpy(log->spare_path + n + 3, ".spare", 7);
  log->page_size = opts->page_size;
  log->sync_mode = opts->sync_mode;
  log->full_fsync = opts->full_fsync;
  log->step = opts->prealloc_step ? opts->prealloc_step : MW_LOG_DEFAULT_STEP;
  log->room_max = opts->room_max ? opts->room_max : SHARED_ROOM_MAX;
  log->shared = opts->shared;
  if (opts->shared && opts->follow_end != 0) log->shift = opts->shift;
  *pLog = log;
  return SQLITE_OK;
}

/* Step 2: opens (or creates) the log file; *pExisted: it was there before. A follower
** (follow) needs it to exist. */
static int log_open_file(mw_log *log, int follow, int *pExisted, char **pzErr) {
  *pExisted = mw_file_exists(log->path);
  if (follow && !*pExisted) {
    set_msg(pzErr, "multiwriter log: %s is missing while other processes have the database "
                   "open (%d)", log->path, SQLITE_CORRUPT);
    return SQLITE_CORRUPT;
  }
  int os_err = 0;
  int rc = mw_file_open(log->path, 1, &log->fd, &os_err);
  if (rc != SQLITE_OK && pzErr) {
    /* Most often a directory or a log the process may not write: every connection
    ** through the engine needs the log, read-only ones too (stock SQLite needs the
    ** -shm file of a WAL database the same way). */
    *pzErr = sqlite3_mprintf("multiwriter log: cannot open %s for reading and writing (%d, "
                             "system error %d): the engine needs to create and write it "
                             "beside the database, also for a read-only connection",
                             log->path, rc, os_err);
  }
  return rc;
}

/* Step 3: reads and judges the header of a file of `size` bytes. *pFresh: no usable
** header and nothing behind it, start a new log; else log->base, salt and features
** are the header's. SQLITE_CANTOPEN for another format (left as it is), SQLITE_CORRUPT
** for a header that cannot be used with records behind it (or any damage, for a
** follower: other processes write the file). */
static int log_read_header(mw_log *log, int existed, int follow, uint64_t size, int *pFresh,
                           char **pzErr) {
  const int ps = log->page_size;
  unsigned char h[MW_LOG_HDR_SIZE];
  *pFresh = 0;
  if (!existed || size == 0) {
    *pFresh = 1;
    return SQLITE_OK;
  }
  memset(h, 0, sizeof(h));
  size_t want = size < MW_LOG_HDR_SIZE ? (size_t)size : MW_LOG_HDR_SIZE;
  int rc = mw_file_pread(log->fd, h, want, 0, 0);
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  if (rc != SQLITE_OK) return rc;
  /* A whole header with our magic, and a version (or byte order) of its own, is
  ** another format; zeros there are a torn header, handled as damaged below. */
  int magic = size >= MW_LOG_HDR_SIZE && memcmp(h + MW_LOG_HDR_MAGIC, MW_LOG_MAGIC, 8) == 0;
  uint32_t version = get32(h + MW_LOG_HDR_VERSION), bom = get32(h + MW_LOG_HDR_BOM);
  int known = version >= MW_LOG_VERSION_MIN && version <= MW_LOG_VERSION;
  int sound = magic && known && bom == MW_LOG_BOM &&
              get64(h + MW_LOG_HDR_CKSUM) == mw_log_checksum(0, h, MW_LOG_HDR_CKSUM);
  if ((magic && version != 0 && !known) ||
      (magic && bom == __builtin_bswap32(MW_LOG_BOM)) ||
      (sound && (get32(h + MW_LOG_HDR_FEATURES) & ~MW_LOG_FEATURES) != 0)) {
    /* Another format (or byte order): refuse it and leave it exactly as it is. */
    set_msg(pzErr, "multiwriter log: %s has a format this version cannot read (%d)", log->path,
            SQLITE_CANTOPEN);
    return SQLITE_CANTOPEN;
  }
  if (follow && (!sound || get32(h + MW_LOG_HDR_PAGE_SIZE) != (uint32_t)ps)) {
    /* Other processes write it: nothing here may be rewritten. */
    rc = SQLITE_CORRUPT;
    set_msg(pzErr, "multiwriter log: %s has no usable header while other processes have "
                   "the database open (%d)", log->path, rc);
  } else if (!sound || get32(h + MW_LOG_HDR_PAGE_SIZE) != (uint32_t)ps) {
    /* No usable header: acceptable only with nothing behind it (a crash while the
    ** log was being created, or a preallocated zero tail). */
    int nonzero = 0;
    rc = is_zero_from(log->fd, size < MW_LOG_HDR_SIZE ? size : MW_LOG_HDR_SIZE, size, &nonzero);
    if (rc == SQLITE_OK && nonzero) {
      rc = SQLITE_CORRUPT;
      set_msg(pzErr,
              sound ? "multiwriter log: %s was written with another page size (%d)"
                    : "multiwriter log: %s has a damaged header and records behind it (%d)",
              log->path, rc);
    }
    *pFresh = 1;
  } else {
    log->base = get64(h + MW_LOG_HDR_BASE);
    log->salt = get64(h + MW_LOG_HDR_SALT);
    log->features = get32(h + MW_LOG_HDR_FEATURES);
    __atomic_store_n(&log->version, version, __ATOMIC_RELAXED);
    log->stream_txid = version >= 2 ? get64(h + MW_LOG_HDR_TXID) : 0;
  }
  return rc;
}

/* Step 4: replays the records (a follower: exactly those up to follow_end; else every
** whole one, the torn tail cut durably) or writes a fresh header. *pEnd: the physical
** end of the records. */
static int log_recover(mw_log *log, const mw_log_options *opts, int follow, int fresh,
                       uint64_t size, mw_log_replay_fn replay, void *ctx, uint64_t *pEnd) {
  int rc = SQLITE_OK;
  if (!follow) rc = mw_file_delete(log->tmp_path, 0); /* a compaction's leftover */
  /* A spare left by the last life (or a crash between its link and the rename, when it
  ** names this very file): never reused across opens. */
  if (rc == SQLITE_OK && !follow) log->recycle = mw_file_delete(log->spare_path, 0) == SQLITE_OK;
  if (rc != SQLITE_OK) return rc;
  *pEnd = MW_LOG_HDR_SIZE;
  if (follow) {
    /* Exactly the records other processes published, up to follow_end; the bytes after
    ** it may be a record being written right now: never cut, never read. */
    log->last_epoch = log->base;
    uint64_t limit = opts->follow_end - log->shift;
    if (opts->follow_end < log->shift || limit > size || limit < MW_LOG_HDR_SIZE)
      rc = SQLITE_CORRUPT;
    if (rc == SQLITE_OK) rc = scan_records(log, limit, replay, ctx, pEnd);
    if (rc == SQLITE_OK && *pEnd != limit) rc = SQLITE_CORRUPT;
    for (size_t i = 0; i < log->nidx; i++) log->idx[i].off += log->shift;
  } else if (fresh) {
    log->base = 1;
    log->salt = new_salt(log);
    log->stream_txid = opts->stream_txid;
    rc = mw_log_write_fresh(log);
  } else {
    log->last_epoch = log->base;
    rc = scan_records(log, size, replay, ctx, pEnd);
    if (rc == SQLITE_OK && size > *pEnd) {
      /* Cut the torn or damaged tail (and any preallocated zeros) durably, so that
      ** stale bytes behind the records written from now on can never be replayed. */
      rc = mw_file_truncate(log->fd, *pEnd, 0);
      if (rc == SQLITE_OK) rc = mw_file_sync(log->fd, 0);
      if (rc == SQLITE_OK) rc = mw_dir_sync(log->path, 0);
    } else if (rc == SQLITE_OK && log->last_epoch > log->base) {
      /* The replayed records may have been written but never synced (a process that
      ** ran with synchronous=NORMAL and died): make them durable before anything,
      ** such as a compaction of the database file, comes to depend on them. */
      rc = mw_file_sync(log->fd, 0);
    }
  }
  if (fresh) log->last_epoch = log->base;
  return rc;
}

/* Step 5: the log is usable from the physical offset `end` on. */
static void log_start(mw_log *log, uint64_t end) {
  end += log->shift;
  log->assigned_end = log->written_end = log->synced_end = log->alloc_end = end;
  if (log->shared) {
    /* Records extend the file: the room is never zeroed ahead (log.h). */
    log->alloc_end = UINT64_MAX / 4;
    return;
  }
  /* Without the grower (no thread to be had) committers grow ahead themselves. It
  ** only acts when a reservation asks: the file stays as recovery left it until the
  ** first commit (which grows the first step itself). */
  log->grower_running = mw_bg_add(&log->grower, mw_log_grower_step, log, 0) == SQLITE_OK;
}

int mw_log_open(const char *db_path, const mw_log_options *opts, mw_log_replay_fn replay,
                void *ctx, mw_log **out, uint64_t *pBase, uint64_t *pLast, char **pzErr) {
  *out = 0;
  if (pzErr) *pzErr = 0;
  int ps = opts ? opts->page_size : 0;
  if (!db_path || ps < 512 || ps > 65536 || (ps & (ps - 1)) != 0) {
    if (pzErr) *pzErr = sqlite3_mprintf("multiwriter log: bad page size %d", ps);
    return SQLITE_MISUSE;
  }
  const int follow = opts->shared && opts->follow_end != 0;
  mw_log *log = 0;
  int existed = 0, fresh = 0;
  uint64_t size = 0, end = 0;
  int rc = log_alloc(db_path, opts, &log);
  if (rc == SQLITE_OK) rc = log_open_file(log, follow, &existed, pzErr);
  if (rc == SQLITE_OK) {
    rc = mw_file_size(log->fd, &size, 0);
    if (rc == SQLITE_OK) rc = log_read_header(log, existed, follow, size, &fresh, pzErr);
    if (rc == SQLITE_OK) rc = log_recover(log, opts, follow, fresh, size, replay, ctx, &end);
    if (rc != SQLITE_OK && pzErr && !*pzErr)
      set_msg(pzErr, "multiwriter log: recovery of %s failed (%d)", log->path, rc);
  }
  if (rc != SQLITE_OK) { /* the one cleanup */
    if (log && log->fd != MW_FD_INVALID) mw_file_close(log->fd);
    if (log) free_log(log);
    return rc;
  }
  log_start(log, end);
  *pBase = log->base;
  *pLast = log->last_epoch;
  *out = log;
  return SQLITE_OK;
}

/* ---- the commit path ------------------------------------------------------------------ */

uint64_t mw_log_record_size(const mw_log *log, int npages) {
  return rec_size(log->page_size, npages < 0 ? 0 : (uint64_t)npages);
}

/* One field of the log read under its mutex (the accessors below). */
static uint64_t read_locked(mw_log *log, const uint64_t *field) {
  mw_mutex_lock(&log->mu);
  uint64_t v = *field;
  mw_mutex_unlock(&log->mu);
  return v;
}

uint64_t mw_log_base(mw_log *log) { return read_locked(log, &log->base); }
uint64_t mw_log_stream_txid(mw_log *log) { return read_locked(log, &log->stream_txid); }

void mw_log_set_stream_txid(mw_log *log, uint64_t txid) {
  mw_mutex_lock(&log->mu);
  log->stream_txid = txid;
  mw_mutex_unlock(&log->mu);
}

uint64_t mw_log_txid_at(const mw_log *log, uint64_t base) {
  return log->stream_txid ? log->stream_txid + (base - log->base) : 0;
}

/* ---- reading committed records (the replica stream) -------------------------------- */

int mw_log_view_image(const mw_log_view *v, uint64_t at, unsigned char *buf) {
  if (at < v->shift + MW_LOG_HDR_SIZE) return SQLITE_NOTFOUND;
  int rc = mw_file_pread(v->fd, buf, (size_t)v->page_size, at - v->shift, 0);
  return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_READ : rc;
}

int mw_log_read_durable(mw_log *log, uint64_t after, uint64_t durable_end, uint64_t max_bytes,
                        mw_log_follow_fn lists, int (*images)(void *ctx, const mw_log_view *v),
                        void *ctx, uint64_t *pLast) {
  *pLast = after;
  /* No switch meanwhile: this process's compaction holds cmp_mu, and the reopen after
  ** another process's switch (mw_mp=1) waits for the reads in progress (`reading`). The
  ** descriptor, the shift and the offsets stay as read here until the end. */
  mw_mutex_lock(&log->cmp_mu);
  mw_mutex_lock(&log->mu);
  while (log->switching) mw_cond_wait(&log->cv, &log->mu);
  int rc = log->error;
  uint64_t durable = durable_end ? durable_end : log->sync_mode ? log->synced_end : log->written_end;
  if (durable > log->assigned_end) durable = log->assigned_end; /* the records it knows */
  uint64_t shift = log->shift, off = 0;
  mw_fd fd = log->fd;
  if (rc == SQLITE_OK && after < log->base) rc = SQLITE_NOTFOUND; /* compacted already */
  if (rc == SQLITE_OK) {
    /* The entries are in epoch order, one per epoch after the base. */
    size_t lo = 0, hi = log->nidx;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (log->idx[mid].epoch <= after) lo = mid + 1; else hi = mid;
    }
    if (lo < log->nidx && log->idx[lo].epoch == after + 1) off = log->idx[lo].off;
    else durable = 0; /* nothing after it yet */
  }
  log->reading++;
  mw_mutex_unlock(&log->mu);
  rec_reader r = { 0 };
  uint64_t expect = after + 1, bytes = 0;
  while (rc == SQLITE_OK && off != 0 && off < durable && bytes < max_bytes) {
    unsigned char h[MW_REC_HDR_SIZE];
    uint64_t len = 0;
    /* The page list only (4 bytes a page, no checksum: recovery checked the replayed
    ** records, and these were written here); the images are read when needed. */
    rc = mw_log_read_page_list(log, fd, &r, off - shift, off, durable - off, expect, h, &len);
    if (rc == SQLITE_DONE) rc = SQLITE_CORRUPT; /* a durable record is whole */
    if (rc != SQLITE_OK) break;
    rc = lists(ctx, expect, get32(h + MW_REC_DBPAGES), get32(h + MW_REC_FLAGS),
               (int)get32(h + MW_REC_NPAGES), r.pgnos, r.ats);
    if (rc != SQLITE_OK) break;
    *pLast = expect;
    off += len;
    bytes += len;
    expect++;
  }
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  mw_log_rec_reader_free(&r);
  mw_log_view v = { fd, shift, log->page_size };
  if (rc == SQLITE_OK && images && *pLast > after) rc = images(ctx, &v);
  mw_mutex_lock(&log->mu);
  if (--log->reading == 0) wake_all(log);
  mw_mutex_unlock(&log->mu);
  mw_mutex_unlock(&log->cmp_mu);
  return rc;
}
uint64_t mw_log_end(mw_log *log) { return read_locked(log, &log->assigned_end); }
uint64_t mw_log_shift(mw_log *log) { return read_locked(log, &log->shift); }
uint64_t mw_log_room_inline(mw_log *log) { return read_locked(log, &log->room_inline); }
uint64_t mw_log_syncs(mw_log *log) { return read_locked(log, &log->syncs); }

void mw_log_fail(mw_log *log, int rc) {
  mw_mutex_lock(&log->mu);
  set_error(log, rc == SQLITE_OK ? SQLITE_ERROR : rc);
  mw_mutex_unlock(&log->mu);
}

uint64_t mw_log_size(mw_log *log) {
  mw_mutex_lock(&log->mu);
  uint64_t size = log->assigned_end - log->shift;
  mw_mutex_unlock(&log->mu);
  return size;
}

int mw_log_close(mw_log *log, int remove) {
  int rc = mw_log_shut(log, remove);
  if (log) free_log(log);
  return rc;
}

int mw_log_shut(mw_log *log, int remove) {
  if (!log) return SQLITE_OK;
  __atomic_store_n(&log->stop_growth, 1, __ATOMIC_RELEASE); /* no commit follows */
  if (log->grower_running) {
    mw_bg_remove(&log->grower); /* waits for a step in progress; none after */
    log->grower_running = 0;
  }
  mw_mutex_lock(&log->cmp_mu);
  mw_mutex_lock(&log->mu);
  /* Write what was submitted (a commit with synchronous=OFF may not have waited). */
  for (;;) {
    if (!log->writing && log->staged && log->staged->off == log->written_end && log->error == SQLITE_OK) {
      mw_log_write_ready(log, UINT64_MAX);
      continue;
    }
    if (log->writing || log->syncing || log->growing) {
      mw_cond_wait(&log->cv, &log->mu);
      continue;
    }
    break;
  }
  mw_mutex_unlock(&log->mu);
  int rc = mw_file_close(log->fd);
  if (remove) {
    int r2 = mw_file_delete(log->path, 0);
    if (r2 == SQLITE_OK) r2 = mw_file_delete(log->tmp_path, 0);
    if (r2 == SQLITE_OK) r2 = mw_file_delete(log->spare_path, 0);
    if (r2 == SQLITE_OK) r2 = mw_dir_sync(log->path, 0);
    if (rc == SQLITE_OK) rc = r2;
  }
  mw_mutex_unlock(&log->cmp_mu);
  return rc;
}
