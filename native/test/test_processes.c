/* Processes and files beside the engine (docs/design/processes.md):
**  - two processes through the engine: the second is refused at open with a message
**    naming the cause and mw_mp; the same when the first moved SQLite's lock bytes
**    (a test control that SQLite's suite uses in its own process only); every row the first acknowledged is there after;
**  - Debian's sqlite3 shell with .load of the extension, in two processes at once:
**    the second shell's open is refused, the first shell's rows are all there;
**  - a stock writer beside an engine process (Debian's sqlite3 and a stock connection
**    of the vendored library): reads, writes and checkpoints fail with SQLITE_BUSY,
**    and after the engine's close the file passes integrity_check with every row;
**  - a process killed (kill -9) with its log left: a stock connection can neither
**    read nor write the file, the next engine open replays the log, and after its
**    close stock SQLite reads every row;
**  - a crash between the last close's clearing of the header mark and its deletion of
**    the log: a stock write made then survives the engine's reopen;
**  - two crashes in a row: the process that replayed the first log and compacted keeps
**    the mark in the file, so stock SQLite stays out until the second replay; with
**    mw_mp=1 a process that joined, outlived the first and compacted keeps it too;
**  - a child forked from a process with the database open: its own open is refused
**    (another process has it), closing the inherited connection leaves the parent's
**    database alone, and with mw_mp=1 it joins and commits;
**  - one process, one file under two names (hard links) or renamed while open: one
**    database; a new file made at the old name while the old one is open is refused.
** argv[1] (from build.zig): the loadable extension; else zig-out/lib's. */
#include "test_engine_util.h"
#include "processes/guard.h" /* MW_HDR_MARK */
#include "test_spawn_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

static const char *prog = "test_processes";
static const char *self_exe;
static char extension[1024];
static int have_shell;

/* ---------------------------------------------------------------- helpers */

/* Runs a shell command, its stdout and stderr into out; returns its exit status. */
static int run_capture(const char *cmd, char *out, size_t size) {
  char full[4096];
  snprintf(full, sizeof full, "( %s ) 2>&1", cmd);
  FILE *p = popen(full, "r");
  CHECK(p != 0);
  size_t n = fread(out, 1, size - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A child process with a pipe each way. */
typedef struct kid {
  pid_t pid;
  int rd, wr;                  /* parent side: read from the child, write to it */
} kid;

static void kid_start(kid *k, void (*fn)(const char *path, int rd, int wr), const char *path) {
  int up[2], down[2];
  CHECK(pipe(up) == 0 && pipe(down) == 0);
  fflush(stdout);
  fflush(stderr);
  k->pid = fork();
  CHECK(k->pid >= 0);
  if (k->pid == 0) {
    close(up[0]);
    close(down[1]);
    fn(path, down[0], up[1]);
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  k->rd = up[0];
  k->wr = down[1];
}

static void read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    CHECK(r > 0);
    p += r;
    n -= (size_t)r;
  }
}

static void write_all(int fd, const void *buf, size_t n) {
  CHECK(write(fd, buf, n) == (ssize_t)n);
}

/* Waits for the child; returns its exit status, or 128 + signal. */
static int kid_wait(kid *k) {
  int st = 0;
  while (waitpid(k->pid, &st, 0) < 0) CHECK(errno == EINTR);
  close(k->rd);
  close(k->wr);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Opens through the engine; returns the open's result code and message (no exit). */
static int try_engine_open(const char *path, char *msg, size_t size) {
  char uri[600];
  snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter", path);
  sqlite3 *db = 0;
  int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0);
  snprintf(msg, size, "%s", db ? sqlite3_errmsg(db) : "");
  sqlite3_close(db);
  return rc;
}

static int64_t count_rows(const char *path) {
  sqlite3 *db = tu_open(path, "");
  int64_t n = tu_int(db, "SELECT count(*) FROM t");
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return n;
}

/* A stock connection (plain unix VFS) finds the file whole and sql's answer is want. */
static void stock_expect(const char *path, const char *sql, int64_t want) {
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(s));
  CHECK(tu_int(s, sql) == want);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
}

/* ---------------------------------------------------------------- children */

