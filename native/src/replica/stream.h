/*
** stream.h: the replica stream of one database (stream.c): every durable commit, in
** epoch order, into LTX files of a Litestream file replica (mw_ltx_dir=), one TXID per
** commit, dense from 1 across the lives of the database (docs/replication.md).
*/
#ifndef MW_STREAM_H
#define MW_STREAM_H

#include "engine.h"

/* Opening, before the log: the replica `dir` (relative: from the database's folder) is
** scanned; a database with no log to replay (have_log 0) gets its first TXID here: the
** replica's last one when the file is the state it holds (its state file says so),
** else the file is written as the next TXID (a snapshot). *pTxid: the TXID of the
** file's state, for the new log's header (0: none yet, an empty database). */
int mw_stream_open(mw_db *db, const char *dir, int have_log, uint64_t *pTxid, char **pzErr);
/* After the log is open: TXIDs from the log's header (a replayed log), the replica
** caught up with the file when it lacks TXIDs before the log's base. */
int mw_stream_start(mw_db *db, char **pzErr);
/* Emits what is durable and not yet emitted (the compactor's thread, and before every
** compaction: a compaction never passes the last epoch emitted), at most once per
** MW_STREAM_EVERY_MS unless `force` (the last close, a reformat): each file costs a file
** creation, two syncs and a rename on the disk the log syncs to. */
#define MW_STREAM_EVERY_MS 200
int mw_stream_emit(mw_db *db, int force);
/* After a compaction to `epoch` (the file holds the state at it): when the level-0 files
** written since the last snapshot outweigh the database, the file goes to level 9 as a
** snapshot; then what the kept snapshots cover goes (mw_ltx_keep: the newest N snapshots
** stay, with every level-0 file after the oldest of them). */
int mw_stream_compacted(mw_db *db, uint64_t epoch);
/* The last epoch in the replica. */
uint64_t mw_stream_emitted(mw_db *db);
/* The TXID of an epoch of this life (0: before the stream's start, or no stream). */
uint64_t mw_stream_txid(mw_db *db, uint64_t epoch);
/* The last close, once the file holds every commit and is unmarked: the replica's
** state file records the file's checksum with its TXID, so that the next open knows
** whether the file changed in between (another program wrote it). */
int mw_stream_closed(mw_db *db);
void mw_stream_free(mw_db *db);
/* Whether PRAGMA page_size may write the empty database again (db.c's reformat): only
** while the replica holds nothing from before this open (every file of one replica has
** one page size). */
int mw_stream_page_size_ok(mw_db *db);
/* After the reformat: the file (its one page) is epoch `epoch`, written outside the
** log; it goes to the replica whole. A new page size starts the replica again (it held
** only this open's empty database). */
int mw_stream_reformatted(mw_db *db, uint64_t epoch);
/* 1 when dir (as mw_ltx_dir= names it) is this stream's directory. */
int mw_stream_same_dir(mw_db *db, const char *dir);

#endif /* MW_STREAM_H */
