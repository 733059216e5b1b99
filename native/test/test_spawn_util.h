/* For the tests that run their own program again as child processes: start one (through
** the emulator MW_TEST_EMULATOR names, under qemu-user without binfmt_misc; build.zig
** sets it), wait for one, and signal between them with empty files. */
#ifndef MW_TEST_SPAWN_UTIL_H
#define MW_TEST_SPAWN_UTIL_H

#include "test_util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t tu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Runs exe with args (NULL-terminated, without argv[0]); env_name set to env_value
** in the child (unset when env_value is NULL; nothing when env_name is NULL). */
static pid_t tu_spawn(const char *exe, const char *env_name, const char *env_value,
                      char *const args[]) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid != 0) return pid;
  if (env_name && env_value) setenv(env_name, env_value, 1);
  else if (env_name) unsetenv(env_name);
  char *argv[32];
  int n = 0;
  const char *emu = getenv("MW_TEST_EMULATOR");
  if (emu && *emu) argv[n++] = (char *)emu;
  argv[n++] = (char *)exe;
  for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
  argv[n] = 0;
  if (emu && *emu) execvp(emu, argv);
  else execv(exe, argv);
  _exit(127);
}

/* The child's exit status, or 128 + the signal that killed it. */
static int tu_wait_status(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) CHECK(errno == EINTR);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- signals: empty files <path><suffix> that one process makes and another polls */

static void tu_make_file(const char *path, const char *suffix) {
  char f[400];
  snprintf(f, sizeof f, "%s%s", path, suffix);
  int fd = open(f, O_WRONLY | O_CREAT, 0644);
  CHECK(fd >= 0);
  close(fd);
}

static int tu_file_exists(const char *path, const char *suffix) {
  char f[400];
  snprintf(f, sizeof f, "%s%s", path, suffix);
  return access(f, F_OK) == 0;
}

/* A child's wait for its parent's signal: 10 minutes at most, so that a child whose
** parent failed before the signal ends too (the parent may take minutes between two
** signals under an emulator and a sanitizer). */
static void tu_await_file(const char *path, const char *suffix) {
  uint64_t t0 = tu_now_ns();
  while (!tu_file_exists(path, suffix)) {
    CHECK(tu_now_ns() - t0 < 600000000000ull);
    usleep(2000);
  }
}

/* The parent's wait for a child's signal: 120 s at most, and the child still running. */
static void tu_await_child_file(const char *path, const char *suffix, pid_t child) {
  uint64_t t0 = tu_now_ns();
  while (!tu_file_exists(path, suffix)) {
    CHECK(tu_now_ns() - t0 < 120000000000ull);
    CHECK(waitpid(child, 0, WNOHANG) == 0);
    usleep(2000);
  }
}

#endif
