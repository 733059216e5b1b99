/* The randomized checker (engine.md section 11; the machinery is in checker_model.h).
** 8 threads, each with its own connection, run 250 random transactions each over
** 200 keys of one table: upserts, updates, deletes, point and range reads, with
** payloads from a few bytes to several pages (pages split, overflow chains come and
** go, pages are freed). The commits are replayed in epoch order on a model:
**   - a committed transaction must have read exactly the model state just before
**     its commit epoch (plus its own writes): serializable, in epoch order;
**   - a read-only or refused transaction must have read the state at its snapshot;
**   - the final table must equal the model, and integrity_check must pass.
** MW_TEST_PARAMS adds URI parameters (e.g. mw_readcheck=0 must make it fail). */
#include "checker_model.h"

static const char *const tname[] = { "kv" };

static const cm_load load = {
  .dir = "checker",
  .schema = "CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT)",
  .tname = tname, .tables = 1, .keys = 200, .txns = 250,
  /* One in 5 read-only; 60% writes (30 put, 15 update, 15 delete), 20% point reads,
  ** 20% ranges of up to 12 keys; one value in 10 of 2000..7999 bytes, else 1..400. */
  .readonly_one_in = 5,
  .write_below = 60, .put_below = 30, .upd_below = 45, .get_below = 80, .range_width = 12,
  .new_below = 0,
  .big_table = -1, .big_one_in = 10, .big_bytes = 6000, .small_bytes = 400,
};

int main(void) {
  cm_run r;
  cm_check(&r, &load);
  printf("test_engine_checker: %d transactions, %d commits, %d refused (write %lld, read %lld, "
         "schema %lld), %d wrong reads, %lld compactions\n", r.total, r.commits, r.refused,
         (long long)r.cw, (long long)r.cr, (long long)r.cs, r.bad, (long long)r.compactions);
  cm_done(&r);
  CHECK(r.bad == 0);
  CHECK(r.final_ok);
  CHECK(r.commits > r.total / 10);
  printf("test_engine_checker: ok\n");
  return 0;
}
