/*
** log.h: the durable commit log "<db>-mw" of one database, with group commit and
** recovery. docs/format.md describes the bytes.
**
** Owns: the log file, its header, its records, the group-commit writer and syncer,
** the recovery scan, and the switch to a shorter log after a compaction.
** Never touches: the database file, the page store, SQLite.
**
** The commit path calls, in this order (core/commit.c):
**   mw_log_reserve       outside every lock: room in the file for the record, so that
**                        a full disk fails with SQLITE_FULL before anything is assigned;
**   mw_log_assign        under the caller's publication lock, in epoch order: the
**                        record's offset (epoch order = log order);
**   mw_log_submit        outside the lock: the record goes to the staging area; the
**                        group writer writes the contiguous prefix of finished records
**                        with one pwritev while the syncer syncs the previous group;
**   mw_log_wait_durable  returns when a sync that began after the record was written
**                        has finished (sync_mode 0: once the record is written).
** A record that was reserved but not assigned is given back with mw_log_unreserve.
** A record that was assigned must be submitted (an empty one, if the commit failed
** after assign, is not possible: assign only after validation succeeded); if it cannot
** be, call mw_log_fail, or every commit behind it waits forever.
**
** Threads: every call may be made from any thread at the same time as the others,
** except mw_log_open and mw_log_close (no other call may run on the log then).
** mw_log_assign must be serialised by the caller (its publication lock); it never does
** I/O and never waits. Every submitter must wait (wait_durable or wait_written): the
** committers share the writing, and a staged record is written by its own submitter if
** nobody else did. mw_log_compacted must not be called while holding a lock that a
** committer needs between assign and its wait.
**
** Errors: SQLITE_FULL from mw_log_reserve (no room on disk) concerns that commit only;
** the next reserve tries again. A failed write or sync of the log, a failed submit, an
** epoch out of order, mw_log_fail, or a failed directory sync after a compaction's
** rename is sticky: every later reserve, submit, wait and compaction fails with it, and
** only a reopen (recovery) makes the log usable again. A failed compaction before its
** rename is not sticky: the old log stays in use.
*/
#ifndef MW_LOG_H
#define MW_LOG_H

#include "mw_internal.h"

typedef struct mw_log mw_log;

typedef struct mw_log_options {
  int page_size;        /* bytes per page image in records */
  int sync_mode;        /* 0 = no sync (synchronous=OFF), 1 = data sync per group */
  int full_fsync;       /* F_FULLFSYNC on macOS (mw_fullfsync=1) */
  uint64_t prealloc_step; /* bytes to preallocate at a time (0 = default 4 MiB) */
  /* Multi-process mode (mp.c): other processes append to the same file. No grower
  ** and no preallocation ahead of the records (a process that zeroed room past its
  ** own end could erase another's records): room is added only by the holder of the
  ** publication lock (mw_log_room_shared) and by a switch, for its new file, up to
  ** room_max (0: 64 MiB) plus two steps. With follow_end != 0 the open
  ** neither creates, cuts nor syncs anything: it replays exactly the records that end
  ** at the logical offset follow_end (SQLITE_CORRUPT otherwise), with logical offsets
  ** = physical + shift, so that every process of the file has the same offsets. */
  int shared;
  uint64_t room_max;
  uint64_t follow_end;
  uint64_t shift;
  /* A new log's header: the replica stream's TXID of its base epoch (0: no stream). */
  uint64_t stream_txid;
} mw_log_options;

/* Called by recovery for every valid record, in epoch order. pgnos[i] is the page
** number of images + i * page_size. Return SQLITE_OK to go on. */
typedef int (*mw_log_replay_fn)(void *ctx, uint64_t epoch, uint32_t db_pages, int npages,
                                const uint32_t *pgnos, const unsigned char *images);

/* Opens "<db_path>-mw", creating it (base epoch 1) when missing, and replays the
** longest valid run of records with consecutive epochs after the base epoch; a torn
** or damaged tail is cut durably. Returns SQLITE_CORRUPT for a damaged header with
** records behind it, SQLITE_CANTOPEN (file left untouched) for another format version
** or unknown feature bit, or an I/O error. *pzErr receives a message (sqlite3_malloc)
** on failure. On success *pBase is the base epoch and *pLast the last replayed epoch
** (== *pBase when the log holds no record). */
int mw_log_open(const char *db_path, const mw_log_options *opts, mw_log_replay_fn replay,
                void *ctx, mw_log **out, uint64_t *pBase, uint64_t *pLast, char **pzErr);

