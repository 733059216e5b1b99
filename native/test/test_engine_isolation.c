/* Isolation holes found by an outside review (issue 8), each as a deterministic
** scenario: the engine must refuse the commit (SQLITE_BUSY_SNAPSHOT) or commit with
** a serializable result, and integrity_check must stay ok.
**   1. several commits inside one held snapshot: a page the snapshot's own earlier
**      commit created is read from SQLite's cache, never through xRead;
**   1b. a lost update across two commits of one snapshot (validated against the
**      snapshot, not against the snapshot's last commit);
**   2. mw_readcheck=0: balance_quick takes the divider from a right-most leaf it
**      reads but does not write;
**   3. a relocated commit that read page 1's header fields (user_version);
**   4. a merged interior page: a key range read through it (max(id)) changed;
**   5. a transaction writing main and an attached engine database: all or nothing;
**   7. PRAGMA data_version changes only when another connection committed, and
**      keeping it so never lets a stale cached page through;
**   8. the same for a connection alone on its database, which keeps its cache
**      across its own commits without asking for data_version. */
#include "test_engine_util.h"

static const char *path;

static void fresh(const char *sql) {
  sqlite3 *s = tu_open(path, "");
  tu_exec(s, "DROP TABLE IF EXISTS t; DROP TABLE IF EXISTS c; DROP TABLE IF EXISTS r; DROP TABLE IF EXISTS w; VACUUM");
  tu_exec(s, sql);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
}

/* A SELECT kept stepping holds the connection's snapshot open. */
static sqlite3_stmt *hold(sqlite3 *db) {
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT k FROM r", -1, &st, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(st), SQLITE_ROW);
  return st;
}

static int outcome(int rc) {
  if (rc != SQLITE_OK && rc != SQLITE_BUSY_SNAPSHOT) {
    fprintf(stderr, "unexpected result %d\n", rc);
    exit(1);
  }
  return rc;
}