/* Opens through the engine, commits rows one transaction each, says 'r' after the
** first 50, goes on until the parent writes a byte, closes, and sends the number of
** rows it committed (each acknowledged by sqlite3_exec). */
static void child_writer(const char *path, int rd, int wr) {
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, who TEXT, pad BLOB)");
  int64_t n = 0;
  for (; n < 50; n++) tu_exec(db, "INSERT INTO t(who, pad) VALUES ('engine', randomblob(300))");
  write_all(wr, "r", 1);
  CHECK(fcntl(rd, F_SETFL, O_NONBLOCK) == 0);
  char c;
  /* Until the parent's byte, or its end (a failed CHECK): never left running. */
  while (read(rd, &c, 1) < 0) {
    tu_exec(db, "INSERT INTO t(who, pad) VALUES ('engine', randomblob(300))");
    n++;
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  write_all(wr, &n, sizeof n);
}

/* Commits 200 rows through the engine, tells the parent how many, and dies by
** SIGKILL without closing: the log stays, the file may be half compacted. */
static void child_crash(const char *path, int rd, int wr) {
  (void)rd;
  /* A small log limit: the compactor writes some of the rows into the file first. */
  sqlite3 *db = tu_open(path, "mw_log_max_mb=1");
  tu_exec(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, who TEXT, pad BLOB)");
  int64_t n = 0;
  for (; n < 200; n++) tu_exec(db, "INSERT INTO t(who, pad) VALUES ('engine', randomblob(6000))");
  write_all(wr, &n, sizeof n);
  raise(SIGKILL);
}

/* After the log's replay (the first child's crash): commits until this process's own
** compactor has written the file (page 1 among the pages), tells the parent how many
** rows, and dies by SIGKILL too. */
static void child_crash_compacted(const char *path, int rd, int wr) {
  (void)rd;
  sqlite3 *db = tu_open(path, "mw_log_max_mb=1");
  int64_t c0 = tu_stat(db, MW_STAT_COMPACTIONS), n = 0;
  for (; n < 200 || tu_stat(db, MW_STAT_COMPACTIONS) == c0; n++) {
    CHECK(n < 20000);
    tu_exec(db, "INSERT INTO t(who, pad) VALUES ('engine', randomblob(6000))");
  }
  write_all(wr, &n, sizeof n);
  raise(SIGKILL);
}

/* With mw_mp=1, a process that joins (run as a new program: a forked copy of this one
** would inherit its open database): says so (<path>.ready) once open, waits for
** <path>.go (the first process has closed), commits until its own compactor has
** written the file, leaves the number of rows in <path>.rows, and dies by SIGKILL. */
static int child_mp_survivor(const char *path) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  sqlite3 *db = tu_open(path, "mw_mp=1&mw_log_max_mb=1");
  tu_make_file(path, ".ready");
  tu_await_file(path, ".go");
  int64_t c0 = tu_stat(db, MW_STAT_COMPACTIONS), n = 0;
  for (; n < 200 || tu_stat(db, MW_STAT_COMPACTIONS) == c0; n++) {
    CHECK(n < 20000);
    tu_exec(db, "INSERT INTO t(who, pad) VALUES ('joiner', randomblob(6000))");
  }
  char f[400];
  snprintf(f, sizeof f, "%s.rows", path);
  FILE *fp = fopen(f, "w");
  CHECK(fp != 0);
  fprintf(fp, "%lld\n", (long long)n);
  CHECK(fclose(fp) == 0);
  raise(SIGKILL);
  return 3;
}

/* The header's bytes 18 and 19 on disk carry the engine's mark. */
static int marked_on_disk(const char *path) {
  unsigned char v[2];
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  CHECK(pread(fd, v, 2, 18) == 2);
  close(fd);
  return v[0] == MW_HDR_MARK && v[1] == MW_HDR_MARK;
}

