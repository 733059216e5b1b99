// A Worker terminated inside a transaction runs no JavaScript cleanup at all, yet its
// snapshot must not pin every later version forever: the engine sees the Worker's
// thread end and releases it (issue 11; native/src/owner.c).
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runtime, tempDir } from "./helpers.ts";

const main = fileURLToPath(new URL("./fixtures/orphan-main.ts", import.meta.url));

describe("a Worker terminated inside a transaction", () => {
  it("pins nothing once its thread is gone: versions go, compaction passes it", () => {
    const path = join(tempDir(), "orphan.db");
    const args = runtime === "bun" ? [main, path] : ["run", "-A", main, path];
    const out = execFileSync(process.execPath, args, { encoding: "utf8", stdio: "pipe", timeout: 120_000 });
    const r = JSON.parse(out.trim().split("\n").pop()!);
    expect(r.sum).toBe(200);
    // 3000 commits after the Worker's snapshot: the ones of the last round at most are
    // still pinned (by nothing but the compaction that has not run yet).
    expect(r.rounds).toBeGreaterThanOrEqual(10);
    expect(r.after.pinnedVersions).toBeLessThan(300);
    expect(r.after.compactions).toBeGreaterThan(r.before.compactions + 1);
  }, 150_000);
});
