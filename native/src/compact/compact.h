/*
** compact.h: the compactor (compact.c), a job of the shared background workers.
*/
#ifndef MW_COMPACT_H
#define MW_COMPACT_H

#include "engine.h"

/* A commit acknowledged once written (synchronous=NORMAL or OFF) is durable within this
** many milliseconds and the time of a sync: the compactor's tick syncs the log up to
** where it ended at the tick before (two ticks; with mw_mp=1, any live process's tick,
** for the records of every process). */
#define MW_UNSYNCED_MAX_MS 400

/* What the compactor asks of the layer above it (core/db.c, which owns the lanes, their
** snapshots and the file's mark): a methods table set in db->host before the compactor
** starts, so that compact.c calls nothing above its own layer by name. Each runs under
** db->mu where its name says "locked". */
struct mw_compact_host {
  /* Releases the transactions whose threads all ended (they pin nothing from then on);
  ** returns how many. */
  int (*release_orphans_locked)(mw_db *db);
  /* The oldest snapshot now (lanes, the compaction under way, the replica stream's last
  ** epoch written): how far pruning may go. */
  uint64_t (*oldest_now_locked)(mw_db *db);
  /* Takes the file's mark off once the log holds nothing the file lacks (a checkpoint
  ** reached its target); SQLITE_OK when it stays because a commit came in between. */
  int (*unmark)(mw_db *db);
};

int mw_compactor_start(mw_db *db);
void mw_compactor_stop(mw_db *db);
/* Compacts up to min(visible, oldest snapshot); how: MW_COMPACT_TICK (or
** MW_COMPACT_CHECKPOINT: the same, with the replica stream brought up to date first), or up to visible
** whatever the snapshots (MW_COMPACT_ALL: a reformat, the log goes on; MW_COMPACT_LAST:
** the last close, the log is emptied in place and removed next). Caller must not hold
** db->mu. */
enum { MW_COMPACT_TICK = 0, MW_COMPACT_ALL = 1, MW_COMPACT_LAST = 2, MW_COMPACT_CHECKPOINT = 3 };
int mw_compact_now(mw_db *db, int how);
void mw_compact_kick(mw_db *db);
/* PRAGMA wal_checkpoint, sqlite3_wal_checkpoint_v2 (lane.c): the compactor's job makes
** the file hold every commit visible (mw_mp=1: published by any process) before the
** call, synced, and takes the file's mark off when the log then holds nothing the file
** lacks (db.c). *pBusy: a snapshot still open (mw_mp=1: of any process; patient: after
** waiting up to MW_CKPT_WAIT_MS for the others' floors, which follow their ticks) held
** the file back. Waits for the run; the caller must not hold db->mu. */
#define MW_CKPT_WAIT_MS 1000
int mw_compact_checkpoint(mw_db *db, int patient, int *pBusy);
/* After a commit became visible (under db->mu): sets *pWake when the compactor is
** idle and now has work; the caller then calls mw_compact_wake without db->mu. */
void mw_compact_dirty_locked(mw_db *db, int *pWake);
void mw_compact_wake(mw_db *db);

#endif /* MW_COMPACT_H */
