/*
** mp.c: multi-process mode (mw_mp=1, docs/design/processes.md).
** Every process of the database keeps its own page store and its own handle on the
** one log "<db>-mw"; they agree through "<db>-mwshm" (docs/format.md):
**   - a header, mapped: the committed end (logical offset after the last record whose
**     writer published it), the durable end (every byte before it synced), the shift
**     of the log file (logical - physical offset), the page size;
**   - a process table: one slot per process, alive while the process holds the write
**     lock (fcntl) on the slot's lock byte; the kernel drops it when the process dies;
**   - the join lock, a lock byte (fcntl: open, last close, compaction), and the
**     publication lock (one commit at a time across processes, from catch-up to the
**     record written): a word of the header on Linux, a lock byte elsewhere ("the
**     publication lock", below). Both belong to the process: an in-process mutex goes
**     with each (join_mu, pub_mu).
** A commit takes the publication lock, applies the records the others appended since
** this process's log end (catch-up: their page lists installed in the store with their
** epochs as lazy versions, whose images are read from the log on first use; visible
** once durable), is validated and written as in one process, publishes its end and
** releases the lock, then syncs. A snapshot applies the published records first
** (without the lock: published records are complete and never change).
** The first process to join (no live slot) recovers the log as in one process; a later
** one replays the log up to the durable end. Compaction into the database file runs
** while any number of processes are open (docs/design/processes.md, the section
** "Compaction"): one compactor at a time (join lock), up to T = the lowest floor that
** the live processes publish in their slots (their oldest snapshot, at most what they
** applied: every process ticks, so that an idle one's floor advances too); the log
** switch copies the records written so far while commits go on, then the rest under
** the publication lock (compact_enter), and is announced by a generation number
** (odd while a rename is under way), after which each process opens the new file
** before it reads or writes past its end, and learns the compacted epoch (its
** garbage collection). The last to close compacts everything and removes both files.
**
** The holders of the hot-spot turn of different processes take turns too (the turn
** across processes, below).
** Owns: "<db>-mwshm", the process table, the join and publication locks, catch-up,
** the floors, the log generation, when a switch may reuse the log's spare, and the
** turn across processes.
** Never touches: the database file (db.c, guard.c, compact.c), SQLite, lanes.
*/
#include "engine.h"
#include "core/datafile.h"
#include "core/store.h"
#include "durability/log.h"
#include "durability/log_format.h"
#include "platform/crash.h"
#include "processes/guard.h"
#include "processes/mp.h"

#include <stdlib.h>
#include <string.h>

#ifndef _WIN32

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#define SHM_MAGIC "SQLMWSHM"
#define SHM_VERSION 10u         /* 7: records acknowledged once written (log format 2);
                                    8: the mark taken off by a checkpoint (unmarked);
                                    9: the publication lock a word (pub_owner) on Linux;
                                    10: the write gate (gate_owner, gate_until) */
#define SHM_SIZE 8192            /* bytes mapped */
#define LOCK_JOIN 8192           /* lock bytes: past the mapped header, never data */
#define LOCK_PUB 8193           /* the publication lock where it is no word (not Linux) */
#define LOCK_STREAM 8194         /* the replica stream's emitter (one process at a time) */
#define LOCK_SLOT0 8448          /* + slot */

typedef struct shm_hdr {
  char magic[8];               /* SHM_MAGIC */
  uint32_t version;            /* SHM_VERSION */
  uint32_t page_size;
  uint64_t committed_end;      /* logical end of the last published record */
  uint64_t committed_epoch;    /* its epoch (switched_epoch is taken from it) */
  uint64_t durable_end;        /* every byte of the log before it is synced */
  uint64_t shift;              /* logical - physical offset of the log file */
  uint32_t nslots;             /* MW_MP_SLOTS */
  uint32_t zero;
  uint64_t alloc_end;          /* logical end of the zeroed room of the log file */
  uint64_t pid[MW_MP_SLOTS];   /* of each slot's last owner (for the eye) */
  /* Compaction while several processes are open (mp.c's opening comment). */
  uint64_t compacted;          /* the database file holds (synced) the state at it */
  uint64_t log_gen;            /* even: the file at the log's name has `shift`; odd: a
                               ** compactor is renaming (or died renaming) a new file
                               ** with next_shift and base epoch next_base over it */
  uint64_t next_shift;
  uint64_t next_base;
  uint64_t floor[MW_MP_SLOTS]; /* per slot: no snapshot of its process is or will be
                               ** older, and its process applied every record up to it */
  /* The hot-spot turn across processes ("the turn across processes" below). */
  uint32_t turn_owner;         /* slot + 1 of the process holding it, 0: nobody */
  uint32_t turn_zero;
  uint64_t turn_since;         /* when turn_owner last changed (CLOCK_MONOTONIC ns) */
  uint64_t turn_seq;           /* arrivals counted */
  uint64_t turn_want[MW_MP_SLOTS]; /* per slot: its arrival number while it waits, 0 */
  uint32_t turn_wake[MW_MP_SLOTS]; /* per slot: bumped when the turn is handed to it (a
                               ** futex word on Linux) */
  /* The group sync across processes ("group sync" below). */
  uint32_t sync_owner;         /* slot + 1 of the process syncing for the others, 0 */
  uint32_t sync_seq;           /* bumped when it is done (a futex word on Linux) */
  /* Room being added off the publication lock ("room in the log" below). */
  uint64_t grow_end;           /* above alloc_end: [alloc_end, grow_end) is being zeroed */
  uint32_t grow_slot;          /* the slot of the process that zeroes it */
  uint32_t grow_zero;
  /* The log's spare ("the spare of the log" below). */
  uint64_t switched_epoch;     /* the committed epoch when the last switch renamed */
  /* The replica stream (replica/stream.c, "the replica stream" below). */
  uint64_t ltx_dir_hash;       /* of its directory, 0: no stream (every process the same) */
  uint64_t ltx_emitted;        /* the last epoch in the replica */
  uint64_t ltx_l0_bytes;       /* level-0 bytes written since the last snapshot (about) */
  uint64_t ltx_epoch0, ltx_txid0; /* the TXIDs: epoch0's state is TXID txid0 */
  uint32_t ltx_pages;          /* the database's size at ltx_emitted */
  uint32_t unmarked;           /* a checkpoint took the file's mark off ("the mark",
                                  below); the next commit of any process puts it back */
  /* The publication lock on Linux ("the publication lock" below). */
  uint32_t pub_owner;          /* 0: free; else its holder: slot + 1 or PUB_JOINER (low 16
                                  bits), its process's tag (high 16); a futex word */
  uint32_t pub_sleepers;       /* processes asleep on pub_owner */
  /* The write gate across processes ("the write gate" below). */
  uint32_t gate_owner;         /* slot + 1 of the process whose writer holds it, 0 */
  uint32_t gate_zero;
  uint64_t gate_until;         /* the others' commits wait for it until then
                                  (CLOCK_MONOTONIC ns) */
} shm_hdr;

struct mw_mp {
  char *path;                  /* "<db>-mwshm" */
  int fd;
  shm_hdr *hdr;                /* mapped, SHM_SIZE bytes */
  int slot;                    /* ours, -1 before joining */
  int first;                   /* no other process was alive at our open */
  int join_held;
  int joined;                  /* between joined and leave: the compactor may try */
  uint64_t gen;                /* log_gen of the file db->log is on (catch_mu) */
  mw_mutex join_mu, pub_mu, catch_mu;
  int switch_locked;           /* mw_mp_compact_log holds the publication lock */
  uint64_t switch_room;        /* the logical end of the new file's zeroed room */
  int leading;                 /* a thread of this process leads the group sync */
  mw_mutex grow_mu;            /* this process's claim of room (run_claim) */
  uint64_t claim_from, claim_to; /* the range to zero, claim_to 0: none */
  mw_bg_job grower;            /* zeroes the claim off the commit path */
  int grower_added;
  int64_t claims_zeroed;       /* claims zeroed by this process (atomic; statistics) */
  int64_t claims_now;          /* ... of which by a holder that needed the room at once */
  mw_mutex stream_mu;          /* with LOCK_STREAM: one emitter */
  uint32_t tag;                /* in the publication lock's word: the pid's low 16 bits */
  uint64_t stuck_epoch;        /* the oldest invisible record of another process, */
  uint64_t stuck_since;        /* seen not durable since (ns), under db->mu */
};

/* How long a record of another process may stay published and not durable before a
** snapshot syncs the log itself: its writer died between writing and syncing it (its
** sync normally follows within a sync's time). Without it, that record would stay
** invisible, and every commit after it refused, until some commit synced the log. */
#define STUCK_NS 20000000ull

typedef char shm_fits[sizeof(shm_hdr) <= SHM_SIZE ? 1 : -1];

/* ---------------------------------------------------------------- locks */

static int byte_lock(int fd, off_t off, int type, int wait) {
  struct flock fl;
  memset(&fl, 0, sizeof(fl));
  fl.l_type = (short)type;
  fl.l_whence = SEEK_SET;
  fl.l_start = off;
  fl.l_len = 1;
  for (;;) {
    if (fcntl(fd, wait ? F_SETLKW : F_SETLK, &fl) == 0) return SQLITE_OK;
    if (errno == EINTR) continue;
    /* A deadlock the kernel sees between processes: none is possible (no process waits
    ** for one of these locks while it holds the other), but never fail a commit on it. */
    if (errno == EDEADLK && wait) {
      mw_sleep_us(1000);
      continue;
    }
    if (errno == EACCES || errno == EAGAIN) return SQLITE_BUSY;
    return SQLITE_IOERR_LOCK;
  }
}

/* 1 when another process holds (or may hold) a lock on the byte. */
static int held_elsewhere(int fd, off_t off) {
  struct flock fl;
  memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = off;
  fl.l_len = 1;
  if (fcntl(fd, F_GETLK, &fl) != 0) return 1;
  return fl.l_type != F_UNLCK;
}

static int others_alive(mw_mp *m) {
  for (int i = 0; i < MW_MP_SLOTS; i++)
    if (i != m->slot && held_elsewhere(m->fd, LOCK_SLOT0 + i)) return 1;
  return 0;
}