/* A killed process left its log beside path: the file carries the mark (else `why`),
** stock SQLite can neither read nor write it, the engine's open replays `rows` rows, and
** after its close the file is a plain database with them all. */
static void check_left_marked(const char *path, int64_t rows, const char *why) {
  char log[320];
  snprintf(log, sizeof log, "%s-mw", path);
  CHECK(access(log, F_OK) == 0);
  if (!marked_on_disk(path)) {
    fprintf(stderr, "%s: %s\n", prog, why);
    CHECK(0);
  }
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_try(s, "SELECT count(*) FROM t") == SQLITE_NOTADB);
  CHECK(tu_try(s, "INSERT INTO t(who) VALUES ('stock')") == SQLITE_NOTADB);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  CHECK(count_rows(path) == rows); /* replays, closes: a plain database again */
  CHECK(!marked_on_disk(path) && access(log, F_OK) != 0);
  stock_expect(path, "SELECT count(*) FROM t", rows);
}

/* ---------------------------------------------------------------- cases */

/* A child writes through the engine (fn) while this process opens the same file: the
** open must be refused with a message naming the other process (and mw_mp=1). The refused
** open leaves the file alone: the writer goes on, and every row it acknowledged is there.
** Returns the child's rows; msg gets the message. */
static int64_t refused_beside(const char *path, void (*fn)(const char *, int, int),
                              const char *what, char *msg, size_t size) {
  kid k;
  kid_start(&k, fn, path);
  char c;
  read_all(k.rd, &c, 1);
  int rc = try_engine_open(path, msg, size);
  if (rc == SQLITE_OK || !strstr(msg, "open in another process") || !strstr(msg, "mw_mp=1")) {
    fprintf(stderr, "%s: rc %d, message '%s'\n", what, rc, msg);
    CHECK(0);
  }
  write_all(k.wr, "q", 1);
  int64_t n = 0;
  read_all(k.rd, &n, sizeof n);
  CHECK(kid_wait(&k) == 0);
  CHECK(n >= 50);
  CHECK(count_rows(path) == n);
  return n;
}

/* Two processes through the engine. */
static void two_engines(const char *dir) {
  char path[300], msg[1024];
  snprintf(path, sizeof path, "%s/two.db", dir);
  int64_t n = refused_beside(path, child_writer, "second process", msg, sizeof msg);
  printf("%s: second engine process refused (\"%.70s...\"), %lld rows kept\n", prog,
         strstr(msg, "multiwriter:"), (long long)n);
}

/* SQLite's lock bytes moved in one process only (SQLite's test suite moves them in its
** own process, not in the children it starts): the engine's open in the other process is
** refused all the same (it used to get in and commit unseen, and its close deleted the
** first process's log). */
static void child_moved_writer(const char *path, int rd, int wr) {
  CHECK((unsigned)sqlite3_test_control(SQLITE_TESTCTRL_PENDING_BYTE, 0x10000) == 0x40000000u);
  child_writer(path, rd, wr);
}

static void moved_lock_bytes(const char *dir) {
  char path[300], msg[1024];
  snprintf(path, sizeof path, "%s/moved.db", dir);
  int64_t n = refused_beside(path, child_moved_writer,
                             "second process beside moved lock bytes", msg, sizeof msg);
  printf("%s: lock bytes moved in the first process only: the second refused, %lld rows kept\n",
         prog, (long long)n);
}