/* 1: A's commits (in one held snapshot) create a new right-most leaf and fill it;
** B appends a small row into it; A's next commit overflows its stale copy of that
** leaf (balance_quick), which it reads from SQLite's cache and never writes. */
static void several_commits(const char *params) {
  fresh("CREATE TABLE r(k); INSERT INTO r VALUES(1),(2);"
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<40)"
        " INSERT INTO t SELECT i, printf('%.900c', 'x') FROM n");
  sqlite3 *a = tu_open(path, params), *b = tu_open(path, params);
  sqlite3_stmt *st = hold(a);
  /* Commit 1: rows 1000.. of 900 bytes fill a new right-most leaf (4 per page). */
  for (int k = 1000; k < 1004; k++) {
    char sql[120];
    snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%d, printf('%%.900c', 'a'))", k);
    tu_exec(a, sql);
  }
  /* The leaf of 1000..1003 is full for A; B's small row still fits in it. */
  tu_exec(b, "INSERT INTO t VALUES(1004, 'small')");
  int rc = outcome(tu_try(a, "INSERT INTO t VALUES(1005, printf('%.900c', 'a'))"));
  sqlite3_finalize(st);
  CHECK(tu_integrity_ok(b));
  CHECK(tu_int(b, "SELECT count(*) FROM t WHERE id=1004") == 1);
  CHECK(tu_int(b, "SELECT count(*) FROM t WHERE id=1005") == (rc == SQLITE_OK));
  CHECK(tu_int(b, "SELECT count(*) FROM t WHERE id>=1000") == 5 + (rc == SQLITE_OK));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* 1b: A's snapshot S; B increments x; A's first commit updates y (placed after B's);
** A's next commits use x as read at S: an increment of x (a lost update) and a copy
** of x into z (a stale read, the page of x only read). Both must be validated against
** S, not against A's own last commit. */
static void lost_update(void) {
  fresh("CREATE TABLE r(k); INSERT INTO r VALUES(1),(2);"
        "CREATE TABLE c(id INTEGER PRIMARY KEY, n INTEGER, pad TEXT);"
        "INSERT INTO c VALUES(1, 0, printf('%.3000c', 'x')), (2, 0, printf('%.3000c', 'y')),"
        " (3, 0, printf('%.3000c', 'z'))");
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  sqlite3_stmt *st = hold(a);
  tu_exec(b, "UPDATE c SET n=n+1 WHERE id=1");
  tu_exec(a, "UPDATE c SET n=n+1 WHERE id=2");
  int copy = outcome(tu_try(a, "UPDATE c SET n=(SELECT n FROM c WHERE id=1) + 10 WHERE id=3"));
  int inc = outcome(tu_try(a, "UPDATE c SET n=n+1 WHERE id=1"));
  sqlite3_finalize(st);
  CHECK(tu_int(b, "SELECT n FROM c WHERE id=1") == (inc == SQLITE_OK ? 2 : 1));
  CHECK(tu_int(b, "SELECT n FROM c WHERE id=2") == 1);
  /* Serially after B, the copy reads 1: 11 or refused, never 10. */
  CHECK(tu_int(b, "SELECT n FROM c WHERE id=3") == (copy == SQLITE_OK ? 11 : 0));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* 2: one transaction (no held snapshot): A reads the right-most leaf, B appends a
** small row into it and commits, A overflows its stale copy (balance_quick). */
static void readcheck_off(void) {
  fresh("CREATE TABLE r(k); INSERT INTO r VALUES(1),(2);"
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<44)"
        " INSERT INTO t SELECT i, printf('%.900c', 'x') FROM n");
  sqlite3 *a = tu_open(path, "mw_readcheck=0"), *b = tu_open(path, "mw_readcheck=0");
  tu_exec(a, "BEGIN");
  CHECK(tu_int(a, "SELECT count(*) FROM t") == 44);
  tu_exec(b, "INSERT INTO t VALUES(100, 'small')");
  tu_exec(a, "INSERT INTO t VALUES(101, printf('%.900c', 'a'))");
  int rc = outcome(tu_try(a, "COMMIT"));
  CHECK(sqlite3_get_autocommit(a) == 1);
  CHECK(tu_integrity_ok(b));
  CHECK(tu_int(b, "SELECT count(*) FROM t") == 45 + (rc == SQLITE_OK));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* 3: T reads user_version and grows the file; U changes user_version first. */
static void relocated_page1(void) {
  fresh("CREATE TABLE r(k); INSERT INTO r VALUES(1),(2);"
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); PRAGMA user_version=0");
  sqlite3 *t = tu_open(path, ""), *u = tu_open(path, "");
  tu_exec(t, "BEGIN");
  CHECK(tu_int(t, "PRAGMA user_version") == 0);
  tu_exec(t, "WITH RECURSIVE g(value) AS (SELECT 1 UNION ALL SELECT value+1 FROM g WHERE value<20) INSERT INTO t SELECT value, printf('%.3000c', 'x') FROM g");
  /* U also grows the file (another table), so that T's commit would be relocated
  ** rather than refused for a write conflict. */
  tu_exec(u, "BEGIN; PRAGMA user_version=7;"
             "INSERT INTO r VALUES(printf('%.3000c', 'u')), (printf('%.3000c', 'v')); COMMIT");
  int64_t relocated = tu_stat(t, MW_STAT_RELOCATIONS), refused = tu_stat(t, MW_STAT_CONFLICT_READ);
  int rc = tu_try(t, "COMMIT");
  CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(t, MW_STAT_RELOCATIONS) == relocated);
  CHECK(tu_stat(t, MW_STAT_CONFLICT_READ) == refused + 1); /* the header fields, not growth */
  CHECK(tu_int(u, "SELECT count(*) FROM t") == 0);
  CHECK(tu_int(u, "PRAGMA user_version") == 7);
  CHECK(tu_integrity_ok(u));
  CHECK_RC(sqlite3_close(t), SQLITE_OK);
  CHECK_RC(sqlite3_close(u), SQLITE_OK);
}

/* 4: T reads max(id) through the root, then splits a middle leaf; U appends at the
** right edge (a new right-most leaf under the same root). Serial orders: T then U
** (T's max is the old max, U's row exists) or U then T (T would have seen U's row).
** T read the old max, so T must not commit after U unless it is refused. */
static void merged_range(void) {
  fresh("CREATE TABLE r(k); INSERT INTO r VALUES(1),(2);"
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<40)"
        " INSERT INTO t SELECT i*10, printf('%.900c', 'x') FROM n");
  sqlite3 *t = tu_open(path, ""), *u = tu_open(path, "");
  tu_exec(t, "BEGIN");
  int64_t mx = tu_int(t, "SELECT max(id) FROM t");
  CHECK(mx == 400);
  /* Rows 101..104 in the middle overflow the leaf of 100..: a split under the root. */
  tu_exec(t, "WITH RECURSIVE g(value) AS (SELECT 1 UNION ALL SELECT value+1 FROM g WHERE value<4) INSERT INTO t SELECT 100 + value, printf('%.900c', 'm') FROM g");
  tu_exec(u, "WITH RECURSIVE g(value) AS (SELECT 1 UNION ALL SELECT value+1 FROM g WHERE value<8) INSERT INTO t SELECT 400 + value, printf('%.900c', 'u') FROM g");
  int rc = outcome(tu_try(t, "COMMIT"));
  if (rc == SQLITE_OK) {
    /* T was placed after U though it did not see U's rows: not serializable. */
    fprintf(stderr, "merged_range: T committed after U with a stale max(id)\n");
    exit(1);
  }
  CHECK(tu_int(u, "SELECT max(id) FROM t") == 408);
  CHECK(tu_integrity_ok(u));
  CHECK_RC(sqlite3_close(t), SQLITE_OK);
  CHECK_RC(sqlite3_close(u), SQLITE_OK);
}

