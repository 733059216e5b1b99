/*
** mwbench: the native benchmark of sqlite-multiwriter (design: bench.md).
** Many writers on one database, stock SQLite against the engine, side by side in
** one program linked with the static library (SQLite 3.54.1 + the engine).
**
**   mwbench --workloads bulk,hot --variants sqlite,mw --writers 1,4,16 \
**           --modes threads,processes --warmup 2 --duration 8 --dir /tmp/b --out r.jsonl
**
** Every run: a fresh database created by a stock connection, writers started
** together behind a gate (threads: one connection per pthread; processes: one
** forked process per writer), an uncounted warm-up, a measured period, then
** PRAGMA integrity_check and the workload's check with a stock connection. One
** JSON line per run (figures, or "skipped", or "error"). Each run executes in a
** forked runner process so that a crash is one failed run, not a lost report,
** and so that the top process never holds engine state across fork().
** Exit status: 0 all runs passed, 1 a run failed, 2 bad input (nothing ran).
** Owns only the files named bench.db* and lat.* in the run directory.
*/
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_facts.h"
#include "bench_util.h"
#include "bench_workloads.h"
#include "multiwriter.h"
#include "sqlite3.h"
#ifdef MW_TAIL_TRACE
/* Where slow transactions spend their time (core/db.h): each transaction over
** MWBENCH_TAIL_US (default 5000) microseconds is printed to stderr. */
#include "core/db.h"
#endif

enum { V_SQLITE, V_SQLITE_WAIT, V_MW, V_MWR, V_COUNT };
static const char *const v_names[V_COUNT] = { "sqlite", "sqlite-wait", "mw", "mwr" };
enum { M_THREADS, M_PROCESSES, M_COUNT };
static const char *const m_names[M_COUNT] = { "threads", "processes" };

#define MAX_WRITERS 1024
#define MAX_RETRIES 1000
#define BACKOFF_MIN_NS 5000u
#define BACKOFF_MAX_NS 2000000u
#define HANG_S_DEFAULT 60 /* a writer still running this long after the end is hung */

/* Seconds after the end of a run before a writer counts as hung (MWBENCH_HANG_S: tests). */
static int hang_s(void) {
  const char *e = getenv("MWBENCH_HANG_S");
  int v = e ? atoi(e) : 0;
  return v > 0 ? v : HANG_S_DEFAULT;
}

enum { PH_WARMUP, PH_MEASURE, PH_STOP };

/* Shared by the writers of one run; lives in a MAP_SHARED mapping so that forked
** writers see it too (lock-free atomics work across processes). */
typedef struct {
  atomic_int ready;  /* writers connected and prepared */
  atomic_int go;     /* the gate: all start together */
  atomic_int phase;  /* PH_* */
  atomic_int abort;  /* a writer failed: everyone stops */
  atomic_int finished; /* writers done, connection closed */
  _Atomic uint64_t stop_ns; /* when the measured period ended (now_ns) */
} ctl_t;

typedef struct {
  uint64_t committed; /* in the measured period */
  uint64_t retries;   /* of the transactions committed in the measured period */
  uint64_t gave_up;   /* in the measured period, after MAX_RETRIES */
  uint64_t abandoned; /* retries cut short by the end of the run (not counted) */
  uint64_t total;     /* committed over the whole run: what the check expects */
  uint64_t open_at_stop_ns; /* age of the transaction in flight when the measured period
                            ** ended: its wait is in no percentile (not committed in it), so
                            ** a writer starved by a busy handler shows here */
  int64_t engine;     /* MW_STAT_ENGINE of the connection */
  /* Processes mode: this writer process's CPU (user + system, ns) and context switches
  ** (voluntary + involuntary) over the measured period, as the writer saw it begin and
  ** end (to within one transaction); threads mode: the runner measures the process. */
  uint64_t cpu_ns, csw;
  int64_t log_syncs;  /* the engine log's data syncs over the measured period (this process) */
  int64_t fsyncs;     /* processes mode: fsync + fdatasync calls of this writer process
                         over the measured period */
  int64_t ltx_txid;   /* --ltx: the replica's TXID of this writer's last commit */
  int failed;
  char err[256];
} wres_t;

typedef struct {
  int wl, variant, mode, writers;
  int sync;    /* PRAGMA synchronous: 0 off, 1 normal, 2 full */
  int ltx;     /* the engine streams to a replica (mw_ltx_dir=bench.db-ltx) */
  double warmup, duration;
  long runner; /* pid of the runner process: names the latency files */
  char dir[PATH_MAX];
  char db[PATH_MAX];
  char uri[PATH_MAX * 3 + 64];
} runcfg_t;

typedef struct {
  int workloads[WL_COUNT], nwl;
  int variants[V_COUNT], nvar;
  int modes[M_COUNT], nmode;
  int writers[64], nwriters;
  int sync;
  int ltx;
  double warmup, duration;
  char dir[PATH_MAX];
  const char *out;
  const char *label;
} opts_t;

static FILE *out_f;
static volatile pid_t current_runner; /* runs in its own process group */

static void on_signal(int sig) {
  pid_t r = current_runner;
  if (r > 0) kill(-r, SIGKILL);
  _exit(128 + sig);
}
static facts_t facts;
static const opts_t *g_opts;

/* ---------------------------------------------------------------- connections */

static const char *begin_sql(int variant) {
  /* Stock SQLite takes the write lock up front (the documented way to avoid
  ** deadlocking upgrades); the engine is optimistic and validates at COMMIT. */
  return variant == V_MW || variant == V_MWR ? "BEGIN" : "BEGIN IMMEDIATE";
}

static int busy_timeout_ms(int variant) { return variant == V_SQLITE_WAIT ? 5000 : 0; }

