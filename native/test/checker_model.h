/* The randomized checker shared by test_engine_checker.c and test_growth_checker.c
** (docs/testing.md). Each program only describes its workload (cm_load: the
** tables, the keys, the mix of operations, the value sizes); this file owns the
** rest: 8 threads, each with its own connection, run random transactions (upserts,
** updates, deletes, point and range reads) and record their snapshot and commit
** epochs (MW_FCNTL_STATS) and what they read. Then the commits are replayed in
** epoch order on a model of key -> hash of the value:
**   - a committed transaction must have read exactly the model state just before
**     its commit epoch (plus its own writes): serializable, in epoch order;
**   - a read-only or refused transaction must have read the state at its snapshot;
**   - the final tables must equal the model, integrity_check must pass through the
**     engine and, after the last close, through a stock connection.
** MW_TEST_PARAMS adds URI parameters (e.g. mw_readcheck=0 must make it fail). */
#ifndef MW_CHECKER_MODEL_H
#define MW_CHECKER_MODEL_H
#include "test_engine_util.h"
#include <sched.h>

#ifndef CM_THREADS /* a test may ask for more before including this file */
#define CM_THREADS 8
#endif
#define CM_MAXOPS 6
#define CM_MAXTABLES 3
#define CM_BIG_MIN 2000 /* the smallest of the big values */

/* A workload. An operation draws r = 0..99 (read-only transactions: r is moved into
** write_below..99): r < write_below writes (put below put_below, update below
** upd_below, else delete), r < get_below reads a key, else reads a range of up to
** range_width keys. Key k lives in table tname[k % tables]. */
typedef struct cm_load {
  const char *dir;        /* the temp directory's name */
  const char *schema;     /* creates the tables; row 0 = 'zero' goes into tname[0] */
  const char *const *tname;
  int tables, keys, txns; /* txns: transactions per thread */
  int readonly_one_in;    /* one transaction in this many is read-only */
  int write_below, put_below, upd_below, get_below, range_width;
  int new_below;          /* r below this takes the next new key of the thread's block */
  int big_table;          /* big values only there (-1: any table), one in big_one_in */
  int big_one_in, big_bytes, small_bytes; /* CM_BIG_MIN + 0..big_bytes-1, or 1..small_bytes */
  int meta_one_in;        /* one operation in this many (0: none) reads or sets
                             user_version (page 1's header: a read the relocation path
                             must validate too) */
  int held_one_in;        /* one iteration in this many (0: none) holds a read statement
                             open and runs single-statement commits inside its snapshot */
  int rebase;             /* declare the keys a transaction of point operations read or
                             wrote (MW_FCNTL_REBASE_ROWS), for a run with mw_rebase=1 */
} cm_load;

/* The checkers' workload over one table kv (test_engine_checker, test_mp_checker): one
** transaction in 5 read-only; 60% writes (30 put, 15 update or copy, 15 delete), 20%
** point reads, 20% ranges of up to 12 keys; one value in 10 of 2000..7999 bytes, else
** 1..400; one iteration in 6 in a held snapshot, one operation in 25 on user_version. */
static const char *const cm_kv_tname[] = { "kv" };
#define CM_KV_LOAD(dir_, txns_)                                                           \
  {                                                                                      \
    .dir = (dir_), .schema = "CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT)",           \
    .tname = cm_kv_tname, .tables = 1, .keys = 200, .txns = (txns_),                     \
    .readonly_one_in = 5,                                                                \
    .write_below = 60, .put_below = 30, .upd_below = 45, .get_below = 80,                \
    .range_width = 12, .new_below = 0,                                                   \
    .big_table = -1, .big_one_in = 10, .big_bytes = 6000, .small_bytes = 400,            \
    .held_one_in = 6, .meta_one_in = 25,                                                 \
  }

/* The seed of the run: MW_TEST_SEED, or a fixed one. Printed, so that a failing run's
** workload can be generated again (the threads' schedule differs every run). */
static uint64_t cm_seed = 0x5eed0001ull;

/* OP_COPY: k takes k2's value when k2 exists (a write that depends on a read). */
/* OP_META_GET / OP_META_SET: read or set user_version (the model's slot `keys`). */
enum { OP_PUT, OP_UPD, OP_DEL, OP_GET, OP_RANGE, OP_COPY, OP_META_GET, OP_META_SET };

