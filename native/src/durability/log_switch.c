/*
** log_switch.c: the switch to a shorter log after a compaction (mw_log_compacted),
** and starting the log again in place (mw_log_restart, mw_log_emptied).
**
** Owns: the temporary "<db>-mw.tmp" and the spare "<db>-mw.spare", the copy of the
** records a compaction keeps, the mirror (every write and sync goes to both files
** while the switch runs), the rename, the directory sync and the descriptor swap.
** Never touches: the commit path's room and staging (log_group.c) but through its
** helpers, recovery (log.c), the database file, the store, SQLite.
**
** Compaction copies the records it keeps into "<db>-mw.tmp" while commits go on. Then
** (one process) it holds growth while it gives the new file the old one's room, turns
** on the mirror (every write from then on goes to both files, every sync syncs both),
** copies the bytes written before the mirror, syncs the new file, renames it, syncs the
** directory and swaps the descriptor: committers never wait for it, and whichever file
** the name points at after a crash holds every acknowledged record (switch_mirrored).
** Only reservations that find no room wait, for the end of the held growth. With
** mw_mp=1 (a hook) other processes write the log through their own descriptors: there
** it stops writes, syncs and growth (not assignment, staging or reservations that fit:
** they only need logical offsets), waits for those in flight, copies the rest, syncs,
** renames, syncs the directory and switches the descriptor; committers then wait if
** they need to write or sync during that switch.
*/
#include "mw_internal.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "durability/log_private.h"
#include "platform/crash.h"

#include <stdlib.h>
#include <string.h>

/* ---- compaction ------------------------------------------------------------------------ */

/* Copies the logical range [from, to) of the current log to physical offset dst of fd. */
static int copy_range(mw_fd src, uint64_t shift, mw_fd dst_fd, uint64_t dst, uint64_t from,
                      uint64_t to, unsigned char *buf) {
  while (from < to) {
    size_t n = to - from < MW_LOG_COPY_CHUNK ? (size_t)(to - from) : MW_LOG_COPY_CHUNK;
    int rc = mw_file_pread(src, buf, n, from - shift, 0);
    if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_IOERR_READ;
    if (rc == SQLITE_OK) rc = mw_file_pwrite(dst_fd, buf, n, dst, 0);
    if (rc != SQLITE_OK) return rc;
    from += n;
    dst += n;
  }
  return SQLITE_OK;
}

/* The new file of a switch (at tmp_path, its bytes written) made durable. */
static int sync_new_file(const mw_log *log, mw_fd tfd) {
  int rc = mw_file_sync(tfd, 0);
  if (rc == SQLITE_OK && log->full_fsync) rc = mw_file_datasync(tfd, 1, 0);
  return rc;
}

/* The end of a switch, both kinds, after sync_new_file (rc its result): the file
** replaced given the spare's name (an older spare not taken goes; a process may still
** have it open: its name is all that goes), the new file renamed over the log's name,
** the directory synced (its result in *pDrc). *pRenamed: the name holds the new file.
** No sync for the spare's name: a spare lost in a crash is only not reused. */
static int rename_new_file(mw_log *log, int rc, int *pRenamed, int *pDrc) {
  *pRenamed = 0;
  *pDrc = SQLITE_OK;
  int linked = rc == SQLITE_OK && (log->shared || log->recycle) &&
               mw_file_delete(log->spare_path, 0) == SQLITE_OK &&
               mw_file_link(log->path, log->spare_path, 0) == SQLITE_OK;
  if (linked && log->shared) mw_crash_point("mp_switch_linked"); /* the spare names the log in use */
  if (rc == SQLITE_OK) rc = mw_file_rename(log->tmp_path, log->path, 0);
  if (rc == SQLITE_OK) {
    *pRenamed = 1;
    mw_crash_point("log_switch_renamed");
    *pDrc = mw_dir_sync(log->path, 0);
  } else if (linked && mw_file_delete(log->spare_path, 0) != SQLITE_OK) {
    log->recycle = 0; /* the spare names the log in use: never reuse it (mw_mp=1: spare_is_log) */
  }
  return rc;
}

