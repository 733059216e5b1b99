/* test_crash: acknowledged commits survive a kill -9, partial commits never appear.
**
** The parent forks a writer child per round. The child opens the database through the
** engine (vfs=multiwriter, a small log so that compaction runs during the round) with
** several threads; each thread runs bank transfers in transactions: two account rows,
** the thread's counter row and one new ledger row (its id is the transaction id, with a
** random payload that splits pages and uses overflow pages; now and then an old
** payload is dropped, which frees pages). Only after COMMIT returned SQLITE_OK does the
** thread write the transaction id to a pipe. One writer runs with synchronous=NORMAL
** (acknowledged once written, synced later): its commits must survive a kill, and may be
** lost by a power loss (then they must never come back), the others use the default
** FULL and must survive both. The parent kills the child:
**   - with SIGKILL after a random fraction of a second, or
**   - at a crash point armed inside the engine (MW_CRASH_AT=<point>:<n>: the n-th time
**     the point is reached the process aborts): after the log submit, before
**     visibility, in the middle of a compaction, after the compacted database file was
**     synced but before the log learned it, in the log's switch to the shortened
**     file while commits are written to both files (before the rest is copied, and
**     after the rename, before the directory sync).
** Every other round is a power loss (crash_powerloss.h): what the engine wrote to the
** log or the database file but did not sync yet is lost with the process, as on a machine that
** loses power; the other rounds are plain kills (the page cache keeps every write).
** After each round a verifier (forked) reopens the database through the engine and
** checks: integrity_check is ok; every transaction ever acknowledged is present; the
** rows of earlier rounds are unchanged in number; at most one unacknowledged
** transaction per writer thread of this round is present (the ones in flight); the
** balances sum to the initial total and every balance equals what the ledger says
** (no half transfer), every counter equals its thread's number of ledger rows. The
** verifier then closes cleanly (the engine compacts and removes the log) or, every
** third round, exits without closing, so that the next writer starts from a recovered
** but uncompacted log. At the end the parent closes cleanly and checks the file with
** stock SQLite (vfs "unix") too.
**
** Env: MW_CRASH_SEED (reproduce a run), MW_CRASH_KEEP (keep the temp directory), MW_TEST_SCALE (fewer rounds, e.g. 0.25 under
** TSan). Without the engine's crash-point hook (the weak symbol mw_crash_point), only
** the SIGKILL rounds run.
*/
#include "test_engine_util.h"
#include "crash_powerloss.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

/* The engine's crash-point hook (platform/crash.h); weak so that this test builds without it. */
extern void mw_crash_point(const char *name) __attribute__((weak));

enum {
  NACCT = 24,           /* accounts, one per page (padded) */
  NTHREADS = 4,         /* writer threads in the child */
  INITIAL = 1000,       /* initial balance of each account */
  ROUND_SPAN = 1000000, /* transaction ids of round r: r*ROUND_SPAN + slot*SLOT_SPAN + k */
  SLOT_SPAN = 100000,
  MAX_ACKS = 400000,
  NORMAL_SLOT = NTHREADS - 1, /* this writer runs with PRAGMA synchronous=NORMAL */
};

/* Flags in the acknowledged ids (bits far above any id). */
#define ACK_NORMAL (1ULL << 62) /* acknowledged by the synchronous=NORMAL writer */
#define ACK_LOST (1ULL << 61)   /* a NORMAL commit a power loss took back (verifier sets it) */
#define ACK_ID(v) ((v) & (ACK_LOST - 1))

static const char *crash_points[] = {
  "commit_after_submit", "commit_before_visible", "compact_mid", "compact_before_log",
  "log_switch_mirror", "log_switch_renamed",
};
#define NPOINTS (int)(sizeof crash_points / sizeof crash_points[0])

/* Half the SIGKILL rounds open with mw_mp=1 (multi-process mode, one process): its
** commit path publishes each record and syncs NORMAL commits at a tick, as several
** processes do (power loss across processes cannot be modelled here: the shim keeps
** each process's unsynced writes, a sync in another process would not flush them). */
static const char *db_params = "mw_log_max_mb=1";
#define PARAMS_ONE "mw_log_max_mb=1"
#define PARAMS_MP "mw_log_max_mb=1&mw_mp=1"
static char db_path[300];

/* ---------------------------------------------------------------- randomness */

static uint64_t rng_next(uint64_t *s) {
  /* xorshift64*: good enough to pick accounts, sizes and delays. */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)(ts.tv_nsec / 1000000);
}

