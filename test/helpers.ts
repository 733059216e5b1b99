// test/helpers.ts: what the test files share: the checkout root, temporary folders that
// are removed after each file, and the runtime that runs the suite.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";

export const root = fileURLToPath(new URL("..", import.meta.url));
export const libDir = join(root, "zig-out", "lib");
export const runtime = (globalThis as { Bun?: unknown }).Bun !== undefined ? "bun" : "deno";

const made: string[] = [];

/** A fresh temporary folder, removed when the test file ends. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "mw-test-"));
  made.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});
