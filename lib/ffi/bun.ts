// lib/ffi/bun.ts: the bun:ffi adapter. Translates the neutral symbol table for dlopen and
// implements the pointer helpers with Bun's numbers-as-pointers. It is the only file that
// touches bun:ffi; it never runs under another runtime.
import { mkdirSync, rmdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { callbacks, functions } from "./symbols.generated.ts";
import type { Ffi, NativeCallback, NeutralType, Ptr, Symbols } from "./types.ts";

// The few parts of bun:ffi used here (declared so that no Bun types are needed).
interface BunFfi {
  dlopen(
    path: string,
    symbols: Record<string, { args: string[]; returns: string }>,
  ): { symbols: Record<string, (...args: unknown[]) => unknown> };
  ptr(view: ArrayBufferView): number;
  read: { ptr(p: number, offset?: number): number };
  toArrayBuffer(p: number, offset: number, length: number): ArrayBuffer;
  CString: new (p: number, offset?: number, length?: number) => { toString(): string };
  JSCallback: new (
    fn: (...args: never[]) => unknown,
    def: { args: string[]; returns: string },
  ) => { ptr: number | null; close(): void };
}

// commitAsync in Bun, which has no nonblocking FFI calls: mw_exec_async_start runs the
// statement on an engine thread, which then writes a byte to a wake pair (mw_wake_open: two
// local sockets) whose reading end this loop reads while any statement is in flight; each
// wake collects the records that ended. Not a thread-safe callback into the loop: one called
// into a Worker terminated meanwhile crashes Bun (1.4.5: SIGSEGV or SIGILL,
// test/async-worker.test.ts), and a Worker runs no JavaScript at termination that could tell
// the engine; a byte to a socket nobody reads is harmless (and costs what the callback did:
// docs/async.md, docs/server.md). The pair is let go after IDLE_MS without a statement in flight (the
// engine closes it once no statement is left to write to it); a Worker terminated while it
// had one leaves it open, and 8 bytes per statement in flight. Without a pair (Windows) the
// loop polls every millisecond while any statement is in flight.
const IDLE_MS = 100;
interface Wake {
  handle: Ptr;
  reader: ReadableStreamDefaultReader<Uint8Array>;
}
const COMMIT = new TextEncoder().encode("COMMIT\0"); // copied by mw_exec_async_start
function wokenCommit(sym: Symbols): (db: Ptr) => Promise<number> {
  const pending = new Map<Ptr, (rc: number) => void>();
  let wake: Wake | null = null;
  let noPair = false; // mw_wake_open has none here: poll
  let timer: ReturnType<typeof setInterval> | null = null;
  let idle: ReturnType<typeof setTimeout> | null = null;
  const collect = () => {
    for (const [rec, resolve] of pending) {
      const rc = sym.mw_exec_async_result(rec);
      if (rc === -1) continue; // still running
      pending.delete(rec);
      resolve(rc);
    }
    if (pending.size > 0) return;
    if (timer !== null) clearInterval(timer), timer = null;
    // Let go of the pair after IDLE_MS, so that the thread may end: a reader made again for
    // every commit cost a server Worker a third more CPU per request.
    idle ??= setTimeout(letGo, IDLE_MS);
  };
  const letGo = () => {
    idle = null;
    const w = wake;
    if (pending.size > 0 || w === null) return;
    wake = null;
    // Closed once Bun stopped reading it: its descriptor may be reused after.
    void w.reader.cancel().catch(() => {}).finally(() => sym.mw_wake_close(w.handle));
  };
  const open = (): Wake | null => {
    const fd = new Int32Array(1);
    const handle = sym.mw_wake_open(fd);
    if (!handle) return (noPair = true), null;
    const w: Wake = { handle, reader: bunGlobal().file(fd[0]).stream().getReader() };
    void (async () => {
      try {
        for (;;) {
          const { done } = await w.reader.read();
          if (done) break;
          collect();
        }
      } catch { /* cancelled */ }
      // The stream ended while still needed (never seen): poll instead.
      if (wake === w && pending.size > 0) timer ??= setInterval(collect, 1);
    })();
    return w;
  };
  return (db) => {
    if (wake === null && !noPair) wake = open();
    const w = wake;
    const rec = sym.mw_exec_async_start(db, COMMIT, w === null ? (null as unknown as Ptr) : w.handle);
    if (!rec) {
      // No engine thread (or no memory for the job): run it here.
      if (pending.size === 0) collect(); // (lets the pair go in time)
      return Promise.resolve(sym.sqlite3_exec(db, COMMIT, null as unknown as Ptr, null as unknown as Ptr, null));
    }
    return new Promise<number>((resolve) => {
      pending.set(rec, resolve);
      if (idle !== null) clearTimeout(idle), idle = null;
      if (w === null) timer ??= setInterval(collect, 1);
    });
  };
}

// The few parts of the Bun global used here.
interface BunGlobal {
  file(fd: number): { stream(): ReadableStream<Uint8Array> };
}
function bunGlobal(): BunGlobal {
  return (globalThis as unknown as { Bun: BunGlobal }).Bun;
}

// i64 results come back as numbers when they fit in a double exactly, else as BigInt;
// typed arrays go by address as "ptr".
function argType(t: NeutralType): string {
  return t === "buffer" ? "ptr" : t;
}
function resultType(t: NeutralType): string {
  return t === "i64" ? "i64_fast" : t === "buffer" ? "ptr" : t;
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

// Bun has crashed when Workers of one process dlopen the same library at the same time,
// so the first dlopen of each Worker takes a per-process lock (a directory: mkdir is
// atomic). It is held only around dlopen (milliseconds), so a lock older than STALE_MS was
// left by a thread that died holding it (a Worker terminated during its dlopen: its
// `finally` never runs) and is broken.
export const STALE_MS = 2_000;
function withDlopenLock<T>(fn: () => T): T {
  const lock = join(tmpdir(), `sqlite-multiwriter-dlopen-${process.pid}.lock`);
  for (let waited = 0;; waited++) {
    try {
      mkdirSync(lock);
      break;
    } catch (e) {
      if ((e as { code?: string }).code !== "EEXIST") return fn(); // no lock possible here
      try {
        if (Date.now() - statSync(lock).mtimeMs > STALE_MS) rmdirSync(lock);
      } catch { /* released meanwhile */ }
      sleepMs(Math.min(1 + waited, 10));
    }
  }
  try {
    return fn();
  } finally {
    try {
      rmdirSync(lock);
    } catch { /* nothing to release */ }
  }
}

export function loadBun(path: string): Ffi {
  const ffi = createRequire(import.meta.url)("bun:ffi") as BunFfi;
  const table: Record<string, { args: string[]; returns: string }> = {};
  for (const [name, def] of Object.entries(functions)) {
    table[name] = { args: def.args.map(argType), returns: resultType(def.returns) };
  }
  const lib = withDlopenLock(() => ffi.dlopen(path, table));
  const { CString, read, toArrayBuffer, JSCallback } = ffi;
  const num = (p: Ptr): number => (p as unknown as number | null) ?? 0;
  return {
    runtime: "bun",
    path,
    sym: lib.symbols as unknown as Symbols,
    // Bun's JSCallback runs safely from any call: one table serves both.
    symSafe: lib.symbols as unknown as Symbols,
    NULL: 0 as unknown as Ptr,
    isNull: (p) => !p,
    cstring: (p) => (p ? new CString(num(p)).toString() : ""),
    text: (p, n) => new CString(num(p), 0, n).toString(),
    bytes: (p, n) => new Uint8Array(toArrayBuffer(num(p), 0, n)).slice(),
    write: (p, data) => new Uint8Array(toArrayBuffer(num(p), 0, data.length)).set(data),
    outPtr: (cell) => Number(cell[0]) as unknown as Ptr,
    ptrAt: (p, offset) => read.ptr(num(p), offset) as unknown as Ptr,
    address: (p) => BigInt(num(p)),
    addressOf: (buf) => BigInt(ffi.ptr(buf)),
    callback(kind, fn): NativeCallback {
      const def = callbacks[kind];
      const cb = new JSCallback(fn as (...args: never[]) => unknown, {
        args: def.args.map(argType),
        returns: resultType(def.returns),
      });
      return { ptr: (cb.ptr ?? 0) as unknown as Ptr, close: () => cb.close() };
    },
    commitAsync: wokenCommit(lib.symbols as unknown as Symbols),
  };
}
