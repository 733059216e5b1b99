/*
** lane.c: one connection's view of an engine database.
**   - the main file: reads come from the page store at the lane's snapshot (else
**     from the file), every page read in a snapshot joins the read set; writes
**     (checkpoints of the private WAL) are discarded; the size is the snapshot's;
**     every lock level is pretended (guard.c holds the real one); no mmap.
**   - the private wal-index: heap regions, every lock granted at once but watched:
**     a read mark taken SHARED begins a snapshot, the last one released ends it
**     (unless the write lock is still held: walRestartLog swaps read marks then).
**     At the end the WAL is emptied and bytes 0..95 of region 0 are zeroed, so that
**     SQLite recovers an empty WAL and drops its cache at the next transaction.
**   - the private WAL: a growable buffer; the write that completes a commit frame
**     runs the commit (commit.c).
**   - PRAGMAs the engine cannot honour are refused here.
**   - every entry that reads or writes in a transaction joins the calling thread to
**     its users (db.c); once all of them ended, the transaction was released and
**     those entries fail with SQLITE_IOERR until SQLite lets it go.
**
** Owns: the lane, its WAL buffer, its wal-index regions, its read set.
** Never touches: the database file (except reads through mw_db_read_file), the log.
*/
#include "engine.h"
#include "compact/compact.h"
#include "core/commit.h"
#include "core/datafile.h"
#include "core/db.h"
#include "core/gate.h"
#include "core/owner.h"
#include "core/pageset.h"
#include "core/store.h"
#include "durability/log.h"
#include "platform/crash.h"
#include "processes/mp.h"
#include "rebase/rebase.h"
#include "replica/stream.h"
#include "vfs/lane.h"

#include <stdlib.h>
#include <string.h>

#define WAL_HDR 32
#define FRAME_HDR 24

/* The thread's count of engine write locks, where it has no token (owner.h); its
** address also names the thread that stashes a commit (stash_owner). */
static _Thread_local int thread_write_locks;
int *mw_thread_write_locks(void) { return &thread_write_locks; }

/* The write lock counts in the token of the thread that takes it: the COMMIT that
** lets it go may run on another thread (vfs/async.c) after that one ended. Once the
** thread ended, its TLS is freed: a count kept there was decremented in freed memory
** (a Deno Worker terminated with commits in flight corrupted the heap). */
static void write_lock_count(mw_lane *l) {
  mw_owner *me = mw_owner_self();
  if (me) mw_owner_ref(me);
  l->wlock_owner = me;
  l->wlock_counter = me ? mw_owner_write_locks(me) : mw_thread_write_locks();
  __atomic_add_fetch(l->wlock_counter, 1, __ATOMIC_RELAXED);
}

static void write_lock_uncount(mw_lane *l) {
  __atomic_sub_fetch(l->wlock_counter, 1, __ATOMIC_RELAXED);
  l->wlock_counter = 0;
  if (l->wlock_owner) mw_owner_unref(l->wlock_owner);
  l->wlock_owner = 0;
}

/* ---------------------------------------------------------------- warm transactions */

/* SQLite keeps its page cache and its view of the WAL from one transaction to the
** next as long as the wal-index header is unchanged; it drops the cache (and moves
** PRAGMA data_version) whenever the header changed. Pages it serves from its cache
** never reach xRead, so the engine normally starts every transaction cold: it
** empties the private WAL and zeroes the header at the end of each snapshot, and
** the read set is exactly the pages read.
**
** A run of read-only transactions with no commit of any other connection in
** between is kept warm instead: the cache then holds exactly the new snapshot's
** state, and the read set is carried over (every page read since the last cold
** start, a superset of what the cache holds). Read-only transactions are never
** validated, so the superset costs nothing there; only a write transaction that
** follows such a run validates carried pages it may not have used. After any
** transaction that wrote, after another connection's commit, or when the carried
** state grew large, the lane goes cold at its next snapshot: it zeroes the header
** then, SQLite re-reads the header after it takes its read lock, sees the change,
** lets the lock go (that snapshot ends), recovers the empty WAL, drops its cache
** and locks again. So data_version stays put across reads when nobody committed
** (as in stock SQLite), and a backup's source connection is not restarted at every
** step.
**
** A connection that prepares PRAGMA data_version (the engine sees it through
** SQLITE_FCNTL_PRAGMA) stays warm after its own write transactions too, so that the
** value moves only when another connection commits, as in stock SQLite. The price:
** its read set then also carries the pages its earlier transactions read and wrote,
** so its later commits may be refused on pages they did not use. Only connections
** that poll data_version pay it.
**
** A connection alone on its database (db.c sets `alone` at each transaction's end)
** stays warm after its writes too, but blind: its read set is only the current
** transaction's, and commit.c refuses its commit if any other commit came after its
** snapshot. Carrying the read set instead made every commit of a lone inserter
** validate thousands of pages. A second connection costs it at most one refusal:
** after that commit its next snapshot has moved, and it starts cold. */
#define MW_WARM_PAGES 65536u          /* pages carried in the read set, at most */
#define MW_WARM_WAL ((uint64_t)16 << 20) /* bytes of the private WAL kept, at most */

