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
}

const CHUNK = 64 * 1024;

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

  /** @internal Made by Database.openBlob(). */
  constructor(host: BlobHost, handle: Ptr) {
    this.#host = host;
    this.#h = handle;
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

  /** Closes the blob. Idempotent. */
  close(): void {
    const h = this.#h;
    if (h === null) return;
    this.#h = null;
    this.#host.forget(this);
    const rc = this.#host.ffi.sym.sqlite3_blob_close(h);
    if (rc !== SQLITE_OK) throw this.#host.error(rc);
  }

  /** Closes the blob at the end of a `using` block. */
  [Symbol.dispose](): void {
    this.close();
  }
}