/* file: URI of the run's database, with the variant's engine options. */
static void build_uri(runcfg_t *c) {
  char *o = c->uri;
  o += sprintf(o, "file:");
  for (const char *p = c->db; *p; p++) {
    if (*p == '?' || *p == '#' || *p == '%') o += sprintf(o, "%%%02X", (unsigned char)*p);
    else *o++ = *p;
  }
  *o = 0;
  if (c->variant == V_MW || c->variant == V_MWR) {
    o += sprintf(o, "?vfs=multiwriter");
    if (c->mode == M_PROCESSES) o += sprintf(o, "&mw_mp=1");
    if (c->variant == V_MWR) o += sprintf(o, "&mw_rebase=1");
    if (c->ltx) o += sprintf(o, "&mw_ltx_dir=bench.db-ltx");
  }
}

static const char *const sync_names[] = { "off", "normal", "full" };

/* CPU (user + system, ns) and context switches of the calling process, or of its
** children (RUSAGE_CHILDREN). */
static void usage_now(int who, uint64_t *cpu_ns, uint64_t *csw) {
  struct rusage ru;
  if (getrusage(who, &ru) != 0) {
    *cpu_ns = *csw = 0;
    return;
  }
  *cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
            (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
  *csw = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

static int64_t stat_of(sqlite3 *db, int which) {
  int64_t st[MW_STAT_COUNT];
  return mw_stats(db, NULL, st, MW_STAT_COUNT) == SQLITE_OK ? st[which] : 0;
}
static int64_t log_syncs_of(sqlite3 *db) { return stat_of(db, MW_STAT_LOG_SYNCS); }

/* Every fsync and fdatasync of this process, whoever calls it (SQLite's VFS for stock,
** the engine's log, its compactor and its directory syncs): this program defines both
** and passes each call on to the C library's (the next definition, dlsym RTLD_NEXT),
** so that fsyncs_per_commit counts the same thing for every variant. */
static atomic_llong fsync_calls;
typedef int (*sync_fn)(int);
static int pass_sync(const char *name, _Atomic(sync_fn) *slot, int fd) {
  sync_fn f = atomic_load(slot);
  if (f == 0) {
    f = (sync_fn)dlsym(RTLD_NEXT, name);
    if (f == 0) {
      errno = ENOSYS;
      return -1;
    }
    atomic_store(slot, f);
  }
  atomic_fetch_add(&fsync_calls, 1);
  return f(fd);
}
static _Atomic(sync_fn) real_fsync, real_fdatasync;
int fsync(int fd) { return pass_sync("fsync", &real_fsync, fd); }
int fdatasync(int fd) { return pass_sync("fdatasync", &real_fdatasync, fd); }

/* Opens one writer's connection: WAL (already set by the schema), the run's
** synchronous setting, the variant's busy timeout, extended result codes. */
static int open_conn(const runcfg_t *c, sqlite3 **pdb, int64_t *engine, char *err, size_t cap) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(c->uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, cap, "open %s: %s", c->uri, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return rc;
  }
  sqlite3_extended_result_codes(db, 1);
  /* The setup waits: a connection opening while another one recovers the WAL index
  ** gets SQLITE_BUSY; the variant's busy timeout applies from the first transaction. */
  rc = sqlite3_busy_timeout(db, 10000);
  char sync_sql[40];
  snprintf(sync_sql, sizeof sync_sql, "PRAGMA synchronous=%s", sync_names[c->sync]);
  if (rc == SQLITE_OK) rc = exec_sql(db, sync_sql, err, cap);
  char mode[16] = "";
  if (rc == SQLITE_OK) {
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(st, 0));
    else
      rc = sqlite3_extended_errcode(db);
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) snprintf(err, cap, "PRAGMA journal_mode: %s", sqlite3_errmsg(db));
    else if (strcmp(mode, "wal") != 0) {
      snprintf(err, cap, "journal_mode is %s, expected wal", mode);
      rc = SQLITE_ERROR;
    }
  }
  int64_t st[MW_STAT_COUNT] = { 0 };
  if (rc == SQLITE_OK) {
    rc = mw_stats(db, "main", st, MW_STAT_COUNT);
    if (rc != SQLITE_OK) snprintf(err, cap, "mw_stats: %s", sqlite3_errstr(rc));
  }
  if (rc != SQLITE_OK) {
    sqlite3_close(db);
    return rc;
  }
  if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(db, busy_timeout_ms(c->variant));
  if (rc != SQLITE_OK) {
    snprintf(err, cap, "busy_timeout: %s", sqlite3_errstr(rc));
    sqlite3_close(db);
    return rc;
  }
  *engine = st[MW_STAT_ENGINE];
  *pdb = db;
  return SQLITE_OK;
}

/* ---------------------------------------------------------------- one writer */

static void backoff(rng_t *r, int attempt) {
  uint64_t d = BACKOFF_MIN_NS;
  for (int i = 1; i < attempt && d < BACKOFF_MAX_NS; i++) d *= 2;
  if (d > BACKOFF_MAX_NS) d = BACKOFF_MAX_NS;
  sleep_ns(d / 2 + rng_below(r, d / 2 + 1)); /* jitter: half to all of d */
}

static int fault_is(const char *what) {
  const char *f = getenv("MWBENCH_FAULT");
  return f != NULL && strcmp(f, what) == 0;
}

static void writer_fail(ctl_t *ctl, wres_t *r, const char *fmt, const char *a, const char *b) {
  r->failed = 1;
  snprintf(r->err, sizeof r->err, fmt, a, b);
  atomic_store(&ctl->abort, 1);
}