/* ---------------------------------------------------------------- the writer child */

typedef struct writer_arg {
  int slot;
  int round;
  int fd;
  uint64_t seed;
} writer_arg;

static int is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/* Runs one statement to completion; returns the extended result code. */
static int step_done(sqlite3 *db, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return SQLITE_OK;
  if (rc == SQLITE_ROW) return SQLITE_OK;
  return sqlite3_extended_errcode(db);
}

static void child_fail(const char *what, sqlite3 *db, int rc) {
  fprintf(stderr, "test_crash: writer: %s: %d %s\n", what, rc, db ? sqlite3_errmsg(db) : "");
  _exit(3);
}

static void *writer(void *p) {
  writer_arg *a = p;
  uint64_t rs = a->seed;
  sqlite3 *db = tu_open(db_path, db_params);
  /* NORMAL: acknowledged once written to the log, synced later: survives a kill, not
  ** necessarily a power loss. The other writers keep the default (FULL). */
  if (a->slot == NORMAL_SLOT) tu_exec(db, "PRAGMA synchronous=NORMAL");
  sqlite3_stmt *debit = 0, *credit = 0, *count = 0, *ins = 0, *drop = 0;
  struct { sqlite3_stmt **st; const char *sql; } prep[] = {
    { &debit, "UPDATE acct SET bal = bal - ?2 WHERE id = ?1" },
    { &credit, "UPDATE acct SET bal = bal + ?2 WHERE id = ?1" },
    { &count, "UPDATE ctr SET n = n + 1 WHERE slot = ?1" },
    { &ins, "INSERT INTO ledger(id, slot, src, dst, amt, pad) VALUES(?1, ?2, ?3, ?4, ?5, randomblob(?6))" },
    { &drop, "UPDATE ledger SET pad = NULL WHERE id = ?1" },
  };
  for (size_t i = 0; i < sizeof prep / sizeof prep[0]; i++) {
    int rc = sqlite3_prepare_v2(db, prep[i].sql, -1, prep[i].st, 0);
    if (rc != SQLITE_OK) child_fail(prep[i].sql, db, rc);
  }
  uint64_t first = (uint64_t)a->round * ROUND_SPAN + (uint64_t)a->slot * SLOT_SPAN;
  for (uint64_t k = 0; k < SLOT_SPAN; k++) {
    uint64_t txid = first + k;
    for (int attempt = 0;; attempt++) {
      int src = (int)(rng_next(&rs) % NACCT) + 1;
      int dst = (int)(rng_next(&rs) % (NACCT - 1)) + 1;
      if (dst >= src) dst++;
      int amt = (int)(rng_next(&rs) % 100) + 1;
      int pad = (int)(rng_next(&rs) % 8 == 0 ? 2000 + rng_next(&rs) % 6000 : rng_next(&rs) % 1500);
      int rc = sqlite3_exec(db, "BEGIN", 0, 0, 0);
      if (rc != SQLITE_OK) child_fail("BEGIN", db, rc);
      sqlite3_bind_int(debit, 1, src);
      sqlite3_bind_int(debit, 2, amt);
      sqlite3_bind_int(credit, 1, dst);
      sqlite3_bind_int(credit, 2, amt);
      sqlite3_bind_int(count, 1, a->slot);
      sqlite3_bind_int64(ins, 1, (sqlite3_int64)txid);
      sqlite3_bind_int(ins, 2, a->slot);
      sqlite3_bind_int(ins, 3, src);
      sqlite3_bind_int(ins, 4, dst);
      sqlite3_bind_int(ins, 5, amt);
      sqlite3_bind_int(ins, 6, pad);
      rc = step_done(db, debit);
      if (rc == SQLITE_OK) rc = step_done(db, credit);
      if (rc == SQLITE_OK) rc = step_done(db, count);
      if (rc == SQLITE_OK) rc = step_done(db, ins);
      if (rc == SQLITE_OK && k > 0 && rng_next(&rs) % 6 == 0) {
        /* Drop the payload of one of this thread's earlier rows: frees pages. */
        sqlite3_bind_int64(drop, 1, (sqlite3_int64)(first + rng_next(&rs) % k));
        rc = step_done(db, drop);
      }
      if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", 0, 0, 0) == SQLITE_OK ? SQLITE_OK : sqlite3_extended_errcode(db);
      if (rc == SQLITE_OK) {
        /* Acknowledged: only now may the parent count on it. 8 bytes < PIPE_BUF: atomic. */
        uint64_t rec = txid | (a->slot == NORMAL_SLOT ? ACK_NORMAL : 0);
        if (write(a->fd, &rec, sizeof rec) != (ssize_t)sizeof rec) _exit(5);
        break;
      }
      if (!sqlite3_get_autocommit(db)) {
        int rrc = sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
        if (rrc != SQLITE_OK) child_fail("ROLLBACK", db, rrc);
      }
      if (!is_busy(rc)) child_fail("transaction", db, rc);
      if (attempt > 1000) child_fail("too many retries", db, rc);
    }
  }
  return 0;
}

