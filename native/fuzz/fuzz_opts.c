/* fuzz_opts: libFuzzer target for the mw* URI option parser (mw_opts_parse, vfs.c).
**
** The input is a URI query string, "key=value&key=value...". It is split the way
** SQLite splits one (at '&', then at the first '='; %HH escapes decoded) and turned
** into a database name with those parameters by sqlite3_create_filename, the form the
** VFS receives, then parsed. Checked: no crash, no out-of-bounds access, no leak; on
** success no message and every option in its range; on refusal a message that names
** the engine.
*/
#include "engine.h"
#include "vfs/vfs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARAMS 32

static void fail(const char *why) {
  fprintf(stderr, "fuzz_opts: %s\n", why);
  abort();
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decodes %HH escapes in place (as SQLite does for URI parameters). */
static void unescape(char *s) {
  char *o = s;
  for (char *p = s; *p; p++) {
    int h, l;
    if (p[0] == '%' && (h = hexval((unsigned char)p[1])) >= 0 && (l = hexval((unsigned char)p[2])) >= 0) {
      int c = h * 16 + l;
      if (c == 0) break; /* SQLite stops at an escaped NUL too */
      *o++ = (char)c;
      p += 2;
    } else {
      *o++ = *p;
    }
  }
  *o = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *q = malloc(size + 1);
  if (!q) return 0;
  memcpy(q, data, size);
  q[size] = 0;
  const char *az[2 * MAX_PARAMS];
  int np = 0;
  char *save = 0;
  for (char *tok = strtok_r(q, "&", &save); tok && np < MAX_PARAMS; tok = strtok_r(0, "&", &save)) {
    char *eq = strchr(tok, '=');
    char *val = eq ? eq + 1 : tok + strlen(tok);
    if (eq) *eq = 0;
    unescape(tok);
    unescape(val);
    if (!*tok) continue; /* an empty key would end the list */
    az[2 * np] = tok;
    az[2 * np + 1] = val;
    np++;
  }
  sqlite3_filename fn = sqlite3_create_filename("/fuzz/f.db", "/fuzz/f.db-journal", "/fuzz/f.db-wal", np, az);
  if (fn) {
    mw_opts o;
    memset(&o, 0xA5, sizeof o); /* whatever the caller's stack held: parse sets every field */
    char *err = (char *)1;
    int rc = mw_opts_parse(fn, &o, &err);
    if (rc == SQLITE_OK) {
      if (err) fail("success with a message");
      if ((o.engine != 0 && o.engine != 1) || (o.readcheck != 0 && o.readcheck != 1) ||
          (o.fullfsync != 0 && o.fullfsync != 1) || (o.small != 0 && o.small != 1) ||
          (o.mp != 0 && o.mp != 1) || (o.rebase != 0 && o.rebase != 1))
        fail("a flag that is neither 0 nor 1");
      if (o.log_max_bytes < ((uint64_t)1 << 20) || o.log_max_bytes > ((uint64_t)1 << 40))
        fail("mw_log_max_mb out of range");
      if (o.small && o.log_max_bytes > ((uint64_t)8 << 20)) fail("small profile with a large log");
    } else {
      if (rc != SQLITE_ERROR) fail("a refusal that is not SQLITE_ERROR");
      if (!err || !strstr(err, "multiwriter")) fail("a refusal without the engine's message");
      sqlite3_free(err);
    }
    sqlite3_free_filename(fn);
  }
  free(q);
  return 0;
}
