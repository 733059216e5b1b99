/*
** mp.h: multi-process mode (mp.c, mw_mp=1; docs/design/processes.md).
*/
#ifndef MW_MP_H
#define MW_MP_H

#include "engine.h"
#include "durability/log.h"

/* mp.c: multi-process mode (mw_mp=1). Called only when db->mp is set.
**   open (db.c, under the registry lock): attach (the join lock is held from here),
**   log options, joined (slot taken, join lock released); free in db_free;
**   last close: leave (join lock; *pAlone: no other process alive, everything applied
**   then), left (alone: the shared file removed, the database file unlocked);
**   process exit (db.c): leave_at_exit, as leave when the join lock is free at once and
**   no other process is alive (*pAlone = 1); else nothing changes (*pAlone = 0);
**   commit (commit.c): commit_begin before validation (publication lock, others'
**   records applied, room for `need` bytes of record), commit_end once the record
**   is written (published when rc is SQLITE_OK; the lock released), durable after
**   this process synced it;
**   make_visible calls mark_locked (under db->mu) with its epoch;
**   snapshots (db.c): refresh before one is taken;
**   compaction (compact.c): compact_begin (SQLITE_OK: alone, join lock held, every
**   record applied) and compact_end. */
#define MW_MP_SLOTS 256        /* processes at most on one database */
int mw_mp_attach(mw_db *db, char **pzErr);
int mw_mp_is_first(mw_db *db);
void mw_mp_log_options(mw_db *db, mw_log_options *lo);
int mw_mp_joined(mw_db *db, char **pzErr);
void mw_mp_free(mw_db *db);
int mw_mp_leave(mw_db *db, int *pAlone);
int mw_mp_leave_at_exit(mw_db *db, int *pAlone);
void mw_mp_left(mw_db *db, int alone);
int mw_mp_commit_begin(mw_db *db, uint64_t need);
void mw_mp_commit_end(mw_db *db, int rc, uint64_t epoch, uint64_t end);
void mw_mp_durable(mw_db *db, uint64_t end);
/* A published record of this process durable: the processes sync for each other (one
** leads, the others wait for the shared durable end, bounded); mp.c "group sync". */
int mw_mp_wait_durable(mw_db *db, uint64_t end);
/* A commit acknowledged once written (synchronous=NORMAL/OFF), published, its record
** starting at `start`: when another process's record before it waits for its sync
** (FULL), waits for that sync too, since this one becomes visible after it, as a
** stock writer waits for the lock that a FULL writer holds through its sync. */
int mw_mp_wait_foreign(mw_db *db, uint64_t epoch, uint64_t start);

/* The replica stream across processes (replica/stream.c, mp.c "the replica stream").
** join: the first process publishes the stream's directory (its hash), its TXIDs (the
** state at epoch0 is TXID txid0), last epoch and size; a later one must name the same
** directory (SQLITE_CANTOPEN, *pzErr, otherwise) and gets them. lock: tries to become the one emitter (SQLITE_BUSY: another process
** or thread is); state: the shared last epoch, size at it and durable end of the log;
** set: after a file, with its level-0 bytes; l0_bytes: those since the last snapshot
** (reset: and starts again from 0). */
int mw_mp_stream_join(mw_db *db, uint64_t dir_hash, uint64_t *pEpoch0, uint64_t *pTxid0,
                      uint64_t *pEmitted, uint32_t *pPages, char **pzErr);
int mw_mp_stream_lock(mw_db *db);
void mw_mp_stream_unlock(mw_db *db);
void mw_mp_stream_state(mw_db *db, uint64_t *pEmitted, uint32_t *pPages, uint64_t *pDurable);
void mw_mp_stream_set(mw_db *db, uint64_t emitted, uint32_t pages, uint64_t l0_bytes);
uint64_t mw_mp_stream_l0_bytes(mw_db *db, int reset);
void mw_mp_mark_locked(mw_db *db, uint64_t before);
void mw_mp_refresh(mw_db *db);
/* The store's loader for the lazy versions of other processes' records (ctx: the
** mw_db): from the log, or from the database file once a compaction dropped them. */
int mw_mp_load_image(void *ctx, uint32_t pgno, uint64_t at, unsigned char *buf);
/* Compaction while several processes are open (mp.c): begin takes the join lock (or
** SQLITE_BUSY: skip this round) and gives the lowest floor of the other live
** processes in *pLimit; compact_log switches the log to base under the publication
** lock; end releases the join lock. */
int mw_mp_compact_begin(mw_db *db, uint64_t *pLimit);
int mw_mp_compact_log(mw_db *db, uint64_t base);
void mw_mp_compact_end(mw_db *db);
/* The mark while processes are open (mp.c, "the mark"): unmark takes it off when every
** published record is in the file (a checkpoint, compact.c); arm, called by a commit
** under the publication lock before its epoch, puts it back first. */
int mw_mp_unmark(mw_db *db);
int mw_mp_arm(mw_db *db);
/* The epoch of the last record published by any process. */
uint64_t mw_mp_committed_epoch(mw_db *db);
/* Publishes this process's floor (db->oldest: below every snapshot it has or will
** take, and applied). */
void mw_mp_floor(mw_db *db, uint64_t oldest);
/* The compactor's tick: catch up (so that an idle process's floor advances), follow a
** log switch, learn the shared compacted epoch. */
void mw_mp_tick(mw_db *db);
/* The hot-spot turn across processes: the lane holding a database's turn in its
** process (turn.c) takes this one too before its snapshot (db.c), so that the
** conflicting writers of different processes run in turn instead of refusing each
** other. take waits (bounded: an owner that died or kept it over MW_TURN_HOLD_MS is
** passed over) and returns 1 once this process holds it, 0 when it gave up (the
** database broke); give hands it to the earliest waiting process. */
int mw_mp_turn_take(mw_db *db);
void mw_mp_turn_give(mw_db *db);
/* The write gate across processes (gate.c): taken for this process until `until`
** (CLOCK_MONOTONIC ns; 0 when another live process's writer holds it), its time
** moved, given back. Commits wait for another process's gate in
** mw_mp_commit_begin. */
int mw_mp_gate_take(mw_db *db, uint64_t until);
void mw_mp_gate_hold(mw_db *db, uint64_t until);
void mw_mp_gate_give(mw_db *db);
/* Syncs the log up to `end` (records of other processes a turn holder's snapshot
** read) and makes what that covered visible. */
void mw_mp_sync_to(mw_db *db, uint64_t end);
/* Steps of shared log room this process zeroed off the publication lock for its
** claims (its grower, or a holder of its own that needed them at once), and of those
** the ones a holder ran (statistics MW_STAT_LOG_ROOM_CLAIMED, ..._CLAIMED_NOW); 0 when
** the database is not in multi-process mode. */
void mw_mp_room_claims(mw_db *db, int64_t *pZeroed, int64_t *pNow);

#endif /* MW_MP_H */