/* Never returns: runs the writers until the parent kills the process (or a crash
** point aborts it). */
static void writer_child(int round, int fd, uint64_t seed, const char *armed, int powerloss) {
  pl_active = powerloss;
  struct rlimit no_core = { 0, 0 };
  setrlimit(RLIMIT_CORE, &no_core); /* aborts at crash points must not write cores */
  if (armed) setenv("MW_CRASH_AT", armed, 1);
  else unsetenv("MW_CRASH_AT");
  /* SQLite's unixOpen re-seeds its PRNG when it sees a new process id, through a
  ** global it reads and writes without a lock (randomnessPid): after fork the first
  ** opens of the threads would race on it (TSan says so). One open here does it first. */
  char scratch[340];
  snprintf(scratch, sizeof scratch, "%s.pid", db_path);
  sqlite3 *first = 0;
  if (sqlite3_open_v2(scratch, &first, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix") != SQLITE_OK) _exit(7);
  sqlite3_close(first);
  pthread_t th[NTHREADS];
  writer_arg args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i] = (writer_arg){ i, round, fd, seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(round * NTHREADS + i + 1)) };
    if (pthread_create(&th[i], 0, writer, &args[i]) != 0) _exit(6);
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], 0);
  _exit(0); /* all ids used up: never in practice; no close either way */
}

/* ---------------------------------------------------------------- the verifier */

/* Shared with the forked verifier (MAP_SHARED). */
typedef struct shared {
  int64_t rows;        /* ledger rows found */
  int64_t engine;      /* MW_STAT_ENGINE of the verifier's connection */
  int64_t log_left;    /* 1 when <db>-mw exists after a clean close */
  int64_t lost;        /* NORMAL commits lost by this round's power loss */
  char msg[256];
} shared;

static uint64_t *acked;  /* every acknowledged id with its ACK_ flags, all rounds (shared) */
static int nacked;
static shared *sh;

static void vfail(const char *fmt, const char *detail, long long a, long long b) {
  snprintf(sh->msg, sizeof sh->msg, fmt, detail, a, b);
  _exit(1);
}

