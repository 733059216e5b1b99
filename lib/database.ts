// lib/database.ts: a connection. Opening (options -> URI, defaults), statements and their
// cache, scripts, extensions, file controls, the engine's counters and rowid declarations,
// blobs, and close(). One connection belongs to one JS thread (opened with
// SQLITE_OPEN_NOMUTEX). Transactions and the retry of lost commits (lib/transaction.ts),
// custom functions (lib/functions.ts) and serialize/deserialize/backup (lib/images.ts) are
// their own modules, reaching the connection through its Internals (lib/internals.ts).
import { SQLITE_BUSY_SNAPSHOT, SQLITE_DONE, SQLITE_MISUSE, SQLITE_NOTFOUND, SQLITE_OK, SQLITE_ROW } from "./codes.ts";
import { SQLBlob, type BlobHost, type BlobOpenOptions } from "./blob.ts";
import { constants, SQLITE_DBCONFIG_DQS_DDL, SQLITE_DBCONFIG_DQS_DML, SQLITE_TXN_WRITE } from "./constants.ts";
import { SQLiteError } from "./error.ts";
import { ffi as loadFfi, type Ffi, type NativeCallback, type Ptr } from "./ffi/index.ts";
import type { Symbols } from "./ffi/types.ts";
import { type AggregateOptions, defineAggregate, defineFunction, type FunctionOptions, safeText } from "./functions.ts";
import { backup, deserialize, type Image, imageOpenOptions, isImage, serialize } from "./images.ts";
import { type Internals, register } from "./internals.ts";
import { type DatabaseOptions, isMemoryPath, resolveOptions, toFilePath, toUri } from "./options.ts";
import { isVacuum, type Params, type RunResult, Statement, stepStatement } from "./statement.ts";
import { type EngineStats, STAT_SLOTS, statsFrom } from "./stats.ts";
import { retryLost, transaction, type TransactionFunction } from "./transaction.ts";
import { type AsyncTransaction, type AsyncTransactionOptions, AsyncPool } from "./async.ts";
import process from "node:process";
import { existsSync } from "node:fs";
import { checkLibraryFile } from "./ffi/check.ts";
import { controlArgument } from "./filecontrol.ts";
import {
  asBytes,
  type BindParams,
  type BindValue,
  cstr,
  describe,
  int,
  misuse,
  type SQLValue,
  type ValueMode,
} from "./values.ts";

export type { AggregateOptions, FunctionOptions } from "./functions.ts";
export type { EngineStats } from "./stats.ts";
export type { TransactionFunction } from "./transaction.ts";
// test/transaction.test.ts reads the backoff from here.
export { backoffMs } from "./transaction.ts";

const QUERY_CACHE_MAX = 256;
const MAIN = cstr("main");
/** The message of any use of a closed database (bun:sqlite's words). */
const CLOSED = "Database has closed";
/** bun:sqlite's key of the number of statements cached by query(). */
const CACHE_COUNT = Symbol.for("Bun.Database.cache.count");

/** Busy timeout of the PRAGMAs run while opening (ms). */
const SETUP_BUSY_MS = 5000;

// The databases of this JS thread that are open: closed when the process exits normally, as
// bun:sqlite does, so that the engine checkpoints and a normal exit leaves only the .db.
const openDatabases = new Set<Database>();
let exitHookInstalled = false;

