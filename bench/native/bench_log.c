/* bench_log: commits per second of the log (mw_log_*) against the floor stock SQLite
** pays per WAL commit, one pwrite + one fdatasync. Not a test.
**   zig-out/bin/bench_log [dir] [seconds] [pages per commit]
** Prints one line per case: commits/s and mean latency. */
#include "mw_internal.h"
#include "durability/log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PS 4096

static const char *dir = "/tmp";
static double seconds = 2.0;
static int npages = 1;
static int quiet;
static uint64_t nsyncs;
static int count_syncs(int op, mw_fd fd) {
  (void)fd;
  if (op == MW_OP_DATASYNC) __atomic_add_fetch(&nsyncs, 1, __ATOMIC_RELAXED);
  return 0;
}

static double report(const char *name, int threads, uint64_t commits, uint64_t ns) {
  double s = (double)ns / 1e9;
  if (quiet) return (double)commits / s;
  printf("%-34s threads=%-2d commits=%-7llu %9.0f commits/s  %8.1f us/commit\n", name, threads,
         (unsigned long long)commits, (double)commits / s, s * 1e6 / (double)commits * threads);
  return (double)commits / s;
}

/* One pwrite + one fdatasync per commit, at the next offset of a growing file
** (a fresh WAL: mode 0), of a file preallocated with fallocate (mode 2), or over the
** same bytes again (a WAL reused after a checkpoint: mode 1). */
static double raw(int reuse) {
  char path[512];
  snprintf(path, sizeof(path), "%s/bench_log_raw.%d", dir, (int)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) { perror("open"); exit(1); }
  size_t len = 24 + (size_t)npages * (PS + 24);
  unsigned char *buf = calloc(1, len);
  const uint64_t span = 4u << 20;
  if (reuse) {
    /* written once and synced, like a WAL that already went round */
    for (uint64_t o = 0; o < span + len; o += len) {
      if (pwrite(fd, buf, len, (off_t)o) != (ssize_t)len) { perror("pwrite"); exit(1); }
    }
    fsync(fd);
  }
  if (reuse == 2) {
    int e;
    if (mw_file_preallocate(fd, 256u << 20, &e) != SQLITE_OK) { perror("fallocate"); exit(1); }
    fsync(fd);
  }
  uint64_t commits = 0, off = 0, t0 = mw_now_ns(), t;
  do {
    buf[0] = (unsigned char)commits;
    if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len) { perror("pwrite"); exit(1); }
    if (fdatasync(fd) != 0) { perror("fdatasync"); exit(1); }
    off += len;
    if (reuse == 1 && off + len > span) off = 0;
    commits++;
    t = mw_now_ns();
  } while (t - t0 < (uint64_t)(seconds * 1e9));
  static const char *names[] = { "pwrite+fdatasync, growing file", "pwrite+fdatasync, reused file",
                                 "pwrite+fdatasync, fallocated file" };
  double r = report(names[reuse], 1, commits, t - t0);
  close(fd);
  unlink(path);
  free(buf);
  return r;
}

typedef struct shared {
  mw_log *log;
  mw_mutex pub;
  uint64_t next_epoch;
  uint64_t stop_at;
  uint64_t commits;
} shared;

static void *committer(void *arg) {
  shared *s = arg;
  unsigned char *img = calloc(1, PS);
  const unsigned char *imgs[64];
  uint32_t pgnos[64];
  for (int i = 0; i < npages; i++) { imgs[i] = img; pgnos[i] = (uint32_t)i + 2; }
  uint64_t bytes = mw_log_record_size(s->log, npages);
  while (mw_now_ns() < s->stop_at) {
    if (mw_log_reserve(s->log, bytes) != SQLITE_OK) { fprintf(stderr, "reserve failed\n"); exit(1); }
    mw_mutex_lock(&s->pub);
    uint64_t e = s->next_epoch++;
    uint64_t off = mw_log_assign(s->log, e, bytes);
    mw_mutex_unlock(&s->pub);
    img[0] = (unsigned char)e;
    if (mw_log_submit(s->log, off, e, 100, 0, npages, pgnos, imgs) != SQLITE_OK ||
        mw_log_wait_durable(s->log, off + bytes) != SQLITE_OK) {
      fprintf(stderr, "commit failed\n");
      exit(1);
    }
    __atomic_add_fetch(&s->commits, 1, __ATOMIC_RELAXED);
  }
  free(img);
  return 0;
}

