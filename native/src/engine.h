/*
** engine.h: the types shared by the engine's parts (vfs.c, lane.c, store.c, db.c,
** commit.c, compact.c). docs/design.md explains how they fit together.
**
** Ownership in one line each:
**   mw_store  committed page versions by (page, epoch), behind lock stripes (store.c)
**   mw_db     one open database of the process: epochs, visibility, snapshots,
**             the log, the compactor (db.c, compact.c)
**   mw_lane   one connection: private WAL, private wal-index, snapshot, read set (lane.c)
**   commit    validation, epoch assignment, install, log, visibility (commit.c)
*/
#ifndef MW_ENGINE_H
#define MW_ENGINE_H

#include "mw_internal.h"
#include "background.h"
#include "owner.h"

/* 1 once the log (log.c) is part of the build; 0 keeps commits in memory only. */
#ifndef MW_USE_LOG
#  define MW_USE_LOG 1
#endif

#if MW_USE_LOG
#  include "log.h"
#endif

#ifndef MW_STRIPES
#  define MW_STRIPES 64        /* lock stripes of the page store (page mod N), at most 64 */
#endif
#define MW_RING 4096           /* epochs assigned but not yet visible, at most */

/* ---------------------------------------------------------------- options */
typedef struct mw_opts {
  int engine;                  /* mw: 1 engine, 0 stock */
  int readcheck;               /* mw_readcheck */
  int fullfsync;               /* mw_fullfsync */
  int small;                   /* mw_profile=small */
  uint64_t log_max_bytes;      /* mw_log_max_mb */
  int mp;                      /* mw_mp: many processes on one database (mp.c) */
  int rebase;                  /* mw_rebase: merge table leaves on a conflict (rebase.c) */
} mw_opts;

/* Parses the mw* URI parameters of a main-database name. Returns SQLITE_OK, or an
** error with *pzErr (sqlite3_malloc) naming the parameter. */
int mw_opts_parse(const char *zName, mw_opts *o, char **pzErr);

/* ---------------------------------------------------------------- store */
typedef struct mw_pver {
  uint64_t epoch;
  unsigned char *img;          /* page_size bytes, owned by the chain; 0 while lazy */
  uint64_t at;                 /* lazy (another process's record, mw_mp=1): the
                                  image's logical offset in the log, read on first
                                  use (mw_store_image); 0 once read */
} mw_pver;

typedef struct mw_chain {
  uint32_t pgno;
  uint32_t n, cap;
  mw_pver *v;               /* ascending epochs */
} mw_chain;

typedef struct mw_stripe {
  mw_mutex mu;
  mw_chain **slot;             /* open addressing by page number */
  uint32_t cap, count;
  uint32_t nbase;              /* file pages cached as epoch-0 versions */
  char pad[64];
} mw_stripe;

/* Reads the image of a lazy version of page pgno at log offset `at` into buf. */
typedef int (*mw_store_loader)(void *ctx, uint32_t pgno, uint64_t at, unsigned char *buf);

typedef struct mw_store {
  int page_size;
  uint32_t base_cap;           /* cached file pages per stripe, at most */
  mw_store_loader load;        /* for lazy versions (mw_store_install_record) */
  void *load_ctx;
  mw_stripe stripe[MW_STRIPES];
} mw_store;

/* cache_pages: how many pages read from the database file the store keeps (as
** version epoch 0: the file's content, which every snapshot older than the chain's
** first version sees), so that the next transactions do not read them again. */
int mw_store_init(mw_store *s, int page_size, uint32_t cache_pages);
/* Keeps a copy of a whole page that a reader at snapshot `snap` just read from the
** file (no version <= snap existed). */
void mw_store_cache_file_page(mw_store *s, uint32_t pgno, const void *img, uint64_t snap);
void mw_store_free(mw_store *s);
static inline int mw_stripe_of(uint32_t pgno) { return (int)(pgno % MW_STRIPES); }
void mw_store_lock(mw_store *s, int stripe);
void mw_store_unlock(mw_store *s, int stripe);

