/* A process that exits with engine databases still open (docs/design/processes.md, "Process
** exit"): Bun ends with quick_exit(), Deno with exit(), and a Worker that is still
** running, was terminated or was unref'd never closes its connection.
**  - exit() and quick_exit() with a connection never closed: the database is finished
**    as by its last close: no log left, the mark out, stock SQLite reads every row;
**  - a thread that committed and sits idle with its connection open (a Worker still
**    running): the same;
**  - a thread inside a read transaction at exit: the bounded wait gives up, the
**    database is left as a crash leaves it (log and mark stay), and the next open
**    replays every row;
**  - a thread committing in a loop when the process exits: every commit it saw
**    acknowledged is there after (the log gone, or replayed);
**  - mw_mp=1, the last process: finished as by its last close, the shared file gone too;
**  - mw_mp=1 with another process open: left to it (its connection sees every row and
**    goes on committing; its close leaves only the .db).
** Each case runs in a child: this program again, "<exe> child <case> <path>". */
#include "test_engine_util.h"
#include "test_spawn_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *prog = "test_engine_exit";
static const char *self_exe;

/* ---------------------------------------------------------------- children */

static const char *child_path;

static void commit_rows(sqlite3 *db, int n) {
  for (int i = 0; i < n; i++) tu_exec(db, "INSERT INTO t(v) VALUES (randomblob(100))");
}

static sqlite3 *open_with_table(const char *path, const char *params) {
  sqlite3 *db = tu_open(path, params);
  tu_exec(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)");
  return db;
}

/* An idle thread: commits 50 rows on its own connection, says so, then waits forever
** with the connection open (a Worker still running, waiting for a message). */
static void *idle_thread(void *arg) {
  (void)arg;
  sqlite3 *db = open_with_table(child_path, "");
  commit_rows(db, 50);
  tu_make_file(child_path, ".idle");
  for (;;) pause();
  return 0;
}

/* A reader: inside a read transaction when the process exits. */
static void *reader_thread(void *arg) {
  (void)arg;
  sqlite3 *db = tu_open(child_path, "");
  tu_exec(db, "BEGIN");
  CHECK(tu_int(db, "SELECT count(*) FROM t") == 100);
  tu_make_file(child_path, ".reading");
  for (;;) pause();
  return 0;
}

/* A writer: commits until the process ends; after each acknowledged commit the count
** goes into <path>.acked (fixed width, rewritten in place). A commit refused once the
** database was closed at exit ends the loop (writer_refused: its code). */
static int writer_refused;
static int writer_acked; /* acknowledged commits so far (the child waits for some) */
static void *writer_thread(void *arg) {
  (void)arg;
  sqlite3 *db = tu_open(child_path, "");
  char f[400], buf[32];
  snprintf(f, sizeof f, "%s.acked", child_path);
  int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0);
  for (long long n = 1;; n++) {
    int rc = tu_try(db, "INSERT INTO t(v) VALUES (randomblob(100))");
    if (rc != SQLITE_OK) {
      __atomic_store_n(&writer_refused, rc, __ATOMIC_RELEASE);
      break;
    }
    int len = snprintf(buf, sizeof buf, "%20lld\n", n);
    CHECK(pwrite(fd, buf, (size_t)len, 0) == len);
    __atomic_store_n(&writer_acked, (int)n, __ATOMIC_RELEASE);
    usleep(200); /* as a server's writer between requests: the close at exit finds a gap */
  }
  for (;;) pause();
  return 0;
}

static void start(void *(*fn)(void *)) {
  pthread_t th;
  CHECK(pthread_create(&th, 0, fn, 0) == 0);
  CHECK(pthread_detach(th) == 0);
}

/* Registered before the engine's own exit handler, so run after it: the process
** lingers, and the writer's commits after the close at exit must be refused. */
static void linger_after_engine(void) {
  for (int i = 0; i < 2000 && !__atomic_load_n(&writer_refused, __ATOMIC_ACQUIRE); i++) usleep(1000);
  char f[400];
  snprintf(f, sizeof f, "%s.refused", child_path);
  FILE *fp = fopen(f, "w");
  CHECK(fp != 0);
  fprintf(fp, "%d\n", __atomic_load_n(&writer_refused, __ATOMIC_ACQUIRE));
  fclose(fp);
}