/* After a switch, without mu: closes the file that lost (the old one once the new one
** was renamed over it; else the new one, whose name is deleted). */
static void close_replaced(const mw_log *log, int renamed, mw_fd old_fd, mw_fd tfd) {
  if (renamed) {
    mw_file_close(old_fd);
  } else {
    if (tfd != MW_FD_INVALID) mw_file_close(tfd);
    mw_file_delete(log->tmp_path, 0); /* best effort: the next open deletes it too */
  }
}

/* After the rename (mu held): every later write goes to the new file. Without the
** directory sync (drc) a power loss may bring the old log back without the commits
** written from now on: no commit may be acknowledged any more. */
static int adopt_new_file_locked(mw_log *log, mw_fd tfd, uint64_t base, size_t keep,
                                 uint64_t new_shift, uint64_t alloc_end, uint64_t w2, int drc) {
  log->fd = tfd;
  log->shift = new_shift;
  log->stream_txid = mw_log_txid_at(log, base);
  log->base = base;
  __atomic_store_n(&log->version, MW_LOG_VERSION, __ATOMIC_RELAXED); /* the new file's header */
  log->alloc_end = alloc_end;
  if (w2 > log->synced_end) log->synced_end = w2; /* all of it was synced in the new file */
  memmove(log->idx, log->idx + keep, (log->nidx - keep) * sizeof(*log->idx));
  log->nidx -= keep;
  if (drc != SQLITE_OK) set_error(log, drc);
  return drc;
}

/* The switch of one process (called by switch_log after phase 1, with mu not held;
** returns with mu held): writes and syncs go on in the old file, and follow into the
** new one, while the slow parts run; committers never wait for the switch.
**
** Phase 2: growth held (the old file's room is final), the new file gets at least as
** much room, zeroed. Phase 3: the mirror: from now on every write goes to both files
** and every sync syncs both; once the last write that started before is over, the
** bytes below w2 (written before the mirror) are copied, and the new file is synced:
** it now holds every byte written, durably as far as any sync acknowledged it (what
** the copy holds by this sync, what came later by the committers' syncs of both
** files). Then the rename and the directory sync: whichever file the name points at
** after a crash holds every acknowledged record. Phase 4, the swap: writes and syncs
** starting now use the new file only; those still on the old one are waited for
** before it is closed (the compactor waits, committers do not). */
static int switch_mirrored(mw_log *log, uint64_t base, size_t keep, uint64_t new_shift,
                           uint64_t alloc1, uint64_t w1, mw_fd tfd, unsigned char *buf, int rc) {
  mw_fd old_fd = log->fd;
  uint64_t old_shift = log->shift;
  uint64_t alloc_phys = alloc1, w2 = w1;
  if (rc == SQLITE_OK) {
    mw_mutex_lock(&log->mu);
    log->hold_growth = 1;
    while (log->growing) mw_cond_wait(&log->cv, &log->mu);
    /* No record is written past alloc_end until the swap: the new file covers it. */
    if (log->alloc_end - new_shift > alloc_phys) alloc_phys = log->alloc_end - new_shift;
    rc = log->error;
    mw_mutex_unlock(&log->mu);
  }
  if (rc == SQLITE_OK && alloc_phys > alloc1) rc = mw_log_grow_file(log, tfd, alloc1, alloc_phys, 0);
  if (rc == SQLITE_OK) {
    mw_mutex_lock(&log->mu);
    log->mfd = tfd;
    log->mshift = new_shift;
    log->mirror = 1;
    while (log->writing && !log->write_mirrored) mw_cond_wait(&log->cv, &log->mu);
    w2 = log->written_end; /* every byte from here on is written to both files */
    rc = log->error;
    mw_mutex_unlock(&log->mu);
  }
  if (rc == SQLITE_OK) mw_crash_point("log_switch_mirror");
  if (rc == SQLITE_OK) rc = copy_range(old_fd, old_shift, tfd, w1 - new_shift, w1, w2, buf);
  free(buf);
  if (rc == SQLITE_OK) rc = sync_new_file(log, tfd);
  int renamed = 0, drc = SQLITE_OK;
  rc = rename_new_file(log, rc, &renamed, &drc);

  mw_mutex_lock(&log->mu);
  if (renamed) {
    rc = adopt_new_file_locked(log, tfd, base, keep, new_shift, alloc_phys + new_shift, w2, drc);
    log->fd_gen++;
  }
  log->mirror = 0;
  log->mfd = MW_FD_INVALID;
  log->hold_growth = 0;
  wake_all(log);
  /* The descriptor to close is still in use by writes and syncs that started before:
  ** the old file's after a rename, the new file's (mirrored ones) otherwise. */
  while ((log->writing && (renamed ? log->write_gen != log->fd_gen : log->write_mirrored)) ||
         (log->syncing && (renamed ? log->sync_gen != log->fd_gen : log->sync_mirrored)))
    mw_cond_wait(&log->cv, &log->mu);
  mw_mutex_unlock(&log->mu);
  close_replaced(log, renamed, old_fd, tfd);
  mw_mutex_lock(&log->mu);
  return rc;
}

