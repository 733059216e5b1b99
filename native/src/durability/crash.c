/*
** crash.c: the crash points of the crash tests (docs/design.md, "Crash points"):
** MW_CRASH_AT=<name>[:n] aborts the process the n-th time (default the first) the
** named point is reached; and the delay points of the race tests: MW_DELAY_AT=
** <name>:<us> sleeps that long every time the named point is reached.
**
** Owns: the parsed MW_CRASH_AT and MW_DELAY_AT. Never touches: anything else.
*/
#include "engine.h"

#include <stdlib.h>
#include <string.h>

/* Parses "<name>[:<n>]" from the environment variable `var` (once; mu held): the name
** into want, n into *pNum (dflt when absent). */
static void parse_point(const char *var, char want[64], long *pNum, long dflt) {
  const char *e = getenv(var);
  if (e == 0) return;
  size_t n = strcspn(e, ":");
  if (n >= 64) n = 63;
  memcpy(want, e, n);
  want[n] = 0;
  *pNum = e[n] == ':' ? atol(e + n + 1) : dflt;
}

void mw_crash_point(const char *name) {
  static mw_mutex mu = MW_MUTEX_INIT;
  static int loaded;
  static char want[64];
  static long count;
  mw_mutex_lock(&mu);
  if (!loaded) {
    loaded = 1;
    parse_point("MW_CRASH_AT", want, &count, 1);
    if (count < 1) count = 1;
  }
  int hit = want[0] && strcmp(want, name) == 0 && --count == 0;
  mw_mutex_unlock(&mu);
  if (hit) abort();
}

void mw_delay_point(const char *name) {
  static mw_mutex mu = MW_MUTEX_INIT;
  static int loaded;
  static char want[64];
  static long us;
  mw_mutex_lock(&mu);
  if (!loaded) {
    loaded = 1;
    parse_point("MW_DELAY_AT", want, &us, 0);
    if (us < 0 || us >= 10000000) us = 0;
  }
  int hit = want[0] && us && strcmp(want, name) == 0;
  mw_mutex_unlock(&mu);
  if (hit) mw_sleep_us((unsigned)us);
}
