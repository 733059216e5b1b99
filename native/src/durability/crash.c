/*
** crash.c: the crash points of the crash tests (docs/design.md, "Crash points"):
** MW_CRASH_AT=<name>[:n] aborts the process the n-th time (default the first) the
** named point is reached.
**
** Owns: the parsed MW_CRASH_AT. Never touches: anything else.
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