/* Opens the next switch's new file at tmp_path, empty, or with recycle the spare (the
** file a switch replaced), whose size goes to *pRoom. Its old bytes never replay:
** recovery takes records of consecutive epochs from the base, and every record in the
** spare is older than the records the new file gets (it belongs to this log's life:
** open deletes any spare before the first switch). */
static int open_next_file(mw_log *log, int recycle, mw_fd *pFd, uint64_t *pRoom) {
  *pRoom = 0;
  int rc = mw_file_delete(log->tmp_path, 0);
  int reused = 0;
  if (rc == SQLITE_OK && recycle && mw_file_exists(log->spare_path))
    reused = mw_file_rename(log->spare_path, log->tmp_path, 0) == SQLITE_OK;
  if (rc == SQLITE_OK) rc = mw_file_open(log->tmp_path, 1, pFd, 0);
  if (rc == SQLITE_OK) rc = reused ? mw_file_size(*pFd, pRoom, 0) : mw_file_truncate(*pFd, 0, 0);
  return rc;
}

/* mw_mp=1: the spare names the file at the log's name (a switch that died or failed
** between its link and its rename, or a removal that failed): never to be reused. */
static int spare_is_log(const mw_log *log) {
  mw_file_id a, b;
  if (mw_file_identity(log->spare_path, &a, 0) != SQLITE_OK) return 0; /* none */
  return mw_file_identity(log->path, &b, 0) != SQLITE_OK || mw_file_id_eq(&a, &b);
}