static void join_release(mw_mp *m) {
  if (!m->join_held) return;
  (void)byte_lock(m->fd, LOCK_JOIN, F_UNLCK, 0);
  m->join_held = 0;
  mw_mutex_unlock(&m->join_mu);
}

/* Takes the join lock (join_mu held by the caller); wait = 0: SQLITE_BUSY at once. */
static int join_take(mw_mp *m, int wait) {
  int rc = byte_lock(m->fd, LOCK_JOIN, F_WRLCK, wait);
  if (rc == SQLITE_OK) m->join_held = 1;
  return rc;
}

/* Sleeps until the word *w of the header moves from `seen`, `ms` at most (a futex on
** Linux; elsewhere it looks again every 250 us), and wakes up to `n` sleepers on it. The
** group sync, the turn and the publication lock wait on words of the header this way. */
static void word_sleep(uint32_t *w, uint32_t seen, int ms) {
#ifdef __linux__
  struct timespec ts = { 0, ms * 1000000L };
  (void)syscall(SYS_futex, w, FUTEX_WAIT, seen, &ts, (void *)0, 0);
#else
  for (int i = 0; i < ms * 4 && __atomic_load_n(w, __ATOMIC_SEQ_CST) == seen; i++) mw_sleep_us(250);
#endif
}

static void word_wake(uint32_t *w, int n) {
#ifdef __linux__
  (void)syscall(SYS_futex, w, FUTEX_WAKE, n, (void *)0, (void *)0, 0);
#else
  (void)w, (void)n;
#endif
}

/* ---------------------------------------------------------------- the publication lock */

/* One commit at a time across processes. It was a lock byte (fcntl F_SETLKW, then
** F_UNLCK): two system calls per commit even when no other process wanted it, some 2 us of
** a commit's 12 to 16 with one process inserting at synchronous=NORMAL, and a sleep and a
** wake-up each time another did. On Linux it is now a word of the mapped header: taken
** with one compare-and-swap, waited for by spinning a little (a holder keeps it for a few
** microseconds: catch-up, validation, the record's write), then asleep on it (futex), and
** released with one store, plus a wake-up only when a process sleeps on it.
** The kernel drops a lock byte of a process that dies; the word names its holder instead,
** and a sleeper looks, each PUB_LOOK_MS, whether the holder is still alive: the lock byte
** of its slot (a process that took its slot) or, for PUB_JOINER, the join lock (a
** process opening the database takes the publication lock before it has a slot, and
** holds the join lock meanwhile). A dead holder's lock is taken over: what it left
** behind the committed end is overwritten by the next record, as after the death of a
** holder of the lock byte. A process that takes the slot of a dead holder, or the join
** lock after a dead joiner, frees the word first (pub_clear_stale): the liveness test
** would find the slot alive again. The word also carries the holder's tag (its pid's low
** 16 bits), so that a sleeper that found the slot dead cannot free the lock of a process
** that took the slot, and the lock, meanwhile. Elsewhere (no futex) the lock byte stays; every
** process of a database runs the same code (SHM_VERSION).
** pub_mu makes it one thread at a time in a process: a process never waits for itself. */

#define PUB_JOINER 0xffffu      /* holder: a process opening the database, without a slot */
#define PUB_WHO(w) ((w) & 0xffffu) /* the holder's slot + 1, or PUB_JOINER */
#define PUB_SPINS 200           /* looks at the word before sleeping on it (~10 us) */
#define PUB_LOOK_MS 2           /* a sleeper checks that the holder is alive this often */

#ifdef __linux__
static uint32_t pub_me(const mw_mp *m) {
  return (m->slot >= 0 ? (uint32_t)m->slot + 1 : PUB_JOINER) | m->tag << 16;
}

/* 1 unless the holder named by the word is known to be dead. */
static int pub_holder_alive(mw_mp *m, uint32_t word) {
  uint32_t who = PUB_WHO(word);
  if (who == PUB_JOINER) return held_elsewhere(m->fd, LOCK_JOIN);
  if (who == 0 || who > MW_MP_SLOTS || (int)who - 1 == m->slot) return 0;
  return held_elsewhere(m->fd, LOCK_SLOT0 + (int)who - 1);
}

