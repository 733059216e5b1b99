// lib/values.ts: moving values between JS and SQLite: binding parameters, reading
// columns and function arguments, setting function results. Owns the type mapping
// (integers, BigInt, blobs, empty strings and blobs that must never become NULL).
import { SQLITE_MISUSE, SQLITE_RANGE } from "./codes.ts";
import { SQLITE_UTF8 } from "./constants.ts";
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

// The intrinsic getters of typed arrays and DataView. A view's own `length` or
// `byteLength` may be a property or a subclass getter that lies; these read the engine's
// slots, so the length handed to C is always the bytes that exist.
const TypedArrayProto = Object.getPrototypeOf(Uint8Array.prototype) as object;
function getter(proto: object, name: string): (this: unknown) => unknown {
  const d = Object.getOwnPropertyDescriptor(proto, name);
  if (d?.get === undefined) throw new Error(`no intrinsic ${name} getter`);
  return d.get as (this: unknown) => unknown;
}
const taBuffer = getter(TypedArrayProto, "buffer");
const taOffset = getter(TypedArrayProto, "byteOffset");
const taLength = getter(TypedArrayProto, "byteLength");
const dvBuffer = getter(DataView.prototype, "buffer");
const dvOffset = getter(DataView.prototype, "byteOffset");
const dvLength = getter(DataView.prototype, "byteLength");
const abLength = getter(ArrayBuffer.prototype, "byteLength");
const sabLength = typeof SharedArrayBuffer === "function"
  ? getter(SharedArrayBuffer.prototype, "byteLength")
  : null;

/** SQLite's hard ceiling on one value (SQLITE_MAX_LENGTH); longer ones are SQLITE_TOOBIG. */
export const MAX_VALUE_BYTES = 2 ** 31 - 1;

/**
 * A plain Uint8Array over exactly the bytes of a view or buffer, with its offset and
 * length read once from the engine's own slots (never from properties the caller can
 * override). The result's `length` is then the truth.
 */
export function asBytes(v: ArrayBufferView | ArrayBuffer | SharedArrayBuffer): Uint8Array {
  if (ArrayBuffer.isView(v)) {
    const dv = v instanceof DataView;
    const buffer = (dv ? dvBuffer : taBuffer).call(v) as ArrayBuffer;
    const offset = (dv ? dvOffset : taOffset).call(v) as number;
    const length = (dv ? dvLength : taLength).call(v) as number;
    return new Uint8Array(buffer, offset, length);
  }
  if (v instanceof ArrayBuffer) return new Uint8Array(v, 0, abLength.call(v) as number);
  if (sabLength !== null && v instanceof SharedArrayBuffer) {
    return new Uint8Array(v, 0, sabLength.call(v) as number);
  }
  throw new TypeError(`expected bytes (a typed array, DataView or ArrayBuffer), got ${describe(v)}`);
}

function isBytes(v: object): v is ArrayBufferView | ArrayBuffer | SharedArrayBuffer {
  return ArrayBuffer.isView(v) || v instanceof ArrayBuffer ||
    (typeof SharedArrayBuffer === "function" && v instanceof SharedArrayBuffer);
}

/**
 * How a connection's face treats values where bun:sqlite and @db/sqlite differ. The npm
 * entry is bun:sqlite's (`bun: true`); the JSR entry's @db/sqlite face is not.
 */
export interface ValueMode {
  /** bun:sqlite's rules: -0 binds as a real, a BigInt out of range wraps unless safe. */
  readonly bun: boolean;
  /** Integers as BigInt (safeIntegers). */
  readonly safe: boolean;
  /** Integers beyond 2^53 as BigInt (otherwise rounded to a number, as bun:sqlite does). */
  readonly exact: boolean;
  /** @db/sqlite's parseJson: TEXT carrying SQLite's JSON subtype is returned parsed. */
  readonly json?: boolean;
  /** @db/sqlite's int64 off (disableInt64()): INTEGER columns read as a 32-bit int. */
  readonly int32?: boolean;
}

