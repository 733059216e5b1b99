/*
** pageset.c: a set of page numbers (open addressing, linear probing), used for a
** lane's read set: every page SQLite may have taken into account without reading
** it through the VFS again in the current transaction.
**
** Owns: the set's memory. Never touches: lanes, the store, files.
*/
#include "engine.h"
#include "core/pageset.h"

#include <stdlib.h>
#include <string.h>

static uint32_t slot_of(uint32_t pgno, uint32_t cap) { return (pgno * 2654435761u) & (cap - 1); }

void mw_pageset_add(mw_pageset *s, uint32_t pgno) {
  if ((s->count + 1) * 2 > s->cap) {
    uint32_t ncap = s->cap ? s->cap * 2 : 256;
    uint32_t *ns = calloc(ncap, sizeof(uint32_t));
    if (ns == 0) {
      /* Cannot track the page: the commit that depends on it must fail safe. */
      s->failed = 1;
      return;
    }
    for (uint32_t i = 0; i < s->cap; i++) {
      uint32_t v = s->slot[i];
      if (v == 0) continue;
      uint32_t h = slot_of(v, ncap);
      while (ns[h]) h = (h + 1) & (ncap - 1);
      ns[h] = v;
    }
    free(s->slot);
    s->slot = ns;
    s->cap = ncap;
  }
  uint32_t h = slot_of(pgno, s->cap);
  while (s->slot[h]) {
    if (s->slot[h] == pgno) return;
    h = (h + 1) & (s->cap - 1);
  }
  s->slot[h] = pgno;
  s->count++;
}

int mw_pageset_has(const mw_pageset *s, uint32_t pgno) {
  if (s->cap == 0) return 0;
  uint32_t h = slot_of(pgno, s->cap);
  while (s->slot[h]) {
    if (s->slot[h] == pgno) return 1;
    h = (h + 1) & (s->cap - 1);
  }
  return 0;
}

void mw_pageset_clear(mw_pageset *s) {
  if (s->cap > 65536) {
    free(s->slot);
    s->slot = 0;
    s->cap = 0;
  } else if (s->count) {
    memset(s->slot, 0, s->cap * sizeof(uint32_t));
  }
  s->count = 0;
  s->failed = 0;
}

void mw_pageset_free(mw_pageset *s) {
  free(s->slot);
  memset(s, 0, sizeof(*s));
}