static int pub_take(mw_mp *m) {
  shm_hdr *h = m->hdr;
  uint32_t me = pub_me(m);
  for (int spins = 0;; spins++) {
    uint32_t cur = __atomic_load_n(&h->pub_owner, __ATOMIC_RELAXED);
    if (cur == 0 &&
        __atomic_compare_exchange_n(&h->pub_owner, &cur, me, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return SQLITE_OK;
    if (cur == 0) continue; /* taken meanwhile: cur is its holder */
    if (spins < PUB_SPINS) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    __atomic_add_fetch(&h->pub_sleepers, 1, __ATOMIC_SEQ_CST);
    word_sleep(&h->pub_owner, cur, PUB_LOOK_MS);
    __atomic_sub_fetch(&h->pub_sleepers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->pub_owner, __ATOMIC_SEQ_CST) == cur && !pub_holder_alive(m, cur)) {
      /* Its holder died: free it (the compare keeps a newer holder's), then take it. */
      (void)__atomic_compare_exchange_n(&h->pub_owner, &cur, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    spins = PUB_SPINS / 2; /* woken: spin a little again before the next sleep */
  }
}

static void pub_give(mw_mp *m) {
  shm_hdr *h = m->hdr;
  __atomic_store_n(&h->pub_owner, 0, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&h->pub_sleepers, __ATOMIC_SEQ_CST) != 0) word_wake(&h->pub_owner, 1);
}

/* The word names `who` (slot + 1 or PUB_JOINER), whose holder cannot be alive (see
** above): free it. */
static void pub_clear_stale(mw_mp *m, uint32_t who) {
  uint32_t cur = __atomic_load_n(&m->hdr->pub_owner, __ATOMIC_SEQ_CST);
  if (cur != 0 && PUB_WHO(cur) == who &&
      __atomic_compare_exchange_n(&m->hdr->pub_owner, &cur, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    word_wake(&m->hdr->pub_owner, 1);
}
#else
static int pub_take(mw_mp *m) { return byte_lock(m->fd, LOCK_PUB, F_WRLCK, 1); }
static void pub_give(mw_mp *m) { (void)byte_lock(m->fd, LOCK_PUB, F_UNLCK, 0); }
static void pub_clear_stale(mw_mp *m, uint32_t who) { (void)m, (void)who; }
#endif

/* Takes the publication lock: pub_mu, then the process's (waiting). On failure neither
** is held. The header is mapped. */
static int pub_lock(mw_mp *m) {
  mw_mutex_lock(&m->pub_mu);
  int rc = pub_take(m);
  if (rc != SQLITE_OK) mw_mutex_unlock(&m->pub_mu);
  return rc;
}

static void pub_unlock(mw_mp *m) {
  pub_give(m);
  mw_mutex_unlock(&m->pub_mu);
}

/* ---------------------------------------------------------------- durability */

static void durable_max(mw_mp *m, uint64_t end) {
  uint64_t cur = __atomic_load_n(&m->hdr->durable_end, __ATOMIC_ACQUIRE);
  while (cur < end && !__atomic_compare_exchange_n(&m->hdr->durable_end, &cur, end, 1,
                                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
}

/* Under db->mu: the records of other processes become ready once durable (their end
** at or before the durable end) or when they precede `before` (an epoch of this
** process whose record this process synced: the sync covered every byte before it);
** then visibility advances over the ready prefix, as commit.c's make_visible does. */
static void advance_locked(mw_db *db, uint64_t before, uint64_t durable) {
  for (uint64_t e = db->visible + 1; e <= db->assigned; e++) {
    mw_pending *pe = &db->ring[e % MW_RING];
    if (pe->epoch == e && pe->foreign && !pe->ready && (e < before || pe->end <= durable))
      pe->ready = 1;
  }
  uint64_t was = db->visible;
  while (db->visible < db->assigned) {
    mw_pending *nx = &db->ring[(db->visible + 1) % MW_RING];
    if (nx->epoch != db->visible + 1 || !nx->ready) break;
    db->visible++;
    db->visible_size = nx->size;
    db->visible_end = nx->end;
    nx->ready = 0;
  }
  if (db->visible != was) mw_cond_broadcast(&db->cv);
}

void mw_mp_mark_locked(mw_db *db, uint64_t before) {
  advance_locked(db, before, __atomic_load_n(&db->mp->hdr->durable_end, __ATOMIC_ACQUIRE));
}

/* ---------------------------------------------------------------- catch-up */

typedef struct follow_ctx {
  mw_db *db;
  uint64_t off;                /* logical offset of the record being applied */
} follow_ctx;

/* One record of another process: its pages into the store (invisible: epoch above
** visible), lazily: as their offsets in the log, read only when needed (with many
** processes, reading every page of every other process's record, most of them never
** used here, was most of a commit's time under the publication lock); then its
** place in the ring: ready at once when its writer acknowledged it once written
** (synchronous=NORMAL or OFF: the record says so), else once durable. */
static int follow_record(void *ctx, uint64_t epoch, uint32_t db_pages, uint32_t flags,
                         int npages, const uint32_t *pgnos, const uint64_t *ats) {
  follow_ctx *f = ctx;
  mw_db *db = f->db;
  uint64_t end = f->off + mw_log_record_size(db->log, npages);
  uint64_t oldest = __atomic_load_n(&db->oldest, __ATOMIC_ACQUIRE);
  int irc = mw_store_install_record(&db->store, epoch, npages, pgnos, 0, ats, oldest);
  if (irc != SQLITE_OK) return irc;
  mw_mutex_lock(&db->mu);
  while (!db->broken && db->assigned - db->visible >= MW_RING - 1) {
    /* The ring is full: sync what was applied so far (it is all written), so that the
    ** others' records become visible; this process's own pending commits finish on
    ** their threads (none of them needs a lock held here). */
    mw_mutex_unlock(&db->mu);
    int rc = mw_log_wait_durable(db->log, f->off);
    if (rc != SQLITE_OK) return rc;
    durable_max(db->mp, f->off);
    mw_mutex_lock(&db->mu);
    advance_locked(db, 0, f->off);
    if (db->assigned - db->visible >= MW_RING - 1) mw_cond_timedwait_ms(&db->cv, &db->mu, 1);
  }
  int rc = db->broken;
  if (rc == SQLITE_OK && epoch != db->assigned + 1) rc = SQLITE_CORRUPT;
  if (rc == SQLITE_OK) {
    db->assigned = epoch;
    mw_pending *pe = &db->ring[epoch % MW_RING];
    pe->epoch = epoch;
    pe->size = db_pages;
    /* Published, hence written whole: a process crash cannot take it back, as stock
    ** WAL readers see a NORMAL commit before any sync. */
    pe->ready = (flags & MW_REC_F_ACK_WRITTEN) != 0;
    pe->end = end;
    pe->foreign = 1;
    /* Not for make_visible's durable shortcut (another process's record is ready as
    ** its flags say, advance_locked); a turn holder's snapshot may include it (db.c:
    ** its pages are in the store), and waits for it to be ready. */
    __atomic_store_n(&pe->installed, 0, __ATOMIC_RELEASE);
  }
  mw_mutex_unlock(&db->mu);
  f->off = end;
  return rc;
}

/* A lazy version's image. A record that a compaction dropped from the log (the file
** in use starts after it) is at or below the compacted epoch, and the version is then
** what the database file holds: a snapshot only reads a version when none newer is
** at or below it, and every snapshot is at or above the compacted epoch (compaction
** stops at the lowest floor), so no newer version of the page was compacted either;
** a compaction under way only writes that same image or pages of newer versions. */
int mw_mp_load_image(void *ctx, uint32_t pgno, uint64_t at, unsigned char *buf) {
  mw_db *db = ctx;
  int rc = mw_log_read_image(db->log, at, buf);
  if (rc == SQLITE_NOTFOUND) rc = mw_db_read_file(db, pgno, buf, 0, db->page_size);
  return rc;
}

/* ---------------------------------------------------------------- the log's switch */

/* A switch that its compactor left half done (log_gen odd, the publication lock free:
** it died, or its rename failed): the name holds the new file iff that file's base
** epoch is next_base (the old one's is lower). Finished (the new shift published, the
** directory synced, as the compactor would have) or undone; log_gen even again.
** Publication lock held. */
static int settle_switch(mw_db *db, uint64_t g) {
  shm_hdr *h = db->mp->hdr;
  char *lp = sqlite3_mprintf("%s-mw", db->path);
  if (lp == 0) return SQLITE_NOMEM;
  int rc = SQLITE_OK;
  unsigned char b[8];
  int fd = open(lp, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || pread(fd, b, 8, MW_LOG_HDR_BASE) != 8) rc = SQLITE_IOERR_READ;
  if (fd >= 0) close(fd);
  uint64_t base = 0;
  memcpy(&base, b, 8);
  if (rc == SQLITE_OK && base == h->next_base) {
    rc = mw_dir_sync(lp, 0);
    if (rc == SQLITE_OK) {
      /* The database file was synced at next_base before the switch began. */
      if (h->compacted < base) __atomic_store_n(&h->compacted, base, __ATOMIC_RELEASE);
      __atomic_store_n(&h->shift, h->next_shift, __ATOMIC_RELEASE);
      __atomic_store_n(&h->switched_epoch, h->committed_epoch, __ATOMIC_RELEASE);
      __atomic_store_n(&h->alloc_end, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&h->grow_end, 0, __ATOMIC_RELAXED);
    }
  }
  if (rc == SQLITE_OK) __atomic_store_n(&h->log_gen, g + 1, __ATOMIC_RELEASE);
  sqlite3_free(lp);
  return rc;
}

/* Publication lock and catch_mu held: db->log on the file at the log's name. */
static int follow_switch(mw_db *db) {
  mw_mp *m = db->mp;
  uint64_t g = __atomic_load_n(&m->hdr->log_gen, __ATOMIC_ACQUIRE);
  if (g & 1) {
    int rc = settle_switch(db, g);
    if (rc != SQLITE_OK) return rc;
    g++;
  }
  if (g == m->gen) return SQLITE_OK;
  int rc = mw_log_reopen_shared(db->log, __atomic_load_n(&m->hdr->shift, __ATOMIC_ACQUIRE));
  if (rc == SQLITE_OK) __atomic_store_n(&m->gen, g, __ATOMIC_RELAXED);
  return rc;
}

/* Applies the published records past this process's log end up to target, a
** committed end read while this process's file held it (catch_mu held). */
static int catch_up_to(mw_db *db, uint64_t target) {
  uint64_t have = mw_log_end(db->log);
  if (target <= have) return SQLITE_OK;
  follow_ctx f = { db, have };
  int rc = mw_log_follow(db->log, target, follow_record, &f);
  if (rc != SQLITE_OK) {
    mw_mutex_lock(&db->mu);
    if (!db->broken) db->broken = rc;
    mw_cond_broadcast(&db->cv);
    mw_mutex_unlock(&db->mu);
  }
  return rc;
}

/* Every published record applied: the publication lock and catch_mu held, the log on
** the current file (follow_switch), so that no switch moves the records meanwhile. */
static int catch_up_locked(mw_db *db) {
  return catch_up_to(db, __atomic_load_n(&db->mp->hdr->committed_end, __ATOMIC_ACQUIRE));
}

/* Everything published applied, synced and visible (no other process is alive: the
** caller holds the join lock and saw no live slot). */
static int settle(mw_db *db) {
  mw_mp *m = db->mp;
  int rc = pub_lock(m);
  if (rc != SQLITE_OK) return rc;
  mw_mutex_lock(&m->catch_mu);
  rc = follow_switch(db); /* another process may have compacted since the last tick */
  if (rc == SQLITE_OK) rc = catch_up_locked(db);
  uint64_t end = mw_log_end(db->log);
  mw_mutex_unlock(&m->catch_mu);
  pub_unlock(m);
  if (rc == SQLITE_OK) rc = mw_log_wait_durable(db->log, end);
  if (rc == SQLITE_OK) {
    durable_max(m, end);
    mw_mutex_lock(&db->mu);
    advance_locked(db, 0, end);
    mw_mutex_unlock(&db->mu);
  }
  return rc;
}

/* Without the publication lock: applies the records published up to the committed end
** read now, when this process's log file holds them; 0 when the log was switched since
** (follow it under the lock). `snapshot`: for a snapshot (the race test's pause point is
** there only). */
static int catch_up_unlocked(mw_db *db, int snapshot) {
  mw_mp *m = db->mp;
  /* The committed end first, then the generation: a record published after a switch
  ** was published after its generation. The generation read is that of the file this
  ** process is on (or one above: a switch under way, or left by a dead compactor;
  ** records before that committed end are in this process's file all the same): read
  ** them from it. */
  uint64_t ce = __atomic_load_n(&m->hdr->committed_end, __ATOMIC_ACQUIRE);
  uint64_t g = __atomic_load_n(&m->hdr->log_gen, __ATOMIC_ACQUIRE);
  if (snapshot) mw_pause_point("mp_refresh_read"); /* the test of the bug below widens this window */
  if (g != __atomic_load_n(&m->gen, __ATOMIC_RELAXED) &&
      g != __atomic_load_n(&m->gen, __ATOMIC_RELAXED) + 1)
    return 0;
  if (ce > mw_log_end(db->log)) {
    /* Up to ce, not to the committed end of now: a switch may have ended since g was
    ** read, and the records published after it are only in the new file, past the
    ** end of this one (reading them here was a false SQLITE_CORRUPT that broke the
    ** database of this process: seen in test_mp compact_kill, 1 run in 10 on a loaded
    ** machine). */
    mw_mutex_lock(&m->catch_mu);
    (void)catch_up_to(db, ce); /* a failure breaks the database (every commit fails) */
    mw_mutex_unlock(&m->catch_mu);
  }
  return 1;
}

void mw_mp_refresh(mw_db *db) {
  mw_mp *m = db->mp;
  if (db->broken) return;
  /* Switched: open the new file under the publication lock (no switch runs
  ** meanwhile), then catch up. */
  if (!catch_up_unlocked(db, 1) && mw_mp_commit_begin(db, 0) == SQLITE_OK)
    mw_mp_commit_end(db, SQLITE_ABORT, 0, 0);
  mw_mutex_lock(&db->mu);
  int sync = 0;
  if (db->visible < db->assigned) {
    mw_mp_mark_locked(db, 0);
    uint64_t e = db->visible + 1;
    mw_pending *pe = &db->ring[e % MW_RING];
    if (e <= db->assigned && pe->epoch == e && pe->foreign && !pe->ready) {
      uint64_t now = mw_now_ns();
      if (m->stuck_epoch != e) {
        m->stuck_epoch = e;
        m->stuck_since = now;
      } else {
        sync = now - m->stuck_since > STUCK_NS;
      }
    }
  }
  mw_mutex_unlock(&db->mu);
  if (sync) {
    uint64_t end = mw_log_end(db->log);
    if (mw_log_wait_durable(db->log, end) == SQLITE_OK) {
      durable_max(m, end);
      mw_mutex_lock(&db->mu);
      mw_mp_mark_locked(db, 0);
      mw_mutex_unlock(&db->mu);
    }
  }
}

/* ---------------------------------------------------------------- room in the log */

/* Records go into zeroed room (log.c, grow_file: a sync of a record is then data-only).
** Only the holder of the publication lock may write past the committed end, and it
** used to add each 4 MiB step itself, under the lock: 25 to 50 ms in which no process
** could commit (the longest commits of a one-writer run, and every 60 ms or so with 16
** inserting processes). Now the holder that finds less than half a step left past its
** record *claims* the next step (grow_end, grow_slot in the header) and its process's
** grower job zeroes and syncs it off the lock, then raises alloc_end. No record is
** written past alloc_end while a claim is open: a holder whose record does not fit
** before it waits for the claim (or zeroes it itself when the claim is its own
** process's); a claim whose process died is dropped (nobody else writes there). A
** compaction's switch waits for an open claim too: it is on the file being replaced.
** Without a grower, or when the record does not fit at all, the holder adds room
** itself as before (mw_log_room_shared). */

/* This process's claim, if it still has one, zeroed (grow_mu: the grower job, a
** holder that needs the room now, the compactor). */
static void run_claim(mw_db *db, int now) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  mw_mutex_lock(&m->grow_mu);
  uint64_t from = m->claim_from, to = m->claim_to;
  m->claim_to = 0;
  if (to) {
    __atomic_add_fetch(&m->claims_zeroed, 1, __ATOMIC_RELAXED);
    if (now) __atomic_add_fetch(&m->claims_now, 1, __ATOMIC_RELAXED);
    if (!now) mw_pause_point("mp_room_zeroing"); /* test_mp_room: a slow grower */
    int rc = mw_log_zero_shared(db->log, from, to);
    mw_crash_point("mp_room_zeroed"); /* dead with its claim open */
    /* Over: zeroed, the room ends where the claim did (grow_end is `to` already);
    ** failed, the claim is dropped and the room stays as it was. Only this one
    ** store: a claim made right after this one ended (grow_end above the new room
    ** end) must not be overwritten, or two processes could zero the same range while
    ** a record went into it. */
    if (rc == SQLITE_OK) __atomic_store_n(&h->alloc_end, to, __ATOMIC_SEQ_CST);
    else __atomic_store_n(&h->grow_end, from, __ATOMIC_SEQ_CST);
  }
  mw_mutex_unlock(&m->grow_mu);
}

static uint64_t grower_step(void *arg) {
  run_claim(arg, 0);
  return 0; /* until the next claim wakes it */
}

/* Publication lock held: until no claim is open. */
static void wait_claim_locked(mw_db *db) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  for (;;) {
    uint64_t a = __atomic_load_n(&h->alloc_end, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->grow_end, __ATOMIC_SEQ_CST) <= a) return;
    uint32_t s = __atomic_load_n(&h->grow_slot, __ATOMIC_SEQ_CST);
    if ((int)s == m->slot) run_claim(db, 1);
    else if (s < MW_MP_SLOTS && held_elsewhere(m->fd, LOCK_SLOT0 + (int)s)) mw_sleep_us(200);
    else __atomic_store_n(&h->grow_end, a, __ATOMIC_SEQ_CST); /* its process died */
  }
}

/* Publication lock held, everything published applied: room for a record of `need`
** bytes at the log's end, and a claim of the next step when little is left. */
static void room_locked(mw_db *db, uint64_t need) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  uint64_t end = mw_log_end(db->log) + need;
  uint64_t a = __atomic_load_n(&h->alloc_end, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&h->grow_end, __ATOMIC_SEQ_CST) > a) {
    if (end <= a) return; /* before the claimed range */
    wait_claim_locked(db);
    a = __atomic_load_n(&h->alloc_end, __ATOMIC_SEQ_CST);
  }
  uint64_t step = mw_log_room_step(db->log);
  if (a >= end && a - end >= step / 2) return;
  if (a >= end && m->grower_added) {
    uint64_t to = mw_log_room_target(db->log, a);
    mw_mutex_lock(&m->grow_mu);
    m->claim_from = a;
    m->claim_to = to;
    mw_mutex_unlock(&m->grow_mu);
    __atomic_store_n(&h->grow_slot, (uint32_t)m->slot, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->grow_end, to, __ATOMIC_SEQ_CST);
    mw_bg_wake(&m->grower, 0);
    return;
  }
  /* No room for the record, or no grower: zeroed room now, under the lock. A failure
  ** only leaves records extending the file. */
  if (mw_log_room_shared(db->log, &a) == SQLITE_OK) {
    __atomic_store_n(&h->alloc_end, a, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->grow_end, a, __ATOMIC_SEQ_CST);
  }
}

/* Closing or failed: the grower stops; a claim it did not run is dropped. */
static void grower_stop(mw_db *db) {
  mw_mp *m = db->mp;
  if (m->grower_added) {
    mw_bg_remove(&m->grower);
    m->grower_added = 0;
  }
  mw_mutex_lock(&m->grow_mu);
  if (m->claim_to && m->hdr) {
    m->claim_to = 0;
    __atomic_store_n(&m->hdr->grow_end, __atomic_load_n(&m->hdr->alloc_end, __ATOMIC_SEQ_CST),
                     __ATOMIC_SEQ_CST);
  }
  mw_mutex_unlock(&m->grow_mu);
}

void mw_mp_room_claims(mw_db *db, int64_t *pZeroed, int64_t *pNow) {
  mw_mp *m = db->mp;
  *pZeroed = m ? __atomic_load_n(&m->claims_zeroed, __ATOMIC_RELAXED) : 0;
  *pNow = m ? __atomic_load_n(&m->claims_now, __ATOMIC_RELAXED) : 0;
}

/* ---------------------------------------------------------------- commits */

/* 1 while another process's writer holds the write gate (it is alive, and its time
** has not run out). */
static int gated_elsewhere(mw_mp *m) {
  shm_hdr *h = m->hdr;
  uint32_t g = __atomic_load_n(&h->gate_owner, __ATOMIC_SEQ_CST);
  if (g == 0 || g > MW_MP_SLOTS || (int)g - 1 == m->slot) return 0;
  if (mw_now_ns() >= __atomic_load_n(&h->gate_until, __ATOMIC_SEQ_CST)) return 0;
  return held_elsewhere(m->fd, LOCK_SLOT0 + (int)g - 1);
}

int mw_mp_commit_begin(mw_db *db, uint64_t need) {
  mw_mp *m = db->mp;
  /* Most of the catch-up before the lock: a process that fell behind (descheduled while
  ** the others committed) applied their records under it, 10 to 40 ms in which no
  ** process could commit. Under the lock only what was published meanwhile. */
  if (!db->broken) (void)catch_up_unlocked(db, 0);
  int rc;
  for (;;) {
    rc = pub_lock(m);
    if (rc != SQLITE_OK) return rc;
    /* Another process's writer holds the write gate: wait for it (bounded by its
    ** time, which the gate's owner sets under this lock). */
    if (!gated_elsewhere(m)) break;
    uint32_t seen = __atomic_load_n(&m->hdr->gate_owner, __ATOMIC_SEQ_CST);
    pub_unlock(m);
    word_sleep(&m->hdr->gate_owner, seen, 1);
  }
  mw_crash_point("mp_locked");
  mw_mutex_lock(&m->catch_mu);
  rc = follow_switch(db);
  if (rc == SQLITE_OK) rc = catch_up_locked(db);
  if (rc != SQLITE_OK) {
    mw_mp_commit_end(db, rc, 0, 0);
    return rc;
  }
  mw_mutex_lock(&db->mu);
  if (db->visible < db->assigned) mw_mp_mark_locked(db, 0);
  mw_mutex_unlock(&db->mu);
  room_locked(db, need);
  return SQLITE_OK;
}

void mw_mp_commit_end(mw_db *db, int rc, uint64_t epoch, uint64_t end) {
  mw_mp *m = db->mp;
  if (rc == SQLITE_OK) {
    /* The record is written whole: the next holder of the lock writes after it, the
    ** others may apply it. A writer killed before this line leaves its record behind
    ** the published end, where the next commit overwrites it. */
    mw_crash_point("mp_before_publish");
    __atomic_store_n(&m->hdr->committed_epoch, epoch, __ATOMIC_RELEASE);
    __atomic_store_n(&m->hdr->committed_end, end, __ATOMIC_RELEASE);
  }
  mw_mutex_unlock(&m->catch_mu);
  pub_unlock(m);
  /* Published, not yet synced: the others see it once some process synced the log. */
  if (rc == SQLITE_OK) mw_crash_point("mp_after_publish");
}

void mw_mp_durable(mw_db *db, uint64_t end) { durable_max(db->mp, end); }

/* ---------------------------------------------------------------- group sync */

/* Each process synced its own records: with one writer per process, one data sync per
** commit (16 processes inserting: 15,000 syncs for 15,000 commits, where 16 threads of
** one process needed one per 4). So the processes sync for each other: one at a time
** leads (sync_owner), the others wait until the shared durable end passes their
** record. A leader reads the committed end, then starts its sync: every record
** published before was written whole before the sync began, so the sync covers it,
** provided it syncs the file those records are in: its log is on the current file
** (its generation is the shared one) and no switch began before the sync ended (the
** generation is the same after). Otherwise it claims only its own record, as before.
** A follower that arrived during a sync waits for it, then (not covered: it started
** too early) one of them leads the next. Nothing depends on the waits: a follower
** passes over a leader that died (its slot's lock byte is free) and, after
** SYNC_GIVE_UP_MS, syncs itself. */

#define SYNC_POLL_MS 1         /* a follower looks at the leader at least this often */
#define SYNC_GIVE_UP_MS 100    /* then syncs itself (a sync may take that long) */

static void seq_wake_all(uint32_t *w) {
  __atomic_add_fetch(w, 1, __ATOMIC_SEQ_CST);
  word_wake(w, 0x7fffffff);
}

/* Until *w moves from `seen`, SYNC_POLL_MS at most. */
static void seq_sleep(uint32_t *w, uint32_t seen) { word_sleep(w, seen, SYNC_POLL_MS); }

static int lead_sync(mw_db *db, uint64_t end) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  uint64_t g = __atomic_load_n(&h->log_gen, __ATOMIC_SEQ_CST);
  uint64_t covers = __atomic_load_n(&h->committed_end, __ATOMIC_SEQ_CST);
  int same_file = (g & 1) == 0 && g == __atomic_load_n(&m->gen, __ATOMIC_SEQ_CST);
  mw_crash_point("mp_sync_lead"); /* the others pass a dead leader over */
  mw_pause_point("mp_sync"); /* test_mp: a disk whose sync takes time, wherever it runs */
  int rc = mw_log_sync_now(db->log);
  if (rc == SQLITE_OK) {
    durable_max(m, end); /* its own record: written to its log before */
    if (same_file && __atomic_load_n(&h->log_gen, __ATOMIC_SEQ_CST) == g) durable_max(m, covers);
  }
  /* Not ours any more when a follower passed this process over. */
  uint32_t me = (uint32_t)m->slot + 1;
  __atomic_compare_exchange_n(&h->sync_owner, &me, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  __atomic_store_n(&m->leading, 0, __ATOMIC_SEQ_CST);
  seq_wake_all(&h->sync_seq);
  return rc;
}

int mw_mp_wait_foreign(mw_db *db, uint64_t epoch, uint64_t start) {
  int waits = 0;
  mw_mutex_lock(&db->mu);
  for (uint64_t e = db->visible + 1; e < epoch && !waits; e++) {
    const mw_pending *pe = &db->ring[e % MW_RING];
    waits = pe->epoch == e && pe->foreign && !pe->ready;
  }
  mw_mutex_unlock(&db->mu);
  /* Every record before `start` is written (published before this one): one sync
  ** covers them. */
  return waits ? mw_mp_wait_durable(db, start) : SQLITE_OK;
}

int mw_mp_wait_durable(mw_db *db, uint64_t end) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  uint32_t me = (uint32_t)m->slot + 1;
  uint64_t since = 0;
  for (;;) {
    if (__atomic_load_n(&h->durable_end, __ATOMIC_SEQ_CST) >= end) {
      mw_log_note_durable(db->log, end);
      return SQLITE_OK;
    }
    uint32_t seen = __atomic_load_n(&h->sync_seq, __ATOMIC_SEQ_CST);
    uint32_t o = __atomic_load_n(&h->sync_owner, __ATOMIC_SEQ_CST);
    /* Free, or left by a dead process of this slot (not by another thread of this
    ** one: that one leads, and this thread waits for it as the others do). */
    if (o == 0 || (o == me && !__atomic_load_n(&m->leading, __ATOMIC_SEQ_CST))) {
      int free_now = 0;
      if (__atomic_compare_exchange_n(&m->leading, &free_now, 1, 0, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
        if (__atomic_compare_exchange_n(&h->sync_owner, &o, me, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
          return lead_sync(db, end);
        __atomic_store_n(&m->leading, 0, __ATOMIC_SEQ_CST);
      }
      continue;
    }
    uint64_t now = mw_now_ns();
    if (since == 0) since = now;
    if (now - since > (uint64_t)SYNC_GIVE_UP_MS * 1000000u) break;
    if (now - since > (uint64_t)SYNC_POLL_MS * 1000000u && o != me && o <= MW_MP_SLOTS &&
        !held_elsewhere(m->fd, LOCK_SLOT0 + (int)o - 1)) {
      __atomic_compare_exchange_n(&h->sync_owner, &o, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
      continue;
    }
    seq_sleep(&h->sync_seq, seen);
  }
  int rc = mw_log_wait_durable(db->log, end);
  if (rc == SQLITE_OK) durable_max(m, end);
  return rc;
}

/* ---------------------------------------------------------------- the turn across processes */

/* turn.c queues the lanes of one process; without more, the turn holders of
** different processes ran at once and refused each other (16 processes on a hot row:
** about 200 refusals per 100 commits). So a holder also takes this turn, owned by
** one process slot at a time (turn_owner). A process that wants it writes its
** arrival number in its turn_want slot and sleeps on its turn_wake word; the owner,
** done, hands the turn straight to the earliest arrival (a newcomer never overtakes
** a sleeper), or frees it. Nothing depends on it for correctness (validation decides
** every commit), so every wait is bounded: a waiter passes over an owner whose
** process died (its slot's lock byte is free) or that kept the turn over
** MW_TURN_HOLD_MS, as turn.c does with the head of its queue. */

#define TURN_POLL_MS 5         /* a sleeper looks at the owner at least this often */

static void turn_wake(shm_hdr *h, int s) {
  __atomic_add_fetch(&h->turn_wake[s], 1, __ATOMIC_SEQ_CST);
  word_wake(&h->turn_wake[s], 1);
}

/* Until turn_wake[s] moves from `seen`, TURN_POLL_MS at most. */
static void turn_sleep(shm_hdr *h, int s, uint32_t seen) {
  word_sleep(&h->turn_wake[s], seen, TURN_POLL_MS);
}

/* Moves the turn from `from` (slot + 1) to the earliest waiter, or frees it. The
** time first: a waiter that reads the new owner with the old time could take it
** for one that overstayed. */
static void turn_hand_over(shm_hdr *h, uint32_t from) {
  int best = -1;
  uint64_t best_at = 0;
  for (int i = 0; i < MW_MP_SLOTS; i++) {
    uint64_t a = __atomic_load_n(&h->turn_want[i], __ATOMIC_SEQ_CST);
    if (a != 0 && (best < 0 || a < best_at)) {
      best = i;
      best_at = a;
    }
  }
  uint32_t to = best < 0 ? 0 : (uint32_t)best + 1;
  __atomic_store_n(&h->turn_since, mw_now_ns(), __ATOMIC_SEQ_CST);
  if (__atomic_compare_exchange_n(&h->turn_owner, &from, to, 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST) && best >= 0)
    turn_wake(h, best);
}

int mw_mp_turn_take(mw_db *db) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  if (m->slot < 0 || !__atomic_load_n(&m->joined, __ATOMIC_ACQUIRE)) return 0;
  uint32_t me = (uint32_t)m->slot + 1;
  uint32_t nobody = 0;
  if (__atomic_compare_exchange_n(&h->turn_owner, &nobody, me, 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&h->turn_since, mw_now_ns(), __ATOMIC_SEQ_CST);
    return 1;
  }
  if (nobody == me) return 1; /* a dead process of this slot held it; ours now */
  __atomic_store_n(&h->turn_want[m->slot], __atomic_add_fetch(&h->turn_seq, 1, __ATOMIC_SEQ_CST),
                   __ATOMIC_SEQ_CST);
  int got = 0;
  for (;;) {
    uint32_t seen = __atomic_load_n(&h->turn_wake[m->slot], __ATOMIC_SEQ_CST);
    uint32_t o = __atomic_load_n(&h->turn_owner, __ATOMIC_SEQ_CST);
    if (o == me) {
      got = 1;
      break;
    }
    if (o == 0) {
      /* Freed after the owner looked for waiters: whoever comes first. */
      if (__atomic_compare_exchange_n(&h->turn_owner, &o, me, 0, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&h->turn_since, mw_now_ns(), __ATOMIC_SEQ_CST);
        got = 1;
        break;
      }
      continue;
    }
    if (__atomic_load_n(&db->broken, __ATOMIC_RELAXED)) break;
    uint64_t held = mw_now_ns() - __atomic_load_n(&h->turn_since, __ATOMIC_SEQ_CST);
    int dead = held > (uint64_t)TURN_POLL_MS * 1000000u && o <= MW_MP_SLOTS &&
               !held_elsewhere(m->fd, LOCK_SLOT0 + (int)o - 1);
    if (dead || held > (uint64_t)MW_TURN_HOLD_MS * 1000000u) {
      /* Passed over (maybe to this process); a dead one also loses its wish, or it
      ** would be handed the turn again. */
      if (dead) __atomic_store_n(&h->turn_want[o - 1], 0, __ATOMIC_SEQ_CST);
      turn_hand_over(h, o);
      continue;
    }
    turn_sleep(h, m->slot, seen);
  }
  __atomic_store_n(&h->turn_want[m->slot], 0, __ATOMIC_SEQ_CST);
  /* Handed over after this process gave up: pass it on. */
  if (!got && __atomic_load_n(&h->turn_owner, __ATOMIC_SEQ_CST) == me) turn_hand_over(h, me);
  return got;
}

void mw_mp_turn_give(mw_db *db) {
  mw_mp *m = db->mp;
  if (m->slot < 0) return;
  uint32_t me = (uint32_t)m->slot + 1;
  /* Not ours any more when a waiter passed this process over. */
  if (__atomic_load_n(&m->hdr->turn_owner, __ATOMIC_SEQ_CST) == me) turn_hand_over(m->hdr, me);
}

/* ---------------------------------------------------------------- the write gate */

/* gate.c's write gate spans the processes: the process of its holder owns it here,
** taken under the publication lock (so no other process's record is published
** after it is taken, until it goes) with the time until which the others' commits
** wait for it (mw_mp_commit_begin). A dead owner's gate, or one whose time ran out,
** is free. */

int mw_mp_gate_take(mw_db *db, uint64_t until) {
  mw_mp *m = db->mp;
  if (m->slot < 0 || !__atomic_load_n(&m->joined, __ATOMIC_ACQUIRE)) return 1;
  if (pub_lock(m) != SQLITE_OK) return 0;
  int got = !gated_elsewhere(m);
  if (got) {
    __atomic_store_n(&m->hdr->gate_until, until, __ATOMIC_SEQ_CST);
    __atomic_store_n(&m->hdr->gate_owner, (uint32_t)m->slot + 1, __ATOMIC_SEQ_CST);
  }
  pub_unlock(m);
  return got;
}

void mw_mp_gate_hold(mw_db *db, uint64_t until) {
  mw_mp *m = db->mp;
  if (m->slot < 0) return;
  if (__atomic_load_n(&m->hdr->gate_owner, __ATOMIC_SEQ_CST) == (uint32_t)m->slot + 1)
    __atomic_store_n(&m->hdr->gate_until, until, __ATOMIC_SEQ_CST);
}

void mw_mp_gate_give(mw_db *db) {
  mw_mp *m = db->mp;
  if (m->slot < 0) return;
  uint32_t me = (uint32_t)m->slot + 1;
  if (__atomic_compare_exchange_n(&m->hdr->gate_owner, &me, 0, 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST))
    word_wake(&m->hdr->gate_owner, INT32_MAX);
}

void mw_mp_sync_to(mw_db *db, uint64_t end) {
  int rc = mw_log_wait_durable(db->log, end);
  mw_mutex_lock(&db->mu);
  if (rc == SQLITE_OK) {
    durable_max(db->mp, end);
    advance_locked(db, 0, end);
  } else if (!db->broken) {
    db->broken = rc; /* as a failed sync of a commit: nothing after it may be seen */
    mw_cond_broadcast(&db->cv);
  }
  mw_mutex_unlock(&db->mu);
}

/* ---------------------------------------------------------------- compaction */

void mw_mp_floor(mw_db *db, uint64_t oldest) {
  mw_mp *m = db->mp;
  /* Only between joined and leave (the slot and the header are set up by then; the
  ** compactor job starts before the open joins). */
  if (!__atomic_load_n(&m->joined, __ATOMIC_ACQUIRE) || m->slot < 0) return;
  uint64_t *f = &m->hdr->floor[m->slot];
  if (oldest > __atomic_load_n(f, __ATOMIC_RELAXED)) __atomic_store_n(f, oldest, __ATOMIC_RELEASE);
}

/* Records acknowledged once written (synchronous=NORMAL or OFF), of any process, are
** synced at a tick of any live process: the log up to the committed end read at this
** process's tick before (compact.h, MW_UNSYNCED_MAX_MS), unless a sync covered it
** already (FULL commits sync as they go). Only while this process is on the file at the
** log's name: a switch syncs the records it copies into its new file. */
static void sync_published(mw_db *db) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  uint64_t g = __atomic_load_n(&h->log_gen, __ATOMIC_SEQ_CST);
  uint64_t due = db->unsynced_mark;
  db->unsynced_mark = __atomic_load_n(&h->committed_end, __ATOMIC_SEQ_CST);
  if (due == 0 || __atomic_load_n(&h->durable_end, __ATOMIC_SEQ_CST) >= due) return;
  /* The records before `due` are in this process's file and applied here (the tick
  ** refreshed first): the sync of this file covers them. */
  if ((g & 1) || g != __atomic_load_n(&m->gen, __ATOMIC_SEQ_CST) ||
      g != __atomic_load_n(&h->log_gen, __ATOMIC_SEQ_CST) || due > mw_log_end(db->log))
    return;
  if (mw_mp_wait_durable(db, due) != SQLITE_OK) return; /* the log's error: commits report it */
  mw_mutex_lock(&db->mu);
  mw_mp_mark_locked(db, 0);
  mw_mutex_unlock(&db->mu);
}

void mw_mp_tick(mw_db *db) {
  if (!__atomic_load_n(&db->mp->joined, __ATOMIC_ACQUIRE)) return; /* as mw_mp_floor */
  mw_pause_point("mp_tick"); /* test_mp spare_reader: a process that follows no switch */
  mw_mp_refresh(db);
  sync_published(db);
  /* The database file holds the state at the shared compacted epoch: garbage
  ** collection may drop what it holds. It is never above this process's floor (a
  ** compaction's target is not), hence never above what this process applied. */
  uint64_t c = __atomic_load_n(&db->mp->hdr->compacted, __ATOMIC_ACQUIRE);
  mw_mutex_lock(&db->mu);
  if (c > db->compacted && c <= db->visible) db->compacted = c;
  mw_mutex_unlock(&db->mu);
}

int mw_mp_compact_begin(mw_db *db, uint64_t *pLimit) {
  mw_mp *m = db->mp;
  /* Not before the open has joined: the opener holds join_mu, and a failed open stops
  ** the compactor while holding it. */
  if (!__atomic_load_n(&m->joined, __ATOMIC_ACQUIRE)) return SQLITE_BUSY;
  mw_mp_refresh(db); /* this process's own floor as high as it can be */
  mw_mutex_lock(&m->join_mu);
  int rc = join_take(m, 0); /* one compactor at a time; nobody joins or leaves meanwhile */
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&m->join_mu);
    return rc;
  }
  /* T may not pass the floor of any live process: none of them has a snapshot below
  ** it (the file is written up to T while they read it), and each applied every record
  ** up to it (the log drops them, and their stores must hold every version after the
  ** file's). A slot's floor only grows, so a value read now stays a lower bound. */
  uint64_t limit = UINT64_MAX;
  for (int i = 0; i < MW_MP_SLOTS; i++) {
    if (i == m->slot || !held_elsewhere(m->fd, LOCK_SLOT0 + i)) continue;
    uint64_t f = __atomic_load_n(&m->hdr->floor[i], __ATOMIC_ACQUIRE);
    if (f < limit) limit = f;
  }
  /* Start from what the file holds, whoever compacted it last: T must be above it
  ** (never write an older state over a newer one), and every version after it is in
  ** this store (it only drops what the file holds). */
  uint64_t c = __atomic_load_n(&m->hdr->compacted, __ATOMIC_ACQUIRE);
  mw_mutex_lock(&db->mu);
  if (c > db->compacted && c <= db->visible) db->compacted = c;
  if (c > db->compacted) rc = SQLITE_BUSY; /* not applied that far yet: next time */
  mw_mutex_unlock(&db->mu);
  if (rc != SQLITE_OK) join_release(m);
  *pLimit = limit;
  return rc;
}

