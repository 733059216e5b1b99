/*
** owner.h: thread tokens (owner.c). A token stands for one thread of the process:
** it is made at the thread's first call into the engine that asks for it, and is
** marked ended when the thread ends (a TLS destructor). A lane keeps references to
** the tokens of the threads that used its transaction, so that the compactor can
** tell a transaction nobody can end any more (its every thread is gone: a
** terminated Worker) and release its snapshot (db.c, release_orphans_locked).
*/
#ifndef MW_OWNER_H
#define MW_OWNER_H

typedef struct mw_owner mw_owner;

/* The calling thread's token, made at the first call. NULL where there are none:
** no memory, or the library could not be kept mapped for the destructor (then no
** thread is ever seen ending). The token stays valid
** while the thread lives; take a reference to keep it longer. */
mw_owner *mw_owner_self(void);
void mw_owner_ref(mw_owner *o);
void mw_owner_unref(mw_owner *o);
/* 1 once the token's thread has ended (its TLS destructors ran). Atomic. */
int mw_owner_ended(mw_owner *o);
/* The hot-spot turns the thread holds, of any database (turn.c keeps the count):
** a thread that holds one never waits for another. Atomic. */
void mw_owner_turns_add(mw_owner *o, int delta);
int mw_owner_turns(mw_owner *o);
/* The count of engine write locks the thread took and that are still held (vfs/lane.c
** keeps it; atomic). It lives in the token, not in the thread's TLS: a COMMIT handed to
** another thread (vfs/async.c) releases the lock after the thread that took it may have
** ended, its TLS freed; a lane that counts in it holds a reference. */
int *mw_owner_write_locks(mw_owner *o);

#endif /* MW_OWNER_H */
