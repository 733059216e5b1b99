/* PRAGMA wal_checkpoint on an engine database, as backups by copy and cron jobs use it:
** with connections still open, a checkpoint that answers busy = 0 leaves the database
** file holding every commit acknowledged before it, synced, without the engine's mark,
** so that a copy of the file is a database for stock SQLite; the next commit puts the
** mark back before its record reaches the log.
**
**  - copy: two connections write 2,800 rows; after each mode (PASSIVE, FULL, RESTART,
**    TRUNCATE) the answer is (0, 0, 0) and a byte copy of the file passes stock
**    integrity_check with every row; the next commit marks the file again;
**  - reader: another connection's open read transaction holds the file back: busy = 1
**    (and -1, -1), as stock SQLite answers a checkpoint it cannot finish; once it ends,
**    busy = 0 and the copy holds everything;
**  - crash: a child process checkpoints, commits one more row and dies without closing:
**    stock SQLite must refuse the file (the mark came back with the commit), and the
**    engine's next open replays the row;
**  - processes (mw_mp=1): another process's acknowledged rows are in the copy after this
**    process's checkpoint; the mark comes back with the other process's next commit;
**  - busy writers: four threads commit while a fifth checkpoints in a loop; nothing
**    fails, every row is in the file after the last close;
**  - autocheckpoint: a commit of more than wal_autocheckpoint pages runs SQLite's own
**    checkpoint in the committing thread: it completes, and the file holds it;
**  - lone writer: below FULL, a warm lane goes cold before SQLite's automatic
**    checkpoint would run (400 small commits run none), and reads right;
**  - vacuum into: with mw_plain_output set around the statement, VACUUM INTO through an
**    engine connection writes a plain database (stock SQLite reads it in rollback mode)
**    holding the commits acknowledged before it and not another connection's open one;
**    without it SQLite refuses the output the engine made a database of; an output with
**    content is refused and left byte for byte as it was; the setting is the thread's. */
#include "test_engine_util.h"
#include "processes/guard.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *prog = "test_engine_checkpoint";

/* Runs the checkpoint; the answer's three columns. */
static void checkpoint(sqlite3 *db, const char *mode, int res[3]) {
  char sql[80];
  snprintf(sql, sizeof sql, "PRAGMA wal_checkpoint(%s)", mode);
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, sql, -1, &st, 0), SQLITE_OK);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    fprintf(stderr, "%s: %s: %s\n", prog, sql, sqlite3_errmsg(db));
    exit(1);
  }
  for (int i = 0; i < 3; i++) res[i] = sqlite3_column_int(st, i);
  CHECK_RC(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
}

/* Bytes 18 and 19 of the file as they are on disk. */
static int header_versions(const char *path) {
  unsigned char v[2] = { 0, 0 };
  FILE *f = fopen(path, "rb");
  CHECK(f != 0);
  CHECK(fseek(f, 18, SEEK_SET) == 0);
  CHECK(fread(v, 1, 2, f) == 2);
  fclose(f);
  return v[0] * 256 + v[1];
}

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  CHECK(a != 0 && b != 0);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, a)) > 0) CHECK(fwrite(buf, 1, n, b) == n);
  fclose(a);
  CHECK(fclose(b) == 0);
}

/* Rows of t in a byte copy of path read by stock SQLite, -1 when stock SQLite refuses
** the copy; integrity checked. */
static int64_t stock_rows_of_copy(const char *path) {
  char copy[520];
  snprintf(copy, sizeof copy, "%s.copy", path);
  copy_file(path, copy);
  sqlite3 *s = tu_open_stock(copy, SQLITE_OPEN_READONLY);
  sqlite3_stmt *st = 0;
  int64_t n = -1;
  if (sqlite3_prepare_v2(s, "SELECT count(*) FROM t", -1, &st, 0) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (n >= 0) CHECK(tu_integrity_ok(s));
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  CHECK(unlink(copy) == 0);
  return n;
}

static const int WAL2 = 2 * 256 + 2, MARKED = MW_HDR_MARK * 256 + MW_HDR_MARK;

static void case_copy(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/copy.db", dir);
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  tu_exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, who, pad)");
  int64_t rows = 0;
  for (int i = 0; i < 1400; i++) {
    tu_exec(a, "INSERT INTO t(who, pad) VALUES('a', randomblob(50))");
    tu_exec(b, "INSERT INTO t(who, pad) VALUES('b', randomblob(50))");
    rows += 2;
  }
  CHECK(header_versions(path) == MARKED);
  CHECK(stock_rows_of_copy(path) == -1); /* before: not a database for stock SQLite */
  const char *modes[] = { "TRUNCATE", "PASSIVE", "FULL", "RESTART" };
  for (int k = 0; k < 4; k++) {
    int res[3];
    checkpoint(k % 2 ? b : a, modes[k], res);
    CHECK(res[0] == 0 && res[1] == 0 && res[2] == 0);
    CHECK(header_versions(path) == WAL2);
    int64_t n = stock_rows_of_copy(path);
    if (n != rows) {
      fprintf(stderr, "%s: after wal_checkpoint(%s) a copy holds %lld of %lld rows\n", prog,
              modes[k], (long long)n, (long long)rows);
      exit(1);
    }
    /* The next commit marks the file again before anything reaches the log. */
    tu_exec(a, "INSERT INTO t(who, pad) VALUES('a', randomblob(50))");
    rows++;
    CHECK(header_versions(path) == MARKED);
  }
  /* A checkpoint with nothing new is still complete, and takes the mark off. */
  int res[3];
  checkpoint(a, "PASSIVE", res);
  checkpoint(b, "PASSIVE", res);
  CHECK(res[0] == 0 && header_versions(path) == WAL2);
  CHECK(tu_int(b, "SELECT count(*) FROM t") == rows);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  CHECK(stock_rows_of_copy(path) == rows);
  printf("%s: copy: 4 modes answered (0, 0, 0); each copy held all %lld rows; the next "
         "commit marked the file\n", prog, (long long)rows);
}

