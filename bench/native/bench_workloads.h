/*
** bench_workloads.h: the workloads of the benchmark (docs: shared design bench.md):
** the schema, one transaction of each workload on one writer's connection, and
** the check that proves nothing was lost after a run.
** A transaction attempt returns SQLITE_OK once committed, a SQLITE_BUSY* code when
** it was refused (the caller rolls back and retries) or another code, which is fatal.
** Never opens connections itself except the stock one of schema_create/validate.
*/
#ifndef BENCH_WORKLOADS_H
#define BENCH_WORKLOADS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench_util.h"
#include "multiwriter.h"
#include "sqlite3.h"

enum { WL_BULK, WL_SAMEPAGE, WL_HOT, WL_TRANSFER, WL_SLOW, WL_READ, WL_COUNT };
static const char *const wl_names[WL_COUNT] = { "bulk", "samepage", "hot", "transfer", "slow", "read" };

#define BULK_ROWS 100     /* rows per bulk transaction */
#define NACCT 1000        /* accounts of the transfer workload */
#define INIT_BALANCE 1000 /* starting balance of every account */
#define HOT_ROWS 4        /* the hot workload picks one of r0..r3 */
#define SLOW_WORK_NS 2000000u

/* Rows of ct: max(writers + 1, 1100), small enough that many share a page. */
static int ct_rows(int writers) { return writers + 1 > 1100 ? writers + 1 : 1100; }

/* Runs a whole SQL script on db; on failure writes the message into err. */
static int exec_sql(sqlite3 *db, const char *sql, char *err, size_t cap) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) snprintf(err, cap, "%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
  sqlite3_free(msg);
  return rc;
}

/* Creates the database at path with a stock connection (default VFS): WAL, the
** three tables, ct rows r0..r(N-1) and NACCT accounts. The file must not exist. */
static int schema_create(const char *path, int writers, char *err, size_t cap) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, cap, "cannot create %s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return rc;
  }
  rc = exec_sql(db,
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                "CREATE TABLE bk(id INTEGER PRIMARY KEY, v TEXT);"
                "CREATE TABLE ct(id TEXT PRIMARY KEY, a INT, b INT, c INT, d INT, pad BLOB);"
                "CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INT);"
                "BEGIN;",
                err, cap);
  sqlite3_stmt *ins = NULL;
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, "INSERT INTO ct VALUES(?1, 0, 0, 0, 0, zeroblob(16))", -1, &ins, NULL);
  for (int i = 0; rc == SQLITE_OK && i < ct_rows(writers); i++) {
    char id[32];
    snprintf(id, sizeof id, "r%d", i);
    sqlite3_bind_text(ins, 1, id, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  ins = NULL;
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, "INSERT INTO acct VALUES(?1, ?2)", -1, &ins, NULL);
  for (int i = 1; rc == SQLITE_OK && i <= NACCT; i++) {
    sqlite3_bind_int(ins, 1, i);
    sqlite3_bind_int(ins, 2, INIT_BALANCE);
    rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  if (rc == SQLITE_OK) rc = exec_sql(db, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE);", err, cap);
  else if (!err[0]) snprintf(err, cap, "schema: %s", sqlite3_errmsg(db));
  int crc = sqlite3_close(db);
  if (rc == SQLITE_OK && crc != SQLITE_OK) {
    snprintf(err, cap, "schema: close failed: %s", sqlite3_errstr(crc));
    rc = crc;
  }
  return rc;
}

/* One single-value query; returns SQLITE_OK and *out, or an error. */
static int query_i64(sqlite3 *db, const char *sql, int64_t *out, char *err, size_t cap) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      *out = sqlite3_column_int64(st, 0);
      rc = SQLITE_OK;
    }
  }
  if (rc != SQLITE_OK) snprintf(err, cap, "%s: %s", sql, sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

/* After a run, with a stock connection once every writer closed: integrity_check,
** then the workload's check against the committed count. Returns 0 when both
** pass; otherwise -1 with the reason in err. `what` receives a short description. */
static int validate(const char *path, int wl, uint64_t committed, char *what, size_t wcap, char *err, size_t cap) {
  sqlite3 *db = NULL;
  int ok = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    snprintf(err, cap, "validate: cannot open %s: %s", path, sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK) {
    snprintf(err, cap, "integrity_check: %s", sqlite3_errmsg(db));
    goto done;
  }
  int rc = sqlite3_step(st);
  const char *res = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
  if (res == NULL || strcmp(res, "ok") != 0) {
    snprintf(err, cap, "integrity_check failed: %s", res ? res : sqlite3_errmsg(db));
    goto done;
  }
  int64_t got = 0, want = 0;
  const char *sql = NULL;
  switch (wl) {
    case WL_BULK: sql = "SELECT count(*) FROM bk"; want = (int64_t)committed * BULK_ROWS; break;
    case WL_SAMEPAGE:
    case WL_HOT:
    case WL_SLOW: sql = "SELECT sum(a) FROM ct"; want = (int64_t)committed; break;
    case WL_TRANSFER: sql = "SELECT sum(balance) FROM acct"; want = (int64_t)NACCT * INIT_BALANCE; break;
    case WL_READ: sql = "SELECT sum(a) FROM ct"; want = 0; break; /* nothing may change */
  }
  if (query_i64(db, sql, &got, err, cap) != SQLITE_OK) goto done;
  if (got != want) {
    snprintf(err, cap, "check failed: %s = %" PRId64 ", expected %" PRId64, sql, got, want);
    goto done;
  }
  if (wl == WL_TRANSFER) {
    int64_t n = 0;
    if (query_i64(db, "SELECT count(*) FROM acct", &n, err, cap) != SQLITE_OK) goto done;
    if (n != NACCT) {
      snprintf(err, cap, "check failed: %" PRId64 " accounts, expected %d", n, NACCT);
      goto done;
    }
  }
  snprintf(what, wcap, "integrity_check ok; %s = %" PRId64, sql + 7, got);
  ok = 0;
done:
  sqlite3_finalize(st);
  if (sqlite3_close(db) != SQLITE_OK && ok == 0) {
    snprintf(err, cap, "validate: close failed");
    ok = -1;
  }
  return ok;
}

/* One writer's prepared state. */
typedef struct {
  sqlite3 *db;
  int wl, writer, nrows;
  sqlite3_stmt *begin, *commit, *rollback, *s1, *s2, *s3;
  rng_t rng;
  uint64_t seq;  /* transactions this writer committed: the bulk key space */
  int a, b;      /* the rows / accounts of the current transaction */
  int64_t amount;
  char text[72]; /* the 64-character bulk text */
  int declare;   /* mw_rebase=1: declare the rows touched before COMMIT (every workload
                    touches only rows it writes, by key) */
  int64_t touched[BULK_ROWS]; /* their rowids, this transaction */
  int ntouched;
} wctx_t;

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
  return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
}