static char path_b[400];

/* 5: c1 moves 10 from main.acct to b.acct; c2 changes b.acct first. */
static void attached(void) {
  fresh("CREATE TABLE r(k); INSERT INTO r VALUES(1)");
  sqlite3 *s = tu_open(path_b, "");
  tu_exec(s, "DROP TABLE IF EXISTS acct; CREATE TABLE acct(id INTEGER PRIMARY KEY, n INTEGER);"
             "INSERT INTO acct VALUES(1, 100)");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  s = tu_open(path, "");
  tu_exec(s, "CREATE TABLE IF NOT EXISTS acct(id INTEGER PRIMARY KEY, n INTEGER);"
             "DELETE FROM acct; INSERT INTO acct VALUES(1, 100)");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);

  char sql[600];
  snprintf(sql, sizeof sql, "ATTACH 'file:%s?vfs=multiwriter' AS b", path_b);
  sqlite3 *c1 = tu_open(path, ""), *c2 = tu_open(path_b, "");
  tu_exec(c1, sql);
  tu_exec(c1, "BEGIN");
  tu_exec(c1, "UPDATE main.acct SET n=n-10 WHERE id=1");
  tu_exec(c1, "UPDATE b.acct SET n=n+10 WHERE id=1");
  tu_exec(c2, "UPDATE acct SET n=n+1 WHERE id=1");
  int rc = tu_try(c1, "COMMIT");
  CHECK_RC(rc, SQLITE_BUSY_SNAPSHOT);
  CHECK(sqlite3_get_autocommit(c1) == 1);
  CHECK(tu_int(c1, "SELECT n FROM main.acct") == 100);
  CHECK(tu_int(c1, "SELECT n FROM b.acct") == 101);
  /* The retry commits both halves. */
  tu_exec(c1, "BEGIN; UPDATE main.acct SET n=n-10; UPDATE b.acct SET n=n+10; COMMIT");
  CHECK(tu_int(c2, "SELECT n FROM acct") == 111);
  sqlite3 *m = tu_open(path, "");
  CHECK(tu_int(m, "SELECT n FROM acct") == 90);
  CHECK_RC(sqlite3_close(m), SQLITE_OK);

  /* The same file under a second name: never half committed. */
  snprintf(sql, sizeof sql, "ATTACH 'file:%s?vfs=multiwriter' AS again", path);
  tu_exec(c1, sql);
  rc = tu_try(c1, "BEGIN; UPDATE main.acct SET n=n-1; UPDATE again.acct SET n=n-1; COMMIT");
  if (rc != SQLITE_OK) tu_try(c1, "ROLLBACK");
  CHECK(sqlite3_get_autocommit(c1) == 1);
  int64_t n = tu_int(c1, "SELECT n FROM main.acct");
  CHECK(rc == SQLITE_OK ? n == 88 : n == 90);
  CHECK_RC(sqlite3_close(c1), SQLITE_OK);
  CHECK_RC(sqlite3_close(c2), SQLITE_OK);
}

