/*
** commit.h: the commit path (commit.c): validation, epoch assignment, install, log
** append, visibility in epoch order, transactions over several databases.
*/
#ifndef MW_COMMIT_H
#define MW_COMMIT_H

#include "engine.h"

/* commit.c: publishes frames [from, to) of the lane's WAL (to-1 is the commit
** frame, whose header says the database has db_pages pages). */
int mw_commit(mw_lane *l, uint64_t from, uint64_t to, uint32_t db_pages);
/* Publishes the stashed commits of several lanes (one transaction over attached
** databases) all or nothing: every one is validated before any is published. */
int mw_commit_group(mw_lane **lanes, int n);

#endif /* MW_COMMIT_H */
