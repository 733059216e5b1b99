// A Worker terminated inside a transaction runs no JavaScript cleanup at all, yet its
// snapshot must not pin every later version forever: the engine sees the Worker's
// thread end and releases it (issue 11; native/src/owner.c).
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runFixture, tempDir } from "./helpers.ts";

describe("a Worker terminated inside a transaction", () => {
  it("pins nothing once its thread is gone: versions go, compaction passes it", () => {
    const path = join(tempDir(), "orphan.db");
    const out = runFixture("orphan-main.ts", [path], 120_000);
    const r = JSON.parse(out.trim().split("\n").pop()!);
    expect(r.sum).toBe(200);
    // 3000 commits after the Worker's snapshot: the ones of the last round at most are
    // still pinned (by nothing but the compaction that has not run yet).
    expect(r.rounds).toBeGreaterThanOrEqual(10);
    expect(r.after.pinnedVersions).toBeLessThan(300);
    expect(r.after.compactions).toBeGreaterThan(r.before.compactions + 1);
  }, 150_000);
});
