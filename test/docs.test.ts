// The JSR surface is documented: `deno doc --lint` of both entries reports no error (every
// export documented, no private type in a public one, a @module doc).
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import process from "node:process";
import { root } from "./helpers.ts";

describe("documentation", () => {
  it("deno doc --lint lib/mod.ts lib/jsr.ts: zero errors", () => {
    let output = "";
    try {
      output = execFileSync(join(root, "node_modules", ".bin", "deno"), ["doc", "--lint", "lib/mod.ts", "lib/jsr.ts"], {
        cwd: root,
        encoding: "utf8",
        stdio: "pipe",
        env: { ...process.env, NO_COLOR: "1" },
        timeout: 120_000,
      });
    } catch (e) {
      const err = e as { stdout?: string; stderr?: string };
      output = `${err.stdout ?? ""}${err.stderr ?? ""}`;
    }
    expect(output).not.toMatch(/error/);
  }, 150_000);
});