static void go_cold(mw_lane *l) {
  l->wal_len = 0;
  l->committed_frames = 0;
  if (l->wal_cap > ((uint64_t)4 << 20)) {
    free(l->wal);
    l->wal = 0;
    l->wal_cap = 0;
  }
  if (l->nregion > 0 && l->region[0]) memset(l->region[0], 0, 96);
  mw_pageset_clear(&l->rs);
  l->warm = 0;
  l->must_reset = 0;
  l->blind = 0;
}

/* ---------------------------------------------------------------- snapshots */

/* Joins the calling thread to the users of the lane's transaction (db.c). Once
** every user has ended, the compactor may release the transaction: from then on
** its reads and writes fail (the versions of its snapshot may be gone) until it is
** rolled back. Called at every entry that reads or writes in a transaction. */
static int use_txn(mw_lane *l) {
  if (!l->in_snap || !mw_db_lane_use(l->db, l)) return SQLITE_OK;
  sqlite3_log(SQLITE_IOERR, "multiwriter: the thread that began this transaction on %s ended "
              "and its snapshot was released: roll it back", l->db->path);
  return SQLITE_IOERR;
}

static void snap_begin(mw_lane *l) {
  if (l->cold_start) mw_pause_point("lane_cold_retry"); /* test_engine_cold_retry */
  /* The previous snapshot went cold and SQLite let it go unread (it saw the header
  ** changed, and locks again): SQLite drops its cache at this lock all the same (it
  ** recovers the zeroed header, which marks it changed), so this one need not go cold
  ** again for the commits that came meanwhile. It did: a process slower than the
  ** others' commits went cold at every try until SQLite gave up (SQLITE_PROTOCOL
  ** after 100 tries: test_engine_cold_retry, whose pause point is the line above). */
  int unread_reset = l->cold_start && !l->touched;
  l->touched = 0;
  l->cold_start = unread_reset;
  if (l->wait) mw_gate_begin(l); /* a gate kept for this retry (gate.c) */
  mw_db_txn_begin(l->db, l, &l->snap, &l->snap_size);
  l->cur_size = l->snap_size;
  l->in_snap = 1;
  l->nown = 0;
  l->poisoned = 0;
  l->fmt_pending = 0; /* SQLite reads page 1 again in this transaction */
  mw_db_unstash(l);
  if (l->warm && !unread_reset &&
      (l->must_reset || l->snap != l->last_snap + (uint64_t)l->last_nown ||
       l->rs.count > MW_WARM_PAGES || l->wal_len > MW_WARM_WAL)) {
    go_cold(l);
    l->cold_start = 1;
  }
  /* A blind lane is validated against every commit (commit.c): its read set is only
  ** this transaction's, so that validation stays short. */
  if (l->blind) mw_pageset_clear(&l->rs);
}

static void snap_end(mw_lane *l) {
  if (l->wait) mw_gate_leave(l, l->cold_start && !l->touched);
  mw_db_txn_end(l->db, l);
  l->stats[MW_STAT_SNAPSHOT_EPOCH] = (int64_t)l->snap;
  l->stats[MW_STAT_COMMIT_EPOCH] = l->nown ? (int64_t)l->own[l->nown - 1] : 0;
  l->in_snap = 0;
  l->last_snap = l->snap;
  l->last_nown = l->nown;
  l->nown = 0;
  /* A stash still here was rolled back (phase two never came). */
  if ((l->wrote && !l->keeps_version && !l->alone) || l->stashed || l->poisoned || l->rs.failed ||
      l->reloc_epoch > l->snap || l->rebase_epoch > l->snap)
    l->must_reset = 1;
  else if (l->wrote && !l->keeps_version)
    l->blind = 1;
  /* A warm lane's private WAL grows with its commits. Once it reaches
  ** wal_autocheckpoint frames, SQLite runs a checkpoint after the commit, which for
  ** the engine is a real one (the file made to hold every commit, fsynced, the mark
  ** taken off and set again by the next commit with a sync of its own): a lone writer
  ** stalled some 3 ms every few hundred commits, even at synchronous=OFF. Going cold
  ** at half of it empties the private WAL first: only a commit of more frames than
  ** the other half still reaches a checkpoint (as a big commit does in stock WAL).
  ** 1 writer, medians of 5 paired runs: bulk 1.24x, hot 1.45x, transfer 1.33x at OFF
  ** (1.14x, 1.62x, 1.36x at NORMAL). Not at FULL, where it measured 0.91-0.97x: every
  ** commit syncs there, and the checkpoints' log switches likely kept the log in its
  ** zeroed spare file, which growing it instead costs (not examined further). Nor for
  ** a connection that polls data_version: going cold moves it (its own commits must
  ** not). */
  if (l->wrote && !l->keeps_version && l->sync_level < 2 && l->autockpt > 0 &&
      l->committed_frames >= (uint64_t)(l->autockpt / 2 + 1))
    l->must_reset = 1;
  l->wrote = 0;
  mw_rebase_forget(l); /* a declaration covers its snapshot's transaction only */
  mw_db_unstash(l);
  l->warm = 1;
  if (l->must_reset) go_cold(l);
}

/* ---------------------------------------------------------------- main file */

