// lib/dbsqlite.ts: the @db/sqlite face of the JSR entry. Where @db/sqlite and bun:sqlite
// disagree, code written for @db/sqlite expects its behaviour: exec(), run() and
// Statement.run() return the number of changed rows, get()/value() give undefined when
// there is no row, columnNames() is a method, Date values bind as ISO text and plain
// objects and arrays as JSON, JSON texts (SQLite's JSON subtype) are parsed (parseJson),
// aggregates end with `final`. Thin wrappers over the one core (lib/database.ts, lib/statement.ts): no
// SQLite logic lives here.
import {
  type AggregateOptions,
  type Database as Core,
  type FunctionOptions,
  openDbSqliteCore,
  type TransactionFunction,
} from "./database.ts";
import type { AsyncTransactionOptions } from "./async.ts";
import type { BlobOpenOptions, SQLBlob } from "./blob.ts";
import type { DatabaseOptions } from "./options.ts";
import type { Statement as CoreStatement } from "./statement.ts";
import type { BindValue, SQLValue } from "./values.ts";

/** A value @db/sqlite binds: the core's values, plus Date (ISO text) and JSON-able objects. */
export type DbBindValue = BindValue | Date | Record<string, unknown> | unknown[];
/** Named parameters, with or without their prefix. */
export type DbBindParams = Record<string, DbBindValue>;
/** The parameters a statement method takes: values in order, one array, or one object of names. */
export type DbParams = DbBindValue[] | [DbBindValue[]] | [DbBindParams];

/** The options of the @db/sqlite face: the core's options plus @db/sqlite's own. */
export interface DbDatabaseOptions extends DatabaseOptions {
  /** Open a private in-memory database whatever the path says. */
  memory?: boolean;
  /** SQLite open flags (SQLITE_OPEN_READONLY, ...), instead of readonly/create. */
  flags?: number;
  /**
   * Return a text that carries SQLite's JSON subtype (the result of json(), json_object(),
   * json_array(), ...) parsed (default true); plain text is never parsed.
   */
  parseJson?: boolean;
  /** Accepted for compatibility; connections here are always one thread's. */
  unsafeConcurrency?: boolean;
  /** Accepted for compatibility: loadExtension() works without it. */
  enableLoadExtension?: boolean;
}

/** The `tx` of the @db/sqlite face's transactionAsync(): its connection's statements. */
export interface DbAsyncTransaction {
  /** A prepared statement of this transaction's connection. */
  prepare(sql: string): Statement;
  /** A statement of this transaction's connection, prepared once and cached (do not finalize it). */
  query(sql: string): Statement;
  /** Runs SQL on this transaction's connection; returns the rows it changed. */
  exec(sql: string, ...params: DbParams): number;
  /** Alias of exec(). */
  run(sql: string, ...params: DbParams): number;
  /** 1 on the first run of fn, then 2, 3, ... when a lost commit made it run again. */
  readonly attempt: number;
  /** The AbortSignal given, if any. */
  readonly signal: AbortSignal | undefined;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function toCore(v: unknown): BindValue {
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v) || isPlainObject(v)) return JSON.stringify(v);
  return v as BindValue;
}

// The parameters as the core takes them, each value converted the @db/sqlite way.
function convert(params: DbParams): BindValue[] | [BindValue[]] | [Record<string, BindValue>] {
  if (params.length === 1) {
    const only = params[0];
    if (Array.isArray(only)) return [only.map(toCore)];
    if (isPlainObject(only)) {
      const out: Record<string, BindValue> = {};
      for (const [k, v] of Object.entries(only)) out[k] = toCore(v);
      return [out];
    }
  }
  return (params as unknown[]).map(toCore);
}

/**
 * A prepared statement with @db/sqlite's methods: `run()` returns the changes, `get()` and
 * `value()` return undefined when there is no row, `bind()` sets parameters for later
 * calls made without any.
 *
 * @example
 * ```ts
 * const stmt = db.prepare("SELECT name FROM users WHERE id = ?");
 * const row = stmt.get<{ name: string }>(1);
 * ```
 */
