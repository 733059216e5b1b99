/*
** db.c: the shared state of one open database in this process (mw_db): the
** registry of open databases, the first open (conversion to WAL, the log and its
** replay into the store), the last close (full compaction, log removed), the
** snapshot registry, and reads of the database file.
**
** Owns: mw_db, the registry, the data handle on the database file.
** Never touches: a lane's WAL or wal-index, SQLite connections other than the
** private stock one that converts the file at first open.
*/
#include "engine.h"

#include <stdlib.h>
#include <string.h>

static mw_mutex registry_mu = MW_MUTEX_INIT;
int64_t mw_early_snapshots;
static mw_db *registry;

/* ---------------------------------------------------------------- registry */

/* Databases are known by file identity, not by name: two hard links of one file,
** or a file opened again under the name it was renamed to, are one database. */
static mw_db *find_locked(const mw_file_id *id) {
  for (mw_db *d = registry; d; d = d->next)
    if (mw_file_id_eq(&d->id, id)) return d;
  return 0;
}

int mw_db_is_open(const char *zPath) {
  /* No stat (a system call) when nothing is open, and none under the registry's lock. */
  mw_mutex_lock(&registry_mu);
  int any = registry != 0;
  mw_mutex_unlock(&registry_mu);
  mw_file_id id;
  if (!any || mw_file_identity(zPath, &id, 0) != SQLITE_OK) return 0;
  mw_mutex_lock(&registry_mu);
  int yes = find_locked(&id) != 0;
  mw_mutex_unlock(&registry_mu);
  return yes;
}

mw_lane *mw_lane_find(const char *zDbName) {
  mw_lane *found = 0;
  if (zDbName == 0) return 0;
  mw_mutex_lock(&registry_mu);
  for (mw_db *d = registry; d && !found; d = d->next) {
    mw_mutex_lock(&d->mu);
    for (mw_lane *l = d->lanes; l; l = l->next_in_db)
      if (l->zName == zDbName) { found = l; break; }
    mw_mutex_unlock(&d->mu);
  }
  mw_mutex_unlock(&registry_mu);
  return found;
}

/* ---------------------------------------------------------------- first open */

/* Converts a new or rollback-mode file to WAL with a private stock connection,
** after checkpointing a leftover real -wal. The engine's lock must not be held
** (the stock connection needs the file's locks). */
static int convert_to_wal(sqlite3_vfs *root, const char *path, char **pzErr) {
  sqlite3 *c = 0;
  /* Private cache: with shared cache on, a shared open would wait for the mutex that
  ** the outer open (the one converting) holds. */
  int rc = sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_PRIVATECACHE, root->zName);
  sqlite3_stmt *st = 0;
  char mode[16] = "";
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(c, "PRAGMA main.journal_mode", -1, &st, 0);
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    const char *m = (const char *)sqlite3_column_text(st, 0);
    if (m) sqlite3_snprintf((int)sizeof(mode), mode, "%s", m);
  }
  if (st) rc = sqlite3_finalize(st);
  if (rc == SQLITE_OK) {
    if (sqlite3_stricmp(mode, "wal") != 0) {
      rc = sqlite3_exec(c, "PRAGMA main.journal_mode=WAL", 0, 0, 0);
    } else {
      rc = sqlite3_exec(c, "PRAGMA main.wal_checkpoint(TRUNCATE)", 0, 0, 0);
    }
  }
  if (rc != SQLITE_OK && pzErr && *pzErr == 0)
    *pzErr = sqlite3_mprintf("multiwriter: cannot convert %s to WAL mode: %s", path,
                             c ? sqlite3_errmsg(c) : sqlite3_errstr(rc));
  if (c) {
    int rc2 = sqlite3_close(c);
    if (rc == SQLITE_OK) rc = rc2;
  }
  if (rc == SQLITE_OK) {
    /* The close checkpointed and removed the -wal; one left over is empty. */
    char *wal = sqlite3_mprintf("%s-wal", path);
    if (wal == 0) return SQLITE_NOMEM;
    if (mw_file_exists(wal)) rc = mw_file_delete(wal, 0);
    sqlite3_free(wal);
  }
  return rc;
}

