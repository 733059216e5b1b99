/*
** db.c: the shared state of one open database in this process (mw_db): the
** registry of open databases, the first open (conversion to WAL, the log and its
** replay into the store), the last close (full compaction, log removed) and the
** same at process exit for databases nobody closed, the
** snapshot registry with the threads that use each transaction and the release of
** those whose threads all ended (owner.c), and reads of the database file.
**
** Owns: mw_db, the registry, the data handle on the database file.
** Never touches: a lane's WAL or wal-index, SQLite connections other than the
** private stock one that converts the file at first open.
*/
#include "engine.h"
#include "compact/compact.h"
#include "core/datafile.h"
#include "core/db.h"
#include "core/owner.h"
#include "core/store.h"
#include "core/turn.h"
#include "durability/log.h"
#include "platform/crash.h"
#include "processes/guard.h"
#include "processes/mp.h"
#include "replica/stream.h"

#include <stdlib.h>
#include <string.h>

static mw_mutex registry_mu = MW_MUTEX_INIT;
int64_t mw_early_snapshots;
static mw_db *registry;

/* What the compactor asks of this layer (compact/compact.h): it calls nothing above its
** own layer by name. */
static int release_orphans_locked(mw_db *db);
static uint64_t oldest_now_locked(mw_db *db);
static int unmark_file(mw_db *db);
static const mw_compact_host compact_host = {release_orphans_locked, oldest_now_locked,
                                             unmark_file};

/* ---------------------------------------------------------------- registry */

/* A child made by fork() inherits the parent's registry: the parent's databases,
** their locks held by the parent, their background threads gone. It must not find
** them: its own open of the file then meets the parent's lock like any other process
** (a second process is refused, or joins with mw_mp=1), where it used to share the
** parent's state and commit into the parent's log unseen (acknowledged, then lost).
** The inherited ones stay in memory, reachable from their connections only
** (mw_db_release leaves them alone). */
static int registry_hooked; /* registry_forked and registry_at_exit registered */
static void registry_at_exit(void);
static void registry_forked(void) {
  mw_mutex_init(&registry_mu);
  registry = 0;
}

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

static int replay_record(void *ctx, uint64_t epoch, uint32_t db_pages, int npages,
                         const uint32_t *pgnos, const unsigned char *images) {
  mw_db *db = ctx;
  /* Recovery: nobody reads yet, so older versions of the page go at once. */
  int rc = mw_store_install_record(&db->store, epoch, npages, pgnos, images, 0, epoch);
  if (rc != SQLITE_OK) return rc;
  db->visible = db->assigned = epoch;
  db->visible_size = db_pages;
  return SQLITE_OK;
}

static void db_free(mw_db *db) {
  /* The file's lock first: a process that takes the join lock next and finds no
  ** other process alive takes the file's lock at once. */
  mw_guard_free(db->data); /* drops the lock */
  mw_mp_free(db); /* leaves the process table, drops the join lock */
  mw_stream_free(db);
  mw_store_free(&db->store);
  mw_cond_destroy(&db->cv);
  mw_cond_destroy(&db->turn_cv);
  mw_cond_destroy(&db->gate_cv);
  mw_cond_destroy(&db->ckpt_cv);
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
  int rc = mw_guard_lock(db->data, db->path, &db->id);
  if (rc == SQLITE_BUSY) {
    refuse_in_use(db->path, db->opts.mp, pzErr);
  } else if (rc != SQLITE_OK && pzErr && *pzErr == 0) {
    *pzErr = sqlite3_mprintf("multiwriter: cannot lock %s (%s): the engine needs the file's "
                             "locks to keep other processes out", db->path, sqlite3_errstr(rc));
  }
  return rc;
}

/* *pNeeds = 1 when the file must go through convert_to_wal: not a WAL-mode database
** yet (a new file, a rollback-mode one), or a real -wal is left to checkpoint.
** SQLITE_NOMEM when the -wal name cannot be made (an open that goes on without it
** would hide the failure: SQLite's fault tests expect it reported). */
static int needs_conversion(mw_db *db, int *pNeeds) {
  char *wal = sqlite3_mprintf("%s-wal", db->path);
  if (wal == 0) return SQLITE_NOMEM;
  int has_wal = mw_file_exists(wal);
  sqlite3_free(wal);
  unsigned char hdr[20];
  *pNeeds = has_wal || db->data->pMethods->xRead(db->data, hdr, sizeof(hdr), 0) != SQLITE_OK ||
            memcmp(hdr, "SQLite format 3", 16) != 0 || hdr[18] != 2 || hdr[19] != 2;
  return SQLITE_OK;
}
/* Pages read from the file stay cached: 4096 (16 MiB of 4 KiB pages), 256 small.
** With mw_mp=1 the other processes' pages come in lazily, read from the log (mp.c). */
static int store_init(mw_db *db, int page_size) {
  int rc = mw_store_init(&db->store, page_size, db->opts.small ? 256u : 4096u);
  if (rc == SQLITE_OK && db->opts.mp) mw_store_set_loader(&db->store, mw_mp_load_image, db);
  return rc;
}

/* db_open, step 1: the state's memory and identity. SQLITE_NOMEM (nothing left
** allocated) when out of memory. */
static int db_alloc(sqlite3_vfs *root, const char *zPath, const mw_file_id *id,
                    const mw_opts *o, mw_db **pDb) {
  mw_db *db = calloc(1, sizeof(*db));
  if (db == 0) return SQLITE_NOMEM;
  mw_mutex_init(&db->mu);
  mw_cond_init(&db->cv);
  mw_cond_init(&db->turn_cv);
  mw_cond_init(&db->gate_cv);
  mw_cond_init(&db->ckpt_cv);
  db->path = malloc(strlen(zPath) + 1);
  if (db->path == 0) {
    db_free(db);
    return SQLITE_NOMEM;
  }
  strcpy(db->path, zPath);
  db->pid = mw_process_id();
  db->id = *id;
  db->root = root;
  db->opts = *o;
  db->host = &compact_host;
  *pDb = db;
  return SQLITE_OK;
}