static int main_close(sqlite3_file *f) {
  mw_file *p = (mw_file *)f;
  mw_lane *l = p->lane;
  int rc = SQLITE_OK;
  if (l) {
    /* Orders this thread after a release of the transaction (db->mu). */
    if (l->in_snap) (void)mw_db_lane_use(l->db, l);
    if (l->write_lock) write_lock_uncount(l);
    if (l->in_snap) snap_end(l);
    if (l->wait) mw_gate_leave(l, 0);
    mw_db_remove_lane(l->db, l);
    rc = mw_db_release(l->db);
    for (int i = 0; i < l->nregion; i++) free(l->region[i]);
    free(l->region);
    free(l->wal);
    mw_pageset_free(&l->rs);
    free(l->own);
    free(l->rb_rows);
    free(l->users);
    free(l->pgbuf);
    free(l);
    p->lane = 0;
  }
  if (p->real && p->real->pMethods) {
    int rc2 = p->real->pMethods->xClose(p->real);
    if (rc == SQLITE_OK) rc = rc2;
    p->real->pMethods = 0;
  }
  return rc;
}

static int main_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off) {
  mw_lane *l = ((mw_file *)f)->lane;
  mw_db *db = l->db;
  int pgsz = db->page_size;
  int temp = 0, short_read = 0, rc = SQLITE_OK;
  uint64_t snap;
  uint32_t size;
  rc = use_txn(l);
  if (rc != SQLITE_OK) return rc;
  if (l->in_snap && l->rebase_epoch > l->snap) {
    /* SQLite holds its own version of the pages a rebase merged (rebase.c): a page
    ** read now would mix the published merge into that view. */
    sqlite3_log(SQLITE_BUSY_SNAPSHOT, "multiwriter: a read in the snapshot of a rebased commit "
                "on %s: end the transaction (finish or reset its statements)", db->path);
    return SQLITE_BUSY_SNAPSHOT;
  }
  if (l->in_snap) {
    snap = l->snap;
    size = l->cur_size;
  } else {
    /* A read outside a transaction (the header at open): a registered moment. */
    mw_db_snapshot_begin(db, l, &snap, &size);
    temp = 1;
  }
  unsigned char *out = buf;
  uint64_t o = (uint64_t)off;
  int left = amt;
  while (left > 0 && rc == SQLITE_OK) {
    uint32_t pgno = (uint32_t)(o / (uint64_t)pgsz) + 1;
    int po = (int)(o % (uint64_t)pgsz);
    int n = pgsz - po < left ? pgsz - po : left;
    if (pgno > size) {
      memset(out, 0, (size_t)n);
      short_read = 1;
    } else {
      int found = mw_store_read(&db->store, pgno, snap, l->in_snap ? l->own : 0,
                                l->in_snap ? l->nown : 0, out, po, n);
      if (found < 0) {
        /* A lazy version could not be read (mw_mp=1): an I/O error for SQLite. */
        rc = -found == SQLITE_NOMEM ? SQLITE_IOERR_NOMEM
           : (-found & 0xff) == SQLITE_IOERR ? -found : SQLITE_IOERR_READ;
      } else if (!found) {
        rc = mw_db_read_file(db, pgno, out, po, n);
        /* Keep whole pages for the next transactions (they all start cold). */
        if (rc == SQLITE_OK && po == 0 && n == pgsz)
          mw_store_cache_file_page(&db->store, pgno, out, snap);
      }
    }
    if (l->in_snap && pgno != 1) mw_pageset_add(&l->rs, pgno);
    if (l->in_snap) l->touched = 1;
    out += n;
    o += (uint64_t)n;
    left -= n;
  }
  if (temp) mw_db_snapshot_end(db, l);
  if (rc == SQLITE_OK && short_read) rc = SQLITE_IOERR_SHORT_READ;
  return rc;
}

/* Writes to the main file are checkpoints of the private WAL: only the compactor
** writes the database file. */
static int main_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) { return SQLITE_OK; }
static int main_truncate(sqlite3_file *f, sqlite3_int64 n) { return SQLITE_OK; }
static int main_sync(sqlite3_file *f, int flags) { return SQLITE_OK; }

static int main_size(sqlite3_file *f, sqlite3_int64 *pSize) {
  mw_lane *l = ((mw_file *)f)->lane;
  uint32_t size;
  if (l->in_snap) {
    size = l->cur_size;
  } else {
    uint64_t s;
    mw_db_snapshot_begin(l->db, l, &s, &size);
    mw_db_snapshot_end(l->db, l);
  }
  *pSize = (sqlite3_int64)size * l->db->page_size;
  return SQLITE_OK;
}

