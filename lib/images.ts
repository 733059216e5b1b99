// lib/images.ts: a database as bytes and copies of it: serialize(), deserialize() (with the
// patch of a WAL file's header, which an in-memory image cannot use) and backup() through
// sqlite3_backup_*. Never opens or closes a connection itself: backup() gets its
// destination from the caller, and the connection's internals from lib/internals.ts.
import { Buffer } from "node:buffer";
import { SQLITE_DONE, SQLITE_ERROR, SQLITE_OK } from "./codes.ts";
import { constants, SQLITE_DESERIALIZE_FREEONCLOSE, SQLITE_DESERIALIZE_RESIZEABLE } from "./constants.ts";
import { SQLiteError } from "./error.ts";
import type { Internals } from "./internals.ts";
import type { DatabaseOptions } from "./options.ts";
import { asBytes, cstr, misuse } from "./values.ts";

/** What bun:sqlite's constructor also takes as a path: the bytes of a database. */
export type Image = Uint8Array | ArrayBuffer;

/** True for the bytes of a database (an Image). */
export function isImage(v: unknown): v is Image {
  return v instanceof Uint8Array || v instanceof ArrayBuffer;
}

/** db.serialize(): the bytes of a schema; a Buffer on the npm entry, as bun:sqlite returns. */
export function serialize(c: Internals, schema: string): Uint8Array {
  const bytes = serializeBytes(c, schema);
  return c.bun ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) : bytes;
}

function serializeBytes(c: Internals, schema: string): Uint8Array {
  const db = c.handle();
  const s = c.sym;
  const size = new BigInt64Array(1);
  const p = s.sqlite3_serialize(db, cstr(schema), size, 0);
  if (c.ffi.isNull(p)) {
    if (size[0] === 0n) return new Uint8Array(0);
    throw new SQLiteError(`cannot serialize schema ${schema}`, 7);
  }
  try {
    return size[0] === 0n ? new Uint8Array(0) : c.ffi.bytes(p, Number(size[0]));
  } finally {
    s.sqlite3_free(p);
  }
}

/** db.deserialize(): see Database.deserialize. */
export function deserialize(c: Internals, data: Image, options: { schema?: string; readonly?: boolean }): void {
  const db = c.handle();
  if (!isImage(data)) throw new TypeError("sqlite-multiwriter: deserialize() takes a Uint8Array or ArrayBuffer");
  if (c.inCallback > 0) throw misuse("cannot deserialize from inside a custom function");
  const schema = cstr(options.schema ?? "main", "the schema name");
  const s = c.sym;
  // The length is read once, from the view's own slot; the native copy holds exactly it.
  const bytes = asBytes(data);
  const n = bytes.length;
  const p = s.sqlite3_malloc64(Math.max(n, 1));
  if (c.ffi.isNull(p)) throw new SQLiteError("out of memory", 7);
  if (n > 0) {
    c.ffi.write(p, bytes);
    // An in-memory image cannot use WAL: mark a WAL file as a rollback-journal one.
    if (n >= 20 && bytes[18] === 2 && bytes[19] === 2) c.ffi.write(p, patchWal(bytes));
  }
  const flags = SQLITE_DESERIALIZE_FREEONCLOSE |
    (options.readonly ? constants.SQLITE_DESERIALIZE_READONLY : SQLITE_DESERIALIZE_RESIZEABLE);
  const rc = s.sqlite3_deserialize(db, schema, p, n, n, flags);
  if (rc !== SQLITE_OK) throw c.error(rc); // SQLite freed the buffer
}

// The first 20 bytes of the image with the file format versions of a rollback journal.
function patchWal(data: Uint8Array): Uint8Array {
  const copy = data.slice(0, 20);
  copy[18] = 1;
  copy[19] = 1;
  return copy;
}

/**
 * Database.deserialize(data, options): the options of the in-memory database to open, and
 * those of the image put in it. bun:sqlite takes `Database.deserialize(bytes, isReadOnly)`.
 */
export function imageOpenOptions(
  options: boolean | (DatabaseOptions & { schema?: string }),
): { open: DatabaseOptions; schema: string | undefined; readonly: boolean } {
  const { schema, ...rest } = typeof options === "boolean" ? { readonly: options } : options;
  // The memory database itself is writable; the image in it is read-only if asked.
  const readonly = rest.readonly === true || (rest.readwrite === false && rest.readonly === undefined);
  return { open: { ...rest, readonly: undefined, readwrite: undefined }, schema, readonly };
}

/** The destination of backup(): its internals, and what ends it (closes it when backup() opened it). */
export interface BackupTarget {
  readonly target: Internals;
  close(): void;
}

/** db.backup(): see Database.backup. `openTarget` is called once the source checks passed. */
export function backup(
  src: Internals,
  options: { schema?: string; destSchema?: string },
  openTarget: () => BackupTarget,
): number {
  const h = src.handle();
  const schema = cstr(options.schema ?? "main", "the schema name");
  const destSchema = cstr(options.destSchema ?? "main", "the schema name");
  const dest = openTarget();
  const target = dest.target;
  try {
    // SQLite's own words (sqlite3_backup_init refuses it so), which @db/sqlite reports.
    if (target === src) throw new SQLiteError("source and destination must be distinct", SQLITE_ERROR);
    const f = src.ffi;
    const s = f.sym;
    const b = s.sqlite3_backup_init(target.handle(), destSchema, h, schema);
    if (f.isNull(b)) throw target.error(s.sqlite3_extended_errcode(target.handle()));
    const rc = s.sqlite3_backup_step(b, -1);
    const pages = s.sqlite3_backup_pagecount(b);
    const done = s.sqlite3_backup_finish(b);
    if (rc !== SQLITE_DONE) throw new SQLiteError(`backup failed: ${f.cstring(s.sqlite3_errstr(rc))}`, rc);
    if (done !== SQLITE_OK) throw target.error(done);
    return pages;
  } finally {
    dest.close();
  }
}