static int child(const char *how, const char *path) {
  child_path = path;
  if (strcmp(how, "writer") == 0) CHECK(atexit(linger_after_engine) == 0);
  int mp = strcmp(how, "mp") == 0;
  sqlite3 *db = open_with_table(path, mp ? "mw_mp=1" : "");
  commit_rows(db, 100);
  if (strcmp(how, "idle") == 0) {
    start(idle_thread);
    tu_await_file(path, ".idle");
  } else if (strcmp(how, "reader") == 0) {
    start(reader_thread);
    tu_await_file(path, ".reading");
  } else if (strcmp(how, "writer") == 0) {
    start(writer_thread);
    /* Exits 300 ms on, once the writer has 20 acknowledged commits (waited for, 60 s at
    ** most): a fixed 300 ms could pass on a loaded emulator before its first one, and
    ** the parent then found no count in <path>.acked (or, the thread not yet open, no
    ** commit refused after the close). */
    uint64_t t0 = tu_now_ns();
    while (__atomic_load_n(&writer_acked, __ATOMIC_ACQUIRE) < 20 ||
           tu_now_ns() - t0 < 300000000ull) {
      CHECK(tu_now_ns() - t0 < 60000000000ull);
      usleep(1000);
    }
  }
#if defined(__linux__)
  if (strcmp(how, "quick") == 0) quick_exit(0);
#endif
  exit(0); /* db is never closed */
}

/* ---------------------------------------------------------------- checks */

static int run_child(const char *how, const char *path, double *secs) {
  char *args[] = { "child", (char *)how, (char *)path, 0 };
  uint64_t t0 = tu_now_ns();
  pid_t pid = tu_spawn(self_exe, 0, 0, args);
  int st = tu_wait_status(pid);
  *secs = (double)(tu_now_ns() - t0) / 1e9;
  return st;
}

static int log_left(const char *path) { return tu_file_exists(path, "-mw"); }

/* What stock SQLite (the plain unix VFS) finds: the row count, or -1 when the file
** still carries the engine's mark ("file is not a database"). */
static int64_t stock_rows(const char *path) {
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  int64_t n = -1;
  if (tu_try(s, "SELECT count(*) FROM sqlite_master") == SQLITE_OK) {
    CHECK(tu_integrity_ok(s));
    n = tu_int(s, "SELECT count(*) FROM t");
  } else {
    CHECK(tu_try(s, "SELECT count(*) FROM sqlite_master") == SQLITE_NOTADB);
  }
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  return n;
}

/* Through the engine (which replays a log left behind), then closed. */
static int64_t engine_rows(const char *path, const char *params) {
  sqlite3 *db = tu_open(path, params);
  int64_t n = tu_int(db, "SELECT count(*) FROM t");
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return n;
}

/* The process ended without closing: only the .db is left, and it holds every row. */
static void closed_at_exit(const char *how, int64_t rows, const char *broken) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s.db", tu_dir, how);
  double secs = 0;
  CHECK(run_child(how, path, &secs) == 0);
  if (log_left(path) || stock_rows(path) != rows) {
    fprintf(stderr, "%s: %s: %s\n", prog, how, broken);
    CHECK(0);
  }
  printf("%s: %s: closed at exit in %.2f s, %lld rows in a plain file\n", prog, how, secs,
         (long long)rows);
}

static void reader_at_exit(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/reader.db", tu_dir);
  double secs = 0;
  CHECK(run_child("reader", path, &secs) == 0);
  /* Left as after a crash: the log stays and stock SQLite is kept out until the replay. */
  CHECK(log_left(path));
  CHECK(stock_rows(path) == -1);
  CHECK(secs < 30);
  CHECK(engine_rows(path, "") == 100);
  CHECK(!log_left(path) && stock_rows(path) == 100);
  printf("%s: reader: a read transaction at exit, left after %.2f s as a crash leaves it; "
         "replayed: 100 rows\n", prog, secs);
}

