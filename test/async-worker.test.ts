// Workers terminated while their transactionAsync commits run on engine threads must not
// take the process down (Bun crashed when an engine thread called back into a Worker that
// was gone: lib/ffi/bun.ts wakes the loop through a socket pair instead), and lose nothing
// acknowledged.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runFixture, tempDir } from "./helpers.ts";

function check(out: string, acknowledged: number): void {
  const m = /survived (\d+) rows, (\d+) acknowledged at the messages, integrity (\w+)/.exec(out);
  expect(m, out).not.toBeNull();
  const [rows, acked] = [Number(m![1]), Number(m![2])];
  expect(acked).toBe(acknowledged);
  expect(rows).toBeGreaterThan(acked); // + this thread's row and what committed after
  expect(m![3]).toBe("ok");
}

describe("Workers terminated with async commits in flight", () => {
  it("leave the process running, every acknowledged commit there and the file whole", () => {
    check(runFixture("async-worker-main.ts", [join(tempDir(), "async-worker.db")], 120_000), 16 * 200);
  }, 150_000);

  // Each COMMIT off the loop first waits 30 ms (a pause point of native/src/vfs/async.c), so
  // that the Worker's thread has ended, its memory freed, when the commit runs: the COMMIT
  // once let go of its write lock in the ended thread's TLS (a write to freed memory: Deno
  // aborted with "malloc(): unaligned fastbin chunk detected" in 5 runs of 6 of this test;
  // AddressSanitizer named the read at lane.c's wal_write), and Deno's call once read its
  // SQL text from the Worker's freed memory. 16 rounds of 20 commits each.
  it("stay whole when the commits outlive the Workers' threads", () => {
    const out = runFixture("async-worker-main.ts", [join(tempDir(), "async-worker.db"), "16", "20"], 120_000, {
      MW_PAUSE_AT: "exec_off_loop:30",
    });
    check(out, 16 * 20);
  }, 150_000);
});
