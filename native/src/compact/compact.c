/*
** compact.c: the compactor. A background thread per database writes committed
** pages into the database file and shortens the log (docs/design/compact.md):
**   T = min(visible epoch, oldest active snapshot, with mw_mp=1 the other processes'
**   floors); for each page changed since the
**   last compaction, its newest version <= T goes into the file; the file size is
**   page 1's size field at T; sync; the log's base becomes T (mw_log_compacted);
**   then garbage collection drops what the file now holds.
** Triggers: the log passing mw_log_max_mb (mw_compact_kick from commit.c), a
** timer, the last close (mw_compact_now(db, MW_COMPACT_LAST) from db.c). The compactor is a job
** of the shared background workers (background.c), not a thread of its own: it
** ticks while the database has work or old versions, and sleeps (no wake-up at
** all) once the file holds everything, until the end of the next transaction that
** committed (mw_compact_dirty_locked, from db.c). With mw_mp=1 it never sleeps:
** each tick catches up with the other processes and publishes this one's floor
** (mp.c), so that compaction goes on while several processes are open.
**
** Each step first syncs the log up to where it ended at the step before, when a
** commit acknowledged once written (synchronous=NORMAL or OFF) left it unsynced: such
** a commit is durable within two ticks (MW_UNSYNCED_MAX_MS) and the sync itself (with
** mw_mp=1, mp.c syncs every process's records: mw_mp_tick). Stock SQLite in WAL mode
** syncs such commits at its next checkpoint only.
** Each step then releases the transactions whose threads all ended (db->host, the
** methods table of core/db.c: this layer calls nothing above it by name), so that they
** pin nothing.
**
** Owns: the compactor job and the writes into the database file.
** Never touches: lanes (but their snapshot epochs, read under db->mu), SQLite
** connections.
*/
#include "engine.h"
#include "compact/compact.h"
#include "core/datafile.h"
#include "core/store.h"
#include "durability/log.h"
#include "platform/crash.h"
#include "processes/mp.h"
#include "replica/stream.h"

#include <stdlib.h>
#include <string.h>

#define TICK_MS 200            /* garbage collection period */
#if MW_UNSYNCED_MAX_MS != 2 * TICK_MS
#error "compact.h promises that unsynced commits are synced within two ticks"
#endif
#define TIMER_TICKS 25         /* compaction at least every 5 s when there is work */
#define PINNED_WARN 10000      /* pinned versions that make sqlite3_log warn */

static int cmp_page(const void *a, const void *b) {
  const mw_page_out *x = a, *y = b;
  return x->pgno < y->pgno ? -1 : x->pgno > y->pgno;
}

static void log_orphans(mw_db *db, int n) {
  if (n)
    sqlite3_log(SQLITE_WARNING, "multiwriter: %d transaction(s) on %s whose threads all ended "
                "were released", n, db->path);
}

static void gc(mw_db *db) {
  mw_mutex_lock(&db->mu);
  int orphans = db->host->release_orphans_locked(db); /* transactions of ended threads */
  uint64_t m = db->host->oldest_now_locked(db);
  if (m > db->oldest) __atomic_store_n(&db->oldest, m, __ATOMIC_RELEASE);
  uint64_t oldest = db->oldest, compacted = db->compacted, visible = db->visible;
  mw_mutex_unlock(&db->mu);
  if (db->mp) mw_mp_floor(db, oldest); /* what a compactor of any process may reach */
  log_orphans(db, orphans);
  int64_t pinned = 0, chains = 0;
  mw_store_gc(&db->store, oldest, compacted, visible, &pinned, &chains);
  mw_mutex_lock(&db->mu);
  db->pinned = pinned;
  db->chains = chains;
  /* A reader that never ends keeps every version since its snapshot: say so (once
  ** per tenfold growth) instead of growing silently. */
  int warn = pinned >= PINNED_WARN && pinned >= db->pinned_warned * 10;
  if (warn) db->pinned_warned = pinned;
  if (pinned < PINNED_WARN) db->pinned_warned = 0;
  mw_mutex_unlock(&db->mu);
  /* The replica stream holds them while it is behind (a burst of commits), which passes. */
  int stream = db->stream && mw_stream_emitted(db) <= oldest;
  if (warn)
    sqlite3_log(SQLITE_WARNING, "multiwriter: %lld page versions of %s are kept only for %s "
                "at epoch %llu (visible %llu)%s", (long long)pinned, db->path,
                stream ? "the replica stream, behind" : "a snapshot", (unsigned long long)oldest,
                (unsigned long long)visible, stream ? "" : ": a transaction is still open");
}

