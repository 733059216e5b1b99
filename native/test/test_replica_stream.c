/* The replica stream (mw_ltx_dir=, replica/stream.c) checked without Litestream: a
** decoder written here from the LTX facts (docs/replication.md) reads every level-0 file
** of the replica in TXID order, checks its header, frames, page index and file checksum,
** that the TXIDs run from 1 without a gap or an overlap, and applies the pages; the
** result must equal the database file byte for byte after the last close. Cases:
**  - threads: 4 threads insert, update and delete for 1.5 s (auto_vacuum=FULL: the file
**    shrinks and grows again), two of them with synchronous=NORMAL (their commits are
**    visible before they are durable, hence before the stream may write them), with
**    mw_log_max_mb=1: compactions run all along (neither compaction nor pruning may pass
**    the last epoch written, and the log stays bounded);
**    With mw_ltx_keep=1 a snapshot is written now and then, and the level-0 files it
**    covers are pruned: the rebuild starts from it;
**  - normal: one synchronous=NORMAL writer for 1.5 s: its commits are visible before the
**    stream may write them, all the time; compactions still run (pruning, too, stops
**    at the last epoch written: else no compaction could reach back that far);
**  - lives: a second life goes on from the replica's TXID; a stock write between lives
**    is noticed (the file is written whole as the next TXID);
**  - kill: a forked writer is killed with SIGKILL at a random moment, 4 times; each
**    reopen recovers the log and the stream goes on without a gap; every commit the
**    writer acknowledged is in the replica.
**  - processes: 3 processes with mw_mp=1 (one with synchronous=NORMAL, one killed with
**    SIGKILL halfway) and a fourth that stays open and closes last: one stream for all
**    of them, without a gap; a process that names no replica or another one is refused.
** test/replica.test.ts has the same with the real `litestream restore`. */
#include "test_engine_util.h"
#include "replica/ltx.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static int ps_of(const char *db) {
  sqlite3 *s = tu_open_stock(db, SQLITE_OPEN_READONLY);
  int ps = (int)tu_int(s, "PRAGMA page_size");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  return ps;
}

static uint64_t rd(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = (v << 8) | p[i];
  return v;
}

static unsigned char *slurp(const char *path, size_t *pn) {
  FILE *f = fopen(path, "rb");
  CHECK(f != 0);
  CHECK(fseek(f, 0, SEEK_END) == 0);
  long n = ftell(f);
  CHECK(n >= 0);
  rewind(f);
  unsigned char *b = malloc((size_t)n + 1);
  CHECK(b != 0);
  CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *pn = (size_t)n;
  return b;
}

static uint64_t uvarint(const unsigned char **p) {
  uint64_t v = 0;
  for (int s = 0;; s += 7) {
    unsigned char c = *(*p)++;
    v |= (uint64_t)(c & 0x7f) << s;
    if (!(c & 0x80)) return v;
  }
}

/* The database image being rebuilt. */
typedef struct image {
  unsigned char *b;
  uint32_t pages;
  int ps;
} image;

