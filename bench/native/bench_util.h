/*
** bench_util.h: small helpers of the native benchmark (bench/native/mwbench.c):
** the monotonic clock, sleeping, a per-writer random generator, growable latency
** arrays with nearest-rank percentiles, and JSON string escaping.
** Header-only (build.zig compiles each bench/native/*.c into its own program), so
** every function is static. Owns no global state; never touches SQLite.
*/
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
  /* Restart after a signal so that a backoff is never cut short. */
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* xorshift64*: fast, good enough to pick rows; one state per writer. */
typedef struct { uint64_t s; } rng_t;

static void rng_seed(rng_t *r, uint64_t seed) {
  r->s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  if (r->s == 0) r->s = 1;
}

static uint64_t rng_next(rng_t *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n); n > 0. The modulo bias is irrelevant at these sizes. */
static uint64_t rng_below(rng_t *r, uint64_t n) { return (rng_next(r) >> 11) % n; }

/* Latencies in nanoseconds, appended by one writer, merged before the percentiles. */
typedef struct {
  uint64_t *v;
  size_t n, cap;
} lat_t;

/* Returns 0, or -1 when memory runs out (the run is then an error). */
static int lat_push(lat_t *l, uint64_t ns) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4096;
    uint64_t *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) return -1;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = ns;
  return 0;
}

static int lat_append(lat_t *dst, const uint64_t *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (lat_push(dst, src[i]) != 0) return -1;
  return 0;
}

static void lat_free(lat_t *l) {
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array: the smallest value with at least
** q of the samples at or below it. 0 for an empty array. */
static uint64_t pct_sorted(const uint64_t *v, size_t n, double q) {
  if (n == 0) return 0;
  double rank = q * (double)n;
  size_t k = (size_t)rank;
  if ((double)k < rank) k++;
  if (k < 1) k = 1;
  if (k > n) k = n;
  return v[k - 1];
}

/* Writes s as a JSON string (with quotes) into f. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

#endif
