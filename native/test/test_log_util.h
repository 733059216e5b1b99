/* Helpers of the log tests: a scratch directory, deterministic page images, one
** whole commit through the log's commit path, and a replay collector that checks
** what recovery hands back. */
#ifndef MW_TEST_LOG_UTIL_H
#define MW_TEST_LOG_UTIL_H

#include "mw_internal.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "test_util.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Installs (or removes, with 0) the platform's fault hook: the log's grower thread
** may be making file calls at the same time. */
#define tl_set_hook(h) __atomic_store_n(&mw_fault_hook, (mw_fault_hook_fn)(h), __ATOMIC_SEQ_CST)

/* A fresh directory under /tmp (a real disk), or under /dev/shm when memory will do
** and it exists (tests that reopen the log hundreds of times: no sync costs there);
** removed with everything in it by tl_rmdir. */
static inline void tl_rmdir(const char *dir);

/* Directories made by tl_mkdir: removed at exit too, so that a failing CHECK (exit)
** leaves nothing behind. */
static char tl_dirs[4][256];
static inline void tl_rmdirs_at_exit(void) {
  for (int i = 0; i < 4; i++) {
    if (tl_dirs[i][0]) tl_rmdir(tl_dirs[i]);
  }
}

static inline void tl_remember(const char *dir) {
  static int registered;
  if (!registered) registered = atexit(tl_rmdirs_at_exit) == 0;
  for (int i = 0; i < 4; i++) {
    if (!tl_dirs[i][0]) {
      snprintf(tl_dirs[i], sizeof(tl_dirs[i]), "%s", dir);
      return;
    }
  }
}

static inline void tl_mkdir_in(char *out, size_t n, const char *name, int memory_ok) {
  snprintf(out, n, "/dev/shm/%s.XXXXXX", name);
  if (!(memory_ok && mkdtemp(out) != 0)) {
    snprintf(out, n, "/tmp/%s.XXXXXX", name);
    CHECK(mkdtemp(out) != 0);
  }
  tl_remember(out);
}
static inline void tl_mkdir(char *out, size_t n, const char *name) { tl_mkdir_in(out, n, name, 0); }

static inline void tl_rmdir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d)) != 0) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* The image of page pgno as committed at epoch: every byte depends on both. */
static inline void tl_fill(unsigned char *buf, int ps, uint64_t epoch, uint32_t pgno) {
  uint64_t x = epoch * 0x9E3779B97F4A7C15ull ^ (uint64_t)pgno * 0xC2B2AE3D27D4EB4Full;
  for (int i = 0; i < ps; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    buf[i] = (unsigned char)(x >> 24);
  }
}

/* Pages of the commit of epoch: npages = 1 + epoch % maxp, pgno = epoch + i. */
static inline int tl_npages(uint64_t epoch, int maxp) { return 1 + (int)(epoch % (uint64_t)maxp); }
static inline uint32_t tl_pgno(uint64_t epoch, int i) { return (uint32_t)(epoch * 7 + (uint64_t)i); }
static inline uint32_t tl_dbpages(uint64_t epoch) { return (uint32_t)(epoch * 3 + 1); }

/* Builds the record of epoch: page arrays owned by the caller (free with tl_free). */
typedef struct tl_rec { int n; uint32_t pgnos[64]; unsigned char *img[64]; } tl_rec;

static inline void tl_build(tl_rec *r, int ps, uint64_t epoch, int maxp) {
  r->n = tl_npages(epoch, maxp);
  CHECK(r->n <= 64);
  for (int i = 0; i < r->n; i++) {
    r->pgnos[i] = tl_pgno(epoch, i);
    r->img[i] = malloc((size_t)ps);
    CHECK(r->img[i] != 0);
    tl_fill(r->img[i], ps, epoch, r->pgnos[i]);
  }
}

static inline void tl_free(tl_rec *r) {
  for (int i = 0; i < r->n; i++) free(r->img[i]);
}

/* The flags a test record carries (docs/format.md, "Record"): every third one was
** acknowledged once written (synchronous=NORMAL). */
static inline uint32_t tl_flags(uint64_t epoch) { return epoch % 3 == 0 ? MW_REC_F_ACK_WRITTEN : 0; }