/* Checks one file and applies it to img; returns its max TXID. */
static uint64_t apply_file(const char *path, uint64_t want_min, image *img) {
  size_t n = 0;
  unsigned char *f = slurp(path, &n);
  CHECK(n >= 100 + 6 + 9 + 16);
  CHECK(memcmp(f, "LTX1", 4) == 0 && rd(f + 4, 4) == 2 && (int)rd(f + 8, 4) == img->ps);
  uint32_t commit = (uint32_t)rd(f + 12, 4);
  uint64_t lo = rd(f + 16, 8), hi = rd(f + 24, 8);
  CHECK(lo == want_min && hi >= lo && commit >= 1);
  for (int i = 40; i < 100; i++) CHECK(f[i] == 0 || i >= 80);
  uint64_t crc = mw_ltx_crc64(0, f, 100);
  size_t off = 100;
  uint32_t last = 0;
  unsigned char *page = malloc((size_t)img->ps);
  CHECK(page != 0);
  if (commit > img->pages) {
    img->b = realloc(img->b, (size_t)commit * (size_t)img->ps);
    CHECK(img->b != 0);
    memset(img->b + (size_t)img->pages * (size_t)img->ps, 0, (size_t)(commit - img->pages) * (size_t)img->ps);
  }
  /* A snapshot (min 1) holds every page. */
  uint32_t frames = 0;
  for (;;) {
    CHECK(off + 6 <= n);
    uint32_t pgno = (uint32_t)rd(f + off, 4);
    uint32_t flags = (uint32_t)rd(f + off + 4, 2);
    if (pgno == 0) {
      CHECK(flags == 0);
      crc = mw_ltx_crc64(crc, f + off, 6);
      off += 6;
      break;
    }
    CHECK(flags == 1 && pgno > last && pgno <= commit && pgno != mw_ltx_lock_page(img->ps));
    uint32_t len = (uint32_t)rd(f + off + 6, 4);
    CHECK(off + 10 + len <= n);
    crc = mw_ltx_crc64(crc, f + off, 10);
    /* Literal-only LZ4: token 0xF0, a run of 255s and a last byte, the page. */
    const unsigned char *z = f + off + 10;
    CHECK(z[0] == 0xF0);
    size_t k = 1, lit = 15;
    while (z[k] == 255) { lit += 255; k++; }
    lit += z[k++];
    CHECK(lit == (size_t)img->ps && k + lit == len);
    memcpy(page, z + k, lit);
    crc = mw_ltx_crc64(crc, page, lit);
    if (pgno == 1) CHECK(page[18] == 2 && page[19] == 2);
    memcpy(img->b + (size_t)(pgno - 1) * (size_t)img->ps, page, lit);
    last = pgno;
    frames++;
    off += 10 + len;
  }
  if (lo == 1) CHECK(frames == commit - (commit >= mw_ltx_lock_page(img->ps)));
  /* The page index: entries, a 0, its length. */
  size_t idx = off;
  const unsigned char *p = f + off;
  uint32_t entries = 0;
  while (*p != 0) {
    (void)uvarint(&p);
    (void)uvarint(&p);
    (void)uvarint(&p);
    entries++;
  }
  p++;
  CHECK(entries == frames);
  CHECK(rd(p, 8) == (uint64_t)(p - (f + idx)));
  p += 8;
  crc = mw_ltx_crc64(crc, f + idx, (size_t)(p - (f + idx)));
  CHECK((size_t)(p - f) + 16 == n);
  CHECK(rd(p, 8) == 0);
  crc = mw_ltx_crc64(crc, p, 8);
  CHECK(rd(p + 8, 8) == (crc | (1ull << 63)));
  img->pages = commit;
  free(page);
  free(f);
  return hi;
}

static int cmp_names(const void *a, const void *b);
static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of a level's files, sorted (their TXIDs in hex: by TXID). */
static int list_level_live(const char *rep, int level, char **names, int max, int live) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/ltx/%d", rep, level);
  DIR *d = opendir(dir);
  if (d == 0) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != 0) {
    size_t len = strlen(e->d_name);
    /* Never left behind once the database is closed (live: a file being written). */
    CHECK(live || !(len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0));
    if (len == 37 && strcmp(e->d_name + 33, ".ltx") == 0) {
      CHECK(n < max);
      names[n++] = strdup(e->d_name);
    }
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof(*names), cmp_names);
  return n;
}

static int list_level(const char *rep, int level, char **names, int max) {
  return list_level_live(rep, level, names, max, 0);
}

/* Rebuilds the database from the replica as a restore would: the newest snapshot that
** the level-0 files go on from (none: level 0 from TXID 1), then the level-0 files after
** it, each starting right after the one before; returns the last TXID. */
static uint64_t first_l0; /* the first TXID of level 0 at the last rebuild */
static uint64_t rebuild(const char *rep, image *img, int *pSnapshots, int *pFiles) {
  static char *l0[100000], *l9[64];
  int n0 = list_level(rep, 0, l0, 100000), n9 = list_level(rep, 9, l9, 64);
  uint64_t first = n0 ? strtoull(l0[0], 0, 16) : 1, next = 1;
  first_l0 = first;
  for (int i = n9 - 1; i >= 0 && next == 1; i--) {
    uint64_t hi = strtoull(l9[i] + 17, 0, 16);
    if (hi + 1 < first) continue; /* the level-0 files do not go on from it */
    char path[900];
    snprintf(path, sizeof path, "%s/ltx/9/%s", rep, l9[i]);
    CHECK(apply_file(path, 1, img) == hi);
    next = hi + 1;
  }
  for (int i = 0; i < n0; i++) {
    uint64_t lo = strtoull(l0[i], 0, 16), hi = strtoull(l0[i] + 17, 0, 16);
    if (hi < next) continue; /* below the snapshot */
    char path[900];
    snprintf(path, sizeof path, "%s/ltx/0/%s", rep, l0[i]);
    CHECK(lo <= next);
    CHECK(apply_file(path, lo, img) == hi);
    next = hi + 1;
  }
  for (int i = 0; i < n0; i++) free(l0[i]);
  for (int i = 0; i < n9; i++) free(l9[i]);
  *pSnapshots = n9;
  *pFiles = n0;
  return next - 1;
}

