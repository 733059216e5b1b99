// lib/values.ts: moving values between JS and SQLite: binding parameters, reading
// columns and function arguments, setting function results. Owns the type mapping
// (integers, BigInt, blobs, empty strings and blobs that must never become NULL).
import { SQLITE_MISUSE, SQLITE_RANGE } from "./codes.ts";
import { SQLiteError } from "./error.ts";
import type { Ffi, Ptr } from "./ffi/index.ts";

/** A value SQLite stores. */
export type SQLValue = number | bigint | string | Uint8Array | null;
/** A value that can be bound to a parameter. */
export type BindValue = SQLValue | boolean | ArrayBufferView | ArrayBuffer | undefined;
/** Named parameters; keys carry their prefix ($x, :x, @x) or, in strict mode, may not. */
export type BindParams = Record<string, BindValue>;

/** SQLITE_TRANSIENT: SQLite copies the bytes during the call. */
const TRANSIENT = -1;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
// A non-empty buffer with length 0, so that "" binds as empty text and not as NULL.
const EMPTY_TEXT = new Uint8Array(1);
const encoder = new TextEncoder();
const MAX_EXACT = 2 ** 53;
const SCRATCH = new Uint8Array(3 * 1024);

export function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return (value as object).constructor?.name ?? "object";
  return typeof value;
}

function asBytes(v: ArrayBufferView | ArrayBuffer): Uint8Array {
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

/** Binds one value at 1-based index i; returns SQLite's result code. */
export function bindValue(f: Ffi, stmt: Ptr, i: number, v: unknown, name: string): number {
  const s = f.sym;
  switch (typeof v) {
    case "number":
      if (Number.isInteger(v)) {
        // `| 0` turns -0 into 0: Deno refuses -0 as an i32 ("expected integer").
        if (v >= -2147483648 && v <= 2147483647) return s.sqlite3_bind_int(stmt, i, v | 0);
        if (Number.isSafeInteger(v)) return s.sqlite3_bind_int64(stmt, i, v);
      }
      return s.sqlite3_bind_double(stmt, i, v);
    case "string": {
      if (v.length === 0) return s.sqlite3_bind_text(stmt, i, EMPTY_TEXT, 0, TRANSIENT);
      // Short strings are encoded into one reused buffer (SQLite copies them at once);
      // a UTF-16 unit takes at most 3 UTF-8 bytes, so the buffer is always big enough.
      if (v.length * 3 <= SCRATCH.length) {
        const { written } = encoder.encodeInto(v, SCRATCH);
        return s.sqlite3_bind_text(stmt, i, SCRATCH, written, TRANSIENT);
      }
      const bytes = encoder.encode(v);
      return s.sqlite3_bind_text(stmt, i, bytes, bytes.length, TRANSIENT);
    }
    case "bigint":
      if (v < INT64_MIN || v > INT64_MAX) {
        throw new RangeError(`parameter ${name}: ${v} does not fit in a 64-bit integer`);
      }
      return s.sqlite3_bind_int64(stmt, i, v);
    case "boolean":
      return s.sqlite3_bind_int(stmt, i, v ? 1 : 0);
    case "undefined":
      return s.sqlite3_bind_null(stmt, i);
    case "object":
      if (v === null) return s.sqlite3_bind_null(stmt, i);
      if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) {
        const bytes = asBytes(v);
        // A zero-length array may have no address: bind an empty blob explicitly.
        if (bytes.length === 0) return s.sqlite3_bind_zeroblob(stmt, i, 0);
        return s.sqlite3_bind_blob(stmt, i, bytes, bytes.length, TRANSIENT);
      }
  }
  throw new TypeError(
    `parameter ${name}: cannot bind a value of type ${describe(v)} ` +
      "(use number, bigint, string, boolean, null, Uint8Array)",
  );
}

/** Reads an integer result of the library (number or BigInt) as the caller wants it. */
export function int(v: number | bigint, safeIntegers: boolean): number | bigint {
  if (safeIntegers) return typeof v === "bigint" ? v : BigInt(v);
  return v; // a BigInt here is beyond 2^53: kept exact rather than rounded
}