/* Under the stripe lock: the chain of pgno, or NULL. */
mw_chain *mw_store_chain_locked(mw_store *s, uint32_t pgno);
/* The version a view sees: newest with epoch <= snap or epoch in own[0..nown-1]. */
const mw_pver *mw_chain_view(const mw_chain *c, uint64_t snap, const uint64_t *own, int nown);
/* Under the stripe lock: appends a version (epoch newer than every other of the
** chain) and frees the versions that no snapshot >= oldest can read. The store owns
** img afterwards. Returns SQLITE_NOMEM (img freed) on failure. */
int mw_store_install_locked(mw_store *s, uint32_t pgno, uint64_t epoch, unsigned char *img,
                            uint64_t oldest);
/* Installs a log record's pages at `epoch`, each under its stripe, passing `prune` to
** mw_store_install_locked: with images (npages of s->page_size bytes, back to back),
** copies of them; without (images 0), lazy versions at the log offsets ats[i].
** SQLITE_NOMEM when a copy cannot be made (the pages before it are installed).
** Lazy versions (mw_mp=1): another process's pages are read from the log only when
** somebody needs the image (most are never read by this process: they are superseded
** or compacted first); set_loader gives the function that reads them. */
int mw_store_install_record(mw_store *s, uint64_t epoch, int npages, const uint32_t *pgnos,
                            const unsigned char *images, const uint64_t *ats, uint64_t prune);
void mw_store_set_loader(mw_store *s, mw_store_loader load, void *ctx);
/* Under the page's stripe lock: the image of version v of chain c, read first if lazy;
** 0 when that read failed (*pRc says why). */
const unsigned char *mw_store_image(mw_store *s, const mw_chain *c, const mw_pver *v, int *pRc);
/* Copies bytes [off, off+amt) of the page as seen by the view into buf: 1 when found,
** 0 when the store has no version for the view, or a negative SQLite code (negated)
** when a lazy version could not be read. */
int mw_store_read(mw_store *s, uint32_t pgno, uint64_t snap, const uint64_t *own, int nown,
                  void *buf, int off, int amt);
/* Garbage collection: frees versions older than the newest one <= oldest, drops
** chains whose only version is <= min(oldest, compacted). *pPinned receives the
** versions kept only for snapshots older than `visible`; *pChains the chains left. */
void mw_store_gc(mw_store *s, uint64_t oldest, uint64_t compacted, uint64_t visible,
                 int64_t *pPinned, int64_t *pChains);

/* One page to write back into the database file. */
typedef struct mw_page_out { uint32_t pgno; unsigned char *img; } mw_page_out;
/* Collects a copy of the newest version <= upto of every page changed after `since`.
** *pOut is malloc'ed (free each img and the array with free). */
int mw_store_collect(mw_store *s, uint64_t since, uint64_t upto, mw_page_out **pOut, int *pN);

/* ---------------------------------------------------------------- page sets */
typedef struct mw_pageset {
  uint32_t *slot;              /* open addressing, 0 = empty */
  uint32_t cap, count;
  int failed;                  /* a page could not be recorded: refuse the commit */
} mw_pageset;
void mw_pageset_add(mw_pageset *s, uint32_t pgno);
int mw_pageset_has(const mw_pageset *s, uint32_t pgno);
void mw_pageset_clear(mw_pageset *s);
void mw_pageset_free(mw_pageset *s);

/* ---------------------------------------------------------------- database */
typedef struct mw_lane mw_lane;
/* From mw_db_acquire: the file is not a database, or stock SQLite may only read it
** (its conversion to WAL said SQLITE_NOTADB or SQLITE_READONLY), or a read-only
** connection opens a file that is not in WAL mode (its conversion would write the
** file); nothing of the engine was kept. vfs.c then opens the file through the root
** VFS, as stock SQLite would: "file is not a database" at the first query, or reads
** that work and writes refused with SQLITE_READONLY. Stock SQLite writes no such file. */
#define MW_RC_STOCK_OPEN (SQLITE_NOTADB | (0x6d << 8))

