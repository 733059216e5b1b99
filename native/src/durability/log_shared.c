/*
** log_shared.c: the log shared by several processes (mw_mp=1, mp.c drives it):
** following the records other processes published, reading their page images on
** demand, the room claimed and zeroed by the holder of the publication lock, and the
** reopen after another process switched the file.
**
** Owns: nothing of its own: the calls of log.h that only multi-process mode makes.
** Never touches: the shared memory file and the process table (mp.c), the database
** file, the store, SQLite.
*/
#include "mw_internal.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "durability/log_private.h"

#include <stdlib.h>
#include <string.h>

int mw_log_follow(mw_log *log, uint64_t end, mw_log_follow_fn fn, void *ctx) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  uint64_t off = log->assigned_end, shift = log->shift, expect = log->last_epoch + 1;
  mw_fd fd = log->fd;
  mw_mutex_unlock(&log->mu);
  rec_reader r = { 0 };
  while (rc == SQLITE_OK && off < end) {
    unsigned char h[MW_REC_HDR_SIZE];
    uint64_t len = 0;
    rc = mw_log_read_page_list(log, fd, &r, off - shift, off, end - off, expect, h, &len);
    /* Published records are whole: one that is not means the log was damaged. */
    if (rc == SQLITE_DONE) rc = SQLITE_CORRUPT;
    if (rc != SQLITE_OK) break;
    rc = fn(ctx, expect, get32(h + MW_REC_DBPAGES), get32(h + MW_REC_FLAGS),
            (int)get32(h + MW_REC_NPAGES), r.pgnos, r.ats);
    if (rc != SQLITE_OK) break;
    mw_mutex_lock(&log->mu);
    rc = mw_log_ensure_idx(log, 1);
    if (rc == SQLITE_OK) {
      log->idx[log->nidx].epoch = expect;
      log->idx[log->nidx].off = off;
      log->nidx++;
      log->last_epoch = expect;
      log->assigned_end = off + len;
      if (log->written_end < log->assigned_end) log->written_end = log->assigned_end;
    } else {
      /* The record was applied: without its entry the log no longer matches. */
      set_error(log, rc);
    }
    mw_mutex_unlock(&log->mu);
    off += len;
    expect++;
  }
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  mw_log_rec_reader_free(&r);
  return rc;
}

int mw_log_read_image(mw_log *log, uint64_t at, unsigned char *buf) {
  mw_mutex_lock(&log->mu);
  /* Not while a switch replaces the file (the old descriptor is closed meanwhile); a
  ** switch waits for the reads in progress, so the descriptor and shift taken here stay
  ** valid until the read is counted out. The read itself runs without the mutex, so
  ** lazy loads go on in parallel with each other and with commits' bookkeeping. */
  while (log->switching) mw_cond_wait(&log->cv, &log->mu);
  int rc = log->error;
  mw_fd fd = log->fd;
  uint64_t shift = log->shift;
  size_t len = (size_t)log->page_size;
  if (rc == SQLITE_OK && at < shift + MW_LOG_HDR_SIZE) rc = SQLITE_NOTFOUND;
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  log->reading++;
  mw_mutex_unlock(&log->mu);
  rc = mw_file_pread(fd, buf, len, at - shift, 0);
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
  mw_mutex_lock(&log->mu);
  if (--log->reading == 0) wake_all(log);
  mw_mutex_unlock(&log->mu);
  return rc;
}

/* Shared room (mw_mp=1): called with mu held and no growth in progress; zeroes and
** syncs the file's bytes [from, to) without the mutex, marked as growing so that a
** switch waits for it, and returns with mu released. */
static int zero_room_release(mw_log *log, mw_fd fd, uint64_t from, uint64_t to) {
  log->growing = 1;
  mw_mutex_unlock(&log->mu);
  int rc = mw_log_grow_file(log, fd, from, to, 0);
  if (rc == SQLITE_OK) rc = mw_file_datasync(fd, log->full_fsync, 0);
  mw_mutex_lock(&log->mu);
  log->growing = 0;
  wake_all(log);
  mw_mutex_unlock(&log->mu);
  return rc;
}

