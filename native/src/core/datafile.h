/*
** datafile.h: reads of the database file itself (datafile.c), for the pages no
** version in the store covers. Lanes, commits, growth, multi-process catch-up and
** the compactor read through here.
*/
#ifndef MW_DATAFILE_H
#define MW_DATAFILE_H

#include "engine.h"

/* Reads page bytes from the database file (pages the store does not hold). */
int mw_db_read_file(mw_db *db, uint32_t pgno, void *buf, int off, int amt);

#endif /* MW_DATAFILE_H */