/** Reads column i of the current row. */
export function readColumn(f: Ffi, stmt: Ptr, i: number, safeIntegers: boolean): SQLValue {
  const s = f.sym;
  switch (s.sqlite3_column_type(stmt, i)) {
    case 1: {
      // A double holds every integer below 2^53 exactly, and f64 is the cheapest result
      // in both runtimes (Deno returns 64-bit integers as BigInt): the int64 call is only
      // made for the integers beyond.
      const d = s.sqlite3_column_double(stmt, i);
      if (d > -MAX_EXACT && d < MAX_EXACT) return safeIntegers ? BigInt(d) : d;
      return int(s.sqlite3_column_int64(stmt, i), safeIntegers);
    }
    case 2:
      return s.sqlite3_column_double(stmt, i);
    case 3: {
      const p = s.sqlite3_column_text(stmt, i); // text before bytes: the documented order
      const n = s.sqlite3_column_bytes(stmt, i);
      return n === 0 ? "" : f.text(p, n);
    }
    case 4: {
      const p = s.sqlite3_column_blob(stmt, i);
      const n = s.sqlite3_column_bytes(stmt, i);
      return n === 0 ? new Uint8Array(0) : f.bytes(p, n); // copied: the next step reuses it
    }
    default:
      return null;
  }
}

/** Reads a function argument (an sqlite3_value*). */
export function readValue(f: Ffi, value: Ptr, safeIntegers: boolean): SQLValue {
  const s = f.sym;
  switch (s.sqlite3_value_type(value)) {
    case 1:
      return int(s.sqlite3_value_int64(value), safeIntegers);
    case 2:
      return s.sqlite3_value_double(value);
    case 3: {
      const p = s.sqlite3_value_text(value);
      const n = s.sqlite3_value_bytes(value);
      return n === 0 ? "" : f.text(p, n);
    }
    case 4: {
      const p = s.sqlite3_value_blob(value);
      const n = s.sqlite3_value_bytes(value);
      return n === 0 ? new Uint8Array(0) : f.bytes(p, n);
    }
    default:
      return null;
  }
}

/** Sets the result of a custom function; throws TypeError for a value it cannot return. */
export function setResult(f: Ffi, ctx: Ptr, v: unknown): void {
  const s = f.sym;
  switch (typeof v) {
    case "number":
      if (Number.isSafeInteger(v)) s.sqlite3_result_int64(ctx, v + 0); // + 0: no -0
      else s.sqlite3_result_double(ctx, v);
      return;
    case "bigint":
      if (v < INT64_MIN || v > INT64_MAX) throw new RangeError(`${v} does not fit in a 64-bit integer`);
      s.sqlite3_result_int64(ctx, v);
      return;
    case "string": {
      if (v.length === 0) return s.sqlite3_result_text(ctx, EMPTY_TEXT, 0, TRANSIENT);
      const bytes = encoder.encode(v);
      s.sqlite3_result_text(ctx, bytes, bytes.length, TRANSIENT);
      return;
    }
    case "boolean":
      s.sqlite3_result_int64(ctx, v ? 1 : 0);
      return;
    case "undefined":
      s.sqlite3_result_null(ctx);
      return;
    case "object":
      if (v === null) return s.sqlite3_result_null(ctx);
      if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) {
        const bytes = asBytes(v);
        if (bytes.length === 0) return s.sqlite3_result_zeroblob(ctx, 0);
        s.sqlite3_result_blob(ctx, bytes, bytes.length, TRANSIENT);
        return;
      }
  }
  throw new TypeError(`a custom function cannot return a value of type ${describe(v)}`);
}

/** NUL-terminated UTF-8 for a C string argument. */
export function cstr(s: string): Uint8Array {
  return encoder.encode(s + "\0");
}

export function misuse(message: string, sql?: string): SQLiteError {
  return new SQLiteError(message, SQLITE_MISUSE, sql);
}

export function rangeError(message: string, sql?: string): SQLiteError {
  return new SQLiteError(message, SQLITE_RANGE, sql);
}
