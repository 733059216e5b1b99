// lib/ffi/deno.ts: the Deno.dlopen adapter. Translates the neutral symbol table for
// Deno.dlopen and implements the pointer helpers with Deno's pointer objects. It is the
// only file that touches Deno's FFI; it never runs under another runtime.
import { callbacks, functions } from "./symbols.generated.ts";
import type { Ffi, NativeCallback, NeutralType, Ptr, Symbols } from "./types.ts";

// The few parts of Deno's FFI used here, declared minimally so that lib/ type-checks
// without Deno's own declarations (and does not clash with them under deno check).
type DenoPointer = object | null;
interface DenoFfi {
  dlopen(
    path: string,
    symbols: Record<
      string,
      { name?: string; parameters: string[]; result: string | { struct: string[] }; nonblocking?: boolean }
    >,
  ): { symbols: Record<string, (...args: unknown[]) => unknown> };
  UnsafePointer: {
    create(value: bigint): DenoPointer;
    of(view: ArrayBufferView): DenoPointer;
    value(p: DenoPointer): bigint | number;
  };
  UnsafePointerView: {
    new (p: object): { getPointer(offset?: number): DenoPointer };
    getCString(p: object, offset?: number): string;
    getArrayBuffer(p: object, length: number, offset?: number): ArrayBuffer;
  };
  UnsafeCallback: new (
    def: { parameters: string[]; result: string },
    fn: (...args: never[]) => unknown,
  ) => { pointer: DenoPointer; close(): void };
}

function nativeType(t: NeutralType): string {
  return t === "ptr" ? "pointer" : t;
}

const decoder = new TextDecoder();
const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);

function narrow(v: bigint | number): number | bigint {
  if (typeof v === "number") return v;
  return v <= MAX_EXACT && v >= -MAX_EXACT ? Number(v) : v;
}

// Deno closes a Worker's libraries when the Worker ends; when that was the last handle the
// library is unmapped while the engine's background threads (and a connection the Worker
// left open) still run its code: the process crashes. Opening it once more through the C
// loader with RTLD_NODELETE keeps it mapped for the life of the process. Best effort: where
// no C loader is found (Windows) nothing is pinned.
const LOADERS: Record<string, { names: string[]; flags: number }> = {
  // RTLD_NOW | RTLD_NODELETE (glibc and musl: 0x1000; macOS: 0x80).
  linux: { names: ["libc.so.6", "libc.so", "libdl.so.2"], flags: 0x2 | 0x1000 },
  darwin: { names: ["/usr/lib/libSystem.B.dylib"], flags: 0x2 | 0x80 },
};
let pinned = false;

function pinLibrary(D: DenoFfi, path: string): void {
  if (pinned) return;
  const os = (globalThis as unknown as { Deno: { build: { os: string } } }).Deno.build.os;
  const loader = LOADERS[os];
  if (loader === undefined) return;
  for (const name of loader.names) {
    try {
      const libc = D.dlopen(name, { dlopen: { parameters: ["buffer", "i32"], result: "pointer" } });
      try {
        const fn = libc.symbols.dlopen as (file: Uint8Array, flags: number) => object | null;
        // The handle is never closed: that is the point.
        if (fn(new TextEncoder().encode(path + "\0"), loader.flags) !== null) pinned = true;
      } finally {
        (libc as unknown as { close(): void }).close();
      }
      return;
    } catch { /* try the next name */ }
  }
}

