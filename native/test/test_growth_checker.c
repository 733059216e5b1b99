/* The randomized checker of the engine (test_engine_checker.c), made growth-heavy
** for relocation and the interior merge (growth.c): 8 threads insert mostly new
** keys, each into its own block, so that leaves and interior pages split and the
** file grows in every transaction, into three tables: a rowid table with an index
** on its text, a rowid table of blobs up to 24 KB (overflow chains), and a WITHOUT
** ROWID table; updates and deletes free pages. Every transaction records its
** snapshot and commit epochs and what it read; the commits are replayed in epoch
** order on a model: a committed transaction must have read the state just before
** its epoch, a refused or read-only one the state at its snapshot; the final tables
** must equal the model; integrity_check passes through the engine and, after the
** last close, through a stock connection. Relocations and merges must happen. */
#include "test_engine_util.h"
#include <pthread.h>
#include <sched.h>

#define THREADS 8
#define KEYS 6000
#define TABLES 3
#define BLOCK (KEYS / THREADS)
#define TXNS_PER_THREAD 200
#define MAXOPS 6

static const char *const tname[TABLES] = { "ra", "rb", "wr" };

enum { OP_PUT, OP_UPD, OP_DEL, OP_GET, OP_RANGE };

typedef struct op {
  int kind, k, k2;
  uint64_t vh;       /* PUT/UPD: hash of the value written; GET: hash read (0 = none) */
  uint64_t rh;       /* RANGE: hash of what was read */
} op;

typedef struct txn {
  int nops;
  op ops[MAXOPS];
  int committed;
  int64_t snap, epoch;
} txn;

typedef struct worker {
  int id;
  char path[300];
  const char *params;
  txn *t;
  int n;
  int commits, refused;
  int64_t cw, cr, cs, reloc, merges, refused_reloc;
} worker;

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

