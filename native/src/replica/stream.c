/*
** stream.c: the replica stream of a database (mw_ltx_dir=, docs/replication.md). Every
** commit gets a TXID, dense from 1 over the whole life of the database: epoch e of the
** log whose base epoch has TXID T0 (the log's header keeps T0 across crashes and
** switches) is TXID T0 + (e - base). Behind the log, on the compactor's thread, the
** records of the durable prefix (nothing a crash could take back, whatever PRAGMA
** synchronous acknowledged) are read back from the log and written as level-0 LTX
** files, each a run of commits with the last image of every page they wrote; a
** compaction never passes the last epoch emitted, so the log still holds every record
** the stream has not written. Between lives the epochs start again: the replica's
** highest TXID and a state file written at the last close (the file's checksum at that
** TXID) say whether the file is still the state the replica ends with; if not (another
** program wrote it, or no state was left), the file itself is written as the next
** TXID, whole, and at level 9 as a snapshot.
** With mw_mp=1 there is one stream for all the processes (mp.c keeps its directory,
** TXIDs and last epoch in the shared header): whichever process gets the emitter's
** lock at its tick writes what every process made durable.
**
** Owns: the mapping from epochs to TXIDs, the emission, the replica's state file.
** Never touches: SQLite, lanes, the store; the log only through its reads.
*/
#include "engine.h"
#include "core/datafile.h"
#include "durability/log.h"
#include "processes/mp.h"
#include "replica/ltx.h"
#include "replica/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_BYTES ((uint64_t)32 << 20) /* records read for one level-0 file, at most */
#define STATE_NAME "multiwriter-stream"
#define SNAPSHOT_MIN ((uint64_t)4 << 20) /* level-0 bytes since the last snapshot, at least */

struct mw_stream {
  char *dir;                   /* the replica, an absolute or cwd-relative path */
  int page_size;
  uint64_t replica_max;        /* the replica's highest TXID at open */
  mw_mutex mu;                 /* one emission at a time; the fields below */
  uint64_t epoch0, txid0;      /* epoch0's state is TXID txid0 (set once at start) */
  uint64_t emitted;            /* the last epoch in the replica */
  uint32_t pages;              /* the database's size at `emitted` */
  int warned;                  /* a failed emission was logged (until one succeeds) */
  int have_log;                /* the open replays a log (TXIDs from its header) */
  int keep;                    /* mw_ltx_keep: snapshots kept, 0: every file */
  uint64_t l0_bytes;           /* written at level 0 since the last snapshot (about) */
  uint64_t last_emit_ns;       /* when the last emission began (mw_stream_emit) */
};

/* ---------------------------------------------------------------- helpers */

static int64_t wall_ms(void) {
  sqlite3_vfs *v = sqlite3_vfs_find(0);
  sqlite3_int64 t = 0;
  if (v && v->iVersion >= 2 && v->xCurrentTimeInt64 && v->xCurrentTimeInt64(v, &t) == SQLITE_OK)
    return (int64_t)(t - 210866760000000LL); /* Julian day ms -> Unix ms */
  return 0;
}

static int is_absolute(const char *p) {
  return p[0] == '/' || p[0] == '\\' || (p[0] && p[1] == ':');
}

/* dir, taken from the database's folder when relative. */
static char *resolve(const char *db_path, const char *dir) {
  if (is_absolute(dir)) return sqlite3_mprintf("%s", dir);
  const char *slash = strrchr(db_path, '/');
  const char *bslash = strrchr(db_path, '\\');
  if (bslash && (!slash || bslash > slash)) slash = bslash;
  if (!slash) return sqlite3_mprintf("%s", dir);
  return sqlite3_mprintf("%.*s/%s", (int)(slash - db_path), db_path, dir);
}