/* Step 2: opens the file (guard.c) and keeps everybody else out of it: with mw_mp=1
** the process attaches (mp.c: the join lock is held from here until the process has
** its slot) and a process that joins others (*pJoiner) shares the file's lock with
** them; else the engine's lock. */
static int db_take_file(mw_db *db, int *pJoiner, char **pzErr) {
  const mw_opts *o = &db->opts;
  int rc = mw_guard_open(db->root, db->path, &db->data);
  *pJoiner = 0;
  if (rc == SQLITE_OK && o->mp && mw_guard_readonly(db->data)) {
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: mw_mp=1 needs %s writable", db->path);
    rc = SQLITE_READONLY;
  }
  if (rc == SQLITE_OK && o->mp) {
    rc = mw_mp_attach(db, pzErr);
    *pJoiner = rc == SQLITE_OK && !mw_mp_is_first(db);
  }
  /* Nobody else may look at the file from here on: not another process (its engine
  ** is refused, its stock connections get SQLITE_BUSY), not a stock connection of
  ** this process. */
  if (rc == SQLITE_OK && *pJoiner) {
    rc = mw_guard_share(db->data, db->path, &db->id);
    if (rc == SQLITE_BUSY) refuse_in_use(db->path, 1, pzErr);
  } else if (rc == SQLITE_OK) {
    rc = lock_file(db, pzErr);
  }
  return rc;
}

/* Step 3: *pHaveLog: a log is left behind (a crash), *pMarked: the file carries the
** mark; a file that is not in WAL mode yet is converted (not by a joiner, nor with a
** log to replay). MW_RC_STOCK_OPEN when stock SQLite is to open it instead. */
static int db_prepare_file(mw_db *db, int joiner, int readonly, int *pHaveLog, int *pMarked,
                           char **pzErr) {
  const char *zPath = db->path;
  /* With a log left behind (a crash), the file is the engine's, in WAL mode, and
  ** may be half compacted: only the log's replay makes it whole, so no stock
  ** connection may look at it first. */
  char *logname = sqlite3_mprintf("%s-mw", zPath);
  if (logname == 0) return SQLITE_NOMEM;
  int have_log = *pHaveLog = mw_file_exists(logname);
  sqlite3_free(logname);
  int rc = mw_guard_marked(db->data, pMarked);
  if (rc == SQLITE_OK && *pMarked && !have_log) {
    /* The last close clears the mark before it deletes the log: the log is elsewhere. */
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf(
          "multiwriter: %s was left by an engine process that did not close it, and its log "
          "%s-mw is missing: if the database was renamed or has another name (a hard link), "
          "open it once by the name it had then, so that the log is replayed", zPath, zPath);
    rc = SQLITE_CANTOPEN;
  }
  int convert = 0;
  if (rc == SQLITE_OK && !joiner && !have_log) rc = needs_conversion(db, &convert);
  if (rc != SQLITE_OK || !convert) return rc;
  /* A read-only connection changes no file: one that is not in WAL mode (or has a
  ** real -wal) is read as stock SQLite reads it. A later read-write open through
  ** the engine converts it then (or is refused while this one is reading). */
  if (readonly) return MW_RC_STOCK_OPEN;
  /* The private stock connection needs the file's locks: let go meanwhile. Another
  ** process may take the file then; the lock below refuses this open if so. */
  rc = mw_guard_unlock(db->data);
  if (rc == SQLITE_OK) rc = convert_to_wal(db->root, zPath, pzErr);
  if (rc == SQLITE_BUSY) refuse_in_use(zPath, db->opts.mp, pzErr);
  /* Stock SQLite itself found no database in the file, or may only read it (a
  ** write version above 2, a file it cannot write): the engine cannot take it, and
  ** vfs.c opens it as stock SQLite would (queries fail with "file is not a
  ** database", or reads work and writes fail with SQLITE_READONLY). */
  if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_READONLY) rc = MW_RC_STOCK_OPEN;
  if (rc == SQLITE_OK) rc = lock_file(db, pzErr);
  return rc;
}

/* Step 4: the page size and the size from the file's header, the store, epoch 1 (the
** file). MW_RC_STOCK_OPEN for a file stock SQLite opens read-only (no log to replay). */
static int db_read_header(mw_db *db, int have_log, char **pzErr) {
  unsigned char hdr[100];
  int rc = db->data->pMethods->xRead(db->data, hdr, 100, 0);
  if (rc != SQLITE_OK) {
    if (pzErr) *pzErr = sqlite3_mprintf("multiwriter: cannot read the header of %s", db->path);
    return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_NOTADB : rc;
  }
  int pgsz = (hdr[16] << 8) | hdr[17];
  if (pgsz == 1) pgsz = 65536;
  if (pgsz < 512 || (pgsz & (pgsz - 1)) || hdr[18] != 2 || hdr[19] != 2) {
    /* A write version above 2 (and a read version SQLite reads): stock SQLite opens
    ** the file read-only, and so it is opened (vfs.c), unless a log is to replay. */
    if (!have_log && pgsz >= 512 && !(pgsz & (pgsz - 1)) && hdr[18] > 2 && hdr[19] <= 2)
      return MW_RC_STOCK_OPEN;
    if (pzErr) *pzErr = sqlite3_mprintf("multiwriter: %s is not a WAL-mode database", db->path);
    return SQLITE_NOTADB;
  }
  db->page_size = pgsz;
  store_init(db, pgsz);
  sqlite3_int64 fsize = 0;
  rc = db->data->pMethods->xFileSize(db->data, &fsize);
  if (rc != SQLITE_OK) return rc;
  uint32_t hdr_pages = mw_get32(hdr + 28);
  if (hdr_pages != 0 && memcmp(hdr + 24, hdr + 92, 4) == 0) db->visible_size = hdr_pages;
  else db->visible_size = (uint32_t)(fsize / pgsz);
  db->assigned = db->visible = db->oldest = db->compacted = 1; /* epoch 1: the file */
  return SQLITE_OK;
}

