/*
** turn.c: the hot-spot turn (docs/design/core.md "The hot-spot turn").
**
** A connection that lost MW_TURN_AFTER commits in a row, or whose heat (its recent
** refusal rate, engine.h) reached MW_HEAT_QUEUE, queues for a per-database turn
** before its next snapshot. The heat keeps a lane that needed the turn in the queue
** while it keeps committing there (it cools slowly); uncontended work never heats
** up and stays optimistic. The queue is FIFO (a linked list under db->mu; each
** queued lane waits on its own turn_wake, signalled when it becomes the head; the
** other waits are on db->turn_cv: no spinning). The lane at its head holds the turn
** once it begins its transaction, so the retries of a hot spot run one after the
** other on fresh state instead of starving each other. A *starving* holder (lost
** MW_TURN_AFTER in a row, or lost during its last turn) is exclusive: it first lets
** the transactions in flight finish, then runs while new transactions of other
** lanes wait. A holder queued by its heat only takes its turn among the queued.
**
** Every wait is bounded, so a connection that never comes back (or one thread using
** two connections) cannot block the others forever:
**  - a lane that does not queue waits at most MW_TURN_WAIT_MS for an exclusive turn;
**  - an exclusive holder waits at most MW_TURN_WAIT_MS for the transactions in flight;
**  - the head of the queue keeps its place at most MW_TURN_HOLD_MS: past that it is
**    dropped from the queue (it queues again after its next loss).
** The turn ends with the holder's transaction (commit or rollback; not the momentary
** snapshot of a cold start, db.c), or earlier, once the holder's commit is installed
** or refused (mw_db_turn_pass, before any sync): the next holder's snapshot includes
** the commits installed but not yet durable (db.c), so the turn does not wait for
** the disk.
**
** With mw_mp=1 the holder also takes the turn across processes (db.c, mp.c); it goes
** back with this one (unlink_locked).
** Owns: db->turn, db->turn_exclusive, db->turn_head, db->turn_tail, db->turn_since
** and the lanes' turn_next / turn_queued / turn_owner, with the count of turns in the
** holder thread's token (owner.c; the heat is kept by commit.c). Every function runs under
** db->mu. Never touches the snapshot registry or the epochs (db.c does, around
** these calls).
*/
#include "engine.h"
#include "core/owner.h"
#include "core/turn.h"
#include "processes/mp.h"

static void wait_on(mw_db *db, mw_cond *cv, uint64_t deadline) {
  uint64_t now = mw_now_ns();
  if (now >= deadline) return;
  mw_cond_timedwait_ms(cv, &db->mu, (int)((deadline - now) / 1000000u) + 1);
}

static void wait_until(mw_db *db, uint64_t deadline) {
  wait_on(db, &db->turn_cv, deadline);
}

/* The turn goes to l, taken by the thread of token me (NULL: not counted). */
static void hold_locked(mw_db *db, mw_lane *l, mw_owner *me) {
  l->stats[MW_STAT_TURNS]++;
  db->turn = l;
  l->turn_owner = me;
  if (me) {
    mw_owner_ref(me);
    mw_owner_turns_add(me, 1);
  }
}

/* Removes l from the queue; the next lane becomes the head now. */
static void unlink_locked(mw_db *db, mw_lane *l) {
  if (!l->turn_queued) return;
  mw_lane *prev = 0;
  for (mw_lane *p = db->turn_head; p; prev = p, p = p->turn_next) {
    if (p != l) continue;
    if (prev) prev->turn_next = p->turn_next; else db->turn_head = p->turn_next;
    if (db->turn_tail == p) db->turn_tail = prev;
    if (prev == 0) db->turn_since = mw_now_ns();
    break;
  }
  l->turn_next = 0;
  l->turn_queued = 0;
  if (db->turn == l) {
    db->turn = 0;
    db->turn_exclusive = 0;
    if (l->turn_owner) {
      mw_owner_turns_add(l->turn_owner, -1);
      mw_owner_unref(l->turn_owner);
      l->turn_owner = 0;
    }
  }
  if (l->mp_turn) {
    /* The turn across processes goes with this one (db.c took it, mp.c). */
    l->mp_turn = 0;
    mw_mp_turn_give(db);
  }
  mw_cond_broadcast(&db->turn_cv);
  /* Only the head's thread has anything to do: waking the whole queue at every
  ** hand-over cost a context switch per queued lane on a loaded machine. */
  if (db->turn_head) mw_cond_signal(&db->turn_head->turn_wake);
}