/* The database's size in pages at its file's state (page 1's size field when valid). */
static int file_pages(mw_db *db, uint32_t *pPages) {
  unsigned char h[100];
  int rc = mw_db_read_file(db, 1, h, 0, 100);
  if (rc == SQLITE_IOERR_SHORT_READ) {
    *pPages = 0; /* an empty file */
    return SQLITE_OK;
  }
  if (rc != SQLITE_OK) return rc;
  uint32_t n = mw_get32(h + 28);
  if (n == 0 || memcmp(h + 24, h + 92, 4) != 0) {
    sqlite3_int64 size = 0;
    rc = db->data->pMethods->xFileSize(db->data, &size);
    n = (uint32_t)(size / db->page_size);
  }
  *pPages = n;
  return rc;
}

/* Page p of the database file as SQLite reads it: zeros past the end of the file (a page
** the database grew by that no write reached yet). */
static int file_page(mw_db *db, uint32_t p, unsigned char *buf) {
  int rc = mw_db_read_file(db, p, buf, 0, db->page_size);
  if (rc != SQLITE_IOERR_SHORT_READ) return rc;
  memset(buf, 0, (size_t)db->page_size);
  return SQLITE_OK;
}

/* A CRC-64 of the file's pages 1..n as a stock reader sees them (page 1 bytes 18-19 as
** 2: the engine's mark is not part of the database). */
static int file_checksum(mw_db *db, uint32_t n, uint64_t *pCrc) {
  unsigned char *buf = malloc((size_t)db->page_size);
  if (!buf) return SQLITE_NOMEM;
  uint64_t crc = 0;
  int rc = SQLITE_OK;
  for (uint32_t p = 1; p <= n && rc == SQLITE_OK; p++) {
    rc = file_page(db, p, buf);
    if (p == 1) buf[18] = buf[19] = 2;
    crc = mw_ltx_crc64(crc, buf, (size_t)db->page_size);
  }
  free(buf);
  *pCrc = crc;
  return rc;
}

/* The file (its pages 1..n, the state it holds) as one LTX file of `level`, TXIDs
** [lo, hi]. */
static int write_file_level(mw_db *db, mw_stream *s, int level, uint64_t lo, uint64_t hi,
                            uint32_t n) {
  unsigned char *buf = malloc((size_t)db->page_size);
  if (!buf) return SQLITE_NOMEM;
  uint32_t lock = mw_ltx_lock_page(db->page_size);
  mw_ltx_writer *w = 0;
  int rc = mw_ltx_begin(s->dir, level, lo, hi, db->page_size, n, wall_ms(), &w);
  for (uint32_t p = 1; p <= n && rc == SQLITE_OK; p++) {
    if (p == lock) continue;
    rc = file_page(db, p, buf);
    if (rc == SQLITE_OK) rc = mw_ltx_page(w, p, buf);
  }
  free(buf);
  if (rc == SQLITE_OK) return mw_ltx_publish(w);
  if (w) mw_ltx_abandon(w);
  return rc;
}

/* The file as the TXIDs [lo, hi]: a level-0 file for followers, and at level 9 a
** snapshot "1-hi" for restores (the level-0 file is one itself when lo is 1). */
static int write_file_as(mw_db *db, mw_stream *s, uint64_t lo, uint64_t hi, uint32_t n) {
  int rc = write_file_level(db, s, MW_LTX_LEVEL_L0, lo, hi, n);
  if (rc == SQLITE_OK && lo > 1) rc = write_file_level(db, s, MW_LTX_LEVEL_SNAPSHOT, 1, hi, n);
  return rc;
}

/* ---------------------------------------------------------------- the state file */

static char *state_path(const mw_stream *s) { return sqlite3_mprintf("%s/" STATE_NAME, s->dir); }

/* 1 when the replica's state file says that TXID txid is the file of n pages with this
** checksum. */
static int state_matches(mw_stream *s, uint64_t txid, uint32_t n, uint64_t crc) {
  char *p = state_path(s);
  if (!p) return 0;
  FILE *f = fopen(p, "r");
  sqlite3_free(p);
  if (!f) return 0;
  unsigned long long t = 0, c = 0;
  unsigned pages = 0;
  int ps = 0;
  int got = fscanf(f, "multiwriter-stream 1 txid %llu page_size %d pages %u crc %llx", &t, &ps,
                   &pages, &c);
  fclose(f);
  return got == 4 && t == txid && ps == s->page_size && pages == n && c == crc;
}