/* Step 5: opens the log and replays it into the store; epochs continue after it. */
static int db_open_log(mw_db *db, uint64_t txid, char **pzErr) {
  const mw_opts *o = &db->opts;
  mw_log_options lo;
  memset(&lo, 0, sizeof(lo));
  lo.page_size = db->page_size;
  lo.sync_mode = 1;
  lo.full_fsync = o->fullfsync;
  lo.prealloc_step = o->small ? ((uint64_t)1 << 20) : 0;
  lo.room_max = o->log_max_bytes; /* a compaction's cycle (mw_mp=1) */
  lo.stream_txid = txid;           /* a new log's header: the replica stream's TXID */
  if (db->mp) mw_mp_log_options(db, &lo);
  uint64_t base = 0, last = 0;
  char *lerr = 0;
  int rc = mw_log_open(db->path, &lo, replay_record, db, &db->log, &base, &last, &lerr);
  if (rc != SQLITE_OK) {
    if (pzErr && *pzErr == 0) *pzErr = lerr; else sqlite3_free(lerr);
    return rc;
  }
  sqlite3_free(lerr);
  /* Epochs continue after the log: the file holds the state at `base`. */
  db->compacted = base;
  if (last < base) last = base;
  db->assigned = db->visible = db->oldest = last;
  db->log_bytes = mw_log_size(db->log);
  return SQLITE_OK;
}

/* Step 4b (mw_ltx_dir=): the replica stream: before the log, where its TXIDs stand for a
** database with no log to replay (*pTxid, for the new log's header)... */
static int db_open_stream(mw_db *db, int have_log, uint64_t *pTxid, char **pzErr) {
  *pTxid = 0;
  return db->opts.ltx_dir ? mw_stream_open(db, db->opts.ltx_dir, have_log, pTxid, pzErr) : SQLITE_OK;
}

/* ...step 5b: after it, the TXIDs of a replayed log, the replica caught up with it. */
static int db_start_stream(mw_db *db, char **pzErr) {
  return db->stream ? mw_stream_start(db, pzErr) : SQLITE_OK;
}

/* Step 6: from the first commit on, the log may hold what the file does not: the mark
** keeps stock SQLite out of the file until the last close, crash or not. A file
** marked already (a crash's log to replay, or other processes with mw_mp=1) keeps
** it: this process's compactions write page 1 too, and without the mark in those
** writes a crash left a log beside a file that stock SQLite would read and write. */
static int db_set_mark(mw_db *db, int marked) {
  if (mw_guard_readonly(db->data)) return SQLITE_OK;
  if (marked) {
    mw_guard_keep_mark(db->data);
    return SQLITE_OK;
  }
  return mw_guard_set_mark(db->data, 1);
}

/* Step 7: the compactor, a job of the shared background workers. */
static int db_start_compactor(mw_db *db, char **pzErr) {
  int rc = mw_compactor_start(db);
  if (rc != SQLITE_OK && pzErr && *pzErr == 0)
    *pzErr = sqlite3_mprintf("multiwriter: cannot start the compactor thread of %s", db->path);
  return rc;
}

/* Step 8 (mw_mp=1): the first process lets the others share the file's lock before
** they may join; then this process takes its slot (the join lock released). */
static int db_join(mw_db *db, char **pzErr) {
  int rc = mw_mp_is_first(db) ? mw_guard_share(db->data, db->path, &db->id) : SQLITE_OK;
  if (rc == SQLITE_BUSY) refuse_in_use(db->path, 1, pzErr);
  if (rc == SQLITE_OK) rc = mw_mp_joined(db, pzErr);
  return rc;
}

static int db_open(sqlite3_vfs *root, const char *zPath, const mw_file_id *id,
                   const mw_opts *o, int readonly, mw_db **out, char **pzErr) {
  mw_db *db = 0;
  int joiner = 0, have_log = 0, marked = 0;
  int rc = db_alloc(root, zPath, id, o, &db);
  if (rc != SQLITE_OK) return rc;
  rc = db_take_file(db, &joiner, pzErr);
  if (rc == SQLITE_OK) rc = db_prepare_file(db, joiner, readonly, &have_log, &marked, pzErr);
  uint64_t txid = 0;
  if (rc == SQLITE_OK) rc = db_read_header(db, have_log, pzErr);
  if (rc == SQLITE_OK) rc = db_open_stream(db, have_log, &txid, pzErr);
  if (rc == SQLITE_OK) rc = db_open_log(db, txid, pzErr);
  if (rc == SQLITE_OK) rc = db_start_stream(db, pzErr);
  db->opts.ltx_dir = 0; /* the open's URI: not kept (the stream has its own copy) */
  if (rc == SQLITE_OK) rc = db_set_mark(db, marked);
  if (rc == SQLITE_OK) rc = db_start_compactor(db, pzErr);
  if (rc == SQLITE_OK && db->mp) rc = db_join(db, pzErr);
  if (rc != SQLITE_OK) { /* the one cleanup: what the steps took, in reverse */
    mw_compactor_stop(db); /* a no-op unless it started */
    if (db->log) mw_log_close(db->log, 0);
    db_free(db);
    return rc;
  }
  *out = db;
  return SQLITE_OK;
}