/* The body of a writer, thread or process: connect, wait at the gate, run
** transactions until the run stops. Fills r and lat (measured latencies, ns). */
static void writer_run(const runcfg_t *c, int w, ctl_t *ctl, wres_t *r, lat_t *lat) {
  wctx_t x;
  memset(&x, 0, sizeof x);
  x.wl = c->wl;
  x.writer = w;
  x.declare = c->variant == V_MWR;
  x.nrows = ct_rows(c->writers);
  rng_seed(&x.rng, (uint64_t)w * 7919u + (uint64_t)now_ns());
  char err[256] = "";
  int counted_ready = 0;
  if (open_conn(c, &x.db, &r->engine, err, sizeof err) != SQLITE_OK) {
    writer_fail(ctl, r, "writer %s: %s", "open", err);
    goto out;
  }
  if (wl_prepare(&x, begin_sql(c->variant)) != SQLITE_OK) {
    writer_fail(ctl, r, "writer prepare: %s%s", sqlite3_errmsg(x.db), "");
    goto out;
  }
  atomic_fetch_add(&ctl->ready, 1);
  counted_ready = 1;
  while (!atomic_load(&ctl->go)) {
    if (atomic_load(&ctl->abort)) goto out;
    sleep_ns(100000);
  }
  int seen_measure = 0;
  uint64_t cpu0 = 0, csw0 = 0;
  int64_t syncs0 = 0, fsyncs0 = 0;
  while (atomic_load(&ctl->phase) != PH_STOP && !atomic_load(&ctl->abort)) {
    if (!seen_measure && atomic_load(&ctl->phase) == PH_MEASURE) {
      seen_measure = 1;
      usage_now(RUSAGE_SELF, &cpu0, &csw0);
      syncs0 = log_syncs_of(x.db);
      fsyncs0 = atomic_load(&fsync_calls);
    }
    wl_choose(&x);
#ifdef MW_TAIL_TRACE
    memset(&mw_tail, 0, sizeof mw_tail);
#endif
    uint64_t t0 = now_ns();
    int attempts = 0, done = 0;
    for (;;) {
      int rc = wl_attempt(&x);
      if (rc == SQLITE_OK) {
        done = 1;
        break;
      }
      if (!sqlite3_get_autocommit(x.db)) {
        int rr = run_stmt(x.db, x.rollback);
        if (rr != SQLITE_OK) {
          writer_fail(ctl, r, "ROLLBACK failed: %s%s", sqlite3_errstr(rr), "");
          goto out;
        }
      }
      if ((rc & 0xff) != SQLITE_BUSY) {
        char code[96];
        snprintf(code, sizeof code, "%s (extended code %d)", sqlite3_errstr(rc), rc);
        writer_fail(ctl, r, "%s transaction failed: %s", wl_names[c->wl], code);
        goto out;
      }
      attempts++;
      if (atomic_load(&ctl->phase) == PH_STOP || atomic_load(&ctl->abort)) {
        r->abandoned++;
        break;
      }
      if (attempts > MAX_RETRIES) {
        if (atomic_load(&ctl->phase) == PH_MEASURE) r->gave_up++;
        break;
      }
      backoff(&x.rng, attempts);
    }
    if (atomic_load(&ctl->phase) == PH_STOP && !r->open_at_stop_ns) {
      uint64_t stop = atomic_load(&ctl->stop_ns);
      r->open_at_stop_ns = stop > t0 ? stop - t0 : 1;
    }
    if (!done) continue;
    uint64_t t1 = now_ns();
#ifdef MW_TAIL_TRACE
    {
      static long tail_us = -1;
      if (tail_us < 0) tail_us = getenv("MWBENCH_TAIL_US") ? atol(getenv("MWBENCH_TAIL_US")) : 5000;
      if (atomic_load(&ctl->phase) == PH_MEASURE && t1 - t0 > (uint64_t)tail_us * 1000u) {
        const mw_tail_trace *m = &mw_tail;
        fprintf(stderr, "TAIL w%d lat %.2f att %d begins %d held %d excl %d probes %d refused %d | begin %.2f turn %.2f commit %.2f durable %.2f visible %.2f refuse %.2f end %.2f other %.2f | reserve %.2f lock %.2f assign %.2f\n",
                w, (t1 - t0) / 1e6, attempts, m->begins, m->held, m->exclusive, m->probes, m->refused,
                m->begin_ns / 1e6, m->turn_ns / 1e6, m->commit_ns / 1e6, m->durable_ns / 1e6, m->visible_ns / 1e6,
                m->refuse_ns / 1e6, m->end_ns / 1e6,
                ((double)(t1 - t0) - (double)(m->begin_ns + m->commit_ns + m->end_ns)) / 1e6,
                m->reserve_ns / 1e6, m->lock_ns / 1e6, m->assign_ns / 1e6);
      }
    }
#endif
    x.seq++;
    r->total++;
    if (atomic_load(&ctl->phase) == PH_MEASURE) {
      r->committed++;
      r->retries += (uint64_t)attempts;
      if (lat_push(lat, t1 - t0) != 0) {
        writer_fail(ctl, r, "out of memory for latencies%s%s", "", "");
        goto out;
      }
    }
  }
  if (seen_measure) {
    uint64_t cpu1, csw1;
    usage_now(RUSAGE_SELF, &cpu1, &csw1);
    r->cpu_ns = cpu1 - cpu0;
    r->csw = csw1 - csw0;
    r->log_syncs = log_syncs_of(x.db) - syncs0;
    r->fsyncs = atomic_load(&fsync_calls) - fsyncs0;
  }
  /* Test hook of bench/smoke.sh: claim one commit that never happened, so that the
  ** check after the run must fail and the run must be an error, not a figure. */
  if (w == 0 && fault_is("count")) r->total++;
  /* Test hook: writer 0 hangs after the run; the watchdog must report it. */
  if (w == 0 && fault_is("hang"))
    for (;;) sleep_ns(1000000000u);
out:
  if (!counted_ready) atomic_fetch_add(&ctl->ready, 1); /* never leave the gate waiting */
  wl_finalize(&x);
  if (x.db) {
    r->ltx_txid = stat_of(x.db, MW_STAT_LTX_TXID);
    int rc = sqlite3_close(x.db);
    if (rc != SQLITE_OK && !r->failed) writer_fail(ctl, r, "close: %s%s", sqlite3_errstr(rc), "");
  }
  atomic_fetch_add(&ctl->finished, 1);
}

typedef struct {
  const runcfg_t *c;
  int w;
  ctl_t *ctl;
  wres_t *r;
  lat_t lat;
} targ_t;

static void *thread_main(void *p) {
  targ_t *t = p;
  writer_run(t->c, t->w, t->ctl, t->r, &t->lat);
  return NULL;
}

/* ---------------------------------------------------------------- one run */

static void lat_path(char *buf, size_t cap, const runcfg_t *c, int w) {
  snprintf(buf, cap, "%s/lat.%ld.%d", c->dir, c->runner, w);
}