/* Checks of the database open on db, common to the engine and stock SQLite. */
static void check_contents(sqlite3 *db, int round, int first_of_round, int64_t rows_before,
                           int powerloss) {
  if (!tu_integrity_ok(db)) vfail("%s integrity_check failed (%lld %lld)", "", 0, 0);
  int64_t sum = tu_int(db, "SELECT sum(bal) FROM acct");
  if (sum != (int64_t)NACCT * INITIAL) vfail("%s sum of balances %lld, wanted %lld", "", sum, (int64_t)NACCT * INITIAL);
  int64_t bad = tu_int(db,
    "SELECT count(*) FROM acct a WHERE a.bal != 1000"
    " + (SELECT coalesce(sum(amt), 0) FROM ledger WHERE dst = a.id)"
    " - (SELECT coalesce(sum(amt), 0) FROM ledger WHERE src = a.id)");
  if (bad) vfail("%s %lld accounts disagree with the ledger (partial transfer) %lld", "", bad, 0);
  bad = tu_int(db, "SELECT count(*) FROM ctr c WHERE c.n != (SELECT count(*) FROM ledger WHERE slot = c.slot)");
  if (bad) vfail("%s %lld counters disagree with the ledger (partial transaction) %lld", "", bad, 0);
  sqlite3_stmt *st = 0;
  CHECK_RC(sqlite3_prepare_v2(db, "SELECT count(*) FROM ledger WHERE id = ?1", -1, &st, 0), SQLITE_OK);
  int64_t lost_now = 0;
  for (int i = 0; i < nacked; i++) {
    uint64_t id = ACK_ID(acked[i]);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    CHECK_RC(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (acked[i] & ACK_LOST) {
      if (n != 0) vfail("%s NORMAL commit %lld lost in an earlier round came back (%lld)", "", (long long)id, n);
      continue;
    }
    if (n == 0 && powerloss && i >= first_of_round && (acked[i] & ACK_NORMAL)) {
      acked[i] |= ACK_LOST; /* allowed: NORMAL promises no durability against power loss */
      lost_now++;
      continue;
    }
    if (n != 1) vfail("%s acknowledged transaction %lld is missing (found %lld times)", "", (long long)id, n);
  }
  sqlite3_finalize(st);
  int64_t rows = tu_int(db, "SELECT count(*) FROM ledger");
  char sql[200];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM ledger WHERE id < %lld", (long long)round * ROUND_SPAN);
  int64_t older = tu_int(db, sql);
  if (older != rows_before) vfail("%s rows of earlier rounds: %lld, wanted %lld", "", older, rows_before);
  int64_t this_round = rows - older, acked_now = nacked - first_of_round - lost_now;
  if (this_round < acked_now || this_round > acked_now + NTHREADS)
    vfail("%s round rows %lld, acknowledged %lld (at most one in flight per thread)", "", this_round, acked_now);
  sh->rows = rows;
  sh->lost = lost_now;
}

/* Forks a verifier: opens through the engine, checks, closes cleanly or not. Returns
** the ledger row count. */
static int64_t verify(int round, int first_of_round, int64_t rows_before, int clean_close,
                      int powerloss) {
  memset(sh, 0, sizeof *sh);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    unsetenv("MW_CRASH_AT");
    sqlite3 *db = tu_open(db_path, db_params);
    sh->engine = tu_stat(db, MW_STAT_ENGINE);
    check_contents(db, round, first_of_round, rows_before, powerloss);
    if (!clean_close) _exit(0); /* leave the recovered log as it is */
    int rc = sqlite3_close(db);
    if (rc != SQLITE_OK) vfail("%s close: %lld %lld", "", rc, 0);
    char log[340];
    snprintf(log, sizeof log, "%s-mw", db_path);
    sh->log_left = access(log, F_OK) == 0;
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "test_crash: round %d: verification failed: %s (status 0x%x)\n", round,
            sh->msg[0] ? sh->msg : "see above", status);
    exit(1);
  }
  if (clean_close && sh->engine && sh->log_left) {
    fprintf(stderr, "test_crash: round %d: the log is left after the last close\n", round);
    exit(1);
  }
  return sh->rows;
}

/* ---------------------------------------------------------------- the parent */