/* Debian's sqlite3 shell with the extension in two processes. */
static void two_shells(const char *dir) {
  if (!have_shell) return;
  char path[300], ready[320], cmd[2400], out[4096];
  snprintf(path, sizeof path, "%s/shell.db", dir);
  snprintf(ready, sizeof ready, "%s/shell.ready", dir);
  snprintf(cmd, sizeof cmd, "/usr/bin/sqlite3 -batch :memory: > '%s/shell1.out' 2>&1", dir);
  FILE *s1 = popen(cmd, "w");
  CHECK(s1 != 0);
  fprintf(s1, ".load %s\n.open file:%s?vfs=multiwriter\n"
              "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT);\n", extension, path);
  for (int i = 0; i < 200; i++) fprintf(s1, "INSERT INTO t(who) VALUES ('shell 1');\n");
  fprintf(s1, ".output %s\nSELECT count(*) FROM t;\n.output stdout\n", ready);
  fflush(s1);
  /* The first shell has committed its rows and still has the database open. */
  for (int i = 0; i < 3000; i++) {
    FILE *f = fopen(ready, "r");
    int got = 0, rows = 0;
    if (f) {
      got = fscanf(f, "%d", &rows) == 1 && rows == 200;
      fclose(f);
    }
    if (got) break;
    CHECK(i < 2999);
    usleep(10000);
  }
  snprintf(cmd, sizeof cmd,
           "printf '.load %s\\n.open file:%s?vfs=multiwriter\\nINSERT INTO t(who) VALUES (1);\\n' "
           "| /usr/bin/sqlite3 -batch :memory:", extension, path);
  run_capture(cmd, out, sizeof out);
  if (!strstr(out, "open in another process") || !strstr(out, "mw_mp=1")) {
    fprintf(stderr, "second shell said: %s\n", out);
    CHECK(0);
  }
  fprintf(s1, ".quit\n");
  CHECK(pclose(s1) == 0);
  snprintf(cmd, sizeof cmd, "cat '%s/shell1.out'", dir);
  run_capture(cmd, out, sizeof out);
  if (out[0]) {
    fprintf(stderr, "first shell said: %s\n", out);
    CHECK(0);
  }
  snprintf(cmd, sizeof cmd,
           "/usr/bin/sqlite3 '%s' 'PRAGMA integrity_check; SELECT count(*) FROM t;'", path);
  CHECK(run_capture(cmd, out, sizeof out) == 0);
  if (strcmp(out, "ok\n200\n") != 0) {
    fprintf(stderr, "stock sqlite3 after the shells: %s\n", out);
    CHECK(0);
  }
  printf("%s: second sqlite3 shell refused, the first one's 200 rows kept\n", prog);
}

/* A stock writer beside an engine process. */
static void stock_beside(const char *dir) {
  char path[300], cmd[1200], out[4096];
  snprintf(path, sizeof path, "%s/stock.db", dir);
  kid k;
  kid_start(&k, child_writer, path);
  char c;
  read_all(k.rd, &c, 1);
  /* A stock connection of the vendored library: refused, busy timeout or not. */
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_try(s, "INSERT INTO t(who) VALUES ('stock')") == SQLITE_BUSY);
  CHECK(tu_try(s, "SELECT count(*) FROM t") == SQLITE_BUSY);
  CHECK(tu_try(s, "PRAGMA wal_checkpoint(TRUNCATE)") == SQLITE_BUSY);
  CHECK(tu_try(s, "PRAGMA journal_mode=DELETE") == SQLITE_BUSY);
  sqlite3_busy_timeout(s, 300);
  CHECK(tu_try(s, "BEGIN IMMEDIATE") == SQLITE_BUSY);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  if (have_shell) {
    snprintf(cmd, sizeof cmd,
             "/usr/bin/sqlite3 -cmd '.timeout 200' '%s' \"INSERT INTO t(who) VALUES ('stock')\"", path);
    int st = run_capture(cmd, out, sizeof out);
    if (st == 0 || !strstr(out, "database is locked")) {
      fprintf(stderr, "stock sqlite3 beside the engine: exit %d: %s\n", st, out);
      CHECK(0);
    }
  }
  write_all(k.wr, "q", 1);
  int64_t n = 0;
  read_all(k.rd, &n, sizeof n);
  CHECK(kid_wait(&k) == 0);
  /* Nothing of the stock writer, every row of the engine's, a sound file. */
  s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(s));
  CHECK(tu_int(s, "SELECT count(*) FROM t") == n);
  CHECK(tu_int(s, "SELECT count(*) FROM t WHERE who = 'stock'") == 0);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  printf("%s: stock writer beside an engine process: SQLITE_BUSY, %lld engine rows, "
         "integrity ok\n", prog, (long long)n);
}