static void case_reader(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/reader.db", dir);
  sqlite3 *a = tu_open(path, ""), *r = tu_open(path, "");
  tu_exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, pad)");
  for (int i = 0; i < 100; i++) tu_exec(a, "INSERT INTO t(pad) VALUES(randomblob(100))");
  tu_exec(r, "BEGIN");
  CHECK(tu_int(r, "SELECT count(*) FROM t") == 100);
  for (int i = 0; i < 100; i++) tu_exec(a, "INSERT INTO t(pad) VALUES(randomblob(100))");
  int res[3];
  checkpoint(a, "TRUNCATE", res);
  CHECK(res[0] == 1 && res[1] == -1 && res[2] == -1);
  CHECK(header_versions(path) == MARKED); /* the file does not hold everything */
  CHECK(tu_int(r, "SELECT count(*) FROM t") == 100); /* the reader's snapshot is whole */
  tu_exec(r, "COMMIT");
  checkpoint(a, "TRUNCATE", res);
  CHECK(res[0] == 0);
  CHECK(stock_rows_of_copy(path) == 200);
  CHECK_RC(sqlite3_close(r), SQLITE_OK);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  printf("%s: reader: an open read transaction made it busy (1, -1, -1) and kept its "
         "snapshot; after it ended, (0, 0, 0) and the copy held 200 rows\n", prog);
}

static void case_crash(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/crash.db", dir);
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    sqlite3 *a = tu_open(path, "");
    tu_exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, pad)");
    for (int i = 0; i < 50; i++) tu_exec(a, "INSERT INTO t(pad) VALUES(randomblob(100))");
    int res[3];
    checkpoint(a, "TRUNCATE", res);
    if (res[0] != 0 || header_versions(path) != WAL2) _exit(3);
    tu_exec(a, "INSERT INTO t(pad) VALUES('after')"); /* acknowledged */
    _exit(0); /* no close: a crash */
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (header_versions(path) != MARKED || stock_rows_of_copy(path) != -1) {
    fprintf(stderr, "%s: crash: a commit after a checkpoint left the file unmarked: stock "
            "SQLite reads it without the commit the log holds\n", prog);
    exit(1);
  }
  sqlite3 *a = tu_open(path, "");
  CHECK(tu_int(a, "SELECT count(*) FROM t") == 51);
  CHECK(tu_int(a, "SELECT count(*) FROM t WHERE pad = 'after'") == 1);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK(stock_rows_of_copy(path) == 51);
  printf("%s: crash: the commit after the checkpoint marked the file first; stock SQLite "
         "refused it; the engine replayed the row\n", prog);
}