#if MW_USE_LOG
static int replay_record(void *ctx, uint64_t epoch, uint32_t db_pages, int npages,
                         const uint32_t *pgnos, const unsigned char *images) {
  mw_db *db = ctx;
  for (int i = 0; i < npages; i++) {
    unsigned char *img = malloc((size_t)db->page_size);
    if (img == 0) return SQLITE_NOMEM;
    memcpy(img, images + (size_t)i * (size_t)db->page_size, (size_t)db->page_size);
    int s = mw_stripe_of(pgnos[i]);
    mw_store_lock(&db->store, s);
    /* Recovery: nobody reads yet, so older versions of the page go at once. */
    int rc = mw_store_install_locked(&db->store, pgnos[i], epoch, img, epoch);
    mw_store_unlock(&db->store, s);
    if (rc != SQLITE_OK) return rc;
  }
  db->visible = db->assigned = epoch;
  db->visible_size = db_pages;
  return SQLITE_OK;
}
#endif

static void db_free(mw_db *db) {
  mw_mp_free(db); /* leaves the process table, drops the join lock */
  mw_guard_free(db->data); /* drops the lock */
  mw_store_free(&db->store);
  mw_cond_destroy(&db->cv);
  mw_cond_destroy(&db->turn_cv);
  mw_mutex_destroy(&db->mu);
  free(db->path);
  free(db);
}

/* The message of an open refused because the file is in use elsewhere. */
static void refuse_in_use(const char *zPath, int mp, char **pzErr) {
  if (pzErr == 0) return;
  sqlite3_free(*pzErr);
  if (mp)
    *pzErr = sqlite3_mprintf(
        "multiwriter: %s is open in another process without mw_mp=1 (through the engine or "
        "stock SQLite) or by a stock connection of this process: with mw_mp=1 every process "
        "must open it with mw_mp=1", zPath);
  else
    *pzErr = sqlite3_mprintf(
        "multiwriter: %s is open in another process (through the engine or stock SQLite) or "
        "by a stock connection of this process, and the engine needs it alone: to share it "
        "between processes, open it with mw_mp=1 in every process", zPath);
}

/* Takes the engine's lock on the file (guard.c), with the message when refused. */
static int lock_file(mw_db *db, char **pzErr) {
  int rc = mw_guard_lock(db->data);
  if (rc == SQLITE_BUSY) {
    refuse_in_use(db->path, db->opts.mp, pzErr);
  } else if (rc != SQLITE_OK && pzErr && *pzErr == 0) {
    *pzErr = sqlite3_mprintf("multiwriter: cannot lock %s (%s): the engine needs the file's "
                             "locks to keep other processes out", db->path, sqlite3_errstr(rc));
  }
  return rc;
}

/* 1 when the file must go through convert_to_wal: not a WAL-mode database yet (a
** new file, a rollback-mode one), or a real -wal is left to checkpoint. */
static int needs_conversion(mw_db *db) {
  char *wal = sqlite3_mprintf("%s-wal", db->path);
  if (wal == 0) return 1;
  int has_wal = mw_file_exists(wal);
  sqlite3_free(wal);
  if (has_wal) return 1;
  unsigned char hdr[20];
  return db->data->pMethods->xRead(db->data, hdr, sizeof(hdr), 0) != SQLITE_OK ||
         memcmp(hdr, "SQLite format 3", 16) != 0 || hdr[18] != 2 || hdr[19] != 2;
}