/* Garbage collection between compactions: at most once a GC_EVERY_MS. With mw_mp=1
** and the log over its limit, every process's compactor steps every 20 ms and most
** steps find another compactor at work (or nothing to compact): each scanned the
** whole store, 16 processes inserting spent 6-7% of their time there. After a
** compaction it always runs (the store drops what the file now holds). */
#define GC_EVERY_MS 100
static void gc_due(mw_db *db) {
  uint64_t now = mw_now_ns();
  if (now - db->gc_last < (uint64_t)GC_EVERY_MS * 1000000u) return;
  db->gc_last = now;
  gc(db);
}

static int compact_to(mw_db *db, uint64_t since, uint64_t m, uint64_t end, int how);

static int compact_now(mw_db *db, int how, uint64_t limit);

/* A tick and a checkpoint compact under the same rules (the snapshots of every lane and
** process bound them); the last close and a reformat compact everything. */
static int bounded(int how) { return how == MW_COMPACT_TICK || how == MW_COMPACT_CHECKPOINT; }

int mw_compact_now(mw_db *db, int how) {
  if (!db->mp || !bounded(how)) return compact_now(db, how, UINT64_MAX);
  /* mw_mp=1, other processes open or not (the last close is settled by db.c): one
  ** compactor at a time, up to the lowest floor of the others (mp.c); busy: the next
  ** tick tries again. */
  uint64_t limit = 0;
  int rc = mw_mp_compact_begin(db, &limit);
  if (rc == SQLITE_BUSY) {
    mw_mutex_lock(&db->mu);
    db->compact_below = mw_now_ns(); /* another compacts, or this one is behind */
    mw_mutex_unlock(&db->mu);
    gc_due(db);
    return SQLITE_OK;
  }
  if (rc != SQLITE_OK) return rc;
  rc = compact_now(db, how, limit);
  mw_mp_compact_end(db);
  return rc;
}

static int compact_now(mw_db *db, int how, uint64_t limit) {
  if (db->stream) {
    /* The file may not pass what the replica holds (the log keeps the rest for it). At
    ** the last close and a reformat everything is made durable and written first. */
    if (how != MW_COMPACT_TICK) {
      mw_mutex_lock(&db->mu);
      uint64_t all = db->visible_end;
      mw_mutex_unlock(&db->mu);
      int src = mw_log_wait_durable(db->log, all);
      if (src != SQLITE_OK) return src;
    }
    int src = mw_stream_emit(db, how != MW_COMPACT_TICK);
    if (src != SQLITE_OK && how != MW_COMPACT_TICK) return src;
    uint64_t emitted = mw_stream_emitted(db);
    if (emitted < limit) limit = emitted;
  }
  mw_mutex_lock(&db->mu);
  int orphans = db->host->release_orphans_locked(db); /* transactions of ended threads */
  uint64_t m = db->visible;
  if (limit < m) m = limit;
  if (bounded(how))
    for (mw_lane *l = db->lanes; l; l = l->next_in_db)
      if (l->reg && l->reg < m) m = l->reg;
  uint64_t since = db->compacted;
  uint64_t end = db->visible_end;
  int broken = db->broken;
  /* mw_mp=1: another process's floor below this one's oldest snapshot: pruning here
  ** may have passed T already (the newest version <= T of a page gone for a newer
  ** one), so T cannot be written from this store. The process with the lowest floor
  ** can: its compactor tries on its next tick. */
  if (m < db->oldest) {
    m = since;
    db->compact_below = mw_now_ns();
  }
  /* T is pinned like a snapshot until the file holds it: pruning keeps the newest
  ** version <= T of every page (without the pin, a page whose version at T was
  ** pruned would be skipped, and page 1's size at T with it). db->oldest <= T
  ** holds here, so no prune has passed T yet. */
  if (!broken && m > since) db->compacting = m;
  mw_mutex_unlock(&db->mu);
  log_orphans(db, orphans);
  if (broken) return broken;
  if (m <= since) {
    gc_due(db);
    return SQLITE_OK;
  }
  int rc = compact_to(db, since, m, end, how);
  mw_mutex_lock(&db->mu);
  db->compacting = 0;
  if (rc == SQLITE_OK) {
    db->compacted = m;
    db->compactions++;
    db->log_bytes = mw_log_size(db->log);
  }
  mw_mutex_unlock(&db->mu);
  if (rc == SQLITE_OK) gc(db);
  /* The replica: a snapshot of the file now and then, and the files it makes useless. */
  if (rc == SQLITE_OK && db->stream && bounded(how)) (void)mw_stream_compacted(db, m);
  return rc;
}