void mw_turn_enter_locked(mw_db *db, mw_lane *l, mw_owner *me) {
  uint64_t hold = (uint64_t)MW_TURN_HOLD_MS * 1000000u;
  /* A thread that holds a turn (of another database in the same transaction, ATTACH,
  ** or of another connection) never waits for one: two transactions that take two
  ** databases' turns in opposite orders would each wait for the other's until the
  ** hold ran out (500 ms a step), and with mw_mp=1 the turns across processes too
  ** (db.c takes one for a holder). It runs optimistically here: it gives up its place
  ** in the queue (it queues again after its next loss) and takes no turn. So no
  ** thread waits for a turn, nor takes one, while it holds one: the waits for turns
  ** form no cycle. */
  /* A lane of an event loop (MW_FCNTL_EVENT_LOOP) never waits, nor takes a turn: its
  ** thread also runs the other transactions of the loop, one of which may hold the
  ** turn while parked at an await. */
  int mine = db->turn == l && l->turn_owner == me;
  if (l->event_loop || (me && mw_owner_turns(me) > mine)) {
    if (l->turn_queued && db->turn != l) unlink_locked(db, l);
    if (db->turn == l) db->turn_exclusive = 0; /* handed over from another thread */
    return;
  }
  if ((l->losses >= MW_TURN_AFTER || l->heat >= MW_HEAT_QUEUE) && !l->turn_queued) {
    l->turn_next = 0;
    l->turn_queued = 1;
    if (db->turn_tail) db->turn_tail->turn_next = l; else db->turn_head = l;
    db->turn_tail = l;
    if (db->turn_head == l) db->turn_since = mw_now_ns();
  }
  if (l->turn_queued) {
    /* Wait in line; a head that overstays loses its place. */
    while (db->turn_head != l) {
      mw_lane *h = db->turn_head;
      uint64_t until = db->turn_since + hold;
      if (mw_now_ns() >= until) {
        unlink_locked(db, h);
        continue;
      }
      wait_on(db, &l->turn_wake, until);
    }
    if (db->turn != l) hold_locked(db, l, me);
    /* A starving holder (MW_TURN_AFTER losses in a row, or a loss in its last
    ** turn) runs alone: it lets the transactions in flight finish (it then runs on
    ** fresh state) and new ones wait for it. A holder queued by its
    ** heat only takes its turn among the queued: the hot spot's writers then run
    ** one after the other, and everything else stays optimistic (no 50 ms waits
    ** behind a queue that is never empty). */
    db->turn_exclusive = l->losses >= MW_TURN_AFTER || l->lost_turn;
    if (!db->turn_exclusive) return;
    uint64_t deadline = mw_now_ns() + (uint64_t)MW_TURN_WAIT_MS * 1000000u;
    while (db->active > 0 && mw_now_ns() < deadline) wait_until(db, deadline);
    return;
  }
  /* Someone else's exclusive turn: new transactions wait for it to end (bounded). */
  uint64_t deadline = mw_now_ns() + (uint64_t)MW_TURN_WAIT_MS * 1000000u;
  while (db->turn && db->turn_exclusive && db->turn != l && mw_now_ns() < deadline)
    wait_until(db, deadline);
}

void mw_turn_leave_locked(mw_db *db, mw_lane *l) {
  if (db->turn == l) unlink_locked(db, l);
}

void mw_turn_forget_locked(mw_db *db, mw_lane *l) { unlink_locked(db, l); }