/* 7: data_version: unchanged across reads when nobody committed, changed by another
** connection's commit, unchanged by the connection's own commits (as in stock
** SQLite). A connection that prepared PRAGMA data_version keeps SQLite's cache
** across its own write transactions (lane.c, "warm transactions"). */
static void data_version(void) {
  fresh("CREATE TABLE r(k); INSERT INTO r VALUES(1)");
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  sqlite3_stmt *dv = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "PRAGMA data_version", -1, &dv, 0), SQLITE_OK);
  int64_t v[10];
  for (int i = 0; i < 10; i++) {
    if (i == 2) CHECK(tu_int(a, "SELECT count(*) FROM r") == 1);
    if (i == 3) tu_exec(b, "INSERT INTO r VALUES(2)");
    if (i == 5) tu_exec(a, "INSERT INTO r VALUES(3)");
    if (i == 6) tu_exec(a, "BEGIN; INSERT INTO r VALUES(4); UPDATE r SET k = k; COMMIT");
    if (i == 7) CHECK(tu_int(a, "SELECT count(*) FROM r") == 4);
    if (i == 9) tu_exec(b, "DELETE FROM r WHERE k = 4");
    CHECK_RC(sqlite3_step(dv), SQLITE_ROW);
    v[i] = sqlite3_column_int64(dv, 0);
    CHECK_RC(sqlite3_reset(dv), SQLITE_OK);
  }
  CHECK(v[1] == v[0]);  /* nothing happened */
  CHECK(v[2] == v[1]);  /* a read */
  CHECK(v[3] != v[2]);  /* another connection committed */
  CHECK(v[4] == v[3]);
  CHECK(v[5] == v[4]);  /* its own commit */
  CHECK(v[6] == v[5]);  /* its own transaction */
  CHECK(v[8] == v[7]);
  CHECK(v[9] != v[8]);  /* another connection committed after its own commits */
  CHECK(tu_int(a, "SELECT count(*) FROM r") == 3);
  sqlite3_finalize(dv);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* 7a: a connection that polls data_version and commits 3,000 times in a row keeps
** its private WAL across its commits: SQLite checkpoints it (the engine drops those
** writes) and restarts it at its next write; every row stays, from both sides. At
** synchronous=NORMAL too, where a lone lane goes cold before SQLite's checkpoint
** (lane.c, snap_end), but not one that polls data_version. */
static void data_version_long(const char *sync) {
  fresh("CREATE TABLE r(k); CREATE TABLE w(k INTEGER PRIMARY KEY, v)");
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", sync);
  tu_exec(a, sql);
  sqlite3_stmt *dv = 0, *ins = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "PRAGMA data_version", -1, &dv, 0), SQLITE_OK);
  CHECK_RC(sqlite3_prepare_v2(a, "INSERT INTO w(v) VALUES (randomblob(300))", -1, &ins, 0), SQLITE_OK);
  CHECK_RC(sqlite3_step(dv), SQLITE_ROW);
  int64_t v0 = sqlite3_column_int64(dv, 0);
  CHECK_RC(sqlite3_reset(dv), SQLITE_OK);
  int moved = 0;
  for (int i = 1; i <= 3000; i++) {
    CHECK_RC(sqlite3_step(ins), SQLITE_DONE);
    CHECK_RC(sqlite3_reset(ins), SQLITE_OK);
    if (i % 1500 == 0) tu_exec(b, "INSERT INTO r VALUES(1)"); /* another connection commits */
    CHECK_RC(sqlite3_step(dv), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(dv, 0);
    CHECK_RC(sqlite3_reset(dv), SQLITE_OK);
    if (v != v0) moved++;
    if (i % 1500 != 0) CHECK(v == v0);
    v0 = v;
    if (i % 250 == 0) CHECK(tu_int(b, "SELECT count(*) FROM w") == i);
  }
  CHECK(moved == 2); /* once per commit of b */
  CHECK(tu_int(a, "SELECT count(*) FROM w") == 3000);
  CHECK(tu_int(a, "SELECT count(*) FROM r") == 2);
  CHECK(tu_integrity_ok(a));
  sqlite3_finalize(ins);
  sqlite3_finalize(dv);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_int(s, "SELECT count(*) FROM w") == 3000);
  CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
}

/* a copies row 2 of t (v = 20) into c, reading it from SQLite's cache only (a's
** previous transaction read that page), while b changes it to 21: a's commit must be
** refused, and nothing copied. */
static void cached_copy_refused(sqlite3 *a, sqlite3 *b) {
  tu_exec(a, "BEGIN");
  CHECK(tu_int(a, "SELECT v FROM t WHERE k = 2") == 20);
  tu_exec(b, "UPDATE t SET v = 21 WHERE k = 2");
  CHECK(outcome(tu_try(a, "INSERT INTO c SELECT k, v FROM t WHERE k = 2")) == SQLITE_OK);
  CHECK_RC(outcome(tu_try(a, "COMMIT")), SQLITE_BUSY_SNAPSHOT);
  if (!sqlite3_get_autocommit(a)) tu_exec(a, "ROLLBACK");
  CHECK(tu_int(a, "SELECT count(*) FROM c WHERE k = 2") == 0);
  CHECK(tu_int(a, "SELECT v FROM t WHERE k = 2") == 21);
}

