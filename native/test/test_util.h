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

/* Run under an emulator (qemu-user; build.zig names it in MW_TEST_EMULATOR, and the
** tests that start their own binary again run it through that): slower, and without
** open file description locks. */
static inline int tu_under_emulator(void) {
  const char *emu = getenv("MW_TEST_EMULATOR");
  return emu && *emu;
}

/* 1 in a ThreadSanitizer build (gcc says so with a macro, clang with a feature). */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif
#endif
