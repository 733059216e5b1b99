/* replay.c: a main() for the fuzz targets without libFuzzer: runs the target once
** on every file named (a folder: every file in it, in name order). `zig build test`
** runs each target over its committed corpus this way, so that the seeds, and the
** inputs of bugs found by fuzzing, stay regression tests where clang is missing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *b = malloc(cap);
  size_t got;
  while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      unsigned char *nb = realloc(b, cap * 2);
      if (!nb) { free(b); b = 0; break; }
      b = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!b) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    return 1;
  }
  LLVMFuzzerTestOneInput(b, n);
  free(b);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int inputs = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad |= run_file(argv[i]);
      inputs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) return 1;
    char **names = 0;
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) != 0) {
      if (e->d_name[0] == '.') continue;
      char **nv = realloc(names, (nn + 1) * sizeof(*names));
      if (!nv) return 1;
      names = nv;
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[nn] = malloc(len);
      if (!names[nn]) return 1;
      snprintf(names[nn], len, "%s/%s", argv[i], e->d_name);
      nn++;
    }
    closedir(d);
    qsort(names, nn, sizeof(*names), by_name);
    for (size_t k = 0; k < nn; k++) {
      bad |= run_file(names[k]);
      inputs++;
      free(names[k]);
    }
    free(names);
  }
  if (bad || inputs == 0) {
    fprintf(stderr, "replay: %s\n", inputs ? "an input could not be read" : "no input");
    return 1;
  }
  printf("%s: %d inputs replayed\n", argv[0], inputs);
  return 0;
}
