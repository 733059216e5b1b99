/*
** async.c: statements run off the caller's thread, for bindings whose thread is an event
** loop (Bun, Deno). A COMMIT waits for its group's sync; run on the loop's thread it holds
** the loop for that long, and a loop with many transactions in flight (transactionAsync)
** commits them one at a time, so the group commit has nothing to group. Here each
** COMMIT runs on a thread of its own: many wait for the same sync, and the loop goes on.
**
**  - mw_exec_tracked(db, sql): sqlite3_exec on the calling thread, with db marked busy
**    meanwhile. mw_commit_tracked(db): the same for COMMIT, which Deno calls as a
**    nonblocking FFI call (its own thread pool). Such a call outlives a Worker
**    terminated meanwhile: the Worker's memory is freed under it (hence no SQL text
**    from JavaScript), and its thread ends (hence the write-lock count in the thread's
**    token, vfs/lane.c, not in its TLS).
**  - mw_exec_async(db, sql, id, done): the same on one of this file's threads, then
**    done(id, rc) there (for C callers with a thread-safe way back).
**  - mw_exec_async_start(db, sql, wake) / mw_exec_async_result(rec): the same without a
**    callback: once the statement ended, a byte goes to the wake pair (mw_wake_open: a
**    pair of local sockets whose reading end the caller's loop reads) and the caller
**    collects the result. Bun uses it (it has no nonblocking FFI calls): a thread-safe
**    callback into a Worker terminated with commits in flight crashes Bun (1.4.5), and
**    nothing runs in the Worker to say so (no JavaScript at termination; the thread's TLS
**    destructors come after its VM is gone); a byte to a socket nobody reads is harmless.
**    A pair is closed once its caller let it go (mw_wake_close) and no statement started
**    with it is left to write to it. What a terminated Worker leaves: its pair, if it was
**    in use then, and 8 bytes for each statement in flight.
**  - mw_exec_wait(db): blocks until no statement of db runs here: sqlite3_close must
**    wait for it (the binding's close() calls it first).
** The caller must not use db while a statement of it runs here (the binding's pooled
** connection is reserved for the transaction until its COMMIT returned). The engine
** ties nothing of a transaction to the thread that commits it: lane.c finds the
** databases of one transaction through the write-lock count of the thread that began
** writing it, so a COMMIT on another thread publishes the same way.
**
** Threads are started as jobs arrive (at most MW_ASYNC_THREADS, else jobs queue) and end
** after MW_ASYNC_IDLE_MS without work: nothing runs here once the binding is idle.
**
** Owns: the job queue, its threads, the busy marks. Never touches: the engine's state
** (only through SQLite, as any caller), the callbacks' memory.
*/
#include "engine.h"
#include "platform/crash.h"
#include "platform/platform.h"

#include <stdlib.h>
#include <string.h>

#ifndef MW_ASYNC_THREADS
#  define MW_ASYNC_THREADS 64
#endif
#define MW_ASYNC_IDLE_MS 2000

typedef void (*mw_async_done)(int64_t id, int32_t rc);

/* A wake pair (mw_wake_open): refs are the caller's (until mw_wake_close) and one per
** statement started with it; the last one closes the sockets. */
typedef struct mw_wake {
  int fds[2];
  int refs;
} mw_wake;

static void wake_unref(mw_wake *w) {
  if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  mw_wake_pair_close(w->fds);
  free(w);
}

/* What a polled statement leaves: state turns 1 (atomically, after rc) once it ended. */
typedef struct mw_async_rec {
  int32_t state;
  int32_t rc;
} mw_async_rec;

typedef struct job {
  struct job *next;
  sqlite3 *db;
  char *sql;
  int64_t id;
  mw_async_done done;          /* called with (id, rc), or 0 */
  mw_async_rec *rec;           /* or written, for mw_exec_async_result */
  mw_wake *wake;               /* then a byte to this pair (a reference of its own), or 0 */
} job;

typedef struct busy {
  struct busy *next;
  sqlite3 *db;
  int n;                       /* statements of db queued or running here */
} busy;

