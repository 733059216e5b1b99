/*
** datafile.c: reads of the database file itself, for the pages no version in the
** store covers (lanes, commits, growth, the compactor all read through here).
**
** Owns: nothing (the handle is the database's, opened by db.c). Never touches: the
** store, the log, lanes.
*/
#include "engine.h"
#include "core/datafile.h"

int mw_db_read_file(mw_db *db, uint32_t pgno, void *buf, int off, int amt) {
  sqlite3_int64 o = (sqlite3_int64)(pgno - 1) * db->page_size + off;
  int rc = db->data->pMethods->xRead(db->data, buf, amt, o);
  /* A page past the end of the file that no commit wrote reads as zeros. */
  if (rc == SQLITE_IOERR_SHORT_READ) rc = SQLITE_OK;
  return rc;
}
