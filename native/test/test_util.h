/* Tiny helpers shared by the C tests: CHECK aborts the test with the location. */
#ifndef MW_TEST_UTIL_H
#define MW_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

#define CHECK_RC(rc, want)                                                       \
  do {                                                                           \
    int rc_ = (rc), want_ = (want);                                              \
    if (rc_ != want_) {                                                          \
      fprintf(stderr, "%s:%d: %s returned %d, wanted %d\n", __FILE__, __LINE__,  \
              #rc, rc_, want_);                                                  \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

#endif
