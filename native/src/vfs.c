/*
** vfs.c: registers the "multiwriter" VFS over the default VFS.
**
** Stage 0 (foundation): the VFS passes every call through to the default VFS, so
** that the package, the binding and the extension can be built and tested before
** the engine exists. The engine replaces this with its own methods.
*/
#include "mw_internal.h"

static sqlite3_vfs mw_vfs;
static mw_mutex register_mutex = MW_MUTEX_INIT;

int mw_register(void) {
  int rc = SQLITE_OK;
  mw_mutex_lock(&register_mutex);
  if (sqlite3_vfs_find(MW_VFS_NAME) == 0) {
    sqlite3_vfs *root = sqlite3_vfs_find(0);
    if (root == 0) {
      rc = SQLITE_ERROR;
    } else {
      mw_vfs = *root;
      mw_vfs.pNext = 0;
      mw_vfs.zName = MW_VFS_NAME;
      rc = sqlite3_vfs_register(&mw_vfs, 0);
    }
  }
  mw_mutex_unlock(&register_mutex);
  return rc;
}
