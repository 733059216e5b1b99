// lib/filecontrol.ts: the file controls db.fileControl() may pass, with the size of the
// argument each one reads or writes. C writes through the pointer it is given: a buffer
// smaller than what the op writes would be overwritten past its end, so every op's size
// is known here and checked, and ops of unknown size are refused.

/** The engine's statistics control (MW_FCNTL_STATS): an int64_t[32]. */
export const MW_FCNTL_STATS = 0x4d570001;

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
  [MW_FCNTL_STATS, { bytes: 256 }], // the engine's counters (int64_t[32])
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