typedef struct op {
  int kind, k, k2;
  uint64_t vh;       /* PUT/UPD: hash of the value written; GET: hash read (0 = none) */
  uint64_t rh;       /* RANGE: hash of what was read */
} op;

typedef struct txn {
  int nops;
  op ops[CM_MAXOPS];
  int committed;
  int64_t snap, epoch;
} txn;

typedef struct cm_worker {
  const cm_load *L;
  int id;
  const char *path, *params;
  txn *t;
  int n;
  int commits, refused, held;
  int64_t cw, cr, cs, reloc, merges, refused_reloc, rebases;
  int64_t compactions;    /* of the database in the worker's process, at its end */
} cm_worker;

/* One check: the whole run and its results. */
typedef struct cm_run {
  const cm_load *L;
  cm_worker w[CM_THREADS];
  uint64_t *model, *scratch;
  int total, commits, refused, held, bad, final_ok;
  int64_t cw, cr, cs, reloc, merges, refused_reloc, rebases, compactions;
} cm_run;

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h | 1; /* never 0: 0 means "absent" */
}

static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x9E3779B97F4A7C15ull + 7; }

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void make_value(char *buf, int len, int who, int n, int j) {
  int w = snprintf(buf, (size_t)len + 1, "w%d-t%d-o%d:", who, n, j);
  for (int i = w; i < len; i++) buf[i] = (char)('a' + (i * 7 + n + j) % 26);
  buf[len] = 0;
}

/* A worker's prepared statements over one table. */
typedef struct cm_stmts { sqlite3_stmt *put, *upd, *del, *get, *rng, *copy; } cm_stmts;

static void cm_prepare(sqlite3 *db, const char *table, cm_stmts *s) {
  char q[200];
  snprintf(q, sizeof q, "INSERT INTO %s(k,v) VALUES(?1,?2) ON CONFLICT(k) DO UPDATE SET v=excluded.v", table);
  CHECK_RC(sqlite3_prepare_v2(db, q, -1, &s->put, 0), SQLITE_OK);
  snprintf(q, sizeof q, "UPDATE %s SET v=?2 WHERE k=?1", table);
  CHECK_RC(sqlite3_prepare_v2(db, q, -1, &s->upd, 0), SQLITE_OK);
  snprintf(q, sizeof q, "DELETE FROM %s WHERE k=?1", table);
  CHECK_RC(sqlite3_prepare_v2(db, q, -1, &s->del, 0), SQLITE_OK);
  snprintf(q, sizeof q, "SELECT v FROM %s WHERE k=?1", table);
  CHECK_RC(sqlite3_prepare_v2(db, q, -1, &s->get, 0), SQLITE_OK);
  snprintf(q, sizeof q, "SELECT k, v FROM %s WHERE k BETWEEN ?1 AND ?2 ORDER BY k", table);
  CHECK_RC(sqlite3_prepare_v2(db, q, -1, &s->rng, 0), SQLITE_OK);
  snprintf(q, sizeof q, "INSERT INTO %s(k,v) SELECT ?1, v FROM %s WHERE k=?2 "
           "ON CONFLICT(k) DO UPDATE SET v=excluded.v", table, table);
  CHECK_RC(sqlite3_prepare_v2(db, q, -1, &s->copy, 0), SQLITE_OK);
}

static void cm_finalize(cm_stmts *s) {
  sqlite3_finalize(s->put);
  sqlite3_finalize(s->upd);
  sqlite3_finalize(s->del);
  sqlite3_finalize(s->get);
  sqlite3_finalize(s->rng);
  sqlite3_finalize(s->copy);
}