export class Statement {
  readonly #s: CoreStatement<Record<string, SQLValue>>;
  // The database's parseJson now (db.parseJson may change after prepare()).
  readonly #dbJson: () => boolean;
  #json: boolean | null = null; // null: the database's setting
  #int64: boolean | null = null; // null: the database's (exact 64-bit integers)
  #bound: DbParams | null = null;

  /** @internal Made by Database.prepare(). */
  constructor(core: CoreStatement<Record<string, SQLValue>>, parseJson: () => boolean) {
    this.#s = core;
    this.#dbJson = parseJson;
  }

  #args(params: DbParams): ReturnType<typeof convert> {
    return convert(params.length === 0 && this.#bound !== null ? this.#bound : params);
  }

  // The core statement, set to read as this statement's settings say.
  #core(): CoreStatement<Record<string, SQLValue>> {
    this.#s.readAs(this.#json ?? this.#dbJson(), this.#int64 ?? true);
    return this.#s;
  }

  /** Returns a text with SQLite's JSON subtype (json(), json_object(), ...) parsed; returns this. */
  enableParseJson(): this {
    this.#json = true;
    return this;
  }

  /** Returns JSON texts as text; returns this. */
  disableParseJson(): this {
    this.#json = false;
    return this;
  }

  /** Follows the database's `parseJson` again; returns this. */
  defaultParseJson(): this {
    this.#json = null;
    return this;
  }

  /** Reads INTEGER columns as 64 bits: a number within ±(2^53 − 1), else a bigint; returns this. */
  enableInt64(): this {
    this.#int64 = true;
    return this;
  }

  /** Reads INTEGER columns as a 32-bit int (as sqlite3_column_int: high bits dropped); returns this. */
  disableInt64(): this {
    this.#int64 = false;
    return this;
  }

  /** Follows the database again (64-bit integers, exact); returns this. */
  defaultInt64(): this {
    this.#int64 = null;
    return this;
  }

  /** The SQL text. */
  get sql(): string {
    return this.#s.source;
  }

  /** The SQL with the current parameter values in place. */
  get expandedSql(): string {
    return this.#s.expandedSql;
  }

  /** True when the statement does not write. */
  get readonly(): boolean {
    return this.#s.readonly;
  }

  /** Number of parameters. */
  get bindParameterCount(): number {
    return this.#s.paramsCount;
  }

  /** True after finalize(). */
  get finalized(): boolean {
    return this.#s.finalized;
  }

  /** Column names of the result. */
  columnNames(): string[] {
    return this.#s.columnNames;
  }

  /** Sets the parameters used by later calls made without any; returns this. */
  bind(...params: DbParams): this {
    this.#bound = params;
    return this;
  }

  /** Runs the statement; returns the number of rows it changed. */
  run(...params: DbParams): number {
    return this.#core().run(...this.#args(params)).changes;
  }

  /** All rows as objects. */
  all<T extends object = Record<string, SQLValue>>(...params: DbParams): T[] {
    return this.#core().all(...this.#args(params)) as unknown as T[];
  }

  /** The first row as an object, or undefined. */
  get<T extends object = Record<string, SQLValue>>(...params: DbParams): T | undefined {
    const row = this.#core().get(...this.#args(params));
    return row === null ? undefined : row as unknown as T;
  }

  /** All rows as arrays. */
  values<T extends unknown[] = SQLValue[]>(...params: DbParams): T[] {
    return this.#core().values(...this.#args(params)) as unknown as T[];
  }

  /** The first row as an array, or undefined. */
  value<T extends unknown[] = SQLValue[]>(...params: DbParams): T | undefined {
    return this.#core().value(...this.#args(params)) as unknown as T | undefined;
  }

  /** Rows one at a time (the statement stays open until the loop ends). */
  *iter<T extends object = Record<string, SQLValue>>(...params: DbParams): IterableIterator<T> {
    yield* this.#core().iterate(...this.#args(params)) as unknown as IterableIterator<T>;
  }

  /** Iterates the rows with the bound parameters. */
  [Symbol.iterator](): IterableIterator<Record<string, SQLValue>> {
    return this.iter();
  }

  /** Accepted for compatibility (custom functions are always allowed here); returns this. */
  enableCallback(): this {
    return this;
  }

  /** Frees the statement. */
  finalize(): void {
    this.#s.finalize();
  }

  /** Finalizes the statement at the end of a `using` block. */
  [Symbol.dispose](): void {
    this.finalize();
  }

  /** The SQL with the current parameter values. */
  toString(): string {
    return this.#s.toString();
  }
}