/* Removes the files of the previous run (bench.db, -wal, -shm, the engine's -mw*). */
static int rm_tree(const char *path) {
  DIR *d = opendir(path);
  if (d == NULL) return unlink(path) != 0 && errno != ENOENT ? -1 : 0;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    if (rm_tree(p) != 0) rc = -1;
  }
  closedir(d);
  if (rmdir(path) != 0) rc = -1;
  return rc;
}

static int clean_dir(const char *dir, char *err, size_t cap) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    snprintf(err, cap, "cannot list %s: %s", dir, strerror(errno));
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "bench.db", 8) != 0) continue;
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (strcmp(e->d_name, "bench.db-ltx") == 0) {
      /* The replica of --ltx: ltx/<level>/<files>. */
      if (rm_tree(p) != 0) {
        snprintf(err, cap, "cannot remove %s: %s", p, strerror(errno));
        rc = -1;
      }
      continue;
    }
    if (unlink(p) != 0 && errno != ENOENT) {
      snprintf(err, cap, "cannot remove %s: %s", p, strerror(errno));
      rc = -1;
    }
  }
  closedir(d);
  return rc;
}

static void line_head(FILE *o, const runcfg_t *c) {
  fputs("{\"harness\":\"native\",\"runtime\":\"c\",\"workload\":", o);
  json_str(o, wl_names[c->wl]);
  fputs(",\"variant\":", o);
  json_str(o, v_names[c->variant]);
  fprintf(o, ",\"mode\":\"%s\",\"writers\":%d,\"warmup_s\":%g,\"duration_s\":%g", m_names[c->mode], c->writers,
          c->warmup, c->duration);
  if (g_opts->label) {
    fputs(",\"label\":", o);
    json_str(o, g_opts->label);
  }
  time_t t = time(NULL);
  struct tm tm;
  char ts[32] = "";
  if (gmtime_r(&t, &tm)) strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(o, ",\"time\":\"%s\",", ts);
}

static void line_tail(FILE *o) {
  facts_json(o, &facts);
  fputs("}\n", o);
  fflush(o);
}

static void emit_note(const runcfg_t *c, const char *key, const char *msg) {
  line_head(out_f, c);
  json_str(out_f, key);
  fputc(':', out_f);
  json_str(out_f, msg);
  fputc(',', out_f);
  line_tail(out_f);
  fprintf(stderr, "  %s %s %s x%d: %s: %s\n", wl_names[c->wl], v_names[c->variant], m_names[c->mode], c->writers,
          key, msg);
}

/* Sleeps s seconds in slices, returning early when a writer aborted. */
static void sleep_watch(ctl_t *ctl, double s) {
  uint64_t end = now_ns() + (uint64_t)(s * 1e9);
  while (!atomic_load(&ctl->abort)) {
    uint64_t t = now_ns();
    if (t >= end) break;
    uint64_t left = end - t;
    sleep_ns(left < 10000000u ? left : 10000000u);
  }
}

/* Probes the variant in a child process (so this process never holds engine
** state): 0 = usable, 1 = skip (reason in why), -1 = error. */
static int probe_variant(const runcfg_t *c, char *why, size_t cap) {
  if (c->variant != V_MW && c->variant != V_MWR) return 0;
  char *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    snprintf(why, cap, "mmap: %s", strerror(errno));
    return -1;
  }
  memset(shared, 0, 4096);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, cap, "fork: %s", strerror(errno));
    munmap(shared, 4096);
    return -1;
  }
  if (pid == 0) {
    sqlite3 *db = NULL;
    int64_t engine = 0;
    char err[512] = "";
    int code = 0;
    if (open_conn(c, &db, &engine, err, sizeof err) != SQLITE_OK) {
      snprintf(shared, 4096, "the engine refused the option: %s", err);
      code = 1;
    } else if (c->variant == V_MWR && engine == 0) {
      snprintf(shared, 4096,
               "mw_rebase needs the engine, and the multiwriter VFS of this build is a pass-through "
               "(MW_STAT_ENGINE = 0)");
      code = 1;
    }
    if (db && sqlite3_close(db) != SQLITE_OK) code = 2;
    _exit(code);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  int res = 0;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 1) {
    snprintf(why, cap, "%s", shared);
    res = 1;
  } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    snprintf(why, cap, "the probe connection failed (status %d)", st);
    res = -1;
  }
  munmap(shared, 4096);
  return res;
}