int mw_db_acquire(sqlite3_vfs *root, const char *zPath, const mw_opts *o, int readonly,
                  mw_db **out, char **pzErr) {
  /* The lane opened (created) the file already: it has an identity. */
  mw_file_id id;
  int rc = mw_file_identity(zPath, &id, 0);
  if (rc != SQLITE_OK) {
    if (pzErr && *pzErr == 0) *pzErr = sqlite3_mprintf("multiwriter: cannot stat %s", zPath);
    return rc;
  }
  mw_mutex_lock(&registry_mu);
  if (!registry_hooked) {
    registry_hooked = 1;
    mw_at_fork_child(registry_forked);
    mw_at_process_exit(registry_at_exit);
  }
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
  if (db && (!o->ltx_dir != !db->stream || (o->ltx_dir && !mw_stream_same_dir(db, o->ltx_dir)))) {
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: %s is open in this process %s: every connection "
                               "must name the same mw_ltx_dir (or none)", zPath,
                               db->stream ? "with a replica stream" : "without a replica stream");
    db = 0;
    rc = SQLITE_CANTOPEN;
  }
  if (db == 0 && rc == SQLITE_OK) {
    rc = db_open(root, zPath, &id, o, readonly, &db, pzErr);
    if (rc == SQLITE_OK) {
      db->next = registry;
      registry = db;
    }
  }
  if (rc == SQLITE_OK) __atomic_add_fetch(&db->refs, 1, __ATOMIC_RELAXED); /* also read under db->mu */
  mw_mutex_unlock(&registry_mu);
  *out = rc == SQLITE_OK ? db : 0;
  return rc;
}

/* Nothing in flight on the database (under db->mu): no transaction, no read, no
** commit between its epoch and its visibility, no turn, no failed log. */
static int quiet_locked(mw_db *db) {
  if (db->active || db->assigned != db->visible || db->broken || db->turn) return 0;
  for (mw_lane *x = db->lanes; x; x = x->next_in_db)
    if (x->reg) return 0;
  return 1;
}

/* The end of the last close (of the last process, with mw_mp=1; the compactor
** stopped): everything into the file, then the mark goes (the file alone is the
** database again), then the log. A crash between the two leaves a log whose base is
** its last epoch: its replay changes nothing. Where the file does not get everything
** (an error, or not alone) the log stays, as after a crash. keep_log keeps the log's
** memory (the close at exit, finish_at_exit). */
static int finish(mw_db *db, int alone, int rc, int keep_log) {
  if (rc == SQLITE_OK && alone) rc = db->broken ? db->broken : mw_compact_now(db, MW_COMPACT_LAST);
  int clean = alone && rc == SQLITE_OK && db->compacted == db->visible;
  if (clean && !mw_guard_readonly(db->data)) {
    rc = mw_guard_set_mark(db->data, 0);
    clean = rc == SQLITE_OK;
    if (clean) mw_crash_point("close_after_unmark");
  }
  /* The replica's state file: the file as the stream's last TXID left it. Without it
  ** the next open writes the file to the replica whole (nothing is lost). */
  if (clean && db->stream && mw_stream_closed(db) != SQLITE_OK)
    sqlite3_log(SQLITE_WARNING, "multiwriter: the replica stream of %s could not record the "
                "closed file's state: the next open writes the file whole", db->path);
  int rc2 = keep_log ? mw_log_shut(db->log, clean) : mw_log_close(db->log, clean);
  if (rc == SQLITE_OK) rc = rc2;
  /* SQLite does not pass a close's error on: say it here (a full disk: the file could
  ** not grow by what the log holds). */
  if (alone && !clean && rc != SQLITE_OK)
    sqlite3_log(rc, "multiwriter: the last close of %s could not write the log into the file "
                "(%s): the log and the engine's mark stay until an open through the engine "
                "replays it; nothing is lost", db->path, sqlite3_errstr(rc));
  return rc;
}

/* ---------------------------------------------------------------- the mark while open */

/* A checkpoint (compact.c) takes the mark off once the log holds nothing the file
** lacks, so that a copy of the file is a database for stock SQLite while connections
** stay open; every commit first puts it back (mw_db_arm, before its epoch), so no
** record reaches the log of an unmarked file. The state is db->unmarked under db->mu
** (mw_mp=1: the shared header's, under the publication lock, mp.c). */
int mw_db_arm(mw_db *db) {
  if (db->mp) return mw_mp_arm(db); /* the caller holds the publication lock */
  int rc = SQLITE_OK;
  mw_mutex_lock(&db->mu);
  /* A write and a sync of the file under db->mu: once, for the first commit after a
  ** checkpoint; the mark cannot be taken off meanwhile. */
  if (db->unmarked) {
    rc = mw_guard_set_mark(db->data, 1);
    if (rc == SQLITE_OK) db->unmarked = 0;
  }
  if (rc == SQLITE_OK) db->arming++;
  mw_mutex_unlock(&db->mu);
  return rc;
}

void mw_db_disarm_locked(mw_db *db) {
  if (!db->mp) db->arming--;
}

static int unmark_file(mw_db *db) {
  if (mw_guard_readonly(db->data)) return SQLITE_OK;
  if (db->mp) return mw_mp_unmark(db);
  int rc = SQLITE_OK;
  mw_mutex_lock(&db->mu);
  /* Written even when already off: a reformat's page 1 carries the mark in. */
  if (!db->broken && db->arming == 0 && db->compacted == db->assigned) {
    rc = mw_guard_unmark_open(db->data);
    if (rc == SQLITE_OK) db->unmarked = 1;
  }
  mw_mutex_unlock(&db->mu);
  return rc;
}