static mw_mutex mu = MW_MUTEX_INIT;
static mw_cond work_cv = MW_COND_INIT; /* a job was queued */
static mw_cond idle_cv = MW_COND_INIT; /* a busy mark went */
static job *head, *tail;
static busy *marks;
static int nthreads, nidle, nqueued;

/* ---------------------------------------------------------------- busy marks */

static busy *mark_find(sqlite3 *db) {
  for (busy *b = marks; b; b = b->next)
    if (b->db == db) return b;
  return 0;
}

/* Under mu. SQLITE_NOMEM when the mark cannot be made. */
static int mark_add(sqlite3 *db) {
  busy *b = mark_find(db);
  if (b == 0) {
    b = calloc(1, sizeof *b);
    if (b == 0) return SQLITE_NOMEM;
    b->db = db;
    b->next = marks;
    marks = b;
  }
  b->n++;
  return SQLITE_OK;
}

/* Under mu. */
static void mark_drop(sqlite3 *db) {
  busy **pp = &marks;
  while (*pp && (*pp)->db != db) pp = &(*pp)->next;
  busy *b = *pp;
  if (b == 0) return;
  if (--b->n == 0) {
    *pp = b->next;
    free(b);
    mw_cond_broadcast(&idle_cv);
  }
}

/* A child of fork has none of the parent's threads: it starts its own. Its queue
** and marks are the parent's copy (a job queued there ran in the parent); left as
** they are, a mark would keep mw_exec_wait waiting: the child starts empty. */
static void after_fork(void) {
  mw_mutex_init(&mu);
  mw_cond_init(&work_cv);
  mw_cond_init(&idle_cv);
  head = tail = 0;
  marks = 0;
  nthreads = nidle = nqueued = 0;
}

/* Under mu: registers after_fork once. */
static void once(void) {
  static int done;
  if (!done) {
    done = 1;
    mw_at_fork_child(after_fork);
  }
}

/* ---------------------------------------------------------------- the calls */

/* Runs a marked statement, then drops its mark (before any callback: the binding may
** close db from there on). */
static int exec_marked(sqlite3 *db, const char *sql) {
  mw_pause_point("exec_off_loop"); /* test/async-worker.test.ts: outlives its Worker */
  int rc = sqlite3_exec(db, sql, 0, 0, 0);
  mw_mutex_lock(&mu);
  mark_drop(db);
  mw_mutex_unlock(&mu);
  return rc;
}

MW_API int mw_exec_tracked(sqlite3 *db, const char *sql) {
  if (db == 0 || sql == 0) return SQLITE_MISUSE;
  mw_mutex_lock(&mu);
  int rc = mark_add(db);
  mw_mutex_unlock(&mu);
  if (rc != SQLITE_OK) return rc;
  return exec_marked(db, sql);
}

/* No argument in the caller's memory: a Deno Worker terminated during the call frees its
** JavaScript memory under it (sqlite3_exec reads its text again after the statement). */
MW_API int mw_commit_tracked(sqlite3 *db) { return mw_exec_tracked(db, "COMMIT"); }

MW_API void mw_exec_wait(sqlite3 *db) {
  mw_mutex_lock(&mu);
  while (db && mark_find(db)) mw_cond_wait(&idle_cv, &mu);
  mw_mutex_unlock(&mu);
}

static void *worker(void *unused) {
  (void)unused;
  mw_mutex_lock(&mu);
  for (;;) {
    while (head == 0) {
      nidle++;
      uint64_t t0 = mw_now_ns();
      mw_cond_timedwait_ms(&work_cv, &mu, MW_ASYNC_IDLE_MS);
      nidle--;
      if (head == 0 && mw_now_ns() - t0 >= (uint64_t)MW_ASYNC_IDLE_MS * 1000000u) {
        nthreads--;
        mw_mutex_unlock(&mu);
        return 0;
      }
    }
    job *j = head;
    head = j->next;
    if (head == 0) tail = 0;
    nqueued--;
    mw_mutex_unlock(&mu);
    int rc = exec_marked(j->db, j->sql);
    if (j->done) j->done(j->id, rc);
    if (j->rec) {
      j->rec->rc = rc;
      __atomic_store_n(&j->rec->state, 1, __ATOMIC_RELEASE);
      /* After the state: a reader woken finds the record ended. */
      if (j->wake) {
        mw_wake_send(j->wake->fds[1]);
        wake_unref(j->wake);
      }
    }
    free(j->sql);
    free(j);
    mw_mutex_lock(&mu);
  }
}