/* A crash leaves the log; stock SQLite must not write (nor read) before the replay. */
static void crash_then_stock(const char *dir) {
  char path[300], log[320], cmd[1200], out[4096];
  snprintf(path, sizeof path, "%s/crash.db", dir);
  snprintf(log, sizeof log, "%s-mw", path);
  kid k;
  kid_start(&k, child_crash, path);
  int64_t n = 0;
  read_all(k.rd, &n, sizeof n);
  CHECK(kid_wait(&k) == 128 + SIGKILL);
  CHECK(n == 200);
  CHECK(access(log, F_OK) == 0);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_try(s, "INSERT INTO t(who) VALUES ('stock')") == SQLITE_NOTADB);
  CHECK(tu_try(s, "SELECT count(*) FROM t") == SQLITE_NOTADB);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  if (have_shell) {
    snprintf(cmd, sizeof cmd, "/usr/bin/sqlite3 '%s' \"INSERT INTO t(who) VALUES ('stock')\"", path);
    int st = run_capture(cmd, out, sizeof out);
    if (st == 0 || !strstr(out, "not a database")) {
      fprintf(stderr, "stock sqlite3 after the crash: exit %d: %s\n", st, out);
      CHECK(0);
    }
  }
  /* The engine replays the log, and then the file is a plain database again. */
  sqlite3 *db = tu_open(path, "");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == n);
  tu_exec(db, "INSERT INTO t(who) VALUES ('after')");
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  CHECK(access(log, F_OK) != 0);
  s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(s));
  CHECK(tu_int(s, "SELECT count(*) FROM t") == n + 1);
  tu_exec(s, "INSERT INTO t(who) VALUES ('stock')");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  if (have_shell) {
    snprintf(cmd, sizeof cmd, "/usr/bin/sqlite3 '%s' 'PRAGMA integrity_check; SELECT count(*) FROM t;'", path);
    CHECK(run_capture(cmd, out, sizeof out) == 0);
    char want[64];
    snprintf(want, sizeof want, "ok\n%lld\n", (long long)n + 2);
    CHECK(strcmp(out, want) == 0);
  }
  printf("%s: after kill -9, stock SQLite refused until the engine replayed %lld rows\n", prog,
         (long long)n);
}

/* Two crashes in a row: the process that replayed the first one's log and compacted
** must keep the mark in the file (it wrote page 1 with the plain versions, 2 and 2: a
** stock connection then read a half-compacted file and wrote rows that the next replay
** overwrote, a malformed database). */
static void crash_twice(const char *dir) {
  char path[300];
  snprintf(path, sizeof path, "%s/twice.db", dir);
  kid k;
  int64_t n1 = 0, n2 = 0;
  kid_start(&k, child_crash, path);
  read_all(k.rd, &n1, sizeof n1);
  CHECK(kid_wait(&k) == 128 + SIGKILL);
  CHECK(marked_on_disk(path));
  kid_start(&k, child_crash_compacted, path);
  read_all(k.rd, &n2, sizeof n2);
  CHECK(kid_wait(&k) == 128 + SIGKILL);
  check_left_marked(path, n1 + n2, "the second crash left its log beside a file without the mark");
  printf("%s: two crashes in a row (%lld and %lld rows): the mark stayed, stock SQLite "
         "refused until the replay\n", prog, (long long)n1, (long long)n2);
}

/* mw_mp=1: a process that joined a marked file, outlived the first one and compacted
** keeps the mark in the file; killed then, it leaves its log beside a file that stock
** SQLite must not read. */
static void joiner_keeps_mark(const char *dir) {
  char path[300];
  snprintf(path, sizeof path, "%s/joiner.db", dir);
  sqlite3 *db = tu_open(path, "mw_mp=1");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT, pad BLOB)");
  CHECK(marked_on_disk(path));
  char *args[] = { "mp-survivor", path, 0 };
  pid_t pid = tu_spawn(self_exe, 0, 0, args);
  tu_await_child_file(path, ".ready", pid);
  CHECK_RC(sqlite3_close(db), SQLITE_OK); /* not the last: the joiner goes on alone */
  tu_make_file(path, ".go");
  CHECK(tu_wait_status(pid) == 128 + SIGKILL);
  char f[400];
  snprintf(f, sizeof f, "%s.rows", path);
  FILE *fp = fopen(f, "r");
  CHECK(fp != 0);
  long long n = 0;
  CHECK(fscanf(fp, "%lld", &n) == 1);
  fclose(fp);
  check_left_marked(path, n, "the joining process's compaction took the mark out of the file");
  printf("%s: a joining process outlived the first, compacted and died (%lld rows): the mark "
         "stayed, stock SQLite refused until the replay\n", prog, (long long)n);
}