/* 7b: the price of 7 is paid in conflicts, never in isolation. A reads row 2 from
** the page its previous commit wrote, which SQLite serves from its cache (no xRead
** in this transaction), and copies it into another table; B changes row 2 in
** between. A's copy must be refused: the carried read set holds the page. */
static void data_version_carried(void) {
  fresh("CREATE TABLE t(k INTEGER PRIMARY KEY, v); INSERT INTO t VALUES(1, 10), (2, 20);"
        "CREATE TABLE c(k INTEGER PRIMARY KEY, v)");
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  sqlite3_stmt *dv = 0;
  CHECK_RC(sqlite3_prepare_v2(a, "PRAGMA data_version", -1, &dv, 0), SQLITE_OK);
  CHECK(tu_int(a, "SELECT v FROM t WHERE k = 2") == 20);
  tu_exec(a, "UPDATE t SET v = 11 WHERE k = 1");
  cached_copy_refused(a, b);
  CHECK(tu_int(a, "SELECT count(*) FROM c") == 0);
  CHECK(tu_integrity_ok(a));
  sqlite3_finalize(dv);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

/* SQLite's own count of the changes it saw (SQLITE_FCNTL_DATA_VERSION: not a PRAGMA,
** so the connection is not marked as polling data_version). It moves by one at each
** commit of the connection and by one each time SQLite drops its cache (pager_reset):
** by two per write transaction when every one starts cold. */
static unsigned file_version(sqlite3 *db) {
  unsigned v = 0;
  CHECK_RC(sqlite3_file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, &v), SQLITE_OK);
  return v;
}

/* 8: a connection alone on its database keeps SQLite's cache across its own write
** transactions (lane.c, "warm transactions"), as stock SQLite does. Once a second connection is open and commits, the first one reads
** the new rows, and a copy it makes from a row it read from its cache (no xRead in
** that transaction) while the second changed it is refused: the carried read set
** holds the page. */
static void alone_warm(void) {
  fresh("CREATE TABLE t(k INTEGER PRIMARY KEY, v); INSERT INTO t VALUES(1, 10), (2, 20);"
        "CREATE TABLE c(k INTEGER PRIMARY KEY, v)");
  sqlite3 *a = tu_open(path, "");
  CHECK(tu_int(a, "SELECT v FROM t WHERE k = 2") == 20);
  unsigned v0 = file_version(a);
  for (int i = 0; i < 50; i++) tu_exec(a, "UPDATE t SET v = v + 1 WHERE k = 1");
  tu_exec(a, "BEGIN; UPDATE t SET v = v + 1 WHERE k = 1; INSERT INTO c VALUES(99, 0); COMMIT");
  CHECK(tu_int(a, "SELECT v FROM t WHERE k = 1") == 61);
  CHECK(file_version(a) - v0 == 51); /* 51 commits, no cache dropped */

  sqlite3 *b = tu_open(path, "");
  tu_exec(b, "UPDATE t SET v = 100 WHERE k = 1");
  CHECK(tu_int(a, "SELECT v FROM t WHERE k = 1") == 100); /* not the cached 61 */

  /* a is alone again once b closed: warm after its write, then b comes back. */
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  tu_exec(a, "UPDATE t SET v = 12 WHERE k = 1");
  CHECK(tu_int(a, "SELECT v FROM t WHERE k = 2") == 20);
  tu_exec(a, "UPDATE t SET v = 13 WHERE k = 1");
  b = tu_open(path, "");
  cached_copy_refused(a, b);
  CHECK(tu_int(b, "SELECT v FROM t WHERE k = 1") == 13);
  CHECK(tu_integrity_ok(a));
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : 0;
  path = tu_db_path("isolation", "i.db");
  snprintf(path_b, sizeof path_b, "%s/b.db", tu_dir);
#define RUN(name, call)                                  \
  if (!only || strcmp(only, name) == 0) {                \
    call;                                                \
    printf("test_engine_isolation: %s ok\n", name);      \
  }
  RUN("several_commits", several_commits(""));
  RUN("several_commits_readcheck0", several_commits("mw_readcheck=0"));
  RUN("lost_update", lost_update());
  RUN("readcheck_off", readcheck_off());
  RUN("relocated_page1", relocated_page1());
  RUN("merged_range", merged_range());
  RUN("attached", attached());
  RUN("data_version", data_version());
  RUN("data_version_long", data_version_long("FULL"));
  RUN("data_version_long_normal", data_version_long("NORMAL"));
  RUN("data_version_carried", data_version_carried());
  RUN("alone_warm", alone_warm());
  tu_rmdir();
  printf("test_engine_isolation: ok\n");
  return 0;
}