/* The replica rebuilds exactly the closed database file. */
static uint64_t check_replica_counts(const char *db, const char *rep, int *pSnapshots, int *pFiles) {
  image img = { 0, 0, ps_of(db) };
  uint64_t last = rebuild(rep, &img, pSnapshots, pFiles);
  size_t n = 0;
  unsigned char *file = slurp(db, &n);
  CHECK(n == (size_t)img.pages * (size_t)img.ps);
  if (memcmp(file, img.b, n) != 0) {
    int shown = 0;
    for (size_t i = 0; i < n && shown < 8; i++)
      if (file[i] != img.b[i]) {
        fprintf(stderr, "test_replica_stream: byte %zu (page %zu, offset %zu): file %02x, replica %02x\n",
                i, i / (size_t)img.ps + 1, i % (size_t)img.ps, file[i], img.b[i]);
        shown++;
      }
    CHECK(0);
  }
  free(file);
  free(img.b);
  return last;
}

static uint64_t check_replica(const char *db, const char *rep) {
  int snapshots = 0, files = 0;
  return check_replica_counts(db, rep, &snapshots, &files);
}

/* 1 when the replica has a snapshot and its level-0 files start after TXID 1 (retention
** removed the oldest). */
static int pruned(const char *rep) {
  static char *l0[100000], *l9[64];
  int n0 = list_level_live(rep, 0, l0, 100000, 1), n9 = list_level_live(rep, 9, l9, 64, 1);
  int yes = n9 > 0 && n0 > 0 && strtoull(l0[0], 0, 16) > 1;
  for (int i = 0; i < n0; i++) free(l0[i]);
  for (int i = 0; i < n9; i++) free(l9[i]);
  return yes;
}

/* ---------------------------------------------------------------- threads */

typedef struct worker {
  const char *path;
  int id;
  int64_t compactions, commits; /* seen by the worker at its end */
} worker;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)(ts.tv_nsec / 1000000);
}

static void *work(void *arg) {
  worker *w = arg;
  sqlite3 *db = tu_open(w->path, "mw_log_max_mb=1&mw_ltx_dir=rep&mw_ltx_keep=1");
  if (w->id % 2) tu_exec(db, "PRAGMA synchronous=NORMAL");
  char sql[300];
  uint64_t until = now_ms() + 1500;
  for (int i = 0; now_ms() < until; i++) {
    if (i % 50 == 49)
      snprintf(sql, sizeof sql, "DELETE FROM t WHERE w = %d AND i < %d", w->id, i - 5);
    else if (i % 3 == 2)
      snprintf(sql, sizeof sql, "UPDATE t SET b = randomblob(700) WHERE w = %d AND i = %d", w->id, i - 1);
    else
      snprintf(sql, sizeof sql, "INSERT INTO t(w, i, b) VALUES (%d, %d, randomblob(%d))", w->id, i, 200 + (i * 131) % 1500);
    for (;;) {
      int rc = sqlite3_exec(db, sql, 0, 0, 0);
      if (rc == SQLITE_OK) break;
      CHECK((rc & 0xff) == SQLITE_BUSY);
    }
  }
  w->compactions = tu_stat(db, MW_STAT_COMPACTIONS);
  w->commits = tu_stat(db, MW_STAT_COMMITS);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return 0;
}