/* Writes o (kind and keys set); put and update write a value of len bytes. Returns
** the step's result (an autocommit statement commits inside the step). */
static int cm_write_try(const cm_stmts *s, op *o, char *val, int len, int who, int n, int j) {
  sqlite3_stmt *st = o->kind == OP_PUT ? s->put : o->kind == OP_UPD ? s->upd
                   : o->kind == OP_COPY ? s->copy : s->del;
  sqlite3_bind_int(st, 1, o->k);
  if (o->kind == OP_COPY) {
    sqlite3_bind_int(st, 2, o->k2);
  } else if (o->kind != OP_DEL) {
    make_value(val, len, who, n, j);
    o->vh = fnv(val, (size_t)len);
    sqlite3_bind_text(st, 2, val, len, SQLITE_TRANSIENT);
  }
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) rc = sqlite3_extended_errcode(sqlite3_db_handle(st));
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void cm_write(sqlite3 *db, const cm_stmts *s, op *o, char *val, int len, int who, int n, int j) {
  int rc = cm_write_try(s, o, val, len, who, n, j);
  if (rc != SQLITE_OK) { fprintf(stderr, "write step: %d %s\n", rc, sqlite3_errmsg(db)); exit(1); }
}

/* A key of the same table as k (keys live in table k % tables). */
static int cm_same_table_key(const cm_load *L, int k, uint64_t *seed) {
  int k2 = (int)(rnd(seed) % (uint64_t)L->keys);
  k2 += k % L->tables - k2 % L->tables;
  return k2 >= 0 && k2 < L->keys ? k2 : k;
}

static void cm_get(const cm_stmts *s, op *o) {
  sqlite3_stmt *get = s->get;
  o->kind = OP_GET;
  sqlite3_bind_int(get, 1, o->k);
  int rc = sqlite3_step(get);
  if (rc == SQLITE_ROW) o->vh = fnv(sqlite3_column_text(get, 0), (size_t)sqlite3_column_bytes(get, 0));
  else if (rc != SQLITE_DONE) { fprintf(stderr, "get: %d\n", rc); exit(1); }
  sqlite3_reset(get);
}
/* Reads the keys o->k..o->k2 of the table. */
static void cm_range(const cm_stmts *s, op *o) {
  sqlite3_stmt *rng = s->rng;
  o->kind = OP_RANGE;
  sqlite3_bind_int(rng, 1, o->k);
  sqlite3_bind_int(rng, 2, o->k2);
  uint64_t h = 0;
  int rc;
  while ((rc = sqlite3_step(rng)) == SQLITE_ROW)
    h = mix(mix(h, (uint64_t)sqlite3_column_int(rng, 0)),
            fnv(sqlite3_column_text(rng, 1), (size_t)sqlite3_column_bytes(rng, 1)));
  if (rc != SQLITE_DONE) { fprintf(stderr, "range: %d\n", rc); exit(1); }
  sqlite3_reset(rng);
  o->rh = h;
}

/* Several commits inside one snapshot: a read statement is kept stepping while
** single-statement writes commit one by one in its snapshot. Each is recorded as a
** transaction of one operation at the held snapshot; the replay checks them like
** any other (a COPY reads, and its result must be the serial one). */
static void cm_held_run(cm_worker *w, sqlite3 *db, cm_stmts *s, char *val, uint64_t *seed, int n) {
  const cm_load *L = w->L;
  sqlite3_stmt *hold = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT x FROM cm_hold", -1, &hold, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(hold), SQLITE_ROW);
  int m = 1 + (int)(rnd(seed) % CM_MAXOPS);
  for (int j = 0; j < m; j++) {
    if (rnd(seed) % 2) sched_yield();
    txn *t = &w->t[w->n];
    memset(t, 0, sizeof(*t));
    t->nops = 1;
    op *o = &t->ops[0];
    o->k = (int)(rnd(seed) % (uint64_t)L->keys);
    int r = (int)(rnd(seed) % 3);
    o->kind = r == 0 ? OP_PUT : r == 1 ? OP_COPY : OP_DEL;
    if (o->kind == OP_COPY) o->k2 = cm_same_table_key(L, o->k, seed);
    int len = 1 + (int)(rnd(seed) % (uint64_t)L->small_bytes);
    if (rnd(seed) % (uint64_t)L->big_one_in == 0) len = CM_BIG_MIN + (int)(rnd(seed) % (uint64_t)L->big_bytes);
    int64_t before = tu_stat(db, MW_STAT_COMMIT_EPOCH);
    int rc = cm_write_try(&s[o->k % L->tables], o, val, len, w->id, n, j);
    t->snap = tu_stat(db, MW_STAT_SNAPSHOT_EPOCH);
    if (rc == SQLITE_OK) {
      /* A statement that changed nothing committed nothing: epoch 0 (read-only). */
      t->epoch = tu_stat(db, MW_STAT_COMMIT_EPOCH);
      if (t->epoch == before) t->epoch = 0;
      t->committed = 1;
      w->commits++;
    } else if (rc == SQLITE_BUSY_SNAPSHOT) {
      w->refused++;
    } else {
      fprintf(stderr, "held write (op %d, %d of %d): %d/%d %s (seed %llu)\n", o->kind, j, m, rc,
              sqlite3_extended_errcode(db), sqlite3_errmsg(db), (unsigned long long)cm_seed);
      exit(1);
    }
    w->n++;
    w->held++;
  }
  sqlite3_finalize(hold);
}

