// lib/ffi/download.ts: the last place the native library comes from: the release assets
// that `release/manifest.mjs --assets` writes and that are attached to the project's release
// of this version. It picks the asset of a platform in the manifest, fetches it, checks its
// sha256 against the manifest, and keeps it in a cache folder (written atomically, checked
// again on every use). It never decides the search order (resolve.ts does) and never loads
// the file (the adapters do).
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { nativeManifest } from "./manifest.generated.ts";

/** Overrides the pinned release URL (a mirror, a test server). */
export const BASE_URL_ENV = "SQLITE_MULTIWRITER_BASE_URL";
/** `1` turns the download off. */
export const NO_DOWNLOAD_ENV = "SQLITE_MULTIWRITER_NO_DOWNLOAD";
/** The cache folder (default: $XDG_CACHE_HOME, ~/.cache or %LOCALAPPDATA%, + /sqlite-multiwriter). */
export const CACHE_ENV = "SQLITE_MULTIWRITER_CACHE";

/** One native file of a release. */
export interface ManifestFile {
  /** Its file name once installed, e.g. "libmwsqlite3.so". */
  readonly file: string;
  /** The release asset to download. */
  readonly asset: string;
  /** Its sha256, checked after the download and at every load from the cache. */
  readonly sha256: string;
  /** Its size in bytes. */
  readonly size: number;
}

/** The native files of one target (os, cpu, libc). */
export interface ManifestTarget {
  /** The os, as process.platform names it. */
  readonly os: string;
  /** The cpu, as process.arch names it. */
  readonly cpu: string;
  /** "glibc" or "musl" on Linux. */
  readonly libc?: string;
  /** SQLite with the engine built in (what the package loads). */
  readonly library: ManifestFile;
  /** The engine as a SQLite extension (for the sqlite3 shell and C programs). */
  readonly extension: ManifestFile;
}

/** The manifest that release/manifest.mjs writes (schema 1). */
export interface NativeManifest {
  /** The manifest format's version (1). */
  readonly schema: number;
  /** The package name. */
  readonly name: string;
  /** The package version the files belong to. */
  readonly version: string;
  /** The SQLite version built in. */
  readonly sqlite: string | null;
  /** The files per target name, e.g. "linux-x64-gnu". */
  readonly targets: Readonly<Record<string, ManifestTarget>>;
}

/** The manifest of this version's release, generated from the release build and committed. */
export const embeddedManifest: NativeManifest = nativeManifest;

/**
 * Where the release assets of a version are published: the GitHub release of the tag
 * v<version>, which holds what `node release/manifest.mjs --assets DIR` wrote.
 */
export function releaseBaseUrl(version: string = embeddedManifest.version): string {
  return `https://github.com/sqlite-multiwriter/sqlite-multiwriter/releases/download/v${version}/`;
}

/** The base URL to download from: $SQLITE_MULTIWRITER_BASE_URL or the pinned release URL. */
export function baseUrl(env: Record<string, string | undefined>, manifest: NativeManifest): string {
  const b = env[BASE_URL_ENV] || releaseBaseUrl(manifest.version);
  return b.endsWith("/") ? b : `${b}/`;
}

export function downloadDisabled(env: Record<string, string | undefined>): boolean {
  const v = env[NO_DOWNLOAD_ENV];
  return v !== undefined && v !== "" && v !== "0";
}

/** The cache folder of a version: $SQLITE_MULTIWRITER_CACHE or the user's cache, + /<version>. */
export function cacheDir(env: Record<string, string | undefined>, version: string, platform: string): string {
  let root = env[CACHE_ENV];
  if (!root) {
    // From the environment, not os.homedir(): Deno would ask for --allow-sys as well.
    const home = platform === "win32" ? env.USERPROFILE : env.HOME;
    const base = platform === "win32"
      ? (env.LOCALAPPDATA || (home && join(home, "AppData", "Local")))
      : (env.XDG_CACHE_HOME || (home && join(home, ".cache")));
    if (!base) {
      throw new Error(`no cache folder (${platform === "win32" ? "LOCALAPPDATA and USERPROFILE" : "XDG_CACHE_HOME and HOME"} unset): set ${CACHE_ENV}`);
    }
    root = join(base, "sqlite-multiwriter");
  }
  return join(root, version);
}

/** The manifest's target for a platform (Node's names; libc on Linux), or null. */
export function findTarget(
  manifest: NativeManifest,
  platform: string,
  arch: string,
  libc: string | undefined,
): [string, ManifestTarget] | null {
  for (const [name, t] of Object.entries(manifest.targets)) {
    if (t.os === platform && t.cpu === arch && (platform !== "linux" || t.libc === libc)) return [name, t];
  }
  return null;
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Thrown when the bytes do not match the manifest; the message names both hashes. */
export class ChecksumMismatchError extends Error {
  constructor(readonly url: string, readonly expected: string, readonly actual: string, size: number) {
    super(`checksum mismatch for ${url}: the manifest says sha256 ${expected}, the ${size} bytes received have sha256 ${actual}; nothing was cached`);
    this.name = "ChecksumMismatchError";
  }
}

export interface FetchLibrary {
  url: string;
  expected: ManifestFile;
  /** The cache folder of this version (cacheDir()). */
  dir: string;
  /** The target's folder name, so that targets sharing a file name never collide. */
  target: string;
}

/** True when the cached file is there and matches the manifest (size and sha256). */
async function cachedIsGood(path: string, expected: ManifestFile): Promise<boolean> {
  if (!existsSync(path)) return false;
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch {
    return false;
  }
  return bytes.length === expected.size && (await sha256Hex(bytes)) === expected.sha256;
}

/**
 * The cached library of a target, downloaded first when the cache lacks it or holds a damaged
 * copy. Resolves to the cached path; rejects with the reason (HTTP status, network error,
 * checksum mismatch), in which case the cache is left without the file.
 */
export async function fetchLibrary(req: FetchLibrary): Promise<string> {
  const dir = join(req.dir, req.target);
  const dest = join(dir, req.expected.file);
  if (await cachedIsGood(dest, req.expected)) return dest;

  const res = await fetch(req.url, { signal: AbortSignal.timeout(120_000) });
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}`);
  }
  const bytes = new Uint8Array(await res.arrayBuffer());
  const actual = await sha256Hex(bytes);
  if (actual !== req.expected.sha256) throw new ChecksumMismatchError(req.url, req.expected.sha256, actual, bytes.length);
  if (bytes.length !== req.expected.size) {
    throw new Error(`size mismatch for ${req.url}: the manifest says ${req.expected.size} bytes, got ${bytes.length}`);
  }

  // A temporary file renamed into place: another process (or a crash) never sees half a library.
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.${req.expected.file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  try {
    writeFileSync(tmp, bytes, { mode: 0o755 });
    renameSync(tmp, dest);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  return dest;
}