typedef struct mw_db mw_db;
typedef struct mw_mp mw_mp;

typedef struct mw_pending {
  uint64_t epoch;
  uint32_t size;               /* database size in pages after this epoch */
  int ready;                   /* installed, and durable (or written, see commit.c) */
  int installed;               /* its versions are in the store (atomic, release;
                                  commit.c): a turn holder's snapshot may include
                                  it (db.c) */
  uint64_t end;                /* end offset of its log record */
  int foreign;                 /* applied from another process's record (mp.c) */
} mw_pending;

struct mw_db {
  char *path;                  /* full path of the database file (its first opener's) */
  mw_file_id id;               /* what the registry knows it by (guard.c) */
  mw_db *next;                 /* registry of open databases */
  int refs;                    /* lanes open on it (registry_mu; atomic: txn_end reads it) */
  uint64_t pid;                /* the process that opened it (a forked child inherits it) */
  int page_size;
  mw_opts opts;                /* of the first opener */
  sqlite3_vfs *root;
  sqlite3_file *data;          /* the guarded handle (guard.c): file reads, compaction
                                  writes, the lock that keeps other processes out */
  mw_store store;

  mw_mutex mu;                 /* publication: epochs, visibility, snapshots, lanes */
  mw_cond cv;                  /* visibility advanced (commit.c) */
  mw_cond turn_cv;             /* a transaction ended or the turn moved (turn.c): kept
                                  apart from cv so that the commits' visibility wakes
                                  no lane waiting for the turn, and the other way round */
  uint64_t assigned;           /* last epoch assigned */
  uint64_t visible;            /* last epoch visible (a prefix of assigned) */
  uint32_t visible_size;       /* pages at `visible` */
  uint64_t visible_end;        /* end offset in the log of the record of `visible` */
  uint64_t oldest;             /* min(visible, oldest active snapshot): only grows */
  uint64_t compacted;          /* the database file holds the state at this epoch */
  uint64_t compacting;         /* T of the compaction running, 0 = none: it pins the
                                  versions at T like a snapshot */
  mw_pending ring[MW_RING];
  mw_lane *lanes;              /* every lane, for the snapshot registry */
  mw_lane *turn;               /* the lane holding the hot-spot turn, or NULL */
  mw_lane *turn_head, *turn_tail; /* FIFO of lanes queued for the turn (turn.c) */
  uint64_t turn_since;         /* when the head became the head (ns) */
  int turn_exclusive;          /* the holder is starving (MW_TURN_AFTER losses in a
                                  row, or a loss in its last turn): other
                                  transactions wait for it (turn.c) */
  int active;                  /* lanes in a transaction snapshot */
  int broken;                  /* a log write or sync failed: every commit fails */
  int frozen;                  /* a reformat runs (db.c): no snapshot starts, they wait
                                  on cv */