/* Rebase: a transaction of point operations declares every key it touched (each
** statement reads its key, a copy also k2); one with a range read declares nothing
** (it read rows it cannot name) and is never rebased. */
static void cm_declare(sqlite3 *db, const txn *t) {
  int64_t keys[2 * CM_MAXOPS];
  int n = 0, wrote = 0;
  for (int j = 0; j < t->nops; j++) {
    const op *o = &t->ops[j];
    if (o->kind == OP_RANGE) return;
    wrote |= o->kind == OP_PUT || o->kind == OP_UPD || o->kind == OP_DEL || o->kind == OP_COPY ||
             o->kind == OP_META_SET;
    if (o->kind == OP_META_GET || o->kind == OP_META_SET) continue; /* page 1: validated */
    keys[n++] = o->k;
    if (o->kind == OP_COPY) keys[n++] = o->k2;
  }
  if (wrote) CHECK_RC(mw_rebase_rows_declare(db, 0, keys, n), SQLITE_OK); /* after a write only */
}

static void *cm_worker_run(void *arg) {
  cm_worker *w = arg;
  const cm_load *L = w->L;
  sqlite3 *db = tu_open(w->path, w->params);
  /* Half the threads acknowledge once written (NORMAL), half once synced (FULL). */
  if (w->id % 2) tu_exec(db, "PRAGMA synchronous=NORMAL");
  /* Threads 0, 3 and 6 poll PRAGMA data_version: their connections keep SQLite's cache
  ** across their own commits (lane.c, "warm transactions"), so their transactions read
  ** more pages from the cache only, which the carried read set must cover. */
  sqlite3_stmt *dv = 0;
  if (w->id % 3 == 0) CHECK_RC(sqlite3_prepare_v2(db, "PRAGMA data_version", -1, &dv, 0), SQLITE_OK);
  uint64_t seed = mix(cm_seed, (uint64_t)(w->id + 1)) | 1;
  int most = CM_BIG_MIN + L->big_bytes > L->small_bytes ? CM_BIG_MIN + L->big_bytes : L->small_bytes;
  char *val = malloc((size_t)most + 1);
  CHECK(val != 0);
  cm_stmts s[CM_MAXTABLES];
  for (int ti = 0; ti < L->tables; ti++) cm_prepare(db, L->tname[ti], &s[ti]);
  int block = L->keys / CM_THREADS, next_new = 0; /* next key of this thread's block to insert */
  for (int n = 0; n < L->txns; n++) {
    if (L->held_one_in && rnd(&seed) % (uint64_t)L->held_one_in == 0) {
      cm_held_run(w, db, s, val, &seed, n);
      continue;
    }
    if (dv) {
      CHECK_RC(sqlite3_step(dv), SQLITE_ROW);
      CHECK_RC(sqlite3_reset(dv), SQLITE_OK);
    }
    txn *t = &w->t[w->n];
    memset(t, 0, sizeof(*t));
    t->nops = 1 + (int)(rnd(&seed) % CM_MAXOPS);
    int readonly = rnd(&seed) % (uint64_t)L->readonly_one_in == 0;
    tu_exec(db, "BEGIN");
    for (int j = 0; j < t->nops; j++) {
      if (rnd(&seed) % 2) sched_yield(); /* let the snapshots of the threads overlap */
      op *o = &t->ops[j];
      int r = (int)(rnd(&seed) % 100);
      o->k = (int)(rnd(&seed) % (uint64_t)L->keys);
      if (readonly) r = L->write_below + r % (100 - L->write_below);
      /* New keys of the own block where the workload asks: growth in every transaction. */
      if (r < L->new_below && next_new < block) o->k = w->id * block + next_new++;
      int ti = o->k % L->tables;
      if (L->meta_one_in && rnd(&seed) % (uint64_t)L->meta_one_in == 0) {
        o->kind = readonly || rnd(&seed) % 2 ? OP_META_GET : OP_META_SET;
        if (o->kind == OP_META_GET) {
          o->vh = (uint64_t)tu_int(db, "PRAGMA user_version");
        } else {
          char q[64];
          o->vh = (uint64_t)(w->id + 1) * 1000000u + (uint64_t)n * 10u + (uint64_t)j;
          snprintf(q, sizeof q, "PRAGMA user_version = %llu", (unsigned long long)o->vh);
          tu_exec(db, q);
        }
      } else if (r < L->write_below) {
        o->kind = r < L->put_below ? OP_PUT : r < L->upd_below ? OP_UPD : OP_DEL;
        if (o->kind == OP_UPD && r % 3 == 0) {
          o->kind = OP_COPY;
          o->k2 = cm_same_table_key(L, o->k, &seed);
        }
        int len = 0;
        if (o->kind != OP_DEL)
          len = (L->big_table < 0 || ti == L->big_table) && rnd(&seed) % (uint64_t)L->big_one_in == 0
                    ? CM_BIG_MIN + (int)(rnd(&seed) % (uint64_t)L->big_bytes)
                    : 1 + (int)(rnd(&seed) % (uint64_t)L->small_bytes);
        cm_write(db, &s[ti], o, val, len, w->id, n, j);
      } else if (r < L->get_below) {
        cm_get(&s[ti], o);
      } else {
        o->k2 = o->k + (int)(rnd(&seed) % (uint64_t)L->range_width);
        cm_range(&s[ti], o);
      }
    }
    if (L->rebase) cm_declare(db, t);
    int rc = tu_try(db, "COMMIT");
    t->snap = tu_stat(db, MW_STAT_SNAPSHOT_EPOCH);
    t->epoch = tu_stat(db, MW_STAT_COMMIT_EPOCH);
    if (rc == SQLITE_OK) {
      t->committed = 1;
      w->commits++;
    } else if (rc == SQLITE_BUSY_SNAPSHOT) {
      CHECK(sqlite3_get_autocommit(db));
      t->epoch = 0;
      w->refused++;
    } else {
      fprintf(stderr, "commit: %d %s\n", rc, sqlite3_errmsg(db));
      exit(1);
    }
    w->n++;
  }
  for (int ti = 0; ti < L->tables; ti++) cm_finalize(&s[ti]);
  sqlite3_finalize(dv);
  free(val);
  w->reloc = tu_stat(db, MW_STAT_RELOCATIONS);
  w->merges = tu_stat(db, MW_STAT_MERGES);
  w->refused_reloc = tu_stat(db, MW_STAT_RELOCATE_REFUSED);
  w->rebases = tu_stat(db, MW_STAT_REBASES);
  w->cw = tu_stat(db, MW_STAT_CONFLICT_WRITE);
  w->cr = tu_stat(db, MW_STAT_CONFLICT_READ);
  w->cs = tu_stat(db, MW_STAT_CONFLICT_SCHEMA);
  w->compactions = tu_stat(db, MW_STAT_COMPACTIONS);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

/* Replays t's operations over a copy of the model; 1 when every read matches. */
static int check_reads(cm_run *r, const txn *t, int apply) {
  const cm_load *L = r->L;
  uint64_t *s = r->scratch;
  memcpy(s, r->model, sizeof(uint64_t) * (size_t)(L->keys + 1));
  for (int j = 0; j < t->nops; j++) {
    const op *o = &t->ops[j];
    switch (o->kind) {
      case OP_PUT: s[o->k] = o->vh; break;
      case OP_UPD: if (s[o->k]) s[o->k] = o->vh; break;
      case OP_DEL: s[o->k] = 0; break;
      case OP_COPY: if (s[o->k2]) s[o->k] = s[o->k2]; break;
      case OP_META_GET: if (s[L->keys] != o->vh) return 0; break;
      case OP_META_SET: s[L->keys] = o->vh; break;
      case OP_GET: if (s[o->k] != o->vh) return 0; break;
      case OP_RANGE: {
        uint64_t h = 0;
        for (int k = o->k; k <= o->k2 && k < L->keys; k++)
          if (k % L->tables == o->k % L->tables && s[k]) h = mix(mix(h, (uint64_t)k), s[k]);
        if (h != o->rh) return 0;
        break;
      }
    }
  }
  if (apply) memcpy(r->model, s, sizeof(uint64_t) * (size_t)(L->keys + 1));
  return 1;
}

typedef struct ref { txn *t; int64_t at; } ref;
static int cmp_ref(const void *a, const void *b) {
  const ref *x = a, *y = b;
  return x->at < y->at ? -1 : x->at > y->at;
}

/* Every transaction checked against the model in epoch order; sets r->bad. */
static void cm_replay(cm_run *r, int64_t base) {
  /* Checks ordered by the epoch whose state they must match; commits apply after
  ** the checks at their epoch - 1 and before those at their epoch. */
  ref *checks = malloc(sizeof(ref) * (size_t)r->total);
  ref *cm = malloc(sizeof(ref) * (size_t)r->total);
  CHECK(checks != 0 && cm != 0);
  int nc = 0, ncm = 0;
  for (int i = 0; i < CM_THREADS; i++)
    for (int j = 0; j < r->w[i].n; j++) {
      txn *t = &r->w[i].t[j];
      if (t->committed && t->epoch > 0) {
        cm[ncm++] = (ref){ t, t->epoch };
        checks[nc++] = (ref){ t, t->epoch - 1 };
      } else {
        CHECK(t->snap >= base);
        checks[nc++] = (ref){ t, t->snap };
      }
    }
  qsort(cm, (size_t)ncm, sizeof(ref), cmp_ref);
  qsort(checks, (size_t)nc, sizeof(ref), cmp_ref);
  for (int i = 1; i < ncm; i++) CHECK(cm[i].at != cm[i - 1].at); /* unique epochs */
  int bad = 0, ci = 0;
  for (int i = 0; i < nc; i++) {
    while (ci < ncm && cm[ci].at <= checks[i].at) check_reads(r, cm[ci++].t, 1);
    txn *t = checks[i].t;
    if (t->committed && t->epoch > 0) {
      /* Serializable: it must read the state right before its epoch... */
      CHECK(t->snap < t->epoch);
      if (!check_reads(r, t, 0)) {
        if (bad++ < 5) fprintf(stderr, "commit at epoch %lld (snapshot %lld) read a wrong state\n",
                               (long long)t->epoch, (long long)t->snap);
      }
    } else if (!check_reads(r, t, 0)) {
      if (bad++ < 5) fprintf(stderr, "%s transaction at snapshot %lld read a wrong state\n",
                             t->committed ? "read-only" : "refused", (long long)t->snap);
    }
  }
  while (ci < ncm) check_reads(r, cm[ci++].t, 1);
  free(checks);
  free(cm);
  r->bad = bad;
}

/* The final tables against the model (sets r->final_ok, each key once and in its own
** table), integrity through the engine, then through a stock connection. */
static void cm_final(cm_run *r, sqlite3 *setup, const char *path) {
  const cm_load *L = r->L;
  uint64_t *seen = r->scratch;
  memset(seen, 0, sizeof(uint64_t) * (size_t)L->keys);
  int dup = 0;
  for (int ti = 0; ti < L->tables; ti++) {
    char q[100];
    sqlite3_stmt *st = 0;
    snprintf(q, sizeof q, "SELECT k, v FROM %s ORDER BY k", L->tname[ti]);
    CHECK_RC(sqlite3_prepare_v2(setup, q, -1, &st, 0), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      int k = sqlite3_column_int(st, 0);
      if (k < 0 || k >= L->keys || k % L->tables != ti || seen[k]) dup++;
      else seen[k] = fnv(sqlite3_column_text(st, 1), (size_t)sqlite3_column_bytes(st, 1));
    }
    sqlite3_finalize(st);
  }
  CHECK(dup == 0);
  r->final_ok = memcmp(seen, r->model, sizeof(uint64_t) * (size_t)L->keys) == 0 &&
                (uint64_t)tu_int(setup, "PRAGMA user_version") == r->model[L->keys];
  r->compactions = tu_stat(setup, MW_STAT_COMPACTIONS);
  if (!r->final_ok) fprintf(stderr, "final state differs from the model\n");
  CHECK(tu_integrity_ok(setup));
  CHECK_RC(sqlite3_close(setup), SQLITE_OK);

  /* And once more from the compacted file through a stock connection. */
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
}

/* Runs the workload L and checks it; the caller prints r's counts, calls cm_done and
** asserts on r. */
static void cm_check_with(cm_run *r, const cm_load *L, const char *params);
static void cm_check(cm_run *r, const cm_load *L) {
  /* A small log by default: compactions and garbage collection run during the
  ** workload, under the readers. */
  const char *params = getenv("MW_TEST_PARAMS");
  cm_check_with(r, L, params ? params : "mw_log_max_mb=1");
}

/* MW_TEST_SEED sets the seed; the run prints it. */
static void cm_seed_from_env(void) {
  const char *e = getenv("MW_TEST_SEED");
  if (e && *e) cm_seed = strtoull(e, 0, 0);
}

/* The first half of a check: the database with its tables and first row, the model,
** the workers (not started); *pBase is the epoch after which the workload commits.
** The caller runs the workers (threads, or processes: test_mp_checker) and then
** cm_end. */
static void cm_begin(cm_run *r, const cm_load *L, const char *params, sqlite3 **pSetup,
                     const char **pPath, int64_t *pBase) {
  memset(r, 0, sizeof(*r));
  r->L = L;
  r->model = calloc((size_t)L->keys + 1, sizeof(uint64_t));
  r->scratch = calloc((size_t)L->keys + 1, sizeof(uint64_t));
  CHECK(r->model != 0 && r->scratch != 0 && L->tables <= CM_MAXTABLES);
  const char *path = tu_db_path(L->dir, "c.db");
  printf("%s: seed %llu (MW_TEST_SEED=%llu replays the workload), params %s\n", L->dir,
         (unsigned long long)cm_seed, (unsigned long long)cm_seed, params);
  fflush(stdout);
  sqlite3 *setup = tu_open(path, params);
  tu_exec(setup, L->schema);
  tu_exec(setup, "CREATE TABLE cm_hold(x); INSERT INTO cm_hold VALUES(1), (2)");
  char sql[100];
  snprintf(sql, sizeof sql, "INSERT INTO %s VALUES(0, 'zero')", L->tname[0]);
  tu_exec(setup, sql);
  tu_exec(setup, "PRAGMA user_version=1");
  int64_t base = tu_stat(setup, MW_STAT_COMMIT_EPOCH);
  CHECK(base > 0);
  r->model[0] = fnv("zero", 4);
  r->model[L->keys] = 1; /* user_version */

  for (int i = 0; i < CM_THREADS; i++) {
    cm_worker *w = &r->w[i];
    w->L = L;
    w->id = i;
    w->path = path;
    w->params = params;
    w->t = calloc((size_t)L->txns * CM_MAXOPS, sizeof(txn));
    CHECK(w->t != 0);
  }
  *pSetup = setup;
  *pPath = path;
  *pBase = base;
}

/* The second half: the workers' counts summed, the replay, the final state. */
static void cm_end(cm_run *r, sqlite3 *setup, const char *path, int64_t base) {
  for (int i = 0; i < CM_THREADS; i++) {
    cm_worker *w = &r->w[i];
    r->total += w->n;
    r->commits += w->commits;
    r->refused += w->refused;
    r->held += w->held;
    r->cw += w->cw;
    r->cr += w->cr;
    r->cs += w->cs;
    r->reloc += w->reloc;
    r->merges += w->merges;
    r->refused_reloc += w->refused_reloc;
    r->rebases += w->rebases;
  }
  cm_replay(r, base);
  cm_final(r, setup, path);
}

static void cm_check_with(cm_run *r, const cm_load *L, const char *params) {
  sqlite3 *setup;
  const char *path;
  int64_t base;
  cm_begin(r, L, params, &setup, &path, &base);
  tu_threads(CM_THREADS, cm_worker_run, r->w, sizeof r->w[0]);
  cm_end(r, setup, path, base);
}

static void cm_done(cm_run *r) {
  for (int i = 0; i < CM_THREADS; i++) free(r->w[i].t);
  free(r->model);
  free(r->scratch);
  tu_rmdir();
}
#endif
