/*
** log_group.c: room in the log file and group commit (log.h: the commit path's calls).
**
** Owns: space reservation and preallocation in steps (the grower, a job of the shared
** background workers, adds room ahead of need), epoch-ordered assignment of offsets,
** staging of submitted records, the leader/follower writing of the contiguous prefix
** of staged records (one pwritev) and the group sync.
** Never touches: the log's header, recovery, the switch to a new file (log_switch.c)
** or the other processes' room (log_shared.c); the database file, the store, SQLite.
**
** Group commit is leader/follower: no background thread writes or syncs. Whoever finds the
** next record(s) staged and no write in progress writes the contiguous prefix of
** staged records with one pwritev; whoever waits for a written record while no sync is
** in progress runs the data sync for everything written so far. A lone committer so
** writes and syncs its own record on its own thread (one write, one sync, no hand-off);
** under load one thread syncs group n while another writes group n+1. The only
** background work of the log is the grower, a job of the shared background workers
** (background.c) that adds room to the file ahead of need; commits never wait for
** it unless the room is used up.
*/
#include "mw_internal.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "durability/log_private.h"
#include "platform/background.h"

#include <stdlib.h>
#include <string.h>

/* ---- space ------------------------------------------------------------------------- */

/* Makes the file at least `target` bytes long with [from, target) reserved on disk, and
** with syncs on, written with zeros: fallocate alone leaves the new extents "unwritten"
** (ext4, xfs), and then the first data sync after each record converts one, which is
** a journal commit: a sync that is no longer data-only. Writing the zeros once per step
** (the caller syncs them) keeps every later sync of a record data-only, as for a WAL
** that SQLite reuses. SQLITE_FULL when the disk has no room for it.
** The zeros go out in chunks of 64 KiB, each written back to the device before
** the next (mw_file_writeback, no device flush): the committers' data syncs run
** meanwhile on the same file, and one that found a whole step of dirty zeros would
** write all of it (a 2 ms stall every step, the p99.9 of one writer); now it waits
** for at most one chunk. Chunks of 256 KiB still left one writer's transfers with
** 119 to 374 commits over 0.6 ms in 4 s; chunks of 64 KiB, 72 to 148 (2026-12-03). */
#define GROW_IOV 1             /* a chunk: GROW_IOV * 64 KiB */
/* Returned by mw_log_grow_file and grow_locked when stop_growth cut the growth short. */
#define GROWTH_STOPPED SQLITE_INTERRUPT
int mw_log_grow_file(const mw_log *log, mw_fd fd, uint64_t from, uint64_t target, int stoppable) {
  static const unsigned char zeros[65536];
  int rc = mw_file_preallocate(fd, target, 0);
  if (rc != SQLITE_OK || log->sync_mode == 0) return rc;
  mw_iovec iov[GROW_IOV];
  for (int i = 0; i < GROW_IOV; i++) { iov[i].base = zeros; iov[i].len = sizeof(zeros); }
  while (rc == SQLITE_OK && from < target) {
    /* A close does not wait for room it will never use (the grower's two steps of zeros
    ** and their sync, most of a short-lived process's close). Only this process's own
    ** room (grow_locked): a switch's new file and a shared claim always finish. */
    if (stoppable && __atomic_load_n(&log->stop_growth, __ATOMIC_ACQUIRE)) return GROWTH_STOPPED;
    uint64_t n = target - from;
    int cnt = 0;
    while (cnt < GROW_IOV && n > 0) {
      iov[cnt].len = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
      n -= iov[cnt].len;
      cnt++;
    }
    uint64_t len = 0;
    for (int i = 0; i < cnt; i++) len += iov[i].len;
    rc = mw_file_pwritev(fd, iov, cnt, from, 0);
    if (rc == SQLITE_OK) rc = mw_file_writeback(fd, from, len, 0);
    for (int i = 0; i < cnt; i++) iov[i].len = sizeof(zeros);
    from += len;
  }
  return rc;
}

/* ---- records' buffers ---------------------------------------------------------------- */

/* A record's buffer holds its pages: tens of kilobytes for a transaction of a few pages.
** Freed after each write, it went back to the system with the pages freed beside it,
** and its memory faulted in again at the next commit, a page fault per 4 KiB. So the
** buffers of written records are kept for the next ones (up to MW_LOG_SPARES of at most
** MW_STAGED_KEEP bytes each), in slots taken and given back by atomic exchange: no lock
** on the commit path, and a slot is one thread's once taken. */
#define MW_STAGED_KEEP ((size_t)1 << 20)