/* After the first copy of a switch (mw_log_compacted_hook): the publication lock, and
** every record published meanwhile applied, so that the rest of the copy has them all
** and nothing is appended until the new file is in place. The join lock keeps other
** compactors out, so the log cannot have been switched since; if it was anyway, the
** switch is given up (the first copy came from the old file). */
static int compact_enter(void *ctx) {
  mw_db *db = ctx;
  mw_mp *m = db->mp;
  int rc = pub_lock(m);
  if (rc != SQLITE_OK) return rc;
  m->switch_locked = 1;
  mw_mutex_lock(&m->catch_mu);
  uint64_t was = m->gen;
  rc = follow_switch(db);
  if (rc == SQLITE_OK && m->gen != was) rc = SQLITE_BUSY;
  if (rc == SQLITE_OK) rc = catch_up_locked(db);
  if (rc == SQLITE_OK) wait_claim_locked(db); /* a claim is on the file being replaced */
  return rc;
}

static void switch_hook(void *ctx, uint64_t new_shift, uint64_t base, uint64_t room_end) {
  mw_mp *m = ((mw_db *)ctx)->mp;
  m->switch_room = room_end;
  m->hdr->next_shift = new_shift;
  m->hdr->next_base = base;
  /* Odd: from here until the end of the switch, the name may hold either file. */
  __atomic_store_n(&m->hdr->log_gen, __atomic_load_n(&m->gen, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELEASE);
  mw_crash_point("compact_switch");
}

/* The spare of the log: the file the last switch replaced keeps a name (log.c) and
** the next switch writes over it instead of zeroing a new file's room (that zeroing
** was as much writing again as the records themselves: 16 inserting processes wrote
** some 100 KB a commit, 60-80 KB with the reuse, and committed 17-38% more). Another
** process may still read the replaced file through its own descriptor: it follows a
** switch at its next catch-up, and until then it reads records and lazy page images
** there. A process has left that file once it applied a record published after the
** switch, which only the file at the name holds: its floor is then above the epoch
** committed at the switch (switched_epoch; the publication lock was held from there
** to the rename). The spare is taken only when the floor of every other live process
** is above it; the join lock held by the compactor keeps joins out. This process left
** the file when it followed the switch (its generation is the shared one; the switch of
** its log waits for reads in flight) or made it: its own floor, held down by the
** compaction that runs now, would keep the spare from being reused after a switch
** followed at once by the next compaction, as under a steady load (16 inserting
** processes: most switches zeroed a new file of some 50 MB). */
static int spare_unread(mw_mp *m) {
  /* Not while a switch is half done (log_gen odd: its compactor died after the rename,
  ** before it published): the spare is then the file every process is still on, and
  ** switched_epoch that of the switch before. Even and this process's: switched_epoch
  ** was stored before that generation (settle_switch, mw_mp_compact_log), and no switch
  ** runs meanwhile (the join lock). */
  uint64_t g = __atomic_load_n(&m->hdr->log_gen, __ATOMIC_ACQUIRE);
  if ((g & 1) || g != __atomic_load_n(&m->gen, __ATOMIC_RELAXED)) return 0;
  uint64_t e = __atomic_load_n(&m->hdr->switched_epoch, __ATOMIC_ACQUIRE);
  for (int i = 0; i < MW_MP_SLOTS; i++) {
    if (i == m->slot || !held_elsewhere(m->fd, LOCK_SLOT0 + i)) continue;
    if (__atomic_load_n(&m->hdr->floor[i], __ATOMIC_ACQUIRE) <= e) return 0;
  }
  return 1;
}

int mw_mp_compact_log(mw_db *db, uint64_t base) {
  mw_mp *m = db->mp;
  /* The records to keep are copied while the processes go on committing; the
  ** publication lock is held only for the rest of the copy and the rename
  ** (compact_enter): with the lock around the whole switch, every commit of every
  ** process waited for it (tens of milliseconds at every compaction). */
  m->switch_locked = 0;
  int rc = mw_log_compacted_hook(db->log, base, compact_enter, switch_hook, db, spare_unread(m));
  if (!m->switch_locked) return rc; /* given up before the lock (or nothing to switch) */
  if (rc == SQLITE_OK) mw_crash_point("compact_switched"); /* renamed, not yet published */
  uint64_t g = __atomic_load_n(&m->hdr->log_gen, __ATOMIC_ACQUIRE);
  if (g & 1) {
    /* The hook ran. Renamed (this log is on the new file): publish it; else (the rename
    ** failed) the old file stays. Either way the generation moves on: the others open
    ** the file at the name again. */
    if (mw_log_base(db->log) == base) {
      __atomic_store_n(&m->hdr->compacted, base, __ATOMIC_RELEASE);
      __atomic_store_n(&m->hdr->shift, mw_log_shift(db->log), __ATOMIC_RELEASE);
      __atomic_store_n(&m->hdr->switched_epoch, __atomic_load_n(&m->hdr->committed_epoch, __ATOMIC_ACQUIRE),
                       __ATOMIC_RELEASE);
      /* The switch zeroed the new file's room off the lock: the commits after it
      ** need not grow it again (mw_mp_commit_begin). */
      __atomic_store_n(&m->hdr->alloc_end, m->switch_room, __ATOMIC_RELAXED);
      __atomic_store_n(&m->hdr->grow_end, m->switch_room, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&m->hdr->log_gen, g + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&m->gen, g + 1, __ATOMIC_RELAXED);
  }
  m->switch_locked = 0;
  mw_mutex_unlock(&m->catch_mu);
  pub_unlock(m);
  return rc;
}

void mw_mp_compact_end(mw_db *db) { join_release(db->mp); }

/* ---------------------------------------------------------------- the mark */

/* The mark (guard.c) is the file's, so its state while processes are open is the
** shared header's, read and changed under the publication lock: a checkpoint takes the
** mark off only when every published record is in the file (compacted) and no commit of
** any process is between its lock and its publication; a commit puts it back, under
** the same lock, before its record is written. Where the processes' lock cannot keep
** stock connections out (no open file description locks: macOS), the mark stays. */
int mw_mp_unmark(mw_db *db) {
  mw_mp *m = db->mp;
  if (!mw_guard_keeps_out(db->data)) return SQLITE_OK;
  int rc = pub_lock(m);
  if (rc != SQLITE_OK) return rc;
  shm_hdr *h = m->hdr;
  /* Written even when the header says off: a joiner's open marks the file again. */
  if (__atomic_load_n(&h->compacted, __ATOMIC_ACQUIRE) ==
          __atomic_load_n(&h->committed_epoch, __ATOMIC_ACQUIRE)) {
    rc = mw_guard_unmark_open(db->data);
    if (rc == SQLITE_OK) __atomic_store_n(&h->unmarked, 1, __ATOMIC_RELEASE);
  }
  pub_unlock(m);
  return rc;
}

uint64_t mw_mp_committed_epoch(mw_db *db) {
  return __atomic_load_n(&db->mp->hdr->committed_epoch, __ATOMIC_ACQUIRE);
}

int mw_mp_arm(mw_db *db) {
  shm_hdr *h = db->mp->hdr;
  if (!__atomic_load_n(&h->unmarked, __ATOMIC_ACQUIRE)) return SQLITE_OK;
  int rc = mw_guard_set_mark(db->data, 1);
  if (rc == SQLITE_OK) __atomic_store_n(&h->unmarked, 0, __ATOMIC_RELEASE);
  return rc;
}

/* ---------------------------------------------------------------- open and close */

/* Opens "<db>-mwshm" and takes its join lock; a file that a last closer removed
** meanwhile (the lock was taken on a name no longer there) is opened again. */
static int open_and_join(mw_mp *m) {
  for (int tries = 0; tries < 1000; tries++) {
    int fd = open(m->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return SQLITE_CANTOPEN;
    m->fd = fd;
    int rc = join_take(m, 1);
    if (rc != SQLITE_OK) {
      close(fd);
      m->fd = -1;
      return rc;
    }
    struct stat a, b;
    if (fstat(fd, &a) == 0 && stat(m->path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
      return SQLITE_OK;
    m->join_held = 0;
    close(fd); /* drops the lock */
    m->fd = -1;
  }
  return SQLITE_BUSY;
}

int mw_mp_attach(mw_db *db, char **pzErr) {
  mw_mp *m = calloc(1, sizeof(*m));
  if (m == 0) return SQLITE_NOMEM;
  m->fd = -1;
  m->slot = -1;
  m->tag = (uint32_t)getpid() & 0xffffu;
  m->path = sqlite3_mprintf("%s-mwshm", db->path);
  mw_mutex_init(&m->join_mu);
  mw_mutex_init(&m->pub_mu);
  mw_mutex_init(&m->catch_mu);
  mw_mutex_init(&m->grow_mu);
  mw_mutex_init(&m->stream_mu);
  db->mp = m;
  if (m->path == 0) return SQLITE_NOMEM;
  mw_mutex_lock(&m->join_mu);
  int rc = open_and_join(m);
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&m->join_mu);
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: cannot open or lock %s (mw_mp=1)", m->path);
    return rc == SQLITE_BUSY ? SQLITE_BUSY : SQLITE_CANTOPEN;
  }
  m->first = !others_alive(m);
  if (m->first) {
    /* Whatever the file holds is a dead process's: start it anew. */
    if (ftruncate(m->fd, 0) != 0 || ftruncate(m->fd, SHM_SIZE) != 0) rc = SQLITE_IOERR_TRUNCATE;
  } else {
    struct stat st;
    if (fstat(m->fd, &st) != 0 || st.st_size < SHM_SIZE) rc = SQLITE_CORRUPT;
  }
  if (rc == SQLITE_OK) {
    void *p = mmap(0, SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (p == MAP_FAILED) rc = SQLITE_IOERR_SHMMAP;
    else m->hdr = p;
  }
  if (rc == SQLITE_OK && !m->first &&
      (memcmp(m->hdr->magic, SHM_MAGIC, 8) != 0 || m->hdr->version != SHM_VERSION ||
       m->hdr->nslots != MW_MP_SLOTS))
    rc = SQLITE_CORRUPT;
  /* The publication lock of a process that died opening: this one holds the join lock. */
  if (rc == SQLITE_OK && !m->first) pub_clear_stale(m, PUB_JOINER);
  if (rc == SQLITE_OK && !m->first &&
      (__atomic_load_n(&m->hdr->log_gen, __ATOMIC_ACQUIRE) & 1)) {
    /* A compactor died renaming the log: which file the name holds decides the shift
    ** this open replays with. */
    rc = pub_lock(m);
    if (rc == SQLITE_OK) {
      uint64_t g = __atomic_load_n(&m->hdr->log_gen, __ATOMIC_ACQUIRE);
      if (g & 1) rc = settle_switch(db, g);
      pub_unlock(m);
    }
  }
  if (rc != SQLITE_OK && pzErr && *pzErr == 0)
    *pzErr = sqlite3_mprintf("multiwriter: %s is not usable (%d): another version of the "
                             "engine, or a damaged file, while other processes have the "
                             "database open", m->path, rc);
  return rc;
}

int mw_mp_is_first(mw_db *db) { return db->mp->first; }

/* ---------------------------------------------------------------- the replica stream */

/* One stream per database (replica/stream.c): every process names the same directory
** (its hash in the header), the last epoch in the replica is shared, and one process at
** a time writes (LOCK_STREAM, tried at each tick: whichever process gets it is due). */
int mw_mp_stream_join(mw_db *db, uint64_t dir_hash, uint64_t *pEpoch0, uint64_t *pTxid0,
                      uint64_t *pEmitted, uint32_t *pPages, char **pzErr) {
  mw_mp *m = db->mp;
  shm_hdr *h = m->hdr;
  if (m->first) {
    h->ltx_dir_hash = dir_hash;
    h->ltx_epoch0 = *pEpoch0;
    h->ltx_txid0 = *pTxid0;
    __atomic_store_n(&h->ltx_emitted, *pEmitted, __ATOMIC_RELEASE);
    __atomic_store_n(&h->ltx_pages, *pPages, __ATOMIC_RELEASE);
    h->ltx_l0_bytes = 0;
    return SQLITE_OK;
  }
  if (h->ltx_dir_hash != dir_hash) {
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: %s is open in other processes %s: every process "
                               "must name the same mw_ltx_dir (or none)", db->path,
                               h->ltx_dir_hash ? "with another replica stream"
                                               : "without a replica stream");
    return SQLITE_CANTOPEN;
  }
  *pEpoch0 = h->ltx_epoch0;
  *pTxid0 = h->ltx_txid0;
  mw_mp_stream_state(db, pEmitted, pPages, 0);
  return SQLITE_OK;
}

int mw_mp_stream_lock(mw_db *db) {
  mw_mp *m = db->mp;
  if (!mw_mutex_trylock(&m->stream_mu)) return SQLITE_BUSY;
  int rc = byte_lock(m->fd, LOCK_STREAM, F_WRLCK, 0);
  if (rc != SQLITE_OK) mw_mutex_unlock(&m->stream_mu);
  return rc;
}

void mw_mp_stream_unlock(mw_db *db) {
  mw_mp *m = db->mp;
  (void)byte_lock(m->fd, LOCK_STREAM, F_UNLCK, 0);
  mw_mutex_unlock(&m->stream_mu);
}

void mw_mp_stream_state(mw_db *db, uint64_t *pEmitted, uint32_t *pPages, uint64_t *pDurable) {
  shm_hdr *h = db->mp->hdr;
  if (pEmitted) *pEmitted = __atomic_load_n(&h->ltx_emitted, __ATOMIC_ACQUIRE);
  if (pPages) *pPages = __atomic_load_n(&h->ltx_pages, __ATOMIC_ACQUIRE);
  if (pDurable) *pDurable = __atomic_load_n(&h->durable_end, __ATOMIC_ACQUIRE);
}

void mw_mp_stream_set(mw_db *db, uint64_t emitted, uint32_t pages, uint64_t l0_bytes) {
  shm_hdr *h = db->mp->hdr;
  __atomic_store_n(&h->ltx_pages, pages, __ATOMIC_RELEASE);
  __atomic_store_n(&h->ltx_emitted, emitted, __ATOMIC_RELEASE);
  __atomic_add_fetch(&h->ltx_l0_bytes, l0_bytes, __ATOMIC_RELAXED);
}

uint64_t mw_mp_stream_l0_bytes(mw_db *db, int reset) {
  shm_hdr *h = db->mp->hdr;
  return reset ? __atomic_exchange_n(&h->ltx_l0_bytes, 0, __ATOMIC_RELAXED)
               : __atomic_load_n(&h->ltx_l0_bytes, __ATOMIC_RELAXED);
}

void mw_mp_log_options(mw_db *db, mw_log_options *lo) {
  mw_mp *m = db->mp;
  lo->shared = 1;
  if (!m->first) {
    /* Replays what is durable; what is published after it is applied as catch-up.
    ** The join lock is held: no switch starts meanwhile (mw_mp_attach settled one
    ** that a dead compactor left). */
    m->gen = m->hdr->log_gen;
    lo->follow_end = __atomic_load_n(&m->hdr->durable_end, __ATOMIC_ACQUIRE);
    lo->shift = __atomic_load_n(&m->hdr->shift, __ATOMIC_ACQUIRE);
  }
}

int mw_mp_joined(mw_db *db, char **pzErr) {
  mw_mp *m = db->mp;
  int rc = SQLITE_OK;
  if (m->first) {
    shm_hdr *h = m->hdr;
    uint64_t end = mw_log_end(db->log);
    h->version = SHM_VERSION;
    h->page_size = (uint32_t)db->page_size;
    h->committed_end = h->durable_end = end; /* recovery synced the log */
    h->committed_epoch = db->visible;
    h->shift = mw_log_shift(db->log);
    h->alloc_end = h->grow_end = end; /* recovery cut the file at its last record */
    h->nslots = MW_MP_SLOTS;
    h->compacted = db->compacted;
    h->log_gen = 0;
    h->switched_epoch = 0; /* the open deleted any spare */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(h->magic, SHM_MAGIC, 8);
  } else if (m->hdr->page_size != (uint32_t)db->page_size) {
    rc = SQLITE_CORRUPT;
  } else if (m->hdr->ltx_dir_hash != 0 && db->stream == 0) {
    /* The others stream to a replica: this process's commits would be in it too. */
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: %s is open in other processes with a replica "
                               "stream: every process must name the same mw_ltx_dir", db->path);
    rc = SQLITE_CANTOPEN;
  }
  for (int i = 0; rc == SQLITE_OK && i < MW_MP_SLOTS && m->slot < 0; i++) {
    int r = byte_lock(m->fd, LOCK_SLOT0 + i, F_WRLCK, 0);
    if (r == SQLITE_OK) m->slot = i;
    else if (r != SQLITE_BUSY) rc = r;
  }
  if (rc == SQLITE_OK && m->slot < 0) {
    if (pzErr && *pzErr == 0)
      *pzErr = sqlite3_mprintf("multiwriter: %s is open in %d processes already, the most "
                               "that mw_mp=1 allows", db->path, MW_MP_SLOTS);
    return SQLITE_CANTOPEN;
  }
  if (rc == SQLITE_OK) {
    m->hdr->pid[m->slot] = (uint64_t)getpid();
    /* A dead process of this slot may have left its wish for the turn, or the turn,
    ** or a claim of room that nobody would end (its slot's lock is held again). */
    __atomic_store_n(&m->hdr->turn_want[m->slot], 0, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&m->hdr->grow_slot, __ATOMIC_SEQ_CST) == (uint32_t)m->slot)
      __atomic_store_n(&m->hdr->grow_end, __atomic_load_n(&m->hdr->alloc_end, __ATOMIC_SEQ_CST),
                       __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&m->hdr->turn_owner, __ATOMIC_SEQ_CST) == (uint32_t)m->slot + 1)
      turn_hand_over(m->hdr, (uint32_t)m->slot + 1);
    pub_clear_stale(m, (uint32_t)m->slot + 1); /* ... or the publication lock */
    /* Below any snapshot this process will take, and applied: a compactor (it holds
    ** the join lock, as this open does) sees it once the slot is alive. */
    mw_mutex_lock(&db->mu);
    __atomic_store_n(&m->hdr->floor[m->slot], db->oldest, __ATOMIC_RELEASE);
    mw_mutex_unlock(&db->mu);
    /* Without a worker thread, room is added under the lock as before. */
    m->grower_added = mw_bg_add(&m->grower, grower_step, db, 0) == SQLITE_OK;
    __atomic_store_n(&m->joined, 1, __ATOMIC_RELEASE);
    join_release(m);
  } else if (pzErr && *pzErr == 0) {
    *pzErr = sqlite3_mprintf("multiwriter: cannot join the processes of %s (%d)", db->path, rc);
  }
  return rc;
}