static int write_state(mw_stream *s, uint64_t txid, uint32_t n, uint64_t crc) {
  char *p = state_path(s);
  char *tmp = p ? sqlite3_mprintf("%s.tmp", p) : 0;
  char *text = sqlite3_mprintf("multiwriter-stream 1 txid %llu page_size %d pages %u crc %016llx\n",
                               (unsigned long long)txid, s->page_size, n, (unsigned long long)crc);
  int rc = p && tmp && text ? SQLITE_OK : SQLITE_NOMEM;
  mw_fd fd = MW_FD_INVALID;
  if (rc == SQLITE_OK) rc = mw_file_open(tmp, 1, &fd, 0);
  if (rc == SQLITE_OK) {
    rc = mw_file_truncate(fd, 0, 0);
    if (rc == SQLITE_OK) rc = mw_file_pwrite(fd, text, strlen(text), 0, 0);
    if (rc == SQLITE_OK) rc = mw_file_sync(fd, 0);
    mw_file_close(fd);
  }
  if (rc == SQLITE_OK) rc = mw_file_rename(tmp, p, 0);
  if (rc == SQLITE_OK) rc = mw_dir_sync(p, 0);
  sqlite3_free(p);
  sqlite3_free(tmp);
  sqlite3_free(text);
  return rc;
}

/* The state file goes as soon as the engine has the database: it describes a closed
** file, and a crash must not leave it to vouch for a file that changed since. */
static int drop_state(mw_stream *s) {
  char *p = state_path(s);
  if (!p) return SQLITE_NOMEM;
  int rc = mw_file_delete(p, 0);
  sqlite3_free(p);
  return rc;
}

/* ---------------------------------------------------------------- open */

static void set_err(char **pzErr, char *msg) {
  if (pzErr && *pzErr == 0) *pzErr = msg;
  else sqlite3_free(msg);
}

int mw_stream_open(mw_db *db, const char *dir, int have_log, uint64_t *pTxid, char **pzErr) {
  *pTxid = 0;
  mw_stream *s = calloc(1, sizeof(*s));
  if (!s) return SQLITE_NOMEM;
  mw_mutex_init(&s->mu);
  s->page_size = db->page_size;
  s->keep = db->opts.ltx_keep;
  s->dir = resolve(db->path, dir);
  db->stream = s;
  if (!s->dir) return SQLITE_NOMEM;
  /* With mw_mp=1 a later process leaves the temporary files alone: another process may
  ** be writing one right now (the first process cleans up after a crash). */
  int rc = mw_ltx_scan(s->dir, !db->mp || mw_mp_is_first(db), &s->replica_max);
  if (rc != SQLITE_OK) {
    set_err(pzErr, sqlite3_mprintf("multiwriter: cannot read the replica %s (%d)", s->dir, rc));
    return rc;
  }
  s->have_log = have_log;
  if (have_log) return drop_state(s); /* mw_stream_start: TXIDs from the log's header */
  uint64_t m = s->replica_max;
  uint32_t n = 0;
  rc = file_pages(db, &n);
  if (rc == SQLITE_OK && n == 0) {
    if (m > 0) {
      set_err(pzErr, sqlite3_mprintf("multiwriter: the replica %s holds TXIDs up to %llu but "
                                     "%s is empty: it is another database's replica (name a "
                                     "new directory)", s->dir, (unsigned long long)m, db->path));
      return SQLITE_CANTOPEN;
    }
    return drop_state(s); /* an empty database: its first commit is TXID 1 */
  }
  uint64_t crc = 0;
  if (rc == SQLITE_OK && m > 0) rc = file_checksum(db, n, &crc);
  if (rc != SQLITE_OK) return rc;
  if (m > 0 && state_matches(s, m, n, crc)) {
    *pTxid = m; /* the file is the state at the replica's last TXID */
  } else {
    /* Changed since (or never streamed): the file is the next TXID, whole. */
    rc = write_file_as(db, s, m + 1, m + 1, n);
    if (rc != SQLITE_OK) {
      set_err(pzErr, sqlite3_mprintf("multiwriter: cannot write to the replica %s (%d)", s->dir, rc));
      return rc;
    }
    *pTxid = m + 1;
  }
  return drop_state(s);
}