export function loadDeno(path: string): Ffi {
  const D = (globalThis as unknown as { Deno: DenoFfi }).Deno;
  const table: Record<
    string,
    { name?: string; parameters: string[]; result: string | { struct: string[] }; nonblocking?: boolean }
  > = {};
  const slow: string[] = [];
  for (const [name, def] of Object.entries(functions)) {
    table[name] = { parameters: def.args.map(nativeType), result: nativeType(def.returns) };
    if ("callback" in def && def.callback === true && def.returns === "i32") {
      // V8 aborts the process when a garbage collection inside a JS callback deoptimizes
      // the frame of a fast API call that returns a value, and Deno fast-calls every
      // symbol whose types allow it. A struct result is never fast-called: the same C
      // function, declared as returning struct { int32_t }, which every supported ABI
      // returns exactly as an int (in eax / w0 / rax).
      table[`${name}$slow`] = { name, parameters: def.args.map(nativeType), result: { struct: ["i32"] } };
      slow.push(name);
    }
  }
  // commitAsync: mw_commit_tracked as a nonblocking call (Deno runs it on a thread of its
  // own and resolves a promise here). The call outlives a Worker terminated meanwhile, whose
  // memory Deno frees under it: it takes no buffer (the SQL text is the engine's).
  table["mw_commit_tracked$nb"] = { name: "mw_commit_tracked", parameters: ["pointer"], result: "i32", nonblocking: true };
  const lib = D.dlopen(path, table);
  pinLibrary(D, path);
  // Deno returns every 64-bit result as a BigInt; the neutral contract is a number when
  // it is exact (as Bun's i64_fast does), so those few symbols get a narrowing wrapper.
  const symbols: Record<string, unknown> = { ...lib.symbols };
  for (const [name, def] of Object.entries(functions)) {
    if (def.returns !== "i64") continue;
    const raw = lib.symbols[name] as (a?: unknown, b?: unknown) => bigint | number;
    symbols[name] = def.args.length === 1
      ? (a: unknown) => narrow(raw(a))
      : def.args.length === 2
      ? (a: unknown, b: unknown) => narrow(raw(a, b))
      : (...args: unknown[]) => narrow((raw as (...a: unknown[]) => bigint | number)(...args));
  }
  const nonblocking = lib.symbols["mw_commit_tracked$nb"] as (db: unknown) => Promise<number>;
  delete symbols["mw_commit_tracked$nb"];
  const safe: Record<string, unknown> = { ...symbols };
  for (const name of slow) {
    const raw = lib.symbols[`${name}$slow`] as (...a: unknown[]) => Uint8Array;
    delete symbols[`${name}$slow`];
    delete safe[`${name}$slow`];
    safe[name] = (...args: unknown[]): number => {
      const r = raw(...args); // the int's 4 bytes, little-endian on every supported CPU
      return r[0] | (r[1] << 8) | (r[2] << 16) | (r[3] << 24);
    };
  }
  const { UnsafePointer, UnsafePointerView, UnsafeCallback } = D;
  const obj = (p: Ptr): object => p as unknown as object;
  const view = (p: Ptr, n: number): ArrayBuffer => UnsafePointerView.getArrayBuffer(obj(p), n);
  return {
    runtime: "deno",
    path,
    sym: symbols as unknown as Symbols,
    symSafe: safe as unknown as Symbols,
    NULL: null as unknown as Ptr,
    isNull: (p) => p === null,
    cstring: (p) => (p === null ? "" : UnsafePointerView.getCString(obj(p))),
    text: (p, n) => {
      // getCString is native and fast; it is the whole text when it has n characters
      // (then every byte was ASCII and none was NUL). Otherwise decode the n bytes.
      const s = UnsafePointerView.getCString(obj(p));
      return s.length === n ? s : decoder.decode(new Uint8Array(view(p, n)));
    },
    bytes: (p, n) => new Uint8Array(view(p, n)).slice(),
    write: (p, data) => new Uint8Array(view(p, data.length)).set(data),
    outPtr: (cell) => UnsafePointer.create(cell[0]) as unknown as Ptr,
    ptrAt: (p, offset) => new UnsafePointerView(obj(p)).getPointer(offset) as unknown as Ptr,
    address: (p) => BigInt(UnsafePointer.value(p as unknown as DenoPointer)),
    addressOf: (buf) => BigInt(UnsafePointer.value(UnsafePointer.of(buf))),
    callback(kind, fn): NativeCallback {
      const def = callbacks[kind];
      const cb = new UnsafeCallback(
        { parameters: def.args.map(nativeType), result: nativeType(def.returns) },
        fn as (...args: never[]) => unknown,
      );
      return { ptr: cb.pointer as unknown as Ptr, close: () => cb.close() };
    },
    commitAsync: (db) => nonblocking(db),
  };
}