/** The subtype SQLite's JSON functions give their text results (sqlite3_value_subtype). */
const JSON_SUBTYPE = 74;
const INT32_MIN = -(2 ** 31);
const INT32_END = 2 ** 31;

/** Binds one value at 1-based index i; returns SQLite's result code. */
export function bindValue(f: Ffi, stmt: Ptr, i: number, v: unknown, name: string, mode: ValueMode): number {
  const s = f.sym;
  switch (typeof v) {
    case "number":
      // bun:sqlite binds -0 as the real -0 (its sign kept); bind_double takes it in both runtimes.
      if (mode.bun && Object.is(v, -0)) return s.sqlite3_bind_double(stmt, i, v);
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
      // The 64-bit call: a length of 2 GiB or more is SQLITE_TOOBIG, never truncated.
      const bytes = encoder.encode(v);
      return s.sqlite3_bind_text64(stmt, i, bytes, bytes.length, TRANSIENT, SQLITE_UTF8);
    }
    case "bigint":
      if (v < INT64_MIN || v > INT64_MAX) {
        if (!mode.bun) throw new RangeError(`parameter ${name}: ${v} does not fit in a 64-bit integer`);
        // bun:sqlite: out of range is an error with safeIntegers (or int64), else it wraps
        // to 64 bits as its int64 conversion does.
        if (mode.safe || mode.exact) throw new RangeError(`BigInt value '${v}' is out of range`);
        return s.sqlite3_bind_int64(stmt, i, BigInt.asIntN(64, v));
      }
      return s.sqlite3_bind_int64(stmt, i, v);
    case "boolean":
      return s.sqlite3_bind_int(stmt, i, v ? 1 : 0);
    case "undefined":
      return s.sqlite3_bind_null(stmt, i);
    case "object":
      if (v === null) return s.sqlite3_bind_null(stmt, i);
      if (isBytes(v)) {
        const bytes = asBytes(v);
        // A zero-length array may have no address: bind an empty blob explicitly.
        if (bytes.length === 0) return s.sqlite3_bind_zeroblob(stmt, i, 0);
        return s.sqlite3_bind_blob64(stmt, i, bytes, bytes.length, TRANSIENT);
      }
  }
  // bun:sqlite's words first (its users match on them), then which value it was.
  if (mode.bun) {
    throw new TypeError(
      "Binding expected string, TypedArray, boolean, number, bigint or null " +
        `(parameter ${name}: cannot bind a value of type ${describe(v)})`,
    );
  }
  throw new TypeError(
    `parameter ${name}: cannot bind a value of type ${describe(v)} ` +
      "(use number, bigint, string, boolean, null, Uint8Array)",
  );
}

/** Reads an integer result of the library (number or BigInt) as the mode wants it. */
export function int(v: number | bigint, mode: Pick<ValueMode, "safe" | "exact">): number | bigint {
  if (mode.safe) return typeof v === "bigint" ? v : BigInt(v);
  // A BigInt here is beyond 2^53: kept exact, or rounded to a number as bun:sqlite does.
  return mode.exact || typeof v === "number" ? v : Number(v);
}

/**
 * Reads column i of the current row. Under @db/sqlite's rules a JSON text (one with
 * SQLite's JSON subtype: json(), json_object(), ...) is parsed (kept as text where it does
 * not parse), and an INTEGER may be read as a 32-bit int (sqlite3_column_int's value).
 */
