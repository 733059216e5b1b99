// lib/internals.ts: what the concern modules of a connection (transaction.ts, functions.ts,
// images.ts) reach of it. Database builds one such object per connection and hands it to
// them (statements see the same object as their Connection); it never appears on the
// public surface. Types, and the registry that finds a connection's internals.
import type { NativeCallback, Ptr } from "./ffi/index.ts";
import type { ResolvedOptions } from "./options.ts";
import type { Connection } from "./statement.ts";
import type { ValueMode } from "./values.ts";

/** transaction()'s bookkeeping on a connection. */
export interface TransactionState {
  /** 0 outside transaction(); 1 in its transaction; +1 per nested savepoint. */
  depth: number;
  /** Transactions run again by transaction() since the connection opened. */
  retries: number;
  /** Attempts of the last transaction() call. */
  lastAttempts: number;
}

/** A connection's internals, as the concern modules use them. */
export interface Internals extends Connection {
  /** The handle, or null once closed (never throws; handle() does). */
  readonly db: Ptr | null;
  readonly options: ResolvedOptions;
  /** How values are read (bun:sqlite's or @db/sqlite's rules, safeIntegers). */
  readonly mode: ValueMode;
  /** The JS callbacks SQLite may call until close() (any one makes sym the safe symbols). */
  readonly callbacks: NativeCallback[];
  /** What a custom function or progress handler threw: error() reports it instead of SQLite's. */
  pending: unknown;
  /** Custom functions and progress handlers SQLite is running now (close() is refused then). */
  inCallback: number;
  readonly tx: TransactionState;
  /** Runs one of the library's own statements (BEGIN, COMMIT, SAVEPOINT, ...), cached apart from query()'s. */
  internalRun(sql: string): void;
  /**
   * transactionAsync's COMMIT: off this thread when it waits for a sync (synchronous FULL or
   * EXTRA): the event loop goes on meanwhile, and commits in flight together share the
   * sync. Rejects as COMMIT would throw. Runs COMMIT here below FULL (nothing to wait for)
   * and where it cannot run elsewhere (a progress handler is set: SQLite would call it
   * from another thread).
   */
  commitAsync(): Promise<void> | null;
}

const registry = new WeakMap<object, Internals>();

/** Records a connection's internals (its constructor does). */
export function register(owner: object, c: Internals): void {
  registry.set(owner, c);
}

/** The internals of a connection of this library. */
export function internalsOf(owner: object): Internals {
  const c = registry.get(owner);
  if (c === undefined) throw new TypeError("sqlite-multiwriter: not a Database of this library");
  return c;
}
