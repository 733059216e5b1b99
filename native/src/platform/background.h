/*
** background.h: the background workers shared by every open database of the
** process (background.c). A job is one piece of recurring work (a compactor, a
** log's grower) that the workers run one step at a time.
*/
#ifndef MW_BACKGROUND_H
#define MW_BACKGROUND_H

#include "mw_internal.h"

typedef struct mw_bg_job {
  /* Runs one step; returns the delay in ns before the next one, or 0 to run again
  ** only when woken (mw_bg_wake). Runs on a worker thread, never on two at once. */
  uint64_t (*step)(void *arg);
  void *arg;
  /* The rest belongs to background.c (under its mutex). */
  struct mw_bg_job *next;
  uint64_t due;                /* monotonic ns when the next step is due, 0 = not scheduled */
  int running;
  int added;
  int64_t runs;                /* steps run */
} mw_bg_job;

/* Registers a job (memory owned by the caller, kept until mw_bg_remove), first due
** after first_ns (0: only when woken), starting a worker when there are fewer than
** the jobs (at most MW_BG_WORKERS). SQLITE_CANTOPEN when no worker thread exists or
** can be started: the job was not added. */
int mw_bg_add(mw_bg_job *job, uint64_t (*step)(void *), void *arg, uint64_t first_ns);
/* Makes the job due within delay_ns (an earlier due time stands). No-op for a job
** not added. Signals the workers only when the job is not running and its due time
** moved earlier. */
void mw_bg_wake(mw_bg_job *job, uint64_t delay_ns);
/* The wakes that signalled the workers since the process started (tests). */
int64_t mw_bg_wake_signals(void);
/* Unregisters the job, waiting for a step in progress; it never runs again. The
** last removal stops and joins the workers. Never call it from a step. */
void mw_bg_remove(mw_bg_job *job);
/* The workers running now and the steps run since the process started (tests,
** statistics). */
void mw_bg_counts(int64_t *pThreads, int64_t *pRuns);
/* The steps run for one job. */
int64_t mw_bg_job_runs(mw_bg_job *job);

#endif /* MW_BACKGROUND_H */
