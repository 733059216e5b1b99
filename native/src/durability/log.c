/*
** log.c: the durable commit log "<db>-mw" of one database (log.h is the interface,
** log_format.h and docs/format.md the bytes).
**
** Owns: the log file and its temporary "<db>-mw.tmp", the header, the records, space
** reservation (preallocation in steps), group commit, recovery, the switch to a
** shorter log after a compaction, and the sticky error of the log.
** Never touches: the database file, the page store, SQLite (beyond result codes and
** sqlite3_mprintf for error messages).
**
** Offsets. Every offset the engine sees is logical: it only grows, across compactions.
** The byte at logical offset L lives at file offset L - shift; a compaction moves the
** records it keeps to the start of a new file and raises shift accordingly, so that
** offsets handed out before it stay meaningful (mw_log_wait_durable keeps working).
**
** Group commit is leader/follower: no background thread writes or syncs. Whoever finds the
** next record(s) staged and no write in progress writes the contiguous prefix of
** staged records with one pwritev; whoever waits for a written record while no sync is
** in progress runs the data sync for everything written so far. A lone committer so
** writes and syncs its own record on its own thread (one write, one sync, no hand-off);
** under load one thread syncs group n while another writes group n+1. The only
** background work of the log is the grower, a job of the shared background workers
** (background.c) that adds room to the file ahead of need; commits never wait for
** it unless the room is used up.
**
** Compaction copies the records it keeps into "<db>-mw.tmp" while commits go on. Then
** (one process) it holds growth while it gives the new file the old one's room, turns
** on the mirror (every write from then on goes to both files, every sync syncs both),
** copies the bytes written before the mirror, syncs the new file, renames it, syncs the
** directory and swaps the descriptor: committers never wait for it, and whichever file
** the name points at after a crash holds every acknowledged record (switch_mirrored).
** Only reservations that find no room wait, for the end of the held growth. With
** mw_mp=1 (a hook) other processes write the log through their own descriptors: there
** it stops writes, syncs and growth (not assignment, staging or reservations that fit:
** they only need logical offsets), waits for those in flight, copies the rest, syncs,
** renames, syncs the directory and switches the descriptor; committers then wait if
** they need to write or sync during that switch.
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
#include "platform/background.h"
#include "platform/crash.h"

#include <stdlib.h>
#include <string.h>

#define MW_LOG_DEFAULT_STEP (4u * 1024u * 1024u)
/* The most room a switch of a shared log zeroes ahead (switch_log) when the options
** give none: the default mw_log_max_mb. */
#define SHARED_ROOM_MAX ((uint64_t)64 << 20)
#define MW_LOG_MAX_IOV 256          /* records per pwritev */
#define MW_LOG_COPY_CHUNK (1u << 20) /* compaction copies in chunks of this size */

/* One submitted record waiting to be written: the exact bytes of the record. */
typedef struct mw_staged {
  struct mw_staged *next;
  uint64_t off;  /* logical offset */
  size_t len;
  unsigned char *buf; /* points right after the struct */
} mw_staged;

/* Where each record in the log starts, to find the cut of a compaction. */
typedef struct mw_log_entry {
  uint64_t epoch;
  uint64_t off; /* logical */
} mw_log_entry;

struct mw_log {
  char *path;     /* "<db>-mw" */
  char *tmp_path; /* "<db>-mw.tmp" */
  char *spare_path; /* "<db>-mw.spare": the file before the last switch (see recycle) */
  /* A switch keeps the log file it replaces under spare_path and the next switch takes
  ** it as its new file: its bytes are already written (records and zeros of its
  ** earlier use), so only room past its size is zeroed again, as SQLite reuses its WAL.
  ** Off when a spare name could not be removed (it must never name the log in use).
  ** With mw_mp=1 each switch is told whether the spare may be taken (no process can
  ** still read it: mp.c) and checks that it is not the file at the log's name. */
  int recycle;
  int page_size;
  int sync_mode;
  int full_fsync;
  int shared;     /* multi-process mode: no grower, no preallocation (log.h) */
  uint64_t step;
  uint64_t room_max; /* shared: the most room a switch zeroes (switch_log) */
  uint64_t salt;
  uint32_t features;  /* the header's feature bits: the layout of every record here */

  mw_mutex cmp_mu; /* one compaction (or close) at a time */
  mw_mutex mu;     /* everything below */
  mw_cond cv;      /* broadcast on every change of the state below */
  mw_cond cv_sync; /* the same, for the committers whose record is written and that
                      wait for its sync: a write's end signals only one of them (a
                      syncer), so that the many waiting for a sync are not woken at
                      every write of the group (wake_all wakes both) */
  mw_fd fd;
  uint64_t shift;        /* logical - physical */
  uint64_t base;         /* base epoch in the header */
  uint64_t last_epoch;   /* last assigned (or replayed) epoch */
  uint64_t assigned_end; /* logical end of the assigned records */
  uint64_t reserved;     /* bytes reserved, not yet assigned */
  uint64_t alloc_end;    /* logical end of the preallocated space */
  uint64_t written_end;  /* every byte before is written */
  uint64_t synced_end;   /* every byte before is durable */
  int writing;           /* a thread is in pwritev */
  int syncing;           /* a thread is in the data sync */
  int growing;           /* a thread is preallocating */
  int reading;           /* threads in mw_log_read_image's pread (a switch waits for them) */
  int switching;         /* a compaction is switching files: no write/sync/grow starts */
  /* The switch of mw_log_compacted (one process): growth held while the new file takes
  ** the room of the old one; then every write also goes to mfd (the new file, at
  ** logical - mshift) and every sync syncs it too, until the descriptor swap. */
  int hold_growth;       /* no growth starts */
  int mirror;            /* writes and syncs starting now also go to mfd */
  mw_fd mfd;
  uint64_t mshift;
  uint64_t fd_gen;       /* raised at each descriptor swap */
  uint64_t write_gen, sync_gen; /* fd_gen when the write (sync) in progress started */
  int write_mirrored, sync_mirrored; /* that write (sync) also goes to mfd */
  int error;             /* sticky error, SQLITE_OK while healthy */
  mw_staged *staged;     /* submitted, not yet written, sorted by offset */
  mw_log_entry *idx;     /* records in the log, in epoch order */
  size_t nidx, capidx;
  size_t nres;           /* reservations held (each becomes one idx entry) */
  /* The grower: a job of the shared background workers (background.c) that adds
  ** the next step of room ahead of need, so that no commit waits for the zeros and
  ** their sync. Never on the commit path: a committer only wakes it (and grows
  ** itself only when the room is really used up). */
  mw_bg_job grower;
  int grower_running;    /* the job is added */
  int stop_growth;       /* (atomic) the log is being closed: a growth in progress stops
                         ** after its current chunk of zeros, unsynced, its room not taken */
  uint64_t room_inline;  /* growths made on a commit's path (mw_log_room_inline) */
  uint64_t syncs;        /* data syncs (sync_locked), for mw_log_syncs */
};

static uint64_t grower_step(void *arg);

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

/* ---- small helpers ------------------------------------------------------------- */

