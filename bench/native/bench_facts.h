/*
** bench_facts.h: the machine facts written with every result line of the native
** benchmark: cores, kernel, the file system of the run directory, a measured
** fdatasync latency of that disk, the SQLite and engine versions, the project's
** git commit. Measured once per program run, before any benchmark run.
** Touches only a probe file of its own in the run directory, removed after.
*/
#ifndef BENCH_FACTS_H
#define BENCH_FACTS_H

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <sys/mount.h>
#include <sys/param.h>
#endif

#include "bench_util.h"
#include "multiwriter.h"
#include "sqlite3.h"

typedef struct {
  long cores;
  char kernel[160];
  char fs[64];
  char cpu[128];
  double fdatasync_us; /* median of the probe writes */
  char sqlite_version[32];
  char engine_version[32];
  char commit[64];
} facts_t;

/* Trims a trailing newline in place. */
static void chomp(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
}

/* First line of a command's output, "" when it fails. */
static void first_line(const char *cmd, char *out, size_t cap) {
  out[0] = 0;
  FILE *p = popen(cmd, "r");
  if (p == NULL) return;
  if (fgets(out, (int)cap, p) == NULL) out[0] = 0;
  chomp(out);
  pclose(p);
}

/* File system type of dir: on Linux the mount with the longest prefix of the
** real path in /proc/self/mounts; on macOS statfs' type name. */
static void fs_type(const char *dir, char *out, size_t cap) {
  snprintf(out, cap, "unknown");
#if defined(__APPLE__)
  struct statfs st;
  if (statfs(dir, &st) == 0) snprintf(out, cap, "%s", st.f_fstypename);
#else
  char real[PATH_MAX];
  if (realpath(dir, real) == NULL) return;
  FILE *m = fopen("/proc/self/mounts", "r");
  if (m == NULL) return;
  char line[4096], dev[1024], mnt[1024], type[64];
  size_t best = 0;
  while (fgets(line, sizeof line, m)) {
    if (sscanf(line, "%1023s %1023s %63s", dev, mnt, type) != 3) continue;
    size_t n = strlen(mnt);
    int prefix = strncmp(real, mnt, n) == 0 && (real[n] == '/' || real[n] == 0 || n == 1);
    if (prefix && n >= best) {
      best = n;
      snprintf(out, cap, "%s", type);
    }
  }
  fclose(m);
#endif
}

static void cpu_model(char *out, size_t cap) {
  snprintf(out, cap, "unknown");
#if defined(__APPLE__)
  first_line("sysctl -n machdep.cpu.brand_string 2>/dev/null", out, cap);
#else
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        snprintf(out, cap, "%s", c + 2);
        chomp(out);
      }
      break;
    }
  }
  fclose(f);
#endif
}

/* Median latency of a 4 KiB write + data sync in dir, in microseconds: what one
** durable commit costs at least on this disk. Returns -1 when the probe fails. */
static double measure_fdatasync(const char *dir) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/fdatasync-probe.%ld", dir, (long)getpid());
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return -1;
  char buf[4096];
  memset(buf, 0x5a, sizeof buf);
  uint64_t v[64];
  int n = 0;
  uint64_t start = now_ns();
  /* Up to 64 syncs or half a second, whichever comes first. */
  while (n < 64 && (n < 5 || now_ns() - start < 500000000u)) {
    uint64_t t0 = now_ns();
    if (pwrite(fd, buf, sizeof buf, (off_t)(n % 16) * 4096) != (ssize_t)sizeof buf) break;
#if defined(__APPLE__)
    if (fsync(fd) != 0) break;
#else
    if (fdatasync(fd) != 0) break;
#endif
    v[n++] = now_ns() - t0;
  }
  close(fd);
  unlink(path);
  if (n == 0) return -1;
  qsort(v, (size_t)n, sizeof v[0], cmp_u64);
  return (double)v[n / 2] / 1000.0;
}

static void facts_collect(facts_t *f, const char *dir) {
  memset(f, 0, sizeof *f);
  f->cores = sysconf(_SC_NPROCESSORS_ONLN);
  struct utsname u;
  if (uname(&u) == 0) snprintf(f->kernel, sizeof f->kernel, "%s %s %s", u.sysname, u.release, u.machine);
  fs_type(dir, f->fs, sizeof f->fs);
  cpu_model(f->cpu, sizeof f->cpu);
  f->fdatasync_us = measure_fdatasync(dir);
  snprintf(f->sqlite_version, sizeof f->sqlite_version, "%s", sqlite3_libversion());
  snprintf(f->engine_version, sizeof f->engine_version, "%s", mw_version());
  const char *env = getenv("MWBENCH_COMMIT");
  if (env && *env) {
    snprintf(f->commit, sizeof f->commit, "%s", env);
  } else {
    char head[48], dirty[256];
    first_line("git rev-parse --short=12 HEAD 2>/dev/null", head, sizeof head);
    first_line("git status --porcelain --untracked-files=no 2>/dev/null", dirty, sizeof dirty);
    snprintf(f->commit, sizeof f->commit, "%s%s", head[0] ? head : "unknown", dirty[0] ? "-dirty" : "");
  }
}

/* Writes the facts as the members of an open JSON object (no braces). */
static void facts_json(FILE *o, const facts_t *f) {
  fprintf(o, "\"machine\":{\"cores\":%ld,\"cpu\":", f->cores);
  json_str(o, f->cpu);
  fputs(",\"kernel\":", o);
  json_str(o, f->kernel);
  fputs(",\"fs\":", o);
  json_str(o, f->fs);
  fprintf(o, ",\"fdatasync_us\":%.1f},\"sqlite_version\":", f->fdatasync_us);
  json_str(o, f->sqlite_version);
  fputs(",\"engine_version\":", o);
  json_str(o, f->engine_version);
  fputs(",\"commit\":", o);
  json_str(o, f->commit);
}

#endif
