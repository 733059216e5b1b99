// lib/async.ts: db.transactionAsync(fn): transactions that span awaits, many in flight on
// one event loop. Each run borrows a connection of its own from a pool the Database owns
// (the engine takes no lock before COMMIT, so each holds its write transaction on its own
// snapshot and only the commit decides), runs fn(tx, ...args), commits, and runs fn again
// on a fresh snapshot when the commit lost (SQLITE_BUSY_SNAPSHOT), as transaction() does,
// waiting with timers instead of blocking the thread. Without the engine (multiwriter:
// false, or an in-memory database) runs are serialized: one connection, one at a time.
// Owns the pool, the wait queue and the tx handles. Never touches SQLite itself: it runs
// statements through pooled Database objects.
import type { Database } from "./database.ts";
import type { SQLiteError } from "./error.ts";
import type { Params, RunResult, Statement } from "./statement.ts";
import { internalsOf } from "./internals.ts";
import { backoffMs, isBusy } from "./transaction.ts";
import { type Hold, RetryTurn } from "./turn.ts";
import { type BindParams, type BindValue, misuse, type SQLValue } from "./values.ts";

/** Options of db.transactionAsync(fn, options). */
export interface AsyncTransactionOptions {
  /** Cancels a run: it rolls back and rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Most attempts of one call (default: the database's maxAttempts). */
  maxAttempts?: number;
}

/** The handle an async transaction function gets: the statement API of its own connection. */
export interface AsyncTransaction {
  /** A cached prepared statement of this transaction's connection. */
  query<Row extends object = Record<string, SQLValue>>(sql: string): Statement<Row>;
  /** A new prepared statement of this transaction's connection. */
  prepare<Row extends object = Record<string, SQLValue>>(sql: string, params?: BindValue[] | BindParams): Statement<Row>;
  /** Runs one or more statements with the parameters given (for the first). */
  run(sql: string, ...params: Params): RunResult;
  /** The same as run(). */
  exec(sql: string, ...params: Params): RunResult;
  /**
   * Declares the rowids this transaction read and wrote (with `rebase: true`), so that a
   * commit that lost only because other rows of the same pages changed is merged instead
   * of run again (see Database.declareReads). After the first write.
   */
  declareReads(rowids: Iterable<number | bigint>, schema?: string): void;
  /** 1 on the first run of fn, then 2, 3, ... when a lost commit made it run again. */
  readonly attempt: number;
  /** The AbortSignal given, if any. */
  readonly signal: AbortSignal | undefined;
}

/** What the pool needs of its Database. */
export interface PoolHost {
  /** Opens a connection like the owner's, set up as it is (functions, pragmas, ATTACHes). */
  open(): Database;
  /** The owner itself, where runs share it (an in-memory database). */
  readonly shared: Database | null;
  /** At most this many connections (1 without the engine). */
  readonly max: number;
  /** The owner's maxAttempts. */
  readonly maxAttempts: number;
}

const settled = "sqlite-multiwriter: this transaction handle was used after its transactionAsync function " +
  "settled (keep the statements' use inside the function, and await every call that uses them)";

function closedError(): SQLiteError {
  return misuse("Database has closed: the transactionAsync run in flight was rolled back");
}

