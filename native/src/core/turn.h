/*
** turn.h: the hot-spot turn (turn.c). Its constants are in engine.h.
*/
#ifndef MW_TURN_H
#define MW_TURN_H

#include "engine.h"

/* Under db->mu: queue for and take the hot-spot turn before a
** transaction's snapshot (me: the calling thread's token, or NULL); release it at the
** transaction's end; drop a closing lane. */
void mw_turn_enter_locked(mw_db *db, mw_lane *l, mw_owner *me);
void mw_turn_leave_locked(mw_db *db, mw_lane *l);
void mw_turn_forget_locked(mw_db *db, mw_lane *l);

#endif /* MW_TURN_H */
