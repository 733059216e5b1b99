/* Write skew: two transactions that each read what the other writes cannot both
** commit (page-level read validation). The two rows live on different pages, so
** the write sets do not overlap: only the read check refuses the second. With
** mw_readcheck=0 both commit (the documented trade), which shows that the refusal
** comes from the read check. Also: a transaction whose snapshot predates a schema
** change is refused with a schema conflict. */
#include "test_engine_util.h"

static int skew(const char *path, const char *params) {
  sqlite3 *a = tu_open(path, params), *b = tu_open(path, params);
  tu_exec(a, "UPDATE oncall SET on_duty=1");
  /* Both doctors are on duty; each checks that the other is and goes off. */
  tu_exec(a, "BEGIN");
  tu_exec(b, "BEGIN");
  CHECK(tu_int(a, "SELECT on_duty FROM oncall WHERE id=2") == 1);
  CHECK(tu_int(b, "SELECT on_duty FROM oncall WHERE id=1") == 1);
  tu_exec(a, "UPDATE oncall SET on_duty=0 WHERE id=1");
  tu_exec(b, "UPDATE oncall SET on_duty=0 WHERE id=2");
  int ra = tu_try(a, "COMMIT");
  int rb = tu_try(b, "COMMIT");
  CHECK_RC(ra, SQLITE_OK);
  int both = rb == SQLITE_OK;
  if (!both) {
    CHECK_RC(rb, SQLITE_BUSY_SNAPSHOT);
    CHECK(tu_stat(b, MW_STAT_CONFLICT_READ) == 1);
    CHECK(tu_stat(b, MW_STAT_CONFLICT_WRITE) == 0);
    CHECK(tu_int(b, "SELECT sum(on_duty) FROM oncall") == 1);
  }
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  return both;
}

int main(void) {
  const char *path = tu_db_path("skew", "s.db");
  sqlite3 *setup = tu_open(path, "");
  tu_exec(setup, "CREATE TABLE oncall(id INTEGER PRIMARY KEY, on_duty INTEGER, pad TEXT)");
  /* Rows of 3000 bytes: one per leaf page. */
  tu_exec(setup, "INSERT INTO oncall VALUES(1, 1, printf('%.3000c', 'a')), (2, 1, printf('%.3000c', 'b'))");
  CHECK_RC(sqlite3_close(setup), SQLITE_OK);

  CHECK(skew(path, "") == 0);
  CHECK(skew(path, "mw_readcheck=0") == 1);

  /* Schema conflict: b's snapshot is older than a's CREATE INDEX. */
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  tu_exec(b, "BEGIN");
  CHECK(tu_int(b, "SELECT count(*) FROM oncall") == 2);
  tu_exec(a, "CREATE INDEX oncall_duty ON oncall(on_duty)");
  tu_exec(b, "INSERT INTO oncall VALUES(3, 1, 'c')");
  CHECK_RC(tu_try(b, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_stat(b, MW_STAT_CONFLICT_SCHEMA) + tu_stat(b, MW_STAT_CONFLICT_WRITE) +
        tu_stat(b, MW_STAT_CONFLICT_READ) == 1);
  /* The retry sees the new schema and keeps the index right. */
  tu_exec(b, "INSERT INTO oncall VALUES(3, 1, 'c')");
  CHECK(tu_int(a, "SELECT count(*) FROM oncall INDEXED BY oncall_duty WHERE on_duty=1") >= 1);
  CHECK(tu_integrity_ok(a));

  /* Page 1's header fields are reads too: b decides from user_version, a changes it. */
  tu_exec(b, "BEGIN");
  CHECK(tu_int(b, "PRAGMA user_version") == 0);
  tu_exec(b, "UPDATE oncall SET on_duty=5 WHERE id=3");
  tu_exec(a, "PRAGMA user_version=7");
  CHECK_RC(tu_try(b, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  CHECK(tu_int(b, "PRAGMA user_version") == 7);

  /* The interior-page exception keeps the bounds: b reads max(k) through the
  ** right-most leaf, a appends k+1. When a's append fills that leaf, SQLite adds a
  ** new right-most leaf and only changes the parent (balance_quick): b's leaf is
  ** unchanged, but its key range shrank, so b's read is stale and must be refused. */
  tu_exec(a, "CREATE TABLE seq(k INTEGER PRIMARY KEY, pad BLOB); CREATE TABLE note(x)");
  tu_exec(a, "INSERT INTO seq VALUES(1, randomblob(500))");
  for (int i = 0; i < 40; i++) {
    tu_exec(b, "BEGIN");
    int64_t mx = tu_int(b, "SELECT max(k) FROM seq");
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO note VALUES(%lld)", (long long)mx);
    tu_exec(b, sql);
    snprintf(sql, sizeof sql, "INSERT INTO seq VALUES(%lld, randomblob(500))", (long long)mx + 1);
    tu_exec(a, sql);
    CHECK_RC(tu_try(b, "COMMIT"), SQLITE_BUSY_SNAPSHOT);
  }
  CHECK(tu_int(a, "SELECT count(*) FROM seq") == 41);
  CHECK(tu_int(a, "SELECT count(*) FROM note") == 0);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  tu_rmdir();
  printf("test_engine_skew: ok\n");
  return 0;
}
