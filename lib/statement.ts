// lib/statement.ts: a prepared statement. Binds parameters (positional or named), steps,
// reads rows, and always resets after use so that no read transaction (and no engine
// snapshot) stays open behind the caller's back.
import { SQLITE_DONE, SQLITE_OK, SQLITE_ROW } from "./codes.ts";
import type { Database } from "./database.ts";
import type { Ffi, Ptr } from "./ffi/index.ts";
import type { Symbols } from "./ffi/types.ts";
import {
  type BindParams,
  type BindValue,
  bindValue,
  int,
  misuse,
  rangeError,
  readColumn,
  type SQLValue,
  type ValueMode,
} from "./values.ts";

/** What `run()` returns. */
export interface RunResult {
  /** Rows changed by the statement (INSERT, UPDATE, DELETE). */
  changes: number;
  /** The rowid of the last row inserted on the connection. */
  lastInsertRowid: number | bigint;
}

/** The parameters a statement method takes: values in order, one array, or one object of names. */
export type Params = BindValue[] | [BindValue[]] | [BindParams];

/** The database side a statement needs (implemented by Database). */
export interface Connection {
  readonly ffi: Ffi;
  /** The symbols to call: ffi.symSafe once the connection has JS callbacks, else ffi.sym. */
  readonly sym: Symbols;
  /** The Database object (what stmt.database returns). */
  readonly database: Database;
  readonly strict: boolean;
  readonly safeIntegers: boolean;
  /** The npm entry: bun:sqlite's rules where it and @db/sqlite differ. */
  readonly bun: boolean;
  /** Integers beyond 2^53 read as BigInt when not safeIntegers (int64, or the JSR face). */
  readonly exact: boolean;
  /** The open handle; throws when the database is closed. */
  handle(): Ptr;
  /** The error for a failed call (SQLite's message, or a JS error thrown by a custom function). */
  error(rc: number, sql?: string): Error;
  forget(stmt: Statement<object>): void;
  /**
   * After step() of statement h failed with rc while the connection was in autocommit:
   * true when it was a lost commit (SQLITE_BUSY_SNAPSHOT) that may be run again now (it
   * has slept the backoff); false to report rc. Throws at once when running again cannot
   * succeed (another statement of this connection holds the old snapshot).
   */
  retryLost(h: Ptr, rc: number, attempt: number, since: number): boolean;
}

// A VACUUM statement (after blanks and comments). Its INTO output must be created by stock
// SQLite, not the engine: SQLite refuses an output that is not empty, and an engine open
// would make a database of it first. Around its steps the engine is told so
// (mw_plain_output; docs/limits.md).
const VACUUM = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*vacuum\b/i;
/** @internal True for the text of a VACUUM statement. */
export function isVacuum(sql: string): boolean {
  return VACUUM.test(sql);
}

/** @internal Steps h once; a VACUUM statement's INTO output is opened by stock SQLite. */
export function stepStatement(s: Symbols, h: Ptr, vacuum: boolean): number {
  if (!vacuum) return s.sqlite3_step(h);
  s.mw_plain_output(1);
  try {
    return s.sqlite3_step(h);
  } finally {
    s.mw_plain_output(0);
  }
}

