// Custom functions that force a major garbage collection while a hot loop calls them: V8
// aborts the process when that happens inside a fast API call (Deno's FFI fast path), so
// connections with JS callbacks never fast-call the functions that may call back.
import { execFileSync } from "node:child_process";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runtime } from "./helpers.ts";

const child = fileURLToPath(new URL("./fixtures/gc-child.ts", import.meta.url));

describe("garbage collection inside callbacks", () => {
  it("a hot loop whose custom function forces major GCs completes", () => {
    const args = runtime === "bun" ? [child] : ["run", "-A", "--v8-flags=--expose-gc", child];
    const out = execFileSync(process.execPath, args, { encoding: "utf8", stdio: "pipe", timeout: 240_000 });
    expect(out.trim()).toBe("ok");
  }, 300_000);
});

// bun:sqlite's suite (test/bun-suite.test.ts has the rest): a statement keeps its Database
// alive. Here because it starts the runtime as a child process, which the emulated run of
// release/ts-emulated.mjs cannot (this file is left out there).
describe("garbage collection of a Database with statements", () => {
  it("statements stay usable after their Database is garbage-collected", () => {
    const fixture = fileURLToPath(new URL("./fixtures/gc-statements.ts", import.meta.url));
    const args = runtime === "bun" ? [fixture] : ["run", "-A", "--v8-flags=--expose-gc", fixture];
    const out = execFileSync(process.execPath, args, { encoding: "utf8", stdio: "pipe", timeout: 60_000 });
    expect(out.trim()).toBe(runtime === "bun" ? "ok ok" : "ok");
  });
});