int mw_mp_leave(mw_db *db, int *pAlone) {
  mw_mp *m = db->mp;
  grower_stop(db); /* before anything of the log goes */
  __atomic_store_n(&m->joined, 0, __ATOMIC_RELEASE);
  mw_mutex_lock(&m->join_mu);
  int rc = join_take(m, 1);
  if (rc != SQLITE_OK) {
    mw_mutex_unlock(&m->join_mu);
    *pAlone = 0;
    return rc;
  }
  *pAlone = !others_alive(m);
  if (*pAlone) rc = settle(db);
  return rc;
}

int mw_mp_leave_at_exit(mw_db *db, int *pAlone) {
  mw_mp *m = db->mp;
  *pAlone = 0;
  /* Nothing waited for: exit() may come from a thread of this process that holds
  ** join_mu, and another process may be joining (it holds the join lock briefly). */
  if (!mw_mutex_trylock(&m->join_mu)) return SQLITE_OK;
  if (join_take(m, 0) != SQLITE_OK) {
    mw_mutex_unlock(&m->join_mu);
    return SQLITE_OK;
  }
  if (others_alive(m)) {
    join_release(m);
    return SQLITE_OK;
  }
  grower_stop(db);
  __atomic_store_n(&m->joined, 0, __ATOMIC_RELEASE);
  *pAlone = 1;
  return settle(db);
}

