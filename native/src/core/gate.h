/*
** gate.h: the write gate (gate.c), stock SQLite's write lock for connections that cannot
** run a statement again (mw_wait=1: the sqlite3 shell and C programs that load the
** extension).
*/
#ifndef MW_GATE_H
#define MW_GATE_H

#include "engine.h"

/* At the write lock of a mw_wait=1 lane in its snapshot: SQLITE_OK, the lane holds the
** gate and its snapshot holds every commit; SQLITE_BUSY, another writer holds it or the
** snapshot is behind (then the gate stays reserved for the lane's next snapshot). */
int mw_gate_enter(mw_lane *l);
/* A snapshot begins: a gate the lane kept is held again for this transaction. */
void mw_gate_begin(mw_lane *l);
/* The write lock went, the snapshot ended, or the lane closes. Kept after the
** SQLITE_BUSY of mw_gate_enter (its snapshot's end: the retry follows), and where
** `keep` says (a cold start's unread snapshot: SQLite locks again at once). */
void mw_gate_leave(mw_lane *l, int keep);
/* Around every commit of every lane: waits (bounded) while another lane holds the
** gate; the holder waits for the commits that passed. */
void mw_gate_commit_enter(mw_db *db, mw_lane *l);
void mw_gate_commit_leave(mw_db *db);

#endif /* MW_GATE_H */
