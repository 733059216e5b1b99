/*
** Shared declarations of the engine's parts. Every engine source includes this
** header first; it picks the SQLite interface for the build:
**  - the shared/static library (SQLite linked in): sqlite3.h;
**  - the loadable extension (MW_EXTENSION): sqlite3ext.h, so that every SQLite
**    call goes through the routine table of the host that loaded it. Only APIs
**    present in SQLite 3.40 may be used by the engine for that reason.
*/
#ifndef MW_INTERNAL_H
#define MW_INTERNAL_H

#ifdef MW_EXTENSION
#  include "sqlite3ext.h"
SQLITE_EXTENSION_INIT3
#else
#  include "sqlite3.h"
#endif

#include "multiwriter.h"
#include "platform/platform.h"

#include <stddef.h>
#include <stdint.h>

#define MW_VFS_NAME "multiwriter"

#endif /* MW_INTERNAL_H */