/* Modes that bypass the engine's WAL. The engine refuses journal_mode other than WAL
** and locking_mode=EXCLUSIVE when a PRAGMA names its file (pragma() below), but
** SQLite applies an unqualified PRAGMA to every attached database while it sends
** SQLITE_FCNTL_PRAGMA to main's file only: a connection whose main database is not
** on the engine reaches an attached engine file without the engine hearing of it
** (test_engine_bypass). SQLite's pager then shows the mode by the locks it asks for
** on the main file, which in WAL mode it asks for only in three places: SHARED for
** as long as it has the file open, EXCLUSIVE at the close of the WAL (connection
** close, journal_mode leaving WAL), with the WAL open and no snapshot held. So:
**   - RESERVED is a rollback-journal write (journal_mode DELETE, TRUNCATE, PERSIST,
**     MEMORY or OFF): its pages would go to the main file, whose writes the engine
**     discards. Refused before SQLite writes a journal, so no hot journal is left.
**     (Leaving WAL then fails too: SQLite writes the new mode into page 1 that way,
**     and the file's header keeps the pager in WAL mode.)
**   - EXCLUSIVE inside a snapshot is locking_mode=EXCLUSIVE beginning a write: SQLite
**     would drop the read lock and take no write lock, and its commit would come
**     outside any snapshot. EXCLUSIVE with no WAL open is locking_mode=EXCLUSIVE
**     opening the WAL: SQLite would keep the wal-index in its own memory and never
**     lock it, so no transaction would have a snapshot.
** Each is an I/O error for the statement, with the reason in the SQLite log; wal_write
** refuses a commit that comes outside a snapshot all the same, whatever led to it. */
static int bypass_lock(mw_lane *l, int level) {
  const char *why = 0;
  if (level == SQLITE_LOCK_RESERVED) why = "a journal_mode other than WAL";
  else if (level == SQLITE_LOCK_EXCLUSIVE && (l->in_snap || !l->wal_open))
    why = "locking_mode=EXCLUSIVE";
  if (why == 0) return SQLITE_OK;
  sqlite3_log(SQLITE_IOERR_LOCK, "multiwriter: %s reached %s without naming it (an unqualified "
              "PRAGMA of a connection whose main database is not on the engine): refused, the "
              "engine needs WAL mode and SQLite's shared-memory locks", why, l->db->path);
  return SQLITE_IOERR_LOCK;
}

/* Every level is pretended: the database's own handle holds EXCLUSIVE for as long
** as the engine has the file open (guard.c), which keeps every connection outside
** the engine away; a real lock here would conflict with it. The level is recorded
** all the same, so that SQLITE_FCNTL_LOCKSTATE (PRAGMA lock_status) reads what this
** connection holds, as with the unix VFS. */
static int main_lock(sqlite3_file *f, int level) {
  mw_lane *l = ((mw_file *)f)->lane;
  int rc = bypass_lock(l, level);
  if (rc != SQLITE_OK) return rc;
  if (level > l->lock_level) l->lock_level = level;
  return SQLITE_OK;
}
static int main_unlock(sqlite3_file *f, int level) {
  mw_lane *l = ((mw_file *)f)->lane;
  if (level < l->lock_level) l->lock_level = level;
  return SQLITE_OK;
}
static int main_check_reserved(sqlite3_file *f, int *pRes) {
  *pRes = 0;
  return SQLITE_OK;
}

static int pragma(mw_lane *l, char **a) {
  const char *name = a[1], *val = a[2];
  if (name == 0) return SQLITE_NOTFOUND;
  if (!sqlite3_stricmp(name, "journal_mode") && val && sqlite3_stricmp(val, "wal")) {
    a[0] = sqlite3_mprintf("multiwriter: journal_mode=%s is not supported (the engine "
                           "keeps the database in WAL mode)", val);
    return SQLITE_ERROR;
  }
  if (!sqlite3_stricmp(name, "locking_mode") && val && !sqlite3_stricmp(val, "exclusive")) {
    a[0] = sqlite3_mprintf("multiwriter: locking_mode=EXCLUSIVE is not supported (many "
                           "connections write at once)");
    return SQLITE_ERROR;
  }
  /* The engine creates a new database (in WAL mode, page 1 written) when it opens it,
  ** so SQLite then treats its page size and auto-vacuum mode as fixed. While nothing
  ** was written to it, the engine writes it again with the settings asked for (db.c,
  ** mw_db_reformat), as SQLite would have created it; SQLite reads them at its next
  ** transaction, and until then the engine answers these two PRAGMAs itself. Once
  ** the database has content, stock behavior: the settings are ignored (VACUUM
  ** applies a new auto-vacuum mode). */
  int is_pgsz = !sqlite3_stricmp(name, "page_size");
  int is_av = !sqlite3_stricmp(name, "auto_vacuum");
  if ((is_pgsz || is_av) && val) {
    int pgsz = 0, av = -1, done = 0;
    if (is_pgsz) {
      int want = atoi(val);
      if (want >= 512 && want <= 65536 && (want & (want - 1)) == 0 && want != l->db->page_size)
        pgsz = want;
    } else {
      /* SQLite's getAutoVacuum: none/full/incremental, else a number 0..2, else 0. */
      if (!sqlite3_stricmp(val, "none")) av = 0;
      else if (!sqlite3_stricmp(val, "full")) av = 1;
      else if (!sqlite3_stricmp(val, "incremental")) av = 2;
      else av = atoi(val) >= 0 && atoi(val) <= 2 ? atoi(val) : 0;
    }
    if (pgsz || av >= 0) {
      int rc = mw_db_reformat(l, pgsz, av, &done);
      if (rc == SQLITE_MISUSE) {
        a[0] = sqlite3_mprintf("multiwriter: PRAGMA %s on a new database is not supported "
                               "with mw_mp=1: set it once without mw_mp=1 first", name);
        return SQLITE_ERROR;
      }
      if (rc == SQLITE_CONSTRAINT) {
        a[0] = sqlite3_mprintf("multiwriter: PRAGMA page_size cannot change a database whose "
                               "replica (mw_ltx_dir) holds commits of another page size: "
                               "name a new directory");
        return SQLITE_ERROR;
      }
      if (rc != SQLITE_OK) {
        a[0] = sqlite3_mprintf("multiwriter: PRAGMA %s=%s on the empty database failed: %s",
                               name, val, sqlite3_errstr(rc));
        return rc;
      }
      if (done) l->fmt_pending = 1;
    }
  } else if ((is_pgsz || is_av) && l->fmt_pending) {
    a[0] = sqlite3_mprintf("%d", is_pgsz ? l->db->page_size : l->fmt_av);
    return a[0] ? SQLITE_OK : SQLITE_NOMEM;
  }
  if (!sqlite3_stricmp(name, "data_version")) l->keeps_version = 1;
  if (!sqlite3_stricmp(name, "wal_checkpoint")) l->ckpt_explicit = 1;
  if (!sqlite3_stricmp(name, "wal_autocheckpoint") && val) {
    int n = atoi(val);
    l->autockpt = n > 0 ? n : 0;
  }
  if (!sqlite3_stricmp(name, "synchronous") && val) {
    static const char *names[] = { "off", "normal", "full", "extra" };
    for (int i = 0; i < 4; i++)
      if (!sqlite3_stricmp(val, names[i]) || (val[0] == '0' + i && val[1] == 0))
        l->sync_level = i;
  }
  return SQLITE_NOTFOUND;
}

