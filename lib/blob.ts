// lib/blob.ts: incremental I/O on one blob value (sqlite3_blob_*): reads and writes at an
// offset, and Web streams over it. Every offset and length is checked against the blob's
// size before C sees it (C would read or write past the buffer otherwise).
import { SQLITE_OK } from "./codes.ts";
import { SQLiteError } from "./error.ts";
import type { Ffi, Ptr } from "./ffi/index.ts";
import { asBytes } from "./values.ts";

/** Where the blob is: table, column, rowid (and schema). */
export interface BlobOpenOptions {
  /** The table. */
  table: string;
  /** The column. */
  column: string;
  /** The rowid of the row. */
  row: number | bigint;
  /** Open read-only (default false). */
  readonly?: boolean;
  /** The schema (default "main"). */
  db?: string;
}

/** What a SQLBlob needs of its connection (implemented by Database). */
export interface BlobHost {
  readonly ffi: Ffi;
  error(rc: number): Error;
  forget(blob: SQLBlob): void;
  /** Opens the same blob again, at the newest state; throws as openBlob() does. */
  reopen(): Ptr;
  /** True outside BEGIN ... COMMIT (sqlite3_get_autocommit). */
  autocommit(): boolean;
  /** sqlite3_total_changes64 of the connection. */
  totalChanges(): bigint;
  /** As for a plain statement whose commit lost: true to run it again (the backoff slept),
   * false to report rc; throws when running again could never succeed. */
  retryLost(rc: number, attempt: number, since: number): boolean;
}

/** The size of the chunks of the iterator and of `readable` (as @db/sqlite's). */
const CHUNK = 16 * 1024;
/** The most bytes of writes a blob keeps to run them again after a lost commit. */
const REPLAY_MAX = 64 * 1024 * 1024;

/**
 * An open blob value. Its size is fixed (write with zeroblob(n) first to make room); it
 * stays open until close() or the database's close().
 *
 * @example
 * ```ts
 * db.run("INSERT INTO files(id, data) VALUES (1, zeroblob(5))");
 * const blob = db.openBlob({ table: "files", column: "data", row: 1 });
 * blob.writeSync(0, new TextEncoder().encode("hello"));
 * blob.close();
 * ```
 */
export class SQLBlob {
  readonly #host: BlobHost;
  #h: Ptr | null;
  // A writable blob opened outside BEGIN is a transaction of its own that commits at
  // close(), where the engine can refuse it (another writer committed to its page first).
  // Its writes are kept to run them again then, as a plain statement is run again: only
  // while they are blind overwrites (no read of the blob before a write) and nothing else
  // changed on the connection meanwhile (those changes commit and roll back with it).
  readonly #commits: boolean; // its close() commits: writable, opened outside BEGIN
  #replay: { offset: number; bytes: Uint8Array }[] | null;
  #replayBytes = 0;
  #read = false;
  readonly #changesAtOpen: bigint;
  readonly #size: number;

  /** @internal Made by Database.openBlob(). */
  constructor(host: BlobHost, handle: Ptr, writable: boolean) {
    this.#host = host;
    this.#h = handle;
    this.#commits = writable && host.autocommit();
    this.#replay = this.#commits ? [] : null;
    this.#changesAtOpen = host.totalChanges();
    this.#size = host.ffi.sym.sqlite3_blob_bytes(handle);
  }

  #handle(): Ptr {
    if (this.#h === null) throw new SQLiteError("the blob is closed", 21);
    return this.#h;
  }

  /** The size in bytes. */
  get byteLength(): number {
    return this.#host.ffi.sym.sqlite3_blob_bytes(this.#handle());
  }

