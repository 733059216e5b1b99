// lib/options.ts: the options of `new Database()`: their checks (an unknown or mistyped
// option is an error before anything opens) and the file: URI they turn into.
import { isAbsolute } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { SQLITE_MISUSE } from "./codes.ts";
import { SQLiteError } from "./error.ts";

/**
 * The options of `new Database(path, options)`. An unknown option, or a value of the wrong
 * type, is a TypeError naming it before anything opens.
 */
export interface DatabaseOptions {
  /** Open read-only (default false). */
  readonly?: boolean;
  /**
   * Open read-write (the bun:sqlite name). As in bun:sqlite, `readwrite: true` without
   * `create: true` does not create a missing file; `readwrite: false` alone is readonly.
   */
  readwrite?: boolean;
  /** Create the file when missing (default true, unless `readwrite: true` is given alone). */
  create?: boolean;
  /** Named parameters may be given without their prefix; missing ones are an error. */
  strict?: boolean;
  /** Read integers as BigInt (default false: numbers, BigInt only beyond 2^53). */
  safeIntegers?: boolean;
  /**
   * Integers beyond 2^53 come back as BigInt (smaller ones stay numbers). Without it (and
   * without safeIntegers) they are rounded to numbers, as bun:sqlite reads them. The JSR
   * entry's @db/sqlite face always reads them exact.
   */
  int64?: boolean;
  /** Open through the multi-writer engine (default true); false = stock SQLite. */
  multiwriter?: boolean;
  /** Busy timeout in milliseconds (default 5000). */
  busyTimeout?: number;
  /** Most attempts of one transaction() call before its SQLITE_BUSY error is thrown (default 10000; the backoff caps at 2 ms). */
  maxAttempts?: number;
  /** The native library file to load (see docs/api.md for the search order). */
  libraryPath?: string | URL;
  /**
   * Most connections transactionAsync() opens for its calls in flight (default 64; one
   * more call waits for a connection to come back). Without the engine it is always 1.
   */
  asyncPool?: number;
  /** Engine: log size in MiB that triggers compaction (mw_log_max_mb). */
  logMaxMb?: number;
  /** Engine: validate the pages a transaction read (mw_readcheck, default true). */
  readCheck?: boolean;
  /** Engine: cache profile, e.g. "small" (mw_profile). */
  profile?: string;
  /** Engine: F_FULLFSYNC on macOS (mw_fullfsync). */
  fullFsync?: boolean;
  /** Engine: several processes share the database (mw_mp). */
  processes?: boolean;
  /**
   * Engine: a commit that lost only because others changed other rows of the table leaf
   * pages it wrote is merged instead of refused (mw_rebase), when its transaction
   * declared the rows it read and wrote with `db.declareReads()`.
   */
  rebase?: boolean;
  /**
   * Engine: a Litestream file replica (LTX files) of every durable commit, in this
   * directory (mw_ltx_dir; relative: from the database's folder). See docs/replication.md.
   */
  ltxDir?: string;
  /**
   * Engine: level-9 snapshots the replica keeps (mw_ltx_keep, default 2; 0 keeps every
   * file): older snapshots go, and the level-0 files the oldest kept one covers.
   */
  ltxKeep?: number;
}

type Kind = "boolean" | "number" | "string" | "path";
const GENERAL: Record<string, Kind> = {
  readonly: "boolean",
  readwrite: "boolean",
  create: "boolean",
  strict: "boolean",
  safeIntegers: "boolean",
  int64: "boolean",
  multiwriter: "boolean",
  busyTimeout: "number",
  maxAttempts: "number",
  libraryPath: "path",
  asyncPool: "number",
};
/** Engine options and the URI parameter each becomes. */
const ENGINE: Record<string, [Kind, string]> = {
  logMaxMb: ["number", "mw_log_max_mb"],
  readCheck: ["boolean", "mw_readcheck"],
  profile: ["string", "mw_profile"],
  fullFsync: ["boolean", "mw_fullfsync"],
  processes: ["boolean", "mw_mp"],
  rebase: ["boolean", "mw_rebase"],
  ltxDir: ["string", "mw_ltx_dir"],
  ltxKeep: ["number", "mw_ltx_keep"],
};

