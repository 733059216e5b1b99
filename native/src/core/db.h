/*
** db.h: one open database of the process (db.c): the registry, the first open and
** the last close, snapshots and transactions, the lanes a thread stashed, the
** release of transactions whose threads all ended. The reads of the database file
** are datafile.h's.
*/
#ifndef MW_DB_H
#define MW_DB_H

#include "engine.h"

/* Finds or opens the shared state of the database at zPath (a full path). The
** first open converts the file to WAL, opens the log and replays it; a first open for
** a read-only connection (readonly: SQLITE_OPEN_READONLY) converts nothing. */
int mw_db_acquire(sqlite3_vfs *root, const char *zPath, const mw_opts *o, int readonly,
                  mw_db **out, char **pzErr);
/* Drops one reference; the last one compacts everything, deletes the log and
** frees the state. */
int mw_db_release(mw_db *db);
/* 1 when zPath names an open engine database (by file identity: any of its names). */
int mw_db_is_open(const char *zPath);

/* PRAGMA page_size / auto_vacuum on a database nothing was written to yet: writes
** it again, empty, with that page size (0: the same) and auto-vacuum mode (-1: the
** same; 0 none, 1 full, 2 incremental), as SQLite would have created it. *pDone is 0
** (and nothing changes) when the database is not empty, the settings are already
** those, or a transaction of any lane is in flight. */
int mw_db_reformat(mw_lane *l, int page_size, int autovac, int *pDone);

/* Registers the lane in db->lanes (under db->mu). */
void mw_db_add_lane(mw_db *db, mw_lane *l);
void mw_db_remove_lane(mw_db *db, mw_lane *l);
/* Starts a snapshot for the lane: *pSnap and *pSize at the newest visible epoch. */
void mw_db_snapshot_begin(mw_db *db, mw_lane *l, uint64_t *pSnap, uint32_t *pSize);
void mw_db_snapshot_end(mw_db *db, mw_lane *l);

/* MW_TAIL_TRACE (off unless defined before this header, e.g. -DMW_TAIL_TRACE): the
** calling thread's time in the engine's waits for its current transaction, for
** finding where slow transactions spend their time (bench/native/mwbench.c reads
** it). The caller zeroes it before a transaction. */
#ifdef MW_TAIL_TRACE
typedef struct {
  uint64_t begin_ns;   /* mw_db_txn_begin: db->mu and the turn's waits */
  uint64_t turn_ns;    /* of that, in mw_turn_enter_locked */
  uint64_t commit_ns;  /* mw_commit, whole */
  uint64_t durable_ns; /* of that, make_durable (log write, group sync) */
  uint64_t visible_ns; /* of that, make_visible */
  uint64_t refuse_ns;  /* of that, a refused holder's wait for its snapshot */
  uint64_t end_ns;     /* mw_db_txn_end */
  uint64_t reserve_ns; /* of commit_ns, reserve (room in the log) */
  uint64_t lock_ns;    /* of commit_ns, lock_stripes */
  uint64_t assign_ns;  /* of commit_ns, assign */
  int begins, held, exclusive, refused, probes;
} mw_tail_trace;
extern _Thread_local mw_tail_trace mw_tail;
#define MW_TAIL(stmt) do { stmt; } while (0)
#else
#define MW_TAIL(stmt) do { } while (0)
#endif

/* A turn holder's commit hands the turn over once installed (before its sync);
** the next holder's snapshot then includes it (db.c). */
void mw_db_turn_pass(mw_db *db, mw_lane *l);
/* Waits until every commit the lane's snapshot includes is durable (visible), or
** the database broke. For snapshots taken by a turn holder; a no-op otherwise. */
void mw_db_wait_snapshot_durable(mw_db *db, mw_lane *l);
/* Until every commit assigned so far (this process's and, mw_mp=1, the others' it
** applied) is visible. */
void mw_db_wait_assigned_visible(mw_db *db);
/* Snapshots (all databases of the process) that included commits not yet durable:
** the tests' evidence that the early hand-over ran. Atomic. */
extern int64_t mw_early_snapshots;
/* A transaction's snapshot, with the hot-spot turn (turn.c; MW_TURN_* in engine.h). */
void mw_db_txn_begin(mw_db *db, mw_lane *l, uint64_t *pSnap, uint32_t *pSize);
void mw_db_txn_end(mw_db *db, mw_lane *l);
/* Called by every thread that uses the lane's transaction (lane.c): joins the
** calling thread to its users. 1 when the transaction was released because its
** users had all ended (it must be rolled back), else 0. */
int mw_db_lane_use(mw_db *db, mw_lane *l);
/* The compactor's steps release the transactions whose users all ended and ask how far
** the store may prune through db->host (compact/compact.h), which db.c sets at open. */

/* The mark while the database is open (db.c, "the mark while open"): a commit arms
** before its epoch (the mark back on if a checkpoint took it off; mw_mp=1 under the
** publication lock) and is disarmed when it takes its epoch (under db->mu) or is
** refused; a checkpoint unmarks once the log holds nothing the file lacks (db->host). */
int mw_db_arm(mw_db *db);
void mw_db_disarm_locked(mw_db *db);

/* A lane's commit waits for phase two (lane.c): stashed by the thread `owner`, and
** no longer. Every change of l->stashed goes through these. */
void mw_db_stash(mw_lane *l, void *owner);
void mw_db_unstash(mw_lane *l);
/* The other lanes whose commit the thread `owner` stashed (their count; at most max
** stored). */
int mw_db_stashed_lanes(const mw_lane *self, void *owner, mw_lane **out, int max);
/* Lanes stashed now in the process (tests: 0 once every commit ended). */
int mw_db_stashes_now(void);
/* The lane whose main file was opened with this name pointer. */
mw_lane *mw_lane_find(const char *zDbName);

#endif /* MW_DB_H */