static mw_staged *staged_new(mw_log *log, size_t len) {
  mw_staged *s = 0;
  for (int i = 0; i < MW_LOG_SPARES && s == 0; i++)
    if (__atomic_load_n(&log->spare[i], __ATOMIC_RELAXED))
      s = __atomic_exchange_n(&log->spare[i], (mw_staged *)0, __ATOMIC_ACQUIRE);
  if (s && s->cap < len) {
    free(s);
    s = 0;
  }
  if (s == 0) {
    /* Room for a record a little larger than this one, as the next may be. */
    size_t cap = len + len / 4;
    s = malloc(sizeof(*s) + cap);
    if (s == 0) return 0;
    s->cap = cap;
  }
  s->len = len;
  s->buf = (unsigned char *)(s + 1);
  return s;
}

static void staged_done(mw_log *log, mw_staged *s) {
  if (s->cap <= MW_STAGED_KEEP)
    for (int i = 0; i < MW_LOG_SPARES; i++) {
      mw_staged *none = 0;
      if (__atomic_compare_exchange_n(&log->spare[i], &none, s, 0, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED))
        return;
    }
  free(s);
}

void mw_log_free_spares(mw_log *log) {
  for (int i = 0; i < MW_LOG_SPARES; i++) {
    free(log->spare[i]);
    log->spare[i] = 0;
  }
}

/* ---- group commit ---------------------------------------------------------------- */

/* Writes the contiguous prefix of staged records while no one else writes, until
** everything before `until` is written (then the caller goes on to its sync or returns,
** and a waiting committer takes over the writing: every submitter waits, so staged
** records always have a thread that will write them). Called and returns with mu held;
** drops it around the system call. */
void mw_log_write_ready(mw_log *log, uint64_t until) {
  while (log->error == SQLITE_OK && !log->writing && !log->switching && log->staged &&
         log->staged->off == log->written_end && log->written_end < until) {
    mw_iovec iov[MW_LOG_MAX_IOV];
    mw_staged *first = log->staged, *last = 0, *r = first;
    uint64_t start = log->written_end, end = start;
    int n = 0;
    while (r && r->off == end && n < MW_LOG_MAX_IOV) {
      iov[n].base = r->buf;
      iov[n].len = r->len;
      n++;
      end += r->len;
      last = r;
      r = r->next;
    }
    last->next = 0;
    log->staged = r;
    log->writing = 1;
    log->write_gen = log->fd_gen;
    log->write_mirrored = log->mirror;
    mw_fd fd = log->fd, mfd = log->mirror ? log->mfd : MW_FD_INVALID;
    uint64_t phys = start - log->shift, mphys = start - log->mshift;
    mw_mutex_unlock(&log->mu);
    int rc = mw_file_pwritev(fd, iov, n, phys, 0);
    /* During a switch the bytes go to the new file too (a failure there is a failed
    ** write of the log: sticky, as the record is not in both files). */
    if (rc == SQLITE_OK && mfd != MW_FD_INVALID) rc = mw_file_pwritev(mfd, iov, n, mphys, 0);
    while (first) {
      mw_staged *next = first->next;
      staged_done(log, first);
      first = next;
    }
    mw_mutex_lock(&log->mu);
    log->writing = 0;
    if (rc != SQLITE_OK) set_error(log, rc);
    else log->written_end = end;
    __atomic_add_fetch(&log->write_seq, 1, __ATOMIC_RELEASE);
    /* Those waiting for a write, and one that may start the next sync. */
    mw_cond_broadcast(&log->cv);
    mw_cond_signal(&log->cv_sync);
  }
}

/* ---- the commit path ------------------------------------------------------------------ */