export function readColumn(f: Ffi, stmt: Ptr, i: number, mode: ValueMode): SQLValue {
  const s = f.sym;
  switch (s.sqlite3_column_type(stmt, i)) {
    case 1: {
      if (mode.int32) {
        const d = s.sqlite3_column_double(stmt, i);
        if (d >= INT32_MIN && d < INT32_END) return d;
        return Number(BigInt.asIntN(32, BigInt(s.sqlite3_column_int64(stmt, i))));
      }
      // A double holds every integer below 2^53 exactly, and f64 is the cheapest result
      // in both runtimes (Deno returns 64-bit integers as BigInt): the int64 call is only
      // made for the integers beyond, and only where they are wanted exact.
      const d = s.sqlite3_column_double(stmt, i);
      if (d > -MAX_EXACT && d < MAX_EXACT) return mode.safe ? BigInt(d) : d;
      if (!mode.safe && !mode.exact) return d; // rounded, as bun:sqlite reads them
      return int(s.sqlite3_column_int64(stmt, i), mode);
    }
    case 2:
      return s.sqlite3_column_double(stmt, i);
    case 3: {
      const p = s.sqlite3_column_text(stmt, i); // text before bytes: the documented order
      const n = s.sqlite3_column_bytes(stmt, i);
      const text = n === 0 ? "" : f.text(p, n);
      if (mode.json && s.sqlite3_value_subtype(s.sqlite3_column_value(stmt, i)) === JSON_SUBTYPE) {
        try {
          // Any JSON value; only the @db/sqlite face reads so, and its rows are typed by
          // the caller (all<T>(), get<T>()), not as SQLValue.
          return JSON.parse(text) as SQLValue;
        } catch { /* not JSON after all: the text */ }
      }
      return text;
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
export function readValue(f: Ffi, value: Ptr, mode: Pick<ValueMode, "safe" | "exact">): SQLValue {
  const s = f.sym;
  switch (s.sqlite3_value_type(value)) {
    case 1:
      return int(s.sqlite3_value_int64(value), mode);
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

/**
 * Sets the result of a custom function; throws TypeError for a value it cannot return. A
 * bigint beyond 64 bits is a RangeError, except under bun:sqlite's rules without
 * safeIntegers (or int64), where it wraps to 64 bits as a bound one does.
 */
export function setResult(f: Ffi, ctx: Ptr, v: unknown, mode: ValueMode): void {
  const s = f.sym;
  switch (typeof v) {
    case "number":
      if (Number.isSafeInteger(v)) s.sqlite3_result_int64(ctx, v + 0); // + 0: no -0
      else s.sqlite3_result_double(ctx, v);
      return;
    case "bigint":
      if (v < INT64_MIN || v > INT64_MAX) {
        if (!mode.bun) throw new RangeError(`${v} does not fit in a 64-bit integer`);
        if (mode.safe || mode.exact) throw new RangeError(`BigInt value '${v}' is out of range`);
        s.sqlite3_result_int64(ctx, BigInt.asIntN(64, v));
        return;
      }
      s.sqlite3_result_int64(ctx, v);
      return;
    case "string": {
      if (v.length === 0) return s.sqlite3_result_text(ctx, EMPTY_TEXT, 0, TRANSIENT);
      const bytes = encoder.encode(v);
      s.sqlite3_result_text64(ctx, bytes, bytes.length, TRANSIENT, SQLITE_UTF8);
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
      if (isBytes(v)) {
        const bytes = asBytes(v);
        if (bytes.length === 0) return s.sqlite3_result_zeroblob(ctx, 0);
        s.sqlite3_result_blob64(ctx, bytes, bytes.length, TRANSIENT);
        return;
      }
  }
  throw new TypeError(`a custom function cannot return a value of type ${describe(v)}`);
}

/**
 * NUL-terminated UTF-8 for a C string argument. A NUL inside would silently cut the
 * string in C (a path would lose its `?vfs=multiwriter`, a name its tail): refused.
 */
export function cstr(s: string, what = "a string passed to SQLite"): Uint8Array {
  if (typeof s !== "string") throw new TypeError(`sqlite-multiwriter: ${what} must be a string, got ${describe(s)}`);
  if (s.includes("\0")) throw new TypeError(`sqlite-multiwriter: ${what} contains a NUL character`);
  return encoder.encode(s + "\0");
}

export function misuse(message: string, sql?: string): SQLiteError {
  return new SQLiteError(message, SQLITE_MISUSE, sql);
}

export function rangeError(message: string, sql?: string): SQLiteError {
  return new SQLiteError(message, SQLITE_RANGE, sql);
}