int mw_db_release(mw_db *db) {
  int rc = SQLITE_OK;
  mw_mutex_lock(&registry_mu);
  /* A connection inherited through fork() and closed in the child: the database is
  ** the parent's (its log, its mark, its other processes); nothing of it is touched. */
  if (db->pid != mw_process_id()) {
    __atomic_sub_fetch(&db->refs, 1, __ATOMIC_RELAXED);
    mw_mutex_unlock(&registry_mu);
    return SQLITE_OK;
  }
  if (__atomic_sub_fetch(&db->refs, 1, __ATOMIC_RELAXED) > 0) {
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
  rc = finish(db, alone, rc, 0);
  if (db->mp) mw_mp_left(db, alone);
  db_free(db);
  mw_mutex_unlock(&registry_mu);
  return rc;
}

/* ---------------------------------------------------------------- process exit */

/* A database still open when the process exits normally (a Bun Worker still running or
** terminated, a program that never closed its connection) is finished as its last
** close would finish it, so that a normal exit leaves only the .db, as a stock
** connection's exit leaves no -wal. Only once nothing is in flight on it (a running
** thread may be inside a transaction; a terminated one's is released): the wait for
** that is bounded, and a database that does not get there is left as a crash leaves
** it (its log is replayed at the next open; nothing is lost). The other threads may
** run until the process ends: the database stays allocated and registered, reads go
** on (the file holds everything), and every commit is refused (db->broken), so that
** nothing is acknowledged into the removed log. With mw_mp=1 the last process of the
** database does the same and removes the shared file (mp.c, leave_at_exit); while other
** processes have it open (or one is joining), it is left to them, as a process's death
** is: their commits go on, and the last of them finishes it. */
#define EXIT_WAIT_MS 1000

/* Takes m before the deadline, polling: exit() may be called by a thread that holds it
** (from a callback run inside the engine), which must not wait for itself. */
static int lock_before(mw_mutex *m, uint64_t deadline) {
  while (!mw_mutex_trylock(m)) {
    if (mw_now_ns() >= deadline) return 0;
    mw_sleep_us(1000);
  }
  return 1;
}

static void finish_at_exit(mw_db *db, uint64_t deadline) {
  if (db->pid != mw_process_id() || !lock_before(&db->mu, deadline)) return;
  int quiet;
  while (!(quiet = quiet_locked(db)) && !db->broken && mw_now_ns() < deadline) {
    release_orphans_locked(db); /* transactions of terminated Workers */
    if (!quiet_locked(db)) mw_cond_timedwait_ms(&db->cv, &db->mu, 1);
  }
  if (quiet) db->frozen = 1; /* no snapshot starts until the end below */
  mw_mutex_unlock(&db->mu);
  if (!quiet) return;
  /* First, as at the last close: with mw_mp=1 the compactor takes the join lock. */
  mw_compactor_stop(db);
  int rc = SQLITE_OK, alone = 1;
  if (db->mp) rc = mw_mp_leave_at_exit(db, &alone);
  if (!alone) {
    /* Left to the other processes, which compact it: this one's commits may go on
    ** until it ends. */
    mw_mutex_lock(&db->mu);
    db->frozen = 0;
    mw_cond_broadcast(&db->cv);
    mw_mutex_unlock(&db->mu);
    return;
  }
  __atomic_add_fetch(&db->refs, 1, __ATOMIC_RELAXED); /* no last close after this one */
  rc = finish(db, 1, rc, 1);
  /* The join lock stays until the process ends: a process that opens the database
  ** meanwhile waits for it, then finds the shared file gone and starts anew. */
  if (db->mp) mw_mp_left(db, 1);
  mw_mutex_lock(&db->mu);
  db->broken = rc != SQLITE_OK ? rc : SQLITE_IOERR_CLOSE;
  db->frozen = 0;
  mw_cond_broadcast(&db->cv);
  mw_mutex_unlock(&db->mu);
}

static void registry_at_exit(void) {
  static int ran;
  if (__atomic_exchange_n(&ran, 1, __ATOMIC_ACQ_REL)) return; /* exit, then quick_exit */
  uint64_t deadline = mw_now_ns() + (uint64_t)EXIT_WAIT_MS * 1000000u;
  if (!lock_before(&registry_mu, deadline)) return;
  for (mw_db *d = registry; d; d = d->next) finish_at_exit(d, deadline);
  mw_mutex_unlock(&registry_mu);
}

/* ---------------------------------------------------------------- reformat */

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* 1 when page 1 is the one of a database nothing was ever written to (what
** SQLite's newDatabase writes, in WAL mode): one page, no freelist, schema cookie,
** schema format, cache size, encoding, user version, application id all 0, the
** auto-vacuum fields 0 or 1, and an empty schema table. */
static int pristine(const unsigned char *p, uint32_t visible_size) {
  if (visible_size > 1 || memcmp(p, "SQLite format 3", 16) != 0 || mw_get32(p + 28) > 1)
    return 0;
  for (int i = 32; i < 92; i++) {
    if ((i >= 52 && i < 56) || (i >= 64 && i < 68)) continue;
    if (p[i]) return 0;
  }
  if (mw_get32(p + 52) > 1 || mw_get32(p + 64) > 1) return 0;
  return p[100] == 0x0D && p[103] == 0 && p[104] == 0;
}

/* One reformat at a time in the process: it stops and starts the compactor. */
static mw_mutex reformat_mu = MW_MUTEX_INIT;

static int reformat(mw_lane *l, int page_size, int autovac, int *pDone);

int mw_db_reformat(mw_lane *l, int page_size, int autovac, int *pDone) {
  *pDone = 0;
  if (l->in_snap || mw_guard_readonly(l->db->data)) return SQLITE_OK;
  /* A database of more than one page has content: nothing to do, and nothing stopped
  ** or compacted for it (checked again under the lock below). */
  mw_mutex_lock(&l->db->mu);
  uint32_t pages = l->db->visible_size;
  int broken = l->db->broken; /* closed at exit: its compactor stays stopped */
  mw_mutex_unlock(&l->db->mu);
  if (pages > 1 || broken) return SQLITE_OK;
  /* mw_mp=1: other processes hold the log and their own stores of this file; an
  ** empty database is not written again under them (lane.c says so). */
  if (l->db->mp) return SQLITE_MISUSE;
  if (page_size && !mw_stream_page_size_ok(l->db)) return SQLITE_CONSTRAINT;
  mw_mutex_lock(&reformat_mu);
  int rc = reformat(l, page_size, autovac, pDone);
  mw_mutex_unlock(&reformat_mu);
  return rc;
}

static int reformat(mw_lane *l, int page_size, int autovac, int *pDone) {
  mw_db *db = l->db;
  int newps = page_size ? page_size : db->page_size;
  unsigned char *p1 = malloc((size_t)(newps > db->page_size ? newps : db->page_size));
  if (p1 == 0) return SQLITE_NOMEM;
  /* Nothing else may run on the database meanwhile: no compaction (the thread stops),
  ** no transaction: none is in flight, and db->frozen keeps new ones (and the
  ** momentary snapshots of reads outside one) waiting until the end. db->mu is not
  ** held meanwhile: the store's stripes are taken before db->mu everywhere. */
  mw_compactor_stop(db);
  mw_mutex_lock(&db->mu);
  int idle = quiet_locked(db) && db->visible_size <= 1;
  if (idle) db->frozen = 1;
  mw_mutex_unlock(&db->mu);
  int rc = SQLITE_OK, go = 0;
  uint64_t epoch = 0;
  if (idle) rc = mw_compact_now(db, MW_COMPACT_ALL);
  if (idle && rc == SQLITE_OK) rc = mw_db_read_file(db, 1, p1, 0, 108);
  if (idle && rc == SQLITE_OK && pristine(p1, db->visible_size)) {
    int cur = mw_get32(p1 + 52) ? (mw_get32(p1 + 64) ? 2 : 1) : 0;
    int want = autovac < 0 ? cur : autovac;
    go = (newps != db->page_size || want != cur) && newps - p1[20] >= 480;
    autovac = want;
  }
  if (go) {
    /* The new page 1: the old header with the new page size and auto-vacuum fields,
    ** a new change counter, and an empty schema table (SQLite's zeroPage). */
    epoch = db->visible + 1;
    uint32_t counter = mw_get32(p1 + 24) + 1;
    memset(p1 + 100, 0, (size_t)newps - 100);
    p1[16] = (unsigned char)((newps >> 8) & 0xff);
    p1[17] = (unsigned char)((newps >> 16) & 0xff);
    put32(p1 + 24, counter);
    put32(p1 + 28, 1);
    put32(p1 + 52, autovac ? 1 : 0);
    put32(p1 + 64, autovac == 2 ? 1 : 0);
    put32(p1 + 92, counter);
    p1[100] = 0x0D;
    uint32_t usable = (uint32_t)newps - p1[20];
    p1[105] = (unsigned char)((usable >> 8) & 0xff);
    p1[106] = (unsigned char)(usable & 0xff);
    /* The log first (empty, new page size): the file holds everything already, and a
    ** crash from here on leaves an empty log of either page size, which opens fresh
    ** over either page 1. */
    rc = mw_log_restart(db->log, newps, epoch);
    if (rc == SQLITE_OK) mw_crash_point("reformat_after_log");
    sqlite3_file *f = db->data;
    if (rc == SQLITE_OK) rc = f->pMethods->xWrite(f, p1, newps, 0);
    if (rc == SQLITE_OK) mw_crash_point("reformat_after_write");
    if (rc == SQLITE_OK) rc = f->pMethods->xTruncate(f, newps);
    if (rc == SQLITE_OK) rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
    if (rc == SQLITE_OK) {
      /* The file holds everything now: every version goes (nothing reads them). */
      mw_store_free(&db->store);
      rc = store_init(db, newps);
    }
  }
  mw_mutex_lock(&db->mu);
  if (go && rc == SQLITE_OK) {
    db->page_size = newps; /* every lane's scratch page holds the largest size */
    db->assigned = db->visible = db->compacted = epoch;
    __atomic_store_n(&db->oldest, epoch, __ATOMIC_RELEASE);
    db->visible_size = 1;
    db->visible_end = 0;
    db->log_bytes = mw_log_size(db->log);
    l->fmt_av = autovac;
    *pDone = 1;
  } else if (go) {
    /* The file or the log is in a state this process no longer knows: nothing may
    ** commit on it (a reopen recovers either page 1). */
    db->broken = rc;
  }
  if (idle) {
    db->frozen = 0;
    mw_cond_broadcast(&db->cv);
  }
  mw_mutex_unlock(&db->mu);
  free(p1);
  /* The replica gets the new file (a failure is logged: the database is fine). */
  if (go && rc == SQLITE_OK && db->stream) (void)mw_stream_reformatted(db, epoch);
  int rc2 = mw_compactor_start(db);
  return rc != SQLITE_OK ? rc : rc2;
}

/* ---------------------------------------------------------------- snapshots */

/* The oldest snapshot now: no snapshot of this process is or will be below it. */
static uint64_t oldest_now_locked(mw_db *db) {
  uint64_t m = db->visible;
  if (db->compacting && db->compacting < m) m = db->compacting;
  for (const mw_lane *l = db->lanes; l; l = l->next_in_db)
    if (l->reg && l->reg < m) m = l->reg;
  /* The replica stream: a compaction stops at the last epoch written to the replica,
  ** and so must pruning (a compaction to T needs the newest version <= T of a page).
  ** Liveness only: without it compact_now skips instead (T below db->oldest). No test
  ** shows the difference any more (the mutant stream-pruning-uncapped survived
  ** test_replica_stream: the same 4.1 MB log peak and ~95 compactions in 1.5 s). */
  if (db->stream && mw_stream_emitted(db) < m) m = mw_stream_emitted(db);
  return m;
}

/* db->oldest only rises (pruning may already have passed an older one). */
static void raise_oldest_locked(mw_db *db, uint64_t m) {
  if (m > db->oldest) __atomic_store_n(&db->oldest, m, __ATOMIC_RELEASE);
}

static void recompute_oldest_locked(mw_db *db) { raise_oldest_locked(db, oldest_now_locked(db)); }

void mw_db_add_lane(mw_db *db, mw_lane *l) {
  mw_cond_init(&l->turn_wake);
  mw_mutex_lock(&db->mu);
  l->next_in_db = db->lanes;
  db->lanes = l;
  mw_mutex_unlock(&db->mu);
}

void mw_db_remove_lane(mw_db *db, mw_lane *l) {
  mw_db_unstash(l); /* a stash whose phase two never came */
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
  while (db->frozen) mw_cond_wait(&db->cv, &db->mu);
  snapshot_register_locked(db, l, pSnap, pSize);
  mw_mutex_unlock(&db->mu);
}

/* After a snapshot at `was` ended. db->oldest is recomputed only when the one that
** ended may have been it: between garbage collections it may lag, which keeps this
** process's own compactions possible (a compaction needs its target at or above
** db->oldest, the most that pruning may have passed). With mw_mp=1 the floor this
** process publishes, how far the other processes' compactions may go, is the oldest
** snapshot now: published from db->oldest, a process whose snapshots each began after
** the last recompute (none was the stale oldest) kept its floor there until its next
** garbage collection (16 inserting processes: some 1,500 epochs, 250 ms, behind; each
** log switch copied that much). Raising db->oldest itself at every end instead stalled
** compaction: only the process with the lowest floor may compact, and each end moved
** its own oldest past the others' floors before its compactor came round. */
static void snapshot_ended_locked(mw_db *db, uint64_t was) {
  if (!db->mp) {
    if (was == db->oldest) recompute_oldest_locked(db);
    return;
  }
  /* One walk of the lanes for both (it was two, about 3% of a commit's CPU). */
  uint64_t m = oldest_now_locked(db);
  if (was == db->oldest) raise_oldest_locked(db, m);
  mw_mp_floor(db, m); /* a compactor may go that far now */
}

void mw_db_snapshot_end(mw_db *db, mw_lane *l) {
  mw_mutex_lock(&db->mu);
  uint64_t was = l->reg;
  l->reg = 0;
  snapshot_ended_locked(db, was);
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
    /* Another process's record (mw_mp=1) is in the store once in the ring. */
    if (nx->epoch != e + 1 || !(nx->foreign || __atomic_load_n(&nx->installed, __ATOMIC_ACQUIRE)))
      break;
    e++;
    *pSize = nx->size;
  }
  return e;
}

static void join_locked(mw_lane *l, mw_owner *me);

/* mw_mp=1: the holder of the turn in this process takes the turn across processes
** (mp.c), without db->mu (other lanes go on meanwhile), then applies what the
** previous holders published, which its snapshot is to include. If it lost this
** process's turn while it waited, the other one goes back at once. */
static void take_mp_turn_locked(mw_db *db, mw_lane *l) {
  mw_mutex_unlock(&db->mu);
  int got = mw_mp_turn_take(db);
  if (got) mw_mp_refresh(db);
  mw_mutex_lock(&db->mu);
  if (!got) return;
  mw_crash_point("mp_turn_taken");
  if (db->turn == l) l->mp_turn = 1;
  else mw_mp_turn_give(db);
}

/* Until every commit up to `upto` is visible, or the database broke. Those of this
** process become visible by their committers' syncs (db->cv); a record of another
** process (mw_mp=1) by a sync that nothing here would signal, so the waiter syncs the
** log that far itself (a sync covers every record before it). */
static void wait_visible_locked(mw_db *db, uint64_t upto) {
  while (upto > db->visible && !db->broken) {
    uint64_t end = 0;
    if (db->mp)
      for (uint64_t e = db->visible + 1; e <= upto; e++)
        if (db->ring[e % MW_RING].foreign) end = db->ring[e % MW_RING].end;
    if (end == 0) {
      mw_cond_wait(&db->cv, &db->mu);
      continue;
    }
    mw_mutex_unlock(&db->mu);
    mw_mp_sync_to(db, end);
    mw_mutex_lock(&db->mu);
    if (upto > db->visible && !db->broken) mw_cond_timedwait_ms(&db->cv, &db->mu, 1);
  }
}

/* Every commit the lane's snapshot includes. */
static void wait_snapshot_visible_locked(mw_db *db, mw_lane *l) { wait_visible_locked(db, l->reg); }

void mw_db_wait_assigned_visible(mw_db *db) {
  mw_mutex_lock(&db->mu);
  wait_visible_locked(db, db->assigned);
  mw_mutex_unlock(&db->mu);
}
#ifdef MW_TAIL_TRACE
_Thread_local mw_tail_trace mw_tail;
#endif

void mw_db_txn_begin(mw_db *db, mw_lane *l, uint64_t *pSnap, uint32_t *pSize) {
#ifdef MW_TAIL_TRACE
  uint64_t t0 = mw_now_ns(), t1 = 0;
#endif
  if (db->mp) mw_mp_refresh(db); /* the other processes' commits first */
  mw_owner *me = mw_owner_self();
  mw_mutex_lock(&db->mu);
  join_locked(l, me); /* the thread that begins it: its first user */
  MW_TAIL(t1 = mw_now_ns());
  mw_turn_enter_locked(db, l, me); /* the hot-spot turn (turn.c) */
  if (db->mp && db->turn == l && !l->mp_turn) take_mp_turn_locked(db, l);
  MW_TAIL(mw_tail.turn_ns += mw_now_ns() - t1);
  db->active++;
  l->counted = 1;
  while (db->frozen) mw_cond_wait(&db->cv, &db->mu); /* a reformat (after the turn's waits) */
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
  wait_snapshot_visible_locked(db, l);
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
  if (l->touched) wait_snapshot_visible_locked(db, l);
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
  snapshot_ended_locked(db, was);
  for (int i = 0; i < l->nusers; i++) mw_owner_unref(l->users[i]);
  l->nusers = 0;
  l->untracked = 0;
  __atomic_store_n(&l->abandoned, 0, __ATOMIC_RELAXED);
  /* Only the turn's waits depend on a transaction's end (db->active), and there are
  ** none while no turn is held or queued. */
  if (db->turn || db->turn_head) mw_cond_broadcast(&db->turn_cv);
  l->alone = __atomic_load_n(&db->refs, __ATOMIC_RELAXED) == 1 && !db->mp;
  int wake = 0;
  mw_compact_dirty_locked(db, &wake);
  mw_mutex_unlock(&db->mu);
  MW_TAIL(mw_tail.end_ns += mw_now_ns() - t0);
  if (wake) mw_compact_wake(db);
}

/* ---------------------------------------------------------------- threads that ended */

/* A transaction belongs to every thread that used it (any call into its lane that
** reaches the engine while it is open); the compactor releases it once they have
** all ended (a terminated Worker's thread): until then its snapshot pins versions.
** A thread that could get no token makes the transaction untracked: never
** released. The list is only changed by the lane's callers (SQLite serializes a
** connection's calls) under db->mu, so their own lookup needs no lock. */
static void join_locked(mw_lane *l, mw_owner *me) {
  if (me && l->nusers == l->cap_users) {
    int ncap = l->cap_users ? l->cap_users * 2 : 4;
    mw_owner **nu = realloc(l->users, (size_t)ncap * sizeof *nu);
    if (nu) {
      l->users = nu;
      l->cap_users = ncap;
    }
  }
  if (me && l->nusers < l->cap_users) {
    mw_owner_ref(me);
    l->users[l->nusers++] = me;
  } else {
    l->untracked = 1;
  }
}

int mw_db_lane_use(mw_db *db, mw_lane *l) {
  mw_owner *me = mw_owner_self();
  int i = l->nusers - 1;
  while (me && i >= 0 && l->users[i] != me) i--;
  if (me == 0 || i < 0) {
    mw_mutex_lock(&db->mu);
    join_locked(l, me);
    mw_mutex_unlock(&db->mu);
  }
  return __atomic_load_n(&l->abandoned, __ATOMIC_ACQUIRE);
}

static int orphan_write_locks; /* write locks of released lanes (lane.c counts) */

static int release_orphans_locked(mw_db *db) {
  int n = 0;
  for (mw_lane *l = db->lanes; l; l = l->next_in_db) {
    if (l->reg == 0 || l->nusers == 0 || l->untracked || l->abandoned) continue;
    int live = 0;
    for (int i = 0; i < l->nusers && !live; i++) live = !mw_owner_ended(l->users[i]);
    if (live) continue;
    /* Nobody can end it any more: its snapshot pins nothing from now on, and the
    ** connection's next use in it fails (mw_db_lane_use) until it is rolled back.
    ** Its thread ended between two calls (a runtime ends a Worker's thread only
    ** in JavaScript), so no engine lock or call of it is left half done. */
    uint64_t was = l->reg;
    l->reg = 0;
    if (l->counted) {
      db->active--;
      l->counted = 0;
    }
    mw_turn_forget_locked(db, l);
    /* What was tied to the dead thread: its write-lock counter (in its token, let go
    ** here: the lock now counts in a counter of no thread) and a commit
    ** stashed for phase two (that never comes). The write lock itself stays until
    ** SQLite lets it go: a lane that holds it keeps its snapshot across the swap
    ** of read marks in walRestartLog (lane.c), and this one must keep it too, so
    ** that no new snapshot begins under the released transaction. */
    if (l->write_lock) {
      if (l->wlock_owner) mw_owner_unref(l->wlock_owner);
      l->wlock_owner = 0;
      l->wlock_counter = &orphan_write_locks;
      __atomic_add_fetch(&orphan_write_locks, 1, __ATOMIC_RELAXED);
    }
    mw_db_unstash(l);
    __atomic_store_n(&l->stash_owner, (void *)0, __ATOMIC_RELAXED);
    l->poisoned = 1; /* the lane starts cold after it */
    __atomic_store_n(&l->abandoned, 1, __ATOMIC_RELEASE);
    if (was == db->oldest) recompute_oldest_locked(db);
    n++;
  }
  if (n) mw_cond_broadcast(&db->turn_cv);
  return n;
}

/* ---------------------------------------------------------------- stashed commits */

/* Lanes stashed now, of every open database of the process. A thread that holds
** several engine write locks stashes every commit (an event loop with transactions
** open across awaits), and looking for its other stashes walked every lane of every
** database under their locks, at each commit (64 pooled connections: the engine's
** most expensive function in a server's profile). With no other stash anywhere, there
** is nothing to look for. Exact: every change of l->stashed goes through these two. */
static int stashed_now;

void mw_db_stash(mw_lane *l, void *owner) {
  __atomic_store_n(&l->stash_owner, owner, __ATOMIC_RELAXED);
  if (!__atomic_exchange_n(&l->stashed, 1, __ATOMIC_ACQ_REL))
    __atomic_add_fetch(&stashed_now, 1, __ATOMIC_ACQ_REL);
}

void mw_db_unstash(mw_lane *l) {
  if (__atomic_exchange_n(&l->stashed, 0, __ATOMIC_ACQ_REL))
    __atomic_sub_fetch(&stashed_now, 1, __ATOMIC_ACQ_REL);
}

int mw_db_stashes_now(void) { return __atomic_load_n(&stashed_now, __ATOMIC_ACQUIRE); }

/* The lanes other than `self` (stashed, and counted in stashed_now) of every open
** database whose commit the thread `owner` stashed until phase two (lane.c). Only that
** thread changes those lanes' stash, so reading them here races with nothing that
** matters to the answer; its own stashes are counted before it asks. */
int mw_db_stashed_lanes(const mw_lane *self, void *owner, mw_lane **out, int max) {
  int n = 0;
  if (__atomic_load_n(&stashed_now, __ATOMIC_ACQUIRE) <= 1) return 0; /* self alone */
  mw_mutex_lock(&registry_mu);
  for (mw_db *d = registry; d; d = d->next) {
    mw_mutex_lock(&d->mu);
    for (mw_lane *l = d->lanes; l; l = l->next_in_db) {
      if (l != self && __atomic_load_n(&l->stashed, __ATOMIC_ACQUIRE) &&
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