void mw_mp_left(mw_db *db, int alone) {
  mw_mp *m = db->mp;
  /* The last one: the files go while the join lock is held, so that a process waiting
  ** for it finds the name gone and starts anew; the database file's lock goes first,
  ** so that it can take it. */
  if (alone && m->join_held) {
    (void)unlink(m->path);
    (void)mw_guard_unlock(db->data);
  }
}

void mw_mp_free(mw_db *db) {
  mw_mp *m = db->mp;
  if (m == 0) return;
  grower_stop(db);
  if (m->slot >= 0 && m->hdr) {
    __atomic_store_n(&m->hdr->turn_want[m->slot], 0, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&m->hdr->turn_owner, __ATOMIC_SEQ_CST) == (uint32_t)m->slot + 1)
      turn_hand_over(m->hdr, (uint32_t)m->slot + 1);
  }
  if (m->slot >= 0) (void)byte_lock(m->fd, LOCK_SLOT0 + m->slot, F_UNLCK, 0);
  /* An open refused before it joined, with nobody else there: leave no file behind. */
  if (m->slot < 0 && m->first && m->join_held) (void)unlink(m->path);
  if (m->join_held) join_release(m);
  if (m->hdr) munmap(m->hdr, SHM_SIZE);
  if (m->fd >= 0) close(m->fd);
  mw_mutex_destroy(&m->join_mu);
  mw_mutex_destroy(&m->pub_mu);
  mw_mutex_destroy(&m->catch_mu);
  mw_mutex_destroy(&m->grow_mu);
  mw_mutex_destroy(&m->stream_mu);
  sqlite3_free(m->path);
  free(m);
  db->mp = 0;
}

