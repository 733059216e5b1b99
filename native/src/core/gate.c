/*
** gate.c: the write gate (docs/design/core.md "The write gate").
**
** Writers run at once and a commit that lost runs again: the package does that, the
** sqlite3 shell and a C program cannot (SQLite has already run the statement). For
** their connections (mw_wait=1, the default of the loadable extension) the gate is
** stock SQLite's write lock: at the write lock of its transaction a lane takes the
** gate, or gets SQLITE_BUSY when another one holds it (SQLite calls the busy
** handler and runs the statement again, as with stock SQLite). While it is held, the
** commits of every other lane wait at their start (MW_GATE_HOLD_MS at most, then they
** go on and validation decides), so the holder's commit finds nothing new to
** conflict with. Its snapshot must hold every commit made before: the holder waits
** for the commits already past the gate, and when its snapshot is behind them it
** keeps the gate reserved (MW_GATE_RETRY_MS) and answers SQLITE_BUSY: SQLite lets
** the snapshot go, its busy handler waits a little, and the next snapshot, taken
** while no commit can pass, is current. With mw_mp=1 the gate spans the processes
** (mp.c): a process's holder also owns the gate in the shared header, and the others'
** commits wait for it at their publication lock.
**
** Nothing depends on the gate for correctness: every wait is bounded and validation
** decides every commit. It gives the connections that cannot run a statement again
** stock SQLite's promise: a write whose write lock was granted does not lose.
** Owns: db->gate, db->gate_until, db->gate_commits, db->gate_cv and the lanes'
** gate_mp / gate_keep. Never touches: the snapshot registry, the turn.
*/
#include "engine.h"
#include "core/db.h"
#include "core/gate.h"
#include "processes/mp.h"

static uint64_t ms_ns(int ms) { return (uint64_t)ms * 1000000u; }

static void wait_ns(mw_db *db, uint64_t deadline) {
  uint64_t now = mw_now_ns();
  if (now >= deadline) return;
  mw_cond_timedwait_ms(&db->gate_cv, &db->mu, (int)((deadline - now) / 1000000u) + 1);
}

/* The last epoch the lane's view holds: its snapshot and its own commits in it. */
static uint64_t view_tip(const mw_lane *l) { return l->nown ? l->own[l->nown - 1] : l->snap; }

/* Lets the gate go, if the lane still holds it (an expired gate may have gone to
** another lane meanwhile; the shared one then stays with this process). */
static void release(mw_lane *l) {
  mw_db *db = l->db;
  mw_mutex_lock(&db->mu);
  int other = db->gate != 0 && db->gate != l;
  if (db->gate == l) {
    db->gate = 0;
    db->gate_until = 0;
    mw_cond_broadcast(&db->gate_cv);
  }
  mw_mutex_unlock(&db->mu);
  if (l->gate_mp) {
    l->gate_mp = 0;
    if (!other) mw_mp_gate_give(db);
  }
}

/* Keeps the gate for the lane's retry (see the top): briefly, or a shell that does not
** retry would hold back every other commit. */
static int behind(mw_lane *l) {
  mw_db *db = l->db;
  uint64_t until = mw_now_ns() + ms_ns(MW_GATE_RETRY_MS);
  mw_mutex_lock(&db->mu);
  if (db->gate == l) db->gate_until = until;
  mw_mutex_unlock(&db->mu);
  if (l->gate_mp) mw_mp_gate_hold(db, until);
  l->gate_keep = 1;
  return SQLITE_BUSY;
}

int mw_gate_enter(mw_lane *l) {
  mw_db *db = l->db;
  uint64_t until = mw_now_ns() + ms_ns(MW_GATE_HOLD_MS);
  mw_mutex_lock(&db->mu);
  if (db->gate && db->gate != l && mw_now_ns() < db->gate_until) {
    mw_mutex_unlock(&db->mu);
    return SQLITE_BUSY; /* another writer's: as stock SQLite's write lock */
  }
  db->gate = l;
  db->gate_until = until;
  /* The commits that passed the gate before it closed finish first. */
  while (db->gate_commits > 0 && mw_now_ns() < until) wait_ns(db, until);
  mw_mutex_unlock(&db->mu);
  if (db->mp) {
    if (!l->gate_mp) {
      if (!mw_mp_gate_take(db, until)) {
        release(l);
        return SQLITE_BUSY; /* another process's writer holds it */
      }
      l->gate_mp = 1;
    } else {
      mw_mp_gate_hold(db, until);
    }
    mw_mp_refresh(db); /* what the other processes published before */
  }
  /* Every commit made before the gate closed, visible (mw_mp=1: synced). */
  mw_db_wait_assigned_visible(db);
  mw_mutex_lock(&db->mu);
  /* Its waits spent part of its time: the transaction's own starts now (a holder
  ** descheduled in them, on a loaded machine, found the others' commits let through
  ** before it wrote anything). An expired gate another lane took meanwhile is theirs. */
  int mine = db->gate == l;
  uint64_t now = mw_now_ns();
  if (mine) db->gate_until = now + ms_ns(MW_GATE_HOLD_MS);
  int current = db->assigned == view_tip(l) && !db->broken;
  mw_mutex_unlock(&db->mu);
  if (!mine) {
    release(l); /* the shared one, if this process still owns it for this lane */
    return SQLITE_BUSY;
  }
  if (l->gate_mp) mw_mp_gate_hold(db, now + ms_ns(MW_GATE_HOLD_MS));
  /* Behind: SQLITE_BUSY. A statement that begins its transaction is run again by
  ** SQLite's busy handler, on a current snapshot; in a transaction that read before its
  ** first write (BEGIN; SELECT; UPDATE) it is the error, as stock SQLite's
  ** SQLITE_BUSY_SNAPSHOT is there (BEGIN IMMEDIATE avoids it, as with stock SQLite). */
  if (!current) return behind(l);
  return SQLITE_OK;
}

void mw_gate_begin(mw_lane *l) {
  mw_db *db = l->db;
  uint64_t now = mw_now_ns();
  int held, expired;
  mw_mutex_lock(&db->mu);
  held = db->gate == l;
  /* Kept for a retry that came too late (or never: a shell without a busy timeout
  ** reports the error and goes on): not held over whatever this transaction is. */
  expired = held && now >= db->gate_until;
  if (held && !expired) db->gate_until = now + ms_ns(MW_GATE_HOLD_MS);
  mw_mutex_unlock(&db->mu);
  if (expired) release(l);
  else if (held && l->gate_mp) mw_mp_gate_hold(db, now + ms_ns(MW_GATE_HOLD_MS));
}

void mw_gate_leave(mw_lane *l, int keep) {
  if (l->gate_keep) {
    l->gate_keep = 0; /* the snapshot that answered SQLITE_BUSY: its retry follows */
    return;
  }
  if (!keep) release(l);
}

void mw_gate_commit_enter(mw_db *db, mw_lane *l) {
  mw_mutex_lock(&db->mu);
  while (db->gate && db->gate != l && mw_now_ns() < db->gate_until) wait_ns(db, db->gate_until);
  db->gate_commits++;
  mw_mutex_unlock(&db->mu);
}

void mw_gate_commit_leave(mw_db *db) {
  mw_mutex_lock(&db->mu);
  if (--db->gate_commits == 0 && db->gate) mw_cond_broadcast(&db->gate_cv);
  mw_mutex_unlock(&db->mu);
}