int mw_log_room_shared(mw_log *log, uint64_t *pAllocEnd) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  uint64_t end = log->assigned_end, have = *pAllocEnd;
  if (have < end) have = end;
  if (rc != SQLITE_OK || log->sync_mode == 0 || log->switching || log->hold_growth || log->growing ||
      have - end >= log->step / 2) {
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  uint64_t shift = log->shift;
  /* An empty log's first room is a quarter step, as in grow_locked: a process that
  ** opens, commits once and closes zeroes 1 MiB under the lock, not two steps (the
  ** next commit finds less than half a step left and claims a step for the grower). */
  uint64_t target = have - shift <= MW_LOG_HDR_SIZE ? round_up(end - shift, log->step / 4)
                                                    : round_up(end - shift + log->step, log->step);
  log->room_inline++;
  rc = zero_room_release(log, log->fd, have - shift, target);
  if (rc == SQLITE_OK) *pAllocEnd = target + shift;
  return rc;
}

uint64_t mw_log_room_target(mw_log *log, uint64_t from) {
  mw_mutex_lock(&log->mu);
  uint64_t shift = log->shift;
  mw_mutex_unlock(&log->mu);
  return round_up(from - shift + log->step, log->step) + shift;
}

uint64_t mw_log_room_step(mw_log *log) { return log->step; }

int mw_log_zero_shared(mw_log *log, uint64_t from, uint64_t to) {
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  while (rc == SQLITE_OK && (log->growing || log->switching)) {
    mw_cond_wait(&log->cv, &log->mu);
    rc = log->error;
  }
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&log->mu);
    return rc;
  }
  return zero_room_release(log, log->fd, from - log->shift, to - log->shift);
}

int mw_log_reopen_shared(mw_log *log, uint64_t shift) {
  mw_fd fd = MW_FD_INVALID;
  int rc = mw_file_open(log->path, 0, &fd, 0);
  if (rc != SQLITE_OK) return rc;
  unsigned char h[MW_LOG_HDR_SIZE];
  rc = mw_file_pread(fd, h, sizeof(h), 0, 0);
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_CORRUPT;
  /* The same log rewritten by a compaction: same salt and page size, a sound header
  ** (of this build's version: a switch writes no other). */
  if (rc == SQLITE_OK &&
      (memcmp(h + MW_LOG_HDR_MAGIC, MW_LOG_MAGIC, 8) != 0 ||
       get32(h + MW_LOG_HDR_VERSION) != MW_LOG_VERSION || get32(h + MW_LOG_HDR_BOM) != MW_LOG_BOM ||
       get64(h + MW_LOG_HDR_CKSUM) != mw_log_checksum(0, h, MW_LOG_HDR_CKSUM) ||
       get32(h + MW_LOG_HDR_PAGE_SIZE) != (uint32_t)log->page_size ||
       get64(h + MW_LOG_HDR_SALT) != log->salt || get32(h + MW_LOG_HDR_FEATURES) != log->features))
    rc = SQLITE_CORRUPT;
  uint64_t base = get64(h + MW_LOG_HDR_BASE);
  mw_mutex_lock(&log->mu);
  if (rc == SQLITE_OK) rc = log->error;
  /* Every record the new file dropped must have been applied here already: its
  ** first record (base + 1) starts at or before this process's end. */
  if (rc == SQLITE_OK && (base > log->last_epoch || base < log->base ||
                          shift + MW_LOG_HDR_SIZE > log->assigned_end))
    rc = SQLITE_CORRUPT;
  if (rc == SQLITE_OK) {
    while (log->switching) mw_cond_wait(&log->cv, &log->mu);
    log->switching = 1;
    while (log->writing || log->syncing || log->growing || log->reading) mw_cond_wait(&log->cv, &log->mu);
    mw_fd old = log->fd;
    log->fd = fd;
    fd = old;
    log->shift = shift;
    log->base = base;
    __atomic_store_n(&log->version, MW_LOG_VERSION, __ATOMIC_RELAXED);
    log->stream_txid = get64(h + MW_LOG_HDR_TXID); /* the stream's TXIDs from the new base */
    size_t keep = 0;
    while (keep < log->nidx && log->idx[keep].epoch <= base) keep++;
    memmove(log->idx, log->idx + keep, (log->nidx - keep) * sizeof(*log->idx));
    log->nidx -= keep;
    log->switching = 0;
    wake_all(log);
  }
  mw_mutex_unlock(&log->mu);
  mw_file_close(fd); /* the old file on success, the new one on failure */
  return rc;
}