static int db_open(sqlite3_vfs *root, const char *zPath, const mw_file_id *id,
                   const mw_opts *o, mw_db **out, char **pzErr) {
  mw_db *db = calloc(1, sizeof(*db));
  if (db == 0) return SQLITE_NOMEM;
  mw_mutex_init(&db->mu);
  mw_cond_init(&db->cv);
  mw_cond_init(&db->turn_cv);
  db->path = malloc(strlen(zPath) + 1);
  if (db->path == 0) {
    db_free(db);
    return SQLITE_NOMEM;
  }
  strcpy(db->path, zPath);
  db->id = *id;
  db->root = root;
  db->opts = *o;
  int rc = mw_guard_open(root, zPath, &db->data);
  /* mw_mp=1 (mp.c): the join lock is held from here until the process has its slot;
  ** a process that joins others shares the file's lock with them (guard.c). */
  int joiner = 0;
  if (rc == SQLITE_OK && o->mp && mw_guard_readonly(db->data)) {
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: mw_mp=1 needs %s writable", zPath);
    rc = SQLITE_READONLY;
  }
  if (rc == SQLITE_OK && o->mp) {
    rc = mw_mp_attach(db, pzErr);
    joiner = rc == SQLITE_OK && !mw_mp_is_first(db);
  }
  /* Nobody else may look at the file from here on: not another process (its engine
  ** is refused, its stock connections get SQLITE_BUSY), not a stock connection of
  ** this process. */
  if (rc == SQLITE_OK && joiner) {
    rc = mw_guard_share(db->data);
    if (rc == SQLITE_BUSY) refuse_in_use(zPath, 1, pzErr);
  } else if (rc == SQLITE_OK) {
    rc = lock_file(db, pzErr);
  }
  if (rc != SQLITE_OK) {
    db_free(db);
    return rc;
  }
  /* With a log left behind (a crash), the file is the engine's, in WAL mode, and
  ** may be half compacted: only the log's replay makes it whole, so no stock
  ** connection may look at it first. */
  char *logname = sqlite3_mprintf("%s-mw", zPath);
  if (logname == 0) {
    db_free(db);
    return SQLITE_NOMEM;
  }
  int have_log = mw_file_exists(logname);
  sqlite3_free(logname);
  int marked = 0;
  rc = mw_guard_marked(db->data, &marked);
  if (rc == SQLITE_OK && marked && !have_log) {
    /* The last close clears the mark before it deletes the log: the log is elsewhere. */
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf(
          "multiwriter: %s was left by an engine process that did not close it, and its log "
          "%s-mw is missing: if the database was renamed or has another name (a hard link), "
          "open it once by the name it had then, so that the log is replayed", zPath, zPath);
    rc = SQLITE_CANTOPEN;
  }
  if (rc == SQLITE_OK && !joiner && !have_log && needs_conversion(db)) {
    /* The private stock connection needs the file's locks: let go meanwhile. Another
    ** process may take the file then; the lock below refuses this open if so. */
    rc = mw_guard_unlock(db->data);
    if (rc == SQLITE_OK) rc = convert_to_wal(root, zPath, pzErr);
    if (rc == SQLITE_BUSY) refuse_in_use(zPath, o->mp, pzErr);
    if (rc == SQLITE_OK) rc = lock_file(db, pzErr);
  }
  if (rc != SQLITE_OK) {
    db_free(db);
    return rc;
  }
  unsigned char hdr[100];
  rc = db->data->pMethods->xRead(db->data, hdr, 100, 0);
  if (rc != SQLITE_OK) {
    if (pzErr) *pzErr = sqlite3_mprintf("multiwriter: cannot read the header of %s", zPath);
    db_free(db);
    return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_NOTADB : rc;
  }
  int pgsz = (hdr[16] << 8) | hdr[17];
  if (pgsz == 1) pgsz = 65536;
  if (pgsz < 512 || (pgsz & (pgsz - 1)) || hdr[18] != 2 || hdr[19] != 2) {
    if (pzErr) *pzErr = sqlite3_mprintf("multiwriter: %s is not a WAL-mode database", zPath);
    db_free(db);
    return SQLITE_NOTADB;
  }
  db->page_size = pgsz;
  /* Pages read from the file stay cached: 4096 (16 MiB of 4 KiB pages), 256 small. */
  mw_store_init(&db->store, pgsz, o->small ? 256u : 4096u);
  sqlite3_int64 fsize = 0;
  rc = db->data->pMethods->xFileSize(db->data, &fsize);
  if (rc != SQLITE_OK) {
    db_free(db);
    return rc;
  }
  uint32_t hdr_pages = mw_get32(hdr + 28);
  if (hdr_pages != 0 && memcmp(hdr + 24, hdr + 92, 4) == 0) db->visible_size = hdr_pages;
  else db->visible_size = (uint32_t)(fsize / pgsz);
  db->assigned = db->visible = db->oldest = db->compacted = 1; /* epoch 1: the file */
#if MW_USE_LOG
  {
    mw_log_options lo;
    memset(&lo, 0, sizeof(lo));
    lo.page_size = pgsz;
    lo.sync_mode = 1;
    lo.full_fsync = o->fullfsync;
    lo.prealloc_step = o->small ? ((uint64_t)1 << 20) : 0;
    if (db->mp) mw_mp_log_options(db, &lo);
    uint64_t base = 0, last = 0;
    char *lerr = 0;
    rc = mw_log_open(zPath, &lo, replay_record, db, &db->log, &base, &last, &lerr);
    if (rc != SQLITE_OK) {
      if (pzErr && *pzErr == 0) *pzErr = lerr; else sqlite3_free(lerr);
      db_free(db);
      return rc;
    }
    sqlite3_free(lerr);
    /* Epochs continue after the log: the file holds the state at `base`. */
    db->compacted = base;
    if (last < base) last = base;
    db->assigned = db->visible = db->oldest = last;
    db->log_bytes = mw_log_size(db->log);
  }
#endif
  /* From the first commit on, the log may hold what the file does not: the mark
  ** keeps stock SQLite out of the file until the last close, crash or not. */
  if (!marked && !mw_guard_readonly(db->data)) {
    rc = mw_guard_set_mark(db->data, 1);
    if (rc != SQLITE_OK) {
#if MW_USE_LOG
      mw_log_close(db->log, 0);
#endif
      db_free(db);
      return rc;
    }
  }
  rc = mw_compactor_start(db);
  if (rc != SQLITE_OK) {
    if (pzErr && *pzErr == 0) *pzErr = sqlite3_mprintf("multiwriter: cannot start the compactor thread of %s", zPath);
#if MW_USE_LOG
    mw_log_close(db->log, 0);
#endif
    db_free(db);
    return rc;
  }
  if (db->mp) {
    /* The first process lets the others share the file's lock before they may join. */
    rc = mw_mp_is_first(db) ? mw_guard_share(db->data) : SQLITE_OK;
    if (rc == SQLITE_OK) rc = mw_mp_joined(db, pzErr);
    if (rc != SQLITE_OK) {
      mw_compactor_stop(db);
#if MW_USE_LOG
      mw_log_close(db->log, 0);
#endif
      db_free(db);
      return rc;
    }
  }
  *out = db;
  return SQLITE_OK;
}