/* The log's base moves to m, after the file took every page up to m: with other
** processes open (mw_mp=1, a tick), mp.c switches the log under the publication lock;
** at the last close the log becomes a header alone, in place (mw_log_emptied: no new
** file whose room would be zeroed to be deleted at once; before, a short-lived process
** spent most of its time on it), or switches when it holds records past m; else the
** log switches (a reformat's compaction too: its log goes on). */
static int move_log_base(mw_db *db, uint64_t m, int how) {
  if (how == MW_COMPACT_LAST) {
    int rc = mw_log_emptied(db->log, m);
    return rc == SQLITE_MISUSE ? mw_log_compacted(db->log, m) : rc;
  }
  return db->mp && bounded(how) ? mw_mp_compact_log(db, m) : mw_log_compacted(db->log, m);
}

/* Writes the newest version <= m of every page changed after `since` into the
** file, syncs it, and moves the log's base to m (move_log_base). */
static int compact_to(mw_db *db, uint64_t since, uint64_t m, uint64_t end, int how) {
  /* Commits of synchronous=NORMAL/OFF connections are visible once written: the
  ** log must be durable up to T before the file may hold T, or a crash could leave
  ** the file ahead of what the log replays. */
  int src = mw_log_wait_durable(db->log, end);
  if (src != SQLITE_OK) return src;
  if (db->mp) mw_mp_durable(db, end); /* a joiner replays up to T at least */
  mw_page_out *pages = 0;
  int n = 0;
  int rc = mw_store_collect(&db->store, since, m, &pages, &n);
  if (rc != SQLITE_OK) return rc;
  qsort(pages, (size_t)n, sizeof(*pages), cmp_page);
  int pgsz = db->page_size;
  sqlite3_file *f = db->data;
  uint32_t size = 0;
  for (int i = 0; rc == SQLITE_OK && i < n; i++) {
    if (i == n / 2) mw_crash_point("compact_mid");
    rc = f->pMethods->xWrite(f, pages[i].img, pgsz, (sqlite3_int64)(pages[i].pgno - 1) * pgsz);
    if (pages[i].pgno == 1) size = mw_get32(pages[i].img + 28);
  }
  if (rc == SQLITE_OK && size == 0) {
    unsigned char b[4];
    rc = mw_db_read_file(db, 1, b, 28, 4);
    size = mw_get32(b);
  }
  if (rc == SQLITE_OK && size > 0) {
    sqlite3_int64 cur = 0;
    rc = f->pMethods->xFileSize(f, &cur);
    if (rc == SQLITE_OK && cur > (sqlite3_int64)size * pgsz)
      rc = f->pMethods->xTruncate(f, (sqlite3_int64)size * pgsz);
  }
  if (rc == SQLITE_OK) rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
  free(pages); /* the images are the store's (mw_store_collect) */
  if (rc != SQLITE_OK) return rc;
  mw_crash_point("compact_before_log");
  return move_log_base(db, m, how);
}