  /* compactor: a job of the shared background workers (background.c) */
  mw_bg_job compactor;
  int compactor_running;       /* the job is added */
  int compactor_idle;          /* its last step found nothing left: no timer runs */
  uint64_t compact_last;       /* when the last compaction started (ns) */
  uint64_t compact_below;      /* mw_mp=1: when a compaction last found another
                                  process's floor below this one's oldest snapshot
                                  (ns): it cannot compact, the lowest can (compact.c) */
  uint64_t gc_last;            /* when garbage collection last scanned the store (ns,
                                  the compactor's) */
  int want_compact;
  int64_t compactions;
  int64_t pinned;
  int64_t pinned_warned;       /* pinned count at the last warning */
  int64_t chains;
  uint64_t commits_since_gc;

#if MW_USE_LOG
  mw_log *log;
#endif
  uint64_t log_bytes;          /* last known log size */
  mw_mp *mp;                   /* multi-process mode (mw_mp=1), else NULL (mp.c) */
};

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
/* The same for a transaction's snapshot, with the hot-spot turn: a lane that lost
** MW_TURN_AFTER commits in a row waits for the transactions in flight to end and
** holds new ones back until its own transaction ends (each wait is bounded, so
** two connections used by one thread cannot deadlock). */
#define MW_TURN_AFTER 8
#define MW_TURN_WAIT_MS 50
#define MW_TURN_HOLD_MS 500    /* the head of the turn queue keeps its place at most */
/* A lane's heat: each refusal adds a quarter of the distance to MW_HEAT_MAX, each
** commit outside the turn takes an eighth off (and 1), each commit in the turn a
** 128th (and 1). A lane at MW_HEAT_QUEUE or more queues for the turn at once; such
** a holder is not exclusive (turn.c). */
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
#define MW_HEAT_MAX 1024
#define MW_HEAT_QUEUE 512
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
void mw_db_txn_begin(mw_db *db, mw_lane *l, uint64_t *pSnap, uint32_t *pSize);
void mw_db_txn_end(mw_db *db, mw_lane *l);
/* Called by every thread that uses the lane's transaction (lane.c): joins the
** calling thread to its users. 1 when the transaction was released because its
** users had all ended (it must be rolled back), else 0. */
int mw_db_lane_use(mw_db *db, mw_lane *l);
/* Releases the snapshot of every lane whose transaction's users all ended (under
** db->mu; the compactor's steps). Returns how many. */
int mw_db_release_orphans_locked(mw_db *db);
/* Reads page bytes from the database file (pages the store does not hold). */
int mw_db_read_file(mw_db *db, uint32_t pgno, void *buf, int off, int amt);

/* compact.c */
int mw_compactor_start(mw_db *db);
void mw_compactor_stop(mw_db *db);
/* Compacts up to min(visible, oldest snapshot); how: MW_COMPACT_TICK, or up to visible
** whatever the snapshots (MW_COMPACT_ALL: a reformat, the log goes on; MW_COMPACT_LAST:
** the last close, the log is emptied in place and removed next). Caller must not hold
** db->mu. */
enum { MW_COMPACT_TICK = 0, MW_COMPACT_ALL = 1, MW_COMPACT_LAST = 2 };
int mw_compact_now(mw_db *db, int how);
void mw_compact_kick(mw_db *db);
/* After a commit became visible (under db->mu): sets *pWake when the compactor is
** idle and now has work; the caller then calls mw_compact_wake without db->mu. */
void mw_compact_dirty_locked(mw_db *db, int *pWake);
void mw_compact_wake(mw_db *db);

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
#if MW_USE_LOG
void mw_mp_log_options(mw_db *db, mw_log_options *lo);
#endif
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
/* Syncs the log up to `end` (records of other processes a turn holder's snapshot
** read) and makes what that covered visible. */
void mw_mp_sync_to(mw_db *db, uint64_t end);
/* Steps of shared log room this process zeroed off the publication lock for its
** claims (its grower, or a holder of its own that needed them at once), and of those
** the ones a holder ran (statistics MW_STAT_LOG_ROOM_CLAIMED, ..._CLAIMED_NOW); 0 when
** the database is not in multi-process mode. */
void mw_mp_room_claims(mw_db *db, int64_t *pZeroed, int64_t *pNow);

/* Crash points for the crash tests: MW_CRASH_AT=<name>[:n] aborts the process at
** the n-th (default 1st) time the named point is reached. */
void mw_crash_point(const char *name);
/* Pause points for the race tests: MW_PAUSE_AT=<name>:<ms> sleeps that long every
** time the named point is reached. */
void mw_pause_point(const char *name);

