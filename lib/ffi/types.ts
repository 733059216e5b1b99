// lib/ffi/types.ts: the runtime-neutral view of the native library that the rest of lib/
// programs against. The symbol signatures come from the generated table; the helpers hide
// how a runtime represents pointers (a number in Bun, an object in Deno). Nothing here
// touches a runtime.
import type { callbacks, functions } from "./symbols.generated.ts";

declare const ptrBrand: unique symbol;
/** An opaque native pointer; only the adapter that produced it knows what it is. */
export type Ptr = { readonly [ptrBrand]: "Ptr" };

/** The neutral argument and result types of functions.json. */
export type NeutralType = "i32" | "i64" | "f64" | "ptr" | "buffer" | "void";

type ArgOf<T> = T extends "i32" ? number
  : T extends "i64" ? number | bigint
  : T extends "f64" ? number
  : T extends "ptr" ? Ptr
  : T extends "buffer" ? ArrayBufferView | null
  : never;

type ResultOf<T> = T extends "void" ? void
  : T extends "i64" ? number | bigint
  : T extends "ptr" ? Ptr
  : number;

type ArgsOf<A extends readonly unknown[]> = { -readonly [K in keyof A]: ArgOf<A[K]> };

type Fn<D extends { readonly args: readonly unknown[]; readonly returns: unknown }> = (
  ...args: ArgsOf<D["args"]>
) => ResultOf<D["returns"]>;

/** The typed symbols of the library. */
export type Symbols = { readonly [K in keyof typeof functions]: Fn<(typeof functions)[K]> };

/** The JS signature of a callback kind (the arguments SQLite passes). */
export type CallbackFn<K extends keyof typeof callbacks> = Fn<(typeof callbacks)[K]>;

/** A native function pointer made from a JS function; close() after SQLite let it go. */
export interface NativeCallback {
  readonly ptr: Ptr;
  close(): void;
}

/** What a runtime adapter gives lib/: the symbols plus the pointer helpers. */
export interface Ffi {
  readonly runtime: "bun" | "deno";
  /** The file the library was loaded from. */
  readonly path: string;
  readonly sym: Symbols;
  /**
   * The same symbols, except that those which may call back into JS (marked "callback" in
   * functions.json) are never called through the runtime's fast path; used by connections
   * that have JS callbacks (see lib/ffi/deno.ts).
   */
  readonly symSafe: Symbols;
  /** The null pointer in this runtime's representation. */
  readonly NULL: Ptr;
  isNull(p: Ptr): boolean;
  /** A NUL-terminated UTF-8 string at p ("" for a null pointer). */
  cstring(p: Ptr): string;
  /** n bytes of UTF-8 at p, decoded. */
  text(p: Ptr, n: number): string;
  /** A copy of n bytes at p (the memory may change at the next step). */
  bytes(p: Ptr, n: number): Uint8Array;
  /** Copies data into native memory at p (which holds at least data.length bytes). */
  write(p: Ptr, data: Uint8Array): void;
  /** The pointer stored in an out-parameter cell (e.g. sqlite3 **ppDb). */
  outPtr(cell: BigUint64Array): Ptr;
  /** The pointer stored at p + offset (e.g. an element of sqlite3_value **argv). */
  ptrAt(p: Ptr, offset: number): Ptr;
  /** The address of p as a bigint (for pointer arithmetic such as a prepare tail). */
  address(p: Ptr): bigint;
  /** The address of a typed array's bytes; the array must not be resized afterwards. */
  addressOf(buf: ArrayBufferView): bigint;
  /** Makes a C function pointer of the given callback kind that calls fn. */
  callback<K extends keyof typeof callbacks>(kind: K, fn: CallbackFn<K>): NativeCallback;
  /**
   * Runs COMMIT on db off this thread (native/src/vfs/async.c) and resolves with its
   * result code; db must not be used until then, and mw_exec_wait(db) must come before
   * its close. Where no thread can run it, it runs here (the promise is then settled).
   * It may outlive a Worker terminated meanwhile: nothing it uses lives in JavaScript.
   */
  commitAsync(db: Ptr): Promise<number>;
}