  #range(offset: number, n: number): void {
    const size = this.byteLength;
    if (!Number.isInteger(offset) || offset < 0 || offset + n > size) {
      throw new RangeError(`sqlite-multiwriter: ${n} bytes at offset ${offset} are outside the blob of ${size} bytes`);
    }
  }

  /** Reads into `buffer` (all of it) from `offset`; returns the bytes read. */
  readSync(offset: number, buffer: Uint8Array): number {
    const h = this.#handle();
    const bytes = asBytes(buffer); // the true length, once
    this.#range(offset, bytes.length);
    if (bytes.length === 0) return 0;
    const rc = this.#host.ffi.sym.sqlite3_blob_read(h, bytes, bytes.length, offset);
    if (rc !== SQLITE_OK) throw this.#host.error(rc);
    this.#read = true;
    return bytes.length;
  }

  /** Writes all of `data` at `offset` (within the blob's size); returns the bytes written. */
  writeSync(offset: number, data: Uint8Array): number {
    const h = this.#handle();
    const bytes = asBytes(data);
    this.#range(offset, bytes.length);
    if (bytes.length === 0) return 0;
    const rc = this.#host.ffi.sym.sqlite3_blob_write(h, bytes, bytes.length, offset);
    if (rc !== SQLITE_OK) throw this.#host.error(rc);
    if (this.#replay !== null) {
      // A write after a read may depend on what was read: not run again blindly.
      this.#replayBytes += bytes.length;
      if (this.#read || this.#replayBytes > REPLAY_MAX) this.#replay = null;
      else this.#replay.push({ offset, bytes: bytes.slice() });
    }
    return bytes.length;
  }

  /** The whole blob as a stream of chunks. */
  get readable(): ReadableStream<Uint8Array> {
    let at = 0;
    return new ReadableStream<Uint8Array>({
      pull: (controller) => {
        const n = Math.min(CHUNK, this.byteLength - at);
        if (n <= 0) return controller.close();
        const chunk = new Uint8Array(n);
        this.readSync(at, chunk);
        at += n;
        controller.enqueue(chunk);
      },
    });
  }

  /** A stream that writes its chunks one after another from offset 0. */
  get writable(): WritableStream<Uint8Array> {
    let at = 0;
    return new WritableStream<Uint8Array>({
      write: (chunk) => {
        at += this.writeSync(at, chunk);
      },
    });
  }

  /** The blob's chunks, read one after another. */
  *[Symbol.iterator](): IterableIterator<Uint8Array> {
    for (let at = 0; at < this.byteLength; at += CHUNK) {
      const chunk = new Uint8Array(Math.min(CHUNK, this.byteLength - at));
      this.readSync(at, chunk);
      yield chunk;
    }
  }

  /**
   * Closes the blob. Idempotent. Opened for writing outside BEGIN ... COMMIT, the blob
   * commits here: a commit that lost to another writer is run again within the busy
   * timeout when its writes can be (see the class comment), else the error says what was
   * rolled back.
   */
  close(): void {
    const h = this.#h;
    if (h === null) return;
    this.#h = null;
    this.#host.forget(this);
    const sym = this.#host.ffi.sym;
    let rc = sym.sqlite3_blob_close(h);
    if (rc === SQLITE_OK) return;
    // The error as SQLite reports it now (a failed reopen below would change its message).
    let err = this.#host.error(rc);
    const others = this.#host.totalChanges() - this.#changesAtOpen;
    let why = !this.#commits
      ? ""
      : others !== 0n
      ? `the blob's writes and the ${others} row change(s) made on this connection while it was open were rolled back`
      : this.#replay === null
      ? (this.#read
        ? "the blob's writes were rolled back (not run again: they followed a read of the blob)"
        : "the blob's writes were rolled back (too many bytes written to keep them for running again)")
      : "the blob's writes were rolled back";
    const replay = others === 0n ? this.#replay : null;
    const since = Date.now();
    for (let attempt = 1; replay !== null && this.#host.retryLost(rc, attempt, since); attempt++) {
      let again: Ptr;
      try {
        again = this.#host.reopen();
      } catch (e) {
        why = `the blob's writes were rolled back (the row changed: ${e instanceof Error ? e.message : String(e)})`;
        break;
      }
      let wrc = SQLITE_OK;
      if (sym.sqlite3_blob_bytes(again) !== this.#size) {
        why = "the blob's writes were rolled back (another writer changed the value's size)";
        wrc = -1;
      }
      for (const w of replay) {
        if (wrc !== SQLITE_OK) break;
        wrc = sym.sqlite3_blob_write(again, w.bytes, w.bytes.length, w.offset);
      }
      if (wrc !== SQLITE_OK) {
        const e = wrc === -1 ? null : this.#host.error(wrc);
        sym.sqlite3_blob_close(again);
        if (e !== null) throw e;
        break;
      }
      rc = sym.sqlite3_blob_close(again);
      if (rc === SQLITE_OK) return;
      err = this.#host.error(rc);
    }
    if (why !== "") err.message += `: ${why}`;
    throw err;
  }

  /** Closes the blob at the end of a `using` block. */
  [Symbol.dispose](): void {
    this.close();
  }
}