static void *run(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, w->params);
  /* Half the threads acknowledge once written (NORMAL), half once synced (FULL). */
  if (w->id % 2) tu_exec(db, "PRAGMA synchronous=NORMAL");
  uint64_t seed = 0x1234567ull * (uint64_t)(w->id + 1);
  char *val = malloc(25000);
  sqlite3_stmt *put[TABLES], *upd[TABLES], *del[TABLES], *gets[TABLES], *rngs[TABLES];
  for (int ti = 0; ti < TABLES; ti++) {
    char q[200];
    snprintf(q, sizeof q, "INSERT INTO %s(k,v) VALUES(?1,?2) ON CONFLICT(k) DO UPDATE SET v=excluded.v", tname[ti]);
    CHECK_RC(sqlite3_prepare_v2(db, q, -1, &put[ti], 0), SQLITE_OK);
    snprintf(q, sizeof q, "UPDATE %s SET v=?2 WHERE k=?1", tname[ti]);
    CHECK_RC(sqlite3_prepare_v2(db, q, -1, &upd[ti], 0), SQLITE_OK);
    snprintf(q, sizeof q, "DELETE FROM %s WHERE k=?1", tname[ti]);
    CHECK_RC(sqlite3_prepare_v2(db, q, -1, &del[ti], 0), SQLITE_OK);
    snprintf(q, sizeof q, "SELECT v FROM %s WHERE k=?1", tname[ti]);
    CHECK_RC(sqlite3_prepare_v2(db, q, -1, &gets[ti], 0), SQLITE_OK);
    snprintf(q, sizeof q, "SELECT k, v FROM %s WHERE k BETWEEN ?1 AND ?2 ORDER BY k", tname[ti]);
    CHECK_RC(sqlite3_prepare_v2(db, q, -1, &rngs[ti], 0), SQLITE_OK);
  }
  int next_new = 0; /* next key of this thread's block to insert */
  for (int n = 0; n < TXNS_PER_THREAD; n++) {
    txn *t = &w->t[w->n];
    memset(t, 0, sizeof(*t));
    t->nops = 1 + (int)(rnd(&seed) % MAXOPS);
    int readonly = rnd(&seed) % 8 == 0;
    tu_exec(db, "BEGIN");
    int failed = 0;
    for (int j = 0; j < t->nops && !failed; j++) {
      if (rnd(&seed) % 2) sched_yield(); /* let the snapshots of the threads overlap */
      op *o = &t->ops[j];
      int r = (int)(rnd(&seed) % 100);
      o->k = (int)(rnd(&seed) % KEYS);
      if (readonly) r = 85 + r % 15;
      /* Mostly new keys of the own block: growth in every transaction. */
      if (r < 65 && next_new < BLOCK) o->k = w->id * BLOCK + next_new++;
      int ti = o->k % TABLES;
      sqlite3_stmt *st;
      if (r < 85) {
        o->kind = r < 72 ? OP_PUT : r < 80 ? OP_UPD : OP_DEL;
        st = o->kind == OP_PUT ? put[ti] : o->kind == OP_UPD ? upd[ti] : del[ti];
        sqlite3_bind_int(st, 1, o->k);
        if (o->kind != OP_DEL) {
          int len = ti == 1 && rnd(&seed) % 4 == 0 ? 2000 + (int)(rnd(&seed) % 22000)
                                                   : 1 + (int)(rnd(&seed) % 600);
          make_value(val, len, w->id, n, j);
          o->vh = fnv(val, (size_t)len);
          sqlite3_bind_text(st, 2, val, len, SQLITE_TRANSIENT);
        }
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) { fprintf(stderr, "write step: %d %s\n", rc, sqlite3_errmsg(db)); exit(1); }
      } else if (r < 93) {
        sqlite3_stmt *get = gets[ti];
        o->kind = OP_GET;
        sqlite3_bind_int(get, 1, o->k);
        int rc = sqlite3_step(get);
        if (rc == SQLITE_ROW) o->vh = fnv(sqlite3_column_text(get, 0), (size_t)sqlite3_column_bytes(get, 0));
        else if (rc != SQLITE_DONE) { fprintf(stderr, "get: %d\n", rc); exit(1); }
        sqlite3_reset(get);
      } else {
        sqlite3_stmt *rng = rngs[ti];
        o->kind = OP_RANGE;
        o->k2 = o->k + (int)(rnd(&seed) % 30);
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
    }
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
  for (int ti = 0; ti < TABLES; ti++) {
    sqlite3_finalize(put[ti]);
    sqlite3_finalize(upd[ti]);
    sqlite3_finalize(del[ti]);
    sqlite3_finalize(gets[ti]);
    sqlite3_finalize(rngs[ti]);
  }
  w->reloc = tu_stat(db, MW_STAT_RELOCATIONS);
  w->merges = tu_stat(db, MW_STAT_MERGES);
  w->refused_reloc = tu_stat(db, MW_STAT_RELOCATE_REFUSED);
  free(val);
  w->cw = tu_stat(db, MW_STAT_CONFLICT_WRITE);
  w->cr = tu_stat(db, MW_STAT_CONFLICT_READ);
  w->cs = tu_stat(db, MW_STAT_CONFLICT_SCHEMA);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static uint64_t model[KEYS];

/* Replays t's operations over a copy of the model; 1 when every read matches. */
static int check_reads(const txn *t, uint64_t *state, int apply) {
  uint64_t s[KEYS];
  memcpy(s, state, sizeof s);
  for (int j = 0; j < t->nops; j++) {
    const op *o = &t->ops[j];
    switch (o->kind) {
      case OP_PUT: s[o->k] = o->vh; break;
      case OP_UPD: if (s[o->k]) s[o->k] = o->vh; break;
      case OP_DEL: s[o->k] = 0; break;
      case OP_GET: if (s[o->k] != o->vh) return 0; break;
      case OP_RANGE: {
        uint64_t h = 0;
        for (int k = o->k; k <= o->k2 && k < KEYS; k++)
          if (k % TABLES == o->k % TABLES && s[k]) h = mix(mix(h, (uint64_t)k), s[k]);
        if (h != o->rh) return 0;
        break;
      }
    }
  }
  if (apply) memcpy(state, s, sizeof s);
  return 1;
}

typedef struct ref { txn *t; int64_t at; } ref;
static int cmp_ref(const void *a, const void *b) {
  const ref *x = a, *y = b;
  return x->at < y->at ? -1 : x->at > y->at;
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("growth-checker");
  /* A small log by default: compactions and garbage collection run during the
  ** workload, under the readers. */
  const char *params = getenv("MW_TEST_PARAMS");
  if (params == 0) params = "mw_log_max_mb=1";
  char path[300];
  snprintf(path, sizeof path, "%s/c.db", dir);
  sqlite3 *setup = tu_open(path, params);
  tu_exec(setup, "CREATE TABLE ra(k INTEGER PRIMARY KEY, v TEXT); CREATE INDEX ra_v ON ra(v);"
                 "CREATE TABLE rb(k INTEGER PRIMARY KEY, v BLOB);"
                 "CREATE TABLE wr(k INTEGER PRIMARY KEY, v TEXT) WITHOUT ROWID");
  tu_exec(setup, "INSERT INTO ra VALUES(0, 'zero')");
  tu_exec(setup, "PRAGMA user_version=1");
  int64_t base = tu_stat(setup, MW_STAT_COMMIT_EPOCH);
  CHECK(base > 0);
  model[0] = fnv("zero", 4);

  worker w[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    snprintf(w[i].path, sizeof w[i].path, "%s", path);
    w[i].params = params;
    w[i].t = calloc(TXNS_PER_THREAD, sizeof(txn));
    CHECK(pthread_create(&th[i], 0, run, &w[i]) == 0);
  }
  int total = 0, commits = 0, refused = 0;
  int64_t cw = 0, cr = 0, cs = 0, reloc = 0, merges = 0, refused_reloc = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], 0);
    total += w[i].n;
    commits += w[i].commits;
    refused += w[i].refused;
    cw += w[i].cw;
    cr += w[i].cr;
    cs += w[i].cs;
    reloc += w[i].reloc;
    merges += w[i].merges;
    refused_reloc += w[i].refused_reloc;
  }

  /* Checks ordered by the epoch whose state they must match; commits apply after
  ** the checks at their epoch - 1 and before those at their epoch. */
  ref *checks = malloc(sizeof(ref) * (size_t)total);
  ref *cm = malloc(sizeof(ref) * (size_t)total);
  int nc = 0, ncm = 0;
  for (int i = 0; i < THREADS; i++)
    for (int j = 0; j < w[i].n; j++) {
      txn *t = &w[i].t[j];
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
    while (ci < ncm && cm[ci].at <= checks[i].at) {
      CHECK(check_reads(cm[ci].t, model, 1) || 1);
      ci++;
    }
    txn *t = checks[i].t;
    if (t->committed && t->epoch > 0) {
      /* Serializable: it must read the state right before its epoch... */
      CHECK(t->snap < t->epoch);
      if (!check_reads(t, model, 0)) {
        if (bad++ < 5) fprintf(stderr, "commit at epoch %lld (snapshot %lld) read a wrong state\n",
                               (long long)t->epoch, (long long)t->snap);
      }
    } else if (!check_reads(t, model, 0)) {
      if (bad++ < 5) fprintf(stderr, "%s transaction at snapshot %lld read a wrong state\n",
                             t->committed ? "read-only" : "refused", (long long)t->snap);
    }
  }
  while (ci < ncm) check_reads(cm[ci++].t, model, 1);

  /* The final state. */
  sqlite3_stmt *st = 0;
  uint64_t seen[KEYS];
  memset(seen, 0, sizeof seen);
  int dup = 0;
  for (int ti = 0; ti < TABLES; ti++) {
    char q[100];
    snprintf(q, sizeof q, "SELECT k, v FROM %s ORDER BY k", tname[ti]);
    CHECK_RC(sqlite3_prepare_v2(setup, q, -1, &st, 0), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      int k = sqlite3_column_int(st, 0);
      if (k < 0 || k >= KEYS || k % TABLES != ti || seen[k]) dup++;
      else seen[k] = fnv(sqlite3_column_text(st, 1), (size_t)sqlite3_column_bytes(st, 1));
    }
    sqlite3_finalize(st);
  }
  CHECK(dup == 0);
  int final_ok = memcmp(seen, model, sizeof seen) == 0;
  int64_t compactions = tu_stat(setup, MW_STAT_COMPACTIONS);
  if (!final_ok) fprintf(stderr, "final state differs from the model\n");
  CHECK(tu_integrity_ok(setup));
  CHECK_RC(sqlite3_close(setup), SQLITE_OK);

  /* And once more from the compacted file through a stock connection. */
  sqlite3 *s = 0;
  CHECK_RC(sqlite3_open_v2(path, &s, SQLITE_OPEN_READWRITE, "unix"), SQLITE_OK);
  CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);

  printf("test_growth_checker: %d transactions, %d commits, %d refused (write %lld, read %lld, "
         "schema %lld), %d wrong reads, %lld compactions, %lld relocations, %lld merges, "
         "%lld relocations refused\n", total, commits, refused, (long long)cw, (long long)cr,
         (long long)cs, bad, (long long)compactions, (long long)reloc, (long long)merges,
         (long long)refused_reloc);
  for (int i = 0; i < THREADS; i++) free(w[i].t);
  free(checks);
  free(cm);
  tu_rmdir();
  CHECK(bad == 0);
  CHECK(final_ok);
  CHECK(commits > total / 10);
  CHECK(reloc > 0 && merges > 0);
  printf("test_growth_checker: ok\n");
  return 0;
}
