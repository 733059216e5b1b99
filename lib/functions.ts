// lib/functions.ts: custom SQL functions: db.function() and db.aggregate() (window
// functions too), their flags, reading their arguments, and carrying what they throw back
// to the statement that called them. Never steps, prepares or closes anything: the
// connection (see lib/internals.ts) keeps the callbacks alive and frees them at close().
import { SQLITE_OK } from "./codes.ts";
import { SQLITE_DETERMINISTIC, SQLITE_DIRECTONLY, SQLITE_INNOCUOUS, SQLITE_UTF8 } from "./constants.ts";
import { SQLiteError } from "./error.ts";
import type { Ptr } from "./ffi/index.ts";
import type { Internals } from "./internals.ts";
import { cstr, readValue, setResult, type SQLValue, type ValueMode } from "./values.ts";

/** Options of a custom scalar function. */
export interface FunctionOptions {
  /** Same arguments, same result (lets SQLite use it in indexes and optimize it). */
  deterministic?: boolean;
  /** Only callable from top-level SQL, not from views, triggers or schema. */
  directOnly?: boolean;
  /** Harmless when called from untrusted schema. */
  innocuous?: boolean;
  /** Any number of arguments (otherwise fn.length). */
  varargs?: boolean;
  /**
   * INTEGER arguments as bigint, and a bigint result beyond 64 bits a RangeError (as
   * bun:sqlite's option); default: the database's `safeIntegers`.
   */
  safeIntegers?: boolean;
}

/** An aggregate (or window) function for db.aggregate(). */
export interface AggregateOptions<S = unknown> extends FunctionOptions {
  /** The state each group starts from, or a function making it. */
  start?: S | (() => S);
  /** Folds one row's arguments into the state; returns the new state (undefined: the state stays). */
  step: (state: S, ...args: SQLValue[]) => S | void;
  /** Takes a row back out of the state (makes it a window function); undefined keeps the state. */
  inverse?: (state: S, ...args: SQLValue[]) => S | void;
  /** The value the group returns (default: the state). */
  result?: (state: S) => unknown;
}

type ScalarFn = (...args: SQLValue[]) => unknown;

function functionFlags(o: FunctionOptions): number {
  return SQLITE_UTF8 | (o.deterministic ? SQLITE_DETERMINISTIC : 0) | (o.directOnly ? SQLITE_DIRECTONLY : 0) |
    (o.innocuous ? SQLITE_INNOCUOUS : 0);
}

/**
 * The message of a value a custom function threw, as NUL-terminated UTF-8. Never throws:
 * an exception escaping a native callback would leave the statement stuck, and a thrown
 * value's message or toString() may itself throw or hold a NUL.
 */
function encodeMessage(e: unknown): Uint8Array {
  return new TextEncoder().encode(safeText(e).replaceAll("\0", " ") + "\0");
}

/** The text of a thrown value; never throws. */
export function safeText(e: unknown): string {
  try {
    const m = e instanceof Error ? e.message : String(e);
    if (typeof m === "string") return m;
  } catch { /* its message or toString() threw */ }
  return "a custom function threw a value that cannot be printed";
}

// How a function's arguments are read and its result set: the connection's rules, with
// its own safeIntegers where the options give one.
function modeOf(c: Internals, o: FunctionOptions): ValueMode {
  if (o.safeIntegers !== undefined && typeof o.safeIntegers !== "boolean") {
    throw new TypeError("sqlite-multiwriter: the safeIntegers option must be a boolean");
  }
  return o.safeIntegers === undefined ? c.mode : { ...c.mode, safe: o.safeIntegers };
}

function readArgs(c: Internals, mode: ValueMode, argc: number, argv: Ptr): SQLValue[] {
  const f = c.ffi;
  const args = new Array<SQLValue>(argc);
  for (let i = 0; i < argc; i++) args[i] = readValue(f, f.ptrAt(argv, i * 8), mode);
  return args;
}

// Runs a callback's body as SQLite calls it: close() and the like are refused meanwhile,
// and what it throws becomes SQLite's error, which the statement then throws as this
// very value to the caller.
function guard(c: Internals, ctx: Ptr, body: () => void): void {
  c.inCallback++;
  try {
    body();
  } catch (e) {
    c.pending = e;
    c.sym.sqlite3_result_error(ctx, encodeMessage(e), -1);
  } finally {
    c.inCallback--;
  }
}