function isNamed(v: unknown): v is BindParams {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

const NOT_LOADED = -1;
/** A key that is an array index ("0", "1", ...): bun:sqlite binds it by position. */
const INDEX_KEY = /^(0|[1-9][0-9]*)$/;

// The prototype of the rows of as(Class), checked as bun:sqlite checks it (its words).
function rowPrototype(Class: unknown): object {
  if (typeof Class !== "function" && (typeof Class !== "object" || Class === null)) {
    throw new TypeError("Expected class to be a constructor or undefined");
  }
  if (!isConstructor(Class)) throw new TypeError("Expected a constructor");
  const proto: unknown = (Class as { prototype?: unknown }).prototype;
  if (proto === undefined) throw new TypeError("Expected constructor to have a prototype");
  if ((typeof proto !== "object" && typeof proto !== "function") || proto === null) {
    throw new TypeError("Expected a constructor prototype to be an object");
  }
  return proto;
}

// True for what `new` accepts (a class, a plain function, a bound one), without calling it:
// Reflect.construct only checks its newTarget here, then constructs a String.
function isConstructor(v: unknown): boolean {
  if (typeof v !== "function") return false;
  try {
    Reflect.construct(String, [], v);
    return true;
  } catch {
    return false;
  }
}

/**
 * A prepared statement, made by `db.query(sql)` (cached) or `db.prepare(sql)`. Rows are
 * objects keyed by column name (typed by Row), or arrays from values().
 *
 * @example
 * ```ts
 * const byId = db.query<{ name: string }>("SELECT name FROM users WHERE id = ?");
 * byId.get(1)?.name;
 * for (const row of byId.iterate(2)) console.log(row.name);
 * ```
 */
export class Statement<Row extends object = Record<string, SQLValue>> {
  readonly #c: Connection;
  readonly #f: Ffi;
  #h: Ptr | null;
  readonly #sql: string;
  readonly #vacuum: boolean;
  #safe: boolean;
  #mode: ValueMode;
  #ncols = NOT_LOADED;
  #names: string[] = [];
  #protoColumn = false;
  // The prototype of the rows (as(Class)); null: plain objects.
  #rowProto: object | null = null;
  readonly #nparams: number;
  #byName: Map<string, number> | null = null;
  // Bumped at each execution, so that an iterator notices when its statement was re-run.
  #generation = 0;
  #active = false;
  // True while SQLite runs this statement: a custom function that uses the same statement
  // (or finalizes it) would re-enter a running VM, so that is refused.
  #busy = false;
  // True while parameters are read and bound: a getter or a Proxy may finalize the
  // statement (or close the database) then, as bun:sqlite allows; the handle is kept here
  // until the bind loop is done with it, and the call then throws "Statement has finalized".
  #binding = false;
  #finalizedWhileBinding: Ptr | null = null;

  /** @internal Made by Database.prepare()/query(). */
  constructor(connection: Connection, handle: Ptr, sql: string) {
    this.#c = connection;
    this.#f = connection.ffi;
    this.#h = handle;
    this.#sql = sql;
    this.#vacuum = isVacuum(sql);
    this.#safe = connection.safeIntegers;
    this.#mode = { bun: connection.bun, safe: this.#safe, exact: connection.exact };
    this.#nparams = this.#c.sym.sqlite3_bind_parameter_count(handle);
  }

  #handle(): Ptr {
    if (this.#h === null) {
      this.#c.handle(); // a closed database says so first
      throw misuse("Statement has finalized", this.#sql); // bun:sqlite's words
    }
    return this.#h;
  }

  /** The SQL text the statement was prepared from. */
  get source(): string {
    return this.#sql;
  }

  /** The SQL with the current parameter values in place. */
  get expandedSql(): string {
    const p = this.#c.sym.sqlite3_expanded_sql(this.#handle());
    if (this.#f.isNull(p)) return this.#sql;
    try {
      return this.#f.cstring(p);
    } finally {
      this.#c.sym.sqlite3_free(p);
    }
  }

  /** Number of parameters the SQL has. */
  get paramsCount(): number {
    this.#handle();
    return this.#nparams;
  }

  /** Column names of the result. */
  get columnNames(): string[] {
    this.#columns(this.#handle());
    return [...this.#names];
  }

  /** Declared types of the result columns (null for expressions). */
  get declaredTypes(): (string | null)[] {
    const h = this.#handle();
    const n = this.#c.sym.sqlite3_column_count(h);
    const out: (string | null)[] = [];
    for (let i = 0; i < n; i++) {
      const p = this.#c.sym.sqlite3_column_decltype(h, i);
      out.push(this.#f.isNull(p) ? null : this.#f.cstring(p));
    }
    return out;
  }

  /**
   * The native statement handle (SQLite's `sqlite3_stmt *`, as this runtime's FFI gives it),
   * for FFI calls of your own; opaque, and invalid once the statement is finalized.
   */
  get native(): unknown {
    return this.#handle();
  }

  /** The database the statement belongs to. */
  get database(): Database {
    return this.#c.database;
  }

  /** True when the statement returns rows (it has result columns). */
  get reader(): boolean {
    return this.#c.sym.sqlite3_column_count(this.#handle()) > 0;
  }

  /**
   * The storage class of each column of the first row ("INTEGER", "FLOAT", "TEXT",
   * "BLOB", "NULL"), found by running the statement to its first row with the parameters
   * bound last; null for each column when there is no row. Only for statements that do
   * not write.
   */
  get columnTypes(): (string | null)[] {
    const h = this.#handle();
    const s = this.#c.sym;
    if (s.sqlite3_stmt_readonly(h) === 0) {
      // bun:sqlite's words: columnTypes runs the statement to its first row, which must not write.
      throw misuse("columnTypes is not available for non-read-only statements (INSERT, UPDATE, DELETE, etc.)", this.#sql);
    }
    this.#enter();
    try {
      if (this.#active) {
        s.sqlite3_reset(h);
        this.#active = false;
        this.#generation++;
      }
      const n = s.sqlite3_column_count(h);
      const rc = s.sqlite3_step(h);
      const names = [null, "INTEGER", "FLOAT", "TEXT", "BLOB", "NULL"];
      // No row: bun:sqlite says "NULL" for each column (the @db/sqlite face has no columnTypes).
      const none = this.#c.bun ? "NULL" : null;
      const out: (string | null)[] = [];
      for (let i = 0; i < n; i++) out.push(rc === SQLITE_ROW ? names[s.sqlite3_column_type(h, i)] ?? null : none);
      if (rc !== SQLITE_ROW && rc !== SQLITE_DONE) throw this.#fail(h, rc);
      s.sqlite3_reset(h);
      return out;
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Rows become instances of Class (made without calling its constructor, the columns
   * set as own properties), so its methods and getters work on them; `as(undefined)` makes
   * them plain objects again. Anything but a constructor with an object prototype is a
   * TypeError (bun:sqlite's words).
   *
   * @example
   * ```ts
   * class User { name = ""; get upper() { return this.name.toUpperCase(); } }
   * db.query("SELECT name FROM users").as(User).get()?.upper;
   * ```
   */
  as<T extends object>(Class: (new (...args: never[]) => T) | undefined): Statement<T> {
    this.#rowProto = Class === undefined ? null : rowPrototype(Class);
    return this as unknown as Statement<T>;
  }

  /** True when the statement does not write. */
  get readonly(): boolean {
    return this.#c.sym.sqlite3_stmt_readonly(this.#handle()) !== 0;
  }

  /** True after finalize() or the database's close(). */
  get finalized(): boolean {
    return this.#h === null;
  }

  /** True after finalize() or the database's close() (the bun:sqlite name). */
  get isFinalized(): boolean {
    return this.#h === null;
  }

  /** Read integers of this statement as BigInt (true) or numbers (false). */
  safeIntegers(on = true): this {
    this.#safe = on;
    this.#mode = { ...this.#mode, safe: on };
    return this;
  }

  /** What JSON.stringify shows of the statement (as bun:sqlite's toJSON). */
  toJSON(): { sql: string; isFinalized: boolean; paramsCount: number; columnNames: string[] } {
    const h = this.#h;
    return {
      sql: this.toString(),
      isFinalized: h === null,
      paramsCount: h === null ? 0 : this.#nparams,
      columnNames: h === null ? [] : this.columnNames,
    };
  }

  #enter(): void {
    if (this.#busy) {
      throw misuse("the statement is running (used again from inside a custom function)", this.#sql);
    }
    this.#busy = true;
  }

  #columns(h: Ptr): number {
    const n = this.#c.sym.sqlite3_column_count(h);
    if (n !== this.#ncols) {
      // The schema may have changed under SELECT *: names are read again.
      const names: string[] = [];
      for (let i = 0; i < n; i++) names.push(this.#f.cstring(this.#c.sym.sqlite3_column_name(h, i)));
      this.#names = names;
      this.#protoColumn = names.includes("__proto__");
      this.#ncols = n;
    }
    return n;
  }

  #paramNames(h: Ptr): Map<string, number> {
    if (this.#byName === null) {
      const map = new Map<string, number>();
      for (let i = 1; i <= this.#nparams; i++) {
        const p = this.#c.sym.sqlite3_bind_parameter_name(h, i);
        if (this.#f.isNull(p)) continue; // a bare ?
        map.set(this.#f.cstring(p), i);
      }
      this.#byName = map;
    }
    return this.#byName;
  }

  // Runs bind (reading the caller's values, which may run their getters) on h. A getter
  // that finalized the statement or closed the database left the handle to be finalized
  // here, once the loop is done with it: the call then throws as a finalized one does.
  #bindGuarded(bind: () => void): void {
    this.#binding = true;
    try {
      bind();
    } finally {
      this.#binding = false;
      const dead = this.#finalizedWhileBinding;
      if (dead !== null) {
        this.#finalizedWhileBinding = null;
        this.#c.sym.sqlite3_finalize(dead);
      }
    }
    this.#handle(); // throws when a getter finalized it (or closed the database)
  }

  // Resets (when a previous run was left open), binds, and returns the handle.
  #start(params: unknown[]): Ptr {
    const h = this.#handle();
    const s = this.#c.sym;
    this.#generation++;
    if (this.#active) {
      s.sqlite3_reset(h);
      this.#active = false;
    }
    // bun:sqlite: a call without parameters runs with the values bound last (those given
    // to prepare(sql, params) or to the previous call; NULL when none were).
    if (params.length === 0 && this.#c.bun) return h;
    let values: unknown[] = params;
    if (params.length === 1) {
      const only = params[0];
      if (Array.isArray(only)) values = only;
      else if (isNamed(only)) {
        this.#bindGuarded(() => this.#bindNamed(h, only));
        return h;
      }
    }
    if (values.length !== this.#nparams) {
      throw rangeError(
        this.#c.bun
          ? `SQLite query expected ${this.#nparams} values, received ${values.length}` // bun:sqlite's words
          : `expected ${this.#nparams} parameter${this.#nparams === 1 ? "" : "s"}, got ${values.length}`,
        this.#sql,
      );
    }
    this.#bindGuarded(() => {
      for (let i = 0; i < values.length; i++) {
        const rc = bindValue(this.#f, h, i + 1, values[i], `#${i + 1}`, this.#mode);
        if (rc !== SQLITE_OK) throw this.#c.error(rc, this.#sql);
      }
    });
    return h;
  }

  #bindNamed(h: Ptr, params: BindParams): void {
    const names = this.#paramNames(h);
    const strict = this.#c.strict;
    const seen = strict ? new Set<number>() : null;
    if (!strict) this.#c.sym.sqlite3_clear_bindings(h); // names not given bind NULL
    for (const key of Object.keys(params)) {
      let index = names.get(key);
      if (index === undefined) {
        // A bare name finds its prefixed parameter (as @db/sqlite and better-sqlite3 allow).
        index = names.get("$" + key) ?? names.get(":" + key) ?? names.get("@" + key);
      }
      if (index === undefined && this.#c.bun && INDEX_KEY.test(key)) {
        // bun:sqlite: an integer key n binds parameter n + 1 ({ 0: a, 1: b } fills ?1, ?2).
        const n = Number(key) + 1;
        if (n <= this.#nparams) index = n;
      }
      if (index === undefined) {
        // bun:sqlite ignores a key that names no parameter; the @db/sqlite face refuses it.
        if (this.#c.bun) continue;
        throw rangeError(`unknown parameter "${key}"`, this.#sql);
      }
      seen?.add(index);
      const rc = bindValue(this.#f, h, index, params[key], `"${key}"`, this.#mode);
      if (rc !== SQLITE_OK) throw this.#c.error(rc, this.#sql);
    }
    if (seen !== null && seen.size !== this.#nparams) {
      if (this.#c.bun) {
        // bun:sqlite names the first missing parameter as strict mode lets it be given:
        // "x" for $x, :x and @x; "?2" for ?2 and for the second bare ?.
        for (let i = 1; i <= this.#nparams; i++) {
          if (seen.has(i)) continue;
          const p = this.#c.sym.sqlite3_bind_parameter_name(h, i);
          const name = this.#f.isNull(p) ? `?${i}` : this.#f.cstring(p);
          throw rangeError(`Missing parameter "${/^[$:@]/.test(name) ? name.slice(1) : name}"`, this.#sql);
        }
      }
      for (const [name, i] of names) {
        if (!seen.has(i)) throw rangeError(`missing parameter "${name}"`, this.#sql);
      }
      throw rangeError(`expected ${this.#nparams} parameters, got ${seen.size}`, this.#sql);
    }
  }

  #fail(h: Ptr, rc: number): Error {
    const err = this.#c.error(rc, this.#sql);
    this.#c.sym.sqlite3_reset(h);
    this.#active = false;
    return err;
  }

  #row(h: Ptr, n: number): Row {
    const row: Record<string, SQLValue> = this.#rowProto === null ? {} : Object.create(this.#rowProto);
    const names = this.#names;
    if (this.#protoColumn || this.#rowProto !== null) {
      // A column named __proto__ must be a plain property, never the row's prototype; and
      // on an instance of a class, a column is an own property even where the class has a
      // setter or getter of that name.
      for (let i = 0; i < n; i++) {
        Object.defineProperty(row, names[i], {
          value: readColumn(this.#f, h, i, this.#mode),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return row as Row;
    }
    for (let i = 0; i < n; i++) row[names[i]] = readColumn(this.#f, h, i, this.#mode);
    return row as Row;
  }

  #array(h: Ptr, n: number): SQLValue[] {
    const out = new Array<SQLValue>(n);
    for (let i = 0; i < n; i++) out[i] = readColumn(this.#f, h, i, this.#mode);
    return out;
  }

  // Steps h to its end, handing each row to onRow. A statement outside an explicit
  // transaction whose commit lost to another writer (SQLITE_BUSY_SNAPSHOT; SQLite rolled it
  // back and is in autocommit again) is run again, as the busy handler of stock SQLite would
  // wait, within the busy timeout (Connection.retryLost decides). onRetry forgets the rows
  // of the attempt that lost.
  #drive(h: Ptr, onRow: (h: Ptr) => void, onRetry: () => void): void {
    const s = this.#c.sym;
    const db = this.#c.handle();
    const since = Date.now();
    for (let attempt = 1;; attempt++) {
      const autocommit = s.sqlite3_get_autocommit(db) !== 0;
      let rc: number;
      while ((rc = stepStatement(s, h, this.#vacuum)) === SQLITE_ROW) onRow(h);
      if (rc === SQLITE_DONE) {
        s.sqlite3_reset(h);
        return;
      }
      if (autocommit && this.#c.retryLost(h, rc, attempt, since)) {
        s.sqlite3_reset(h); // the bindings stay
        onRetry();
        continue;
      }
      throw this.#fail(h, rc);
    }
  }

  #run(params: Params): RunResult {
    const h = this.#start(params);
    const s = this.#c.sym;
    const db = this.#c.handle();
    // changes() keeps the count of the last INSERT/UPDATE/DELETE: a statement that changed
    // no row (a SELECT, a CREATE, a DELETE of nothing) reports 0, as bun:sqlite does.
    const before = s.sqlite3_total_changes64(db);
    this.#drive(h, () => {}, () => {});
    const wrote = s.sqlite3_total_changes64(db) !== before;
    return {
      changes: wrote ? Number(s.sqlite3_changes64(db)) : 0,
      lastInsertRowid: int(s.sqlite3_last_insert_rowid(db), this.#mode),
    };
  }

  #all(params: Params): Row[] {
    const h = this.#start(params);
    const rows: Row[] = [];
    let n = -1; // read after the first step: a re-prepare after a schema change may alter it
    this.#drive(h, (h) => {
      if (n < 0) n = this.#columns(h);
      rows.push(this.#row(h, n));
    }, () => {
      rows.length = 0;
    });
    return rows;
  }

  // One row for get()/value(). A statement that writes (INSERT ... RETURNING) runs to its
  // end, so that its commit happens here and a lost one is retried or reported.
  #first<T>(params: Params, read: (h: Ptr, n: number) => T): T | undefined {
    const h = this.#start(params);
    const s = this.#c.sym;
    if (s.sqlite3_stmt_readonly(h) === 0) {
      let first: T | undefined;
      this.#drive(h, (h) => {
        if (first === undefined) first = read(h, this.#columns(h));
      }, () => {
        first = undefined;
      });
      return first;
    }
    const rc = s.sqlite3_step(h);
    if (rc === SQLITE_ROW) {
      const row = read(h, this.#columns(h));
      s.sqlite3_reset(h);
      return row;
    }
    if (rc !== SQLITE_DONE) throw this.#fail(h, rc);
    s.sqlite3_reset(h);
    return undefined;
  }

  #get(params: Params): Row | null {
    return this.#first(params, (h, n) => this.#row(h, n)) ?? null;
  }

  #values(params: Params): SQLValue[][] {
    const h = this.#start(params);
    const rows: SQLValue[][] = [];
    let n = -1;
    this.#drive(h, (h) => {
      if (n < 0) n = this.#columns(h);
      rows.push(this.#array(h, n));
    }, () => {
      rows.length = 0;
    });
    return rows;
  }

  #value(params: Params): SQLValue[] | undefined {
    return this.#first(params, (h, n) => this.#array(h, n));
  }

  /** Runs the statement to completion; returns the changes and the last rowid. */
  run(...params: Params): RunResult {
    this.#enter();
    try {
      return this.#run(params);
    } finally {
      this.#busy = false;
    }
  }

  /** All rows as objects. */
  all(...params: Params): Row[] {
    this.#enter();
    try {
      return this.#all(params);
    } finally {
      this.#busy = false;
    }
  }

  /** The first row as an object, or null when there is none. */
  get(...params: Params): Row | null {
    this.#enter();
    try {
      return this.#get(params);
    } finally {
      this.#busy = false;
    }
  }

  /** All rows as arrays of values. */
  values(...params: Params): SQLValue[][] {
    this.#enter();
    try {
      return this.#values(params);
    } finally {
      this.#busy = false;
    }
  }

  /** The first row as an array of values, or undefined (the @db/sqlite name). */
  value(...params: Params): SQLValue[] | undefined {
    this.#enter();
    try {
      return this.#value(params);
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Rows one at a time. Parameters are bound now; the statement stays open (and holds its
   * read snapshot) until the iterator ends or is closed (break / return()). A statement that
   * writes (INSERT ... RETURNING) runs to its end at the first next(), as get() runs it, and
   * its rows are handed out from there: its commit happens then, where a commit that lost
   * to another writer is run again (outside a transaction) or reported, never left to the
   * reset of a break, a return() or a close, which would drop it unseen.
   */
  iterate(...params: Params): IterableIterator<Row> {
    // Busy while binding too: a parameter getter that finalizes the statement or closes
    // the database would free the sqlite3_stmt under the bind loop.
    this.#enter();
    let h: Ptr;
    try {
      h = this.#start(params);
    } finally {
      this.#busy = false;
    }
    const generation = this.#generation;
    this.#active = true;
    let n = -1;
    const s = this.#c.sym;
    let done = false;
    let written: Row[] | null = null; // the rows of a statement that writes, once it ran
    let at = 0;
    const finish = (): void => {
      done = true;
      if (this.#generation === generation && this.#h !== null) {
        s.sqlite3_reset(h);
        this.#active = false;
      }
    };
    const it: IterableIterator<Row> = {
      next: (): IteratorResult<Row> => {
        if (done) return { done: true, value: undefined };
        this.#handle();
        if (this.#generation !== generation) {
          done = true;
          throw misuse("the statement was run again while this iterator was open", this.#sql);
        }
        if (written === null && s.sqlite3_stmt_readonly(h) === 0) {
          const rows: Row[] = [];
          this.#enter();
          try {
            this.#drive(h, (h) => {
              if (n < 0) n = this.#columns(h);
              rows.push(this.#row(h, n));
            }, () => {
              rows.length = 0;
            });
          } catch (e) {
            done = true;
            throw e;
          } finally {
            this.#busy = false;
          }
          this.#active = false; // #drive reset it
          written = rows;
        }
        if (written !== null) {
          if (at < written.length) return { done: false, value: written[at++] };
          done = true;
          return { done: true, value: undefined };
        }
        this.#enter();
        let rc: number;
        try {
          rc = s.sqlite3_step(h);
        } finally {
          this.#busy = false;
        }
        if (rc === SQLITE_ROW) {
          if (n < 0) n = this.#columns(h);
          return { done: false, value: this.#row(h, n) };
        }
        if (rc !== SQLITE_DONE) {
          done = true;
          throw this.#fail(h, rc);
        }
        finish();
        return { done: true, value: undefined };
      },
      return: (): IteratorResult<Row> => {
        if (!done) finish();
        return { done: true, value: undefined };
      },
      [Symbol.iterator]() {
        return it;
      },
    };
    return it;
  }

  /** Alias of iterate() (the @db/sqlite name). */
  iter(...params: Params): IterableIterator<Row> {
    return this.iterate(...params);
  }

  /** Iterates the rows without parameters (`for (const row of stmt)`). */
  [Symbol.iterator](): IterableIterator<Row> {
    return this.iterate();
  }

  /** Frees the statement; using it afterwards is an error. Idempotent. */
  finalize(): void {
    const h = this.#h;
    if (h === null) return;
    if (this.#binding) {
      // From a parameter's getter: the bind loop still holds h; it is finalized after it.
      this.#h = null;
      this.#finalizedWhileBinding = h;
      this.#c.forget(this);
      return;
    }
    if (this.#busy) throw misuse("cannot finalize the statement while it runs", this.#sql);
    this.#h = null;
    this.#c.sym.sqlite3_finalize(h);
    this.#c.forget(this);
  }

  /** Finalizes the statement at the end of a `using` block. */
  [Symbol.dispose](): void {
    this.finalize();
  }

  /**
   * The SQL with the current parameter values; once finalized, "" (as bun:sqlite) or, in
   * the @db/sqlite face, the SQL alone.
   */
  toString(): string {
    if (this.#h === null) return this.#c.bun ? "" : this.#sql;
    return this.expandedSql;
  }

  /**
   * @internal The @db/sqlite face's reading rules for the calls that follow: a text with
   * SQLite's JSON subtype parsed (json), INTEGER columns read exact (int64) or as a
   * 32-bit int (not int64).
   */
  readAs(json: boolean, int64: boolean): void {
    const int32 = !int64;
    if ((this.#mode.json ?? false) !== json || (this.#mode.int32 ?? false) !== int32) {
      this.#mode = { ...this.#mode, json, int32 };
    }
  }

  /** @internal Binds params now, for later calls made without any (prepare(sql, params)). */
  bindNow(params: Params): void {
    this.#enter();
    try {
      this.#start(params);
    } finally {
      this.#busy = false;
    }
  }
}
