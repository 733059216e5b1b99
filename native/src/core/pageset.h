/*
** pageset.h: a set of page numbers (pageset.c), the lane's read set. The type is in
** engine.h.
*/
#ifndef MW_PAGESET_H
#define MW_PAGESET_H

#include "engine.h"

void mw_pageset_add(mw_pageset *s, uint32_t pgno);
int mw_pageset_has(const mw_pageset *s, uint32_t pgno);
void mw_pageset_clear(mw_pageset *s);
void mw_pageset_free(mw_pageset *s);

#endif /* MW_PAGESET_H */