/* Phase two of a commit whose frames were stashed: every lane this thread stashed
** and that still holds its write lock (SQLite's phase two of the other databases
** comes next) is part of the same transaction; publish them all or none. A refusal
** here comes after SQLite considers the commit done: SQLite rolls the transaction
** back (vdbeCommit fails), and the lanes are poisoned so that nothing built on the
** refused state commits in the same snapshot. A group of one is an ordinary commit
** (commit.c). */
#define MW_GROUP_MAX 16
static int publish_stashed(mw_lane *l) {
  mw_lane *others[MW_GROUP_MAX - 1], *group[MW_GROUP_MAX];
  int n = mw_db_stashed_lanes(l, l->stash_owner, others, MW_GROUP_MAX - 1), k = 0;
  group[k++] = l;
  for (int i = 0; i < n && i < MW_GROUP_MAX - 1; i++)
    if (others[i]->write_lock) group[k++] = others[i];
  /* The stash is spent from here, refused or published (mw_commit_group poisons the
  ** lanes on a refusal): not counted while the group waits for its sync, so other
  ** threads' commits meanwhile find themselves alone (db.c, stashed_now). */
  for (int i = 0; i < k; i++) mw_db_unstash(group[i]);
  if (n + 1 > MW_GROUP_MAX) {
    for (int i = 0; i < k; i++) group[i]->poisoned = 1;
    return SQLITE_BUSY_SNAPSHOT;
  }
  return mw_commit_group(group, k);
}

static int main_fcntl(sqlite3_file *f, int op, void *arg) {
  mw_file *p = (mw_file *)f;
  mw_lane *l = p->lane;
  switch (op) {
    case SQLITE_FCNTL_PRAGMA:
      return pragma(l, (char **)arg);
    case SQLITE_FCNTL_LOCKSTATE:
      /* The pretended level (main_lock), not the unlocked handle's below. */
      *(int *)arg = l->lock_level;
      return SQLITE_OK;
    case MW_FCNTL_STATS: {
      int64_t *out = arg;
      mw_db *db = l->db;
      for (int i = 0; i < MW_STAT_COUNT; i++) out[i] = l->stats[i];
      out[MW_STAT_ENGINE] = 1;
      if (l->in_snap) {
        out[MW_STAT_SNAPSHOT_EPOCH] = (int64_t)l->snap;
        out[MW_STAT_COMMIT_EPOCH] = l->nown ? (int64_t)l->own[l->nown - 1] : 0;
      }
      mw_mutex_lock(&db->mu);
      out[MW_STAT_COMPACTIONS] = db->compactions;
      out[MW_STAT_VISIBLE_EPOCH] = (int64_t)db->visible;
      out[MW_STAT_PINNED_VERSIONS] = db->pinned;
      out[MW_STAT_STORE_CHAINS] = db->chains;
      out[MW_STAT_LOG_BYTES] = (int64_t)db->log_bytes;
      mw_mutex_unlock(&db->mu);
      mw_bg_counts(&out[MW_STAT_BACKGROUND_THREADS], 0);
      out[MW_STAT_COMPACTOR_RUNS] = mw_bg_job_runs(&db->compactor);
      out[MW_STAT_LOG_ROOM_INLINE] = (int64_t)mw_log_room_inline(db->log);
      out[MW_STAT_LOG_SYNCS] = (int64_t)mw_log_syncs(db->log);
      mw_mp_room_claims(db, &out[MW_STAT_LOG_ROOM_CLAIMED], &out[MW_STAT_LOG_ROOM_CLAIMED_NOW]);
      if (db->stream) {
        out[MW_STAT_LTX_TXID] = (int64_t)mw_stream_txid(db, (uint64_t)out[MW_STAT_COMMIT_EPOCH]);
        out[MW_STAT_LTX_EMITTED] = (int64_t)mw_stream_txid(db, mw_stream_emitted(db));
      }
      return SQLITE_OK;
    }
    case MW_FCNTL_COMMIT_SYNCS:
      if (arg == 0) return SQLITE_MISUSE;
      *(int *)arg = l->sync_level >= 2;
      return SQLITE_OK;
    case MW_FCNTL_EVENT_LOOP:
      if (arg == 0) return SQLITE_MISUSE;
      l->event_loop = *(int *)arg != 0;
      return SQLITE_OK;
    case MW_FCNTL_REBASE_ROWS: {
      const mw_rebase_rows *r = arg;
      return r ? mw_rebase_declare(l, r->rowids, r->n) : SQLITE_MISUSE;
    }
    case SQLITE_FCNTL_COMMIT_PHASETWO:
      if (use_txn(l) != SQLITE_OK) return SQLITE_IOERR;
      return l->stashed ? publish_stashed(l) : SQLITE_NOTFOUND;
    case SQLITE_FCNTL_SIZE_HINT:
    case SQLITE_FCNTL_CHUNK_SIZE:
      /* The file is the compactor's: no growth hints. */
      return SQLITE_OK;
    case SQLITE_FCNTL_MMAP_SIZE:
      /* Nor mapping: the limit in force is 0 (PRAGMA mmap_size reads it back). */
      *(sqlite3_int64 *)arg = 0;
      return SQLITE_OK;
    case SQLITE_FCNTL_VFSNAME: {
      /* "multiwriter/<root>", the way shims stack their names. */
      char **pz = arg;
      *pz = 0;
      int rc = p->real->pMethods->xFileControl(p->real, op, arg);
      if (rc != SQLITE_OK && rc != SQLITE_NOTFOUND) return rc;
      char *z = *pz ? sqlite3_mprintf("%s/%s", MW_VFS_NAME, *pz) : sqlite3_mprintf("%s", MW_VFS_NAME);
      sqlite3_free(*pz);
      *pz = z;
      return z ? SQLITE_OK : SQLITE_NOMEM;
    }
    default:
      return p->real->pMethods->xFileControl(p->real, op, arg);
  }
}

