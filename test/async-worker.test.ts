// Workers terminated while their transactionAsync commits run on engine threads must not
// take the process down (Bun crashed when an engine thread called back into a Worker that
// was gone: lib/ffi/bun.ts polls in Workers instead), and lose nothing acknowledged.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runtime, tempDir } from "./helpers.ts";

const main = fileURLToPath(new URL("./fixtures/async-worker-main.ts", import.meta.url));

describe("Workers terminated with async commits in flight", () => {
  it("leave the process running, every acknowledged commit there and the file whole", () => {
    const path = join(tempDir(), "async-worker.db");
    const args = runtime === "bun" ? [main, path] : ["run", "-A", main, path];
    const out = execFileSync(process.execPath, args, { encoding: "utf8", stdio: "pipe", timeout: 120_000 });
    const m = /survived (\d+) rows, (\d+) acknowledged at the messages, integrity (\w+)/.exec(out);
    expect(m, out).not.toBeNull();
    const [rows, acked] = [Number(m![1]), Number(m![2])];
    expect(acked).toBe(16 * 200);
    expect(rows).toBeGreaterThan(acked); // + this thread's row and what committed after
    expect(m![3]).toBe("ok");
  }, 150_000);
});