export interface ResolvedOptions {
  readonly: boolean;
  create: boolean;
  strict: boolean;
  safeIntegers: boolean;
  int64: boolean;
  multiwriter: boolean;
  busyTimeout: number;
  maxAttempts: number;
  libraryPath: string | URL | undefined;
  asyncPool: number;
  /** URI parameters of the engine options given. */
  engineParams: [string, string][];
}

/**
 * The whole numbers a numeric option may take: the engine's range for its URI parameter,
 * and for busyTimeout what SQLite's int takes (2^31 ms and more wrapped to a negative
 * timeout: no wait at all).
 */
const RANGES: Record<string, [number, number, string]> = {
  busyTimeout: [0, 2 ** 31 - 1, "milliseconds"],
  maxAttempts: [1, 2 ** 31 - 1, "attempts"],
  asyncPool: [1, 4096, "connections"],
  logMaxMb: [1, 2 ** 20, "MiB"],
  ltxKeep: [0, 1000, "snapshots"],
};

function checkRange(name: string, value: number): void {
  const range = RANGES[name];
  if (range === undefined) return;
  const [lo, hi, unit] = range;
  if (!Number.isInteger(value) || value < lo || value > hi) {
    throw new RangeError(
      `sqlite-multiwriter: option "${name}" must be a whole number of ${unit} from ${lo} to ${hi}, got ${value}`,
    );
  }
}

function checkKind(name: string, kind: Kind, value: unknown): void {
  const ok = kind === "path"
    ? typeof value === "string" || value instanceof URL
    : kind === "number"
    ? typeof value === "number" // its range (NaN, infinities and negatives too): checkRange
    : kind === "boolean"
    ? typeof value === "boolean"
    : typeof value === "string";
  if (ok && (typeof value === "string" || value instanceof URL) && String(value).includes("\0")) {
    // C would cut the string at the NUL (a path would lose the engine's URI parameters).
    throw new TypeError(`sqlite-multiwriter: option "${name}" contains a NUL character`);
  }
  if (!ok) {
    const want = kind === "path" ? "a string or URL" : `a ${kind}`;
    const got = typeof value === "string" ? JSON.stringify(value) : String(value);
    throw new TypeError(`sqlite-multiwriter: option "${name}" must be ${want}, got ${typeof value} ${got}`);
  }
  if (kind === "number") checkRange(name, value as number);
  const allowed = CHOICES[name];
  if (allowed !== undefined && !allowed.includes(value as string)) {
    throw new RangeError(
      `sqlite-multiwriter: option "${name}" must be one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}, ` +
        `got ${JSON.stringify(value)}`,
    );
  }
}

/** The values a string option may take (the engine's for its URI parameter). */
const CHOICES: Record<string, string[]> = {
  profile: ["small", "default"],
};

const OPEN_READONLY = 0x1;
const OPEN_READWRITE = 0x2;
const OPEN_CREATE = 0x4;

/** Open flags as bun:sqlite takes them (a number) turned into the options they mean. */
function fromFlags(flags: number): DatabaseOptions {
  if (!Number.isInteger(flags) || flags < 0) {
    throw new TypeError(`sqlite-multiwriter: open flags must be a non-negative integer, got ${flags}`);
  }
  if ((flags & (OPEN_READONLY | OPEN_READWRITE)) === 0) {
    // Neither read-only nor read-write: SQLite refuses such flags (as bun:sqlite reports).
    throw new SQLiteError("bad parameter or other API misuse", SQLITE_MISUSE);
  }
  const readonly = (flags & OPEN_READWRITE) === 0 && (flags & OPEN_READONLY) !== 0;
  return { readonly, create: !readonly && (flags & OPEN_CREATE) !== 0 };
}

/**
 * The options checked and defaulted. `bun`: the npm entry, which also refuses what
 * bun:sqlite refuses (a read-only database with `create: true`).
 */
