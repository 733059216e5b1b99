/*
** background.c: the process's background workers, shared by every open database.
**
** The engine has periodic and on-demand work that no committer should wait for: a
** database's compactor (compact.c: compaction, garbage collection) and its log's
** grower (log.c: room ahead of need). Each is a job (mw_bg_job) that a small pool of
** threads runs one step at a time. A step returns when it wants to run again (a
** delay) or 0 for "only when woken": an idle database so costs no thread and no
** wake-up at all, and 10,000 open databases cost at most MW_BG_WORKERS threads.
**
** Rules:
**  - one job never runs on two workers at once (a step sees its own state alone);
**  - mw_bg_remove waits for a running step to end, and after it the job never runs
**    again, so its owner may free what the step uses; it must not be called from a
**    step (it would wait for itself);
**  - the workers are started as jobs arrive (up to MW_BG_WORKERS) and stopped and
**    joined when the last job is removed: nothing of the engine runs once every
**    database is closed (a library unloaded after that is safe).
** A step may block (a compaction syncs the database file): the other workers go on
** with the other jobs. No step waits for another job, so none can deadlock the pool.
**
** Owns: the job list, the worker threads, bg_runs, bg_signals. Never touches: databases, logs,
** SQLite (the steps do, in their own files).
*/
#include "platform/background.h"

#ifndef MW_BG_WORKERS
#  define MW_BG_WORKERS 4
#endif

static mw_mutex bg_mu = MW_MUTEX_INIT;
static mw_cond bg_cv = MW_COND_INIT;  /* a job became due, a step ended, a generation ended */
static mw_bg_job *bg_jobs;            /* every registered job */
static int bg_njobs;
static mw_thread bg_threads[MW_BG_WORKERS];
static int bg_nthreads;
static uint64_t bg_generation;        /* workers of an older generation stop */
static int64_t bg_runs;               /* steps run since the process started */
static int64_t bg_signals;            /* wakes that woke the workers (mw_bg_wake) */

/* The job that is due first, or NULL when none is scheduled and free. */
static mw_bg_job *earliest_locked(void) {
  mw_bg_job *best = 0;
  for (mw_bg_job *j = bg_jobs; j; j = j->next)
    if (j->due && !j->running && (!best || j->due < best->due)) best = j;
  return best;
}

static void *worker_main(void *arg) {
  uint64_t gen = (uint64_t)(uintptr_t)arg;
  mw_mutex_lock(&bg_mu);
  while (gen == bg_generation) {
    mw_bg_job *j = earliest_locked();
    uint64_t now = mw_now_ns();
    if (!j) {
      mw_cond_wait(&bg_cv, &bg_mu);
      continue;
    }
    if (j->due > now) {
      uint64_t ms = (j->due - now) / 1000000u + 1;
      mw_cond_timedwait_ms(&bg_cv, &bg_mu, ms > 1000 ? 1000 : (int)ms);
      continue;
    }
    j->running = 1;
    j->due = 0;
    bg_runs++;
    j->runs++;
    mw_mutex_unlock(&bg_mu);
    uint64_t again = j->step(j->arg);
    mw_mutex_lock(&bg_mu);
    j->running = 0;
    /* A wake during the step already set a due time: the earlier one stands. */
    if (again) {
      uint64_t at = mw_now_ns() + again;
      if (!j->due || at < j->due) j->due = at;
    }
    mw_cond_broadcast(&bg_cv);
  }
  mw_mutex_unlock(&bg_mu);
  return 0;
}

/* A child made by fork() has none of the workers (only the forking thread is copied),
** and bg_mu and bg_cv may have been copied in use: it starts with an empty pool. The
** jobs of the databases it inherited never run there (db.c leaves those alone). */
static int bg_fork_hooked;
static void bg_forked(void) {
  mw_mutex_init(&bg_mu);
  mw_cond_init(&bg_cv);
  bg_jobs = 0;
  bg_njobs = 0;
  bg_nthreads = 0;
  bg_generation++;
}