/* Prepares the statements of workload wl; begin_sql is the variant's BEGIN. */
static int wl_prepare(wctx_t *c, const char *begin_sql) {
  int rc = prep(c->db, begin_sql, &c->begin);
  if (rc == SQLITE_OK) rc = prep(c->db, "COMMIT", &c->commit);
  if (rc == SQLITE_OK) rc = prep(c->db, "ROLLBACK", &c->rollback);
  if (rc != SQLITE_OK) return rc;
  switch (c->wl) {
    case WL_BULK: rc = prep(c->db, "INSERT INTO bk(id, v) VALUES(?1, ?2)", &c->s1); break;
    case WL_SAMEPAGE:
    case WL_HOT: rc = prep(c->db, "UPDATE ct SET a = a + 1 WHERE id = ?1", &c->s1); break;
    case WL_TRANSFER:
      rc = prep(c->db, "SELECT balance FROM acct WHERE id = ?1", &c->s1);
      if (rc == SQLITE_OK) rc = prep(c->db, "UPDATE acct SET balance = ?2 WHERE id = ?1", &c->s2);
      break;
    case WL_SLOW:
      rc = prep(c->db, "SELECT a FROM ct WHERE id = ?1", &c->s1);
      if (rc == SQLITE_OK) rc = prep(c->db, "UPDATE ct SET a = ?2 WHERE id = ?1", &c->s2);
      break;
    case WL_READ: rc = prep(c->db, "SELECT a, b, c, d, pad FROM ct WHERE id = ?1", &c->s1); break;
  }
  return rc;
}

static void wl_finalize(wctx_t *c) {
  sqlite3_stmt **all[] = { &c->begin, &c->commit, &c->rollback, &c->s1, &c->s2, &c->s3 };
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    sqlite3_finalize(*all[i]);
    *all[i] = NULL;
  }
}

/* Picks what the next transaction touches; its retries keep the same choice. */
static void wl_choose(wctx_t *c) {
  switch (c->wl) {
    case WL_HOT: c->a = (int)rng_below(&c->rng, HOT_ROWS); break;
    case WL_TRANSFER:
      c->a = 1 + (int)rng_below(&c->rng, NACCT);
      do c->b = 1 + (int)rng_below(&c->rng, NACCT);
      while (c->b == c->a);
      c->amount = 1 + (int64_t)rng_below(&c->rng, 100);
      break;
    case WL_READ: c->a = (int)rng_below(&c->rng, (uint64_t)c->nrows); break;
    default: c->a = c->writer; break;
  }
}

/* Steps st to completion (rows ignored); returns SQLITE_OK or the extended error. */
static int run_stmt(sqlite3 *db, sqlite3_stmt *st) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(db);
}

/* Steps a one-row query; *out gets column 0. */
static int query_one(sqlite3 *db, sqlite3_stmt *st, int64_t *out) {
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    rc = sqlite3_step(st);
  }
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return SQLITE_OK;
  return rc == SQLITE_ROW ? SQLITE_ERROR : sqlite3_extended_errcode(db);
}

static void bind_row(sqlite3_stmt *st, int row) {
  char id[32];
  snprintf(id, sizeof id, "r%d", row);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
}

