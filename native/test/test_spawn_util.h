/* For the tests that run their own program again as child processes: start one (through
** the emulator MW_TEST_EMULATOR names, under qemu-user without binfmt_misc; build.zig
** sets it), and wait for one. */
#ifndef MW_TEST_SPAWN_UTIL_H
#define MW_TEST_SPAWN_UTIL_H

#include "test_util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

#endif
