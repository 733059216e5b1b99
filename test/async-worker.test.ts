// Workers terminated while their transactionAsync commits run on engine threads must not
// take the process down (Bun crashed when an engine thread called back into a Worker that
// was gone: lib/ffi/bun.ts polls in Workers instead), and lose nothing acknowledged.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runFixture, tempDir } from "./helpers.ts";

describe("Workers terminated with async commits in flight", () => {
  it("leave the process running, every acknowledged commit there and the file whole", () => {
    const path = join(tempDir(), "async-worker.db");
    const out = runFixture("async-worker-main.ts", [path], 120_000);
    const m = /survived (\d+) rows, (\d+) acknowledged at the messages, integrity (\w+)/.exec(out);
    expect(m, out).not.toBeNull();
    const [rows, acked] = [Number(m![1]), Number(m![2])];
    expect(acked).toBe(16 * 200);
    expect(rows).toBeGreaterThan(acked); // + this thread's row and what committed after
    expect(m![3]).toBe("ok");
  }, 150_000);
});
