/*
** log_private.h: what the files of the log share (log.c, log_group.c, log_switch.c,
** log_shared.c) and nobody else may use: the state of a log, its tunables, the byte
** helpers of the record format, and the helpers one file defines for another (each
** with the mw_log_ prefix, declared here only). log.h is the log's interface.
**
** Owns: the layout of struct mw_log. Never touches: anything outside the log.
*/
#ifndef MW_LOG_PRIVATE_H
#define MW_LOG_PRIVATE_H

#include "mw_internal.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "platform/background.h"

#include <string.h>

#define MW_LOG_DEFAULT_STEP (4u * 1024u * 1024u)
/* The most room a switch of a shared log zeroes ahead (switch_log) when the options
** give none: the default mw_log_max_mb. */
#define SHARED_ROOM_MAX ((uint64_t)64 << 20)
#define MW_LOG_MAX_IOV 256          /* records per pwritev */
#define MW_LOG_SPARES 4             /* written records' buffers kept for the next ones */
#define MW_LOG_COPY_CHUNK (1u << 20) /* compaction copies in chunks of this size */

/* One submitted record waiting to be written: the exact bytes of the record. */
typedef struct mw_staged {
  struct mw_staged *next;
  uint64_t off;  /* logical offset */
  size_t len;
  size_t cap;    /* room after the struct (len or more: a kept buffer, log_group.c) */
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
  uint32_t version;   /* the header's format version: records carry flags from 2 on */
  uint64_t stream_txid; /* the replica stream's TXID of the base epoch (0: none) */

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
  uint64_t write_seq;    /* writes ended (atomic: read without mu by a committer that
                            spins briefly for a write in progress, log_group.c) */
  uint64_t write_spin_hits; /* such spins that saw the write end (under mu; tests) */
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
  mw_staged *spare[MW_LOG_SPARES]; /* written, kept for the next records: taken and given
                                      back by atomic exchange, not under mu (log_group.c) */
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

/* Less than quarters/4 of a step of room left beyond `need`: time to grow ahead. The
** grower (and mw_log_grow_ahead) act at GROW_LEAD quarters (two steps) and grow until
** that much room is left; a committer, when no grower runs, at a quarter step. The
** lead must cover the time a growth takes: on a loaded machine (issue 10, 2 shared
** cores) writing a step of zeros took 10 ms on average and up to 74 ms, while 16
** writers of one hot row filled a step in about 40 ms. With half a step of lead, about
** 15 reservations in a 3 s run found no room and waited for the growth, and when the
** waiting committer held the hot-spot turn, every writer waited with it. */
#define GROW_LEAD 8

/* ---- byte helpers of the record format ----------------------------------------- */

static inline void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static inline uint64_t rec_size(int page_size, uint64_t npages) {
  return MW_REC_HDR_SIZE + npages * (4u + (uint64_t)page_size);
}

static inline uint64_t round_up(uint64_t v, uint64_t step) { return (v + step - 1) / step * step; }

static inline void wake_all(mw_log *log) {
  mw_cond_broadcast(&log->cv);
  mw_cond_broadcast(&log->cv_sync);
}

static inline void set_error(mw_log *log, int rc) {
  if (log->error == SQLITE_OK) log->error = rc;
  wake_all(log);
}

/* ---- defined in one file of the log, used by another ----------------------------- */

/* log.c: the header of a log (docs/format.md) into h. */
void mw_log_build_header(unsigned char *h, int page_size, uint64_t base, uint64_t salt,
                         uint32_t features, uint64_t txid);
/* log.c: the stream TXID of epoch `base` (for a new file's header; 0: no stream); mu
** held. */
uint64_t mw_log_txid_at(const mw_log *log, uint64_t base);
/* log.c: writes a fresh header (log->base, log->salt, log->page_size, and every
** feature of this version) over an empty or record-less file and makes it durable. */
int mw_log_write_fresh(mw_log *log);
/* log.c: the bytes of a record (docs/format.md, "Record"): len bytes (its size,
** mw_log_record_size) into buf. */
void mw_log_encode_record(const mw_log *log, unsigned char *buf, size_t len, uint64_t epoch,
                          uint32_t db_pages, uint32_t flags, int npages,
                          const uint32_t *pgnos, const unsigned char *const *images);
/* log.c: index capacity for every record that may still be assigned; with mu held. */
int mw_log_ensure_idx(mw_log *log, size_t extra);

/* log.c: buffers for reading records, each grown to the largest record its caller read:
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
void mw_log_rec_reader_free(rec_reader *r);
/* log.c: the page list of the published record at logical offset `off` (physical
** `phys`): its page numbers into r->pgnos and the logical offsets of its images into
** r->ats, without reading the images or checking the checksum (mw_log_follow). */
int mw_log_read_page_list(mw_log *log, mw_fd fd, rec_reader *r, uint64_t phys, uint64_t off,
                          uint64_t room, uint64_t expect, unsigned char h[MW_REC_HDR_SIZE],
                          uint64_t *pLen);

/* log_group.c: makes the file at least `target` bytes long with [from, target)
** reserved on disk (written with zeros when syncs are on); see there. */
int mw_log_grow_file(const mw_log *log, mw_fd fd, uint64_t from, uint64_t target, int stoppable);
/* log_group.c: writes the contiguous prefix of staged records while no one else
** writes, until everything before `until` is written. Called and returns with mu held. */
void mw_log_write_ready(mw_log *log, uint64_t until);
/* log_group.c: frees the written records' buffers kept for the next ones (at close). */
void mw_log_free_spares(mw_log *log);
/* log_group.c: the grower's step (a job of the shared background workers). */
uint64_t mw_log_grower_step(void *arg);

#endif /* MW_LOG_PRIVATE_H */