/** An aggregate as @db/sqlite defines one: `final` turns the state into the result. */
export interface DbAggregateOptions<S = unknown> extends FunctionOptions {
  /** The state each group starts from, or a function making it. */
  start?: S | (() => S);
  /** Folds one row's arguments into the state. */
  step: (state: S, ...args: SQLValue[]) => S;
  /** The value the group returns (default: the state). */
  final?: (state: S) => unknown;
  /** Takes a row back out of the state (makes it a window function). */
  inverse?: (state: S, ...args: SQLValue[]) => S;
}

/**
 * A connection, with @db/sqlite's methods: `exec()`/`run()` return the number of changed
 * rows, `prepare()` gives this face's Statement, `sql` runs a tagged template. The
 * multi-writer engine is on by default; the core's options (busyTimeout, multiwriter, ...)
 * are accepted too.
 *
 * @example
 * ```ts
 * import { Database } from "jsr:@sqlite-multiwriter/sqlite-multiwriter";
 * const db = new Database("app.db");
 * db.exec("CREATE TABLE IF NOT EXISTS t(x)");
 * const changed = db.exec("INSERT INTO t VALUES (?)", 1); // 1
 * const [row] = db.sql`SELECT count(*) AS n FROM t`;
 * ```
 */
export class Database {
  readonly #db: Core;
  /**
   * Whether statements parse JSON texts (those with SQLite's JSON subtype), unless a
   * statement says otherwise (enableParseJson(), disableParseJson()); may be changed.
   */
  parseJson: boolean;

  /** Opens (and by default creates) a database; see DbDatabaseOptions. */
  constructor(path: string | URL = ":memory:", options: DbDatabaseOptions = {}) {
    if (typeof options !== "object" || options === null) throw new TypeError("sqlite-multiwriter: options must be an object");
    const { memory, flags, parseJson, unsafeConcurrency: _u, enableLoadExtension: _e, ...core } = options;
    this.parseJson = parseJson !== false;
    this.#db = openDbSqliteCore(memory ? ":memory:" : path, flags !== undefined ? flags : core);
  }

  /** The core Database (the bun:sqlite-shaped API, the engine's statistics). */
  get core(): Core {
    return this.#db;
  }

  /** The path given to the constructor. */
  get path(): string {
    return this.#db.filename;
  }

  /** False after close(). */
  get open(): boolean {
    return this.#db.open;
  }

  /** True while a transaction is open. */
  get inTransaction(): boolean {
    return this.#db.inTransaction;
  }

  /** True when no transaction is open. */
  get autocommit(): boolean {
    return this.#db.autocommit;
  }

  /** Rows changed by the last INSERT, UPDATE or DELETE. */
  get changes(): number {
    return this.#db.changes;
  }

  /** Rows changed since the connection opened. */
  get totalChanges(): number {
    return this.#db.totalChanges;
  }

  /** The rowid of the last row inserted. */
  get lastInsertRowId(): number | bigint {
    return this.#db.lastInsertRowid;
  }

  /** Runs SQL (a script, or one statement with parameters); returns the rows it changed. */
  exec(sql: string, ...params: DbParams): number {
    return this.#db.run(sql, ...convert(params)).changes;
  }

  /** Alias of exec(). */
  run(sql: string, ...params: DbParams): number {
    return this.exec(sql, ...params);
  }