static int grow_stop;
static void *grower(void *arg) {
  while (!__atomic_load_n(&grow_stop, __ATOMIC_SEQ_CST)) {
    mw_log_grow_ahead((mw_log *)arg);
    mw_sleep_us(2000);
  }
  return 0;
}

/* threads committers; with_grower: a background thread calls mw_log_grow_ahead. */
static double logbench2(int threads, int with_grower);
static double logbench(int threads) { return logbench2(threads, 0); }

static double logbench2(int threads, int with_grower) {
  char db[512];
  snprintf(db, sizeof(db), "%s/bench_log.%d.db", dir, (int)getpid());
  mw_log_options o = { PS, 1, 0, 0 };
  shared s;
  memset(&s, 0, sizeof(s));
  uint64_t base, last;
  char *err = 0;
  if (mw_log_open(db, &o, 0, 0, &s.log, &base, &last, &err) != SQLITE_OK) {
    fprintf(stderr, "open: %s\n", err ? err : "?");
    exit(1);
  }
  mw_mutex_init(&s.pub);
  s.next_epoch = last + 1;
  nsyncs = 0;
  mw_fault_hook = count_syncs;
  uint64_t t0 = mw_now_ns();
  s.stop_at = t0 + (uint64_t)(seconds * 1e9);
  pthread_t th[64], g;
  grow_stop = 0;
  if (with_grower) pthread_create(&g, 0, grower, s.log);
  for (int i = 0; i < threads; i++) pthread_create(&th[i], 0, committer, &s);
  for (int i = 0; i < threads; i++) pthread_join(th[i], 0);
  uint64_t t = mw_now_ns();
  if (with_grower) {
    __atomic_store_n(&grow_stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(g, 0);
  }
  mw_fault_hook = 0;
  double r = report("mw_log (reserve/assign/submit/wait)", threads, s.commits, t - t0);
  if (!quiet) printf("    %llu data syncs, %.1f commits per sync\n", (unsigned long long)nsyncs,
                     (double)s.commits / (double)(nsyncs ? nsyncs : 1));
  mw_log_close(s.log, 1);
  mw_mutex_destroy(&s.pub);
  return r;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc > 1) dir = argv[1];
  if (argc > 2) seconds = atof(argv[2]);
  if (argc > 3) npages = atoi(argv[3]);
  if (npages < 1 || npages > 64) npages = 1;
  if (getenv("BENCH_LOG_THREADS")) { /* one case only: BENCH_LOG_THREADS=n, or 0 for raw */
    int n = atoi(getenv("BENCH_LOG_THREADS"));
    if (n == 0) { raw(0); raw(1); raw(2); } else logbench(n);
    return 0;
  }
  printf("dir=%s seconds=%.1f pages/commit=%d page=%d\n", dir, seconds, npages, PS);
  /* Interleaved rounds: the disk is shared and noisy; compare medians. */
  enum { ROUNDS = 15, CASES = 5 };
  double r[CASES][ROUNDS];
  static const char *names[CASES] = { "pwrite+fdatasync growing", "pwrite+fdatasync reused",
                                      "pwrite+fdatasync fallocated", "mw_log 1 thread",
                                      "mw_log 1 thread + grow_ahead" };
  quiet = 1;
  for (int k = 0; k < ROUNDS; k++) {
    r[0][k] = raw(0);
    r[3][k] = logbench(1);
    r[1][k] = raw(1);
    r[2][k] = raw(2);
    r[4][k] = logbench2(1, 1);
  }
  for (int c = 0; c < CASES; c++) {
    printf("%-30s", names[c]);
    for (int k = 0; k < ROUNDS; k++) printf(" %7.0f", r[c][k]);
    qsort(r[c], ROUNDS, sizeof(double), cmp_double);
    printf("   median %7.0f commits/s\n", r[c][ROUNDS / 2]);
  }
  quiet = 0;
  logbench(4);
  logbench(16);
  return 0;
}
