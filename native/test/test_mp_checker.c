/* The randomized checker across processes (issue 9; the machinery is checker_model.h):
** the workload of test_engine_checker (8 workers, random transactions over 200 keys,
** several commits in held snapshots, user_version, data_version pollers) with
** mw_mp=1, run by 4 processes of 2 threads each, while the process that created the
** tables keeps its connection open. Each worker process writes what its transactions
** read and wrote, with their snapshot and commit epochs, to a file; the parent replays
** all of them in epoch order on the model:
**   - a committed transaction must have read exactly the state just before its epoch
**     (serializable in the one epoch order of all processes);
**   - a read-only or refused transaction must have read the state at its snapshot;
**   - the final table must equal the model, integrity_check must pass through the
**     engine and, after the last close, through a stock connection.
** MW_TEST_SEED=n replays a workload. Killed processes are test_mp's (bank invariant):
** a killed worker leaves commits it never recorded, which this replay cannot place. */
#include "checker_model.h"

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROCS 4
#define PER_PROC (CM_THREADS / PROCS)

static const cm_load load = CM_KV_LOAD("mpchecker", 500);

static const char *self_exe;

/* A worker process: runs workers first..first+PER_PROC-1 and writes their records
** (the worker, then its transactions) to out. */
static int child_main(char **argv) {
  const char *path = argv[2], *params = argv[3], *out = argv[6];
  cm_seed = strtoull(argv[4], 0, 0);
  int first = atoi(argv[5]);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  cm_worker w[PER_PROC];
  memset(w, 0, sizeof w);
  for (int i = 0; i < PER_PROC; i++) {
    w[i].L = &load;
    w[i].id = first + i;
    w[i].path = path;
    w[i].params = params;
    w[i].t = calloc((size_t)load.txns * CM_MAXOPS, sizeof(txn));
    CHECK(w[i].t != 0);
  }
  /* SQLite's first unixOpen in a process notes the pid for its randomness without a
  ** lock: made here, before the threads, two of them never race on it. */
  sqlite3 *first_open = tu_open(path, params);
  tu_threads(PER_PROC, cm_worker_run, w, sizeof w[0]);
  CHECK_RC(sqlite3_close(first_open), SQLITE_OK);
  FILE *f = fopen(out, "wb");
  CHECK(f != 0);
  for (int i = 0; i < PER_PROC; i++) {
    CHECK(fwrite(&w[i], sizeof w[i], 1, f) == 1);
    CHECK(fwrite(w[i].t, sizeof(txn), (size_t)w[i].n, f) == (size_t)w[i].n);
    free(w[i].t);
  }
  CHECK(fclose(f) == 0);
  return 0;
}

static pid_t spawn_child(const char *path, const char *params, int first, const char *out) {
  char seed[32], firsts[16];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)cm_seed);
  snprintf(firsts, sizeof firsts, "%d", first);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    char *args[] = { (char *)self_exe, "child", (char *)path, (char *)params, seed, firsts,
                     (char *)out, 0 };
    /* Under qemu-user the program re-executes itself through the emulator. */
    const char *emu = getenv("MW_TEST_EMULATOR");
    if (emu && *emu) {
      char *eargs[] = { (char *)emu, (char *)self_exe, "child", (char *)path, (char *)params,
                        seed, firsts, (char *)out, 0 };
      execvp(emu, eargs);
    } else {
      execv(self_exe, args);
    }
    _exit(127);
  }
  return pid;
}

/* Reads a worker process's file into r's workers first..first+PER_PROC-1. */
static void read_records(cm_run *r, int first, const char *out) {
  FILE *f = fopen(out, "rb");
  CHECK(f != 0);
  for (int i = 0; i < PER_PROC; i++) {
    cm_worker got, *w = &r->w[first + i];
    CHECK(fread(&got, sizeof got, 1, f) == 1);
    CHECK(got.id == first + i && got.n >= 0 && got.n <= load.txns * CM_MAXOPS);
    CHECK(fread(w->t, sizeof(txn), (size_t)got.n, f) == (size_t)got.n);
    w->n = got.n;
    w->commits = got.commits;
    w->refused = got.refused;
    w->held = got.held;
    w->cw = got.cw;
    w->cr = got.cr;
    w->cs = got.cs;
    w->reloc = got.reloc;
    w->merges = got.merges;
    w->refused_reloc = got.refused_reloc;
    w->compactions = got.compactions;
  }
  CHECK(fclose(f) == 0);
  unlink(out);
}

int main(int argc, char **argv) {
  self_exe = argv[0];
  if (argc == 7 && strcmp(argv[1], "child") == 0) return child_main(argv);
  self_exe = tu_abs_exe(self_exe);
  CHECK_RC(sqlite3_initialize(), SQLITE_OK);
  cm_seed_from_env();
  const char *params = "mw_mp=1&mw_log_max_mb=1";
  cm_run r;
  sqlite3 *setup;
  const char *path;
  int64_t base;
  cm_begin(&r, &load, params, &setup, &path, &base);
  char out[PROCS][400];
  pid_t pid[PROCS];
  for (int p = 0; p < PROCS; p++) {
    snprintf(out[p], sizeof out[p], "%s.rec%d", path, p);
    pid[p] = spawn_child(path, params, p * PER_PROC, out[p]);
  }
  for (int p = 0; p < PROCS; p++) {
    int st = 0;
    while (waitpid(pid[p], &st, 0) < 0) CHECK(errno == EINTR);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "test_mp_checker: worker process %d failed (status %d)\n", p, st);
      CHECK(0);
    }
    read_records(&r, p * PER_PROC, out[p]);
  }
  cm_end(&r, setup, path, base);
  /* Compactions ran by each worker process (its threads share one database): printed,
  ** not required (they depend on the timing of the compactors' ticks; test_mp checks
  ** compaction among open processes). */
  int64_t compactions = 0;
  for (int p = 0; p < PROCS; p++) {
    int64_t most = 0;
    for (int i = 0; i < PER_PROC; i++)
      if (r.w[p * PER_PROC + i].compactions > most) most = r.w[p * PER_PROC + i].compactions;
    compactions += most;
  }
  printf("test_mp_checker: %d processes: %d transactions (%d in held snapshots), %d commits, "
         "%d refused (write %lld, read %lld, schema %lld), %d wrong reads, %lld compactions "
         "by the worker processes\n", PROCS, r.total, r.held, r.commits, r.refused,
         (long long)r.cw, (long long)r.cr, (long long)r.cs, r.bad, (long long)compactions);
  cm_done(&r);
  if (r.bad || !r.final_ok) fprintf(stderr, "failed with seed %llu\n", (unsigned long long)cm_seed);
  CHECK(r.bad == 0);
  CHECK(r.final_ok);
  CHECK(r.commits > r.total / 10);
  CHECK(r.held > 0);
  printf("test_mp_checker: ok\n");
  return 0;
}