/* ---------------------------------------------------------------- guard.c */
/* Header bytes 18 and 19 while the log may hold commits the file does not: stock
** SQLite refuses a read version above 2. */
#define MW_HDR_MARK 0x6d
/* Opens the database file through root (read-only when it cannot be written),
** wrapped: reads give bytes 18..19 back as 2, writes put the mark in once set. */
int mw_guard_open(sqlite3_vfs *root, const char *zPath, sqlite3_file **pOut);
void mw_guard_free(sqlite3_file *f);
int mw_guard_readonly(sqlite3_file *f);
/* Takes EXCLUSIVE (SHARED when read-only) at once; SQLITE_BUSY when held elsewhere. */
int mw_guard_lock(sqlite3_file *f);
int mw_guard_unlock(sqlite3_file *f);
/* Multi-process mode: from EXCLUSIVE or from nothing, holds a lock that engine
** processes share and stock connections do not get (SQLITE_BUSY): one byte of SQLite's
** SHARED range, or SHARED where the system cannot (the mark then keeps stock SQLite
** out). SQLITE_BUSY when a stock connection has the file (guard.c). */
int mw_guard_share(sqlite3_file *f, const char *zPath, const mw_file_id *id);
/* *pMarked: the file's header carries the mark. */
int mw_guard_marked(sqlite3_file *f, int *pMarked);
/* Sets (on) or clears the mark, durably. */
int mw_guard_set_mark(sqlite3_file *f, int on);
/* The file carries the mark already: this handle's writes of the header keep it in. */
void mw_guard_keep_mark(sqlite3_file *f);

/* ---------------------------------------------------------------- files */
enum { MW_KIND_MAIN = 1, MW_KIND_WAL = 2, MW_KIND_ERR = 3 };

/* What the VFS hands to SQLite for an engine file. Pass-through files are opened
** by the root VFS directly into the sqlite3_file and never look like this. */
typedef struct mw_file {
  sqlite3_file base;
  int kind;
  mw_lane *lane;               /* MAIN and WAL */
  sqlite3_file *real;          /* MAIN and ERR: the file through the root VFS */
  char *err;                   /* ERR: why the open is refused */
  int err_rc;                  /* ERR: the result code the open fails with */
  int reads;                   /* ERR: reads so far */
} mw_file;

/* vfs.c: the root VFS under "multiwriter". */
sqlite3_vfs *mw_root_vfs(void);
/* Called by the auto-extension at the end of every sqlite3_open: fails the open of
** a database whose options were refused, with the message. */
int mw_check_open(sqlite3 *db, char **pzErr);

/* ---------------------------------------------------------------- lane */
struct mw_lane {
  mw_db *db;
  mw_lane *next_in_db;
  const char *zName;           /* the main file's name pointer (sqlite3_filename) */
  sqlite3_file *real;          /* the main file through the root VFS */
  int readcheck;
  int rebase;                  /* mw_rebase=1 (rebase.c) */
  int sync_level;              /* observed PRAGMA synchronous (0..3) */
  int lock_level;              /* the main file's level SQLite holds (pretended, lane.c) */

  /* private WAL */
  unsigned char *wal;
  uint64_t wal_len, wal_cap;
  int wal_open;
  uint64_t committed_frames;   /* frames already published in this snapshot */

  /* private wal-index */
  void **region;
  int nregion;
  uint32_t shared_mask;        /* read marks held SHARED */
  int write_lock;              /* slot 0 held EXCLUSIVE */

  /* snapshot */
  uint64_t reg;                /* epoch registered in the snapshot registry, 0 = none */
  int in_snap;
  uint64_t snap;
  uint32_t snap_size;
  uint32_t cur_size;           /* size after this snapshot's own commits */
  uint64_t *own;               /* epochs this snapshot committed */
  int nown, cap_own;
  mw_pageset rs;               /* read set: every page SQLite may hold from this
                                  snapshot or, while warm, from earlier ones */
  unsigned char *pgbuf;        /* one page of the largest size (65536), scratch */