/* The database's size after epoch e (a record of the log, or the file at the base). */
typedef struct size_ctx {
  uint32_t pages;
} size_ctx;
static int size_of(void *ctx, uint64_t epoch, uint32_t db_pages, uint32_t flags, int npages,
                   const uint32_t *pgnos, const uint64_t *ats) {
  (void)epoch; (void)flags; (void)npages; (void)pgnos; (void)ats;
  ((size_ctx *)ctx)->pages = db_pages;
  return SQLITE_DONE; /* one record is enough */
}

int mw_stream_start(mw_db *db, char **pzErr) {
  mw_stream *s = db->stream;
  uint64_t hash = mw_ltx_crc64(0, s->dir, strlen(s->dir)) | 1;
  if (db->mp && !mw_mp_is_first(db)) {
    /* The first process of the database settled the stream: join it. */
    return mw_mp_stream_join(db, hash, &s->epoch0, &s->txid0, &s->emitted, &s->pages, pzErr);
  }
  uint64_t base = mw_log_base(db->log), last = db->visible;
  uint64_t t0 = mw_log_stream_txid(db->log), m = s->replica_max;
  uint32_t at_base = 0;
  int rc = file_pages(db, &at_base);
  if (rc != SQLITE_OK) return rc;
  s->epoch0 = base;
  s->emitted = base;
  s->pages = at_base;
  if (!s->have_log) {
    /* A new log: mw_stream_open gave its header the TXID of the file's state. */
  } else if (t0 == 0 && at_base == 0 && m > 0) {
    set_err(pzErr, sqlite3_mprintf("multiwriter: the replica %s holds TXIDs up to %llu but "
                                   "%s was empty: it is another database's replica (name a "
                                   "new directory)", s->dir, (unsigned long long)m, db->path));
    return SQLITE_CANTOPEN;
  } else if (t0 == 0 && at_base > 0) {
    /* A log of a life without the stream: the file (the state at the base) is the next
    ** TXID, whole. */
    rc = write_file_as(db, s, m + 1, m + 1, at_base);
    t0 = m + 1;
  } else if (t0 > m && at_base > 0) {
    /* The replica lacks TXIDs up to the base (removed, or written elsewhere): the
    ** file stands for all of them. */
    rc = write_file_as(db, s, m + 1, t0, at_base);
  } else if (m > t0) {
    /* Part of this log is in the replica already (a crash after emitting it). */
    uint64_t done = base + (m - t0);
    if (done > last) {
      set_err(pzErr, sqlite3_mprintf("multiwriter: the replica %s holds TXIDs up to %llu, past "
                                     "the last commit of %s (%llu): it is another database's "
                                     "replica or a copy's (name a new directory)", s->dir,
                                     (unsigned long long)m, db->path,
                                     (unsigned long long)(t0 + (last - base))));
      return SQLITE_CANTOPEN;
    }
    size_ctx sz = { at_base };
    uint64_t got = 0;
    rc = mw_log_read_durable(db->log, done - 1, 0, 1, size_of, 0, &sz, &got);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    s->emitted = done;
    s->pages = sz.pages;
  }
  if (rc != SQLITE_OK) {
    set_err(pzErr, sqlite3_mprintf("multiwriter: cannot write to the replica %s (%d)", s->dir, rc));
    return rc;
  }
  s->txid0 = t0;
  mw_log_set_stream_txid(db->log, t0);
  if (db->mp) rc = mw_mp_stream_join(db, hash, &s->epoch0, &s->txid0, &s->emitted, &s->pages, pzErr);
  return rc;
}

/* ---------------------------------------------------------------- emission */