static int main_sector(sqlite3_file *f) {
  mw_file *p = (mw_file *)f;
  return p->real->pMethods->xSectorSize(p->real);
}

/* POWERSAFE_OVERWRITE: SQLite then never pads the WAL after a commit frame
** (sqlite3WalOpen reads the main file's characteristics). */
static int main_devchar(sqlite3_file *f) {
  mw_file *p = (mw_file *)f;
  return p->real->pMethods->xDeviceCharacteristics(p->real) | SQLITE_IOCAP_POWERSAFE_OVERWRITE;
}

static int main_shm_map(sqlite3_file *f, int iRegion, int szRegion, int bExtend,
                        void volatile **pp) {
  mw_lane *l = ((mw_file *)f)->lane;
  if (iRegion >= l->nregion) {
    if (!bExtend) {
      *pp = 0;
      return SQLITE_OK;
    }
    void **nr = realloc(l->region, (size_t)(iRegion + 1) * sizeof(void *));
    if (nr == 0) return SQLITE_NOMEM;
    l->region = nr;
    while (l->nregion <= iRegion) {
      void *r = calloc(1, (size_t)szRegion);
      if (r == 0) return SQLITE_NOMEM;
      l->region[l->nregion++] = r;
    }
  }
  *pp = l->region[iRegion];
  return SQLITE_OK;
}

/* A checkpoint (PRAGMA wal_checkpoint, sqlite3_wal_checkpoint_v2, the automatic one
** after a commit of wal_autocheckpoint pages) takes the checkpoint lock alone, outside
** any transaction; SQLite's recovery takes it with the recover lock (n = 2), and the
** checkpoint at the close of the last connection, in exclusive mode, takes no shared
** lock at all. SQLite then copies its private WAL, which holds nothing between
** transactions; the engine's part is the real one: the file made to hold every commit
** visible before it (compact.c). A snapshot that held it back (another connection's
** open transaction) is SQLITE_BUSY for the lock, which SQLite reports as busy = 1 (and
** -1 for the frame counts) without calling a busy handler, as for a checkpoint that
** another connection runs. With mw_mp=1 a connection that prepared PRAGMA wal_checkpoint
** waits a while for the other processes' floors; the automatic checkpoint (or a call of
** sqlite3_wal_checkpoint_v2 alone) tries once, as stock SQLite's PASSIVE mode does. */
static int checkpoint(mw_lane *l) {
  int busy = 0;
  int rc = mw_compact_checkpoint(l->db, l->ckpt_explicit, &busy);
  if (rc == SQLITE_OK && busy) rc = SQLITE_BUSY;
  return rc;
}