/* One commit the way the engine makes it: reserve, assign (under a lock when pub is
** set, as the engine's publication lock), submit, wait. *pEpoch is the next epoch. */
static inline int tl_commit(mw_log *log, int ps, uint64_t *pEpoch, int maxp, mw_mutex *pub,
                            uint64_t *pEnd) {
  tl_rec r;
  int rc;
  if (pub) mw_mutex_lock(pub);
  uint64_t epoch = *pEpoch;
  if (pub) mw_mutex_unlock(pub);
  (void)epoch;
  /* The record size depends on the epoch, which is only known under the lock: build
  ** with the largest size for the reservation, as the engine knows its pages first. */
  int np_max = maxp;
  uint64_t bytes_max = mw_log_record_size(log, np_max);
  rc = mw_log_reserve(log, bytes_max);
  if (rc != SQLITE_OK) return rc;
  if (pub) mw_mutex_lock(pub);
  epoch = (*pEpoch)++;
  tl_build(&r, ps, epoch, maxp);
  uint64_t bytes = mw_log_record_size(log, r.n);
  mw_log_unreserve(log, bytes_max - bytes);
  uint64_t off = mw_log_assign(log, epoch, bytes);
  if (pub) mw_mutex_unlock(pub);
  rc = mw_log_submit(log, off, epoch, tl_dbpages(epoch), tl_flags(epoch), r.n, r.pgnos,
                     (const unsigned char *const *)r.img);
  tl_free(&r);
  if (rc == SQLITE_OK) rc = mw_log_wait_durable(log, off + bytes);
  if (pEnd) *pEnd = off + bytes;
  return rc;
}

/* Replay collector: checks every record against tl_fill and epoch order. */
typedef struct tl_seen {
  int ps;
  int maxp;
  uint64_t first, last; /* epochs seen (last = 0: none) */
  uint64_t count;
  int bad;
} tl_seen;

static inline int tl_replay(void *ctx, uint64_t epoch, uint32_t db_pages, int npages,
                            const uint32_t *pgnos, const unsigned char *images) {
  tl_seen *s = ctx;
  if (s->last && epoch != s->last + 1) s->bad = 1;
  if (!s->last) s->first = epoch;
  s->last = epoch;
  s->count++;
  if (db_pages != tl_dbpages(epoch) || npages != tl_npages(epoch, s->maxp)) s->bad = 1;
  unsigned char *want = malloc((size_t)s->ps);
  CHECK(want != 0);
  for (int i = 0; i < npages; i++) {
    if (pgnos[i] != tl_pgno(epoch, i)) s->bad = 1;
    tl_fill(want, s->ps, epoch, pgnos[i]);
    if (memcmp(want, images + (size_t)i * (size_t)s->ps, (size_t)s->ps) != 0) s->bad = 1;
  }
  free(want);
  return SQLITE_OK;
}

static inline mw_log_options tl_opts(int ps, int sync_mode, uint64_t step) {
  mw_log_options o;
  memset(&o, 0, sizeof(o));
  o.page_size = ps;
  o.sync_mode = sync_mode;
  o.prealloc_step = step;
  return o;
}

/* Opens the log of db with the given options and a fresh collector; returns the open's
** result code. */
static inline int tl_open_with(const char *db, const mw_log_options *o, int maxp, tl_seen *seen,
                               mw_log **out, uint64_t *pBase, uint64_t *pLast) {
  memset(seen, 0, sizeof(*seen));
  seen->ps = o->page_size;
  seen->maxp = maxp;
  char *err = 0;
  int rc = mw_log_open(db, o, tl_replay, seen, out, pBase, pLast, &err);
  sqlite3_free(err);
  return rc;
}

static inline int tl_open(const char *db, int ps, int sync_mode, uint64_t step, int maxp,
                          tl_seen *seen, mw_log **out, uint64_t *pBase, uint64_t *pLast) {
  mw_log_options o = tl_opts(ps, sync_mode, step);
  return tl_open_with(db, &o, maxp, seen, out, pBase, pLast);
}

static inline uint64_t tl_file_size(const char *path) {
  struct stat st;
  CHECK(stat(path, &st) == 0);
  return (uint64_t)st.st_size;
}

/* Whole-file read and write, for copies and byte surgery. */
static inline unsigned char *tl_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  CHECK(f != 0);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len + 1);
  CHECK(b != 0);
  CHECK(fread(b, 1, (size_t)len, f) == (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return b;
}

static inline void tl_write_file(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f != 0);
  CHECK(fwrite(b, 1, n, f) == n);
  CHECK(fclose(f) == 0);
}

#endif