static void setup_schema(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    sqlite3 *db = tu_open(db_path, db_params);
    tu_exec(db,
      "CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER NOT NULL, pad BLOB);"
      "CREATE TABLE ctr(slot INTEGER PRIMARY KEY, n INTEGER NOT NULL, pad BLOB);"
      "CREATE TABLE ledger(id INTEGER PRIMARY KEY, slot INTEGER NOT NULL, src INTEGER NOT NULL,"
      " dst INTEGER NOT NULL, amt INTEGER NOT NULL, pad BLOB);"
      "CREATE INDEX ledger_src ON ledger(src);"
      "CREATE INDEX ledger_dst ON ledger(dst);");
    /* One account and one counter per page: threads do not collide on them. */
    char sql[200];
    for (int i = 1; i <= NACCT; i++) {
      snprintf(sql, sizeof sql, "INSERT INTO acct VALUES(%d, %d, zeroblob(3000))", i, INITIAL);
      tu_exec(db, sql);
    }
    for (int i = 0; i < NTHREADS; i++) {
      snprintf(sql, sizeof sql, "INSERT INTO ctr VALUES(%d, 0, zeroblob(3000))", i);
      tu_exec(db, sql);
    }
    CHECK_RC(sqlite3_close(db), SQLITE_OK);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Drains complete 8-byte records from fd into acked; keeps a partial one in buf. */
static int drain(int fd, unsigned char *buf, int *have) {
  for (;;) {
    ssize_t n = read(fd, buf + *have, 4096 - (size_t)*have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    if (n <= 0) return 1; /* EOF: every writer is gone */
    *have += (int)n;
    int off = 0;
    for (; *have - off >= 8; off += 8) {
      uint64_t v;
      memcpy(&v, buf + off, 8);
      CHECK(nacked < MAX_ACKS);
      acked[nacked++] = v;
    }
    memmove(buf, buf + off, (size_t)(*have - off));
    *have -= off;
  }
}

typedef struct round_result {
  int acks;
  int signal;   /* the signal that ended the child */
} round_result;

/* One writer round: kill after kill_ms, or wait up to kill_ms for the armed point. */
static round_result run_round(int round, uint64_t seed, const char *armed, int kill_ms,
                              int powerloss) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  int before = nacked;
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    writer_child(round, fds[1], seed, armed, powerloss);
  }
  close(fds[1]);
  CHECK(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
  unsigned char buf[4096];
  int have = 0, eof = 0, killed = 0;
  uint64_t deadline = now_ms() + (uint64_t)kill_ms;
  while (!eof) {
    uint64_t t = now_ms();
    if (!killed && t >= deadline) {
      CHECK(kill(pid, SIGKILL) == 0);
      killed = 1;
    }
    struct pollfd pfd = { fds[0], POLLIN, 0 };
    int wait = killed ? 1000 : (int)(deadline - t);
    int pr = poll(&pfd, 1, wait);
    CHECK(pr >= 0 || errno == EINTR);
    if (pr > 0) eof = drain(fds[0], buf, &have);
  }
  close(fds[0]);
  CHECK(have == 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  if (!WIFSIGNALED(status)) {
    fprintf(stderr, "test_crash: round %d: the writer exited with status %d\n", round,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    exit(1);
  }
  return (round_result){ nacked - before, WTERMSIG(status) };
}

static pid_t parent_pid;

/* The temp directory goes on every exit of the parent, failures included (children
** inherit the handler: they must not run it). */
static void cleanup_at_exit(void) {
  if (getpid() != parent_pid) return;
  if (getenv("MW_CRASH_KEEP")) fprintf(stderr, "test_crash: kept %s (MW_CRASH_KEEP)\n", tu_dir);
  else tu_rmdir();
}

int main(void) {
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *e = getenv("MW_CRASH_SEED");
  uint64_t seed = e ? strtoull(e, 0, 0) : ((uint64_t)time(0) << 20) ^ (uint64_t)getpid();
  if (seed == 0) seed = 1;
  double scale = getenv("MW_TEST_SCALE") ? atof(getenv("MW_TEST_SCALE")) : 1.0;
  if (!(scale > 0)) scale = 1.0;
  int has_points = mw_crash_point != 0;
  int kill_rounds = (int)(12 * scale + 0.5);
  if (kill_rounds < 3) kill_rounds = 3;
  int armed_per_point = has_points ? (scale >= 0.5 ? 2 : 1) : 0;
  int rounds = kill_rounds + armed_per_point * NPOINTS;
  printf("test_crash: seed %llu (MW_CRASH_SEED), %d SIGKILL rounds, %d armed rounds%s\n",
         (unsigned long long)seed, kill_rounds, armed_per_point * NPOINTS,
         has_points ? "" : " (the engine has no crash-point hook mw_crash_point: none armed)");
  fflush(stdout);

  const char *dir = tu_tmpdir("crash");
  snprintf(db_path, sizeof db_path, "%s/crash.db", dir);
  parent_pid = getpid();
  CHECK(atexit(cleanup_at_exit) == 0);
  acked = mmap(0, sizeof(uint64_t) * MAX_ACKS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(acked != MAP_FAILED);
  sh = mmap(0, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(sh != MAP_FAILED);
  long *pls = mmap(0, 2 * sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(pls != MAP_FAILED);
  pls[0] = pls[1] = 0;
  pl_stats = pls;
  pl_db_suffix = "/crash.db";
  setup_schema();

  /* Round order: shuffled mix of SIGKILL rounds and armed rounds. */
  int kinds[64];
  CHECK(rounds <= 64);
  for (int i = 0; i < rounds; i++) kinds[i] = i < kill_rounds ? -1 : (i - kill_rounds) % NPOINTS;
  uint64_t rs = seed;
  for (int i = rounds - 1; i > 0; i--) {
    int j = (int)(rng_next(&rs) % (uint64_t)(i + 1));
    int t = kinds[i];
    kinds[i] = kinds[j];
    kinds[j] = t;
  }

  int64_t rows = 0;
  int reached[NPOINTS] = { 0 };
  int missed = 0, in_flight_found = 0, normal_lost = 0;
  uint64_t t_start = now_ms();
  for (int r = 1; r <= rounds; r++) {
    int first = nacked;
    char armed[80];
    const char *arm = 0;
    int kill_ms;
    if (kinds[r - 1] < 0) {
      kill_ms = 60 + (int)(rng_next(&rs) % 400);
    } else {
      int p = kinds[r - 1];
      /* Commit points: after some commits; compaction points: the first or second one. */
      int n = p < 2 ? 5 + (int)(rng_next(&rs) % 60) : 1 + (int)(rng_next(&rs) % 2);
      snprintf(armed, sizeof armed, "%s:%d", crash_points[p], n);
      arm = armed;
      /* The point should be reached long before (natively well within a second): SIGKILL
      ** otherwise. 30 s, not 6: at MW_TEST_SCALE 0.25 each point is armed in one round
      ** only, and a loaded emulator's writer can take several seconds to a second
      ** compaction, and a miss there fails the run ("never reached"). */
      kill_ms = 30000;
    }
    /* Every other round, the log and the database lose what was not synced when
    ** the child dies. */
    int powerloss = MW_HAVE_POWERLOSS && r % 2 == 1;
    int mp = !arm && r % 4 >= 2;
    db_params = mp ? PARAMS_MP : PARAMS_ONE;
    round_result rr = run_round(r, seed + (uint64_t)r, arm, kill_ms, powerloss);
    int hit = arm && rr.signal == SIGABRT;
    if (arm && hit) reached[kinds[r - 1]]++;
    if (arm && !hit) missed++;
    if (!arm) CHECK(rr.signal == SIGKILL);
    int clean = r % 3 != 0;
    int64_t now = verify(r, first, rows, clean, powerloss);
    int lost = (int)sh->lost;
    int extra = (int)(now - rows - (rr.acks - lost));
    in_flight_found += extra;
    normal_lost += lost;
    printf("test_crash: round %2d %-28s %-10s %-7s %4d acknowledged (%d NORMAL lost), %d in flight"
           " recovered, %lld rows, %s close\n",
           r, arm ? arm : (mp ? "SIGKILL mw_mp=1" : "SIGKILL"), powerloss ? "power-loss" : "kill",
           hit ? "aborted" : (arm ? "KILLED" : "killed"), rr.acks, lost, extra, (long long)now,
           clean ? "clean" : "no");
    fflush(stdout);
    rows = now;
  }

  /* Last: a clean close through the engine, then stock SQLite on the plain file. */
  db_params = PARAMS_ONE;
  int64_t final_rows = verify(rounds + 1, nacked, rows, 1, 0);
  CHECK(final_rows == rows);
  int64_t engine = sh->engine;
  sqlite3 *s = 0;
  CHECK_RC(sqlite3_open_v2(db_path, &s, SQLITE_OPEN_READONLY, "unix"), SQLITE_OK);
  memset(sh, 0, sizeof *sh);
  check_contents(s, rounds + 1, nacked, rows, 0);
  CHECK(sh->rows == rows);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);

  printf("test_crash: %d rounds in %.1f s, %d commits acknowledged, %d in-flight commits recovered,"
         " %lld ledger rows; engine %s\n",
         rounds, (double)(now_ms() - t_start) / 1000.0, nacked, in_flight_found,  (long long)rows,
         engine ? "on" : "OFF (pass-through VFS)");
  for (int p = 0; p < NPOINTS && has_points; p++)
    printf("test_crash: crash point %-22s reached %d of %d armed rounds\n", crash_points[p],
           reached[p], armed_per_point);
  printf("test_crash: power-loss rounds: %ld writes held back until a sync, %ld of them synced;"
         " %d NORMAL commits lost (allowed)\n", pls[0], pls[1], normal_lost);
  int ok = nacked > 0;
  if (MW_HAVE_POWERLOSS && pls[0] == 0) {
    /* The shim never saw a log write: the power-loss rounds were plain kills. */
    fprintf(stderr, "test_crash: the power-loss shim held back no log write\n");
    ok = 0;
  }
  if (!ok) fprintf(stderr, "test_crash: no commit was acknowledged in any round\n");
  /* An armed point that is never reached tests nothing: fail loudly. */
  for (int p = 0; p < NPOINTS && has_points; p++)
    if (reached[p] == 0) {
      fprintf(stderr, "test_crash: crash point %s was never reached\n", crash_points[p]);
      ok = 0;
    }
  (void)missed;
  munmap(sh, sizeof *sh);
  pl_stats = 0;
  munmap(pls, 2 * sizeof(long));
  munmap(acked, sizeof(uint64_t) * MAX_ACKS);
  if (!ok) return 1; /* the directory goes in cleanup_at_exit */
  printf("test_crash: ok\n");
  return 0;
}
