/*
** lane.h: one connection (lane.c): its main-file and WAL methods, and the calling
** thread's count of engine write locks.
*/
#ifndef MW_LANE_H
#define MW_LANE_H

#include "engine.h"

/* The number of engine write locks the calling thread holds (a thread-local
** counter; its address also identifies the thread). */
int *mw_thread_write_locks(void);

/* Opens a lane for the main file p of an engine database (SQLite's xOpen). */
int mw_lane_create(mw_file *p, sqlite3_vfs *root, const char *zName, int flags, int *pOut,
                   const mw_opts *o, char **pzErr);
extern const sqlite3_io_methods mw_main_methods;
extern const sqlite3_io_methods mw_wal_methods;
int mw_lane_open_wal(mw_lane *l, sqlite3_file *f);

#endif /* MW_LANE_H */