/* The pages of a run of records: where the last image of each is in the log (open
** addressing by page), then the images, read once the run is known (a page that many
** commits of the run wrote is read once). */
typedef struct run {
  int page_size;
  uint32_t *pgno;              /* slot -> page, 0: free */
  uint64_t *at;                /* slot -> the logical offset of its last image */
  uint32_t *order;             /* the used slots */
  unsigned char *img;          /* order index * page_size, once read */
  uint32_t cap, count;
  uint32_t pages;              /* the database's size after the last record */
} run;

static int run_grow(run *r) {
  uint32_t cap = r->cap ? r->cap * 2 : 1024;
  uint32_t *pg = calloc(cap, sizeof(*pg));
  uint64_t *at = malloc(cap * sizeof(*at));
  uint32_t *ord = malloc(cap * sizeof(*ord));
  if (!pg || !at || !ord) {
    free(pg); free(at); free(ord);
    return SQLITE_NOMEM;
  }
  for (uint32_t i = 0; i < r->count; i++) {
    uint32_t from = r->order[i], p = r->pgno[from];
    uint32_t h = (p * 2654435761u) & (cap - 1);
    while (pg[h]) h = (h + 1) & (cap - 1);
    pg[h] = p;
    at[h] = r->at[from];
    ord[i] = h;
  }
  free(r->pgno); free(r->at); free(r->order);
  r->pgno = pg; r->at = at; r->order = ord; r->cap = cap;
  return SQLITE_OK;
}

static void run_free(run *r) {
  free(r->pgno); free(r->at); free(r->order); free(r->img);
  memset(r, 0, sizeof(*r));
}

static int run_add(void *ctx, uint64_t epoch, uint32_t db_pages, uint32_t flags, int npages,
                   const uint32_t *pgnos, const uint64_t *ats) {
  (void)epoch;
  (void)flags;
  run *r = ctx;
  for (int i = 0; i < npages; i++) {
    if ((r->count + 1) * 2 > r->cap) {
      int rc = run_grow(r);
      if (rc != SQLITE_OK) return rc;
    }
    uint32_t p = pgnos[i], h = (p * 2654435761u) & (r->cap - 1);
    while (r->pgno[h] && r->pgno[h] != p) h = (h + 1) & (r->cap - 1);
    if (!r->pgno[h]) {
      r->pgno[h] = p;
      r->order[r->count++] = h;
    }
    r->at[h] = ats[i];
  }
  r->pages = db_pages;
  return SQLITE_OK;
}

/* The last image of every page of the run (the log cannot switch meanwhile). */
static int run_images(void *ctx, const mw_log_view *v) {
  run *r = ctx;
  r->img = malloc((size_t)(r->count ? r->count : 1) * (size_t)r->page_size);
  if (!r->img) return SQLITE_NOMEM;
  int rc = SQLITE_OK;
  for (uint32_t i = 0; i < r->count && rc == SQLITE_OK; i++)
    rc = mw_log_view_image(v, r->at[r->order[i]], r->img + (size_t)i * (size_t)r->page_size);
  return rc;
}

