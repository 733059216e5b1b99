/*
** sqlite-multiwriter: many writers on one SQLite database.
**
** The engine is a VFS named "multiwriter". Open a database with
** "file:app.db?vfs=multiwriter" (SQLITE_OPEN_URI) and every connection gets a
** private WAL and a snapshot; commits are validated against the commits published
** since (first committer wins, the loser gets SQLITE_BUSY_SNAPSHOT).
**
** This header is the public C interface: registration, the version, and the
** diagnostics that the file control MW_FCNTL_STATS returns.
*/
#ifndef MULTIWRITER_H
#define MULTIWRITER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && !defined(MW_STATIC)
#  define MW_API __declspec(dllexport)
#elif defined(__GNUC__)
#  define MW_API __attribute__((visibility("default")))
#else
#  define MW_API
#endif

#define MW_VERSION "0.1.0"

/* The engine version string, e.g. "0.1.0". */
MW_API const char *mw_version(void);

/* Registers the "multiwriter" VFS over the default VFS (idempotent). Returns an
** SQLite result code. The shared library with SQLite linked in calls it at
** sqlite3_initialize(); a C program linking the static library calls it itself. */
MW_API int mw_register(void);

/* VACUUM INTO through the engine: SQLite attaches the output and refuses it unless it is
** empty, where an engine open would have made a database of it first (and converted one with
** content to WAL mode). While set (on the calling thread only), the next open of a main
** database goes through the stock VFS, once, untouched: the output of the VACUUM INTO
** statement the caller is about to step (the package sets it around each step of a VACUUM
** statement). A file the engine has open in this process is opened through the engine as
** before (SQLite then refuses it). Returns the previous setting. */
MW_API int mw_plain_output(int on);

/* Diagnostics of one connection, by index into the array filled by mw_stats() and
** by the file control MW_FCNTL_STATS (whose argument is an int64_t[MW_STAT_COUNT]).
** New entries are only ever appended. */
enum mw_stat {
  MW_STAT_ENGINE = 0,          /* 1 when this connection runs on the engine */
  MW_STAT_SNAPSHOT_EPOCH,      /* snapshot epoch of the last transaction */
  MW_STAT_COMMIT_EPOCH,        /* epoch of the last commit, 0 when it wrote nothing */
  MW_STAT_COMMITS,             /* commits published by this connection */
  MW_STAT_CONFLICT_WRITE,      /* commits refused: a page written was changed since */
  MW_STAT_CONFLICT_READ,       /* commits refused: a page read was changed since */
  MW_STAT_CONFLICT_SCHEMA,     /* commits refused: the schema changed since */
  MW_STAT_CONFLICT_FULL,       /* commits refused: no room in the log (SQLITE_FULL) */
  MW_STAT_LOG_BYTES,           /* current size of the log of the database */
  MW_STAT_COMPACTIONS,         /* compactions run on the database */
  MW_STAT_VISIBLE_EPOCH,       /* newest visible epoch of the database */
  MW_STAT_PINNED_VERSIONS,     /* page versions kept alive only by old snapshots */
  MW_STAT_RELOCATIONS,         /* commits published after relocating new pages */
  MW_STAT_MERGES,              /* interior pages merged three ways */
  MW_STAT_TURNS,               /* hot-spot turns taken by this connection */
  MW_STAT_RELOCATE_REFUSED,    /* relocations refused (any reason) */
  MW_STAT_RELOCATE_LOCK_PAGE,  /* ... of which: the range held the lock-byte page */
  MW_STAT_RELOCATE_STALE,      /* ... of which: a later commit of a relocated snapshot */
  MW_STAT_RELOCATE_PAGE1,      /* ... of which: page 1 or the freelist changed */
  MW_STAT_RELOCATE_UNSAFE,     /* ... of which: a reference not found exactly once,
                                  an unknown or malformed page */
  MW_STAT_MERGE_REFUSED,       /* interior merges refused (commit refused) */
  MW_STAT_BACKGROUND_THREADS,  /* background worker threads of the process, shared by
                                  every open database (0 once none is open) */
  MW_STAT_COMPACTOR_RUNS,      /* steps the workers ran for this database's compactor
                                  (none while the database is idle) */
  MW_STAT_STORE_CHAINS,        /* pages with versions in the store beyond the database
                                  file's (garbage collection drops them once the file
                                  holds them and no snapshot needs older ones) */
  MW_STAT_LOG_ROOM_INLINE,     /* steps of log room that a commit zeroed itself, on the
                                  commit path (the grower and each log switch zero room
                                  ahead, off it; mw_mp=1: under the publication lock) */
  MW_STAT_LOG_SYNCS,           /* data syncs of the database's log issued by this
                                  process (one covers a group of commits; mw_mp=1:
                                  of every process) */
  MW_STAT_LOG_ROOM_CLAIMED,    /* mw_mp=1: steps of log room this process zeroed off the
                                  publication lock, claimed by its commits */
  MW_STAT_LOG_ROOM_CLAIMED_NOW, /* ... of which: zeroed by a commit that needed the
                                  room at once (the process's grower had not yet) */
  MW_STAT_REBASES,             /* commits published after merging, row by row, table
                                  leaf pages that commits since their snapshot changed
                                  (mw_rebase=1) */
  MW_STAT_REBASE_REFUSED,      /* leaf merges refused: a row both changed, a row read
                                  changed, overflow, or the rows do not fit */
  MW_STAT_LTX_TXID,            /* the replica stream's TXID of this connection's last
                                  commit (mw_ltx_dir=; 0: none) */
  MW_STAT_LTX_EMITTED,         /* the highest TXID the database's stream has written
                                  to the replica (0: none) */
  MW_STAT_COUNT_V1
};
#define MW_STAT_COUNT 32       /* room reserved in the array */

