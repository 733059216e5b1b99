/*
** crash.h: the crash points of the crash tests and the pause points of the race
** tests (crash.c).
*/
#ifndef MW_CRASH_H
#define MW_CRASH_H

/* Crash points for the crash tests: MW_CRASH_AT=<name>[:n] aborts the process at
** the n-th (default 1st) time the named point is reached. */
void mw_crash_point(const char *name);
/* Pause points for the race tests: MW_PAUSE_AT=<name>:<ms> sleeps that long every
** time the named point is reached. */
void mw_pause_point(const char *name);

#endif /* MW_CRASH_H */
