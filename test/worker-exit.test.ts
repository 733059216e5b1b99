// Workers that end (terminated, or by themselves) with an engine database still open must
// not take the process down: the library stays loaded while engine threads run its code.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runtime, tempDir } from "./helpers.ts";

const main = fileURLToPath(new URL("./fixtures/worker-exit-main.ts", import.meta.url));

describe("Workers that end with a database open", () => {
  it("leave the process running and the database usable", () => {
    const path = join(tempDir(), "leak.db");
    const args = runtime === "bun" ? [main, path] : ["run", "-A", main, path];
    const out = execFileSync(process.execPath, args, { encoding: "utf8", stdio: "pipe", timeout: 120_000 });
    expect(out).toContain("survived 201");
  }, 150_000);
});