/* The log synced up to where it ended at the last tick, unless a sync covered that
** already (the commits of synchronous=FULL connections sync as they go). A failed sync
** is the log's sticky error: every later commit reports it. */
static void sync_unsynced(mw_db *db) {
  uint64_t due = db->unsynced_mark;
  db->unsynced_mark = mw_log_end(db->log);
  if (due != 0 && mw_log_durable_end(db->log) < due) (void)mw_log_wait_durable(db->log, due);
}

/* ---------------------------------------------------------------- checkpoints */

/* PRAGMA wal_checkpoint asks the compactor's job (so that no two compactions of this
** process run at once) and waits. A run serves every request made before it began:
** it compacts as a tick would, the replica first; the file then holds the target
** unless a snapshot held it back. With mw_mp=1 the others' floors follow their ticks,
** so a run that falls short tries again every RETRY until MW_CKPT_WAIT_MS when a
** pending request is patient (PRAGMA wal_checkpoint). The mark
** goes once the file holds everything (db.c decides under its lock). */
#define CKPT_RETRY_MS 20

int mw_compact_checkpoint(mw_db *db, int patient, int *pBusy) {
  uint64_t published = db->mp ? mw_mp_committed_epoch(db) : 0;
  mw_mutex_lock(&db->mu);
  uint64_t target = db->visible > published ? db->visible : published;
  if (db->ckpt_target < target) db->ckpt_target = target;
  uint64_t ticket = ++db->ckpt_asked;
  if (patient) db->ckpt_patient = 1;
  db->compactor_idle = 0;
  mw_mutex_unlock(&db->mu);
  mw_bg_wake(&db->compactor, 0);
  mw_mutex_lock(&db->mu);
  while (db->ckpt_done < ticket) mw_cond_wait(&db->ckpt_cv, &db->mu);
  int rc = db->ckpt_rc;
  *pBusy = rc == SQLITE_OK && db->compacted < target;
  mw_mutex_unlock(&db->mu);
  return rc;
}

/* The compactor's part: 0 when no request is pending or the run ended, else the delay
** before its next try. */
static uint64_t checkpoint_step(mw_db *db) {
  mw_mutex_lock(&db->mu);
  uint64_t asked = db->ckpt_asked, target = db->ckpt_target;
  int pending = asked > db->ckpt_done;
  if (pending && db->ckpt_since == 0) db->ckpt_since = mw_now_ns();
  uint64_t since = db->ckpt_since;
  int patient = db->ckpt_patient;
  mw_mutex_unlock(&db->mu);
  if (!pending) return 0;
  int rc = mw_compact_now(db, MW_COMPACT_CHECKPOINT);
  mw_mutex_lock(&db->mu);
  int reached = db->compacted >= target;
  if (rc == SQLITE_OK && !reached && db->broken) rc = db->broken;
  mw_mutex_unlock(&db->mu);
  if (rc == SQLITE_OK && !reached && db->mp && patient &&
      mw_now_ns() - since < (uint64_t)MW_CKPT_WAIT_MS * 1000000u)
    return (uint64_t)CKPT_RETRY_MS * 1000000u;
  if (rc == SQLITE_OK && reached) rc = db->host->unmark(db);
  mw_mutex_lock(&db->mu);
  db->ckpt_rc = rc;
  db->ckpt_done = asked;
  db->ckpt_since = 0;
  db->ckpt_patient = 0;
  mw_cond_broadcast(&db->ckpt_cv);
  mw_mutex_unlock(&db->mu);
  return 0;
}

