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

/** Runs one job in a new Worker of the fixture `script` (under test/fixtures/) and
 * resolves with the Worker's first message; the Worker is ended either way. */
export function runWorker<T>(script: string, job: object): Promise<T> {
  const worker = new Worker(new URL(`./fixtures/${script}`, import.meta.url).href, { type: "module" });
  return new Promise<T>((resolve, reject) => {
    worker.onmessage = (ev: MessageEvent<T>) => {
      worker.terminate();
      resolve(ev.data);
    };
    worker.onerror = (ev: ErrorEvent) => {
      worker.terminate();
      reject(new Error(`worker failed: ${ev.message}`));
    };
    worker.postMessage(job);
  });
}