/* Queues sql for a thread; on SQLITE_OK the job is theirs (and rec with it). */
static int submit(sqlite3 *db, const char *sql, int64_t id, mw_async_done done, mw_async_rec *rec,
                  mw_wake *wake) {
  job *j = calloc(1, sizeof *j);
  size_t n = strlen(sql) + 1;
  char *copy = malloc(n);
  if (j == 0 || copy == 0) {
    free(j);
    free(copy);
    return SQLITE_NOMEM;
  }
  memcpy(copy, sql, n);
  j->db = db;
  j->sql = copy;
  j->id = id;
  j->done = done;
  j->rec = rec;
  j->wake = wake;
  mw_mutex_lock(&mu);
  once();
  int rc = mark_add(db);
  /* A thread for every job queued beyond the idle ones (one woken may not have taken
  ** its job yet): commits queued together run together and share a sync. */
  if (rc == SQLITE_OK && nqueued + 1 > nidle && nthreads < MW_ASYNC_THREADS) {
    mw_thread t;
    if (mw_thread_start(&t, worker, 0) == 0) {
      mw_thread_detach(t);
      nthreads++;
    } else if (nthreads == 0) {
      mark_drop(db);
      rc = SQLITE_CANTOPEN; /* no thread at all: the caller runs it itself */
    }
  }
  if (rc == SQLITE_OK) {
    if (tail) tail->next = j; else head = j;
    tail = j;
    nqueued++;
  }
  mw_mutex_unlock(&mu);
  /* Signalled once mu is free: a worker woken under it would wake only to wait for mu,
  ** and the event loop's thread, preempted by it, with it (loop lag p99 0.15 to 0.2 ms
  ** lower in bench/ts/async.ts). A worker that was not waiting finds the job when it
  ** next looks at the queue, under mu. */
  if (rc == SQLITE_OK) mw_cond_signal(&work_cv);
  if (rc != SQLITE_OK) {
    free(copy);
    free(j);
  }
  return rc;
}

MW_API int mw_exec_async(sqlite3 *db, const char *sql, int64_t id, mw_async_done done) {
  if (db == 0 || sql == 0) return SQLITE_MISUSE;
  return submit(db, sql, id, done, 0, 0);
}

MW_API void *mw_exec_async_start(sqlite3 *db, const char *sql, void *wake) {
  if (db == 0 || sql == 0) return 0;
  mw_async_rec *rec = calloc(1, sizeof *rec);
  if (rec == 0) return 0;
  mw_wake *w = wake;
  if (w) __atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED); /* the job's */
  if (submit(db, sql, 0, 0, rec, w) != SQLITE_OK) {
    if (w) wake_unref(w);
    free(rec);
    return 0;
  }
  return rec;
}

MW_API int mw_exec_async_result(void *p) {
  mw_async_rec *rec = p;
  if (rec == 0) return SQLITE_MISUSE;
  if (__atomic_load_n(&rec->state, __ATOMIC_ACQUIRE) == 0) return -1;
  int rc = rec->rc;
  free(rec);
  return rc;
}

MW_API void *mw_wake_open(int32_t *read_fd) {
  if (read_fd == 0) return 0;
  mw_wake *w = calloc(1, sizeof *w);
  if (w == 0) return 0;
  if (mw_wake_pair(w->fds) != 0) {
    free(w);
    return 0;
  }
  w->refs = 1;
  *read_fd = w->fds[0];
  return w;
}

MW_API void mw_wake_close(void *wake) {
  if (wake) wake_unref(wake);
}
