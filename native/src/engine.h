/*
** engine.h: the types the engine's parts share (docs/design/engine.md): the options,
** the page store's versions and chains, the page set, the open database, the lane
** (one connection) and the file the VFS hands to SQLite. Only types and the constants
** that shape them: every function is declared by the header of its own folder's
** module (core/store.h, core/db.h, vfs/lane.h, ...).
**
** Ownership in one line each:
**   mw_store  committed page versions by (page, epoch), behind lock stripes (core/store.c)
**   mw_db     one open database of the process: epochs, visibility, snapshots,
**             the log, the compactor (core/db.c, compact/compact.c)
**   mw_lane   one connection: private WAL, private wal-index, snapshot, read set
**             (vfs/lane.c)
**   commit    validation, epoch assignment, install, log, visibility (core/commit.c)
*/
#ifndef MW_ENGINE_H
#define MW_ENGINE_H

#include "mw_internal.h"
#include "platform/background.h"

typedef struct mw_owner mw_owner; /* core/owner.h */
typedef struct mw_log mw_log;     /* durability/log.h */

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
  const char *ltx_dir;         /* mw_ltx_dir: the replica stream's directory (stream.c);
                                  the open's URI holds it, 0: none */
  int ltx_keep;                /* mw_ltx_keep: level-9 snapshots kept (0: keep every file) */
  int wait;                    /* mw_wait: writes take the write gate (gate.c); the
                                  loadable extension's default */
} mw_opts;

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

/* One page to write back into the database file (mw_store_collect). */
typedef struct mw_page_out { uint32_t pgno; const unsigned char *img; } mw_page_out;

/* ---------------------------------------------------------------- page sets */
typedef struct mw_pageset {
  uint32_t *slot;              /* open addressing, 0 = empty */
  uint32_t cap, count;
  int failed;                  /* a page could not be recorded: refuse the commit */
} mw_pageset;

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
typedef struct mw_stream mw_stream; /* replica/stream.h */
typedef struct mw_compact_host mw_compact_host; /* compact/compact.h */

typedef struct mw_pending {
  uint64_t epoch;
  uint32_t size;               /* database size in pages after this epoch */
  int ready;                   /* installed, and durable (or written, see commit.c) */
  int installed;               /* its versions are in the store (atomic, release;
                                  commit.c): a turn holder's snapshot may include
                                  it (db.c) */
  uint64_t end;                /* end offset of its log record */
  int foreign;                 /* applied from another process's record (mp.c) */
  int ack_written;             /* acknowledged once written (synchronous below FULL):
                                  ready once its record is written, whoever wrote it
                                  (commit.c, make_visible) */
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
  /* The write gate (gate.c). */
  mw_lane *gate;               /* its holder (a mw_wait=1 lane), or NULL */
  uint64_t gate_until;         /* the others' commits wait for it until then (ns) */
  int gate_commits;            /* commits past the gate, not yet ended */
  mw_cond gate_cv;             /* the gate opened, or gate_commits reached 0 */
  int broken;                  /* a log write or sync failed: every commit fails */
  int frozen;                  /* a reformat runs (db.c): no snapshot starts, they wait
                                  on cv */

  /* compactor: a job of the shared background workers (background.c) */
  mw_bg_job compactor;
  const mw_compact_host *host; /* what the compactor asks of the core (db.c sets it) */
  int compactor_running;       /* the job is added */
  int compactor_idle;          /* its last step found nothing left: no timer runs */
  uint64_t compact_last;       /* when the last compaction started (ns) */
  uint64_t compact_below;      /* mw_mp=1: when a compaction last found another
                                  process's floor below this one's oldest snapshot
                                  (ns): it cannot compact, the lowest can (compact.c) */
  uint64_t gc_last;            /* when garbage collection last scanned the store (ns,
                                  the compactor's) */
  uint64_t unsynced_mark;      /* the log's end at the compactor's last tick: synced at
                                  the next one (compact.c, sync_unsynced; the
                                  compactor's) */
  int want_compact;
  /* PRAGMA wal_checkpoint (compact.c, mw_compact_checkpoint): requests are served by
  ** the compactor's job, one run for every request made before it started. */
  mw_cond ckpt_cv;             /* a run ended */
  uint64_t ckpt_asked;         /* requests made */
  uint64_t ckpt_done;          /* requests answered by the runs that ended */
  uint64_t ckpt_target;        /* the newest epoch a request made so far needs */
  uint64_t ckpt_since;         /* mw_mp=1: when the run for the pending requests began
                                  (ns; it retries while the others' floors catch up) */
  int ckpt_rc;                 /* the last run's result */
  int ckpt_patient;            /* a pending request may wait for the others (mw_mp=1) */
  /* The mark (guard.c) while the engine is open: a checkpoint that left the log with
  ** nothing the file lacks takes it off; the next commit puts it back first (db.c,
  ** mw_db_arm_locked). mw_mp=1 keeps this in the shared header instead (mp.c). */
  int unmarked;                /* the file is unmarked (under db->mu) */
  int arming;                  /* commits between their arming and their epoch */
  int64_t compactions;
  int64_t pinned;
  int64_t pinned_warned;       /* pinned count at the last warning */
  int64_t chains;
  uint64_t commits_since_gc;
  int64_t visible_by_other;    /* commits found visible on their committer's return
                                  from the log: another committer made its group
                                  visible (under mu; tests, issue 35) */

  mw_log *log;
  uint64_t log_bytes;          /* last known log size */
  mw_mp *mp;                   /* multi-process mode (mw_mp=1), else NULL (mp.c) */
  mw_stream *stream;           /* the replica stream (mw_ltx_dir=), else NULL */
};