/* Bytes a record of npages pages takes in the log. */
uint64_t mw_log_record_size(const mw_log *log, int npages);

/* Ensures room for a record of `bytes` bytes beyond every reservation already held;
** SQLITE_FULL when the disk has none (nothing is assigned then). Space comes back
** with mw_log_unreserve or is consumed by mw_log_assign. */
int mw_log_reserve(mw_log *log, uint64_t bytes);
void mw_log_unreserve(mw_log *log, uint64_t bytes);

/* Preallocates whole steps now when less than two steps of room are left (after
** waiting for a growth or compaction switch in progress): on return there are at least
** two steps of room, or an error. The log's own grower thread already does this when
** a reservation leaves less than two steps, so no commit pays for it; this call is for tests and
** for callers that want the room before a burst. SQLITE_FULL when the disk has no room
** (not sticky). Added by the log. */
int mw_log_grow_ahead(mw_log *log);

/* Assigns the log offset of the record of `epoch` (bytes as reserved). Must be
** called in strictly increasing epoch order, under the caller's publication lock.
** Epochs must be consecutive (last + 1, starting after *pLast of the open): recovery
** replays consecutive epochs only, so a gap poisons the log (sticky SQLITE_MISUSE).
** Offsets are logical: they keep growing across compactions. */
uint64_t mw_log_assign(mw_log *log, uint64_t epoch, uint64_t bytes);

/* Writes the record at its assigned offset (through the group writer). The images
** are copied; the call returns once the record is staged or written. flags:
** MW_REC_F_* of log_format.h (how the commit is acknowledged; dropped in a version-1
** file). */
int mw_log_submit(mw_log *log, uint64_t offset, uint64_t epoch, uint32_t db_pages,
                  uint32_t flags, int npages, const uint32_t *pgnos,
                  const unsigned char *const *images);

/* Poisons the log with rc (the sticky error): every later reserve, submit, wait and
** compaction fails with it, and the threads waiting now wake up and fail. For a record
** that was assigned but cannot be submitted: without it nothing after its offset could
** ever be written, and the waits behind it would never return. Added by the log. */
void mw_log_fail(mw_log *log, int rc);

/* Waits until the record that ends at `end_offset` is durable: a data sync that began
** after the record was written has finished (with sync_mode 0: the record is written).
** The waiting thread itself writes and syncs when nobody else is doing it. Returns the
** error of the write or sync that failed; once one failed, every later wait fails too. */
int mw_log_wait_durable(mw_log *log, uint64_t end_offset);

/* Multi-process mode's group sync (mp.c): sync_now starts a data sync after the call
** began (after one in progress, and after a switch) and returns once it finished: it
** covers every byte written to the file before the call, whoever wrote it. With
** sync_mode 0 it does nothing. note_durable: another process's such sync covered every
** byte before `end` (at most what this log has written); waits for it return. */
int mw_log_sync_now(mw_log *log);
void mw_log_note_durable(mw_log *log, uint64_t end);

/* The end of the durable prefix: every record that ends at or before it is synced. 0
** after an error, and with sync_mode 0 (no syncs). Added by issue 10: the first
** committer that sees a group sync finish makes the whole group visible. */
uint64_t mw_log_durable_end(mw_log *log);
/* Both ends at once, under one lock: *pSynced as mw_log_durable_end, *pWritten the end
** of the written prefix (every record before it is in the file, perhaps not synced; 0
** after an error). Issue 35: a record acknowledged once written (synchronous below
** FULL) is ready at *pWritten, so that the first committer back from a group write
** makes the whole group visible. */
void mw_log_ack_ends(mw_log *log, uint64_t *pSynced, uint64_t *pWritten);

/* Waits until every record before end_offset is written to the file (not synced): for
** making a commit visible before its sync, if the engine offers that. The log is a
** prefix: once a wait for E succeeded, every record that ends at or before E is written
** (durable, for mw_log_wait_durable). Same errors as mw_log_wait_durable. Added by the
** log. */
int mw_log_wait_written(mw_log *log, uint64_t end_offset);