static void case_processes(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/mp.db", dir);
  int up[2], down[2];
  CHECK(pipe(up) == 0 && pipe(down) == 0);
  fflush(stdout);
  pid_t pid = fork(); /* before any open: the child's engine is its own */
  CHECK(pid >= 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    sqlite3 *b = tu_open(path, "mw_mp=1");
    tu_exec(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, who, pad)");
    for (int i = 0; i < 300; i++) tu_exec(b, "INSERT INTO t(who, pad) VALUES('child', randomblob(80))");
    char c = 'w';
    if (write(up[1], &c, 1) != 1) _exit(4);
    if (read(down[0], &c, 1) != 1) _exit(5); /* the parent checkpointed */
    tu_exec(b, "INSERT INTO t(who, pad) VALUES('child', 'after')");
    if (write(up[1], &c, 1) != 1) _exit(4);
    if (read(down[0], &c, 1) != 1) _exit(5);
    if (sqlite3_close(b) != SQLITE_OK) _exit(6);
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  char c;
  CHECK(read(up[0], &c, 1) == 1); /* the child's 300 rows are acknowledged */
  sqlite3 *a = tu_open(path, "mw_mp=1");
  for (int i = 0; i < 200; i++) tu_exec(a, "INSERT INTO t(who, pad) VALUES('parent', randomblob(80))");
  int res[3];
  checkpoint(a, "TRUNCATE", res);
  CHECK(res[0] == 0);
  CHECK(header_versions(path) == WAL2);
  int64_t n = stock_rows_of_copy(path);
  if (n != 500) {
    fprintf(stderr, "%s: processes: a copy after the checkpoint holds %lld of 500 rows\n", prog,
            (long long)n);
    exit(1);
  }
  CHECK(write(down[1], &c, 1) == 1);
  CHECK(read(up[0], &c, 1) == 1); /* the child committed once more */
  CHECK(header_versions(path) == MARKED);
  CHECK(write(down[1], &c, 1) == 1);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  checkpoint(a, "PASSIVE", res);
  CHECK(res[0] == 0 && stock_rows_of_copy(path) == 501);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  close(up[0]);
  close(down[1]);
  printf("%s: processes: the other process's 300 rows were in the copy; its next commit "
         "marked the file again\n", prog);
}

typedef struct worker { const char *path; int id, stop, checkpoints, busy; } worker;

static void *writer(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  for (int i = 0; i < 300; i++) {
    char sql[120];
    snprintf(sql, sizeof sql, "INSERT INTO t(who, pad) VALUES(%d, randomblob(60))", w->id);
    int rc;
    /* Inserts of several threads meet on the table's last page: the loser runs again. */
    while ((rc = tu_try(db, sql)) == SQLITE_BUSY_SNAPSHOT) w->busy++;
    if (rc != SQLITE_OK) {
      fprintf(stderr, "%s: writer %d: %s\n", prog, w->id, sqlite3_errmsg(db));
      exit(1);
    }
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void *checkpointer(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "");
  static const char *modes[] = { "PASSIVE", "FULL", "RESTART", "TRUNCATE" };
  while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
    int res[3];
    checkpoint(db, modes[w->checkpoints % 4], res);
    w->checkpoints++;
    w->busy += res[0];
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void case_busy_writers(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/busy.db", dir);
  sqlite3 *keep = tu_open(path, "");
  tu_exec(keep, "CREATE TABLE t(id INTEGER PRIMARY KEY, who, pad)");
  worker w[5];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 5; i++) {
    w[i].path = path;
    w[i].id = i;
  }
  pthread_t ck;
  CHECK(pthread_create(&ck, 0, checkpointer, &w[4]) == 0);
  tu_threads(4, writer, w, sizeof(worker));
  __atomic_store_n(&w[4].stop, 1, __ATOMIC_RELEASE);
  CHECK(pthread_join(ck, 0) == 0);
  CHECK(tu_int(keep, "SELECT count(*) FROM t") == 1200);
  CHECK_RC(sqlite3_close(keep), SQLITE_OK);
  CHECK(stock_rows_of_copy(path) == 1200);
  printf("%s: busy writers: 1200 commits of 4 threads beside %d checkpoints (%d busy); all "
         "in the file\n", prog, w[4].checkpoints, w[4].busy);
}

static void case_autocheckpoint(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/auto.db", dir);
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  tu_exec(a, "PRAGMA wal_autocheckpoint=100");
  tu_exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, pad)");
  tu_exec(a, "BEGIN");
  for (int i = 0; i < 600; i++) tu_exec(a, "INSERT INTO t(pad) VALUES(randomblob(1000))");
  tu_exec(a, "COMMIT"); /* about 150 pages: SQLite checkpoints after it */
  CHECK(header_versions(path) == WAL2);
  CHECK(stock_rows_of_copy(path) == 600);
  CHECK(tu_int(b, "SELECT count(*) FROM t") == 600);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  printf("%s: autocheckpoint: a commit over wal_autocheckpoint pages left the file whole\n", prog);
}

/* A connection alone on its file stays warm after its commits, and its private WAL
** grows: at wal_autocheckpoint frames SQLite would run a checkpoint after a commit, a
** real one for the engine (compaction, syncs, the mark off and on again), which stalled
** a lone writer for milliseconds every few hundred commits. Below FULL the lane goes
** cold at half of it instead: 400 small commits at NORMAL run no checkpoint (no
** compaction: the timer's is 5 s away), and read right. */
static void case_lone_writer(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/lone.db", dir);
  sqlite3 *a = tu_open(path, "");
  tu_exec(a, "PRAGMA synchronous=NORMAL");
  tu_exec(a, "PRAGMA wal_autocheckpoint=100");
  tu_exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, n)");
  int64_t c0 = tu_stat(a, MW_STAT_COMPACTIONS);
  for (int i = 0; i < 400; i++) tu_exec(a, "INSERT INTO t(n) VALUES((SELECT count(*) FROM t))");
  int64_t compactions = tu_stat(a, MW_STAT_COMPACTIONS) - c0;
  if (compactions) fprintf(stderr, "%s: lone writer: %lld compactions\n", prog, (long long)compactions);
  CHECK(compactions == 0);
  CHECK(tu_int(a, "SELECT count(*) FROM t WHERE n = id - 1") == 400);
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK(stock_rows_of_copy(path) == 400);
  printf("%s: lone writer: 400 commits at NORMAL, wal_autocheckpoint=100: no checkpoint ran\n", prog);
}