/* Grows the file so that the logical offset `need` fits: by whole steps (an empty log's
** first room by a quarter), so that most syncs have no size change to write; when the
** disk cannot give a whole step and exact_ok is set, just up to need. With mu held and
** no growth in progress; drops mu meanwhile (reservations that fit the room go on). A
** failed sync of the new room is sticky: it may have dropped records written but not
** yet synced; anything else (SQLITE_FULL first) is only returned. */
static int grow_locked(mw_log *log, uint64_t need, int exact_ok) {
  uint64_t need_phys = need - log->shift;
  uint64_t from = log->alloc_end - log->shift; /* no record is written past it */
  /* The first room of an empty log is a quarter step: a process that opens, commits
  ** once and closes zeroes 1 MiB, not 4, on its commit's path; the grower, woken by
  ** that commit, adds the lead behind it (and stops when the log closes). */
  uint64_t unit = from <= MW_LOG_HDR_SIZE ? log->step / 4 : log->step;
  uint64_t target = round_up(need_phys, unit);
  mw_fd fd = log->fd;
  log->growing = 1;
  mw_mutex_unlock(&log->mu);
  int rc = mw_log_grow_file(log, fd, from, target, 1);
  if (rc == SQLITE_FULL && exact_ok && target > need_phys) {
    target = need_phys;
    rc = mw_log_grow_file(log, fd, from, target, 1);
  }
  int sync_rc = SQLITE_OK;
  if (rc == SQLITE_OK && log->sync_mode != 0) sync_rc = mw_file_datasync(fd, log->full_fsync, 0);
  mw_mutex_lock(&log->mu);
  log->growing = 0;
  wake_all(log);
  if (sync_rc != SQLITE_OK) set_error(log, sync_rc);
  if (rc == SQLITE_OK) rc = sync_rc;
  /* No compaction switched the file meanwhile (it waits for !growing). */
  if (rc == SQLITE_OK && target + log->shift > log->alloc_end) log->alloc_end = target + log->shift;
  return rc;
}

static int room_is_low(const mw_log *log, uint64_t need, uint64_t quarters) {
  return log->alloc_end - need < log->step / 4 * quarters;
}
static uint64_t lead_target(const mw_log *log) {
  return log->assigned_end + log->reserved + log->step / 4 * GROW_LEAD;
}

uint64_t mw_log_grower_step(void *arg) {
  mw_log *log = arg;
  mw_mutex_lock(&log->mu);
  /* A failure here is nobody's commit: a reserve that finds no room grows (and
  ** reports SQLITE_FULL) itself; only a failed sync is sticky (in grow_locked). */
  if (log->error == SQLITE_OK && !log->switching && !log->hold_growth && !log->growing &&
      room_is_low(log, log->assigned_end + log->reserved, GROW_LEAD)) {
    (void)grow_locked(log, lead_target(log), 0);
  }
  mw_mutex_unlock(&log->mu);
  return 0; /* until the next reservation that finds the room low wakes it */
}