  /* SQLite's page cache and the private WAL are kept across read-only transactions
  ** ("warm") while no other connection committed in between (lane.c). */
  int warm;                    /* the previous snapshot left SQLite's state valid */
  int fmt_pending;             /* this lane reformatted the database (db.c) and its
                                  SQLite has not read page 1 since: PRAGMA page_size
                                  and auto_vacuum are answered by the engine */
  int fmt_av;                  /* the auto-vacuum mode the reformat wrote */
  uint64_t last_snap;          /* snapshot epoch of the previous transaction */
  int last_nown;               /* commits of the previous transaction */
  int must_reset;              /* next snapshot starts cold whatever happened */
  int wrote;                   /* this snapshot took the write lock */
  int keeps_version;           /* the connection asked for PRAGMA data_version: its
                                  own commits keep it warm too (lane.c) */
  int alone;                   /* at its last transaction's end, the only lane of its
                                  database, without mw_mp (db.c sets it) */
  int blind;                   /* warm after its own write while alone: SQLite's
                                  cache holds pages its read set lacks, so its commit
                                  is refused if any other commit came after its
                                  snapshot (lane.c, commit.c) */

  /* A commit of a transaction that writes several engine databases (attached ones)
  ** waits for SQLite's commit phase two and is published with the others, all or
  ** nothing (commit.c, mw_commit_group). */
  int stashed;                 /* frames [stash_from, stash_to) wait for phase two */
  uint64_t stash_from, stash_to;
  uint32_t stash_pages;
  void *stash_owner;           /* the thread that wrote them (mw_thread_write_locks) */
  int *wlock_counter;          /* the thread counter this lane's write lock counts in */
  int poisoned;                /* SQLite believes a refused commit happened: every
                                  later commit of this snapshot is refused */

  int losses;                  /* commits refused in a row */
  mw_lane *turn_next;          /* next in the turn queue (turn.c) */
  mw_cond turn_wake;           /* signalled when it becomes the queue's head */
  int turn_queued;
  mw_owner *turn_owner;        /* the thread that took the turn this lane holds (a
                                  reference; turn.c counts it in the token), or NULL */
  uint64_t reloc_epoch;        /* epoch of a relocated commit: later commits of its
                                  snapshot are refused (growth.c) */
  /* Rebase (rebase.c): the rows the transaction declared it read, and the epoch of
  ** a rebased commit, after which its snapshot may neither read nor commit. */
  int64_t *rb_rows;
  int rb_n, rb_cap, rb_sorted;
  int rb_declared;             /* the transaction declared the rows it touched */
  int rb_failed;               /* a declaration could not be recorded: no rebase */
  uint64_t rebase_epoch;
  int counted;                 /* counted in db->active */
  int heat;                    /* recent refusal rate, 0..MW_HEAT_MAX (commit.c
                                  keeps it, turn.c reads it) */
  int held_turn;               /* this transaction began holding the turn */
  int mp_turn;                 /* it holds the turn across processes too (mw_mp=1;
                                  db.c takes it, turn.c gives it back with the turn) */
  int lost_turn;               /* its last refusal was while holding a turn that was
                                  not exclusive: the next one is (turn.c) */
  int touched;                 /* this snapshot read a page through xRead */
  int cold_start;              /* this snapshot went cold at its start (or follows
                                  one that did, unread): SQLite lets it go at once
                                  and locks again (lane.c) */

  /* The threads that used this transaction (owner.c; changed under db->mu by the
  ** lane's callers, read by the compactor under db->mu; cleared at its end). Once
  ** every one has ended, the compactor releases its snapshot (db.c). */
  mw_owner **users;
  int nusers, cap_users;
  int untracked;               /* a user had no token: never released */
  int abandoned;               /* released: every use until its end fails (atomic) */

  int64_t stats[MW_STAT_COUNT];
};

/* commit.c: publishes frames [from, to) of the lane's WAL (to-1 is the commit
** frame, whose header says the database has db_pages pages). */
int mw_commit(mw_lane *l, uint64_t from, uint64_t to, uint32_t db_pages);
/* Publishes the stashed commits of several lanes (one transaction over attached
** databases) all or nothing: every one is validated before any is published. */
int mw_commit_group(mw_lane **lanes, int n);