/* A statement that must change exactly one row. */
static int update_one(sqlite3 *db, sqlite3_stmt *st) {
  int rc = run_stmt(db, st);
  if (rc == SQLITE_OK && sqlite3_changes(db) != 1) return SQLITE_NOTFOUND;
  return rc;
}

/* The rowid of ct's row r<k>: schema_create inserts r0, r1, ... in order. */
static int64_t ct_rowid(int k) { return (int64_t)k + 1; }

static void touch(wctx_t *c, int64_t rowid) {
  if (c->ntouched < BULK_ROWS) c->touched[c->ntouched++] = rowid;
}

/* COMMIT, after the declaration of a rebasing writer: the rows its point statements
** read and wrote. */
static int commit_tx(wctx_t *c) {
  if (c->declare) {
    int rc = mw_rebase_rows_declare(c->db, 0, c->touched, c->ntouched);
    if (rc != SQLITE_OK) return rc;
  }
  return run_stmt(c->db, c->commit);
}

/* One attempt of the current transaction. On a non-OK return the caller rolls
** back what is still open. */
static int wl_attempt(wctx_t *c) {
  sqlite3 *db = c->db;
  int rc = SQLITE_OK;
  c->ntouched = 0;
  switch (c->wl) {
    case WL_BULK:
      rc = run_stmt(db, c->begin);
      for (int i = 0; rc == SQLITE_OK && i < BULK_ROWS; i++) {
        int64_t key = ((int64_t)c->writer << 32) | (int64_t)(c->seq * BULK_ROWS + (uint64_t)i);
        snprintf(c->text, sizeof c->text, "w%06d-n%010" PRIu64 "-i%03d-%s", c->writer, c->seq, i,
                 "abcdefghijklmnopqrstuvwxyz0123456789");
        c->text[64] = 0;
        sqlite3_bind_int64(c->s1, 1, key);
        sqlite3_bind_text(c->s1, 2, c->text, 64, SQLITE_STATIC);
        touch(c, key);
        rc = run_stmt(db, c->s1);
      }
      if (rc == SQLITE_OK) rc = commit_tx(c);
      break;
    case WL_SAMEPAGE:
    case WL_HOT:
      /* One statement, in autocommit mode; a rebasing writer runs it in a transaction
      ** (a declaration belongs between BEGIN and COMMIT). */
      if (c->declare) rc = run_stmt(db, c->begin);
      bind_row(c->s1, c->a);
      touch(c, ct_rowid(c->a));
      if (rc == SQLITE_OK) rc = update_one(db, c->s1);
      if (rc == SQLITE_OK && c->declare) rc = commit_tx(c);
      break;
    case WL_TRANSFER: {
      int64_t ba = 0, bb = 0;
      rc = run_stmt(db, c->begin);
      touch(c, c->a); /* acct's id is its rowid */
      touch(c, c->b);
      sqlite3_bind_int(c->s1, 1, c->a);
      if (rc == SQLITE_OK) rc = query_one(db, c->s1, &ba);
      sqlite3_bind_int(c->s1, 1, c->b);
      if (rc == SQLITE_OK) rc = query_one(db, c->s1, &bb);
      int64_t amt = c->amount < ba ? c->amount : (ba > 0 ? ba : 0);
      /* Write values computed from what was read: a lost update changes the sum. */
      sqlite3_bind_int(c->s2, 1, c->a);
      sqlite3_bind_int64(c->s2, 2, ba - amt);
      if (rc == SQLITE_OK) rc = update_one(db, c->s2);
      sqlite3_bind_int(c->s2, 1, c->b);
      sqlite3_bind_int64(c->s2, 2, bb + amt);
      if (rc == SQLITE_OK) rc = update_one(db, c->s2);
      if (rc == SQLITE_OK) rc = commit_tx(c);
      break;
    }
    case WL_SLOW: {
      int64_t a = 0;
      rc = run_stmt(db, c->begin);
      touch(c, ct_rowid(c->a));
      bind_row(c->s1, c->a);
      if (rc == SQLITE_OK) rc = query_one(db, c->s1, &a);
      if (rc == SQLITE_OK) sleep_ns(SLOW_WORK_NS); /* the application's work */
      bind_row(c->s2, c->a);
      sqlite3_bind_int64(c->s2, 2, a + 1);
      if (rc == SQLITE_OK) rc = update_one(db, c->s2);
      if (rc == SQLITE_OK) rc = commit_tx(c);
      break;
    }
    case WL_READ: {
      bind_row(c->s1, c->a);
      int r = sqlite3_step(c->s1);
      if (r == SQLITE_ROW) {
        (void)sqlite3_column_int64(c->s1, 0);
        r = sqlite3_step(c->s1);
      } else if (r == SQLITE_DONE) {
        r = SQLITE_NOTFOUND; /* every key read exists */
      }
      sqlite3_reset(c->s1);
      rc = r == SQLITE_DONE ? SQLITE_OK : (r == SQLITE_NOTFOUND ? r : sqlite3_extended_errcode(db));
      break;
    }
  }
  return rc;
}

#endif
