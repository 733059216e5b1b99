// Workers that end (terminated, or by themselves) with an engine database still open must
// not take the process down: the library stays loaded while engine threads run its code.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runFixture, tempDir } from "./helpers.ts";

describe("Workers that end with a database open", () => {
  it("leave the process running and the database usable", () => {
    const path = join(tempDir(), "leak.db");
    const out = runFixture("worker-exit-main.ts", [path], 120_000);
    expect(out).toContain("survived 201");
  }, 150_000);
});
