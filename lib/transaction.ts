// lib/transaction.ts: db.transaction(): BEGIN/COMMIT/ROLLBACK, savepoints when nested, the
// run again of a transaction whose commit was lost (SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT) with
// a jittered backoff, and the same retry for a plain statement in autocommit. Never opens,
// prepares or closes anything itself: it runs statements through the connection's
// internalRun() (see lib/internals.ts).
import { SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT } from "./codes.ts";
import type { Database } from "./database.ts";
import { SQLiteError } from "./error.ts";
import type { Ptr } from "./ffi/index.ts";
import type { Internals } from "./internals.ts";

/** A transaction function made by db.transaction(fn), plus its variants. */
export interface TransactionFunction<A extends unknown[], R> {
  (...args: A): R;
  /** BEGIN DEFERRED (the default). */
  deferred: (...args: A) => R;
  /** The same as calling it (BEGIN DEFERRED; the @db/sqlite name). */
  default: (...args: A) => R;
  /** BEGIN IMMEDIATE. */
  immediate: (...args: A) => R;
  /** BEGIN EXCLUSIVE. */
  exclusive: (...args: A) => R;
  /** The database the transaction runs on (bun:sqlite's `database`). */
  database: Database;
}

type Mode = "deferred" | "immediate" | "exclusive";

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Jittered exponential backoff: 5 us doubling up to 2 ms, a random point in the upper half. */
export function backoffMs(attempt: number): number {
  const cap = Math.min(0.005 * 2 ** Math.min(attempt - 1, 20), 2);
  return cap / 2 + Math.random() * (cap / 2);
}

/** A lost commit or a lock: SQLITE_BUSY and its extended codes (BUSY_SNAPSHOT, ...). */
export function isBusy(e: unknown): boolean {
  return e instanceof SQLiteError && e.errcode === SQLITE_BUSY;
}

/**
 * A plain statement (autocommit before and after) that lost its commit is run again
 * within the busy timeout, with the backoff of transaction(); see Connection.retryLost.
 */
export function retryLost(c: Internals, h: Ptr | null, rc: number, attempt: number, since: number): boolean {
  const db = c.db;
  if (db === null || c.pending !== undefined) return false;
  const s = c.sym;
  if ((rc & 0xff) !== SQLITE_BUSY || s.sqlite3_extended_errcode(db) !== SQLITE_BUSY_SNAPSHOT) return false;
  if (s.sqlite3_get_autocommit(db) === 0) return false; // inside BEGIN: the caller's to handle
  checkNotPinned(c, h);
  if (Date.now() - since >= c.options.busyTimeout) return false;
  sleep(backoffMs(attempt));
  return true;
}

// Another statement of this connection that is still running (an unfinished iterate(),
// or the statement whose custom function is calling us) holds the connection's read
// snapshot: a lost commit run again sees the same old snapshot and loses again, forever.
// Said at once instead of spinning until the timeout or maxAttempts.
function checkNotPinned(c: Internals, except: Ptr | null): void {
  const db = c.db;
  if (db === null) return;
  const f = c.ffi;
  const s = f.sym;
  const exceptAt = except === null ? -1n : f.address(except);
  for (let p = s.sqlite3_next_stmt(db, f.NULL); !f.isNull(p); p = s.sqlite3_next_stmt(db, p)) {
    if (f.address(p) === exceptAt || s.sqlite3_stmt_busy(p) === 0) continue;
    const sql = f.cstring(s.sqlite3_sql(p));
    throw new SQLiteError(
      "another writer committed first and this transaction was rolled back; running it again " +
        "cannot succeed while another statement of this connection is still open, because it " +
        `holds the old snapshot (${c.inCallback > 0 ? "the statement calling this custom function" : "an unfinished iterate()"}: ${sql}). ` +
        "Finish or close that statement (end the loop, or call the iterator's return()) first",
      SQLITE_BUSY_SNAPSHOT,
      sql,
    );
  }
}

// True while the connection is open inside a transaction.
function inOpenTransaction(c: Internals): boolean {
  return c.db !== null && c.sym.sqlite3_get_autocommit(c.db) === 0;
}

function rollback(c: Internals): void {
  if (inOpenTransaction(c)) {
    try {
      c.internalRun("ROLLBACK");
    } catch { /* the transaction is gone either way */ }
  }
}

function outer<A extends unknown[], R>(c: Internals, mode: Mode, fn: (...args: A) => R, args: A): R {
  const max = c.options.maxAttempts;
  const tx = c.tx;
  for (let attempt = 1;; attempt++) {
    try {
      c.internalRun(`BEGIN ${mode.toUpperCase()}`);
      tx.depth = 1;
      const result = fn(...args);
      if (result !== null && typeof (result as { then?: unknown })?.then === "function") {
        throw new TypeError(
          "sqlite-multiwriter: a transaction function must be synchronous (it returned a Promise)",
        );
      }
      c.internalRun("COMMIT");
      tx.depth = 0;
      tx.lastAttempts = attempt;
      return result;
    } catch (e) {
      tx.depth = 0;
      rollback(c);
      if (isBusy(e) && attempt < max && c.db !== null) {
        tx.lastAttempts = attempt;
        if ((e as SQLiteError).errno === SQLITE_BUSY_SNAPSHOT) checkNotPinned(c, null);
        tx.retries++;
        sleep(backoffMs(attempt));
        continue;
      }
      tx.lastAttempts = attempt;
      throw e;
    }
  }
}

function savepoint<A extends unknown[], R>(c: Internals, fn: (...args: A) => R, args: A): R {
  const name = `mw_sp_${c.tx.depth}`;
  c.internalRun(`SAVEPOINT ${name}`);
  c.tx.depth++;
  try {
    const result = fn(...args);
    c.internalRun(`RELEASE ${name}`);
    return result;
  } catch (e) {
    if (inOpenTransaction(c)) {
      try {
        c.internalRun(`ROLLBACK TO ${name}`);
        c.internalRun(`RELEASE ${name}`);
      } catch { /* the outer transaction was rolled back by SQLite */ }
    }
    throw e;
  } finally {
    c.tx.depth--;
  }
}

/** db.transaction(fn): see Database.transaction. */
export function transaction<A extends unknown[], R>(c: Internals, fn: (...args: A) => R): TransactionFunction<A, R> {
  if (typeof fn !== "function") throw new TypeError("Expected first argument to be a function (sqlite-multiwriter: transaction() takes a function)");
  const make = (mode: Mode) => (...args: A): R => {
    if (c.database.inTransaction) return savepoint(c, fn, args);
    return outer(c, mode, fn, args);
  };
  const tx = make("deferred") as TransactionFunction<A, R>;
  // As bun:sqlite defines them: the variants not enumerable, `database` enumerable.
  Object.defineProperties(tx, {
    deferred: { value: tx },
    default: { value: tx },
    immediate: { value: make("immediate") },
    exclusive: { value: make("exclusive") },
    database: { value: c.database, enumerable: true },
  });
  return tx;
}