static void threads(const char *dir) {
  char path[300], rep[320];
  snprintf(path, sizeof path, "%s/threads.db", dir);
  snprintf(rep, sizeof rep, "%s/rep", dir);
  sqlite3 *db = tu_open(path, "mw_log_max_mb=1&mw_ltx_dir=rep&mw_ltx_keep=1");
  tu_exec(db, "PRAGMA auto_vacuum=FULL; CREATE TABLE t(id INTEGER PRIMARY KEY, w INT, i INT, b BLOB)");
  pthread_t th[4];
  worker ws[4];
  for (int i = 0; i < 4; i++) {
    ws[i].path = path;
    ws[i].id = i;
    CHECK(pthread_create(&th[i], 0, work, &ws[i]) == 0);
  }
  int64_t commits = 0;
  for (int i = 0; i < 4; i++) {
    CHECK(pthread_join(th[i], 0) == 0);
    commits += ws[i].commits;
  }
  int64_t log = tu_stat(db, MW_STAT_LOG_BYTES);
  /* Until retention ran (a slow build, such as TSan's, may not have written enough for
  ** two snapshots yet): large rows, a tick at a time, at most 60 s. */
  for (uint64_t t0 = now_ms(); !pruned(rep); ) {
    CHECK(now_ms() - t0 < 60000);
    tu_exec(db, "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 256) "
                "INSERT INTO t(w, i, b) SELECT 9, i, randomblob(4000) FROM r");
    usleep(250000);
  }
  int64_t compactions = tu_stat(db, MW_STAT_COMPACTIONS);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  int snapshots = 0, files = 0;
  uint64_t last = check_replica_counts(path, rep, &snapshots, &files);
  CHECK(last >= (uint64_t)commits);
  printf("test_replica_stream: 4 threads, %llu TXIDs, %lld compactions while streaming, log "
         "%lld bytes at the end; the replica (%d snapshots, %d level-0 files kept) rebuilds "
         "the file byte for byte\n", (unsigned long long)last, (long long)compactions,
         (long long)log, snapshots, files);
  /* Snapshots were written (mw_ltx_keep=1: the newest stays) and the level-0 files it
  ** covers pruned. */
  CHECK(snapshots == 1 && (files == 0 || first_l0 > 1));
  /* Each compaction stops at the last epoch written, but compactions go on. */
  CHECK(compactions >= 2);
}

/* ---------------------------------------------------------------- normal */

static void normal_writer(const char *dir) {
  char path[300], rep[320];
  snprintf(path, sizeof path, "%s/normal.db", dir);
  snprintf(rep, sizeof rep, "%s/rep", dir);
  sqlite3 *db = tu_open(path, "mw_log_max_mb=1&mw_ltx_dir=rep");
  tu_exec(db, "PRAGMA synchronous=NORMAL; CREATE TABLE n(id INTEGER PRIMARY KEY, b BLOB)");
  /* 1.5 s, and on a slow build (TSan) until two compactions ran (at most 60 s). */
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < 1500 || (tu_stat(db, MW_STAT_COMPACTIONS) < 2 && now_ms() - t0 < 60000))
    tu_exec(db, "INSERT INTO n(b) VALUES (randomblob(2000))");
  int64_t compactions = tu_stat(db, MW_STAT_COMPACTIONS);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  uint64_t last = check_replica(path, rep);
  printf("test_replica_stream: a NORMAL writer, %llu TXIDs, %lld compactions while streaming\n",
         (unsigned long long)last, (long long)compactions);
  CHECK(compactions >= 2);
}

/* ---------------------------------------------------------------- lives */

static uint64_t life(const char *path, int n) {
  sqlite3 *db = tu_open(path, "mw_ltx_dir=rep");
  tu_exec(db, "CREATE TABLE IF NOT EXISTS l(id INTEGER PRIMARY KEY, v TEXT)");
  for (int i = 0; i < n; i++) tu_exec(db, "INSERT INTO l(v) VALUES (hex(randomblob(30)))");
  uint64_t txid = (uint64_t)tu_stat(db, MW_STAT_LTX_TXID);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  return txid;
}

static void lives(const char *dir) {
  char path[300], rep[320];
  snprintf(path, sizeof path, "%s/lives.db", dir);
  snprintf(rep, sizeof rep, "%s/rep", dir);
  uint64_t a = life(path, 10), b = life(path, 4);
  CHECK(b == a + 4);
  CHECK(check_replica(path, rep) == b);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READWRITE);
  tu_exec(s, "INSERT INTO l(v) VALUES ('stock')");
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  uint64_t c = life(path, 2);
  CHECK(c == b + 1 + 2);
  CHECK(check_replica(path, rep) == c);
  printf("test_replica_stream: lives: TXIDs go on (%llu, %llu); a stock write between lives "
         "became TXID %llu\n", (unsigned long long)a, (unsigned long long)b,
         (unsigned long long)(b + 1));
}