/* Lock slots: 0 write, 1 checkpoint, 2 recover, 3..7 read marks. */
static int main_shm_lock(sqlite3_file *f, int ofst, int n, int flags) {
  mw_lane *l = ((mw_file *)f)->lane;
  int lock = (flags & SQLITE_SHM_LOCK) != 0;
  if (ofst == 1 && n == 1 && lock && (flags & SQLITE_SHM_EXCLUSIVE) && !l->in_snap) {
    int rc = checkpoint(l);
    if (rc != SQLITE_OK) return rc;
  }
  /* Joins, and a rollback of a released transaction works (no refusal here). */
  if (l->in_snap) (void)mw_db_lane_use(l->db, l);
  if (flags & SQLITE_SHM_SHARED) {
    for (int s = ofst; s < ofst + n; s++) {
      if (s < 3) continue;
      if (lock) l->shared_mask |= 1u << s; else l->shared_mask &= ~(1u << s);
    }
    if (lock && l->shared_mask && !l->in_snap) snap_begin(l);
  } else if (ofst == 0) {
    /* A connection that cannot run a statement again takes the write gate first, as
    ** stock SQLite's write lock: SQLITE_BUSY while another writer holds it (gate.c). */
    if (lock && !l->write_lock && l->wait && l->in_snap && !l->event_loop) {
      int rc = mw_gate_enter(l);
      if (rc != SQLITE_OK) return rc;
    }
    /* The thread's count of write locks tells a commit whether the transaction
    ** writes other engine databases too (see wal_write). */
    if (lock && !l->write_lock) {
      if (l->in_snap) l->wrote = 1;
      write_lock_count(l);
      mw_db_unstash(l); /* a new write transaction */
      /* A declaration covers one write transaction (rebase.c): the one before ended,
      ** committed or rolled back. It is forgotten here, not when the write lock goes:
      ** SQLite lets the lock go before phase two, where a stashed commit uses it. */
      mw_rebase_forget(l);
    } else if (!lock && l->write_lock) {
      write_lock_uncount(l);
      if (l->wait) mw_gate_leave(l, 0);
    }
    l->write_lock = lock;
  }
  if (!lock && l->in_snap && l->shared_mask == 0 && !l->write_lock) snap_end(l);
  return SQLITE_OK;
}

static void main_shm_barrier(sqlite3_file *f) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

static int main_shm_unmap(sqlite3_file *f, int deleteFlag) {
  mw_lane *l = ((mw_file *)f)->lane;
  for (int i = 0; i < l->nregion; i++) free(l->region[i]);
  free(l->region);
  l->region = 0;
  l->nregion = 0;
  return SQLITE_OK;
}

static int main_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp) {
  *pp = 0;
  return SQLITE_OK;
}
static int main_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p) { return SQLITE_OK; }

const sqlite3_io_methods mw_main_methods = {
  3, main_close, main_read, main_write, main_truncate, main_sync, main_size,
  main_lock, main_unlock, main_check_reserved, main_fcntl, main_sector, main_devchar,
  main_shm_map, main_shm_lock, main_shm_barrier, main_shm_unmap, main_fetch, main_unfetch
};

int mw_lane_create(mw_file *p, sqlite3_vfs *root, const char *zName, int flags, int *pOut,
                   const mw_opts *o, char **pzErr) {
  int rc = root->xOpen(root, zName, p->real, flags, pOut);
  if (rc != SQLITE_OK) return rc;
  mw_lane *l = calloc(1, sizeof(*l));
  if (l == 0) {
    p->real->pMethods->xClose(p->real);
    return SQLITE_NOMEM;
  }
  mw_db *db = 0;
  rc = mw_db_acquire(root, zName, o, (flags & SQLITE_OPEN_READONLY) != 0, &db, pzErr);
  if (rc == SQLITE_OK) {
    /* The largest page size: a reformat (db.c) may change the database's. */
    l->pgbuf = malloc(65536);
    if (l->pgbuf == 0) {
      mw_db_release(db);
      rc = SQLITE_NOMEM;
    }
  }
  if (rc != SQLITE_OK) {
    free(l);
    p->real->pMethods->xClose(p->real);
    p->real->pMethods = 0;
    return rc;
  }
  l->db = db;
  l->zName = zName;
  l->real = p->real;
  l->readcheck = o->readcheck;
  l->rebase = o->rebase;
  l->wait = o->wait;
  l->sync_level = 2;
  l->autockpt = 1000; /* SQLITE_DEFAULT_WAL_AUTOCHECKPOINT */
  mw_db_add_lane(db, l);
  p->kind = MW_KIND_MAIN;
  p->lane = l;
  p->base.pMethods = &mw_main_methods;
  return SQLITE_OK;
}

/* ---------------------------------------------------------------- private WAL */

static int wal_close(sqlite3_file *f) {
  mw_file *p = (mw_file *)f;
  p->lane->wal_open = 0;
  p->lane->wal_len = 0;
  return SQLITE_OK;
}

static int wal_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off) {
  mw_lane *l = ((mw_file *)f)->lane;
  uint64_t o = (uint64_t)off;
  if (o >= l->wal_len) {
    memset(buf, 0, (size_t)amt);
    return SQLITE_IOERR_SHORT_READ;
  }
  uint64_t n = l->wal_len - o;
  if (n >= (uint64_t)amt) {
    memcpy(buf, l->wal + o, (size_t)amt);
    return SQLITE_OK;
  }
  memcpy(buf, l->wal + o, (size_t)n);
  memset((char *)buf + n, 0, (size_t)amt - (size_t)n);
  return SQLITE_IOERR_SHORT_READ;
}