static int by_key(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Writes the run (TXIDs lo..hi) as one level-0 file: its pages up to its size, and
** every page the database grew by since the last file (a stock restore would
** otherwise bring back an image from before an earlier shrink): the run's image, else
** the file's (pages SQLite never wrote read as zeros). */
static int write_run(mw_db *db, mw_stream *s, run *r, uint64_t lo, uint64_t hi) {
  /* In page order: (page << 32 | slot) sorted. */
  uint64_t *keys = malloc(((size_t)r->count + 1) * sizeof(*keys));
  unsigned char *buf = malloc((size_t)db->page_size);
  if (!keys || !buf) {
    free(keys);
    free(buf);
    return SQLITE_NOMEM;
  }
  for (uint32_t k = 0; k < r->count; k++) keys[k] = ((uint64_t)r->pgno[r->order[k]] << 32) | k;
  qsort(keys, r->count, sizeof(*keys), by_key);
  uint32_t lock = mw_ltx_lock_page(db->page_size);
  mw_ltx_writer *w = 0;
  int rc = mw_ltx_begin(s->dir, MW_LTX_LEVEL_L0, lo, hi, db->page_size, r->pages, wall_ms(), &w);
  uint32_t i = 0, next_grown = s->pages + 1;
  while (rc == SQLITE_OK) {
    uint32_t p = i < r->count ? (uint32_t)(keys[i] >> 32) : UINT32_MAX;
    /* Grown pages below the next page of the run that the run does not hold. */
    while (rc == SQLITE_OK && next_grown < p && next_grown <= r->pages) {
      if (next_grown != lock) {
        rc = file_page(db, next_grown, buf);
        if (rc == SQLITE_OK) rc = mw_ltx_page(w, next_grown, buf);
      }
      next_grown++;
    }
    if (p == UINT32_MAX || p > r->pages || rc != SQLITE_OK) break; /* none above the size */
    uint32_t k = (uint32_t)keys[i]; /* its image: the k-th read */
    if (p != lock) rc = mw_ltx_page(w, p, r->img + (size_t)k * (size_t)r->page_size);
    if (next_grown == p) next_grown++;
    i++;
    s->l0_bytes += (uint64_t)db->page_size + 32;
  }
  free(buf);
  free(keys);
  if (rc == SQLITE_OK) return mw_ltx_publish(w);
  mw_ltx_abandon(w);
  return rc;
}

int mw_stream_emit(mw_db *db, int force) {
  mw_stream *s = db->stream;
  int rc = SQLITE_OK;
  mw_mutex_lock(&s->mu);
  uint64_t now = mw_now_ns();
  if (!force && now - s->last_emit_ns < (uint64_t)MW_STREAM_EVERY_MS * 1000000u) {
    mw_mutex_unlock(&s->mu);
    return SQLITE_OK;
  }
  s->last_emit_ns = now;
  /* mw_mp=1: the process that gets the emitter's lock writes for all of them, from
  ** where the last one stopped, up to what any of them made durable. */
  /* Up to the durable end of now: the commits that become durable meanwhile wait for
  ** the next emission (going on until none arrived wrote a file every few ms). */
  uint64_t durable = 0;
  if (db->mp) {
    if (mw_mp_stream_lock(db) != SQLITE_OK) {
      mw_mutex_unlock(&s->mu);
      return SQLITE_OK; /* another process (or thread) is at it */
    }
    mw_mp_stream_state(db, &s->emitted, &s->pages, &durable);
  } else {
    durable = mw_log_durable_end(db->log);
    if (durable == 0) durable = 1; /* none (or a failed log): nothing to read */
  }
  for (;;) {
    run r;
    memset(&r, 0, sizeof(r));
    r.page_size = db->page_size;
    uint64_t before = s->emitted, last = before, l0 = s->l0_bytes;
    rc = mw_log_read_durable(db->log, s->emitted, durable, RUN_BYTES, run_add, run_images, &r,
                             &last);
    if (rc == SQLITE_OK && last > s->emitted) {
      uint64_t lo = s->txid0 + (s->emitted + 1 - s->epoch0), hi = s->txid0 + (last - s->epoch0);
      rc = write_run(db, s, &r, lo, hi);
      if (rc == SQLITE_OK) {
        __atomic_store_n(&s->emitted, last, __ATOMIC_RELEASE);
        s->pages = r.pages;
        if (db->mp) mw_mp_stream_set(db, last, r.pages, s->l0_bytes - l0);
      }
    }
    run_free(&r);
    if (rc != SQLITE_OK || last == before) break;
  }
  if (db->mp) mw_mp_stream_unlock(db);
  if (rc != SQLITE_OK && !s->warned) {
    s->warned = 1;
    sqlite3_log(rc, "multiwriter: the replica stream of %s into %s stopped (%s): it goes on "
                "when the error goes; the log keeps what it has not written", db->path, s->dir,
                sqlite3_errstr(rc));
  }
  if (rc == SQLITE_OK) s->warned = 0;
  mw_mutex_unlock(&s->mu);
  return rc;
}

uint64_t mw_stream_emitted(mw_db *db) {
  if (db->mp) {
    uint64_t e = 0;
    mw_mp_stream_state(db, &e, 0, 0);
    return e;
  }
  return __atomic_load_n(&db->stream->emitted, __ATOMIC_ACQUIRE);
}

uint64_t mw_stream_txid(mw_db *db, uint64_t epoch) {
  const mw_stream *s = db->stream;
  if (!s || epoch < s->epoch0 || (epoch == s->epoch0 && s->txid0 == 0)) return 0;
  return s->txid0 + (epoch - s->epoch0);
}

int mw_stream_closed(mw_db *db) {
  mw_stream *s = db->stream;
  mw_mutex_lock(&s->mu);
  uint64_t emitted = s->emitted;
  mw_mutex_unlock(&s->mu);
  uint32_t n = 0;
  uint64_t crc = 0;
  int rc = SQLITE_OK;
  /* Alone now: the temporary files that a process killed while writing left go. */
  uint64_t max = 0;
  (void)mw_ltx_scan(s->dir, 1, &max);
  if (emitted != db->visible) return SQLITE_OK; /* the next open writes the file whole */
  rc = file_pages(db, &n);
  if (rc == SQLITE_OK) rc = file_checksum(db, n, &crc);
  if (rc == SQLITE_OK && n > 0) rc = write_state(s, mw_stream_txid(db, emitted), n, crc);
  return rc;
}

int mw_stream_page_size_ok(mw_db *db) { return !db->stream || db->stream->replica_max == 0; }

/* Removes every published file of a level (the replica of an empty database that
** starts again with another page size). */
typedef struct clear_ctx {
  const char *dir;
  int rc;
} clear_ctx;
static int clear_entry(void *ctx, const char *name) {
  clear_ctx *c = ctx;
  size_t n = strlen(name);
  if (n < 4 || strcmp(name + n - 4, ".ltx") != 0) return 0;
  char *p = sqlite3_mprintf("%s/%s", c->dir, name);
  c->rc = p ? mw_file_delete(p, 0) : SQLITE_NOMEM;
  sqlite3_free(p);
  return c->rc != SQLITE_OK;
}
static int clear_level(mw_stream *s, int level) {
  char *d = sqlite3_mprintf("%s/ltx/%d", s->dir, level);
  if (!d) return SQLITE_NOMEM;
  clear_ctx c = { d, SQLITE_OK };
  int rc = mw_dir_list(d, clear_entry, &c, 0);
  if (rc == 1) rc = c.rc;
  if (rc == SQLITE_OK) rc = mw_dir_sync(d, 0);
  sqlite3_free(d);
  return rc;
}

int mw_stream_reformatted(mw_db *db, uint64_t epoch) {
  mw_stream *s = db->stream;
  mw_mutex_lock(&s->mu);
  int rc = SQLITE_OK;
  uint64_t t = s->txid0 + (epoch - s->epoch0);
  if (s->page_size != db->page_size) {
    /* Only this open's empty database is in the replica (mw_stream_page_size_ok). */
    rc = clear_level(s, MW_LTX_LEVEL_L0);
    if (rc == SQLITE_OK) rc = clear_level(s, MW_LTX_LEVEL_SNAPSHOT);
    s->page_size = db->page_size;
    t = 1;
  }
  if (rc == SQLITE_OK) rc = write_file_as(db, s, t, t, 1);
  s->epoch0 = epoch;
  s->txid0 = t;
  s->emitted = epoch;
  s->pages = 1;
  mw_mutex_unlock(&s->mu);
  mw_log_set_stream_txid(db->log, t);
  if (rc != SQLITE_OK)
    sqlite3_log(rc, "multiwriter: the replica stream of %s could not write the new empty "
                "database into %s: the replica has a gap before TXID %llu", db->path, s->dir,
                (unsigned long long)t);
  return rc;
}

/* The level-9 snapshots, newest first (retention). */
typedef struct snaps {
  uint64_t n[64];
  int count;
} snaps;
static int snap_entry(void *ctx, uint64_t lo, uint64_t hi) {
  snaps *v = ctx;
  if (lo != 1) return 0;
  if (v->count < 64) v->n[v->count++] = hi;
  else {
    /* Keep the 64 newest: replace the oldest if this one is newer. */
    int o = 0;
    for (int i = 1; i < v->count; i++) if (v->n[i] < v->n[o]) o = i;
    if (hi > v->n[o]) v->n[o] = hi;
  }
  return 0;
}
static int newest_first(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x > y ? -1 : x < y;
}

typedef struct prune_ctx {
  mw_stream *s;
  uint64_t below;              /* level-0 files that end at or below it go */
  int rc;
} prune_ctx;
static int prune_entry(void *ctx, uint64_t lo, uint64_t hi) {
  prune_ctx *p = ctx;
  if (hi <= p->below) p->rc = mw_ltx_remove(p->s->dir, MW_LTX_LEVEL_L0, lo, hi);
  return p->rc != SQLITE_OK;
}

/* Removes what the newest `keep` snapshots make unnecessary: older snapshots, and the
** level-0 files that end at or below the oldest kept one (never a gap: the kept
** snapshot covers everything up to its TXID, the later files go on from there). */
static int prune(mw_stream *s) {
  snaps v;
  memset(&v, 0, sizeof(v));
  int rc = mw_ltx_list(s->dir, MW_LTX_LEVEL_SNAPSHOT, snap_entry, &v);
  if (rc != SQLITE_OK || v.count <= s->keep) return rc;
  qsort(v.n, (size_t)v.count, sizeof(v.n[0]), newest_first);
  for (int i = s->keep; i < v.count && rc == SQLITE_OK; i++)
    rc = mw_ltx_remove(s->dir, MW_LTX_LEVEL_SNAPSHOT, 1, v.n[i]);
  prune_ctx p = { s, v.n[s->keep - 1], SQLITE_OK };
  if (rc == SQLITE_OK) rc = mw_ltx_list(s->dir, MW_LTX_LEVEL_L0, prune_entry, &p);
  if (rc == 1) rc = p.rc;
  return rc;
}

int mw_stream_compacted(mw_db *db, uint64_t epoch) {
  mw_stream *s = db->stream;
  mw_mutex_lock(&db->mu);
  uint64_t weight = (uint64_t)db->visible_size * (uint64_t)db->page_size;
  mw_mutex_unlock(&db->mu);
  mw_mutex_lock(&s->mu);
  uint32_t n = 0;
  int rc = SQLITE_OK;
  uint64_t t = s->txid0 + (epoch - s->epoch0);
  uint64_t l0 = db->mp ? mw_mp_stream_l0_bytes(db, 0) : s->l0_bytes;
  if (s->keep > 0 && t > 0 && epoch <= mw_stream_emitted(db) &&
      l0 >= (weight > SNAPSHOT_MIN ? weight : SNAPSHOT_MIN)) {
    rc = file_pages(db, &n);
    if (rc == SQLITE_OK && n > 0) rc = write_file_level(db, s, MW_LTX_LEVEL_SNAPSHOT, 1, t, n);
    if (rc == SQLITE_OK && n > 0) {
      s->l0_bytes = 0;
      if (db->mp) (void)mw_mp_stream_l0_bytes(db, 1);
      rc = prune(s);
    }
  }
  mw_mutex_unlock(&s->mu);
  if (rc != SQLITE_OK)
    sqlite3_log(rc, "multiwriter: the replica stream of %s could not write or prune a snapshot "
                "in %s (retried after a later compaction)", db->path, s->dir);
  return rc;
}

int mw_stream_same_dir(mw_db *db, const char *dir) {
  char *r = resolve(db->path, dir);
  int same = r && db->stream && strcmp(r, db->stream->dir) == 0;
  sqlite3_free(r);
  return same;
}

void mw_stream_free(mw_db *db) {
  mw_stream *s = db->stream;
  if (!s) return;
  mw_mutex_destroy(&s->mu);
  sqlite3_free(s->dir);
  free(s);
  db->stream = 0;
}
