/*
** vfs.h: the "multiwriter" VFS (vfs.c): the mw* URI options, the root VFS, the
** open-time check. mw_file and MW_KIND_* are in engine.h.
*/
#ifndef MW_VFS_H
#define MW_VFS_H

#include "engine.h"

/* Parses the mw* URI parameters of a main-database name. Returns SQLITE_OK, or an
** error with *pzErr (sqlite3_malloc) naming the parameter. */
int mw_opts_parse(const char *zName, mw_opts *o, char **pzErr);

/* The root VFS under "multiwriter". */
sqlite3_vfs *mw_root_vfs(void);
/* Called by the auto-extension at the end of every sqlite3_open: fails the open of
** a database whose options were refused, with the message. */
int mw_check_open(sqlite3 *db, char **pzErr);

#endif /* MW_VFS_H */