static inline void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static uint64_t rec_size(int page_size, uint64_t npages) {
  return MW_REC_HDR_SIZE + npages * (4u + (uint64_t)page_size);
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

static uint64_t round_up(uint64_t v, uint64_t step) { return (v + step - 1) / step * step; }

static void wake_all(mw_log *log) {
  mw_cond_broadcast(&log->cv);
  mw_cond_broadcast(&log->cv_sync);
}

static void set_error(mw_log *log, int rc) {
  if (log->error == SQLITE_OK) log->error = rc;
  wake_all(log);
}

static void set_msg(char **pzErr, const char *fmt, const char *path, int rc) {
  if (pzErr) *pzErr = sqlite3_mprintf(fmt, path, rc);
}

static void build_header(unsigned char *h, int page_size, uint64_t base, uint64_t salt,
                         uint32_t features) {
  memset(h, 0, MW_LOG_HDR_SIZE);
  memcpy(h + MW_LOG_HDR_MAGIC, MW_LOG_MAGIC, 8);
  put32(h + MW_LOG_HDR_VERSION, MW_LOG_VERSION);
  put32(h + MW_LOG_HDR_BOM, MW_LOG_BOM);
  put32(h + MW_LOG_HDR_PAGE_SIZE, (uint32_t)page_size);
  put32(h + MW_LOG_HDR_FEATURES, features);
  put64(h + MW_LOG_HDR_BASE, base);
  put64(h + MW_LOG_HDR_SALT, salt);
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
static int ensure_idx(mw_log *log, size_t extra) {
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

/* ---- space ------------------------------------------------------------------------- */

/* Makes the file at least `target` bytes long with [from, target) reserved on disk, and
** with syncs on, written with zeros: fallocate alone leaves the new extents "unwritten"
** (ext4, xfs), and then the first data sync after each record converts one, which is
** a journal commit: a sync that is no longer data-only. Writing the zeros once per step
** (the caller syncs them) keeps every later sync of a record data-only, as for a WAL
** that SQLite reuses. SQLITE_FULL when the disk has no room for it.
** The zeros go out in chunks of 64 KiB, each written back to the device before
** the next (mw_file_writeback, no device flush): the committers' data syncs run
** meanwhile on the same file, and one that found a whole step of dirty zeros would
** write all of it (a 2 ms stall every step, the p99.9 of one writer); now it waits
** for at most one chunk. Chunks of 256 KiB still left one writer's transfers with
** 119 to 374 commits over 0.6 ms in 4 s; chunks of 64 KiB, 72 to 148 (2026-12-03). */
#define GROW_IOV 1             /* a chunk: GROW_IOV * 64 KiB */
/* Returned by grow_file and grow_locked when stop_growth cut the growth short. */
#define GROWTH_STOPPED SQLITE_INTERRUPT
static int grow_file(const mw_log *log, mw_fd fd, uint64_t from, uint64_t target, int stoppable) {
  static const unsigned char zeros[65536];
  int rc = mw_file_preallocate(fd, target, 0);
  if (rc != SQLITE_OK || log->sync_mode == 0) return rc;
  mw_iovec iov[GROW_IOV];
  for (int i = 0; i < GROW_IOV; i++) { iov[i].base = zeros; iov[i].len = sizeof(zeros); }
  while (rc == SQLITE_OK && from < target) {
    /* A close does not wait for room it will never use (the grower's two steps of zeros
    ** and their sync, most of a short-lived process's close). Only this process's own
    ** room (grow_locked): a switch's new file and a shared claim always finish. */
    if (stoppable && __atomic_load_n(&log->stop_growth, __ATOMIC_ACQUIRE)) return GROWTH_STOPPED;
    uint64_t n = target - from;
    int cnt = 0;
    while (cnt < GROW_IOV && n > 0) {
      iov[cnt].len = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
      n -= iov[cnt].len;
      cnt++;
    }
    uint64_t len = 0;
    for (int i = 0; i < cnt; i++) len += iov[i].len;
    rc = mw_file_pwritev(fd, iov, cnt, from, 0);
    if (rc == SQLITE_OK) rc = mw_file_writeback(fd, from, len, 0);
    for (int i = 0; i < cnt; i++) iov[i].len = sizeof(zeros);
    from += len;
  }
  return rc;
}

/* ---- group commit ---------------------------------------------------------------- */

/* Writes the contiguous prefix of staged records while no one else writes, until
** everything before `until` is written (then the caller goes on to its sync or returns,
** and a waiting committer takes over the writing: every submitter waits, so staged
** records always have a thread that will write them). Called and returns with mu held;
** drops it around the system call. */
static void write_ready(mw_log *log, uint64_t until) {
  while (log->error == SQLITE_OK && !log->writing && !log->switching && log->staged &&
         log->staged->off == log->written_end && log->written_end < until) {
    mw_iovec iov[MW_LOG_MAX_IOV];
    mw_staged *first = log->staged, *last = 0, *r = first;
    uint64_t start = log->written_end, end = start;
    int n = 0;
    while (r && r->off == end && n < MW_LOG_MAX_IOV) {
      iov[n].base = r->buf;
      iov[n].len = r->len;
      n++;
      end += r->len;
      last = r;
      r = r->next;
    }
    last->next = 0;
    log->staged = r;
    log->writing = 1;
    log->write_gen = log->fd_gen;
    log->write_mirrored = log->mirror;
    mw_fd fd = log->fd, mfd = log->mirror ? log->mfd : MW_FD_INVALID;
    uint64_t phys = start - log->shift, mphys = start - log->mshift;
    mw_mutex_unlock(&log->mu);
    int rc = mw_file_pwritev(fd, iov, n, phys, 0);
    /* During a switch the bytes go to the new file too (a failure there is a failed
    ** write of the log: sticky, as the record is not in both files). */
    if (rc == SQLITE_OK && mfd != MW_FD_INVALID) rc = mw_file_pwritev(mfd, iov, n, mphys, 0);
    while (first) {
      mw_staged *next = first->next;
      free(first);
      first = next;
    }
    mw_mutex_lock(&log->mu);
    log->writing = 0;
    if (rc != SQLITE_OK) set_error(log, rc);
    else log->written_end = end;
    /* Those waiting for a write, and one that may start the next sync. */
    mw_cond_broadcast(&log->cv);
    mw_cond_signal(&log->cv_sync);
  }
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
static int write_fresh(mw_log *log) {
  unsigned char h[MW_LOG_HDR_SIZE];
  log->features = MW_LOG_FEATURES;
  build_header(h, log->page_size, log->base, log->salt, log->features);
  int rc = mw_file_truncate(log->fd, 0, 0);
  if (rc == SQLITE_OK) rc = mw_file_pwrite(log->fd, h, sizeof(h), 0, 0);
  if (rc == SQLITE_OK) rc = mw_file_sync(log->fd, 0);
  if (rc == SQLITE_OK) rc = mw_dir_sync(log->path, 0);
  return rc;
}

/* Buffers for reading records, each grown to the largest record its caller read:
** recovery (read_record) uses images, following (read_page_list) uses ats. */
typedef struct rec_reader {
  unsigned char *body;         /* the record's body as in the file */
  unsigned char *images;       /* its page images, back to back, when the body has them
                               ** apart (read_record) */
  const unsigned char *imgs;   /* its images, back to back: in images or in body */
  uint32_t *pgnos;             /* its page numbers */
  uint64_t *ats;               /* the logical offsets of its images (read_page_list) */
  uint64_t cap_body, cap_images, cap_pgnos, cap_ats; /* pages each buffer holds */
} rec_reader;

static void rec_reader_free(rec_reader *r) {
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
         get32(h + MW_REC_ZERO) == 0 && npages <= (room - MW_REC_HDR_SIZE) / per_page;
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
static int read_page_list(mw_log *log, mw_fd fd, rec_reader *r, uint64_t phys, uint64_t off,
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
    rc = ensure_idx(log, 1);
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
  rec_reader_free(&r);
  *pEnd = off;
  return rc;
}

static void free_log(mw_log *log) {
  while (log->staged) {
    mw_staged *next = log->staged->next;
    free(log->staged);
    log->staged = next;
  }
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

int mw_log_open(const char *db_path, const mw_log_options *opts, mw_log_replay_fn replay,
                void *ctx, mw_log **out, uint64_t *pBase, uint64_t *pLast, char **pzErr) {
  *out = 0;
  if (pzErr) *pzErr = 0;
  int ps = opts ? opts->page_size : 0;
  if (!db_path || ps < 512 || ps > 65536 || (ps & (ps - 1)) != 0) {
    if (pzErr) *pzErr = sqlite3_mprintf("multiwriter log: bad page size %d", ps);
    return SQLITE_MISUSE;
  }
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
  log->page_size = ps;
  log->sync_mode = opts->sync_mode;
  log->full_fsync = opts->full_fsync;
  log->step = opts->prealloc_step ? opts->prealloc_step : MW_LOG_DEFAULT_STEP;
  log->room_max = opts->room_max ? opts->room_max : SHARED_ROOM_MAX;
  log->shared = opts->shared;
  const int follow = opts->shared && opts->follow_end != 0;
  if (follow) log->shift = opts->shift;

  int existed = mw_file_exists(log->path);
  if (follow && !existed) {
    set_msg(pzErr, "multiwriter log: %s is missing while other processes have the database "
                   "open (%d)", log->path, SQLITE_CORRUPT);
    free_log(log);
    return SQLITE_CORRUPT;
  }
  int os_err = 0;
  int rc = mw_file_open(log->path, 1, &log->fd, &os_err);
  if (rc != SQLITE_OK) {
    /* Most often a directory or a log the process may not write: every connection
    ** through the engine needs the log, read-only ones too (stock SQLite needs the
    ** -shm file of a WAL database the same way). */
    if (pzErr)
      *pzErr = sqlite3_mprintf("multiwriter log: cannot open %s for reading and writing (%d, "
                               "system error %d): the engine needs to create and write it "
                               "beside the database, also for a read-only connection",
                               log->path, rc, os_err);
    free_log(log);
    return rc;
  }
  uint64_t size = 0;
  rc = mw_file_size(log->fd, &size, 0);
  unsigned char h[MW_LOG_HDR_SIZE];
  int fresh = 0; /* 1: no usable header and nothing behind it: start a new log */
  if (rc == SQLITE_OK && (!existed || size == 0)) {
    fresh = 1;
  } else if (rc == SQLITE_OK) {
    memset(h, 0, sizeof(h));
    size_t want = size < MW_LOG_HDR_SIZE ? (size_t)size : MW_LOG_HDR_SIZE;
    rc = mw_file_pread(log->fd, h, want, 0, 0);
    if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  }
  if (rc == SQLITE_OK && !fresh) {
    /* A whole header with our magic, and a version (or byte order) of its own, is
    ** another format; zeros there are a torn header, handled as damaged below. */
    int magic = size >= MW_LOG_HDR_SIZE && memcmp(h + MW_LOG_HDR_MAGIC, MW_LOG_MAGIC, 8) == 0;
    uint32_t version = get32(h + MW_LOG_HDR_VERSION), bom = get32(h + MW_LOG_HDR_BOM);
    int sound = magic && version == MW_LOG_VERSION && bom == MW_LOG_BOM &&
                get64(h + MW_LOG_HDR_CKSUM) == mw_log_checksum(0, h, MW_LOG_HDR_CKSUM);
    if ((magic && version != 0 && version != MW_LOG_VERSION) ||
        (magic && bom == __builtin_bswap32(MW_LOG_BOM)) ||
        (sound && (get32(h + MW_LOG_HDR_FEATURES) & ~MW_LOG_FEATURES) != 0)) {
      /* Another format (or byte order): refuse it and leave it exactly as it is. */
      set_msg(pzErr, "multiwriter log: %s has a format this version cannot read (%d)", log->path,
              SQLITE_CANTOPEN);
      mw_file_close(log->fd);
      free_log(log);
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
      fresh = 1;
    } else {
      log->base = get64(h + MW_LOG_HDR_BASE);
      log->salt = get64(h + MW_LOG_HDR_SALT);
      log->features = get32(h + MW_LOG_HDR_FEATURES);
    }
  }
  if (rc == SQLITE_OK && !follow) rc = mw_file_delete(log->tmp_path, 0); /* a compaction's leftover */
  /* A spare left by the last life (or a crash between its link and the rename, when it
  ** names this very file): never reused across opens. */
  if (rc == SQLITE_OK && !follow) log->recycle = mw_file_delete(log->spare_path, 0) == SQLITE_OK;
  uint64_t end = MW_LOG_HDR_SIZE;
  if (rc == SQLITE_OK && follow) {
    /* Exactly the records other processes published, up to follow_end; the bytes after
    ** it may be a record being written right now: never cut, never read. */
    log->last_epoch = log->base;
    uint64_t limit = opts->follow_end - log->shift;
    if (opts->follow_end < log->shift || limit > size || limit < MW_LOG_HDR_SIZE)
      rc = SQLITE_CORRUPT;
    if (rc == SQLITE_OK) rc = scan_records(log, limit, replay, ctx, &end);
    if (rc == SQLITE_OK && end != limit) rc = SQLITE_CORRUPT;
    for (size_t i = 0; i < log->nidx; i++) log->idx[i].off += log->shift;
  } else if (rc == SQLITE_OK && fresh) {
    log->base = 1;
    log->salt = new_salt(log);
    rc = write_fresh(log);
  } else if (rc == SQLITE_OK) {
    log->last_epoch = log->base;
    rc = scan_records(log, size, replay, ctx, &end);
    if (rc == SQLITE_OK && size > end) {
      /* Cut the torn or damaged tail (and any preallocated zeros) durably, so that
      ** stale bytes behind the records written from now on can never be replayed. */
      rc = mw_file_truncate(log->fd, end, 0);
      if (rc == SQLITE_OK) rc = mw_file_sync(log->fd, 0);
      if (rc == SQLITE_OK) rc = mw_dir_sync(log->path, 0);
    } else if (rc == SQLITE_OK && log->last_epoch > log->base) {
      /* The replayed records may have been written but never synced (a process that
      ** ran with synchronous=NORMAL and died): make them durable before anything,
      ** such as a compaction of the database file, comes to depend on them. */
      rc = mw_file_sync(log->fd, 0);
    }
  }
  if (rc != SQLITE_OK) {
    if (pzErr && !*pzErr) set_msg(pzErr, "multiwriter log: recovery of %s failed (%d)", log->path, rc);
    mw_file_close(log->fd);
    free_log(log);
    return rc;
  }
  if (fresh) log->last_epoch = log->base;
  end += log->shift;
  log->assigned_end = log->written_end = log->synced_end = log->alloc_end = end;
  if (log->shared) {
    /* Records extend the file: the room is never zeroed ahead (log.h). */
    log->alloc_end = UINT64_MAX / 4;
    *pBase = log->base;
    *pLast = log->last_epoch;
    *out = log;
    return SQLITE_OK;
  }
  /* Without the grower (no thread to be had) committers grow ahead themselves. It
  ** only acts when a reservation asks: the file stays as recovery left it until the
  ** first commit (which grows the first step itself). */
  log->grower_running = mw_bg_add(&log->grower, grower_step, log, 0) == SQLITE_OK;
  *pBase = log->base;
  *pLast = log->last_epoch;
  *out = log;
  return SQLITE_OK;
}

/* ---- the commit path ------------------------------------------------------------------ */

uint64_t mw_log_record_size(const mw_log *log, int npages) {
  return rec_size(log->page_size, npages < 0 ? 0 : (uint64_t)npages);
}

/* Grows the file so that the logical offset `need` fits: by whole steps (an empty log's
** first room by a quarter), so that most syncs have no size change to write; when the
** disk cannot give a whole step and exact_ok is set, just up to need. With mu held and
** no growth in progress; drops mu meanwhile (reservations that fit the room go on). A
** failed sync of the new room is sticky: it may have dropped records written but not
** yet synced; anything else (SQLITE_FULL first) is only returned. */
static int grow_locked(mw_log *log, uint64_t need, int exact_ok) {
  uint64_t need_phys = need - log->shift;
  uint64_t from = log->alloc_end - log->shift; /* no record is written past it */
  /* The first room of an empty log is a quarter step: a process that opens, commits
  ** once and closes zeroes 1 MiB, not 4, on its commit's path; the grower, woken by
  ** that commit, adds the lead behind it (and stops when the log closes). */
  uint64_t unit = from <= MW_LOG_HDR_SIZE ? log->step / 4 : log->step;
  uint64_t target = round_up(need_phys, unit);
  mw_fd fd = log->fd;
  log->growing = 1;
  mw_mutex_unlock(&log->mu);
  int rc = grow_file(log, fd, from, target, 1);
  if (rc == SQLITE_FULL && exact_ok && target > need_phys) {
    target = need_phys;
    rc = grow_file(log, fd, from, target, 1);
  }
  int sync_rc = SQLITE_OK;
  if (rc == SQLITE_OK && log->sync_mode != 0) sync_rc = mw_file_datasync(fd, log->full_fsync, 0);
  mw_mutex_lock(&log->mu);
  log->growing = 0;
  wake_all(log);
  if (sync_rc != SQLITE_OK) set_error(log, sync_rc);
  if (rc == SQLITE_OK) rc = sync_rc;
  /* No compaction switched the file meanwhile (it waits for !growing). */
  if (rc == SQLITE_OK && target + log->shift > log->alloc_end) log->alloc_end = target + log->shift;
  return rc;
}

/* Less than quarters/4 of a step of room left beyond `need`: time to grow ahead. The
** grower (and mw_log_grow_ahead) act at GROW_LEAD quarters (two steps) and grow until
** that much room is left; a committer, when no grower runs, at a quarter step. The
** lead must cover the time a growth takes: on a loaded machine (issue 10, 2 shared
** cores) writing a step of zeros took 10 ms on average and up to 74 ms, while 16
** writers of one hot row filled a step in about 40 ms. With half a step of lead, about
** 15 reservations in a 3 s run found no room and waited for the growth, and when the
** waiting committer held the hot-spot turn, every writer waited with it. */
#define GROW_LEAD 8
static int room_is_low(const mw_log *log, uint64_t need, uint64_t quarters) {
  return log->alloc_end - need < log->step / 4 * quarters;
}
static uint64_t lead_target(const mw_log *log) {
  return log->assigned_end + log->reserved + log->step / 4 * GROW_LEAD;
}

static uint64_t grower_step(void *arg) {
  mw_log *log = arg;
  mw_mutex_lock(&log->mu);
  /* A failure here is nobody's commit: a reserve that finds no room grows (and
  ** reports SQLITE_FULL) itself; only a failed sync is sticky (in grow_locked). */
  if (log->error == SQLITE_OK && !log->switching && !log->hold_growth && !log->growing &&
      room_is_low(log, log->assigned_end + log->reserved, GROW_LEAD)) {
    (void)grow_locked(log, lead_target(log), 0);
  }
  mw_mutex_unlock(&log->mu);
  return 0; /* until the next reservation that finds the room low wakes it */
}

int mw_log_reserve(mw_log *log, uint64_t bytes) {
  mw_mutex_lock(&log->mu);
  int rc;
  for (;;) {
    rc = log->error;
    if (rc != SQLITE_OK) break;
    if (log->switching) {
      mw_cond_wait(&log->cv, &log->mu);
      continue;
    }
    rc = ensure_idx(log, 1);
    if (rc != SQLITE_OK) break;
    uint64_t need = log->assigned_end + log->reserved + bytes;
    if (need <= log->alloc_end) {
      log->reserved += bytes;
      log->nres++;
      /* Grow ahead while there is still room, so that the committers behind this one
      ** do not wait for the zeros and their sync: the grower does it; without one,
      ** this committer (the reservation is already held, so a failure here, but a
      ** sticky one, is not this commit's). */
      if (!log->growing && room_is_low(log, need, GROW_LEAD) && log->grower_running) {
        mw_bg_wake(&log->grower, 0); /* background.c's lock is a leaf: safe under mu */
      } else if (!log->growing && !log->hold_growth && room_is_low(log, need, 1)) {
        log->room_inline++;
        (void)grow_locked(log, log->alloc_end + 1, 0);
      }
      rc = log->error;
      if (rc != SQLITE_OK) {
        log->reserved -= bytes;
        log->nres--;
      }
      break;
    }
    if (log->growing || log->hold_growth) {
      mw_cond_wait(&log->cv, &log->mu);
      continue;
    }
    log->room_inline++;
    rc = grow_locked(log, need, 1);
    if (rc != SQLITE_OK) break; /* not sticky unless the sync failed: nothing was assigned */
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

int mw_log_grow_ahead(mw_log *log) {
  mw_mutex_lock(&log->mu);
  int rc;
  for (;;) {
    rc = log->error;
    if (rc != SQLITE_OK) break;
    if (log->switching || log->hold_growth || log->growing) { /* wait, then look again */
      mw_cond_wait(&log->cv, &log->mu);
      continue;
    }
    if (room_is_low(log, log->assigned_end + log->reserved, GROW_LEAD))
      rc = grow_locked(log, lead_target(log), 0);
    break;
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

void mw_log_unreserve(mw_log *log, uint64_t bytes) {
  mw_mutex_lock(&log->mu);
  log->reserved = bytes > log->reserved ? 0 : log->reserved - bytes;
  if (log->nres) log->nres--;
  wake_all(log);
  mw_mutex_unlock(&log->mu);
}

uint64_t mw_log_assign(mw_log *log, uint64_t epoch, uint64_t bytes) {
  mw_mutex_lock(&log->mu);
  uint64_t off = log->assigned_end;
  /* Recovery replays consecutive epochs only: a gap would silently drop every later
  ** commit at the next open, so it poisons the log instead. */
  if (epoch != log->last_epoch + 1 || bytes > log->reserved) set_error(log, SQLITE_MISUSE);
  if (ensure_idx(log, 1) != SQLITE_OK) set_error(log, SQLITE_NOMEM);
  if (log->nidx < log->capidx) {
    log->idx[log->nidx].epoch = epoch;
    log->idx[log->nidx].off = off;
    log->nidx++;
  }
  log->last_epoch = epoch;
  log->assigned_end += bytes;
  log->reserved = bytes > log->reserved ? 0 : log->reserved - bytes;
  if (log->nres) log->nres--;
  mw_mutex_unlock(&log->mu);
  return off;
}

int mw_log_submit(mw_log *log, uint64_t offset, uint64_t epoch, uint32_t db_pages, int npages,
                  const uint32_t *pgnos, const unsigned char *const *images) {
  size_t ps = (size_t)log->page_size;
  size_t len = (size_t)rec_size(log->page_size, npages < 0 ? 0 : (uint64_t)npages);
  mw_staged *s = npages < 0 ? 0 : malloc(sizeof(*s) + len);
  if (!s) {
    mw_mutex_lock(&log->mu);
    /* The offset is taken: without this record nothing after it can be written. */
    set_error(log, npages < 0 ? SQLITE_MISUSE : SQLITE_NOMEM);
    int rc = log->error;
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  s->next = 0;
  s->off = offset;
  s->len = len;
  s->buf = (unsigned char *)(s + 1);
  unsigned char *h = s->buf;
  put32(h + MW_REC_OFF_MAGIC, MW_REC_MAGIC);
  put32(h + MW_REC_NPAGES, (uint32_t)npages);
  put64(h + MW_REC_EPOCH, epoch);
  put32(h + MW_REC_DBPAGES, db_pages);
  put32(h + MW_REC_ZERO, 0);
  unsigned char *body = h + MW_REC_HDR_SIZE;
  for (int i = 0; i < npages; i++) {
    put32(body + body_pgno_at(log, (uint64_t)i), pgnos[i]);
    memcpy(body + body_image_at(log, (uint64_t)npages, (uint64_t)i), images[i], ps);
  }
  uint64_t ck = mw_log_checksum(mw_log_checksum(log->salt, h, MW_REC_CKSUM), h + MW_REC_HDR_SIZE,
                                len - MW_REC_HDR_SIZE);
  put64(h + MW_REC_CKSUM, ck);

  mw_mutex_lock(&log->mu);
  int rc = log->error;
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&log->mu);
    free(s);
    return rc;
  }
  /* Insert in offset order; records usually arrive nearly in order, at the end. */
  mw_staged **pp = &log->staged;
  while (*pp && (*pp)->off < offset) pp = &(*pp)->next;
  s->next = *pp;
  *pp = s;
  write_ready(log, offset + len);
  rc = log->error;
  mw_mutex_unlock(&log->mu);
  return rc;
}

/* Waits until everything before end_offset is written (durable = 0) or durable,
** taking the writer's or the syncer's part when nobody has it. */
/* Becomes the syncer (none running, no switch: the caller checked): this sync starts
** now, so it covers everything written before. Called and returns with mu held; drops
** it around the system calls. A failure is sticky (set_error). */
static void sync_locked(mw_log *log) {
  uint64_t target = log->written_end;
  mw_fd fd = log->fd, mfd = log->mirror ? log->mfd : MW_FD_INVALID;
  log->syncing = 1;
  log->sync_gen = log->fd_gen;
  log->sync_mirrored = log->mirror;
  log->syncs++;
  mw_mutex_unlock(&log->mu);
  int rc = mw_file_datasync(fd, log->full_fsync, 0);
  /* During a switch: the new file too, since the name may point at it after a
  ** crash (every byte written since the mirror began went to both files). */
  if (rc == SQLITE_OK && mfd != MW_FD_INVALID) rc = mw_file_datasync(mfd, log->full_fsync, 0);
  mw_mutex_lock(&log->mu);
  log->syncing = 0;
  if (rc != SQLITE_OK) set_error(log, rc);
  else if (target > log->synced_end) log->synced_end = target;
  wake_all(log);
}

static int wait_for(mw_log *log, uint64_t end_offset, int durable) {
  mw_mutex_lock(&log->mu);
  int rc;
  for (;;) {
    rc = log->error;
    if (rc != SQLITE_OK) break;
    if (durable ? log->synced_end >= end_offset : log->written_end >= end_offset) break;
    if (!log->writing && !log->switching && log->staged && log->staged->off == log->written_end &&
        log->written_end < end_offset) {
      write_ready(log, end_offset);
      continue;
    }
    if (durable && !log->syncing && !log->switching && log->written_end >= end_offset) {
      sync_locked(log);
      continue;
    }
    /* Written, not yet synced: only a sync's end (or one write's end, to elect a
    ** syncer) concerns it. */
    mw_cond_wait(durable && log->written_end >= end_offset ? &log->cv_sync : &log->cv, &log->mu);
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

int mw_log_wait_durable(mw_log *log, uint64_t end_offset) {
  /* Without syncs (synchronous=OFF) a commit still waits for its write, as stock
  ** SQLite returns from COMMIT only after write(): a killed process loses nothing. */
  return wait_for(log, end_offset, log->sync_mode != 0);
}

int mw_log_sync_now(mw_log *log) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  /* One in progress may have started before the caller's reason to sync: wait. */
  while (rc == SQLITE_OK && log->sync_mode != 0 && (log->syncing || log->switching)) {
    mw_cond_wait(&log->cv, &log->mu);
    rc = log->error;
  }
  if (rc == SQLITE_OK && log->sync_mode != 0) {
    sync_locked(log);
    rc = log->error;
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

void mw_log_note_durable(mw_log *log, uint64_t end) {
  mw_mutex_lock(&log->mu);
  if (end > log->written_end) end = log->written_end;
  if (log->error == SQLITE_OK && end > log->synced_end) {
    log->synced_end = end;
    wake_all(log);
  }
  mw_mutex_unlock(&log->mu);
}

uint64_t mw_log_durable_end(mw_log *log) {
  mw_mutex_lock(&log->mu);
  uint64_t end = log->error == SQLITE_OK && log->sync_mode != 0 ? log->synced_end : 0;
  mw_mutex_unlock(&log->mu);
  return end;
}

int mw_log_wait_written(mw_log *log, uint64_t end_offset) {
  return wait_for(log, end_offset, 0);
}

/* ---- compaction ------------------------------------------------------------------------ */

/* Copies the logical range [from, to) of the current log to physical offset dst of fd. */
static int copy_range(mw_fd src, uint64_t shift, mw_fd dst_fd, uint64_t dst, uint64_t from,
                      uint64_t to, unsigned char *buf) {
  while (from < to) {
    size_t n = to - from < MW_LOG_COPY_CHUNK ? (size_t)(to - from) : MW_LOG_COPY_CHUNK;
    int rc = mw_file_pread(src, buf, n, from - shift, 0);
    if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
    if (rc == SQLITE_OK) rc = mw_file_pwrite(dst_fd, buf, n, dst, 0);
    if (rc != SQLITE_OK) return rc;
    from += n;
    dst += n;
  }
  return SQLITE_OK;
}

/* The new file of a switch (at tmp_path, its bytes written) made durable. */
static int sync_new_file(const mw_log *log, mw_fd tfd) {
  int rc = mw_file_sync(tfd, 0);
  if (rc == SQLITE_OK && log->full_fsync) rc = mw_file_datasync(tfd, 1, 0);
  return rc;
}

/* The end of a switch, both kinds, after sync_new_file (rc its result): the file
** replaced given the spare's name (an older spare not taken goes; a process may still
** have it open: its name is all that goes), the new file renamed over the log's name,
** the directory synced (its result in *pDrc). *pRenamed: the name holds the new file.
** No sync for the spare's name: a spare lost in a crash is only not reused. */
static int rename_new_file(mw_log *log, int rc, int *pRenamed, int *pDrc) {
  *pRenamed = 0;
  *pDrc = SQLITE_OK;
  int linked = rc == SQLITE_OK && (log->shared || log->recycle) &&
               mw_file_delete(log->spare_path, 0) == SQLITE_OK &&
               mw_file_link(log->path, log->spare_path, 0) == SQLITE_OK;
  if (linked && log->shared) mw_crash_point("mp_switch_linked"); /* the spare names the log in use */
  if (rc == SQLITE_OK) rc = mw_file_rename(log->tmp_path, log->path, 0);
  if (rc == SQLITE_OK) {
    *pRenamed = 1;
    mw_crash_point("log_switch_renamed");
    *pDrc = mw_dir_sync(log->path, 0);
  } else if (linked && mw_file_delete(log->spare_path, 0) != SQLITE_OK) {
    log->recycle = 0; /* the spare names the log in use: never reuse it (mw_mp=1: spare_is_log) */
  }
  return rc;
}

/* After the rename (mu held): every later write goes to the new file. Without the
** directory sync (drc) a power loss may bring the old log back without the commits
** written from now on: no commit may be acknowledged any more. */
static int adopt_new_file_locked(mw_log *log, mw_fd tfd, uint64_t base, size_t keep,
                                 uint64_t new_shift, uint64_t alloc_end, uint64_t w2, int drc) {
  log->fd = tfd;
  log->shift = new_shift;
  log->base = base;
  log->alloc_end = alloc_end;
  if (w2 > log->synced_end) log->synced_end = w2; /* all of it was synced in the new file */
  memmove(log->idx, log->idx + keep, (log->nidx - keep) * sizeof(*log->idx));
  log->nidx -= keep;
  if (drc != SQLITE_OK) set_error(log, drc);
  return drc;
}

/* The switch of one process (called by switch_log after phase 1, with mu not held;
** returns with mu held): writes and syncs go on in the old file, and follow into the
** new one, while the slow parts run; committers never wait for the switch.
**
** Phase 2: growth held (the old file's room is final), the new file gets at least as
** much room, zeroed. Phase 3: the mirror: from now on every write goes to both files
** and every sync syncs both; once the last write that started before is over, the
** bytes below w2 (written before the mirror) are copied, and the new file is synced:
** it now holds every byte written, durably as far as any sync acknowledged it (what
** the copy holds by this sync, what came later by the committers' syncs of both
** files). Then the rename and the directory sync: whichever file the name points at
** after a crash holds every acknowledged record. Phase 4, the swap: writes and syncs
** starting now use the new file only; those still on the old one are waited for
** before it is closed (the compactor waits, committers do not). */
static int switch_mirrored(mw_log *log, uint64_t base, size_t keep, uint64_t new_shift,
                           uint64_t alloc1, uint64_t w1, mw_fd tfd, unsigned char *buf, int rc) {
  mw_fd old_fd = log->fd;
  uint64_t old_shift = log->shift;
  uint64_t alloc_phys = alloc1, w2 = w1;
  if (rc == SQLITE_OK) {
    mw_mutex_lock(&log->mu);
    log->hold_growth = 1;
    while (log->growing) mw_cond_wait(&log->cv, &log->mu);
    /* No record is written past alloc_end until the swap: the new file covers it. */
    if (log->alloc_end - new_shift > alloc_phys) alloc_phys = log->alloc_end - new_shift;
    rc = log->error;
    mw_mutex_unlock(&log->mu);
  }
  if (rc == SQLITE_OK && alloc_phys > alloc1) rc = grow_file(log, tfd, alloc1, alloc_phys, 0);
  if (rc == SQLITE_OK) {
    mw_mutex_lock(&log->mu);
    log->mfd = tfd;
    log->mshift = new_shift;
    log->mirror = 1;
    while (log->writing && !log->write_mirrored) mw_cond_wait(&log->cv, &log->mu);
    w2 = log->written_end; /* every byte from here on is written to both files */
    rc = log->error;
    mw_mutex_unlock(&log->mu);
  }
  if (rc == SQLITE_OK) mw_crash_point("log_switch_mirror");
  if (rc == SQLITE_OK) rc = copy_range(old_fd, old_shift, tfd, w1 - new_shift, w1, w2, buf);
  free(buf);
  if (rc == SQLITE_OK) rc = sync_new_file(log, tfd);
  int renamed = 0, drc = SQLITE_OK;
  rc = rename_new_file(log, rc, &renamed, &drc);

  mw_mutex_lock(&log->mu);
  if (renamed) {
    rc = adopt_new_file_locked(log, tfd, base, keep, new_shift, alloc_phys + new_shift, w2, drc);
    log->fd_gen++;
  }
  log->mirror = 0;
  log->mfd = MW_FD_INVALID;
  log->hold_growth = 0;
  wake_all(log);
  /* The descriptor to close is still in use by writes and syncs that started before:
  ** the old file's after a rename, the new file's (mirrored ones) otherwise. */
  while ((log->writing && (renamed ? log->write_gen != log->fd_gen : log->write_mirrored)) ||
         (log->syncing && (renamed ? log->sync_gen != log->fd_gen : log->sync_mirrored)))
    mw_cond_wait(&log->cv, &log->mu);
  mw_mutex_unlock(&log->mu);
  if (renamed) {
    mw_file_close(old_fd);
  } else {
    if (tfd != MW_FD_INVALID) mw_file_close(tfd);
    mw_file_delete(log->tmp_path, 0); /* best effort: the next open deletes it too */
  }
  mw_mutex_lock(&log->mu);
  return rc;
}

/* Opens the next switch's new file at tmp_path, empty, or with recycle the spare (the
** file a switch replaced), whose size goes to *pRoom. Its old bytes never replay:
** recovery takes records of consecutive epochs from the base, and every record in the
** spare is older than the records the new file gets (it belongs to this log's life:
** open deletes any spare before the first switch). */
static int open_next_file(mw_log *log, int recycle, mw_fd *pFd, uint64_t *pRoom) {
  *pRoom = 0;
  int rc = mw_file_delete(log->tmp_path, 0);
  int reused = 0;
  if (rc == SQLITE_OK && recycle && mw_file_exists(log->spare_path))
    reused = mw_file_rename(log->spare_path, log->tmp_path, 0) == SQLITE_OK;
  if (rc == SQLITE_OK) rc = mw_file_open(log->tmp_path, 1, pFd, 0);
  if (rc == SQLITE_OK) rc = reused ? mw_file_size(*pFd, pRoom, 0) : mw_file_truncate(*pFd, 0, 0);
  return rc;
}

/* mw_mp=1: the spare names the file at the log's name (a switch that died or failed
** between its link and its rename, or a removal that failed): never to be reused. */
static int spare_is_log(const mw_log *log) {
  mw_file_id a, b;
  if (mw_file_identity(log->spare_path, &a, 0) != SQLITE_OK) return 0; /* none */
  return mw_file_identity(log->path, &b, 0) != SQLITE_OK || mw_file_id_eq(&a, &b);
}

/* Rewrites the log with base epoch `base` and the records after it, and switches to
** it. Called and returns with mu held (and cmp_mu), drops mu while it copies. With
** a hook (mw_mp=1), it runs right before the rename with the new shift, and writes and
** syncs stop for phase 2; without one (and not shared), switch_mirrored does the rest
** and stops nothing. */
static int switch_log(mw_log *log, uint64_t base, mw_log_enter_hook enter, mw_log_switch_hook hook,
                      void *hctx, int spare_ok) {
  /* The first record to keep: the one of epoch base + 1 (or the end). */
  size_t keep = 0;
  while (keep < log->nidx && log->idx[keep].epoch <= base) keep++;
  uint64_t cut = keep < log->nidx ? log->idx[keep].off : log->assigned_end;
  /* Records up to base are visible, hence written; wait for them if they are not. */
  while (log->error == SQLITE_OK && log->written_end < cut) {
    if (!log->writing && !log->switching && log->staged && log->staged->off == log->written_end) {
      write_ready(log, cut);
    } else {
      mw_cond_wait(&log->cv, &log->mu);
    }
  }
  if (log->error != SQLITE_OK) return log->error;
  mw_fd old_fd = log->fd;
  uint64_t old_shift = log->shift;
  uint64_t w1 = log->written_end;
  uint64_t new_shift = cut - MW_LOG_HDR_SIZE;
  uint64_t need1 = log->assigned_end + log->reserved - new_shift;
  uint64_t alloc1 = round_up(need1, log->step);
  /* Room ahead as mw_log_grow_ahead would leave it: the commits after the switch
  ** should not have to grow the new file at once. */
  if (alloc1 - need1 < log->step / 4 * GROW_LEAD) alloc1 = round_up(need1 + log->step / 4 * GROW_LEAD, log->step);
  /* mw_mp=1 grows the room under the publication lock, while every commit of every
  ** process waits (mw_log_room_shared): the new file gets the room the old one used
  ** in its life, zeroed here, where commits go on, so that the next cycle seldom grows
  ** it there. At most room_max and the lead; an idle log keeps a small file. */
  if (log->shared) {
    uint64_t lead = log->step / 4 * GROW_LEAD;
    uint64_t want = round_up(log->assigned_end - old_shift + lead, log->step);
    uint64_t most = round_up(log->room_max + lead, log->step);
    if (want > most) want = most;
    if (want > alloc1) alloc1 = want;
  }
  mw_mutex_unlock(&log->mu);

  /* Phase 1, commits going on: the new file with the new base, the records already
  ** written (bytes that never change once written), and the room for what is reserved
  ** now, zeroed; synced, so that phase 2 has little left to do. */
  int rc = SQLITE_OK;
  mw_fd tfd = MW_FD_INVALID;
  unsigned char *buf = malloc(MW_LOG_COPY_CHUNK);
  if (!buf) rc = SQLITE_NOMEM;
  uint64_t room = 0;
  int reuse = log->shared ? spare_ok && !spare_is_log(log) : log->recycle;
  if (rc == SQLITE_OK) rc = open_next_file(log, reuse, &tfd, &room);
  if (rc == SQLITE_OK) {
    unsigned char h[MW_LOG_HDR_SIZE];
    build_header(h, log->page_size, base, log->salt, log->features); /* records copied as they are */
    rc = mw_file_pwrite(tfd, h, sizeof(h), 0, 0);
  }
  if (rc == SQLITE_OK) rc = copy_range(old_fd, old_shift, tfd, MW_LOG_HDR_SIZE, cut, w1, buf);
  /* A reused file's bytes are room already written: zeros only past them. */
  if (room > alloc1) alloc1 = room;
  uint64_t zero_from = w1 - new_shift > room ? w1 - new_shift : room;
  if (rc == SQLITE_OK && zero_from < alloc1) rc = grow_file(log, tfd, zero_from, alloc1, 0);
  if (rc == SQLITE_OK) rc = mw_file_datasync(tfd, 0, 0);

  if (!hook && !log->shared) return switch_mirrored(log, base, keep, new_shift, alloc1, w1, tfd, buf, rc);

  /* Multi-process mode (the hook): other processes write this log through their own
  ** descriptors, so the copy cannot follow their writes: they are stopped (enter) for
  ** phase 2 only. Phase 2: stop writes, syncs and growth, wait for those in flight;
  ** assignment, staging and reservations that fit go on (they only need logical
  ** offsets). */
  if (rc == SQLITE_OK && enter) rc = enter(hctx);
  mw_mutex_lock(&log->mu);
  log->switching = 1;
  while (log->writing || log->syncing || log->growing || log->reading) mw_cond_wait(&log->cv, &log->mu);
  uint64_t w2 = log->written_end;
  /* Room for everything assigned or reserved so far; reserve waits while switching,
  ** so assigned_end + reserved cannot change until the switch is over. */
  uint64_t alloc_phys = round_up(log->assigned_end + log->reserved - new_shift, log->step);
  if (alloc_phys < alloc1) alloc_phys = alloc1;
  if (rc == SQLITE_OK) rc = log->error;
  mw_mutex_unlock(&log->mu);

  if (rc == SQLITE_OK && alloc_phys > alloc1) rc = grow_file(log, tfd, alloc1, alloc_phys, 0);
  if (rc == SQLITE_OK) rc = copy_range(old_fd, old_shift, tfd, w1 - new_shift, w1, w2, buf);
  free(buf);
  if (rc == SQLITE_OK) rc = sync_new_file(log, tfd);
  if (rc == SQLITE_OK && hook) hook(hctx, new_shift, base, alloc_phys + new_shift);
  int renamed = 0, drc = SQLITE_OK;
  rc = rename_new_file(log, rc, &renamed, &drc);
  if (renamed) {
    mw_file_close(old_fd);
  } else {
    if (tfd != MW_FD_INVALID) mw_file_close(tfd);
    mw_file_delete(log->tmp_path, 0); /* best effort: the next open deletes it too */
  }

  mw_mutex_lock(&log->mu);
  if (renamed)
    rc = adopt_new_file_locked(log, tfd, base, keep, new_shift,
                               log->shared ? UINT64_MAX / 4 : alloc_phys + new_shift, w2, drc);
  log->switching = 0;
  wake_all(log);
  return rc;
}

int mw_log_compacted(mw_log *log, uint64_t base) {
  return mw_log_compacted_hook(log, base, 0, 0, 0, 0);
}

int mw_log_compacted_hook(mw_log *log, uint64_t base, mw_log_enter_hook enter,
                          mw_log_switch_hook hook, void *ctx, int spare_ok) {
  mw_mutex_lock(&log->cmp_mu);
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  if (rc == SQLITE_OK && base > log->base) {
    rc = base > log->last_epoch ? SQLITE_MISUSE : switch_log(log, base, enter, hook, ctx, spare_ok);
  }
  mw_mutex_unlock(&log->mu);
  mw_mutex_unlock(&log->cmp_mu);
  return rc;
}

int mw_log_follow(mw_log *log, uint64_t end, mw_log_follow_fn fn, void *ctx) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  uint64_t off = log->assigned_end, shift = log->shift, expect = log->last_epoch + 1;
  mw_fd fd = log->fd;
  mw_mutex_unlock(&log->mu);
  rec_reader r = { 0 };
  while (rc == SQLITE_OK && off < end) {
    unsigned char h[MW_REC_HDR_SIZE];
    uint64_t len = 0;
    rc = read_page_list(log, fd, &r, off - shift, off, end - off, expect, h, &len);
    /* Published records are whole: one that is not means the log was damaged. */
    if (rc == SQLITE_DONE) rc = SQLITE_CORRUPT;
    if (rc != SQLITE_OK) break;
    rc = fn(ctx, expect, get32(h + MW_REC_DBPAGES), (int)get32(h + MW_REC_NPAGES), r.pgnos, r.ats);
    if (rc != SQLITE_OK) break;
    mw_mutex_lock(&log->mu);
    rc = ensure_idx(log, 1);
    if (rc == SQLITE_OK) {
      log->idx[log->nidx].epoch = expect;
      log->idx[log->nidx].off = off;
      log->nidx++;
      log->last_epoch = expect;
      log->assigned_end = off + len;
      if (log->written_end < log->assigned_end) log->written_end = log->assigned_end;
    } else {
      /* The record was applied: without its entry the log no longer matches. */
      set_error(log, rc);
    }
    mw_mutex_unlock(&log->mu);
    off += len;
    expect++;
  }
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  rec_reader_free(&r);
  return rc;
}

int mw_log_read_image(mw_log *log, uint64_t at, unsigned char *buf) {
  mw_mutex_lock(&log->mu);
  /* Not while a switch replaces the file (the old descriptor is closed meanwhile); a
  ** switch waits for the reads in progress, so the descriptor and shift taken here stay
  ** valid until the read is counted out. The read itself runs without the mutex, so
  ** lazy loads go on in parallel with each other and with commits' bookkeeping. */
  while (log->switching) mw_cond_wait(&log->cv, &log->mu);
  int rc = log->error;
  mw_fd fd = log->fd;
  uint64_t shift = log->shift;
  size_t len = (size_t)log->page_size;
  if (rc == SQLITE_OK && at < shift + MW_LOG_HDR_SIZE) rc = SQLITE_NOTFOUND;
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  log->reading++;
  mw_mutex_unlock(&log->mu);
  rc = mw_file_pread(fd, buf, len, at - shift, 0);
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  mw_mutex_lock(&log->mu);
  if (--log->reading == 0) wake_all(log);
  mw_mutex_unlock(&log->mu);
  return rc;
}

/* Shared room (mw_mp=1): called with mu held and no growth in progress; zeroes and
** syncs the file's bytes [from, to) without the mutex, marked as growing so that a
** switch waits for it, and returns with mu released. */
static int zero_room_release(mw_log *log, mw_fd fd, uint64_t from, uint64_t to) {
  log->growing = 1;
  mw_mutex_unlock(&log->mu);
  int rc = grow_file(log, fd, from, to, 0);
  if (rc == SQLITE_OK) rc = mw_file_datasync(fd, log->full_fsync, 0);
  mw_mutex_lock(&log->mu);
  log->growing = 0;
  wake_all(log);
  mw_mutex_unlock(&log->mu);
  return rc;
}

int mw_log_room_shared(mw_log *log, uint64_t *pAllocEnd) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  uint64_t end = log->assigned_end, have = *pAllocEnd;
  if (have < end) have = end;
  if (rc != SQLITE_OK || log->sync_mode == 0 || log->switching || log->hold_growth || log->growing ||
      have - end >= log->step / 2) {
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  uint64_t shift = log->shift;
  /* An empty log's first room is a quarter step, as in grow_locked: a process that
  ** opens, commits once and closes zeroes 1 MiB under the lock, not two steps (the
  ** next commit finds less than half a step left and claims a step for the grower). */
  uint64_t target = have - shift <= MW_LOG_HDR_SIZE ? round_up(end - shift, log->step / 4)
                                                    : round_up(end - shift + log->step, log->step);
  log->room_inline++;
  rc = zero_room_release(log, log->fd, have - shift, target);
  if (rc == SQLITE_OK) *pAllocEnd = target + shift;
  return rc;
}

uint64_t mw_log_room_target(mw_log *log, uint64_t from) {
  mw_mutex_lock(&log->mu);
  uint64_t shift = log->shift;
  mw_mutex_unlock(&log->mu);
  return round_up(from - shift + log->step, log->step) + shift;
}

uint64_t mw_log_room_step(mw_log *log) { return log->step; }

int mw_log_zero_shared(mw_log *log, uint64_t from, uint64_t to) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  while (rc == SQLITE_OK && (log->growing || log->switching)) {
    mw_cond_wait(&log->cv, &log->mu);
    rc = log->error;
  }
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  return zero_room_release(log, log->fd, from - log->shift, to - log->shift);
}

int mw_log_reopen_shared(mw_log *log, uint64_t shift) {
  mw_fd fd = MW_FD_INVALID;
  int rc = mw_file_open(log->path, 0, &fd, 0);
  if (rc != SQLITE_OK) return rc;
  unsigned char h[MW_LOG_HDR_SIZE];
  rc = mw_file_pread(fd, h, sizeof(h), 0, 0);
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_CORRUPT;
  /* The same log rewritten by a compaction: same salt and page size, a sound header. */
  if (rc == SQLITE_OK &&
      (memcmp(h + MW_LOG_HDR_MAGIC, MW_LOG_MAGIC, 8) != 0 ||
       get32(h + MW_LOG_HDR_VERSION) != MW_LOG_VERSION || get32(h + MW_LOG_HDR_BOM) != MW_LOG_BOM ||
       get64(h + MW_LOG_HDR_CKSUM) != mw_log_checksum(0, h, MW_LOG_HDR_CKSUM) ||
       get32(h + MW_LOG_HDR_PAGE_SIZE) != (uint32_t)log->page_size ||
       get64(h + MW_LOG_HDR_SALT) != log->salt || get32(h + MW_LOG_HDR_FEATURES) != log->features))
    rc = SQLITE_CORRUPT;
  uint64_t base = get64(h + MW_LOG_HDR_BASE);
  mw_mutex_lock(&log->mu);
  if (rc == SQLITE_OK) rc = log->error;
  /* Every record the new file dropped must have been applied here already: its
  ** first record (base + 1) starts at or before this process's end. */
  if (rc == SQLITE_OK && (base > log->last_epoch || base < log->base ||
                          shift + MW_LOG_HDR_SIZE > log->assigned_end))
    rc = SQLITE_CORRUPT;
  if (rc == SQLITE_OK) {
    while (log->switching) mw_cond_wait(&log->cv, &log->mu);
    log->switching = 1;
    while (log->writing || log->syncing || log->growing || log->reading) mw_cond_wait(&log->cv, &log->mu);
    mw_fd old = log->fd;
    log->fd = fd;
    fd = old;
    log->shift = shift;
    log->base = base;
    size_t keep = 0;
    while (keep < log->nidx && log->idx[keep].epoch <= base) keep++;
    memmove(log->idx, log->idx + keep, (log->nidx - keep) * sizeof(*log->idx));
    log->nidx -= keep;
    log->switching = 0;
    wake_all(log);
  }
  mw_mutex_unlock(&log->mu);
  mw_file_close(fd); /* the old file on success, the new one on failure */
  return rc;
}

/* One field of the log read under its mutex (the accessors below). */
static uint64_t read_locked(mw_log *log, const uint64_t *field) {
  mw_mutex_lock(&log->mu);
  uint64_t v = *field;
  mw_mutex_unlock(&log->mu);
  return v;
}

uint64_t mw_log_base(mw_log *log) { return read_locked(log, &log->base); }
uint64_t mw_log_end(mw_log *log) { return read_locked(log, &log->assigned_end); }
uint64_t mw_log_shift(mw_log *log) { return read_locked(log, &log->shift); }
uint64_t mw_log_room_inline(mw_log *log) { return read_locked(log, &log->room_inline); }
uint64_t mw_log_syncs(mw_log *log) { return read_locked(log, &log->syncs); }

/* Whether the log may start again at `base`: its records (if any may be dropped) end
** at base, nothing is reserved or staged. With mu held. */
static int restart_allowed(const mw_log *log, uint64_t base, int drop_records) {
  int records_ok = drop_records ? log->last_epoch == base
                                : log->last_epoch == log->base && log->nidx == 0;
  return records_ok && !log->reserved && !log->nres && !log->staged && base >= log->base;
}

/* Starts the log again with a fresh header for `base` and no record, once nothing is
** being written, synced, grown or read; page_size 0 keeps the page size. drop_records:
** the log may hold records up to base (the database file holds them); else none. */
static int restart_log(mw_log *log, int page_size, uint64_t base, int drop_records) {
  mw_mutex_lock(&log->cmp_mu);
  mw_mutex_lock(&log->mu);
  /* The last close's emptying: no commit follows, a growth in progress stops. */
  int stop = drop_records && restart_allowed(log, base, 1);
  if (stop) __atomic_store_n(&log->stop_growth, 1, __ATOMIC_RELEASE);
  while (log->writing || log->syncing || log->growing || log->reading) mw_cond_wait(&log->cv, &log->mu);
  int rc = log->error;
  if (rc == SQLITE_OK && !restart_allowed(log, base, drop_records)) {
    rc = SQLITE_MISUSE;
    if (stop) __atomic_store_n(&log->stop_growth, 0, __ATOMIC_RELEASE);
  }
  if (rc == SQLITE_OK) {
    int old_ps = log->page_size;
    uint64_t old_base = log->base;
    if (page_size) log->page_size = page_size;
    log->base = base;
    rc = write_fresh(log);
    if (rc != SQLITE_OK) {
      /* The file may be empty or hold the new header only: both open as a fresh log,
      ** but this handle no longer knows its own state. */
      log->page_size = old_ps;
      log->base = old_base;
      set_error(log, rc);
    } else {
      /* The spare holds records before base (or of the old page size): not worth keeping. */
      if (mw_file_delete(log->spare_path, 0) != SQLITE_OK) log->recycle = 0;
      log->last_epoch = base;
      log->nidx = 0;
      log->shift = 0;
      log->assigned_end = log->written_end = log->synced_end = log->alloc_end = MW_LOG_HDR_SIZE;
    }
  }
  wake_all(log);
  mw_mutex_unlock(&log->mu);
  mw_mutex_unlock(&log->cmp_mu);
  return rc;
}

int mw_log_restart(mw_log *log, int page_size, uint64_t base) {
  return restart_log(log, page_size, base, 0);
}

int mw_log_emptied(mw_log *log, uint64_t base) {
  return restart_log(log, 0, base, 1);
}

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
      write_ready(log, UINT64_MAX);
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