/* ---------------------------------------------------------------- kill */

static void kill_rounds(const char *dir) {
  char path[300], rep[320];
  snprintf(path, sizeof path, "%s/kill.db", dir);
  snprintf(rep, sizeof rep, "%s/rep", dir);
  srand((unsigned)time(0));
  int64_t acked = 0;
  for (int round = 0; round < 4; round++) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      sqlite3 *db = tu_open(path, "mw_log_max_mb=1&mw_ltx_dir=rep");
      if (round % 2) tu_exec(db, "PRAGMA synchronous=NORMAL");
      tu_exec(db, "CREATE TABLE IF NOT EXISTS k(id INTEGER PRIMARY KEY, b BLOB)");
      /* After the rows of the last round, acknowledged or in flight when it died. */
      for (int64_t id = tu_int(db, "SELECT coalesce(max(id), 0) FROM k") + 1;; id++) {
        char sql[100];
        snprintf(sql, sizeof sql, "INSERT INTO k VALUES (%lld, randomblob(900))", (long long)id);
        tu_exec(db, sql);
        if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) _exit(3);
      }
    }
    close(fds[1]);
    /* Its first commit acknowledged (an emulator starts a process slowly), then a while. */
    int64_t id;
    CHECK(read(fds[0], &id, sizeof id) == (ssize_t)sizeof id);
    acked = id;
    usleep((useconds_t)(100000 + rand() % 400000));
    kill(pid, SIGKILL);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
    while (read(fds[0], &id, sizeof id) == (ssize_t)sizeof id) acked = id;
    close(fds[0]);
    CHECK(acked > 0);
  }
  sqlite3 *db = tu_open(path, "mw_ltx_dir=rep");
  CHECK(tu_int(db, "SELECT count(*) FROM k") >= acked);
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
  check_replica(path, rep);
  sqlite3 *s = tu_open_stock(path, SQLITE_OPEN_READONLY);
  char q[100];
  snprintf(q, sizeof q, "SELECT count(*) FROM k WHERE id <= %lld", (long long)acked);
  CHECK(tu_int(s, q) == acked);
  CHECK_RC(sqlite3_close(s), SQLITE_OK);
  printf("test_replica_stream: 4 writers killed, %lld acknowledged commits, the replica "
         "rebuilds the file\n", (long long)acked);
}

/* The stream says so when it stops on an error: none is expected here. */
static volatile int stream_stops;
static void on_log(void *arg, int code, const char *msg) {
  (void)arg;
  if (strstr(msg, "multiwriter")) fprintf(stderr, "log %d: %s\n", code, msg);
  if (strstr(msg, "replica stream") && strstr(msg, "stopped")) stream_stops = 1;
}

/* ---------------------------------------------------------------- processes */

/* ms < 0: until killed (the parent's victim), or its parent is gone, 120 s at most. */
static void mp_writer(const char *path, int id, int ms, int opened) {
  pid_t parent = getppid();
  sqlite3 *db = tu_open(path, "mw_mp=1&mw_log_max_mb=1&mw_ltx_dir=rep");
  if (id == 1) tu_exec(db, "PRAGMA synchronous=NORMAL");
  char one = 1;
  if (write(opened, &one, 1) != 1) _exit(3);
  close(opened);
  uint64_t until = now_ms() + (uint64_t)(ms < 0 ? 120000 : ms);
  for (int i = 0; now_ms() < until && (ms >= 0 || getppid() == parent); i++) {
    char sql[160];
    snprintf(sql, sizeof sql, "INSERT INTO p(w, i, b) VALUES (%d, %d, randomblob(%d))", id, i,
             100 + (i * 97) % 1800);
    for (;;) {
      int rc = sqlite3_exec(db, sql, 0, 0, 0);
      if (rc == SQLITE_OK) break;
      if ((rc & 0xff) != SQLITE_BUSY) _exit(4);
    }
  }
  CHECK_RC(sqlite3_close(db), SQLITE_OK);
}