/* Rewrites the log with base epoch `base` and the records after it, and switches to
** it. Called and returns with mu held (and cmp_mu), drops mu while it copies. With
** a hook (mw_mp=1), it runs right before the rename with the new shift, and writes and
** syncs stop for phase 2; without one (and not shared), switch_mirrored does the rest
** and stops nothing. */
static int switch_log(mw_log *log, uint64_t base, mw_log_enter_hook enter, mw_log_switch_hook hook,
                      void *hctx, int spare_ok) {
  /* The first record to keep: the one of epoch base + 1 (or the end). */
  size_t keep = 0;
  while (keep < log->nidx && log->idx[keep].epoch <= base) keep++;
  uint64_t cut = keep < log->nidx ? log->idx[keep].off : log->assigned_end;
  /* Records up to base are visible, hence written; wait for them if they are not. */
  while (log->error == SQLITE_OK && log->written_end < cut) {
    if (!log->writing && !log->switching && log->staged && log->staged->off == log->written_end) {
      mw_log_write_ready(log, cut);
    } else {
      mw_cond_wait(&log->cv, &log->mu);
    }
  }
  if (log->error != SQLITE_OK) return log->error;
  mw_fd old_fd = log->fd;
  uint64_t old_shift = log->shift;
  uint64_t w1 = log->written_end;
  uint64_t new_shift = cut - MW_LOG_HDR_SIZE;
  uint64_t need1 = log->assigned_end + log->reserved - new_shift;
  uint64_t alloc1 = round_up(need1, log->step);
  /* Room ahead as mw_log_grow_ahead would leave it: the commits after the switch
  ** should not have to grow the new file at once. */
  if (alloc1 - need1 < log->step / 4 * GROW_LEAD) alloc1 = round_up(need1 + log->step / 4 * GROW_LEAD, log->step);
  /* mw_mp=1 grows the room under the publication lock, while every commit of every
  ** process waits (mw_log_room_shared): the new file gets the room the old one used
  ** in its life, zeroed here, where commits go on, so that the next cycle seldom grows
  ** it there. At most room_max and the lead; an idle log keeps a small file. */
  if (log->shared) {
    uint64_t lead = log->step / 4 * GROW_LEAD;
    uint64_t want = round_up(log->assigned_end - old_shift + lead, log->step);
    uint64_t most = round_up(log->room_max + lead, log->step);
    if (want > most) want = most;
    if (want > alloc1) alloc1 = want;
  }
  mw_mutex_unlock(&log->mu);

  /* Phase 1, commits going on: the new file with the new base, the records already
  ** written (bytes that never change once written), and the room for what is reserved
  ** now, zeroed; synced, so that phase 2 has little left to do. */
  int rc = SQLITE_OK;
  mw_fd tfd = MW_FD_INVALID;
  unsigned char *buf = malloc(MW_LOG_COPY_CHUNK);
  if (!buf) rc = SQLITE_NOMEM;
  uint64_t room = 0;
  int reuse = log->shared ? spare_ok && !spare_is_log(log) : log->recycle;
  if (rc == SQLITE_OK) rc = open_next_file(log, reuse, &tfd, &room);
  if (rc == SQLITE_OK) {
    unsigned char h[MW_LOG_HDR_SIZE];
    /* Records copied as they are; the stream's TXIDs go on from the new base. */
    mw_log_build_header(h, log->page_size, base, log->salt, log->features,
                        mw_log_txid_at(log, base));
    rc = mw_file_pwrite(tfd, h, sizeof(h), 0, 0);
  }
  if (rc == SQLITE_OK) rc = copy_range(old_fd, old_shift, tfd, MW_LOG_HDR_SIZE, cut, w1, buf);
  /* A reused file's bytes are room already written: zeros only past them. */
  if (room > alloc1) alloc1 = room;
  uint64_t zero_from = w1 - new_shift > room ? w1 - new_shift : room;
  if (rc == SQLITE_OK && zero_from < alloc1) rc = mw_log_grow_file(log, tfd, zero_from, alloc1, 0);
  if (rc == SQLITE_OK) rc = mw_file_datasync(tfd, 0, 0);

  if (!hook && !log->shared) return switch_mirrored(log, base, keep, new_shift, alloc1, w1, tfd, buf, rc);

  /* Multi-process mode (the hook): other processes write this log through their own
  ** descriptors, so the copy cannot follow their writes: they are stopped (enter) for
  ** phase 2 only. Phase 2: stop writes, syncs and growth, wait for those in flight;
  ** assignment, staging and reservations that fit go on (they only need logical
  ** offsets). */
  if (rc == SQLITE_OK && enter) rc = enter(hctx);
  mw_mutex_lock(&log->mu);
  log->switching = 1;
  while (log->writing || log->syncing || log->growing || log->reading) mw_cond_wait(&log->cv, &log->mu);
  uint64_t w2 = log->written_end;
  /* Room for everything assigned or reserved so far; reserve waits while switching,
  ** so assigned_end + reserved cannot change until the switch is over. */
  uint64_t alloc_phys = round_up(log->assigned_end + log->reserved - new_shift, log->step);
  if (alloc_phys < alloc1) alloc_phys = alloc1;
  if (rc == SQLITE_OK) rc = log->error;
  mw_mutex_unlock(&log->mu);

  if (rc == SQLITE_OK && alloc_phys > alloc1) rc = mw_log_grow_file(log, tfd, alloc1, alloc_phys, 0);
  if (rc == SQLITE_OK) rc = copy_range(old_fd, old_shift, tfd, w1 - new_shift, w1, w2, buf);
  free(buf);
  if (rc == SQLITE_OK) rc = sync_new_file(log, tfd);
  if (rc == SQLITE_OK && hook) hook(hctx, new_shift, base, alloc_phys + new_shift);
  int renamed = 0, drc = SQLITE_OK;
  rc = rename_new_file(log, rc, &renamed, &drc);
  close_replaced(log, renamed, old_fd, tfd);

  mw_mutex_lock(&log->mu);
  if (renamed)
    rc = adopt_new_file_locked(log, tfd, base, keep, new_shift,
                               log->shared ? UINT64_MAX / 4 : alloc_phys + new_shift, w2, drc);
  log->switching = 0;
  wake_all(log);
  return rc;
}

