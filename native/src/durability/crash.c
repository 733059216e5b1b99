/*
** crash.c: the crash points of the crash tests (docs/design.md, "Crash points"):
** MW_CRASH_AT=<name>[:n] aborts the process the n-th time (default the first) the
** named point is reached; and the pause points of the race tests: MW_PAUSE_AT=<name>:<ms>
** sleeps that long every time the named point is reached (a window between two steps
** made wide enough for other processes to run through it).
**
** Owns: the parsed MW_CRASH_AT and MW_PAUSE_AT. Never touches: anything else.
*/
#include "engine.h"

#include <stdlib.h>
#include <string.h>

void mw_crash_point(const char *name) {
  static mw_mutex mu = MW_MUTEX_INIT;
  static int loaded;
  static char want[64];
  static long count;
  mw_mutex_lock(&mu);
  if (!loaded) {
    loaded = 1;
    const char *e = getenv("MW_CRASH_AT");
    if (e) {
      size_t n = strcspn(e, ":");
      if (n >= sizeof(want)) n = sizeof(want) - 1;
      memcpy(want, e, n);
      want[n] = 0;
      count = e[n] == ':' ? atol(e + n + 1) : 1;
      if (count < 1) count = 1;
    }
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
      const char *e = getenv("MW_PAUSE_AT");
      size_t n = e ? strcspn(e, ":") : 0;
      st = 1;
      if (n > 0 && n < sizeof(want) && e[n] == ':') {
        memcpy(want, e, n);
        want[n] = 0;
        ms = (unsigned)atoi(e + n + 1);
        st = 2;
      }
      __atomic_store_n(&state, st, __ATOMIC_RELEASE);
    }
    mw_mutex_unlock(&mu);
  }
  if (st == 2 && strcmp(want, name) == 0) mw_sleep_us(ms * 1000u);
}