function closeAllAtExit(): void {
  for (const db of [...openDatabases]) {
    try {
      db.close();
    } catch { /* exiting: nothing more can be done for it */ }
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // node:process works in both runtimes; its "exit" event runs at a normal end of the
  // process, process.exit() included. A Worker's own exit is not seen here.
  process.once("exit", closeAllAtExit);
  // Deno.exit() ends the process without that event; Deno dispatches "unload" on the main
  // thread's global scope then (and at a normal end too, before "exit": closing twice is a
  // no-op). A Worker's global scope is a WorkerGlobalScope: left to the engine, as above.
  const g = globalThis as {
    Deno?: unknown;
    WorkerGlobalScope?: unknown;
    addEventListener?: (type: string, listener: () => void) => void;
  };
  if (g.Deno !== undefined && g.WorkerGlobalScope === undefined && typeof g.addEventListener === "function") {
    g.addEventListener("unload", closeAllAtExit);
  }
}

/**
 * A connection to a SQLite database, by default through the multi-writer engine: many
 * connections (threads, Workers, processes) may write the same file at once. Shaped after
 * bun:sqlite's Database.
 *
 * @example
 * ```ts
 * const db = new Database("app.db");
 * db.run("CREATE TABLE IF NOT EXISTS users(id INTEGER PRIMARY KEY, name TEXT)");
 * const add = db.transaction((name: string) => db.query("INSERT INTO users(name) VALUES (?)").run(name));
 * add("ada");
 * db.query<{ name: string }>("SELECT name FROM users").all();
 * db.close();
 * ```
 */
export class Database {
  readonly #f: Ffi;
  // What statements and the concern modules see of the connection (off the public surface).
  readonly #conn: Internals;
  readonly #options: ReturnType<typeof resolveOptions>;
  // The npm entry (bun:sqlite's rules); false for the @db/sqlite face's core.
  readonly #bun: boolean;
  readonly #mode: ValueMode;
  #db: Ptr | null = null;
  #progress = false; // a progress handler is set (SQLite calls it during COMMIT too)
  #asyncInFlight = 0; // statements of this connection running off this thread
  readonly #path: string;
  readonly #engine: boolean;
  readonly #statements = new Set<Statement<object>>();
  readonly #cache = new Map<string, Statement<object>>();
  readonly #internal = new Map<string, Statement<object>>();
  readonly #intOut = new Int32Array(1); // an int a file control writes
  readonly #callbacks: NativeCallback[] = [];
  readonly #blobs = new Map<SQLBlob, boolean>(); // open blobs: writable?
  // What transactionAsync's pooled connections are opened with and given: the options as
  // passed, the face, and the function(), aggregate() and loadExtension() calls made here.
  readonly #rawOptions: DatabaseOptions | number;
  readonly #face: typeof DB_SQLITE | undefined;
  readonly #replay: ((d: Database) => void)[] = [];
  #pool: AsyncPool | null = null;

  /**
   * Opens (and by default creates) a database. `path` is a file path, a file: URL, or
   * ":memory:"; or, as bun:sqlite takes it, the bytes of a database (a Uint8Array), opened
   * in memory as Database.deserialize() does. Journal mode WAL, synchronous=FULL and a busy
   * timeout are set.
   */
  constructor(path?: string | URL | Image, options?: DatabaseOptions | number);
  constructor(path: string | URL | Image = ":memory:", options: DatabaseOptions | number = {}, face?: typeof DB_SQLITE) {
    this.#bun = face !== DB_SQLITE;
    this.#face = face;
    this.#rawOptions = typeof options === "object" && options !== null ? { ...options } : options;
    const o = resolveOptions(options, this.#bun);
    this.#options = o;
    this.#mode = { bun: this.#bun, safe: o.safeIntegers, exact: o.int64 || !this.#bun };
    let image: Uint8Array | null = null;
    if (isImage(path)) {
      image = asBytes(path);
      path = ":memory:";
    }
    this.#f = loadFfi(o.libraryPath);
    this.#conn = this.#internals();
    const file = toFilePath(path);
    if (typeof file !== "string") {
      throw new TypeError(`Expected 'filename' to be a string, got '${typeof path}' (a path is a string or URL)`);
    }
    this.#path = file;
    const memory = isMemoryPath(file);
    if (memory && o.readonly && image === null && this.#bun) {
      throw new Error("Cannot open an anonymous database in read-only mode."); // bun:sqlite's refusal
    }
    const params: [string, string][] = [];
    this.#engine = o.multiwriter && !memory;
    if (this.#engine) params.push(["vfs", "multiwriter"], ...o.engineParams);
    // In memory, the engine's VFS is still the connection's: an ATTACH of a plain path opens
    // the file through the engine, as a package connection of that path would (through
    // stock SQLite it was "database is locked" while the engine had the file open).
    else if (o.multiwriter && file === ":memory:") params.push(["vfs", "multiwriter"]);
    const uri = toUri(file, params);
    // An image is deserialized into a writable memory database, read-only there if asked.
    const readonly = o.readonly && image === null;
    const s = this.#sym;
    const cell = new BigUint64Array(1);
    const rc = s.sqlite3_open_v2(cstr(uri), cell, openFlags(readonly, o.create), null);
    const db = this.#f.outPtr(cell);
    if (rc !== SQLITE_OK) {
      const message = causeFirst(
        this.#f.isNull(db) ? this.#f.cstring(s.sqlite3_errstr(rc)) : this.#f.cstring(s.sqlite3_errmsg(db)),
      );
      const code = this.#f.isNull(db) ? rc : s.sqlite3_extended_errcode(db);
      if (!this.#f.isNull(db)) s.sqlite3_close_v2(db);
      // bun:sqlite reports SQLite's message alone; @db/sqlite's starts with the code
      // ("14: unable to open database file").
      throw new SQLiteError(this.#bun ? message : `${code & 0xff}: ${message} (cannot open ${file})`, code);
    }
    this.#db = db;
    openDatabases.add(this);
    installExitHook();
    try {
      this.#setUp(db, memory, image);
    } catch (e) {
      this.close();
      throw e;
    }
  }

  // The settings of a connection just opened, and the image it was given.
  #setUp(db: Ptr, memory: boolean, image: Uint8Array | null): void {
    const o = this.#options;
    const s = this.#sym;
    // The setup PRAGMAs may meet another connection that is opening or recovering the
    // same file: they wait at least SETUP_BUSY_MS whatever the user's timeout is.
    s.sqlite3_busy_timeout(db, Math.max(o.busyTimeout, SETUP_BUSY_MS));
    // bun:sqlite's SQLite reads a double-quoted word that names no column as a string
    // (SQLite's default); the library is built with DQS=0, which @db/sqlite keeps.
    if (this.#bun) {
      for (const op of [SQLITE_DBCONFIG_DQS_DML, SQLITE_DBCONFIG_DQS_DDL]) {
        const rc = s.mw_db_config(db, op, 1, null);
        if (rc !== SQLITE_OK) throw this.#error(rc);
      }
    }
    if (!o.readonly && !memory) this.#execScript("PRAGMA journal_mode=WAL");
    this.#execScript("PRAGMA synchronous=FULL");
    s.sqlite3_busy_timeout(db, o.busyTimeout);
    if (image !== null) this.deserialize(image, { readonly: o.readonly });
  }

  // ---- the connection as statements and the concern modules see it ----

  // Built once, in the constructor: its getters read this connection's private state.
  #internals(): Internals {
    const o = this.#options;
    const sym = (): Symbols => this.#sym;
    const db = (): Ptr | null => this.#db;
    const c: Internals = {
      ffi: this.#f,
      get sym(): Symbols {
        return sym();
      },
      get db(): Ptr | null {
        return db();
      },
      strict: o.strict,
      safeIntegers: o.safeIntegers,
      bun: this.#mode.bun,
      exact: this.#mode.exact,
      options: o,
      mode: this.#mode,
      callbacks: this.#callbacks,
      pending: undefined,
      inCallback: 0,
      tx: { depth: 0, retries: 0, lastAttempts: 0 },
      handle: () => this.#handle(),
      error: (rc, sql) => this.#error(rc, sql),
      database: this,
      forget: (stmt) => this.#statements.delete(stmt),
      retryLost: (h, rc, attempt, since) => retryLost(c, h, rc, attempt, since),
      internalRun: (sql) => this.#internalRun(sql),
      commitAsync: () => this.#commitAsync(),
    };
    register(this, c);
    return c;
  }

  // Once this connection has a JS callback, SQLite may call into JS from step, reset,
  // finalize, exec and close: those then go through the symbols that are never fast-called.
  get #sym(): Symbols {
    return this.#callbacks.length > 0 ? this.#f.symSafe : this.#f.sym;
  }

  #handle(): Ptr {
    if (this.#db === null) throw misuse(CLOSED);
    return this.#db;
  }

  #error(rc: number, sql?: string): Error {
    if (this.#conn.pending !== undefined) {
      const e = this.#conn.pending;
      this.#conn.pending = undefined;
      if (e instanceof Error) return e;
      // A thrown non-Error travels as the cause; its text is only read where that is safe.
      return new Error(`a custom function threw: ${safeText(e)}`, { cause: e });
    }
    const s = this.#sym;
    const db = this.#db;
    if (db === null) return misuse(CLOSED, sql);
    const ext = s.sqlite3_extended_errcode(db);
    const code = (ext & 0xff) === (rc & 0xff) ? ext : rc;
    let message = causeFirst(this.#f.cstring(s.sqlite3_errmsg(db)));
    if (code === SQLITE_BUSY_SNAPSHOT && message === "database is locked") {
      // Nothing is locked: the commit was refused because another writer won.
      message = "another writer committed first; this transaction was rolled back (SQLITE_BUSY_SNAPSHOT)";
    }
    if (code === SQLITE_BUSY_SNAPSHOT && s.sqlite3_get_autocommit(db) === 0) {
      // A commit is lost only at COMMIT/END, RELEASE of the outermost savepoint or the end
      // of an autocommit statement, and SQLite has rolled its changes back. After a lost
      // RELEASE it still reports a transaction (OP_Savepoint restores autocommit=0): the
      // next statement would stay pending and vanish at close. Leave that empty
      // transaction, so that a lost commit always returns the connection to autocommit.
      s.sqlite3_exec(db, cstr("ROLLBACK"), this.#f.NULL, this.#f.NULL, null);
    }
    return new SQLiteError(message, code, sql, s.sqlite3_error_offset(db));
  }

  // ---- properties ----

  /** The path given to the constructor. */
  get filename(): string {
    return this.#path;
  }

  /**
   * Opens a database: the same as `new Database(path, options)` (the bun:sqlite name).
   *
   * @example
   * ```ts
   * const db = Database.open("app.db", { readonly: true });
   * ```
   */
  static open(path: string | URL = ":memory:", options: DatabaseOptions | number = {}): Database {
    return new Database(path, options);
  }

  /** The path given to the constructor (the @db/sqlite name `path` is an alias). */
  get path(): string {
    return this.#path;
  }

  /** The path given to the constructor (better-sqlite3's name). */
  get name(): string {
    return this.#path;
  }

  /** False after close(). */
  get open(): boolean {
    return this.#db !== null;
  }

  /** True while a transaction is open. */
  get inTransaction(): boolean {
    return this.#sym.sqlite3_get_autocommit(this.#handle()) === 0;
  }

  /** True when no transaction is open (the @db/sqlite name). */
  get autocommit(): boolean {
    return !this.inTransaction;
  }

  /** The rowid of the last row inserted. */
  get lastInsertRowid(): number | bigint {
    return int(this.#sym.sqlite3_last_insert_rowid(this.#handle()), this.#mode);
  }

  /** Alias of lastInsertRowid (the @db/sqlite name). */
  get lastInsertRowId(): number | bigint {
    return this.lastInsertRowid;
  }

  /** Rows changed by the last INSERT, UPDATE or DELETE. */
  get changes(): number {
    return Number(this.#sym.sqlite3_changes64(this.#handle()));
  }

  /** Rows changed since the connection opened. */
  get totalChanges(): number {
    return Number(this.#sym.sqlite3_total_changes64(this.#handle()));
  }

  /** Attempts of the last transaction() call (1 when it committed at once). */
  get lastTransactionAttempts(): number {
    return this.#conn.tx.lastAttempts;
  }

  /** Transactions run again by transaction() since the connection opened. */
  get transactionRetries(): number {
    return this.#conn.tx.retries;
  }

  /**
   * Asks the statement running on this connection to stop as soon as it can: it fails with
   * SQLITE_INTERRUPT. Meant for a custom function or a progress callback (see
   * `onProgress`) of a runaway query; a call with nothing running has no effect.
   */
  interrupt(): void {
    this.#sym.sqlite3_interrupt(this.#handle());
  }

  /**
   * Calls fn about every `ops` virtual machine steps of a running statement; when fn
   * returns true the statement stops with SQLITE_INTERRUPT (a timeout for runaway
   * queries). `null` removes the handler.
   *
   * @example
   * ```ts
   * const deadline = Date.now() + 1000;
   * db.onProgress(() => Date.now() > deadline);
   * ```
   */
  onProgress(fn: (() => boolean) | null, ops = 10_000): void {
    const db = this.#handle();
    if (fn !== null && typeof fn !== "function") throw new TypeError("sqlite-multiwriter: onProgress() takes a function or null");
    if (!Number.isInteger(ops) || ops < 1) throw new RangeError("sqlite-multiwriter: ops must be a positive integer");
    const f = this.#f;
    if (fn === null) {
      this.#sym.sqlite3_progress_handler(db, 0, f.NULL, f.NULL);
      this.#progress = false;
      return;
    }
    const cb = f.callback("progress", () => {
      this.#conn.inCallback++; // SQLite is inside a statement: close() and the like are refused
      try {
        return fn() ? 1 : 0;
      } catch (e) {
        this.#conn.pending = e; // reported by the interrupted statement
        return 1;
      } finally {
        this.#conn.inCallback--;
      }
    });
    this.#sym.sqlite3_progress_handler(db, ops, cb.ptr, f.NULL);
    this.#callbacks.push(cb);
    this.#progress = true;
  }

  // ---- statements ----

  #prepareHandle(sql: string, flags: number): Ptr {
    checkSql(sql);
    const f = this.#f;
    const db = this.#handle();
    const bytes = new TextEncoder().encode(sql + "\0");
    const n = bytes.length - 1;
    const stmtCell = new BigUint64Array(1);
    const tailCell = new BigUint64Array(1);
    const base = f.addressOf(bytes); // taken before the call: pins the bytes in Bun
    const rc = this.#sym.sqlite3_prepare_v3(db, bytes, n, flags, stmtCell, tailCell);
    if (rc !== SQLITE_OK) throw this.#error(rc, sql);
    const stmt = f.outPtr(stmtCell);
    if (f.isNull(stmt)) {
      // bun:sqlite's RangeError; @db/sqlite's face keeps the library's misuse error.
      const why = "Invalid SQL statement: the SQL holds no statement";
      throw this.#bun ? new RangeError(why) : misuse(why, sql);
    }
    const tail = Number(f.address(f.outPtr(tailCell)) - base);
    if (tail >= 0 && tail < n && /\S/.test(new TextDecoder().decode(bytes.subarray(tail, n)))) {
      // Something follows: only comments are allowed, a second statement is a mistake.
      const restCell = new BigUint64Array(1);
      const rest = bytes.subarray(tail);
      const rc2 = this.#sym.sqlite3_prepare_v3(db, rest, n - tail, 0, restCell, null);
      const second = f.outPtr(restCell);
      if (!f.isNull(second)) this.#sym.sqlite3_finalize(second);
      if (rc2 !== SQLITE_OK || !f.isNull(second)) {
        this.#sym.sqlite3_finalize(stmt);
        throw misuse("prepare() and query() take one statement; use exec() for a script", sql);
      }
    }
    return stmt;
  }

  /**
   * A new prepared statement (finalize it, or let close() do it). `params`, as bun:sqlite
   * takes them, are bound now: later calls made without parameters use them.
   */
  prepare<Row extends object = Record<string, SQLValue>>(sql: string, params?: BindValue[] | BindParams): Statement<Row> {
    this.#checkOpen();
    const stmt = new Statement<Row>(this.#conn, this.#prepareHandle(sql, 0), sql);
    this.#statements.add(stmt);
    if (params !== undefined && params !== null) {
      try {
        stmt.bindNow([params] as Params);
      } catch (e) {
        stmt.finalize();
        throw e;
      }
    }
    return stmt;
  }

  // prepare() and query() on a closed database say it in bun:sqlite's words for them.
  #checkOpen(): void {
    if (this.#db === null) throw new SQLiteError("Cannot use a closed database", SQLITE_MISUSE);
  }

  /** A prepared statement cached by its SQL (the same object for the same SQL). */
  query<Row extends object = Record<string, SQLValue>>(sql: string): Statement<Row> {
    this.#checkOpen();
    const hit = this.#cache.get(sql);
    if (hit !== undefined && !hit.finalized) return hit as unknown as Statement<Row>;
    const stmt = new Statement<Row>(this.#conn, this.#prepareHandle(sql, constants.SQLITE_PREPARE_PERSISTENT), sql);
    this.#statements.add(stmt);
    if (this.#cache.size >= QUERY_CACHE_MAX) {
      // Forget the oldest entry (it stays usable by whoever holds it; close() finalizes it).
      const oldest = this.#cache.keys().next().value;
      if (oldest !== undefined) this.#cache.delete(oldest);
    }
    this.#cache.set(sql, stmt);
    return stmt;
  }

  /** Finalizes the statements cached by query() (statements from prepare() stay). */
  clearQueryCache(): void {
    for (const stmt of this.#cache.values()) {
      if (!stmt.finalized) stmt.finalize();
    }
    this.#cache.clear();
  }

  /** The number of statements query() holds (bun:sqlite's `db[Symbol.for("Bun.Database.cache.count")]`). */
  get [CACHE_COUNT](): number {
    let n = 0;
    for (const stmt of this.#cache.values()) if (!stmt.finalized) n++;
    return n;
  }

  /** The most statements query() keeps cached (bun:sqlite's name). */
  static readonly MAX_QUERY_CACHE_SIZE: number = QUERY_CACHE_MAX;

  // Runs a script statement by statement (as sqlite3_exec does), so that a statement
  // outside a transaction whose commit lost is run again by itself (see retryLost() in lib/transaction.ts), never
  // the statements before it. Rows are discarded. Returns the rows the statements changed,
  // each counted as Statement.run() counts it (bun:sqlite's sum), and how many there were.
  #execScript(sql: string): { changes: number; statements: number } {
    checkSql(sql);
    const f = this.#f;
    const s = f.sym;
    const db = this.#handle();
    const bytes = new TextEncoder().encode(sql + "\0");
    const n = bytes.length - 1;
    // Bun keeps a small typed array inside its object and moves the bytes out the first
    // time a view of its buffer is made (subarray below): made here, before the address.
    void bytes.buffer;
    const base = f.addressOf(bytes);
    const stmtCell = new BigUint64Array(1);
    const tailCell = new BigUint64Array(1);
    let at = 0;
    let changes = 0;
    let statements = 0;
    const mayVacuum = /vacuum/i.test(sql);
    while (at < n) {
      const rc = s.sqlite3_prepare_v3(db, bytes.subarray(at), n - at, 0, stmtCell, tailCell);
      if (rc !== SQLITE_OK) throw this.#error(rc, sql);
      const stmt = f.outPtr(stmtCell);
      const tail = Number(f.address(f.outPtr(tailCell)) - base);
      if (f.isNull(stmt)) break; // only whitespace and comments were left
      statements++;
      const vacuum = mayVacuum && isVacuum(f.cstring(s.sqlite3_sql(stmt)));
      try {
        const since = Date.now();
        const before = s.sqlite3_total_changes64(db);
        for (let attempt = 1;; attempt++) {
          const autocommit = s.sqlite3_get_autocommit(db) !== 0;
          let step: number;
          while ((step = stepStatement(s, stmt, vacuum)) === SQLITE_ROW);
          if (step === SQLITE_DONE) {
            if (s.sqlite3_total_changes64(db) !== before) changes += Number(s.sqlite3_changes64(db));
            break;
          }
          if (autocommit && this.#conn.retryLost(stmt, step, attempt, since)) {
            s.sqlite3_reset(stmt);
            continue;
          }
          throw this.#error(step, sql);
        }
      } finally {
        s.sqlite3_finalize(stmt);
      }
      if (!(tail > at)) break;
      at = tail;
    }
    return { changes, statements };
  }

  /**
   * Runs SQL. Without parameters it may hold several statements (a script); with
   * parameters it is one statement. Returns the changes and last rowid.
   */
  run(sql: string, ...params: Params): RunResult {
    this.#handle(); // closed: "Database has closed", before query() says it its way
    if (params.length === 0) {
      // bun:sqlite refuses SQL that holds no statement.
      if (this.#bun && sql === "") throw new Error("SQL string mustn't be blank");
      const { changes, statements } = this.#execScript(sql);
      if (this.#bun && statements === 0) throw new Error("Query contained no valid SQL statement; likely empty query.");
      return { changes, lastInsertRowid: this.lastInsertRowid };
    }
    return this.query(sql).run(...params);
  }

  /** Alias of run(): runs a script (or one statement with parameters). */
  exec(sql: string, ...params: Params): RunResult {
    return this.run(sql, ...params);
  }

  // ---- transactions (lib/transaction.ts) ----

  // transactionAsync's COMMIT: on an engine thread when it waits for a sync (synchronous
  // FULL or EXTRA), so that the commits in flight share one. Below FULL the engine
  // acknowledges a commit once written, as stock WAL does: nothing to share, and the hop
  // to a thread and back cost more than the commit (the counter example's CPU per hit 80 µs
  // against 35, docs/async.md). Nor does a transaction that wrote nothing (a rate limiter's
  // refusal, a read): its COMMIT syncs nothing at any level. A progress handler must run on
  // this thread. null: committed here, on the loop (a failure throws).
  #commitAsync(): Promise<void> | null {
    const db = this.#handle();
    if (this.#progress || !this.#wrote(db) || !this.#commitSyncs(db)) {
      this.#internalRun("COMMIT");
      return null;
    }
    return this.#commitOffLoop(db);
  }

  async #commitOffLoop(db: Ptr): Promise<void> {
    this.#asyncInFlight++;
    let rc: number;
    try {
      rc = await this.#f.commitAsync(db);
    } finally {
      this.#asyncInFlight--;
    }
    if (rc !== SQLITE_OK) throw this.#error(rc, "COMMIT");
  }

  #internalStatement(sql: string): Statement<object> {
    let stmt = this.#internal.get(sql);
    if (stmt === undefined) {
      stmt = new Statement(this.#conn, this.#prepareHandle(sql, constants.SQLITE_PREPARE_PERSISTENT), sql);
      this.#statements.add(stmt);
      this.#internal.set(sql, stmt);
    }
    return stmt;
  }

  #internalRun(sql: string): void {
    this.#internalStatement(sql).run();
  }

  // Whether the open transaction wrote to any of the connection's databases (main, temp,
  // attached): SQLITE_TXN_WRITE of sqlite3_txn_state(db, NULL), the highest state of all.
  #wrote(db: Ptr): boolean {
    return this.#sym.sqlite3_txn_state(db, this.#f.NULL) >= SQLITE_TXN_WRITE;
  }

  // Whether a COMMIT of this connection waits for a sync: the engine says what it will do
  // (MW_FCNTL_COMMIT_SYNCS, one call); stock SQLite in WAL mode syncs at commit from FULL up.
  #commitSyncs(db: Ptr): boolean {
    const rc = this.#sym.sqlite3_file_control(db, MAIN, constants.MW_FCNTL_COMMIT_SYNCS, this.#intOut);
    if (rc === SQLITE_OK) return this.#intOut[0] !== 0;
    return Number(this.#internalStatement("PRAGMA synchronous").values()[0]?.[0]) >= 2;
  }

  /**
   * Wraps fn in a transaction: BEGIN, fn, COMMIT; ROLLBACK when fn throws. Called inside
   * another transaction it becomes a savepoint. When a statement or the commit fails with
   * SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT (another writer won), the whole transaction runs
   * again after a jittered backoff, up to `maxAttempts` times; fn must be safe to re-run.
   */
  transaction<A extends unknown[], R>(fn: (...args: A) => R): TransactionFunction<A, R> {
    return transaction(this.#conn, fn);
  }

  /**
   * Wraps an async function in a transaction that may span awaits: each call runs
   * `fn(tx, ...args)` on a connection of its own, taken from a pool this database owns, so
   * that many calls are in flight at once on one event loop, each on its own snapshot.
   * When its commit loses to another writer, fn runs again on fresh data (up to
   * `maxAttempts`), after a backoff that waits with a timer. Without the engine
   * (`multiwriter: false`, or in memory) calls run one at a time. See docs/async.md.
   *
   * @example
   * ```ts
   * const order = db.transactionAsync(async (tx, item: number) => {
   *   const { stock } = tx.query("SELECT stock FROM items WHERE id = ?").get(item)!;
   *   await audit(item);                       // another service: other orders run meanwhile
   *   tx.run("UPDATE items SET stock = ? WHERE id = ?", Number(stock) - 1, item);
   * });
   * await order(7);
   * ```
   */
  transactionAsync<A extends unknown[], R>(
    fn: (tx: AsyncTransaction, ...args: A) => Promise<R> | R,
    options: AsyncTransactionOptions = {},
  ): (...args: A) => Promise<R> {
    if (typeof fn !== "function") throw new TypeError("sqlite-multiwriter: transactionAsync() takes a function");
    if (options.maxAttempts !== undefined && (!Number.isInteger(options.maxAttempts) || options.maxAttempts < 1)) {
      throw new RangeError(`sqlite-multiwriter: maxAttempts must be a whole number from 1, got ${options.maxAttempts}`);
    }
    return (...args: A): Promise<R> => {
      if (this.#db === null) return Promise.reject(misuse(CLOSED));
      return this.#asyncPool().run(fn, options, args);
    };
  }

  /** Connections of transactionAsync open now (0 before the first call). */
  get asyncPoolSize(): number {
    return this.#pool?.size ?? 0;
  }

  #asyncPool(): AsyncPool {
    if (this.#pool !== null) return this.#pool;
    const shared = isMemoryPath(this.#path) ? this : null;
    const o = this.#options;
    this.#pool = new AsyncPool({
      open: () => this.#openPooled(),
      shared,
      max: this.#engine ? o.asyncPool : 1,
      maxAttempts: o.maxAttempts,
    });
    return this.#pool;
  }

  // A connection like this one for transactionAsync: the same file and options, the same
  // per-connection PRAGMAs, functions, extensions and ATTACHed databases.
  #openPooled(): Database {
    const d = this.#face === DB_SQLITE
      ? openDbSqliteCore(this.#path, this.#rawOptions)
      : new Database(this.#path, this.#rawOptions);
    try {
      for (const name of POOLED_PRAGMAS) {
        const v = this.query(`PRAGMA ${name}`).values()[0]?.[0];
        if (v !== undefined && v !== null) d.exec(`PRAGMA ${name} = ${typeof v === "string" ? `'${v}'` : String(v)}`);
      }
      for (const replay of this.#replay) replay(d);
      for (const row of this.query("PRAGMA database_list").values()) {
        const [, name, file] = row as [number, string, string];
        if (name === "main" || name === "temp") continue;
        const engine = file !== "" && this.stats(name).engine;
        const target = file === "" ? ":memory:" : engine ? toUri(file, [["vfs", "multiwriter"]]) : file;
        d.run("ATTACH ? AS ?", target, name);
        if (engine) d.fileControl(name, constants.MW_FCNTL_EVENT_LOOP, 1);
      }
      // Its transactions interleave with the others' on this thread: the engine must
      // never make it wait for one of them (the hot-spot turn).
      if (this.#engine) d.fileControl(constants.MW_FCNTL_EVENT_LOOP, 1);
    } catch (e) {
      d.close();
      throw e;
    }
    return d;
  }

  // ---- functions (lib/functions.ts), extensions, images (lib/images.ts), file controls ----

  /**
   * Defines (or replaces) a scalar SQL function. The options may come before the function
   * (as bun:sqlite and better-sqlite3 take them) or after it.
   *
   * @example
   * ```ts
   * db.function("double", { deterministic: true }, (x) => Number(x) * 2);
   * db.query("SELECT double(21) AS v").get(); // { v: 42 }
   * ```
   */
  function(name: string, fn: (...args: SQLValue[]) => unknown, options?: FunctionOptions): this;
  /** The same, with the options before the function (as bun:sqlite and better-sqlite3 take them). */
  function(name: string, options: FunctionOptions, fn: (...args: SQLValue[]) => unknown): this;
  function(
    name: string,
    a: ((...args: SQLValue[]) => unknown) | FunctionOptions,
    b?: ((...args: SQLValue[]) => unknown) | FunctionOptions,
  ): this {
    defineFunction(this.#conn, name, a, b);
    this.#replay.push((d) => d.function(name, a as FunctionOptions, b as (...args: SQLValue[]) => unknown));
    return this;
  }

  /**
   * Defines (or replaces) an aggregate SQL function, and a window function when `inverse`
   * is given. Each group starts from `start` (a value, or a function making one), `step`
   * folds each row into it, and `result` (default: the state itself) turns it into the
   * value returned.
   *
   * @example
   * ```ts
   * db.aggregate("product", { start: 1, step: (acc, x) => Number(acc) * Number(x) });
   * db.query("SELECT product(v) AS p FROM t").get();
   * ```
   */
  aggregate<S = unknown>(name: string, options: AggregateOptions<S>): this {
    defineAggregate(this.#conn, name, options);
    this.#replay.push((d) => d.aggregate(name, options));
    return this;
  }

  /** Loads a SQLite extension (a file path) with its default or a given entry point. */
  loadExtension(path: string | URL, entryPoint?: string): void {
    const db = this.#handle();
    const s = this.#sym;
    const file = toFilePath(path);
    // The loader maps the file: a truncated one would kill the process (SIGBUS). SQLite
    // tries the name as given, then with the platform's suffix: the same file is checked.
    const found = [file, `${file}.so`, `${file}.dylib`, `${file}.dll`].find((f) => existsSync(f));
    if (found !== undefined) checkLibraryFile(found);
    const errCell = new BigUint64Array(1);
    s.sqlite3_enable_load_extension(db, 1);
    try {
      const rc = s.sqlite3_load_extension(db, cstr(file), entryPoint ? cstr(entryPoint) : null, errCell);
      if (rc !== SQLITE_OK) {
        const p = this.#f.outPtr(errCell);
        const message = this.#f.isNull(p) ? this.#f.cstring(s.sqlite3_errmsg(db)) : this.#f.cstring(p);
        if (!this.#f.isNull(p)) s.sqlite3_free(p);
        throw new SQLiteError(`cannot load extension ${file}: ${message}`, rc);
      }
    } finally {
      s.sqlite3_enable_load_extension(db, 0); // keep load_extension() out of SQL
    }
    this.#replay.push((d) => d.loadExtension(path, entryPoint));
  }

  /** The database as bytes (the SQLite file format); a Buffer, as bun:sqlite returns. */
  serialize(schema = "main"): Uint8Array {
    return serialize(this.#conn, schema);
  }

  /**
   * Replaces a schema of this connection with an in-memory copy of the bytes; with
   * `readonly: true` the copy cannot be written.
   */
  deserialize(data: Uint8Array | ArrayBuffer, options: { schema?: string; readonly?: boolean } = {}): void {
    deserialize(this.#conn, data, options);
  }

  /** A new in-memory database holding the bytes. */
  static deserialize(
    data: Uint8Array | ArrayBuffer,
    options: boolean | (DatabaseOptions & { schema?: string }) = {},
  ): Database {
    const { open, schema, readonly } = imageOpenOptions(options);
    const db = new Database(":memory:", open);
    try {
      db.deserialize(data, { schema, readonly });
    } catch (e) {
      db.close();
      throw e;
    }
    return db;
  }

  /**
   * sqlite3_file_control: op on schema's file; returns SQLite's result code. Only the ops
   * whose argument size is known are passed (see lib/filecontrol.ts): a number becomes an
   * int (or a 64-bit int where the op takes one), a typed array or DataView must hold at
   * least the bytes the op writes; ops of unknown size are refused with a RangeError.
   */
  fileControl(op: number, arg?: number | bigint | ArrayBufferView | null, schema?: string): number;
  /** The same, the schema first (as bun:sqlite takes it too). */
  fileControl(schema: string, op: number, arg?: number | bigint | ArrayBufferView | null): number;
  fileControl(
    a: number | string,
    b?: number | bigint | ArrayBufferView | null,
    c?: number | bigint | ArrayBufferView | null | string,
  ): number {
    const [op, arg, schema = "main"] = (typeof a === "string" ? [b, c, a] : [a, b, c]) as [
      number,
      number | bigint | ArrayBufferView | null | undefined,
      string | undefined,
    ];
    const db = this.#handle();
    const buf = controlArgument(op, arg);
    return this.#sym.sqlite3_file_control(db, cstr(schema, "the schema name"), op, buf);
  }

  /**
   * Declares, for rebase (`rebase: true`), the rowids of the rows the transaction read or
   * wrote. Call it inside the transaction, after its first write (before, or outside a
   * transaction, it throws); calls add up until the transaction ends. A transaction that
   * declared promises that its statements touched no other rows: point statements by
   * rowid (INSERT ... VALUES, UPDATE/DELETE/SELECT ... WHERE rowid = ?), no range, scan,
   * join, trigger or foreign-key check. Only such a transaction's commit is merged when
   * it loses on other rows of a shared table leaf page; a wrong promise can commit write
   * skew or lose an update. Rowids are compared whatever their table (a match on another
   * table's row only refuses the merge).
   */
  declareReads(rowids: Iterable<number | bigint>, schema = "main"): void {
    const list: bigint[] = [];
    for (const r of rowids) {
      if (typeof r === "bigint" ? r < -(2n ** 63n) || r >= 2n ** 63n : !Number.isSafeInteger(r)) {
        throw new TypeError(`sqlite-multiwriter: declareReads() takes integer rowids, got ${describe(r)}`);
      }
      list.push(BigInt(r));
    }
    const db = this.#handle();
    const rc = this.#sym.mw_rebase_rows_declare(db, cstr(schema), new BigInt64Array(list), list.length);
    if (rc === SQLITE_NOTFOUND) {
      throw new SQLiteError(
        `sqlite-multiwriter: declareReads(): "${schema}" does not run on the engine (opened with multiwriter: false?)`,
        rc,
      );
    }
    if (rc === SQLITE_MISUSE) {
      throw new SQLiteError(
        "sqlite-multiwriter: declareReads() belongs inside a transaction, after its first write " +
          "(the declaration covers that write transaction only)",
        rc,
      );
    }
    if (rc !== SQLITE_OK) throw this.#error(rc);
  }

  /** The engine's counters for this connection, plus the retries of transaction(). */
  stats(schema = "main"): EngineStats {
    const db = this.#handle();
    const out = new BigInt64Array(STAT_SLOTS);
    const rc = this.#sym.mw_stats(db, cstr(schema), out, STAT_SLOTS);
    if (rc !== SQLITE_OK) throw this.#error(rc);
    return statsFrom(out, this.#conn.tx);
  }

  /**
   * Runs a tagged template as one statement, the interpolated values bound as parameters
   * (never pasted into the SQL), and returns its rows.
   *
   * @example
   * ```ts
   * const rows = db.sql<{ name: string }>`SELECT name FROM users WHERE id = ${id}`;
   * ```
   */
  sql<Row extends object = Record<string, SQLValue>>(strings: TemplateStringsArray, ...values: BindValue[]): Row[] {
    if (!Array.isArray(strings)) throw new TypeError("sqlite-multiwriter: sql is a template tag: db.sql`SELECT ...`");
    let text = strings[0];
    for (let i = 1; i < strings.length; i++) text += "?" + strings[i];
    return this.query<Row>(text).all(...values);
  }

  /**
   * Copies a schema of this database, page by page and consistent as of one snapshot,
   * into `dest`: another open Database, or a path, which is created (or overwritten) as a
   * plain SQLite file. This is the way to back up an engine database while it is in use;
   * copying its files is not. Returns the number of pages copied.
   *
   * @example
   * ```ts
   * db.backup("backup.db");
   * ```
   */
  backup(dest: string | URL | Database, options: { schema?: string; destSchema?: string } = {}): number {
    return backup(this.#conn, options, () => {
      if (dest instanceof Database) return { target: dest.#conn, close: () => {} };
      const owned = new Database(dest, { multiwriter: false });
      return { target: owned.#conn, close: () => owned.close() };
    });
  }

  /**
   * Opens one blob value for incremental reads and writes (sqlite3_blob_open); see SQLBlob.
   *
   * @example
   * ```ts
   * const blob = db.openBlob({ table: "files", column: "data", row: 1, readonly: true });
   * const head = new Uint8Array(16);
   * blob.readSync(0, head);
   * blob.close();
   * ```
   */
  openBlob(options: BlobOpenOptions): SQLBlob {
    const db = this.#handle();
    if (typeof options !== "object" || options === null) throw new TypeError("sqlite-multiwriter: openBlob() takes { table, column, row }");
    const { table, column, row } = options;
    if (typeof row !== "number" && typeof row !== "bigint") throw new TypeError("sqlite-multiwriter: openBlob() row must be a number or bigint");
    const f = this.#f;
    const schema = cstr(options.db ?? "main", "the schema name");
    const tableName = cstr(table, "the table name");
    const columnName = cstr(column, "the column name");
    const open = (): Ptr => {
      const cell = new BigUint64Array(1);
      const rc = this.#sym.sqlite3_blob_open(
        this.#handle(), schema, tableName, columnName, row, options.readonly ? 0 : 1, cell,
      );
      const h = f.outPtr(cell);
      if (rc !== SQLITE_OK) {
        const err = this.#error(rc);
        if (!f.isNull(h)) this.#sym.sqlite3_blob_close(h);
        throw err;
      }
      return h;
    };
    const h = open();
    const host: BlobHost = {
      ffi: f,
      error: (code) => this.#error(code),
      forget: (b) => this.#blobs.delete(b),
      reopen: open,
      autocommit: () => this.#sym.sqlite3_get_autocommit(db) !== 0,
      totalChanges: () => BigInt(this.#sym.sqlite3_total_changes64(db)),
      retryLost: (code, attempt, since) => retryLost(this.#conn, null, code, attempt, since),
    };
    const blob = new SQLBlob(host, h, !options.readonly);
    this.#blobs.set(blob, !options.readonly);
    return blob;
  }

  // ---- closing ----

  /** Finalizes every statement and closes the connection. Idempotent. */
  close(): void {
    const db = this.#db;
    if (db === null) return;
    // SQLite is inside a statement that called us: closing now would free it under itself.
    if (this.#conn.inCallback > 0) throw misuse("cannot close the database from inside a custom function or progress handler");
    // transactionAsync runs in flight roll back; their next use of tx throws.
    this.#pool?.close();
    this.#pool = null;
    // A COMMIT running on an engine thread (transactionAsync) ends first: finalizing and
    // closing would use the connection under it.
    if (this.#asyncInFlight > 0) this.#sym.mw_exec_wait(db);
    for (const stmt of [...this.#statements]) stmt.finalize();
    // A writable blob commits at its close: an error there (its writes lost) is thrown once
    // the connection is closed, never swallowed. A read-only blob's close only repeats an
    // error already thrown (a refused write).
    let blobError: unknown = undefined;
    for (const [blob, writable] of [...this.#blobs]) {
      try {
        blob.close();
      } catch (e) {
        if (writable) blobError ??= e;
      }
    }
    this.#cache.clear();
    this.#internal.clear();
    this.#db = null;
    openDatabases.delete(this);
    const rc = this.#sym.sqlite3_close_v2(db);
    for (const cb of this.#callbacks.splice(0)) cb.close();
    if (rc !== SQLITE_OK) throw new SQLiteError("cannot close the database", rc);
    if (blobError !== undefined) throw blobError;
  }

  /** Closes the database at the end of a `using` block. */
  [Symbol.dispose](): void {
    this.close();
  }

  // ---- library facts ----

  /** The engine's version (mw_version()). */
  static get engineVersion(): string {
    return mwVersion();
  }

  /** SQLite's version, e.g. "3.54.1". */
  static get sqliteVersion(): string {
    return sqliteVersion();
  }

  /** SQLite's source id. */
  static get sourceId(): string {
    return sourceId();
  }
}

// The @db/sqlite face's core: the constructor's third parameter, left out of its public
// signature, chooses @db/sqlite's rules. The symbol never leaves this module.
const DB_SQLITE: unique symbol = Symbol("sqlite-multiwriter: the @db/sqlite face's core");
const CoreConstructor = Database as unknown as new (
  path: string | URL,
  options: DatabaseOptions | number,
  face: typeof DB_SQLITE,
) => Database;

/**
 * @internal The core Database of the JSR entry's @db/sqlite face: not bun:sqlite's rules
 * where the two drivers differ (integers beyond 2^53 always exact, unknown parameter names
 * and wrong parameter counts refused, ...).
 */
// The per-connection PRAGMAs a pooled connection of transactionAsync copies from its owner.
const POOLED_PRAGMAS = [
  "foreign_keys", "synchronous", "busy_timeout", "recursive_triggers", "cache_size", "temp_store",
  "trusted_schema", "automatic_index", "cell_size_check", "query_only", "secure_delete",
  "reverse_unordered_selects", "defer_foreign_keys", "ignore_check_constraints",
];

export function openDbSqliteCore(path: string | URL, options: DatabaseOptions | number): Database {
  return new CoreConstructor(path, options, DB_SQLITE);
}

// The flags of sqlite3_open_v2: URI filenames, one thread per connection, extended codes.
function openFlags(readonly: boolean, create: boolean): number {
  const k = constants;
  const access = readonly ? k.SQLITE_OPEN_READONLY : k.SQLITE_OPEN_READWRITE | (create ? k.SQLITE_OPEN_CREATE : 0);
  return access | k.SQLITE_OPEN_URI | k.SQLITE_OPEN_NOMUTEX | k.SQLITE_OPEN_EXRESCODE;
}

// SQLite prefixes the error of an extension registered to load with every connection (the
// engine is one) with "automatic extension loading failed: ": the cause leads instead.
const AUTO_EXTENSION = "automatic extension loading failed: ";
function causeFirst(message: string): string {
  return message.startsWith(AUTO_EXTENSION)
    ? `${message.slice(AUTO_EXTENSION.length)} (while the engine was set up for this connection)`
    : message;
}

// SQLite stops reading SQL at a NUL: what follows would be dropped without a word.
function checkSql(sql: unknown): asserts sql is string {
  if (typeof sql !== "string") throw new TypeError(`sqlite-multiwriter: SQL must be a string, got ${describe(sql)}`);
  if (sql.includes("\0")) throw new TypeError("sqlite-multiwriter: the SQL contains a NUL character");
}

/** The engine's version, e.g. "0.1.0". */
export function mwVersion(): string {
  const f = loadFfi();
  return f.cstring(f.sym.mw_version());
}

/** SQLite's version, e.g. "3.54.1". */
export function sqliteVersion(): string {
  const f = loadFfi();
  return f.cstring(f.sym.sqlite3_libversion());
}

/** SQLite's source id (date, time and hash of the check-in). */
export function sourceId(): string {
  const f = loadFfi();
  return f.cstring(f.sym.sqlite3_sourceid());
}

/**
 * True when the SQL ends with a complete statement (sqlite3_complete): what a shell checks
 * before it runs a line.
 *
 * @example
 * ```ts
 * isComplete("SELECT 1;"); // true
 * isComplete("SELECT 'a"); // false
 * ```
 */
export function isComplete(sql: string): boolean {
  return loadFfi().sym.sqlite3_complete(cstr(sql, "the SQL")) !== 0;
}

/** The file the native library was loaded from. */
export function libraryPath(): string {
  return loadFfi().path;
}

