/* Conflict storms with the turn's early hand-over on (issue 10, item 1): 16 threads,
** each with its own connection, run random transactions (checker_model.h) over
**   - one row: every write is to key 0;
**   - one page: 16 keys with small values (one leaf);
**   - one table: 400 keys over several leaves and an interior page.
** Almost every transaction conflicts: the lanes heat up and queue for the turn, and
** each holder's snapshot includes the commits of the holders before it that are
** installed but not yet synced. The checker replays every commit in epoch order:
** each committed transaction must have read exactly the state just before its
** epoch, each read-only or refused one the state at its snapshot (which for a turn
** holder is the installed prefix); the final table must equal the model and pass
** integrity_check (through the engine and a stock connection). The run must show
** turns and snapshots past the durable prefix (mw_early_snapshots), or the
** mechanism was not exercised. MW_TEST_SEED=n replays a workload. */
#define CM_THREADS 16
#include "checker_model.h"
#include "engine.h"
#include "core/db.h"

static const char *const tname[] = { "kv" };

static void storm(const char *name, int keys, int small_bytes, int range_width) {
  cm_load load = {
    .dir = name,
    .schema = "CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT)",
    .tname = tname, .tables = 1, .keys = keys, .txns = 120,
    /* One in 8 read-only; 70% writes (40 put, 15 update or copy, 15 delete), 15%
    ** point reads, 15% ranges. No big values, no held snapshots: the storm is about
    ** the queue, the other checker tests cover those. */
    .readonly_one_in = 8,
    .write_below = 70, .put_below = 40, .upd_below = 55, .get_below = 85,
    .range_width = range_width,
    .new_below = 0,
    .big_table = -1, .big_one_in = 1 << 30, .big_bytes = 1, .small_bytes = small_bytes,
    .held_one_in = 0,
    .meta_one_in = 0,
  };
  int64_t early0 = __atomic_load_n(&mw_early_snapshots, __ATOMIC_RELAXED);
  cm_run r;
  cm_check(&r, &load);
  int64_t early = __atomic_load_n(&mw_early_snapshots, __ATOMIC_RELAXED) - early0;
  printf("test_engine_storm %s: %d transactions, %d commits, %d refused (write %lld, read "
         "%lld), %lld snapshots past the durable prefix, %d wrong reads\n", name, r.total,
         r.commits, r.refused, (long long)r.cw, (long long)r.cr, (long long)early, r.bad);
  cm_done(&r);
  if (r.bad || !r.final_ok) fprintf(stderr, "failed with seed %llu\n", (unsigned long long)cm_seed);
  CHECK(r.bad == 0);
  CHECK(r.final_ok);
  CHECK(r.commits > r.total / 4);
  CHECK(early > 0);
}

int main(void) {
  cm_seed_from_env();
  storm("storm-row", 1, 60, 1);
  storm("storm-page", 16, 40, 4);
  storm("storm-table", 400, 300, 12);
  printf("test_engine_storm: ok\n");
  return 0;
}