static int wal_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off) {
  mw_lane *l = ((mw_file *)f)->lane;
  int urc = use_txn(l);
  if (urc != SQLITE_OK) return urc; /* never commits a released transaction */
  uint64_t o = (uint64_t)off, end = o + (uint64_t)amt;
  if (end > l->wal_cap) {
    uint64_t ncap = l->wal_cap ? l->wal_cap : 65536;
    while (ncap < end) ncap *= 2;
    unsigned char *nw = realloc(l->wal, (size_t)ncap);
    if (nw == 0) return SQLITE_IOERR_NOMEM;
    l->wal = nw;
    l->wal_cap = ncap;
  }
  if (o > l->wal_len) memset(l->wal + l->wal_len, 0, (size_t)(o - l->wal_len));
  memcpy(l->wal + o, buf, (size_t)amt);
  if (end > l->wal_len) l->wal_len = end;
  if (o == 0) {
    /* A new WAL header: SQLite restarted the log, frames start again at 0. */
    l->committed_frames = 0;
    if (amt >= 12 && (int)mw_get32(l->wal + 8) != l->db->page_size) return SQLITE_IOERR_WRITE;
    return SQLITE_OK;
  }
  int pgsz = l->db->page_size;
  uint64_t fsz = (uint64_t)pgsz + FRAME_HDR;
  if (o >= WAL_HDR + FRAME_HDR && amt == pgsz && (o - WAL_HDR) % fsz == FRAME_HDR) {
    uint64_t frame = (o - WAL_HDR) / fsz;
    const unsigned char *hdr = l->wal + WAL_HDR + frame * fsz;
    uint32_t db_pages = mw_get32(hdr + 4);
    if (db_pages != 0 && frame >= l->committed_frames && !l->in_snap) {
      /* A commit outside any snapshot: SQLite took none of the wal-index locks that
      ** begin one (bypass_lock above refuses the known ways). Accepting it would
      ** acknowledge a write that is never published. */
      sqlite3_log(SQLITE_IOERR_WRITE, "multiwriter: a commit outside a snapshot on %s (SQLite "
                  "took no wal-index read lock): refused", l->db->path);
      return SQLITE_IOERR_WRITE;
    }
    if (db_pages != 0 && frame >= l->committed_frames) {
      if (l->poisoned) {
        /* SQLite's cache holds a commit that was refused in phase two. */
        l->stats[MW_STAT_CONFLICT_WRITE]++;
        return SQLITE_BUSY_SNAPSHOT;
      }
      /* The count of the thread that began writing: the COMMIT may run on another
      ** (async.c), which then runs phase two of every database of the transaction,
      ** so the stash belongs to the committing thread. Commits of one event loop run
      ** on several threads at once: each finds only its own stashes. */
      int *locks = l->wlock_counter ? l->wlock_counter : mw_thread_write_locks();
      if (__atomic_load_n(locks, __ATOMIC_RELAXED) > 1) {
        /* That thread holds another engine write lock: most likely the same
        ** transaction writes an attached database too, whose frames SQLite writes
        ** next. Wait for phase two and publish them together (main_fcntl). */
        l->stash_from = l->committed_frames;
        l->stash_to = frame + 1;
        l->stash_pages = db_pages;
        mw_db_stash(l, (void *)mw_thread_write_locks());
        mw_pause_point("lane_stashed"); /* test_engine_async: stashes of threads at once */
        return SQLITE_OK;
      }
      int rc = mw_commit(l, l->committed_frames, frame + 1, db_pages);
      if (rc == SQLITE_OK) l->committed_frames = frame + 1;
      return rc;
    }
  }
  return SQLITE_OK;
}

static int wal_truncate(sqlite3_file *f, sqlite3_int64 size) {
  mw_lane *l = ((mw_file *)f)->lane;
  uint64_t s = (uint64_t)size;
  if (s < l->wal_len) l->wal_len = s;
  uint64_t fsz = (uint64_t)l->db->page_size + FRAME_HDR;
  uint64_t frames = s > WAL_HDR ? (s - WAL_HDR) / fsz : 0;
  if (l->committed_frames > frames) l->committed_frames = frames;
  return SQLITE_OK;
}

static int wal_sync(sqlite3_file *f, int flags) { return SQLITE_OK; }
static int wal_size(sqlite3_file *f, sqlite3_int64 *pSize) {
  *pSize = (sqlite3_int64)((mw_file *)f)->lane->wal_len;
  return SQLITE_OK;
}
static int wal_lock(sqlite3_file *f, int level) { return SQLITE_OK; }
static int wal_check(sqlite3_file *f, int *pRes) {
  *pRes = 0;
  return SQLITE_OK;
}
static int wal_fcntl(sqlite3_file *f, int op, void *arg) { return SQLITE_NOTFOUND; }
static int wal_sector(sqlite3_file *f) { return 512; }
static int wal_devchar(sqlite3_file *f) {
  return SQLITE_IOCAP_POWERSAFE_OVERWRITE | SQLITE_IOCAP_SAFE_APPEND | SQLITE_IOCAP_SEQUENTIAL;
}

const sqlite3_io_methods mw_wal_methods = {
  1, wal_close, wal_read, wal_write, wal_truncate, wal_sync, wal_size,
  wal_lock, wal_lock, wal_check, wal_fcntl, wal_sector, wal_devchar,
  0, 0, 0, 0, 0, 0
};

int mw_lane_open_wal(mw_lane *l, sqlite3_file *f) {
  mw_file *p = (mw_file *)f;
  l->wal_open = 1;
  l->wal_len = 0;
  l->committed_frames = 0;
  p->base.pMethods = &mw_wal_methods;
  return SQLITE_OK;
}