int mw_db_acquire(sqlite3_vfs *root, const char *zPath, const mw_opts *o, mw_db **out,
                  char **pzErr) {
  /* The lane opened (created) the file already: it has an identity. */
  mw_file_id id;
  int rc = mw_file_identity(zPath, &id, 0);
  if (rc != SQLITE_OK) {
    if (pzErr && *pzErr == 0) *pzErr = sqlite3_mprintf("multiwriter: cannot stat %s", zPath);
    return rc;
  }
  mw_mutex_lock(&registry_mu);
  mw_db *db = find_locked(&id);
  for (mw_db *d = registry; d && db == 0 && rc == SQLITE_OK; d = d->next) {
    /* Another file under the name of an open one (renamed or deleted, and a new file
    ** made there): both would use the log "<name>-mw". */
    if (strcmp(d->path, zPath) != 0) continue;
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: %s is a new file under the name of a database "
                               "that the engine still has open (renamed or deleted while "
                               "open): close the old one's connections first", zPath);
    rc = SQLITE_CANTOPEN;
  }
  if (db && !db->opts.mp != !o->mp) {
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: %s is open in this process %s mw_mp=1: every "
                               "connection must open it the same way", zPath,
                               db->opts.mp ? "with" : "without");
    db = 0;
    rc = SQLITE_CANTOPEN;
  }
  if (db == 0 && rc == SQLITE_OK) {
    rc = db_open(root, zPath, &id, o, &db, pzErr);
    if (rc == SQLITE_OK) {
      db->next = registry;
      registry = db;
    }
  }
  if (rc == SQLITE_OK) db->refs++;
  mw_mutex_unlock(&registry_mu);
  *out = rc == SQLITE_OK ? db : 0;
  return rc;
}

int mw_db_release(mw_db *db) {
  int rc = SQLITE_OK;
  mw_mutex_lock(&registry_mu);
  if (--db->refs > 0) {
    mw_mutex_unlock(&registry_mu);
    return SQLITE_OK;
  }
  for (mw_db **pp = &registry; *pp; pp = &(*pp)->next)
    if (*pp == db) { *pp = db->next; break; }
  mw_compactor_stop(db);
  /* mw_mp=1: only the last process of the database does what follows; the others
  ** leave the log to it. */
  int alone = 1;
  if (db->mp) rc = mw_mp_leave(db, &alone);
  /* Last close: everything into the file, then the mark goes (the file alone is
  ** the database again), then the log. A crash between the two leaves a log whose
  ** base is its last epoch: its replay changes nothing. */
  if (rc == SQLITE_OK && alone) rc = db->broken ? db->broken : mw_compact_now(db, 1);
  int clean = alone && rc == SQLITE_OK && db->compacted == db->visible;
  if (clean && !mw_guard_readonly(db->data)) {
    rc = mw_guard_set_mark(db->data, 0);
    clean = rc == SQLITE_OK;
    if (clean) mw_crash_point("close_after_unmark");
  }
#if MW_USE_LOG
  int rc2 = mw_log_close(db->log, clean);
  if (rc == SQLITE_OK) rc = rc2;
#endif
  if (db->mp) mw_mp_left(db, alone);
  db_free(db);
  mw_mutex_unlock(&registry_mu);
  return rc;
}