/* The hot-spot turn (core/turn.c): a lane that lost MW_TURN_AFTER commits in a row
** waits for the transactions in flight to end and holds new ones back until its own
** transaction ends (each wait is bounded, so two connections used by one thread
** cannot deadlock). */
#define MW_TURN_AFTER 8
#define MW_TURN_WAIT_MS 50
#define MW_TURN_HOLD_MS 500    /* the head of the turn queue keeps its place at most
                                  (processes/mp.c bounds the turn across processes
                                  by it too) */
/* A lane's heat: each refusal adds a quarter of the distance to MW_HEAT_MAX, each
** commit outside the turn takes an eighth off (and 1), each commit in the turn a
** 128th (and 1). A lane at MW_HEAT_QUEUE or more queues for the turn at once; such
** a holder is not exclusive (turn.c). */
/* The write gate (core/gate.c): a holder keeps the others' commits waiting at most
** MW_GATE_HOLD_MS; a gate kept for a lane's retry is kept MW_GATE_RETRY_MS, longer than
** the longest sleep of SQLite's busy handler between two tries (100 ms): a retry that
** came after it found the gate taken again, and under steady commits of other
** connections its snapshot behind again, try after try. */
#define MW_GATE_HOLD_MS 500
#define MW_GATE_RETRY_MS 200
#define MW_HEAT_MAX 1024
#define MW_HEAT_QUEUE 512

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


/* ---------------------------------------------------------------- lane */
struct mw_lane {
  mw_db *db;
  mw_lane *next_in_db;
  const char *zName;           /* the main file's name pointer (sqlite3_filename) */
  sqlite3_file *real;          /* the main file through the root VFS */
  int readcheck;
  int rebase;                  /* mw_rebase=1 (rebase.c) */
  int event_loop;              /* MW_FCNTL_EVENT_LOOP: never waits for the turn (turn.c) */
  int wait;                    /* mw_wait=1: its writes take the write gate (gate.c) */
  int gate_mp;                 /* it owns the gate across processes too (mw_mp=1) */
  int gate_keep;               /* it answered SQLITE_BUSY to keep the gate for its retry */
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
  int ckpt_explicit;           /* the connection prepared PRAGMA wal_checkpoint: its
                                  checkpoints wait for other processes (compact.c); the
                                  automatic ones after a big commit do not */
  int keeps_version;           /* the connection asked for PRAGMA data_version: its
                                  own commits keep it warm too (lane.c) */
  int alone;                   /* at its last transaction's end, the only lane of its
                                  database, without mw_mp (db.c sets it) */
  int blind;                   /* warm after its own write while alone: SQLite's
                                  cache holds pages its read set lacks, so its commit
                                  is refused if any other commit came after its
                                  snapshot (lane.c, commit.c) */
  int autockpt;                /* observed PRAGMA wal_autocheckpoint (SQLite's default
                                  1000): a warm lane goes cold before its private WAL
                                  reaches it (lane.c, snap_end) */

  /* A commit of a transaction that writes several engine databases (attached ones)
  ** waits for SQLite's commit phase two and is published with the others, all or
  ** nothing (commit.c, mw_commit_group). */
  int stashed;                 /* frames [stash_from, stash_to) wait for phase two */
  uint64_t stash_from, stash_to;
  uint32_t stash_pages;
  void *stash_owner;           /* the thread that wrote them (mw_thread_write_locks) */
  int *wlock_counter;          /* the thread counter this lane's write lock counts in */
  mw_owner *wlock_owner;       /* the token holding that counter (a reference), or NULL */
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

static inline uint32_t mw_get32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

#endif /* MW_ENGINE_H */