/* Runs one configuration (inside the runner process). Returns 0 on a validated
** figure or a skip, 1 on an error; writes exactly one JSON line. */
static int run_one(runcfg_t *c) {
  char err[512] = "";
  int n = c->writers;
  if (clean_dir(c->dir, err, sizeof err) != 0 || schema_create(c->db, n, err, sizeof err) != SQLITE_OK) {
    emit_note(c, "error", err);
    return 1;
  }
  build_uri(c);
  c->runner = (long)getpid();
  int p = probe_variant(c, err, sizeof err);
  if (p != 0) {
    emit_note(c, p > 0 ? "skipped" : "error", err);
    return p > 0 ? 0 : 1;
  }
  /* --ltx: a connection held open across the run, so that the last writer's close does
  ** not end the database (which writes the replica to its end): after the writers stop,
  ** the time until the replica holds their last commit is measured on it. */
  sqlite3 *holder = NULL;
  double ltx_catch_up_ms = -1;
  if (c->ltx && (c->variant == V_MW || c->variant == V_MWR)) {
    if (c->mode != M_THREADS) {
      emit_note(c, "skipped", "--ltx streams from one process only (threads mode)");
      return 0;
    }
    if (sqlite3_open_v2(c->uri, &holder, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL) != SQLITE_OK) {
      emit_note(c, "error", holder ? sqlite3_errmsg(holder) : "cannot open the holder connection");
      sqlite3_close(holder);
      return 1;
    }
  }

  size_t shsz = sizeof(ctl_t) + (size_t)n * sizeof(wres_t);
  void *sh = mmap(NULL, shsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    snprintf(err, sizeof err, "mmap: %s", strerror(errno));
    emit_note(c, "error", err);
    return 1;
  }
  memset(sh, 0, shsz);
  ctl_t *ctl = sh;
  wres_t *res = (wres_t *)((char *)sh + sizeof(ctl_t));
  atomic_init(&ctl->ready, 0);
  atomic_init(&ctl->go, 0);
  atomic_init(&ctl->phase, PH_WARMUP);
  atomic_init(&ctl->abort, 0);
  atomic_init(&ctl->finished, 0);

  targ_t *targs = calloc((size_t)n, sizeof *targs);
  pthread_t *tids = calloc((size_t)n, sizeof *tids);
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  lat_t all = { 0 };
  int started = 0, failed = 0;
  if (!targs || !tids || !pids) {
    snprintf(err, sizeof err, "out of memory");
    failed = 1;
    goto finish;
  }
  fflush(NULL);
  for (int w = 0; w < n; w++) {
    targs[w] = (targ_t){ .c = c, .w = w, .ctl = ctl, .r = &res[w] };
    if (c->mode == M_THREADS) {
      int e = pthread_create(&tids[w], NULL, thread_main, &targs[w]);
      if (e != 0) {
        snprintf(err, sizeof err, "pthread_create: %s", strerror(e));
        break;
      }
    } else {
      pid_t pid = fork();
      if (pid < 0) {
        snprintf(err, sizeof err, "fork: %s", strerror(errno));
        break;
      }
      if (pid == 0) {
        writer_run(c, w, ctl, &res[w], &targs[w].lat);
        /* Hand the raw latencies to the runner: it merges them, not percentiles. */
        char lp[PATH_MAX * 2];
        lat_path(lp, sizeof lp, c, w);
        FILE *f = fopen(lp, "wb");
        int ok = f != NULL && fwrite(targs[w].lat.v, sizeof(uint64_t), targs[w].lat.n, f) == targs[w].lat.n;
        if (f && fclose(f) != 0) ok = 0;
        if (!ok && !res[w].failed) {
          res[w].failed = 1;
          snprintf(res[w].err, sizeof res[w].err, "cannot write %s", lp);
        }
        int code = res[w].failed ? 1 : 0;
        /* The copies of the runner's arrays die with this process; free them anyway so
        ** that a leak checker sees a clean exit. */
        lat_free(&targs[w].lat);
        free(targs);
        free(tids);
        free(pids);
        _exit(code);
      }
      pids[w] = pid;
    }
    started++;
  }
  if (started < n) {
    atomic_store(&ctl->abort, 1);
    failed = 1;
  }
  /* The gate: wait for every writer to be connected, then open it at once. */
  uint64_t deadline = now_ns() + 60ull * 1000000000u;
  while (!failed && atomic_load(&ctl->ready) < n && !atomic_load(&ctl->abort)) {
    if (now_ns() > deadline) {
      snprintf(err, sizeof err, "writers did not get ready within 60 s");
      atomic_store(&ctl->abort, 1);
      break;
    }
    if (c->mode == M_PROCESSES) {
      for (int w = 0; w < started; w++) {
        int st;
        if (pids[w] > 0 && waitpid(pids[w], &st, WNOHANG) == pids[w]) {
          pids[w] = -1;
          if (!res[w].failed) snprintf(res[w].err, sizeof res[w].err, "writer process died before the start (status %d)", st), res[w].failed = 1;
          atomic_store(&ctl->abort, 1);
        }
      }
    }
    sleep_ns(1000000);
  }
  uint64_t t0 = 0, t1 = 0, run_cpu0 = 0, run_csw0 = 0, run_cpu1 = 0, run_csw1 = 0;
  int64_t run_fsyncs0 = 0, run_fsyncs1 = 0;
  if (!atomic_load(&ctl->abort)) {
    atomic_store(&ctl->go, 1);
    sleep_watch(ctl, c->warmup);
    t0 = now_ns();
    usage_now(RUSAGE_SELF, &run_cpu0, &run_csw0); /* threads mode: the whole process */
    run_fsyncs0 = atomic_load(&fsync_calls);
    atomic_store(&ctl->phase, PH_MEASURE);
    sleep_watch(ctl, c->duration);
    usage_now(RUSAGE_SELF, &run_cpu1, &run_csw1);
    run_fsyncs1 = atomic_load(&fsync_calls);
    t1 = now_ns();
    atomic_store(&ctl->stop_ns, t1);
    atomic_store(&ctl->phase, PH_STOP);
  } else {
    atomic_store(&ctl->phase, PH_STOP);
  }
  /* Watchdog: a writer that does not finish soon after the end is hung (in SQLite or
  ** the engine). Processes are killed; threads cannot be, so the runner reports and
  ** exits, and the top process carries on with the next run. */
  deadline = now_ns() + (uint64_t)hang_s() * 1000000000u;
  while (atomic_load(&ctl->finished) < started && now_ns() < deadline) sleep_ns(5000000);
  if (atomic_load(&ctl->finished) < started) {
    char msg[160];
    snprintf(msg, sizeof msg, "%d of %d writers still running %d s after the end of the run: a hang",
             started - atomic_load(&ctl->finished), started, hang_s());
    if (c->mode == M_THREADS) {
      emit_note(c, "error", msg);
      fflush(NULL);
      _exit(1);
    }
    for (int w = 0; w < started; w++)
      if (pids[w] > 0) kill(pids[w], SIGKILL);
    snprintf(err, sizeof err, "%s", msg);
    failed = 1;
  }
  for (int w = 0; w < started; w++) {
    if (c->mode == M_THREADS) {
      pthread_join(tids[w], NULL);
      if (lat_append(&all, targs[w].lat.v, targs[w].lat.n) != 0) failed = 1;
      lat_free(&targs[w].lat);
    } else {
      int st = 0;
      if (pids[w] > 0) {
        while (waitpid(pids[w], &st, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(st) && !res[w].failed) {
          res[w].failed = 1;
          snprintf(res[w].err, sizeof res[w].err, "writer process %d ended by signal %d", w,
                   WIFSIGNALED(st) ? WTERMSIG(st) : -1);
        }
      }
      char lp[PATH_MAX * 2];
      lat_path(lp, sizeof lp, c, w);
      FILE *f = fopen(lp, "rb");
      if (f) {
        uint64_t buf[4096];
        size_t k;
        while ((k = fread(buf, sizeof buf[0], 4096, f)) > 0)
          if (lat_append(&all, buf, k) != 0) failed = 1;
        fclose(f);
        unlink(lp);
      } else if (!res[w].failed) {
        res[w].failed = 1;
        snprintf(res[w].err, sizeof res[w].err, "latencies of writer %d missing", w);
      }
    }
  }
  uint64_t committed = 0, retries = 0, gave_up = 0, abandoned = 0, total = 0;
  uint64_t open_max = 0, fewest = UINT64_MAX;
  uint64_t cpu_ns = 0, csw = 0;
  int64_t log_syncs = 0, fsyncs = 0;
  int engine = 1;
  for (int w = 0; w < started; w++) {
    if (res[w].failed && !failed) {
      snprintf(err, sizeof err, "writer %d: %s", w, res[w].err);
      failed = 1;
    }
    committed += res[w].committed;
    retries += res[w].retries;
    gave_up += res[w].gave_up;
    abandoned += res[w].abandoned;
    total += res[w].total;
    if (res[w].open_at_stop_ns > open_max) open_max = res[w].open_at_stop_ns;
    if (res[w].committed < fewest) fewest = res[w].committed;
    if (res[w].engine == 0) engine = 0;
    /* Processes: each writer process's own; threads: one log shared by all (writer 0's). */
    if (c->mode == M_PROCESSES) {
      cpu_ns += res[w].cpu_ns;
      csw += res[w].csw;
      log_syncs += res[w].log_syncs;
      fsyncs += res[w].fsyncs;
    } else if (w == 0) {
      log_syncs = res[w].log_syncs;
    }
  }
  if (c->mode == M_THREADS) {
    cpu_ns = run_cpu1 - run_cpu0;
    csw = run_csw1 - run_csw0;
    fsyncs = run_fsyncs1 - run_fsyncs0;
  }
  if (!failed && atomic_load(&ctl->abort)) {
    if (!err[0]) snprintf(err, sizeof err, "run aborted");
    failed = 1;
  }
  if (!failed && all.n != committed) {
    snprintf(err, sizeof err, "%zu latencies for %llu commits", all.n, (unsigned long long)committed);
    failed = 1;
  }
  if (holder) {
    int64_t want = 0;
    for (int w = 0; w < started; w++)
      if (res[w].ltx_txid > want) want = res[w].ltx_txid;
    uint64_t t0 = now_ns();
    while (stat_of(holder, MW_STAT_LTX_EMITTED) < want && now_ns() - t0 < 60ull * 1000000000u)
      sleep_ns(1000000u);
    if (stat_of(holder, MW_STAT_LTX_EMITTED) < want && !failed) {
      snprintf(err, sizeof err, "the replica did not reach TXID %lld within 60 s", (long long)want);
      failed = 1;
    }
    ltx_catch_up_ms = (double)(now_ns() - t0) / 1e6;
    if (sqlite3_close(holder) != SQLITE_OK && !failed) {
      snprintf(err, sizeof err, "close of the holder connection failed");
      failed = 1;
    }
    holder = NULL;
  }
  char what[256] = "";
  if (!failed && validate(c->db, c->wl, total, what, sizeof what, err, sizeof err) != 0) failed = 1;

finish:
  if (holder) sqlite3_close(holder); /* a run that failed before its end */
  if (failed) {
    emit_note(c, "error", err[0] ? err : "run failed");
  } else {
    qsort(all.v, all.n, sizeof all.v[0], cmp_u64);
    double el = (double)(t1 - t0) / 1e9;
    double tps = el > 0 ? (double)committed / el : 0;
    double us = 1000.0;
    uint64_t p50 = pct_sorted(all.v, all.n, 0.50), p99 = pct_sorted(all.v, all.n, 0.99),
             p999 = pct_sorted(all.v, all.n, 0.999), mx = all.n ? all.v[all.n - 1] : 0;
    double sum = 0;
    for (size_t i = 0; i < all.n; i++) sum += (double)all.v[i];
    double mean = all.n ? sum / (double)all.n : 0;
    /* Fairness: the writer that committed least, as a share of the average writer. */
    double share = committed ? (double)fewest * (double)started / (double)committed : 0;
    line_head(out_f, c);
    fprintf(out_f,
            "\"elapsed_s\":%.4f,\"committed\":%llu,\"tx_per_s\":%.1f,\"retries\":%llu,\"retries_per_100\":%.2f,"
            "\"gave_up\":%llu,\"abandoned\":%llu,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,"
            "\"mean_us\":%.1f,\"open_at_end_max_us\":%.1f,\"fewest_share\":%.3f,"
            "\"total_committed\":%llu,\"validated\":true,\"check\":",
            el, (unsigned long long)committed, tps, (unsigned long long)retries,
            committed ? 100.0 * (double)retries / (double)committed : 0.0, (unsigned long long)gave_up,
            (unsigned long long)abandoned, (double)p50 / us, (double)p99 / us, (double)p999 / us, (double)mx / us,
            mean / us, (double)open_max / us, share, (unsigned long long)total);
    json_str(out_f, what);
    fprintf(out_f, ",\"engine_active\":%s,\"begin\":\"%s\",\"busy_timeout_ms\":%d,\"synchronous\":\"%s\",",
            engine ? "true" : "false", begin_sql(c->variant), busy_timeout_ms(c->variant), sync_names[c->sync]);
    if (ltx_catch_up_ms >= 0) fprintf(out_f, "\"ltx\":true,\"ltx_catch_up_ms\":%.1f,", ltx_catch_up_ms);
    /* CPU and context switches of the writers' process(es) per commit (getrusage over
    ** the measured period); the engine log's data syncs per commit (null for stock,
    ** whose syncs SQLite makes inside its own VFS); every fsync/fdatasync call of the
    ** process(es), any variant. */
    double per = committed ? (double)committed : 1.0;
    fprintf(out_f, "\"cpu_us_per_commit\":%.1f,\"csw_per_commit\":%.2f,\"cpu_util\":%.2f,\"log_syncs_per_commit\":",
            (double)cpu_ns / 1000.0 / per, (double)csw / per, el > 0 ? (double)cpu_ns / 1e9 / el : 0.0);
    if (engine) fprintf(out_f, "%.3f,", (double)log_syncs / per);
    else fprintf(out_f, "null,");
    /* Every fsync and fdatasync of the writers' process(es), any variant. */
    fprintf(out_f, "\"fsyncs_per_commit\":%.3f,", (double)fsyncs / per);
    line_tail(out_f);
    fprintf(stderr, "  %-8s %-11s %-9s x%-3d %9.0f tx/s  retries/100 %7.1f  p99.9 %9.1f us  mean %9.1f us  fewest %3.0f%%  cpu/commit %6.1f us  csw/commit %5.2f  gave up %llu  [%s]\n",
            wl_names[c->wl], v_names[c->variant], m_names[c->mode], n, tps,
            committed ? 100.0 * (double)retries / (double)committed : 0.0, (double)p999 / us, mean / us,
            100.0 * share, (double)cpu_ns / 1000.0 / per, (double)csw / per, (unsigned long long)gave_up, what);
  }
  lat_free(&all);
  free(targs);
  free(tids);
  free(pids);
  munmap(sh, shsz);
  return failed;
}

/* ---------------------------------------------------------------- arguments */

static void usage(FILE *f) {
  fprintf(f,
          "usage: mwbench [options]\n"
          "  --workloads LIST  bulk,samepage,hot,transfer,slow,read or all (default all)\n"
          "  --variants LIST   sqlite,sqlite-wait,mw,mwr or all (default all)\n"
          "  --writers LIST    writer counts, e.g. 1,4,16 (default 1,4)\n"
          "  --modes LIST      threads,processes or all (default threads)\n"
          "  --warmup S        uncounted warm-up seconds (default 1)\n"
          "  --duration S      measured seconds (default 4; published figures: --warmup 2 --duration 8)\n"
          "  --dir DIR         run directory, created if missing (default bench/results/db)\n"
          "  --out FILE        append the JSON lines to FILE (default stdout)\n"
          "  --label TEXT      a label copied into every line\n"
          "  --sync MODE       PRAGMA synchronous of every writer: off, normal or full (default full)\n"
          "  --ltx on|off      the engine streams every commit to a Litestream replica beside the\n"
          "                    database (mw_ltx_dir; threads mode); reports ltx_catch_up_ms (default off)\n");
}

static int bad(const char *fmt, const char *a) {
  fprintf(stderr, "mwbench: ");
  fprintf(stderr, fmt, a);
  fprintf(stderr, "\n");
  return 2;
}

/* Parses a comma list of names into indexes; "all" selects every name. */
static int parse_names(const char *s, const char *const *names, int count, int *out, int *n, const char *what) {
  *n = 0;
  if (strcmp(s, "all") == 0) {
    for (int i = 0; i < count; i++) out[(*n)++] = i;
    return 0;
  }
  char buf[512];
  if (strlen(s) >= sizeof buf || !*s) return bad("empty or too long list of %s", what);
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int found = -1;
    for (int i = 0; i < count; i++)
      if (strcmp(t, names[i]) == 0) found = i;
    if (found < 0) {
      fprintf(stderr, "mwbench: unknown %s '%s' (known:", what, t);
      for (int i = 0; i < count; i++) fprintf(stderr, " %s", names[i]);
      fprintf(stderr, ")\n");
      return 2;
    }
    for (int i = 0; i < *n; i++)
      if (out[i] == found) return bad("%s listed twice", t);
    out[(*n)++] = found;
  }
  if (*n == 0) return bad("empty list of %s", what);
  return 0;
}