function isThenable<R>(v: Promise<R> | R): v is Promise<R> {
  return typeof v === "object" && v !== null && typeof (v as { then?: unknown }).then === "function";
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** The connections of transactionAsync and the runs waiting for one. */
export class AsyncPool {
  readonly #host: PoolHost;
  readonly #idle: Database[] = [];
  readonly #all = new Set<Database>();
  readonly #waiting: { resolve: (d: Database) => void; reject: (e: unknown) => void }[] = [];
  readonly #committing = new Set<Database>(); // COMMIT running (on an engine thread at FULL)
  readonly #turn = new RetryTurn(); // runs that lost their commit run again in turn
  #sharedBusy = false;
  #closed = false;

  constructor(host: PoolHost) {
    this.#host = host;
  }

  /** Connections open now (idle or in a run). */
  get size(): number {
    return this.#host.shared ? 1 : this.#all.size;
  }

  /** An idle connection, or the shared one when free, at once; else null. */
  #acquireNow(): Database | null {
    if (this.#closed || this.#waiting.length > 0) return null;
    const shared = this.#host.shared;
    if (shared !== null) {
      if (this.#sharedBusy) return null;
      this.#sharedBusy = true;
      return shared;
    }
    return this.#idle.pop() ?? null;
  }

  acquire(): Promise<Database> {
    if (this.#closed) return Promise.reject(closedError());
    const shared = this.#host.shared;
    if (shared !== null && !this.#sharedBusy) {
      this.#sharedBusy = true;
      return Promise.resolve(shared);
    }
    if (shared === null) {
      const idle = this.#idle.pop();
      if (idle !== undefined) return Promise.resolve(idle);
      if (this.#all.size < this.#host.max) {
        const d = this.#host.open();
        this.#all.add(d);
        return Promise.resolve(d);
      }
    }
    return new Promise((resolve, reject) => this.#waiting.push({ resolve, reject }));
  }

  release(d: Database): void {
    if (this.#closed) return;
    if (d.inTransaction) d.exec("ROLLBACK");
    const next = this.#waiting.shift();
    if (next !== undefined) return next.resolve(d);
    if (d === this.#host.shared) this.#sharedBusy = false;
    else this.#idle.push(d);
  }

  /** Rolls back and closes every pooled connection; waiting runs reject. */
  close(): void {
    this.#closed = true;
    this.#turn.drain();
    for (const w of this.#waiting.splice(0)) w.reject(closedError());
    for (const d of this.#all) {
      // A connection whose COMMIT runs elsewhere is not touched: its close() waits for it.
      try {
        if (!this.#committing.has(d) && d.inTransaction) d.exec("ROLLBACK");
      } catch { /* closing anyway */ }
      d.close();
    }
    this.#all.clear();
    this.#idle.length = 0;
    const shared = this.#host.shared;
    if (shared !== null && !this.#committing.has(shared) && shared.open && shared.inTransaction) shared.exec("ROLLBACK");
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** One call of a transactionAsync function: attempts until it commits or fails. */
  async run<A extends unknown[], R>(
    fn: (tx: AsyncTransaction, ...args: A) => Promise<R> | R,
    options: AsyncTransactionOptions,
    args: A,
  ): Promise<R> {
    const signal = options.signal;
    const max = options.maxAttempts ?? this.#host.maxAttempts;
    if (signal?.aborted) throw abortReason(signal);
    // No await where nothing waits: each costs a turn of the microtask queue, a fair part
    // of a short transaction's CPU at synchronous=NORMAL, where COMMIT runs on the loop.
    const conn = this.#acquireNow() ?? await this.acquire();
    let hold: Hold | null = null; // the retry turn (turn.ts)
    try {
      for (let attempt = 1;; attempt++) {
        if (attempt === 1) {
          const gate = this.#turn.admit();
          if (gate !== null) hold = await gate;
        }
        else if (hold === null) hold = await this.#turn.take();
        else hold.lost(); // lost again while holding the turn
        if (this.#closed) throw closedError();
        if (signal?.aborted) throw abortReason(signal);
        const handle = new TxHandle(conn, attempt, signal, () => this.#closed);
        try {
          internalsOf(conn).internalRun("BEGIN");
          const out = fn(handle.api, ...args);
          const result = isThenable(out) ? await out : out;
          handle.check();
          handle.end(); // nothing of tx runs while the connection commits elsewhere
          this.#committing.add(conn);
          try {
            const committing = internalsOf(conn).commitAsync();
            if (committing !== null) await committing;
          } finally {
            this.#committing.delete(conn);
          }
          return result;
        } catch (e) {
          if (!this.#closed && conn.open && conn.inTransaction) conn.exec("ROLLBACK");
          if (this.#closed) throw closedError();
          if (signal?.aborted) throw abortReason(signal);
          if (!isBusy(e) || attempt >= max) throw e;
          await delay(backoffMs(attempt));
          if (this.#closed) throw closedError();
          if (signal?.aborted) throw abortReason(signal);
        } finally {
          handle.end();
        }
      }
    } finally {
      hold?.release();
      this.release(conn);
    }
  }

  /** Runs waiting for the retry turn or behind it (tests). */
  get turnWaiting(): number {
    return this.#turn.waiting;
  }
}

/** The tx given to one attempt of fn; dead once the attempt ends. */
class TxHandle {
  readonly api: AsyncTransaction;
  #live = true;
  readonly #conn: Database;
  readonly #signal: AbortSignal | undefined;
  readonly #poolClosed: () => boolean;

  constructor(conn: Database, attempt: number, signal: AbortSignal | undefined, poolClosed: () => boolean) {
    this.#conn = conn;
    this.#signal = signal;
    this.#poolClosed = poolClosed;
    this.api = {
      query: (sql) => this.#guard(this.#use().query(sql)),
      prepare: (sql, params) => this.#guard(this.#use().prepare(sql, params)),
      run: (sql, ...params) => this.#use().run(sql, ...params),
      exec: (sql, ...params) => this.#use().exec(sql, ...params),
      declareReads: (rowids, schema) => this.#use().declareReads(rowids, schema),
      attempt,
      signal,
    };
  }

  /** Throws when the attempt may not go on: closed database, aborted, or settled. */
  check(): void {
    if (this.#poolClosed()) throw closedError();
    if (this.#signal?.aborted) throw abortReason(this.#signal);
    if (!this.#live) throw new TypeError(settled);
  }

  end(): void {
    this.#live = false;
  }

  #use(): Database {
    this.check();
    return this.#conn;
  }

  // A statement whose every method checks the handle first (its methods run on the
  // statement itself: its private fields are not reachable through a proxy).
  #guard<S extends object>(stmt: S): S {
    return new Proxy(stmt, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== "function") {
          this.check();
          return value;
        }
        return (...a: unknown[]) => {
          this.check();
          return (value as (...x: unknown[]) => unknown).apply(target, a);
        };
      },
    });
  }
}
