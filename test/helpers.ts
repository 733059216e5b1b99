// test/helpers.ts: what the test files share: the checkout root, temporary folders that
// are removed after each file, the runtime that runs the suite, and running a fixture in a
// Worker or in a process of its own.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
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

/** Runs the fixture `script` (under test/fixtures/) with `args` in a new process of the
 * runtime that runs the suite (with `env` added to this one's) and returns its standard
 * output; throws when it fails. */
export function runFixture(script: string, args: string[], timeoutMs: number, env: Record<string, string> = {}): string {
  const path = fileURLToPath(new URL(`./fixtures/${script}`, import.meta.url));
  const argv = runtime === "bun" ? [path, ...args] : ["run", "-A", path, ...args];
  const r = spawnSync(process.execPath, argv, {
    encoding: "utf8",
    stdio: "pipe",
    timeout: timeoutMs,
    env: { ...process.env, ...env },
  });
  if (r.error === undefined && r.status === 0) return r.stdout;
  // How it ended comes first, on one line: a CI summary keeps only an error's first line.
  const how = r.error !== undefined ? String(r.error) : r.signal !== null ? `killed by ${r.signal}` : `exit ${r.status}`;
  const last = (r.stderr ?? "").trim().split("\n").slice(-1)[0] ?? "";
  throw new Error(`fixture ${script} failed (${how}): ${last}\n--- stdout:\n${r.stdout}\n--- stderr:\n${r.stderr}`);
}
