/*
** guard.h: the engine's own handle on the database file (guard.c): the lock that
** keeps other processes out, the header mark that keeps stock SQLite out.
*/
#ifndef MW_GUARD_H
#define MW_GUARD_H

#include "mw_internal.h"

/* Header bytes 18 and 19 while the log may hold commits the file does not: stock
** SQLite refuses a read version above 2. */
#define MW_HDR_MARK 0x6d
/* Opens the database file through root (read-only when it cannot be written),
** wrapped: reads give bytes 18..19 back as 2, writes put the mark in once set. */
int mw_guard_open(sqlite3_vfs *root, const char *zPath, sqlite3_file **pOut);
void mw_guard_free(sqlite3_file *f);
int mw_guard_readonly(sqlite3_file *f);
/* Takes EXCLUSIVE (SHARED when read-only) at once; SQLITE_BUSY when held elsewhere. With
** SQLite's lock bytes moved (a test control), also a byte at their usual place (zPath,
** of identity id). */
int mw_guard_lock(sqlite3_file *f, const char *zPath, const mw_file_id *id);
int mw_guard_unlock(sqlite3_file *f);
/* Multi-process mode: from EXCLUSIVE or from nothing, holds a lock that engine
** processes share and stock connections do not get (SQLITE_BUSY): one byte of SQLite's
** SHARED range, or SHARED where the system cannot (the mark then keeps stock SQLite
** out). SQLITE_BUSY when a stock connection has the file (guard.c). */
int mw_guard_share(sqlite3_file *f, const char *zPath, const mw_file_id *id);
/* *pMarked: the file's header carries the mark. */
int mw_guard_marked(sqlite3_file *f, int *pMarked);
/* Sets (on) or clears the mark, durably. */
int mw_guard_set_mark(sqlite3_file *f, int on);
/* Takes the mark off, durably, while the engine has the file open (a checkpoint left
** the log with nothing the file lacks): this handle's writes of the header still put
** it in, and the next commit sets it again first. */
int mw_guard_unmark_open(sqlite3_file *f);
/* 1 when the lock keeps stock connections of other processes out whatever the header
** says: EXCLUSIVE, or this process's own byte (mw_mp=1 where the system has open file
** description locks); 0 where only the mark refuses them (mw_mp=1 on macOS). */
int mw_guard_keeps_out(sqlite3_file *f);
/* The file carries the mark already: this handle's writes of the header keep it in. */
void mw_guard_keep_mark(sqlite3_file *f);

#endif /* MW_GUARD_H */