/* After the compactor wrote every page up to epoch `base` into the database file and
** synced it: makes `base` the log's base epoch durably and drops the records <= base
** (the log is rewritten to hold only the newer records, switched atomically; a crash
** at any point leaves a log that replays to the same state). Records after base are
** copied while commits go on; for the switch itself writes, syncs and growth of the
** log pause (assignment, staging and reservations that fit do not). SQLITE_MISUSE when
** base is past the last assigned epoch; a base at or below the current one is a no-op.
** One compaction at a time (callers are serialised). */
int mw_log_compacted(mw_log *log, uint64_t base);
/* The same for mw_mp=1: enter(ctx) runs after the first copy (the records written so
** far, copied while commits go on) and before the rest is copied (mp.c takes the
** publication lock there: no other process appends until the switch is done; an error
** gives the switch up); hook(ctx, new_shift, base, room_end) right before the new file
** is renamed over the old one (mp.c announces the switch to the other processes there);
** room_end: the logical end of the new file's zeroed room. spare_ok: no process can
** still read the file the last switch replaced (its spare, <db>-mw.spare), so this
** switch may take it as its new file; the file replaced now becomes the spare. */
typedef int (*mw_log_enter_hook)(void *ctx);
typedef void (*mw_log_switch_hook)(void *ctx, uint64_t new_shift, uint64_t base, uint64_t room_end);
int mw_log_compacted_hook(mw_log *log, uint64_t base, mw_log_enter_hook enter,
                          mw_log_switch_hook hook, void *ctx, int spare_ok);
/* Multi-process mode: another process switched the log (a compaction): opens the file
** now at the name, whose logical offsets are `shift` + physical, and goes on with it
** (writes and syncs pause meanwhile; the caller serialises it with mw_log_follow and
** with its own commits). SQLITE_CORRUPT when the file is not this log (salt, page size)
** or dropped a record this log has not applied; then the old file stays in use. */
int mw_log_reopen_shared(mw_log *log, uint64_t shift);
/* The base epoch of the file in use (the database file holds the state at it). */
uint64_t mw_log_base(mw_log *log);

/* The replica stream (replica/stream.c): its TXID of the base epoch, kept in the log's
** header (0: no stream), as recovered or as the options gave a new log; set changes it
** for every header written from then on (the next switch's). Epoch e > base has TXID
** stream_txid + (e - base). */
uint64_t mw_log_stream_txid(mw_log *log);
void mw_log_set_stream_txid(mw_log *log, uint64_t txid);

/* A record of another process (mw_log_follow): its flags (MW_REC_F_*), its page
** numbers and, for each, the logical offset of its image in the log
** (mw_log_read_image reads it when needed). */
typedef int (*mw_log_follow_fn)(void *ctx, uint64_t epoch, uint32_t db_pages, uint32_t flags,
                                int npages, const uint32_t *pgnos, const uint64_t *ats);
/* Multi-process mode: reads the page lists of the records that other processes
** appended after this log's end, up to the logical offset `end` (complete records,
** published by their writers: their checksums are not verified again, recovery does),
** passes each to fn and takes it as assigned and written. Caller serialises it with
** its own assignments (mp.c). SQLITE_CORRUPT when the records do not end exactly at
** `end`. */
int mw_log_follow(mw_log *log, uint64_t end, mw_log_follow_fn fn, void *ctx);
/* Reads one page image at logical offset `at` (given by mw_log_follow) into buf.
** SQLITE_NOTFOUND when the file in use no longer holds it: a compaction dropped the
** records before its base, and the database file holds that page as of then. Multi-
** process mode only: its switches (compaction's phase 2, mw_log_reopen_shared) wait
** for reads in progress; the single-process mirrored switch does not. Reads run in
** parallel, without the log's mutex. */
int mw_log_read_image(mw_log *log, uint64_t at, unsigned char *buf);
/* Reads, in epoch order, the page lists of the records after epoch `after` that lie in
** the durable prefix (synced; nothing a crash could take back: up to durable_end, or 0
** for this log's own durable end; mw_mp=1 gives the shared one), until about max_bytes of
** records were read: `lists` gets each (as mw_log_follow's callback: the logical offset
** of each image); then `images` (if any) runs, and reads images with
** mw_log_view_image(v, ...), while no compaction can switch the file. *pLast: the last epoch
** passed to `lists` (`after` when none). SQLITE_NOTFOUND when `after` is below the base
** (compacted away); SQLITE_CORRUPT when a durable record is not whole. A compaction
** waits for the call to end. */
typedef struct mw_log_view {
  mw_fd fd;
  uint64_t shift;
  int page_size;
} mw_log_view;
int mw_log_read_durable(mw_log *log, uint64_t after, uint64_t durable_end, uint64_t max_bytes,
                        mw_log_follow_fn lists, int (*images)(void *ctx, const mw_log_view *v),
                        void *ctx, uint64_t *pLast);