/* fork() of a process that has the database open. The child of a process with an engine
** database open used to find the parent's database in the engine's inherited state: its
** open succeeded and its commits were acknowledged into state that nobody saw (lost);
** with mw_mp=1 it hung on the background workers' copied condition variable. */
static sqlite3 *forked_parent_db;
static void child_forked(const char *path, int rd, int wr) {
  (void)rd;
  char msg[1024];
  int r = try_engine_open(path, msg, sizeof msg); /* default: another process has it */
  int refused = r != SQLITE_OK && strstr(msg, "open in another process") != 0;
  /* Closing the inherited connection leaves the parent's database alone (its log, its mark). */
  int closed = sqlite3_close(forked_parent_db) == SQLITE_OK;
  char uri[600];
  snprintf(uri, sizeof uri, "%s.mp", path);
  sqlite3 *mp = tu_open(uri, "mw_mp=1"); /* joins the parent's mw_mp=1 database */
  for (int i = 0; i < 50; i++) tu_exec(mp, "INSERT INTO t(who) VALUES ('child')");
  CHECK_RC(sqlite3_close(mp), SQLITE_OK);
  char res[2] = { refused ? 'y' : 'n', closed ? 'y' : 'n' };
  write_all(wr, res, 2);
}

/* ThreadSanitizer refuses to start threads in a child forked from a process with
** threads ("starting new threads after multi-threaded fork is not supported"), and the
** child's own open starts the engine's background workers: the case runs without it. */
static void forked_child(const char *dir) {
  if (UNDER_TSAN) {
    printf("%s: forked_child skipped under ThreadSanitizer (no threads after a fork)\n", prog);
    return;
  }
  /* qemu-user aborts when a forked child of a threaded program starts threads
  ** ("cpu_exec: assertion failed"); the case runs on the native target only. */
  const char *emu = getenv("MW_TEST_EMULATOR");
  if (emu && *emu) {
    printf("%s: forked_child skipped under %s (qemu-user: no threads after a fork)\n", prog, emu);
    return;
  }
  char path[300], mpp[320], log[320];
  snprintf(path, sizeof path, "%s/forked.db", dir);
  snprintf(mpp, sizeof mpp, "%s.mp", path);
  snprintf(log, sizeof log, "%s-mw", path);
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT)");
  tu_exec(db, "INSERT INTO t(who) VALUES ('parent')");
  sqlite3 *mp = tu_open(mpp, "mw_mp=1");
  tu_exec(mp, "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT)");
  forked_parent_db = db;
  kid k;
  kid_start(&k, child_forked, path);
  char res[2];
  read_all(k.rd, res, 2);
  CHECK(kid_wait(&k) == 0);
  if (res[0] != 'y' || res[1] != 'y') {
    fprintf(stderr, "%s: forked child: open refused %c, inherited close ok %c\n", prog, res[0], res[1]);
    CHECK(0);
  }
  CHECK(access(log, F_OK) == 0); /* the child's close of the inherited connection kept it */
  tu_exec(db, "INSERT INTO t(who) VALUES ('parent')");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 2);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  CHECK(tu_int(mp, "SELECT count(*) FROM t WHERE who = 'child'") == 50);
  CHECK_RC(sqlite3_close(mp), SQLITE_OK);
  stock_expect(path, "SELECT count(*) FROM t", 2);
  stock_expect(mpp, "SELECT count(*) FROM t", 50);
  printf("%s: a forked child: its open of the parent's database refused, the inherited "
         "connection closed harmlessly, 50 rows committed with mw_mp=1 beside the parent\n", prog);
}

/* The re-executed child of crash_after_unmark: commits 20 rows and closes with the
** crash point close_after_unmark armed (the close aborts between clearing the header
** mark and deleting the log). */
static int child_close_crash(const char *path) {
  sqlite3 *db = tu_open(path, "");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT)");
  for (int i = 0; i < 20; i++) tu_exec(db, "INSERT INTO t(who) VALUES ('engine')");
  sqlite3_close(db);
  return 3; /* not reached: the crash point aborts */
}