/* One step of the compactor job (background.c): compacts when asked or when the
** timer is due and there is work, else collects garbage. Returns when to run again:
** every TICK while there is anything left to do, never (until woken) once the
** database is idle, so that an idle database costs nothing (mw_compact_dirty wakes it
** after the next commit). */
static uint64_t compactor_step(void *arg) {
  mw_db *db = arg;
  /* mw_mp=1: apply the others' commits and follow their compactions every tick, even
  ** when this process is idle: its floor must advance, or nobody could compact. */
  if (db->mp) mw_mp_tick(db); /* with the sync of every process's unsynced records */
  else sync_unsynced(db);
  uint64_t again = checkpoint_step(db);
  if (again) return again;
  /* The replica stream: what became durable since the last step. A failure is retried
  ** at the next one (compaction waits for it: the log keeps what it has not written). */
  if (db->stream) (void)mw_stream_emit(db, 0);
  mw_mutex_lock(&db->mu);
  uint64_t now = mw_now_ns();
  int timer = now - db->compact_last >= (uint64_t)TICK_MS * TIMER_TICKS * 1000000u;
  /* Commits that passed the log's limit while a compaction was at work kicked it
  ** again: stale once that compaction brought the log under its limit (each needless
  ** compaction costs a log switch, and the commits a pause of it). */
  if (db->want_compact && mw_log_size(db->log) <= db->opts.log_max_bytes) db->want_compact = 0;
  int run = db->want_compact || (timer && db->visible > db->compacted);
  /* mw_mp=1: the log grows with every process's commits, and the process that can
  ** compact is the one with the lowest floor (compact_now), often an idle one that
  ** commits nothing (commits kick their own compactor only). */
  int behind = db->mp && db->visible > db->compacted &&
               mw_log_size(db->log) > db->opts.log_max_bytes;
  if (behind) run = 1;
  /* A process whose last try could not compact (another process's floor below its
  ** own oldest snapshot, or another compactor at work) waits a while: its commits
  ** kick it at every one, and each try took the join lock that the process with the
  ** lowest floor, the one that can compact, needs (4 writers starved it: their log
  ** grew to 24 MB with mw_log_max_mb=1 before an idle process compacted once). */
  uint64_t pause = (uint64_t)TICK_MS * 1000000u / 10;
  if (run && db->mp && db->compact_below && now - db->compact_below < pause) {
    mw_mutex_unlock(&db->mu);
    return pause - (now - db->compact_below);
  }
  db->want_compact = 0;
  mw_mutex_unlock(&db->mu);
  if (run) {
    db->compact_last = now;
    /* A failed compaction leaves the log as it was: retried at the next trigger. */
    (void)mw_compact_now(db, MW_COMPACT_TICK);
  } else {
    gc_due(db); /* the log grows ahead of need on its own job */
  }
  mw_mutex_lock(&db->mu);
  int idle = !db->want_compact && db->visible == db->compacted && db->chains == 0 && !db->mp;
  db->compactor_idle = idle;
  mw_mutex_unlock(&db->mu);
  /* mw_mp=1 with the log over its limit: look again soon. Only the process with the
  ** lowest floor can compact, and that is often one that commits nothing, whose floor
  ** advances at its ticks only: at one tick per TICK_MS, writers that commit a few
  ** thousand transactions a second grew the log to many times its limit. */
  if (behind) return (uint64_t)TICK_MS * 1000000u / 10;
  return idle ? 0 : (uint64_t)TICK_MS * 1000000u;
}

int mw_compactor_start(mw_db *db) {
  db->compact_last = mw_now_ns();
  db->compactor_idle = 0;
  /* No thread to be had (the process is out of them): the open fails with a code that
  ** says so, and db.c's message. */
  /* mw_mp=1: the first tick soon, so that this process's floor follows the others'
  ** commits from the start (until it ticks, nobody can compact past its open). */
  uint64_t first = (uint64_t)TICK_MS * 1000000u / (db->mp ? 10 : 1);
  if (mw_bg_add(&db->compactor, compactor_step, db, first) != SQLITE_OK)
    return SQLITE_CANTOPEN;
  db->compactor_running = 1;
  return SQLITE_OK;
}

void mw_compactor_stop(mw_db *db) {
  if (!db->compactor_running) return;
  mw_bg_remove(&db->compactor);
  db->compactor_running = 0;
}

void mw_compact_kick(mw_db *db) {
  mw_mutex_lock(&db->mu);
  db->want_compact = 1;
  db->compactor_idle = 0;
  mw_mutex_unlock(&db->mu);
  mw_bg_wake(&db->compactor, 0);
}

void mw_compact_dirty_locked(mw_db *db, int *pWake) {
  if (db->compactor_idle && db->visible > db->compacted) {
    db->compactor_idle = 0;
    *pWake = 1;
  }
}

void mw_compact_wake(mw_db *db) { mw_bg_wake(&db->compactor, (uint64_t)TICK_MS * 1000000u); }