/* The open's result code of another process naming params (0: opened). */
static int open_elsewhere(const char *path, const char *params) {
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    char uri[600];
    snprintf(uri, sizeof uri, "file:%s?vfs=multiwriter&%s", path, params);
    sqlite3 *db = 0;
    int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, 0);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "SELECT count(*) FROM p", 0, 0, 0);
    sqlite3_close(db);
    _exit(rc & 0xff);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
  return WEXITSTATUS(st);
}

static void processes(const char *dir) {
  char path[300], rep[320];
  snprintf(path, sizeof path, "%s/mp.db", dir);
  snprintf(rep, sizeof rep, "%s/rep", dir);
  sqlite3 *setup = tu_open(path, "mw_ltx_dir=rep");
  tu_exec(setup, "CREATE TABLE p(id INTEGER PRIMARY KEY, w INT, i INT, b BLOB)");
  CHECK_RC(sqlite3_close(setup), SQLITE_OK);
  fflush(stdout);
  int opened[2];
  CHECK(pipe(opened) == 0);
  pid_t pids[3];
  for (int k = 0; k < 3; k++) {
    pids[k] = fork();
    CHECK(pids[k] >= 0);
    if (pids[k] == 0) {
      close(opened[0]);
      /* Writer 0 is killed: it writes until then. With 1.5 s as the others, it could end
      ** first on a loaded emulator (the others' opens, two refused opens, the holder's
      ** open and 500 ms came before the kill), and its exit was no death. */
      mp_writer(path, k, k == 0 ? -1 : 1500, opened[1]);
      _exit(0);
    }
  }
  /* Every writer has the database open (an emulator starts processes slowly). */
  close(opened[1]);
  char got[3];
  for (int k = 0; k < 3; k++) CHECK(read(opened[0], &got[k], 1) == 1);
  close(opened[0]);
  /* Forked before this process starts threads of its own (the holder's open). */
  CHECK(open_elsewhere(path, "mw_mp=1") == SQLITE_CANTOPEN);
  CHECK(open_elsewhere(path, "mw_mp=1&mw_ltx_dir=elsewhere") == SQLITE_CANTOPEN);
  sqlite3 *holder = tu_open(path, "mw_mp=1&mw_log_max_mb=1&mw_ltx_dir=rep");
  usleep(500000);
  kill(pids[0], SIGKILL);
  for (int k = 0; k < 3; k++) {
    int st = 0;
    CHECK(waitpid(pids[k], &st, 0) == pids[k]);
    CHECK(k == 0 ? WIFSIGNALED(st) : WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  tu_exec(holder, "INSERT INTO p(w, i, b) VALUES (9, 0, randomblob(10))");
  int64_t rows = tu_int(holder, "SELECT count(*) FROM p");
  CHECK_RC(sqlite3_close(holder), SQLITE_OK);
  int snapshots = 0, files = 0;
  uint64_t last = check_replica_counts(path, rep, &snapshots, &files);
  printf("test_replica_stream: processes: 3 writers (one killed) and a holder, %lld rows, %llu "
         "TXIDs in %d level-0 files and %d snapshots: one stream, the file rebuilt byte for "
         "byte; a process naming no replica or another one refused\n", (long long)rows,
         (unsigned long long)last, files, snapshots);
}

/* Each case in a process of its own, forked from this one, which never opens a
** database: the cases that fork writers then fork from a process without threads
** (ThreadSanitizer and qemu-user refuse threads after a fork of a threaded process). */
static void run_case(const char *dir, const char *name, void (*fn)(const char *)) {
  char sub[300];
  snprintf(sub, sizeof sub, "%s/%s", dir, name);
  CHECK(mkdir(sub, 0755) == 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    fn(sub);
    fflush(stdout);
    _exit(stream_stops ? 5 : 0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "test_replica_stream: case %s failed\n", name);
    CHECK(0);
  }
}

int main(void) {
  CHECK_RC(sqlite3_config(SQLITE_CONFIG_LOG, on_log, (void *)0), SQLITE_OK);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  const char *dir = tu_tmpdir("replica");
  run_case(dir, "threads", threads);
  run_case(dir, "normal", normal_writer);
  run_case(dir, "lives", lives);
  run_case(dir, "kill", kill_rounds);
  run_case(dir, "processes", processes);
  tu_rmdir();
  printf("test_replica_stream: ok\n");
  return 0;
}