export function resolveOptions(options: DatabaseOptions | number | undefined, bun = false): ResolvedOptions {
  const o = (typeof options === "number" ? fromFlags(options) : options ?? {}) as Record<string, unknown>;
  if (typeof o !== "object" || o === null || Array.isArray(o)) {
    throw new TypeError("sqlite-multiwriter: options must be an object");
  }
  const engineParams: [string, string][] = [];
  for (const [name, value] of Object.entries(o)) {
    if (value === undefined) continue;
    const general = GENERAL[name];
    const engine = ENGINE[name];
    if (general) checkKind(name, general, value);
    else if (engine) {
      checkKind(name, engine[0], value);
      const v = typeof value === "boolean" ? (value ? "1" : "0") : String(value);
      engineParams.push([engine[1], v]);
    } else {
      const known = [...Object.keys(GENERAL), ...Object.keys(ENGINE)].join(", ");
      throw new TypeError(`sqlite-multiwriter: unknown option "${name}" (known: ${known})`);
    }
  }
  const multiwriter = o.multiwriter !== false;
  if (!multiwriter && engineParams.length > 0) {
    const names = Object.keys(o).filter((k) => ENGINE[k] && o[k] !== undefined);
    throw new TypeError(
      `sqlite-multiwriter: option "${names[0]}" is an engine option; it needs multiwriter: true`,
    );
  }
  const readonly = o.readonly === true || (o.readwrite === false && o.readonly === undefined);
  if (readonly && (o.readwrite === true || (bun && o.create === true))) {
    // bun:sqlite's words.
    throw new TypeError(
      'A read-only database ("readonly: true" or "readwrite: false") cannot have "create: true" or "readwrite: true"',
    );
  }
  return {
    readonly,
    // bun:sqlite opens `{ readwrite: true }` without SQLITE_OPEN_CREATE.
    create: o.create === true || (o.create === undefined && o.readwrite !== true),
    strict: o.strict === true,
    safeIntegers: o.safeIntegers === true,
    int64: o.int64 === true,
    multiwriter,
    busyTimeout: typeof o.busyTimeout === "number" ? o.busyTimeout : 5000,
    maxAttempts: typeof o.maxAttempts === "number" ? o.maxAttempts : 10_000,
    libraryPath: o.libraryPath as string | URL | undefined,
    asyncPool: typeof o.asyncPool === "number" ? o.asyncPool : 64,
    engineParams,
  };
}

/** True for the names SQLite opens in memory or as a private temporary database. */
export function isMemoryPath(path: string): boolean {
  return path === ":memory:" || path === "";
}

/** A file path (or file: URL) as a path string; never a URL handed on to SQLite. */
export function toFilePath(path: string | URL): string {
  const p = path instanceof URL ? fileURLToPath(path) : path;
  if (typeof p === "string" && p.includes("\0")) {
    // C would cut the path at the NUL, and with it the `?vfs=multiwriter` that follows: the
    // same file would open under stock SQLite beside engine connections and lose data.
    throw new TypeError("sqlite-multiwriter: the path contains a NUL character");
  }
  return p;
}

// Characters that end or change the meaning of a URI path: escaped as %XX.
function escapePath(p: string): string {
  return p.replace(/[%?#]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0"));
}

/** The file: URI SQLite opens for a path and its URI parameters. */
export function toUri(path: string, params: [string, string][]): string {
  let p = path;
  if (process.platform === "win32") p = p.replace(/\\/g, "/");
  let uri: string;
  if (path === ":memory:") uri = "file::memory:";
  else if (path === "") uri = "file:";
  else if (isAbsolute(path)) {
    // file:///abs/path (an empty authority, so a path starting with // stays a path).
    uri = "file://" + (p.startsWith("/") ? "" : "/") + escapePath(p);
  } else {
    // A relative path that looks like an authority or a drive is anchored at ./
    uri = "file:" + (p.startsWith("/") || /^[A-Za-z]:/.test(p) ? "./" : "") + escapePath(p);
  }
  if (params.length === 0) return uri;
  return uri + "?" + params.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
}
