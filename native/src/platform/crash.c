/*
** crash.c: the crash points of the crash tests (docs/design/platform.md, "Crash points"):
** MW_CRASH_AT=<name>[:n] aborts the process the n-th time (default the first) the
** named point is reached; and the pause points of the race tests: MW_PAUSE_AT=<name>:<ms>
** sleeps that long every time the named point is reached (a window between two steps
** made wide enough for other processes to run through it).
**
** Owns: the parsed MW_CRASH_AT and MW_PAUSE_AT. Never touches: anything else.
*/
#include "mw_internal.h"
#include "platform/crash.h"

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

void mw_pause_point(const char *name) {
  /* Read once; after that, a pause point in a hot path costs one load and, only when
  ** MW_PAUSE_AT is set, a string compare. */
  static char want[64];
  static unsigned ms;
  static int state; /* 0: not read yet, 1: no pause point, 2: want[] and ms set */
  int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
  if (st == 0) {
    static mw_mutex mu = MW_MUTEX_INIT;
    mw_mutex_lock(&mu);
    st = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (st == 0) {
      long v = -1;
      parse_point("MW_PAUSE_AT", want, &v, -1);
      st = want[0] && v >= 0 && v < 100000 ? 2 : 1;
      if (st == 2) ms = (unsigned)v;
      __atomic_store_n(&state, st, __ATOMIC_RELEASE);
    }
    mw_mutex_unlock(&mu);
  }
  if (st == 2 && strcmp(want, name) == 0) mw_sleep_us(ms * 1000u);
}