int mw_log_view_image(const mw_log_view *v, uint64_t at, unsigned char *buf);
/* Multi-process mode, for the holder of the publication lock only (nobody writes past
** the assigned end meanwhile): when less than half a step of zeroed room is left past
** the assigned end, adds a step (zeros, synced, as a single-process log grows) so that
** syncs of records do not also write the file's size. *pAllocEnd: the logical end of
** the room (shared by the processes), raised on success. Not sticky: without room,
** records extend the file. */
int mw_log_room_shared(mw_log *log, uint64_t *pAllocEnd);
/* mw_mp=1, room added off the publication lock (mp.c): the end of the step that
** follows logical offset `from` (where room added from there would end), and the
** zeroing itself: the file's bytes from logical offset `from` to `to`, which no record
** reaches meanwhile (the caller's claim), written as zeros and synced. A switch of
** this log waits for it. */
uint64_t mw_log_room_target(mw_log *log, uint64_t from);
int mw_log_zero_shared(mw_log *log, uint64_t from, uint64_t to);
uint64_t mw_log_room_step(mw_log *log);
/* Logical end of the assigned records, and logical - physical offset of the file. */
uint64_t mw_log_end(mw_log *log);
uint64_t mw_log_shift(mw_log *log);
/* Starts the log again, empty, with another page size and base epoch `base` (the
** reformat of an empty database, db.c): a fresh header, written and synced, and no
** record. Only after a compaction up to the last assigned epoch, with nothing
** reserved, staged or assigned since (the caller keeps every commit out); else
** SQLITE_MISUSE and the log is left as it was. A crash during it leaves an empty log
** (of either page size): its open starts it fresh. */
int mw_log_restart(mw_log *log, int page_size, uint64_t base);
/* The last close's compaction (compact.c), instead of mw_log_compacted: every record,
** up to `base`, the last assigned epoch, is in the synced database file; the log
** becomes a fresh header for `base` with no record, in place (no new file, no room:
** the close removes the log next); a growth of room in progress stops. A crash during
** it leaves a log whose replay changes nothing: an empty file, a header alone, or the
** whole old log, whose replay ends at `base`, the state the file already holds.
** SQLITE_MISUSE (the log unchanged) when records past base exist or anything is
** reserved or staged. */
int mw_log_emptied(mw_log *log, uint64_t base);

/* Current size of the log in bytes (what MW_STAT_LOG_BYTES reports). */
uint64_t mw_log_size(mw_log *log);
/* Steps of room a commit zeroed itself on its path, every commit behind it waiting
** (MW_STAT_LOG_ROOM_INLINE): the grower and a switch zero room ahead, off that path. */
uint64_t mw_log_room_inline(mw_log *log);
/* Data syncs of the log for commits (group syncs, the group sync across processes'
** leads): MW_STAT_LOG_SYNCS. */
uint64_t mw_log_syncs(mw_log *log);

/* Closes the log: writes what was submitted and not yet written (no sync), waits for
** writes and syncs in flight. With remove set (the last close after a full compaction)
** the file is deleted durably (unlink, then a sync of the directory). */
int mw_log_close(mw_log *log, int remove);
/* mw_log_close without freeing the log (the close of a database at process exit, which
** other threads may still reach until the end): the calls that only read counters stay
** valid; nothing may be written through it any more. */
int mw_log_shut(mw_log *log, int remove);

#endif /* MW_LOG_H */