int mw_bg_add(mw_bg_job *job, uint64_t (*step)(void *), void *arg, uint64_t first_ns) {
  job->step = step;
  job->arg = arg;
  job->running = 0;
  job->runs = 0;
  job->due = first_ns ? mw_now_ns() + first_ns : 0;
  mw_mutex_lock(&bg_mu);
  if (!bg_fork_hooked) {
    bg_fork_hooked = 1;
    mw_at_fork_child(bg_forked);
  }
  int want = bg_njobs + 1 < MW_BG_WORKERS ? bg_njobs + 1 : MW_BG_WORKERS;
  while (bg_nthreads < want) {
    if (mw_thread_start(&bg_threads[bg_nthreads], worker_main,
                        (void *)(uintptr_t)bg_generation) != 0) break;
    bg_nthreads++;
  }
  /* No thread at all to be had: the job cannot run; the caller decides what then. */
  if (bg_nthreads == 0) {
    mw_mutex_unlock(&bg_mu);
    return SQLITE_CANTOPEN;
  }
  job->next = bg_jobs;
  bg_jobs = job;
  bg_njobs++;
  job->added = 1;
  mw_cond_broadcast(&bg_cv);
  mw_mutex_unlock(&bg_mu);
  return SQLITE_OK;
}

/* Wakes the workers only when the job became due earlier than the workers know: not
** while it runs (its worker looks at the due time when the step ends, and wakes the
** others then), not when it was already due as early. A committer that passes the
** log's limit kicks the compactor at every commit while one compaction runs: each
** such wake used to broadcast bg_cv, waking an idle worker for nothing (a context
** switch and bg_mu taken per commit, issue 35). */
void mw_bg_wake(mw_bg_job *job, uint64_t delay_ns) {
  mw_mutex_lock(&bg_mu);
  if (job->added) {
    uint64_t at = mw_now_ns() + delay_ns;
    if (!job->due || at < job->due) {
      job->due = at;
      if (!job->running) {
        bg_signals++;
        mw_cond_broadcast(&bg_cv);
      }
    }
  }
  mw_mutex_unlock(&bg_mu);
}

int64_t mw_bg_wake_signals(void) {
  mw_mutex_lock(&bg_mu);
  int64_t n = bg_signals;
  mw_mutex_unlock(&bg_mu);
  return n;
}

void mw_bg_remove(mw_bg_job *job) {
  mw_thread stop[MW_BG_WORKERS];
  int nstop = 0;
  mw_mutex_lock(&bg_mu);
  if (!job->added) {
    mw_mutex_unlock(&bg_mu);
    return;
  }
  for (mw_bg_job **pp = &bg_jobs; *pp; pp = &(*pp)->next)
    if (*pp == job) { *pp = job->next; break; }
  while (job->running) mw_cond_wait(&bg_cv, &bg_mu);
  job->added = 0;
  job->due = 0;
  if (--bg_njobs == 0) {
    /* The last job: this generation of workers ends; a job added meanwhile starts
    ** the next one (its workers never see this generation's stop). */
    bg_generation++;
    for (int i = 0; i < bg_nthreads; i++) stop[nstop++] = bg_threads[i];
    bg_nthreads = 0;
    mw_cond_broadcast(&bg_cv);
  }
  mw_mutex_unlock(&bg_mu);
  for (int i = 0; i < nstop; i++) mw_thread_join(stop[i]);
}

void mw_bg_counts(int64_t *pThreads, int64_t *pRuns) {
  mw_mutex_lock(&bg_mu);
  if (pThreads) *pThreads = bg_nthreads;
  if (pRuns) *pRuns = bg_runs;
  mw_mutex_unlock(&bg_mu);
}

int64_t mw_bg_job_runs(mw_bg_job *job) {
  mw_mutex_lock(&bg_mu);
  int64_t n = job->runs;
  mw_mutex_unlock(&bg_mu);
  return n;
}
