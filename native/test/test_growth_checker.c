/* The randomized checker of the engine (checker_model.h, as test_engine_checker.c),
** made growth-heavy for relocation and the interior merge (growth.c): 8 threads
** insert mostly new keys, each into its own block, so that leaves and interior pages
** split and the file grows in every transaction, into three tables: a rowid table
** with an index on its text, a rowid table of blobs up to 24 KB (overflow chains),
** and a WITHOUT ROWID table; updates and deletes free pages. Every transaction
** records its snapshot and commit epochs and what it read; the commits are replayed
** in epoch order on a model: a committed transaction must have read the state just
** before its epoch, a refused or read-only one the state at its snapshot; the final
** tables must equal the model; integrity_check passes through the engine and, after
** the last close, through a stock connection. Relocations and merges must happen. */
#include "checker_model.h"

static const char *const tname[] = { "ra", "rb", "wr" };

static const cm_load load = {
  .dir = "growth-checker",
  .schema = "CREATE TABLE ra(k INTEGER PRIMARY KEY, v TEXT); CREATE INDEX ra_v ON ra(v);"
            "CREATE TABLE rb(k INTEGER PRIMARY KEY, v BLOB);"
            "CREATE TABLE wr(k INTEGER PRIMARY KEY, v TEXT) WITHOUT ROWID",
  .tname = tname, .tables = 3, .keys = 6000, .txns = 200,
  /* One in 8 read-only; 85% writes (72 put, 8 update, 5 delete), 65% of all on new
  ** keys of the own block, 8% point reads, 7% ranges of up to 30 keys; in rb one
  ** value in 4 of 2000..23999 bytes, else 1..600. */
  .readonly_one_in = 8,
  .write_below = 85, .put_below = 72, .upd_below = 80, .get_below = 93, .range_width = 30,
  .new_below = 65,
  .meta_one_in = 25,
  .big_table = 1, .big_one_in = 4, .big_bytes = 22000, .small_bytes = 600,
};

int main(void) {
  cm_seed_from_env();
  cm_run r;
  cm_check(&r, &load);
  printf("test_growth_checker: %d transactions, %d commits, %d refused (write %lld, read %lld, "
         "schema %lld), %d wrong reads, %lld compactions, %lld relocations, %lld merges, "
         "%lld relocations refused\n", r.total, r.commits, r.refused, (long long)r.cw,
         (long long)r.cr, (long long)r.cs, r.bad, (long long)r.compactions, (long long)r.reloc,
         (long long)r.merges, (long long)r.refused_reloc);
  cm_done(&r);
  CHECK(r.bad == 0);
  CHECK(r.final_ok);
  CHECK(r.commits > r.total / 10);
  CHECK(r.reloc > 0 && r.merges > 0);
  printf("test_growth_checker: ok\n");
  return 0;
}