/* lane.c: the number of engine write locks the calling thread holds (a thread-local
** counter; its address also identifies the thread). */
int *mw_thread_write_locks(void);
/* db.c: the lanes whose commit the calling thread stashed (at most max). */
int mw_db_stashed_lanes(void *owner, mw_lane **out, int max);

/* growth.c (engine.md section 7): called by mw_commit under every stripe. */
/* 1 when a write conflict on pgno is one that relocation or the interior merge
** may resolve: page 1, a page past the snapshot's end, or an interior table page
** on both sides. c is the page's chain. */
int mw_growth_candidate(mw_lane *l, uint32_t pgno, const unsigned char *ours,
                        const mw_chain *c);
/* Relocates the write set (wp sorted, img) past the newest end and merges the
** interior table pages merge[0..nmerge-1]. SQLITE_OK: wp/img renumbered (still
** sorted), *pDbPages the new size, *pMerged the pages merged. SQLITE_BUSY_SNAPSHOT:
** refused (reason counted; the images may be half rewritten: drop them). */
int mw_growth_apply(mw_lane *l, uint32_t *wp, unsigned char **img, int nw,
                    const uint32_t *merge, int nmerge, uint32_t *pDbPages, int *pMerged);

/* growth.c: page pgno as the lane's snapshot sees it (the store's version, or the
** file's into buf). Caller holds the page's stripe. */
const unsigned char *mw_snap_page(mw_lane *l, uint32_t pgno, unsigned char *buf, int *rc);

/* rebase.c (engine.md section 9). */
/* MW_FCNTL_REBASE_ROWS: adds rowids to the rows the transaction read or wrote, and
** marks them declared. SQLITE_MISUSE outside a write transaction (the write lock held). */
int mw_rebase_declare(mw_lane *l, const int64_t *rowids, int n);
/* At the end of the write transaction (its write lock released) and of the snapshot:
** the declaration covered that transaction only. */
void mw_rebase_forget(mw_lane *l);
/* 1 when a write conflict of this commit on pgno may be rebased: mw_rebase=1, the
** reads declared, the snapshot's first commit, no write of page 1 (no growth), one
** process, a page that existed at the snapshot. */
int mw_rebase_candidate(const mw_lane *l, uint32_t pgno, int writes_page1);
/* 1 when every page of the write set (wp, img) is a b-tree leaf other than page 1: no
** rebalance (interior pages), no overflow or pointer-map page. */
int mw_rebase_write_set_ok(const uint32_t *wp, unsigned char *const *img, int nw);
/* Merges the newest version of pgno (its chain c; the caller holds its stripe) into
** img, the commit's image. SQLITE_OK with *pMerged 1 (img rewritten) or 0 (refused,
** counted; img untouched), or an error. */
int mw_rebase_page(mw_lane *l, uint32_t pgno, unsigned char *img, const mw_chain *c,
                   int *pMerged);

/* turn.c (under db->mu): queue for and take the hot-spot turn before a
** transaction's snapshot (me: the calling thread's token, or NULL); release it at the
** transaction's end; drop a closing lane. */
void mw_turn_enter_locked(mw_db *db, mw_lane *l, mw_owner *me);
void mw_turn_leave_locked(mw_db *db, mw_lane *l);
void mw_turn_forget_locked(mw_db *db, mw_lane *l);

/* lane.c */
int mw_lane_create(mw_file *p, sqlite3_vfs *root, const char *zName, int flags, int *pOut,
                   const mw_opts *o, char **pzErr);
/* db.c: the lane whose main file was opened with this name pointer. */
mw_lane *mw_lane_find(const char *zDbName);
extern const sqlite3_io_methods mw_main_methods;
extern const sqlite3_io_methods mw_wal_methods;
int mw_lane_open_wal(mw_lane *l, sqlite3_file *f);

static inline uint32_t mw_get32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

#endif /* MW_ENGINE_H */