int mw_log_reserve(mw_log *log, uint64_t bytes) {
  mw_mutex_lock(&log->mu);
  int rc;
  for (;;) {
    rc = log->error;
    if (rc != SQLITE_OK) break;
    if (log->switching) {
      mw_cond_wait(&log->cv, &log->mu);
      continue;
    }
    rc = mw_log_ensure_idx(log, 1);
    if (rc != SQLITE_OK) break;
    uint64_t need = log->assigned_end + log->reserved + bytes;
    if (need <= log->alloc_end) {
      log->reserved += bytes;
      log->nres++;
      /* Grow ahead while there is still room, so that the committers behind this one
      ** do not wait for the zeros and their sync: the grower does it; without one,
      ** this committer (the reservation is already held, so a failure here, but a
      ** sticky one, is not this commit's). Not while a switch holds growth: the
      ** grower could do nothing, and every reservation woke a worker for nothing
      ** (issue 35: about one wake in five commits with a 1 MiB log limit); the first
      ** reservation after the switch wakes it if the room is still low. */
      if (!log->growing && !log->hold_growth && room_is_low(log, need, GROW_LEAD) &&
          log->grower_running) {
        mw_bg_wake(&log->grower, 0); /* background.c's lock is a leaf: safe under mu */
      } else if (!log->growing && !log->hold_growth && room_is_low(log, need, 1)) {
        log->room_inline++;
        (void)grow_locked(log, log->alloc_end + 1, 0);
      }
      rc = log->error;
      if (rc != SQLITE_OK) {
        log->reserved -= bytes;
        log->nres--;
      }
      break;
    }
    if (log->growing || log->hold_growth) {
      mw_cond_wait(&log->cv, &log->mu);
      continue;
    }
    log->room_inline++;
    rc = grow_locked(log, need, 1);
    if (rc != SQLITE_OK) break; /* not sticky unless the sync failed: nothing was assigned */
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

int mw_log_grow_ahead(mw_log *log) {
  mw_mutex_lock(&log->mu);
  int rc;
  for (;;) {
    rc = log->error;
    if (rc != SQLITE_OK) break;
    if (log->switching || log->hold_growth || log->growing) { /* wait, then look again */
      mw_cond_wait(&log->cv, &log->mu);
      continue;
    }
    if (room_is_low(log, log->assigned_end + log->reserved, GROW_LEAD))
      rc = grow_locked(log, lead_target(log), 0);
    break;
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

void mw_log_unreserve(mw_log *log, uint64_t bytes) {
  mw_mutex_lock(&log->mu);
  log->reserved = bytes > log->reserved ? 0 : log->reserved - bytes;
  if (log->nres) log->nres--;
  wake_all(log);
  mw_mutex_unlock(&log->mu);
}

uint64_t mw_log_assign(mw_log *log, uint64_t epoch, uint64_t bytes) {
  mw_mutex_lock(&log->mu);
  uint64_t off = log->assigned_end;
  /* Recovery replays consecutive epochs only: a gap would silently drop every later
  ** commit at the next open, so it poisons the log instead. */
  if (epoch != log->last_epoch + 1 || bytes > log->reserved) set_error(log, SQLITE_MISUSE);
  if (mw_log_ensure_idx(log, 1) != SQLITE_OK) set_error(log, SQLITE_NOMEM);
  if (log->nidx < log->capidx) {
    log->idx[log->nidx].epoch = epoch;
    log->idx[log->nidx].off = off;
    log->nidx++;
  }
  log->last_epoch = epoch;
  log->assigned_end += bytes;
  log->reserved = bytes > log->reserved ? 0 : log->reserved - bytes;
  if (log->nres) log->nres--;
  mw_mutex_unlock(&log->mu);
  return off;
}

int mw_log_submit(mw_log *log, uint64_t offset, uint64_t epoch, uint32_t db_pages,
                  uint32_t flags, int npages, const uint32_t *pgnos,
                  const unsigned char *const *images) {
  size_t len = (size_t)rec_size(log->page_size, npages < 0 ? 0 : (uint64_t)npages);
  mw_staged *s = npages < 0 ? 0 : staged_new(log, len);
  if (!s) {
    mw_mutex_lock(&log->mu);
    /* The offset is taken: without this record nothing after it can be written. */
    set_error(log, npages < 0 ? SQLITE_MISUSE : SQLITE_NOMEM);
    int rc = log->error;
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  s->next = 0;
  s->off = offset;
  mw_log_encode_record(log, s->buf, len, epoch, db_pages, flags, npages, pgnos, images);

  mw_mutex_lock(&log->mu);
  int rc = log->error;
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&log->mu);
    staged_done(log, s);
    return rc;
  }
  /* Insert in offset order; records usually arrive nearly in order, at the end. */
  mw_staged **pp = &log->staged;
  while (*pp && (*pp)->off < offset) pp = &(*pp)->next;
  s->next = *pp;
  *pp = s;
  mw_log_write_ready(log, offset + len);
  rc = log->error;
  mw_mutex_unlock(&log->mu);
  return rc;
}

/* Waits until everything before end_offset is written (durable = 0) or durable,
** taking the writer's or the syncer's part when nobody has it. */
/* Becomes the syncer (none running, no switch: the caller checked): this sync starts
** now, so it covers everything written before. Called and returns with mu held; drops
** it around the system calls. A failure is sticky (set_error). */
static void sync_locked(mw_log *log) {
  uint64_t target = log->written_end;
  mw_fd fd = log->fd, mfd = log->mirror ? log->mfd : MW_FD_INVALID;
  log->syncing = 1;
  log->sync_gen = log->fd_gen;
  log->sync_mirrored = log->mirror;
  log->syncs++;
  mw_mutex_unlock(&log->mu);
  int rc = mw_file_datasync(fd, log->full_fsync, 0);
  /* During a switch: the new file too, since the name may point at it after a
  ** crash (every byte written since the mirror began went to both files). */
  if (rc == SQLITE_OK && mfd != MW_FD_INVALID) rc = mw_file_datasync(mfd, log->full_fsync, 0);
  mw_mutex_lock(&log->mu);
  log->syncing = 0;
  if (rc != SQLITE_OK) set_error(log, rc);
  else if (target > log->synced_end) log->synced_end = target;
  wake_all(log);
}

/* A committer that finds its group's write in progress spins this many rounds (a few
** microseconds) for it to end before it sleeps: such a write of small records takes
** about as long as the sleep and wake-up would (issue 35: with 16 writers on the hot
** row, 44% of the context switches were committers sleeping for the group's write). */
#ifndef MW_LOG_WRITE_SPINS
#  define MW_LOG_WRITE_SPINS 400
#endif
static inline void cpu_relax(void) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_ia32_pause();
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  __asm__ __volatile__("yield");
#endif
}

static int wait_for(mw_log *log, uint64_t end_offset, int durable) {
  mw_mutex_lock(&log->mu);
  int rc, spun = 0;
  for (;;) {
    rc = log->error;
    if (rc != SQLITE_OK) break;
    if (durable ? log->synced_end >= end_offset : log->written_end >= end_offset) break;
    if (!log->writing && !log->switching && log->staged && log->staged->off == log->written_end &&
        log->written_end < end_offset) {
      mw_log_write_ready(log, end_offset);
      continue;
    }
    if (durable && !log->syncing && !log->switching && log->written_end >= end_offset) {
      sync_locked(log);
      continue;
    }
    /* Its record is in the write in progress (or behind it): spin once, briefly, for
    ** that write to end (write_seq moves), then look again. */
    if (!spun && log->writing && log->written_end < end_offset) {
      spun = 1;
      uint64_t seq = __atomic_load_n(&log->write_seq, __ATOMIC_ACQUIRE);
      mw_mutex_unlock(&log->mu);
      for (int i = 0; i < MW_LOG_WRITE_SPINS && __atomic_load_n(&log->write_seq, __ATOMIC_ACQUIRE) == seq; i++)
        cpu_relax();
      mw_mutex_lock(&log->mu);
      if (__atomic_load_n(&log->write_seq, __ATOMIC_ACQUIRE) != seq) log->write_spin_hits++;
      continue;
    }
    /* Written, not yet synced: only a sync's end (or one write's end, to elect a
    ** syncer) concerns it. */
    mw_cond_wait(durable && log->written_end >= end_offset ? &log->cv_sync : &log->cv, &log->mu);
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

int mw_log_wait_durable(mw_log *log, uint64_t end_offset) {
  /* Without syncs (synchronous=OFF) a commit still waits for its write, as stock
  ** SQLite returns from COMMIT only after write(): a killed process loses nothing. */
  return wait_for(log, end_offset, log->sync_mode != 0);
}

int mw_log_sync_now(mw_log *log) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  /* One in progress may have started before the caller's reason to sync: wait. */
  while (rc == SQLITE_OK && log->sync_mode != 0 && (log->syncing || log->switching)) {
    mw_cond_wait(&log->cv, &log->mu);
    rc = log->error;
  }
  if (rc == SQLITE_OK && log->sync_mode != 0) {
    sync_locked(log);
    rc = log->error;
  }
  mw_mutex_unlock(&log->mu);
  return rc;
}

void mw_log_note_durable(mw_log *log, uint64_t end) {
  mw_mutex_lock(&log->mu);
  if (end > log->written_end) end = log->written_end;
  if (log->error == SQLITE_OK && end > log->synced_end) {
    log->synced_end = end;
    wake_all(log);
  }
  mw_mutex_unlock(&log->mu);
}

uint64_t mw_log_durable_end(mw_log *log) {
  mw_mutex_lock(&log->mu);
  uint64_t end = log->error == SQLITE_OK && log->sync_mode != 0 ? log->synced_end : 0;
  mw_mutex_unlock(&log->mu);
  return end;
}

void mw_log_ack_ends(mw_log *log, uint64_t *pSynced, uint64_t *pWritten) {
  mw_mutex_lock(&log->mu);
  int ok = log->error == SQLITE_OK;
  *pSynced = ok && log->sync_mode != 0 ? log->synced_end : 0;
  *pWritten = ok ? log->written_end : 0;
  mw_mutex_unlock(&log->mu);
}

int mw_log_wait_written(mw_log *log, uint64_t end_offset) {
  return wait_for(log, end_offset, 0);
}