  /** A prepared statement. */
  prepare(sql: string): Statement {
    return new Statement(this.#db.prepare(sql), () => this.parseJson);
  }

  /**
   * Runs a tagged template as one statement, the values bound as parameters (the strings
   * joined with `?`, so a value's column is named `?`); returns the rows.
   */
  sql<T extends object = Record<string, SQLValue>>(strings: TemplateStringsArray, ...values: DbBindValue[]): T[] {
    if (!Array.isArray(strings)) throw new TypeError("sqlite-multiwriter: sql is a template tag: db.sql`SELECT ...`");
    let text = strings[0];
    for (let i = 1; i < strings.length; i++) text += "?" + strings[i];
    const stmt = this.prepare(text);
    try {
      return stmt.all<T>(...values);
    } finally {
      stmt.finalize();
    }
  }

  /** Wraps fn in a transaction (see the core's transaction(): savepoints, retries). */
  transaction<A extends unknown[], R>(fn: (...args: A) => R): TransactionFunction<A, R> {
    return this.#db.transaction(fn);
  }

  /**
   * Wraps an async function in a transaction that may span awaits, many in flight at once
   * (see the core's transactionAsync()); `tx` has this face's prepare(), exec() and run().
   */
  transactionAsync<A extends unknown[], R>(
    fn: (tx: DbAsyncTransaction, ...args: A) => Promise<R> | R,
    options?: AsyncTransactionOptions,
  ): (...args: A) => Promise<R> {
    if (typeof fn !== "function") throw new TypeError("sqlite-multiwriter: transactionAsync() takes a function");
    const json = (): boolean => this.parseJson;
    return this.#db.transactionAsync((tx, ...args: A) => {
      const face: DbAsyncTransaction = {
        prepare: (sql) => new Statement(tx.prepare(sql), json),
        query: (sql) => new Statement(tx.query(sql), json),
        exec: (sql, ...params) => tx.run(sql, ...convert(params)).changes,
        run: (sql, ...params) => tx.run(sql, ...convert(params)).changes,
        attempt: tx.attempt,
        signal: tx.signal,
      };
      return fn(face, ...args);
    }, options);
  }

  /** Defines a scalar SQL function (options before or after the function). */
  function(name: string, fn: (...args: SQLValue[]) => unknown, options?: FunctionOptions): this;
  /** The same, with the options first. */
  function(name: string, options: FunctionOptions, fn: (...args: SQLValue[]) => unknown): this;
  function(
    name: string,
    a: ((...args: SQLValue[]) => unknown) | FunctionOptions,
    b?: ((...args: SQLValue[]) => unknown) | FunctionOptions,
  ): this {
    if (typeof a === "function") this.#db.function(name, a, b as FunctionOptions | undefined);
    else this.#db.function(name, a, b as (...args: SQLValue[]) => unknown);
    return this;
  }

  /** Defines an aggregate (and, with `inverse`, window) function. */
  aggregate<S = unknown>(name: string, options: DbAggregateOptions<S>): this {
    const { final, ...rest } = options ?? ({} as DbAggregateOptions<S>);
    const core: AggregateOptions<S> = { ...rest, result: final };
    this.#db.aggregate(name, core);
    return this;
  }

  /**
   * Copies schema `name` of this database into `dest` (online backup); returns the pages
   * copied. `pages` is accepted for compatibility: the copy is always made in one step, of
   * one snapshot. `dest` the same database is SQLite's error ("source and destination must
   * be distinct").
   */
  backup(dest: Database | string, name = "main", pages = -1): number {
    if (typeof pages !== "number") throw new TypeError("sqlite-multiwriter: backup() pages must be a number");
    return this.#db.backup(dest instanceof Database ? dest.#db : dest, { schema: name });
  }

  /** Loads a SQLite extension. */
  loadExtension(file: string, entryPoint?: string): void {
    this.#db.loadExtension(file, entryPoint);
  }

  /** Accepted for compatibility: loadExtension() works without it. */
  enableLoadExtension = true;

  /** Opens one blob value for incremental I/O, with Web streams (see SQLBlob). */
  openBlob(options: BlobOpenOptions): SQLBlob {
    return this.#db.openBlob(options);
  }

  /** Stops the running statement (SQLITE_INTERRUPT). */
  interrupt(): void {
    this.#db.interrupt();
  }

  /** The database as bytes. */
  serialize(schema = "main"): Uint8Array {
    return this.#db.serialize(schema);
  }

  /** Replaces a schema with an in-memory copy of the bytes. */
  deserialize(data: Uint8Array, options: { schema?: string; readonly?: boolean } = {}): void {
    this.#db.deserialize(data, options);
  }

  /** Closes the database (finalizes its statements). */
  close(): void {
    this.#db.close();
  }

  /** Closes the database at the end of a `using` block. */
  [Symbol.dispose](): void {
    this.close();
  }
}