/** db.function(): see Database.function (the options may come first or last). */
export function defineFunction(
  c: Internals,
  name: string,
  a: ScalarFn | FunctionOptions,
  b?: ScalarFn | FunctionOptions,
): void {
  const fn = typeof a === "function" ? a : b;
  const options = (typeof a === "function" ? b : a) ?? {};
  if (typeof fn !== "function") throw new TypeError("sqlite-multiwriter: function() takes a function");
  if (typeof options !== "object" || options === null) {
    throw new TypeError("sqlite-multiwriter: function() options must be an object");
  }
  const mode = modeOf(c, options);
  const db = c.handle();
  const zName = cstr(name, "the function name");
  const f = c.ffi;
  const cb = f.callback("scalar", (ctx, argc, argv) => {
    guard(c, ctx, () => setResult(f, ctx, fn(...readArgs(c, mode, argc, argv)), mode));
  });
  const nArg = options.varargs ? -1 : fn.length;
  const rc = c.sym.sqlite3_create_function_v2(
    db, zName, nArg, functionFlags(options), f.NULL, cb.ptr, f.NULL, f.NULL, f.NULL,
  );
  if (rc !== SQLITE_OK) {
    cb.close();
    throw c.error(rc);
  }
  c.callbacks.push(cb); // freed at close(): SQLite may call it until then
}

/** db.aggregate(): see Database.aggregate. */
export function defineAggregate<S>(c: Internals, name: string, options: AggregateOptions<S>): void {
  if (typeof options !== "object" || options === null || typeof options.step !== "function") {
    throw new TypeError("sqlite-multiwriter: aggregate() takes options with a step function");
  }
  for (const k of ["inverse", "result"] as const) {
    if (options[k] !== undefined && typeof options[k] !== "function") {
      throw new TypeError(`sqlite-multiwriter: aggregate() option "${k}" must be a function`);
    }
  }
  const mode = modeOf(c, options);
  const db = c.handle();
  const zName = cstr(name, "the function name");
  const f = c.ffi;
  const { step, inverse, result } = options;
  const start = options.start;
  // One state per group, found by the address of SQLite's per-group context (8 bytes
  // SQLite zeroes and frees itself; the address is all that is used).
  const states = new Map<bigint, { v: S }>();
  const initial = (): S => (typeof start === "function" ? (start as () => S)() : start as S);
  const stateOf = (ctx: Ptr, create: boolean): { key: bigint; state: { v: S } } | null => {
    const p = c.sym.sqlite3_aggregate_context(ctx, create ? 8 : 0);
    if (f.isNull(p)) return null;
    const key = f.address(p);
    let state = states.get(key);
    if (state === undefined) {
      state = { v: initial() };
      states.set(key, state);
    }
    return { key, state };
  };
  // A step (or inverse) that returns undefined keeps the state, as bun:sqlite does: one
  // that changes its state in place need not return it.
  const fold = (fn: (acc: S, ...args: SQLValue[]) => S | void) => (ctx: Ptr, argc: number, argv: Ptr): void =>
    guard(c, ctx, () => {
      const at = stateOf(ctx, true);
      if (at === null) throw new SQLiteError("out of memory", 7);
      const next = fn(at.state.v, ...readArgs(c, mode, argc, argv));
      if (next !== undefined) at.state.v = next;
    });
  const emit = (final: boolean) => (ctx: Ptr): void =>
    guard(c, ctx, () => {
      const at = stateOf(ctx, false);
      const v = at === null ? initial() : at.state.v;
      if (final && at !== null) states.delete(at.key);
      setResult(f, ctx, result ? result(v) : v, mode);
    });
  const cbs = [f.callback("scalar", fold(step)), f.callback("final", emit(true))];
  if (inverse) cbs.push(f.callback("final", emit(false)), f.callback("scalar", fold(inverse)));
  const nArg = options.varargs ? -1 : Math.max(0, step.length - 1);
  const rc = c.sym.sqlite3_create_window_function(
    db, zName, nArg, functionFlags(options), f.NULL, cbs[0].ptr, cbs[1].ptr,
    inverse ? cbs[2].ptr : f.NULL, inverse ? cbs[3].ptr : f.NULL, f.NULL,
  );
  if (rc !== SQLITE_OK) {
    for (const cb of cbs) cb.close();
    throw c.error(rc);
  }
  c.callbacks.push(...cbs);
}
