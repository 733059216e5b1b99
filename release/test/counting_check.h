/* CHECK for the release test programs: counts every check and every failure and goes on
** (the programs print "N passed, M failed" at the end and exit non-zero on a failure). */
#ifndef MW_COUNTING_CHECK_H
#define MW_COUNTING_CHECK_H
#include <stdio.h>

static int failures = 0, checks = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#endif
