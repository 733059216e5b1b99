/* The randomized checker (docs/testing.md "Tests and the breakage each one was shown to catch"; the machinery is in checker_model.h).
** 8 threads, each with its own connection, run 250 random transactions each over
** 200 keys of one table: upserts, updates, copies (a write that depends on a read),
** deletes, point and range reads, with payloads from a few bytes to several pages
** (pages split, overflow chains come and go, pages are freed). One iteration in 6
** holds a read statement open and commits single statements inside its snapshot
** (several commits in one snapshot); one operation in 25 reads or sets user_version
** (page 1's header). Half the threads run synchronous=NORMAL, half FULL; three poll
** PRAGMA data_version (their writers keep SQLite's cache). The commits are replayed in
** epoch order on a model:
**   - a committed transaction must have read exactly the model state just before
**     its commit epoch (plus its own writes): serializable, in epoch order;
**   - a read-only or refused transaction must have read the state at its snapshot;
**   - the final table must equal the model, and integrity_check must pass.
** Then a shorter run with mw_readcheck=0: reads may be stale (write skew), but the
** b-tree must stay whole (integrity through the engine and a stock connection).
**
** MW_TEST_SEED=n replays a workload (the seed is printed); MW_TEST_PARAMS replaces
** the URI parameters of the first run; MW_TEST_SOAK_SECONDS=s repeats both runs
** with fresh seeds until s seconds have passed (a soak: `MW_TEST_SOAK_SECONDS=600
** zig-out/test/test_engine_checker`). */
#include "checker_model.h"

#include <time.h>

static const cm_load load = CM_KV_LOAD("checker", 250);

static void round_once(void) {
  cm_run r;
  cm_check(&r, &load);
  printf("test_engine_checker: %d transactions (%d in held snapshots), %d commits, %d refused "
         "(write %lld, read %lld, schema %lld), %d wrong reads, %lld compactions\n", r.total,
         r.held, r.commits, r.refused, (long long)r.cw, (long long)r.cr, (long long)r.cs, r.bad,
         (long long)r.compactions);
  cm_done(&r);
  if (r.bad || !r.final_ok) fprintf(stderr, "failed with seed %llu\n", (unsigned long long)cm_seed);
  CHECK(r.bad == 0);
  CHECK(r.final_ok);
  CHECK(r.commits > r.total / 10);
  CHECK(r.held > 0);

  /* Rebase: transactions of point operations declare their keys, and commits that
  ** lost only on other rows of table leaves are merged. Serializable all the same.
  ** 48 keys of small values: a few leaves, where most conflicts are on other rows. */
  cm_load rb = load;
  rb.rebase = 1;
  rb.txns = 150;
  rb.keys = 48;
  rb.small_bytes = 40;
  rb.big_one_in = 1 << 30;
  rb.get_below = 97; /* few ranges: they declare nothing */
  rb.held_one_in = 20; /* held snapshots' single statements declare nothing either */
  cm_check_with(&r, &rb, "mw_log_max_mb=1&mw_rebase=1");
  printf("test_engine_checker: mw_rebase=1: %d transactions, %d commits (%lld rebased), %d refused "
         "(write %lld, read %lld), %d wrong reads\n", r.total, r.commits, (long long)r.rebases,
         r.refused, (long long)r.cw, (long long)r.cr, r.bad);
  cm_done(&r);
  if (r.bad || !r.final_ok) fprintf(stderr, "failed with seed %llu\n", (unsigned long long)cm_seed);
  CHECK(r.bad == 0);
  CHECK(r.final_ok);
  CHECK(r.rebases > 0);

  /* Without read validation: structure and integrity only (cm_final checks both). */
  cm_load skew = load;
  skew.txns = 100;
  cm_check_with(&r, &skew, "mw_log_max_mb=1&mw_readcheck=0");
  printf("test_engine_checker: mw_readcheck=0: %d transactions, %d commits, %d stale reads "
         "(allowed), integrity ok\n", r.total, r.commits, r.bad);
  cm_done(&r);
}

int main(void) {
  cm_seed_from_env();
  const char *soak = getenv("MW_TEST_SOAK_SECONDS");
  if (soak && atoi(soak) > 0) {
    time_t end = time(0) + atoi(soak);
    for (int round = 1; time(0) < end; round++) {
      cm_seed = ((uint64_t)time(0) << 20) ^ (uint64_t)getpid() ^ ((uint64_t)round << 40);
      printf("test_engine_checker: soak round %d\n", round);
      round_once();
    }
  } else {
    round_once();
  }
  printf("test_engine_checker: ok\n");
  return 0;
}