static int parse_writers(const char *s, opts_t *o) {
  o->nwriters = 0;
  const char *p = s;
  if (!*p) return bad("empty writers list%s", "");
  for (;;) {
    if (*p < '0' || *p > '9') return bad("writers list '%s' does not parse (expected e.g. 1,4,16)", s);
    char *end = NULL;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || v < 1 || v > MAX_WRITERS) return bad("writers list '%s': each count must be 1..1024", s);
    if (o->nwriters == 64) return bad("writers list '%s' is too long", s);
    o->writers[o->nwriters++] = (int)v;
    if (*end == 0) return 0;
    if (*end != ',') return bad("writers list '%s' does not parse (expected e.g. 1,4,16)", s);
    p = end + 1;
  }
}

static int parse_seconds(const char *s, double *out, int allow_zero, const char *what) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0) || v > 3600 || (!allow_zero && v <= 0))
    return bad("bad %s", what);
  *out = v;
  return 0;
}

/* mkdir -p */
static int make_dirs(const char *path) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

/* The run directory must exist (or be created) and take a file write. */
static int check_dir(const char *dir) {
  if (make_dirs(dir) != 0) {
    fprintf(stderr, "mwbench: cannot create the run directory %s: %s\n", dir, strerror(errno));
    return 2;
  }
  char p[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/write-probe.%ld", dir, (long)getpid());
  FILE *f = fopen(p, "w");
  if (f == NULL || fputs("probe\n", f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "mwbench: cannot write in the run directory %s: %s\n", dir, strerror(errno));
    return 2;
  }
  unlink(p);
  return 0;
}

static int parse_args(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  int rc = parse_names("all", wl_names, WL_COUNT, o->workloads, &o->nwl, "workload");
  rc |= parse_names("all", v_names, V_COUNT, o->variants, &o->nvar, "variant");
  rc |= parse_names("threads", m_names, M_COUNT, o->modes, &o->nmode, "mode");
  rc |= parse_writers("1,4", o);
  if (rc) return 2;
  o->warmup = 1;
  o->duration = 4;
  o->sync = 2;
  snprintf(o->dir, sizeof o->dir, "bench/results/db");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    char key[64];
    const char *eq = strchr(a, '=');
    if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof key) {
      snprintf(key, sizeof key, "%.*s", (int)(eq - a), a);
      val = eq + 1;
    } else {
      snprintf(key, sizeof key, "%.63s", a);
    }
    if (strcmp(key, "--help") == 0 || strcmp(key, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    static const char *const with_value[] = { "--workloads", "--variants", "--writers", "--modes", "--warmup",
                                              "--duration", "--dir", "--out", "--label", "--sync", "--ltx" };
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
      if (strcmp(key, with_value[k]) == 0) known = 1;
    if (!known) {
      fprintf(stderr, "mwbench: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
    if (val == NULL) {
      if (i + 1 >= argc) return bad("%s needs a value", key);
      val = argv[++i];
    }
    if (strcmp(key, "--workloads") == 0) rc = parse_names(val, wl_names, WL_COUNT, o->workloads, &o->nwl, "workload");
    else if (strcmp(key, "--variants") == 0) rc = parse_names(val, v_names, V_COUNT, o->variants, &o->nvar, "variant");
    else if (strcmp(key, "--modes") == 0) rc = parse_names(val, m_names, M_COUNT, o->modes, &o->nmode, "mode");
    else if (strcmp(key, "--writers") == 0) rc = parse_writers(val, o);
    else if (strcmp(key, "--warmup") == 0) rc = parse_seconds(val, &o->warmup, 1, "--warmup (seconds, 0..3600)");
    else if (strcmp(key, "--duration") == 0) rc = parse_seconds(val, &o->duration, 0, "--duration (seconds, >0, <=3600)");
    else if (strcmp(key, "--dir") == 0) {
      if (!*val || strlen(val) >= sizeof o->dir - 32) return bad("bad --dir '%s'", val);
      snprintf(o->dir, sizeof o->dir, "%s", val);
    } else if (strcmp(key, "--out") == 0) o->out = val;
    else if (strcmp(key, "--label") == 0) o->label = val;
    else if (strcmp(key, "--ltx") == 0) {
      if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0) return bad("--ltx is on or off, not '%s'", val);
      o->ltx = strcmp(val, "on") == 0;
    } else if (strcmp(key, "--sync") == 0) {
      int k = 0;
      while (k < 3 && strcmp(val, sync_names[k]) != 0) k++;
      if (k == 3) return bad("--sync is off, normal or full, not '%s'", val);
      o->sync = k;
    }
    if (rc) return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  opts_t o;
  if (parse_args(argc, argv, &o) != 0) return 2;
  g_opts = &o;
  if (check_dir(o.dir) != 0) return 2;
  out_f = stdout;
  if (o.out) {
    out_f = fopen(o.out, "a");
    if (out_f == NULL) {
      fprintf(stderr, "mwbench: cannot open --out %s: %s\n", o.out, strerror(errno));
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  int rc = sqlite3_initialize();
  if (rc == SQLITE_OK) rc = mw_register();
  if (rc != SQLITE_OK) {
    fprintf(stderr, "mwbench: cannot initialize SQLite or register the engine: %s\n", sqlite3_errstr(rc));
    return 1;
  }
  facts_collect(&facts, o.dir);
  fprintf(stderr, "mwbench: SQLite %s, engine %s, %ld cores, %s, %s on %s, fdatasync %.0f us, commit %s\n",
          facts.sqlite_version, facts.engine_version, facts.cores, facts.kernel, o.dir, facts.fs,
          facts.fdatasync_us, facts.commit);

  int total = o.nwl * o.nvar * o.nmode * o.nwriters, k = 0, failures = 0;
  for (int a = 0; a < o.nwl; a++)
    for (int m = 0; m < o.nmode; m++)
      for (int n = 0; n < o.nwriters; n++)
        for (int v = 0; v < o.nvar; v++) {
          runcfg_t c;
          memset(&c, 0, sizeof c);
          c.wl = o.workloads[a];
          c.variant = o.variants[v];
          c.mode = o.modes[m];
          c.writers = o.writers[n];
          c.warmup = o.warmup;
          c.sync = o.sync;
          c.ltx = o.ltx;
          c.duration = o.duration;
          snprintf(c.dir, sizeof c.dir, "%s", o.dir);
          snprintf(c.db, sizeof c.db, "%s/bench.db", o.dir);
          k++;
          fprintf(stderr, "[%d/%d]", k, total);
          fflush(NULL);
          pid_t pid = fork();
          if (pid < 0) {
            fprintf(stderr, "mwbench: fork: %s\n", strerror(errno));
            return 1;
          }
          if (pid == 0) {
            setpgid(0, 0); /* its own group: a hung run is killed with its writers */
            int r = run_one(&c);
            fflush(NULL);
            _exit(r);
          }
          setpgid(pid, pid);
          current_runner = pid;
          int st = 0, killed = 0;
          /* Everything of a run (setup, gate, run, checks) must end well within this. */
          uint64_t limit = now_ns() + (uint64_t)((c.warmup + c.duration + 2 * hang_s() + 120) * 1e9);
          for (;;) {
            pid_t r = waitpid(pid, &st, WNOHANG);
            if (r == pid || (r < 0 && errno != EINTR)) break;
            if (!killed && now_ns() > limit) {
              kill(-pid, SIGKILL);
              kill(pid, SIGKILL);
              killed = 1;
            }
            sleep_ns(20000000);
          }
          current_runner = 0;
          char cerr[512];
          if (clean_dir(c.dir, cerr, sizeof cerr) != 0) fprintf(stderr, "mwbench: %s\n", cerr);
          if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failures++;
            if (!WIFEXITED(st)) {
              char msg[96];
              if (killed) snprintf(msg, sizeof msg, "the run did not finish in time and was killed");
              else snprintf(msg, sizeof msg, "the run ended by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
              emit_note(&c, "error", msg);
            }
          }
        }
  if (out_f != stdout && fclose(out_f) != 0) {
    fprintf(stderr, "mwbench: cannot write --out %s\n", o.out);
    return 1;
  }
  if (failures) fprintf(stderr, "mwbench: %d of %d runs failed\n", failures, k);
  return failures ? 1 : 0;
}