/* ---------------------------------------------------------------- snapshots */

static void recompute_oldest_locked(mw_db *db) {
  uint64_t m = db->visible;
  if (db->compacting && db->compacting < m) m = db->compacting;
  for (mw_lane *l = db->lanes; l; l = l->next_in_db)
    if (l->reg && l->reg < m) m = l->reg;
  if (m > db->oldest) __atomic_store_n(&db->oldest, m, __ATOMIC_RELEASE);
}

void mw_db_add_lane(mw_db *db, mw_lane *l) {
  mw_cond_init(&l->turn_wake);
  mw_mutex_lock(&db->mu);
  l->next_in_db = db->lanes;
  db->lanes = l;
  mw_mutex_unlock(&db->mu);
}

void mw_db_remove_lane(mw_db *db, mw_lane *l) {
  mw_mutex_lock(&db->mu);
  mw_turn_forget_locked(db, l);
  for (mw_lane **pp = &db->lanes; *pp; pp = &(*pp)->next_in_db)
    if (*pp == l) { *pp = l->next_in_db; break; }
  recompute_oldest_locked(db);
  mw_mutex_unlock(&db->mu);
  mw_cond_destroy(&l->turn_wake);
}

/* Registers the lane's snapshot at the newest visible epoch (under db->mu, so that
** garbage collection and compaction see it before the lane reads anything). */
static void snapshot_register_locked(mw_db *db, mw_lane *l, uint64_t *pSnap, uint32_t *pSize) {
  l->reg = db->visible;
  *pSnap = db->visible;
  *pSize = db->visible_size;
}

void mw_db_snapshot_begin(mw_db *db, mw_lane *l, uint64_t *pSnap, uint32_t *pSize) {
  if (db->mp) mw_mp_refresh(db); /* the other processes' commits first */
  mw_mutex_lock(&db->mu);
  snapshot_register_locked(db, l, pSnap, pSize);
  mw_mutex_unlock(&db->mu);
}

void mw_db_snapshot_end(mw_db *db, mw_lane *l) {
  mw_mutex_lock(&db->mu);
  uint64_t was = l->reg;
  l->reg = 0;
  if (was == db->oldest) recompute_oldest_locked(db);
  int wake = 0;
  mw_compact_dirty_locked(db, &wake);
  mw_mutex_unlock(&db->mu);
  if (wake) mw_compact_wake(db);
}

/* The newest epoch of the installed prefix: every epoch up to it is validated and
** its versions are in the store, though maybe not durable yet. Slots past `visible`
** are live (assign waits for room in the ring), and `installed` is set by the
** committer after its versions went in (release) and cleared by assign. */
static uint64_t installed_prefix_locked(mw_db *db, uint32_t *pSize) {
  uint64_t e = db->visible;
  *pSize = db->visible_size;
  while (e < db->assigned) {
    const mw_pending *nx = &db->ring[(e + 1) % MW_RING];
    if (nx->epoch != e + 1 || !__atomic_load_n(&nx->installed, __ATOMIC_ACQUIRE)) break;
    e++;
    *pSize = nx->size;
  }
  return e;
}

#ifdef MW_TAIL_TRACE
_Thread_local mw_tail_trace mw_tail;
#endif