int mw_log_compacted(mw_log *log, uint64_t base) {
  return mw_log_compacted_hook(log, base, 0, 0, 0, 0);
}

int mw_log_compacted_hook(mw_log *log, uint64_t base, mw_log_enter_hook enter,
                          mw_log_switch_hook hook, void *ctx, int spare_ok) {
  mw_mutex_lock(&log->cmp_mu);
  mw_mutex_lock(&log->mu);
  int rc = log->error;
  if (rc == SQLITE_OK && base > log->base) {
    rc = base > log->last_epoch ? SQLITE_MISUSE : switch_log(log, base, enter, hook, ctx, spare_ok);
  }
  mw_mutex_unlock(&log->mu);
  mw_mutex_unlock(&log->cmp_mu);
  return rc;
}

/* Whether the log may start again at `base`: its records (if any may be dropped) end
** at base, nothing is reserved or staged. With mu held. */
static int restart_allowed(const mw_log *log, uint64_t base, int drop_records) {
  int records_ok = drop_records ? log->last_epoch == base
                                : log->last_epoch == log->base && log->nidx == 0;
  return records_ok && !log->reserved && !log->nres && !log->staged && base >= log->base;
}

/* Starts the log again with a fresh header for `base` and no record, once nothing is
** being written, synced, grown or read; page_size 0 keeps the page size. drop_records:
** the log may hold records up to base (the database file holds them); else none. */
static int restart_log(mw_log *log, int page_size, uint64_t base, int drop_records) {
  mw_mutex_lock(&log->cmp_mu);
  mw_mutex_lock(&log->mu);
  /* The last close's emptying: no commit follows, a growth in progress stops. */
  int stop = drop_records && restart_allowed(log, base, 1);
  if (stop) __atomic_store_n(&log->stop_growth, 1, __ATOMIC_RELEASE);
  while (log->writing || log->syncing || log->growing || log->reading) mw_cond_wait(&log->cv, &log->mu);
  int rc = log->error;
  if (rc == SQLITE_OK && !restart_allowed(log, base, drop_records)) {
    rc = SQLITE_MISUSE;
    if (stop) __atomic_store_n(&log->stop_growth, 0, __ATOMIC_RELEASE);
  }
  if (rc == SQLITE_OK) {
    int old_ps = log->page_size;
    uint64_t old_base = log->base;
    if (page_size) log->page_size = page_size;
    uint64_t old_txid = log->stream_txid;
    log->stream_txid = mw_log_txid_at(log, base);
    log->base = base;
    rc = mw_log_write_fresh(log);
    if (rc != SQLITE_OK) {
      /* The file may be empty or hold the new header only: both open as a fresh log,
      ** but this handle no longer knows its own state. */
      log->page_size = old_ps;
      log->base = old_base;
      log->stream_txid = old_txid;
      set_error(log, rc);
    } else {
      /* The spare holds records before base (or of the old page size): not worth keeping. */
      if (mw_file_delete(log->spare_path, 0) != SQLITE_OK) log->recycle = 0;
      log->last_epoch = base;
      log->nidx = 0;
      log->shift = 0;
      log->assigned_end = log->written_end = log->synced_end = log->alloc_end = MW_LOG_HDR_SIZE;
    }
  }
  wake_all(log);
  mw_mutex_unlock(&log->mu);
  mw_mutex_unlock(&log->cmp_mu);
  return rc;
}

int mw_log_restart(mw_log *log, int page_size, uint64_t base) {
  return restart_log(log, page_size, base, 0);
}

int mw_log_emptied(mw_log *log, uint64_t base) {
  return restart_log(log, 0, base, 1);
}