/* A crash after the last close cleared the mark, before the log went: the log's replay
** must not overwrite what a stock connection writes then. */
static void crash_after_unmark(const char *dir) {
  char path[300], log[320];
  snprintf(path, sizeof path, "%s/unmark.db", dir);
  snprintf(log, sizeof log, "%s-mw", path);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* A fresh image: the crash point reads MW_CRASH_AT once per process. */
    setenv("MW_CRASH_AT", "close_after_unmark", 1);
    /* Under qemu-user without binfmt_misc the program re-executes itself through the
    ** emulator that MW_TEST_EMULATOR names (build.zig sets it). */
    const char *emu = getenv("MW_TEST_EMULATOR");
    if (emu && *emu) execlp(emu, emu, self_exe, "close-crash", path, (char *)0);
    else execl(self_exe, self_exe, "close-crash", path, (char *)0);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(access(log, F_OK) == 0);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_int(s, "SELECT count(*) FROM t") == 20);
  tu_exec(s, "INSERT INTO t(who) VALUES ('stock')");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  sqlite3 *db = tu_open(path, "");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 21);
  CHECK(tu_int(db, "SELECT count(*) FROM t WHERE who = 'stock'") == 1);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  stock_expect(path, "SELECT count(*) FROM t", 21);
  printf("%s: crash between clearing the mark and deleting the log: a stock write survives "
         "the reopen\n", prog);
}

/* One file under two names in one process: one database. */
static void hard_links(const char *dir) {
  char a[300], b[300], msg[1024];
  snprintf(a, sizeof a, "%s/link-a.db", dir);
  snprintf(b, sizeof b, "%s/link-b.db", dir);
  sqlite3 *da = tu_open(a, "");
  tu_exec(da, "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT); INSERT INTO t(who) VALUES ('a')");
  CHECK(link(a, b) == 0);
  sqlite3 *db = tu_open(b, "");
  /* Each sees the other's commits at once: one page store, one log. */
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 1);
  for (int i = 0; i < 100; i++) {
    tu_exec(i % 2 ? da : db, "INSERT INTO t(who) VALUES ('x')");
    CHECK(tu_int(i % 2 ? db : da, "SELECT count(*) FROM t") == i + 2);
  }
  CHECK(tu_stat(da, MW_STAT_VISIBLE_EPOCH) == tu_stat(db, MW_STAT_VISIBLE_EPOCH));
  /* Conflicting writes through the two names are validated against each other. */
  tu_exec(da, "BEGIN; UPDATE t SET who = 'A' WHERE id = 1");
  tu_exec(db, "BEGIN; UPDATE t SET who = 'B' WHERE id = 1");
  tu_exec(da, "COMMIT");
  CHECK((tu_try(db, "COMMIT") & 0xff) == SQLITE_BUSY);
  if (!sqlite3_get_autocommit(db)) tu_exec(db, "ROLLBACK");
  /* mw=0 under the other name is refused as under the same name. */
  char uri[600];
  snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter&mw=0", b);
  sqlite3 *st = 0;
  CHECK(sqlite3_open_v2(uri, &st, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, 0) != SQLITE_OK);
  snprintf(msg, sizeof msg, "%s", sqlite3_errmsg(st));
  CHECK(strstr(msg, "open through the engine in this process") != 0);
  sqlite3_close(st);
  CHECK_RC(sqlite3_close(da), SQLITE_OK);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  sqlite3 *s = tu_open_stock(b, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(s));
  CHECK(tu_int(s, "SELECT count(*) FROM t") == 101);
  CHECK(tu_int(s, "SELECT who = 'A' FROM t WHERE id = 1") == 1);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  printf("%s: two hard links, one database\n", prog);
}

