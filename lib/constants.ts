// lib/constants.ts: SQLite's numeric constants that callers pass to the package (open
// flags, prepare flags, the deserialize flag, file controls), under the names sqlite3.h
// gives them, as the `constants` export of bun:sqlite offers them; and, apart from that
// object (never exported by the entries), the few that only the package passes to SQLite.
// Values only: no logic, no import.

/**
 * SQLite's open flags, prepare flags and file control ops.
 *
 * @example
 * ```ts
 * const db = new Database("app.db", constants.SQLITE_OPEN_READONLY);
 * ```
 */
export const constants = {
  SQLITE_OPEN_READONLY: 0x00000001,
  SQLITE_OPEN_READWRITE: 0x00000002,
  SQLITE_OPEN_CREATE: 0x00000004,
  SQLITE_OPEN_DELETEONCLOSE: 0x00000008,
  SQLITE_OPEN_EXCLUSIVE: 0x00000010,
  SQLITE_OPEN_AUTOPROXY: 0x00000020,
  SQLITE_OPEN_URI: 0x00000040,
  SQLITE_OPEN_MEMORY: 0x00000080,
  SQLITE_OPEN_MAIN_DB: 0x00000100,
  SQLITE_OPEN_TEMP_DB: 0x00000200,
  SQLITE_OPEN_TRANSIENT_DB: 0x00000400,
  SQLITE_OPEN_MAIN_JOURNAL: 0x00000800,
  SQLITE_OPEN_TEMP_JOURNAL: 0x00001000,
  SQLITE_OPEN_SUBJOURNAL: 0x00002000,
  SQLITE_OPEN_SUPER_JOURNAL: 0x00004000,
  SQLITE_OPEN_NOMUTEX: 0x00008000,
  SQLITE_OPEN_FULLMUTEX: 0x00010000,
  SQLITE_OPEN_SHAREDCACHE: 0x00020000,
  SQLITE_OPEN_PRIVATECACHE: 0x00040000,
  SQLITE_OPEN_WAL: 0x00080000,
  SQLITE_OPEN_NOFOLLOW: 0x01000000,
  SQLITE_OPEN_EXRESCODE: 0x02000000,
  SQLITE_PREPARE_PERSISTENT: 0x01,
  SQLITE_PREPARE_NORMALIZE: 0x02,
  SQLITE_PREPARE_NO_VTAB: 0x04,
  SQLITE_DESERIALIZE_READONLY: 4,
  SQLITE_FCNTL_LOCKSTATE: 1,
  SQLITE_FCNTL_GET_LOCKPROXYFILE: 2,
  SQLITE_FCNTL_SET_LOCKPROXYFILE: 3,
  SQLITE_FCNTL_LAST_ERRNO: 4,
  SQLITE_FCNTL_SIZE_HINT: 5,
  SQLITE_FCNTL_CHUNK_SIZE: 6,
  SQLITE_FCNTL_FILE_POINTER: 7,
  SQLITE_FCNTL_SYNC_OMITTED: 8,
  SQLITE_FCNTL_WIN32_AV_RETRY: 9,
  SQLITE_FCNTL_PERSIST_WAL: 10,
  SQLITE_FCNTL_OVERWRITE: 11,
  SQLITE_FCNTL_VFSNAME: 12,
  SQLITE_FCNTL_POWERSAFE_OVERWRITE: 13,
  SQLITE_FCNTL_PRAGMA: 14,
  SQLITE_FCNTL_BUSYHANDLER: 15,
  SQLITE_FCNTL_TEMPFILENAME: 16,
  SQLITE_FCNTL_MMAP_SIZE: 18,
  SQLITE_FCNTL_TRACE: 19,
  SQLITE_FCNTL_HAS_MOVED: 20,
  SQLITE_FCNTL_SYNC: 21,
  SQLITE_FCNTL_COMMIT_PHASETWO: 22,
  SQLITE_FCNTL_WIN32_SET_HANDLE: 23,
  SQLITE_FCNTL_WAL_BLOCK: 24,
  SQLITE_FCNTL_ZIPVFS: 25,
  SQLITE_FCNTL_RBU: 26,
  SQLITE_FCNTL_VFS_POINTER: 27,
  SQLITE_FCNTL_JOURNAL_POINTER: 28,
  SQLITE_FCNTL_WIN32_GET_HANDLE: 29,
  SQLITE_FCNTL_PDB: 30,
  SQLITE_FCNTL_BEGIN_ATOMIC_WRITE: 31,
  SQLITE_FCNTL_COMMIT_ATOMIC_WRITE: 32,
  SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE: 33,
  SQLITE_FCNTL_LOCK_TIMEOUT: 34,
  SQLITE_FCNTL_DATA_VERSION: 35,
  SQLITE_FCNTL_SIZE_LIMIT: 36,
  SQLITE_FCNTL_CKPT_DONE: 37,
  SQLITE_FCNTL_RESERVE_BYTES: 38,
  SQLITE_FCNTL_CKPT_START: 39,
  SQLITE_FCNTL_EXTERNAL_READER: 40,
  SQLITE_FCNTL_CKSM_FILE: 41,
  SQLITE_FCNTL_RESET_CACHE: 42,
  /** The engine's counters (an int64_t[32]); db.stats() reads them by name. */
  MW_FCNTL_STATS: 0x4d570001,
  /** The engine's file control: the connection is one of an event loop's (never waits for the turn). */
  MW_FCNTL_EVENT_LOOP: 0x4d570003,
  /** The engine's file control: 1 when a commit of the connection waits for a sync (int out). */
  MW_FCNTL_COMMIT_SYNCS: 0x4d570004,
} as const;

// Only the package passes these (not part of the `constants` export).

/** SQLITE_UTF8: the text encoding of the *_text64 calls and of custom functions. */
export const SQLITE_UTF8 = 1;
/** Function flags of sqlite3_create_function_v2 and sqlite3_create_window_function. */
export const SQLITE_DETERMINISTIC = 0x000000800;
export const SQLITE_DIRECTONLY = 0x000080000;
export const SQLITE_INNOCUOUS = 0x000200000;
/** sqlite3_deserialize flags (SQLITE_DESERIALIZE_READONLY is in `constants`). */
export const SQLITE_DESERIALIZE_FREEONCLOSE = 1;
export const SQLITE_DESERIALIZE_RESIZEABLE = 2;
/** sqlite3_db_config ops: double-quoted string literals in DML and in DDL. */
export const SQLITE_DBCONFIG_DQS_DML = 1013;
export const SQLITE_DBCONFIG_DQS_DDL = 1014;
/** sqlite3_txn_state: a write transaction is open. */
export const SQLITE_TXN_WRITE = 2;
