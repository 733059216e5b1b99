/*
** testfixture_init.c: makes the engine the default VFS of every connection of
** SQLite's testfixture. The testfixture is built with
** -DSQLITE_EXTRA_INIT=mw_testfixture_init, so this runs at the end of every
** sqlite3_initialize(), also after the sqlite3_shutdown() calls of the suite:
** each initialize re-registers "unix" as the default, so the engine is made the
** default again here every time.
*/
#include "sqlite3.h"

int mw_sqlite_extra_init(const char *unused);

int mw_testfixture_init(const char *unused) {
  int rc = mw_sqlite_extra_init(unused); /* registers the VFS once, and the auto-extension */
  if (rc != SQLITE_OK) return rc;
  sqlite3_vfs *vfs = sqlite3_vfs_find("multiwriter");
  if (vfs == 0) return SQLITE_ERROR;
  return sqlite3_vfs_register(vfs, 1);
}
