// lib/filecontrol.ts: the file controls db.fileControl() may pass, with the size of the
// argument each one reads or writes, and the argument's buffer as C gets it. C writes
// through the pointer it is given: a buffer smaller than what the op writes would be
// overwritten past its end, so every op's size is known here and checked, and ops of
// unknown size are refused. Never calls SQLite: the connection does (lib/database.ts).
import { constants } from "./constants.ts";
import { asBytes, describe } from "./values.ts";

/** How an op's argument is shaped: its size in bytes, and how a number argument is stored. */
interface OpShape {
  /** Bytes C may read or write through the pointer (0: the argument must be null). */
  bytes: number;
  /** A number argument is stored as a 32-bit int or a 64-bit int. */
  number?: "i32" | "i64";
}

const I32: OpShape = { bytes: 4, number: "i32" };
const I64: OpShape = { bytes: 8, number: "i64" };
const POINTER: OpShape = { bytes: 8 };
/** The smallest buffer fileControl() takes, whatever the op (as bun:sqlite). */
const MIN_BUFFER = 8;

/** SQLite's file controls (sqlite3.h) that are safe from JS, and the engine's. */
export const FILE_CONTROLS: ReadonlyMap<number, OpShape> = new Map<number, OpShape>([
  [1, I32], // LOCKSTATE (int out)
  [4, I32], // LAST_ERRNO (int out)
  [5, I64], // SIZE_HINT (sqlite3_int64 in)
  [6, I32], // CHUNK_SIZE (int in)
  [7, POINTER], // FILE_POINTER (sqlite3_file* out)
  [10, I32], // PERSIST_WAL (int in/out)
  [13, I32], // POWERSAFE_OVERWRITE (int in/out)
  [18, I64], // MMAP_SIZE (sqlite3_int64 in/out)
  [20, I32], // HAS_MOVED (int out)
  [21, { bytes: 0 }], // SYNC (NULL or a name; only NULL here)
  [27, POINTER], // VFS_POINTER (sqlite3_vfs* out)
  [28, POINTER], // JOURNAL_POINTER (sqlite3_file* out)
  [34, I32], // LOCK_TIMEOUT (int in/out)
  [35, I32], // DATA_VERSION (unsigned int out)
  [36, I64], // SIZE_LIMIT (sqlite3_int64 in/out)
  [38, I32], // RESERVE_BYTES (int in/out)
  [40, I32], // EXTERNAL_READER (int out)
  [42, { bytes: 0 }], // RESET_CACHE (NULL)
  [constants.MW_FCNTL_STATS, { bytes: 256 }], // the engine's counters (int64_t[32])
  [constants.MW_FCNTL_EVENT_LOOP, I32], // the connection is one of an event loop's (int in)
  [constants.MW_FCNTL_COMMIT_SYNCS, I32], // its commits wait for a sync (int out)
]);

/** Why an op is refused when it is not in the table. */
export function refusedOp(op: number): string {
  switch (op) {
    case 12:
    case 16:
      return "it returns a string SQLite allocated (VFSNAME / TEMPFILENAME), which JS cannot free";
    case 14:
      return "PRAGMA takes an array of C strings; run the PRAGMA as SQL instead";
    default:
      return "its argument size is not known to sqlite-multiwriter, so a buffer cannot be checked";
  }
}

/**
 * The buffer C gets for op's argument: null, a number as the int (or 64-bit int) the op
 * takes, or the bytes of a typed array or DataView at least as long as the op writes, and
 * never under 8 bytes.
 * Throws for an op not in FILE_CONTROLS and for an argument of the wrong shape.
 */
export function controlArgument(
  op: number,
  arg: number | bigint | ArrayBufferView | null | undefined,
): ArrayBufferView | null {
  if (!Number.isInteger(op)) throw new TypeError("sqlite-multiwriter: fileControl() takes an integer op");
  const shape = FILE_CONTROLS.get(op);
  if (shape === undefined) {
    throw new RangeError(`sqlite-multiwriter: file control ${op} is not supported: ${refusedOp(op)}`);
  }
  if (arg === undefined || arg === null) {
    if (shape.bytes > 0) {
      throw new TypeError(`sqlite-multiwriter: file control ${op} needs an argument of ${shape.bytes} bytes`);
    }
    return null;
  }
  if (typeof arg === "number" || typeof arg === "bigint") {
    if (shape.number === undefined) {
      throw new TypeError(`sqlite-multiwriter: file control ${op} takes a buffer of ${shape.bytes} bytes, not a number`);
    }
    return shape.number === "i32" ? new Int32Array([Number(arg)]) : new BigInt64Array([BigInt(arg)]);
  }
  if (!ArrayBuffer.isView(arg)) {
    throw new TypeError(`sqlite-multiwriter: fileControl() takes a number, a typed array or null, got ${describe(arg)}`);
  }
  const buf = asBytes(arg); // the true byte length, whatever arg.length says
  if (buf.byteLength < MIN_BUFFER) {
    // bun:sqlite refuses any buffer under 8 bytes, whatever the op (its words first).
    throw new RangeError(
      `TypedArray must be at least ${MIN_BUFFER} bytes (sqlite-multiwriter: file control ${op} got ${buf.byteLength})`,
    );
  }
  if (shape.bytes === 0 || buf.byteLength < shape.bytes) {
    throw new RangeError(
      `sqlite-multiwriter: file control ${op} ` +
        (shape.bytes === 0 ? "takes no buffer" : `needs ${shape.bytes} bytes, the buffer has ${buf.byteLength}`),
    );
  }
  return buf;
}