/* VACUUM INTO path on db, with mw_plain_output set around it; its result code. */
static int vacuum_into(sqlite3 *db, const char *path, int plain) {
  char *sql = sqlite3_mprintf("VACUUM INTO %Q", path);
  CHECK(sql != 0);
  int was = mw_plain_output(plain);
  CHECK(was == 0);
  int rc = tu_try(db, sql);
  CHECK(mw_plain_output(0) == 0); /* once: the output's open took it (plain) or never had it */
  sqlite3_free(sql);
  return rc;
}

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static void case_vacuum_into(const char *dir) {
  char path[400], out[420], made[420];
  snprintf(path, sizeof path, "%s/vac.db", dir);
  snprintf(out, sizeof out, "%s/vac-copy.db", dir);
  snprintf(made, sizeof made, "%s/vac-made.db", dir);
  sqlite3 *a = tu_open(path, ""), *b = tu_open(path, "");
  tu_exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, who, pad)");
  for (int i = 0; i < 300; i++) tu_exec(a, "INSERT INTO t(who, pad) VALUES('a', randomblob(50))");
  tu_exec(b, "INSERT INTO t(who, pad) VALUES('b', 1)");
  tu_exec(b, "BEGIN; INSERT INTO t(who, pad) VALUES('open', 2)");
  /* Without the setting the engine makes a database of the new file, and SQLite refuses it. */
  CHECK_RC(vacuum_into(a, made, 0), SQLITE_ERROR);
  CHECK(strcmp(sqlite3_errmsg(a), "output file already exists") == 0);
  CHECK(file_size(made) > 0);
  /* With it: a plain database, every acknowledged commit, not b's open transaction. */
  CHECK_RC(vacuum_into(a, out, 1), SQLITE_OK);
  sqlite3 *s = tu_open_stock(out, SQLITE_OPEN_READONLY);
  CHECK(tu_integrity_ok(s));
  CHECK(tu_int(s, "SELECT count(*) FROM t") == 301);
  CHECK(tu_int(s, "SELECT count(*) FROM t WHERE who = 'open'") == 0);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  /* An output with content: refused, left byte for byte. */
  int64_t size = file_size(out);
  unsigned char first[100], again[100];
  FILE *f = fopen(out, "rb");
  CHECK(f != 0 && fread(first, 1, sizeof first, f) == sizeof first);
  fclose(f);
  CHECK(first[18] == 1 && first[19] == 1); /* rollback mode, no mark: SQLite's own file */
  CHECK_RC(vacuum_into(a, out, 1), SQLITE_ERROR);
  CHECK(strcmp(sqlite3_errmsg(a), "output file already exists") == 0);
  f = fopen(out, "rb");
  CHECK(f != 0 && fread(again, 1, sizeof again, f) == sizeof again);
  fclose(f);
  CHECK(file_size(out) == size && memcmp(first, again, sizeof first) == 0);
  tu_exec(b, "COMMIT");
  CHECK_RC(sqlite3_close(a), SQLITE_OK);
  CHECK_RC(sqlite3_close(b), SQLITE_OK);
  printf("%s: vacuum into: a plain copy of 301 acknowledged rows (not the open one); without "
         "the setting refused; an output with content refused and left as it was\n", prog);
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("checkpoint");
  case_copy(dir);
  case_reader(dir);
  case_crash(dir);
  case_processes(dir);
  case_busy_writers(dir);
  case_autocheckpoint(dir);
  case_lone_writer(dir);
  case_vacuum_into(dir);
  tu_rmdir();
  printf("%s: ok\n", prog);
  return 0;
}
