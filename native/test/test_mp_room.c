/* Room in the shared log (mw_mp=1; mp.c, "room in the log"): one process inserts some
** 40 MB of rows. The log's zeroed room is added a step at a time by the process's
** grower, off the publication lock (no commit waits 25 to 50 ms for a step of zeros),
** not by the committing holder under the lock: at most the first steps (the log
** opened with no room past its end; the first a quarter step) under the lock, most by
** the grower. Every row is
** there after the close, and stock SQLite finds the file sound.
** Then a slow grower (MW_PAUSE_AT=mp_room_zeroing:300: it waits 300 ms before it zeroes):
** a child process inserts past the claimed step while the grower waits, so its
** records must wait for the zeros (or be written over by them); it then dies by
** SIGKILL without closing, and the replay of its log must give back every row it
** acknowledged. A claim whose process died is test_mp's (kill round mp_room_zeroed). */
#include "test_engine_util.h"
#include "test_spawn_util.h"

#include <signal.h>
#include <sys/stat.h>

static const char *prog = "test_mp_room";

/* The child: `rows` inserts, each acknowledged one counted in <path>.acks; then
** SIGKILL, the log left behind. */
static int crash_writer(const char *path, int rows) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  sqlite3 *db = tu_open(path, "mw_mp=1");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB NOT NULL)");
  char f[400];
  snprintf(f, sizeof f, "%s.acks", path);
  FILE *fp = fopen(f, "w");
  CHECK(fp != 0);
  for (int i = 0; i < rows; i++) {
    CHECK_RC(sqlite3_exec(db, "INSERT INTO t(b) VALUES (randomblob(8000))", 0, 0, 0), SQLITE_OK);
    fprintf(fp, "%d\n", i + 1);
    fflush(fp);
  }
  fclose(fp);
  raise(SIGKILL);
  return 1;
}

static void slow_grower(const char *exe, int rows) {
  const char *path = tu_db_path("mp_room", "slow.db");
  char nrows[32];
  snprintf(nrows, sizeof nrows, "%d", rows);
  char *args[] = { "crash-writer", (char *)path, nrows, 0 };
  pid_t pid = tu_spawn(exe, "MW_PAUSE_AT", "mp_room_zeroing:300", args);
  CHECK(tu_wait_status(pid) == 128 + SIGKILL);
  char f[400];
  snprintf(f, sizeof f, "%s.acks", path);
  FILE *fp = fopen(f, "r");
  CHECK(fp != 0);
  int acked = 0, v;
  while (fscanf(fp, "%d", &v) == 1) acked = v;
  fclose(fp);
  CHECK(acked == rows);
  sqlite3 *db = tu_open(path, "mw_mp=1"); /* replays the log */
  int64_t n = tu_int(db, "SELECT count(*) FROM t WHERE length(b) = 8000");
  if (n != acked) fprintf(stderr, "%s: %lld rows after the replay, %d acknowledged\n", prog, (long long)n, acked);
  CHECK(n == acked);
  CHECK(tu_integrity_ok(db));
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  printf("%s: a grower 300 ms late, the writer killed: %d acknowledged rows, all replayed\n",
         prog, acked);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "crash-writer") == 0) return crash_writer(argv[2], atoi(argv[3]));
  const char *exe = tu_abs_exe(argv[0]);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *path = tu_db_path("mp_room", "room.db");
  const char *e = getenv("MW_TEST_SCALE");
  double scale = e && atof(e) > 0 ? atof(e) : 1.0;
  int rows = (int)(4000 * scale);
  if (rows < 1000) rows = 1000;
  sqlite3 *db = tu_open(path, "mw_mp=1");
  tu_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB NOT NULL)");
  /* The first commit of the empty log zeroed a quarter step (1 MiB) under the lock, not
  ** two steps: a process that commits once and closes (the sqlite3 shell in a script)
  ** paid 8 MiB of zeros for it. */
  char logf[400];
  snprintf(logf, sizeof logf, "%s-mw", path);
  struct stat lst;
  CHECK(stat(logf, &lst) == 0);
  printf("%s: the log after the first commit: %lld bytes\n", prog, (long long)lst.st_size);
  CHECK(lst.st_size > 0 && lst.st_size <= (1 << 20));
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "INSERT INTO t(b) VALUES (randomblob(8000))", -1, &st, 0),
           SQLITE_OK);
  static const int stat[3] = { MW_STAT_LOG_ROOM_INLINE, MW_STAT_LOG_ROOM_CLAIMED,
                               MW_STAT_LOG_ROOM_CLAIMED_NOW };
  int64_t before[3];
  for (int i = 0; i < 3; i++) before[i] = tu_stat(db, stat[i]);
  for (int i = 0; i < rows; i++) {
    CHECK_RC(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  int64_t steps[3];
  for (int i = 0; i < 3; i++) steps[i] = tu_stat(db, stat[i]) - before[i];
  CHECK(tu_int(db, "SELECT count(*) FROM t") == rows);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  CHECK(tu_integrity_ok(s));
  CHECK(tu_int(s, "SELECT count(*) FROM t WHERE length(b) = 8000") == rows);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  printf("%s: %d rows of 8000 bytes; steps of room: %lld under the publication lock, %lld by "
         "the grower (%lld of them run by a holder that needed them at once)\n", prog, rows,
         (long long)steps[0], (long long)steps[1], (long long)steps[2]);
  /* 8000 bytes a row are three pages, some 12 KB of log a commit: about 12 steps of 4 MB
  ** at scale 1 (3 at the sanitizers' 0.25), every one but the first off the lock. */
  CHECK(steps[1] >= 2);
  CHECK(steps[0] <= 2);
  CHECK(steps[1] - steps[2] >= 1); /* the grower ran some itself */
  slow_grower(exe, 2000); /* at any scale: enough records to pass the claimed step while the grower waits */
  tu_rmdir();
  printf("%s: ok\n", prog);
  return 0;
}