void mw_db_txn_begin(mw_db *db, mw_lane *l, uint64_t *pSnap, uint32_t *pSize) {
#ifdef MW_TAIL_TRACE
  uint64_t t0 = mw_now_ns(), t1 = 0;
#endif
  if (db->mp) mw_mp_refresh(db); /* the other processes' commits first */
  mw_mutex_lock(&db->mu);
  MW_TAIL(t1 = mw_now_ns());
  mw_turn_enter_locked(db, l); /* the hot-spot turn (turn.c) */
  MW_TAIL(mw_tail.turn_ns += mw_now_ns() - t1);
  db->active++;
  l->counted = 1;
  snapshot_register_locked(db, l, pSnap, pSize);
  /* The turn holder runs on the installed prefix: the commits of the holders before
  ** it that are validated and installed but wait for their group sync. Nothing of
  ** this transaction completes before they are durable: its commit's epoch is
  ** later (acknowledged only once visible, and visibility is a prefix), and its
  ** end waits for them (mw_db_wait_snapshot_durable). Ordinary snapshots see only
  ** visible (durable) commits. */
  l->held_turn = db->turn == l;
  if (l->held_turn) {
    uint32_t size = 0;
    uint64_t e = installed_prefix_locked(db, &size);
    if (e > *pSnap) {
      l->reg = *pSnap = e;
      *pSize = size;
      __atomic_add_fetch(&mw_early_snapshots, 1, __ATOMIC_RELAXED);
    }
  }
  MW_TAIL(mw_tail.held += l->held_turn; mw_tail.exclusive += l->held_turn && db->turn_exclusive;
          mw_tail.probes += !l->turn_queued && l->heat >= MW_HEAT_QUEUE / 2; mw_tail.begins++);
  mw_mutex_unlock(&db->mu);
  MW_TAIL(mw_tail.begin_ns += mw_now_ns() - t0);
}

void mw_db_turn_pass(mw_db *db, mw_lane *l) {
  mw_mutex_lock(&db->mu);
  if (db->turn == l) {
    /* Its transaction is done writing: it no longer counts as in flight for the
    ** next holder, which must not wait for this commit's sync. */
    mw_turn_leave_locked(db, l);
    if (l->counted) {
      db->active--;
      l->counted = 0;
    }
    mw_cond_broadcast(&db->turn_cv);
  }
  mw_mutex_unlock(&db->mu);
}

void mw_db_wait_snapshot_durable(mw_db *db, mw_lane *l) {
  mw_mutex_lock(&db->mu);
  while (l->reg > db->visible && !db->broken) mw_cond_wait(&db->cv, &db->mu);
  mw_mutex_unlock(&db->mu);
}

void mw_db_txn_end(mw_db *db, mw_lane *l) {
#ifdef MW_TAIL_TRACE
  uint64_t t0 = mw_now_ns();
#endif
  mw_mutex_lock(&db->mu);
  /* A snapshot that included commits not yet durable (a turn holder's) ends only
  ** once they are, when it read anything: a read-only transaction must not
  ** complete on a commit a crash can take away. A writer's commit already waited
  ** for them. (Reads from SQLite's cache need no wait: a lane whose snapshot moved
  ** past its previous one starts cold, so what it reads comes through xRead.) */
  while (l->touched && l->reg > db->visible && !db->broken) mw_cond_wait(&db->cv, &db->mu);
  /* The end of a cold start's snapshot (nothing read; SQLite locks again at once)
  ** keeps the turn: otherwise the holder would give it up before it began. */
  int keep_turn = l->cold_start && !l->touched;
  uint64_t was = l->reg;
  l->reg = 0;
  if (l->counted) {
    db->active--;
    l->counted = 0;
  }
  if (!keep_turn) mw_turn_leave_locked(db, l);
  if (was == db->oldest) recompute_oldest_locked(db);
  /* Only the turn's waits depend on a transaction's end (db->active), and there are
  ** none while no turn is held or queued. */
  if (db->turn || db->turn_head) mw_cond_broadcast(&db->turn_cv);
  int wake = 0;
  mw_compact_dirty_locked(db, &wake);
  mw_mutex_unlock(&db->mu);
  MW_TAIL(mw_tail.end_ns += mw_now_ns() - t0);
  if (wake) mw_compact_wake(db);
}

/* ---------------------------------------------------------------- stashed commits */

/* The lanes of every open database whose commit the thread `owner` stashed until
** phase two (lane.c). Only that thread changes those lanes' stash, so reading them
** here races with nothing that matters to the answer. */
int mw_db_stashed_lanes(void *owner, mw_lane **out, int max) {
  int n = 0;
  mw_mutex_lock(&registry_mu);
  for (mw_db *d = registry; d; d = d->next) {
    mw_mutex_lock(&d->mu);
    for (mw_lane *l = d->lanes; l; l = l->next_in_db) {
      if (__atomic_load_n(&l->stashed, __ATOMIC_ACQUIRE) &&
          __atomic_load_n(&l->stash_owner, __ATOMIC_RELAXED) == owner) {
        if (n < max) out[n] = l;
        n++;
      }
    }
    mw_mutex_unlock(&d->mu);
  }
  mw_mutex_unlock(&registry_mu);
  return n;
}