/* File control opcode: pArg is an int64_t[MW_STAT_COUNT], filled for the
** connection. Unknown entries are 0. */
#define MW_FCNTL_STATS 0x4d570001

struct sqlite3;

/* File control opcode (mw_rebase=1): pArg is an mw_rebase_rows. Declares the rowids
** of the rows the transaction read or wrote, inside an explicit transaction after its
** first write (SQLITE_MISUSE before: the declaration covers that write transaction and
** ends with it, committed or rolled back); calls add up. A transaction that declared promises that
** its statements touched no rows other than those: point statements by rowid, no
** range, scan, trigger or foreign-key check. Only such a transaction's commit is
** rebased when it loses on a table leaf page whose other rows changed, and only when
** every page it writes is a b-tree leaf. Rowids are compared whatever the table. */
typedef struct mw_rebase_rows {
  int n;
  const int64_t *rowids;
} mw_rebase_rows;
#define MW_FCNTL_REBASE_ROWS 0x4d570002

/* The file control above, for callers that cannot pass a struct (FFI). Returns an
** SQLite result code; SQLITE_NOTFOUND when zDb does not run on the engine. */
MW_API int mw_rebase_rows_declare(struct sqlite3 *db, const char *zDb, const int64_t *rowids,
                                  int n);

/* File control opcode: pArg is an int*; 1 marks the connection as one of several
** whose transactions an event loop interleaves on one thread (a binding's
** transactionAsync), 0 unmarks it. Such a connection never waits for the hot-spot
** turn (a wait would block the thread while the turn's holder, parked at an await on
** that same thread, can only go on once it returns): it stays optimistic, and its
** caller runs a lost transaction again. Per connection and schema. */
#define MW_FCNTL_EVENT_LOOP 0x4d570003

/* File control opcode: pArg is an int*; receives 1 when a commit of this connection
** returns only once its log record is synced (PRAGMA synchronous FULL or EXTRA, as the
** engine saw it), 0 when it is acknowledged once written (NORMAL, OFF). A binding
** commits off its event loop only what waits for a sync. Per connection and schema. */
#define MW_FCNTL_COMMIT_SYNCS 0x4d570004

/* Fills out[0..n-1] with the statistics of the connection's database zDb ("main"
** when NULL) and returns an SQLite result code. A database that does not run on the
** engine reports MW_STAT_ENGINE = 0 and zeros. */
MW_API int mw_stats(struct sqlite3 *db, const char *zDb, int64_t *out, int n);

/* sqlite3_db_config(db, op, value, out) for the options that take an int and an
** int* (SQLITE_DBCONFIG_ENABLE_FKEY, ..._DQS_DML, ..._DQS_DDL, ..._DEFENSIVE, ...),
** for callers that cannot call a variadic function (FFI). value < 0 leaves the
** option as it is; *out (when not NULL) receives its state. SQLITE_MISUSE for other
** options. */
MW_API int mw_db_config(struct sqlite3 *db, int op, int value, int *out);

/* Statements run off the caller's thread, for event loops (a COMMIT waits for its
** group's sync there, not on the loop). The caller must not use db until the statement
** ended, and must call mw_exec_wait(db) before sqlite3_close(db).
**  - mw_exec_tracked: sqlite3_exec(db, sql) on the calling thread (e.g. a runtime's
**    nonblocking FFI call), db marked busy meanwhile; returns its result code.
**    mw_commit_tracked(db) runs COMMIT so, with no argument in the caller's memory (a
**    runtime may free that memory under a call that outlives the caller's thread).
**  - mw_exec_async: the same on one of the engine's threads, then done(id, rc) on that
**    thread. Returns SQLITE_OK when queued (done will be called), else an error code
**    (done will not be called: run the statement some other way).
**  - mw_exec_async_start: the same without a callback; returns a record to poll, or NULL
**    (no thread or no memory: run it yourself). mw_exec_async_result(rec) returns -1
**    while it runs, then its result code, and frees rec (call it until it does). Once it
**    ended, one byte is written to wake (when not NULL): a pair of connected local sockets
**    from mw_wake_open, which gives the reading end's descriptor in *read_fd (NULL where
**    there are none: Windows). mw_wake_close lets the pair go: it is closed once no
**    statement started with it is left to write to it (stop reading it first).
**  - mw_exec_wait: returns once no statement of db runs or waits here. */
MW_API int mw_exec_tracked(struct sqlite3 *db, const char *sql);
MW_API int mw_commit_tracked(struct sqlite3 *db);
MW_API int mw_exec_async(struct sqlite3 *db, const char *sql, int64_t id,
                         void (*done)(int64_t id, int32_t rc));
MW_API void *mw_exec_async_start(struct sqlite3 *db, const char *sql, void *wake);
MW_API void *mw_wake_open(int32_t *read_fd);
MW_API void mw_wake_close(void *wake);
MW_API int mw_exec_async_result(void *rec);
MW_API void mw_exec_wait(struct sqlite3 *db);

#ifdef __cplusplus
}
#endif
#endif /* MULTIWRITER_H */