static long long read_number(const char *path, const char *suffix) {
  char f[400];
  snprintf(f, sizeof f, "%s%s", path, suffix);
  FILE *fp = fopen(f, "r");
  CHECK(fp != 0);
  long long v = 0;
  CHECK(fscanf(fp, "%lld", &v) == 1);
  fclose(fp);
  return v;
}

/* One run of a writer still committing at exit; returns 1 when the database was closed
** at exit (else the log was left, as a crash leaves it: the close waits at most 1 s for
** the commits in flight, and a writer committing without a pause may keep it from ever
** finding none). Either way every acknowledged commit must be there. */
static int writer_run(int attempt) {
  char path[300];
  snprintf(path, sizeof path, "%s/writer%d.db", tu_dir, attempt);
  double secs = 0;
  CHECK(run_child("writer", path, &secs) == 0);
  int left = log_left(path);
  long long acked = read_number(path, ".acked");
  long long refused = read_number(path, ".refused");
  /* Closed at exit, the database refuses the commits that follow before they reach
  ** the log (its file is closed: its descriptor may be another file's by then). */
  if (!left && refused != SQLITE_IOERR_CLOSE) {
    fprintf(stderr, "%s: writer: a commit after the close at exit got %lld, not "
            "SQLITE_IOERR_CLOSE\n", prog, refused);
    CHECK(0);
  }
  int64_t n = engine_rows(path, "");
  if (n < 100 + acked) {
    fprintf(stderr, "%s: writer: %lld rows, %lld acknowledged\n", prog, (long long)n, 100 + acked);
    CHECK(0);
  }
  printf("%s: writer: %lld commits acknowledged before exit, all there (%s; the next one "
         "refused: %s)\n", prog, acked, left ? "log left and replayed" : "closed at exit",
         refused ? sqlite3_errstr((int)refused) : "none");
  return !left;
}

/* Until a run closed at exit (a third of the runs here left the log): the refusal of the
** commits after the close is checked only then. */
static void writer_at_exit(void) {
  for (int attempt = 0; attempt < 8; attempt++)
    if (writer_run(attempt)) return;
  fprintf(stderr, "%s: writer: the database was closed at exit in none of 8 runs\n", prog);
  CHECK(0);
}

static void mp_at_exit(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/mp.db", tu_dir);
  double secs = 0;
  CHECK(run_child("mp", path, &secs) == 0);
  if (log_left(path) || tu_file_exists(path, "-mwshm") || stock_rows(path) != 100) {
    fprintf(stderr, "%s: mw_mp=1: the last process left its log or shared file at exit\n", prog);
    CHECK(0);
  }
  printf("%s: mw_mp=1, the last process: closed at exit in %.2f s, 100 rows in a plain file\n",
         prog, secs);
  /* Another process (this one) has the database open: the exit leaves it to it. */
  snprintf(path, sizeof path, "%s/mp2.db", tu_dir);
  sqlite3 *other = open_with_table(path, "mw_mp=1");
  CHECK(run_child("mp", path, &secs) == 0);
  CHECK(log_left(path) && tu_file_exists(path, "-mwshm"));
  CHECK(tu_int(other, "SELECT count(*) FROM t") == 100);
  tu_exec(other, "INSERT INTO t(v) VALUES (randomblob(10))");
  CHECK_RC(sqlite3_close(other), SQLITE_OK);
  CHECK(!log_left(path) && !tu_file_exists(path, "-mwshm") && stock_rows(path) == 101);
  printf("%s: mw_mp=1 beside another process: left to it, which saw 100 rows, committed and "
         "closed: 101 rows in a plain file\n", prog);
}

int main(int argc, char **argv) {
  self_exe = tu_abs_exe(argv[0]);
  if (argc == 4 && strcmp(argv[1], "child") == 0) return child(argv[2], argv[3]);
  tu_tmpdir("exit");
  closed_at_exit("exit", 100, "a connection left open at exit() kept its log");
#if defined(__linux__)
  closed_at_exit("quick", 100, "a connection left open at quick_exit() (Bun) kept its log");
#endif
  closed_at_exit("idle", 150, "an idle thread's connection left open at exit kept its log");
  reader_at_exit();
  writer_at_exit();
  mp_at_exit();
  tu_rmdir();
  printf("%s: ok\n", prog);
  return 0;
}