/* A file renamed while open is the same database under its new name; a new file
** at the old name is another one, refused while the old one is open. */
static void rename_open(const char *dir) {
  char p[300], q[300], msg[1024];
  snprintf(p, sizeof p, "%s/old.db", dir);
  snprintf(q, sizeof q, "%s/moved.db", dir);
  sqlite3 *dp = tu_open(p, "");
  tu_exec(dp, "CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT); INSERT INTO t(who) VALUES ('p')");
  CHECK(rename(p, q) == 0);
  sqlite3 *dq = tu_open(q, "");
  CHECK(tu_int(dq, "SELECT count(*) FROM t") == 1);
  tu_exec(dq, "INSERT INTO t(who) VALUES ('q')");
  CHECK(tu_int(dp, "SELECT count(*) FROM t") == 2);
  /* A new file at the old name, made by stock SQLite. */
  sqlite3 *s = tu_open_stock(p, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  tu_exec(s, "CREATE TABLE other(x); INSERT INTO other VALUES (7)");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  int rc = try_engine_open(p, msg, sizeof msg);
  if (rc == SQLITE_OK || !strstr(msg, "new file under the name")) {
    fprintf(stderr, "new file at the old name: rc %d, message '%s'\n", rc, msg);
    CHECK(0);
  }
  tu_exec(dp, "INSERT INTO t(who) VALUES ('p again')");
  CHECK_RC(sqlite3_close(dp), SQLITE_OK);
  CHECK_RC(sqlite3_close(dq), SQLITE_OK);
  /* Every row in the moved file; the new file untouched, and its own database now. */
  stock_expect(q, "SELECT count(*) FROM t", 3);
  sqlite3 *dn = tu_open(p, "");
  CHECK(tu_int(dn, "SELECT x FROM other") == 7);
  CHECK(tu_int(dn, "SELECT count(*) FROM sqlite_schema WHERE name = 't'") == 0);
  tu_exec(dn, "INSERT INTO other VALUES (8)");
  CHECK_RC(sqlite3_close(dn), SQLITE_OK);
  stock_expect(p, "SELECT sum(x) FROM other", 15);
  printf("%s: renamed while open: one database; a new file at the old name refused\n", prog);
}

int main(int argc, char **argv) {
  self_exe = argv[0];
  if (argc == 3 && strcmp(argv[1], "mp-survivor") == 0) return child_mp_survivor(argv[2]);
  if (argc == 3 && strcmp(argv[1], "close-crash") == 0) {
    CHECK_RC(sqlite3_initialize(), SQLITE_OK);
    return child_close_crash(argv[2]);
  }
  const char *dir = tu_tmpdir("processes");
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  snprintf(extension, sizeof extension, "%s", argc > 1 ? argv[1] : "zig-out/lib/libmultiwriter.so");
  if (extension[0] != '/') {
    char cwd[512];
    CHECK(getcwd(cwd, sizeof cwd) != 0);
    char rel[1024];
    snprintf(rel, sizeof rel, "%s", extension);
    snprintf(extension, sizeof extension, "%s/%s", cwd, rel);
  }
  have_shell = access("/usr/bin/sqlite3", X_OK) == 0;
  /* The extension of a build for another target (emulated, or another libc) is not for
  ** the host's shell: the stock checks still run (the file format is the same), the two
  ** shells with .load do not. */
  const char *foreign = getenv("MW_TEST_FOREIGN");
  int emulated = tu_under_emulator() || (foreign && *foreign);
  if (!have_shell) printf("%s: no /usr/bin/sqlite3, shell checks skipped\n", prog);
  else if (emulated) printf("%s: a build for another target, the shells with .load skipped\n", prog);
  else if (access(extension, R_OK) != 0) {
    fprintf(stderr, "%s: the extension %s is missing (zig build)\n", prog, extension);
    return 1;
  }
  /* MW_PROCESSES_CASE=<name> runs one case (to see each one fail on purpose). */
  static const struct { const char *name; void (*fn)(const char *); } cases[] = {
    { "two_engines", two_engines }, { "moved_lock_bytes", moved_lock_bytes },
    { "two_shells", two_shells },
    { "stock_beside", stock_beside }, { "crash_then_stock", crash_then_stock },
    { "crash_after_unmark", crash_after_unmark }, { "crash_twice", crash_twice },
    { "joiner_keeps_mark", joiner_keeps_mark }, { "forked_child", forked_child },
    { "hard_links", hard_links }, { "rename_open", rename_open },
  };
  const char *only = getenv("MW_PROCESSES_CASE");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (emulated && cases[i].fn == two_shells) continue;
    if (only == 0 || strcmp(only, cases[i].name) == 0) cases[i].fn(dir);
  }
  tu_rmdir();
  printf("%s: ok\n", prog);
  return 0;
}