#else /* _WIN32: not built there yet */

int mw_mp_attach(mw_db *db, char **pzErr) {
  (void)db;
  if (pzErr && *pzErr == 0)
    *pzErr = sqlite3_mprintf("multiwriter: mw_mp=1 (many processes) is not available on "
                             "Windows yet");
  return SQLITE_CANTOPEN;
}
int mw_mp_is_first(mw_db *db) { (void)db; return 1; }
void mw_mp_log_options(mw_db *db, mw_log_options *lo) { (void)db; (void)lo; }
int mw_mp_joined(mw_db *db, char **pzErr) { (void)db; (void)pzErr; return SQLITE_CANTOPEN; }
int mw_mp_leave(mw_db *db, int *pAlone) { (void)db; *pAlone = 1; return SQLITE_OK; }
int mw_mp_leave_at_exit(mw_db *db, int *pAlone) { (void)db; *pAlone = 0; return SQLITE_OK; }
void mw_mp_left(mw_db *db, int alone) { (void)db; (void)alone; }
void mw_mp_free(mw_db *db) { (void)db; }
void mw_mp_refresh(mw_db *db) { (void)db; }
int mw_mp_commit_begin(mw_db *db, uint64_t need) { (void)db; (void)need; return SQLITE_MISUSE; }
void mw_mp_commit_end(mw_db *db, int rc, uint64_t epoch, uint64_t end) {
  (void)db; (void)rc; (void)epoch; (void)end;
}
void mw_mp_durable(mw_db *db, uint64_t end) { (void)db; (void)end; }
int mw_mp_wait_durable(mw_db *db, uint64_t end) { (void)db; (void)end; return SQLITE_MISUSE; }
int mw_mp_wait_foreign(mw_db *db, uint64_t epoch, uint64_t start) {
  (void)db; (void)epoch; (void)start;
  return SQLITE_MISUSE;
}
int mw_mp_stream_join(mw_db *db, uint64_t dir_hash, uint64_t *pEpoch0, uint64_t *pTxid0,
                      uint64_t *pEmitted, uint32_t *pPages, char **pzErr) {
  (void)db; (void)dir_hash; (void)pEpoch0; (void)pTxid0; (void)pEmitted; (void)pPages;
  (void)pzErr;
  return SQLITE_MISUSE;
}
int mw_mp_stream_lock(mw_db *db) { (void)db; return SQLITE_MISUSE; }
void mw_mp_stream_unlock(mw_db *db) { (void)db; }
void mw_mp_stream_state(mw_db *db, uint64_t *pEmitted, uint32_t *pPages, uint64_t *pDurable) {
  (void)db; (void)pEmitted; (void)pPages; (void)pDurable;
}
void mw_mp_stream_set(mw_db *db, uint64_t emitted, uint32_t pages, uint64_t l0_bytes) {
  (void)db; (void)emitted; (void)pages; (void)l0_bytes;
}
uint64_t mw_mp_stream_l0_bytes(mw_db *db, int reset) { (void)db; (void)reset; return 0; }
void mw_mp_mark_locked(mw_db *db, uint64_t before) { (void)db; (void)before; }
int mw_mp_compact_begin(mw_db *db, uint64_t *pLimit) { (void)db; *pLimit = 0; return SQLITE_BUSY; }
int mw_mp_compact_log(mw_db *db, uint64_t base) { (void)db; (void)base; return SQLITE_MISUSE; }
void mw_mp_compact_end(mw_db *db) { (void)db; }
int mw_mp_unmark(mw_db *db) { (void)db; return SQLITE_OK; }
int mw_mp_arm(mw_db *db) { (void)db; return SQLITE_OK; }
uint64_t mw_mp_committed_epoch(mw_db *db) { (void)db; return 0; }
void mw_mp_floor(mw_db *db, uint64_t oldest) { (void)db; (void)oldest; }
void mw_mp_tick(mw_db *db) { (void)db; }
int mw_mp_turn_take(mw_db *db) { (void)db; return 0; }
int mw_mp_gate_take(mw_db *db, uint64_t until) { (void)db, (void)until; return 1; }
void mw_mp_gate_hold(mw_db *db, uint64_t until) { (void)db, (void)until; }
void mw_mp_gate_give(mw_db *db) { (void)db; }
void mw_mp_turn_give(mw_db *db) { (void)db; }
void mw_mp_sync_to(mw_db *db, uint64_t end) { (void)db; (void)end; }
void mw_mp_room_claims(mw_db *db, int64_t *pZeroed, int64_t *pNow) {
  (void)db;
  *pZeroed = *pNow = 0;
}
int mw_mp_load_image(void *ctx, uint32_t pgno, uint64_t at, unsigned char *buf) {
  (void)ctx; (void)pgno; (void)at; (void)buf;
  return SQLITE_MISUSE;
}

#endif
