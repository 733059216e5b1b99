// lib/ffi/resolve.ts: finds the native library file. Order: an explicit path, the
// SQLITE_MULTIWRITER_LIB environment variable, the per-platform npm package
// (@sqlite-multiwriter/<os>-<cpu>[-musl]), the build output (zig-out) of a checkout, and
// last the release download (download.ts). The first four are synchronous file checks;
// the download is asynchronous, so it happens in ensureLibrary(), which the JSR entry
// (lib/jsr.ts) awaits at module load, and resolveLibrary() only uses what it got.
// It only looks at files; loading is the adapters' job.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import {
  baseUrl,
  cacheDir,
  downloadDisabled,
  embeddedManifest,
  fetchLibrary,
  findTarget,
  NO_DOWNLOAD_ENV,
  type NativeManifest,
} from "./download.ts";

/** The environment variable naming the native library file to load (after `libraryPath`). */
export const LIBRARY_ENV = "SQLITE_MULTIWRITER_LIB";
/** `1` skips the build output of the checkout (to test the places after it). */
export const NO_CHECKOUT_ENV = "SQLITE_MULTIWRITER_NO_CHECKOUT";

/** Thrown when no place has the library; `searched` lists each place and why it failed. */
export class LibraryNotFoundError extends Error {
  /** Each place looked at, with why it did not hold the library. */
  readonly searched: readonly string[];
  /** Makes the error from the places looked at. */
  constructor(searched: string[]) {
    super(
      "sqlite-multiwriter: cannot find the native library. Looked in:\n" +
        searched.map((s) => `  - ${s}`).join("\n") +
        `\nBuild it with \`node scripts/zig.mjs build\`, install the package for this platform, ` +
        `set ${LIBRARY_ENV} to the library file, or let \`await ensureLibrary()\` download it.`,
    );
    this.name = "LibraryNotFoundError";
    this.searched = searched;
  }
}

/** Where resolveLibrary()/ensureLibrary() look; every field has a default (tests set them). */
export interface ResolveOptions {
  /** An explicit library path (or file: URL); when given it is the only place looked at. */
  explicit?: string | URL;
  /** The environment (defaults to process.env). */
  env?: Record<string, string | undefined>;
  /** The platform, as process.platform names it (defaults to the running one). */
  platform?: string;
  /** The CPU, as process.arch names it (defaults to the running one). */
  arch?: string;
  /** "glibc" or "musl" on Linux (detected when omitted). */
  libc?: "glibc" | "musl";
  /** Where npm packages are resolved from (defaults to this module). */
  requireFrom?: string;
  /** The checkout whose zig-out is searched (defaults to the one holding this file, if any). */
  checkoutRoot?: string | null;
  /** The manifest of the release assets (defaults to the one committed in lib/ffi). */
  manifest?: NativeManifest;
}

/** The library file found, and which place it came from. */
export interface Resolved {
  /** The absolute path of the library file. */
  path: string;
  /** The place: an explicit path, the environment, the platform package, the checkout, or the download cache. */
  source: "explicit" | "env" | "package" | "checkout" | "download";
}

/** The library's file name on a platform. */
export function libraryFileName(platform: string): string {
  if (platform === "win32") return "mwsqlite3.dll";
  if (platform === "darwin") return "libmwsqlite3.dylib";
  return "libmwsqlite3.so";
}

/**
 * The C library named by the mapped files of a Linux process (the text of
 * `/proc/<pid>/maps`): "musl" or "glibc", or null when neither loader is mapped
 * (a static runtime).
 */
export function libcFromMaps(maps: string): "glibc" | "musl" | null {
  if (/\/ld-musl-[^/\s]*\.so|\/libc\.musl-[^/\s]*\.so/.test(maps)) return "musl";
  if (/\/ld-linux[^/\s]*\.so|\/libc\.so\.6/.test(maps)) return "glibc";
  return null;
}

/**
 * glibc or musl: Bun installs both per-platform packages, so this picks at run time.
 * The library must match the C library of *this* process, so its own mapped files are
 * asked first: a glibc system with Debian's `musl` package installed has
 * /lib/ld-musl-*.so too. The files on disk are the fallback when /proc is not there.
 */
export function detectLibc(): "glibc" | "musl" {
  try {
    const own = libcFromMaps(readFileSync("/proc/self/maps", "latin1"));
    if (own !== null) return own;
  } catch { /* no /proc */ }
  try {
    if (readFileSync("/usr/bin/ldd", "latin1").includes("musl")) return "musl";
  } catch { /* no ldd */ }
  try {
    const names = readdirSync("/lib");
    if (names.some((f) => f.startsWith("ld-linux"))) return "glibc";
    if (names.some((f) => f.startsWith("ld-musl-"))) return "musl";
  } catch { /* no /lib */ }
  return "glibc";
}

/** The per-platform npm package name, e.g. @sqlite-multiwriter/linux-x64-musl. */
export function packageName(platform: string, arch: string, libc?: "glibc" | "musl"): string {
  return `@sqlite-multiwriter/${platform}-${arch}${platform === "linux" && libc === "musl" ? "-musl" : ""}`;
}

function toPath(p: string | URL): string {
  if (p instanceof URL) return fileURLToPath(p);
  return p.startsWith("file:") ? fileURLToPath(p) : p;
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

function defaultCheckoutRoot(): string | null {
  const url = import.meta.url;
  return url.startsWith("file:") ? fileURLToPath(new URL("../../", url)) : null;
}

/** What the last ensureLibrary() download gave: the cached file, or why there is none. */
let downloaded: { url: string; path: string } | { url: string; reason: string } | null = null;

// The first four places. Returns the hit, or null after listing each miss in `searched`;
// throws when an explicit path or the variable points nowhere (set on purpose: no fallback).
function findLocal(options: ResolveOptions, searched: string[]): Resolved | null {
  const platform = options.platform ?? process.platform;
  const arch = options.arch ?? process.arch;
  const file = libraryFileName(platform);

  if (options.explicit !== undefined) {
    const p = resolve(toPath(options.explicit));
    if (isFile(p)) return { path: p, source: "explicit" };
    searched.push(`${p} (the libraryPath option: ${existsSync(p) ? "not a file" : "no such file"})`);
    throw new LibraryNotFoundError(searched);
  }

  const env = options.env ?? process.env;
  const fromEnv = env[LIBRARY_ENV];
  if (fromEnv) {
    const p = resolve(toPath(fromEnv));
    if (isFile(p)) return { path: p, source: "env" };
    // A variable set on purpose that points nowhere is an error, not a hint to look on.
    searched.push(`${p} (${LIBRARY_ENV}: ${existsSync(p) ? "not a file" : "no such file"})`);
    throw new LibraryNotFoundError(searched);
  }
  searched.push(`$${LIBRARY_ENV} (not set)`);

  const libc = platform === "linux" ? (options.libc ?? detectLibc()) : undefined;
  const pkg = packageName(platform, arch, libc);
  let pkgDir: string | null = null;
  try {
    const req = createRequire(options.requireFrom ?? import.meta.url);
    pkgDir = dirname(req.resolve(`${pkg}/package.json`));
  } catch {
    searched.push(`npm package ${pkg} (not installed)`);
  }
  if (pkgDir !== null) {
    const candidates = [join(pkgDir, file), join(pkgDir, "lib", file), join(pkgDir, "bin", file)];
    const hit = candidates.find(isFile);
    if (hit) return { path: hit, source: "package" };
    searched.push(...candidates.map((c) => `${c} (npm package ${pkg}: no such file)`));
  }

  const root = options.checkoutRoot === undefined ? defaultCheckoutRoot() : options.checkoutRoot;
  if (env[NO_CHECKOUT_ENV] && env[NO_CHECKOUT_ENV] !== "0") {
    searched.push(`the build output of a checkout (skipped: ${NO_CHECKOUT_ENV} is set)`);
  } else if (root !== null) {
    const candidates = [join(root, "zig-out", "lib", file), join(root, "zig-out", "bin", file)];
    const hit = candidates.find(isFile);
    if (hit) return { path: isAbsolute(hit) ? hit : resolve(hit), source: "checkout" };
    searched.push(...candidates.map((c) => `${c} (build output of the checkout: no such file)`));
  } else {
    searched.push("the build output of a checkout (this module is not loaded from files)");
  }
  return null;
}

// The release asset of this platform: its URL and cache folder, or why there is none.
function releaseAsset(options: ResolveOptions) {
  const platform = options.platform ?? process.platform;
  const arch = options.arch ?? process.arch;
  const env = options.env ?? process.env;
  const manifest = options.manifest ?? embeddedManifest;
  const libc = platform === "linux" ? (options.libc ?? detectLibc()) : undefined;
  const base = baseUrl(env, manifest);
  const hit = findTarget(manifest, platform, arch, libc);
  if (hit === null) {
    const name = `${platform}-${arch}${libc ? ` (${libc})` : ""}`;
    return { ok: false as const, where: `${base} (release ${manifest.version} has no library for ${name})` };
  }
  const [target, t] = hit;
  return {
    ok: true as const,
    target,
    url: new URL(t.library.asset, base).href,
    expected: t.library,
    // A function: a missing cache folder is a download failure, listed like the others.
    dir: () => cacheDir(env, manifest.version, platform),
  };
}

/**
 * Finds the library synchronously: the four local places, then what ensureLibrary()
 * downloaded in this process. Throws LibraryNotFoundError listing every place otherwise.
 */
export function resolveLibrary(options: ResolveOptions = {}): Resolved {
  const searched: string[] = [];
  const local = findLocal(options, searched);
  if (local !== null) return local;
  const env = options.env ?? process.env;
  const asset = releaseAsset(options);
  if (downloadDisabled(env)) {
    searched.push(`${asset.ok ? asset.url : "the release download"} (download disabled: ${NO_DOWNLOAD_ENV} is set)`);
  } else if (!asset.ok) {
    searched.push(asset.where);
  } else if (downloaded?.url === asset.url && "path" in downloaded && isFile(downloaded.path)) {
    return { path: downloaded.path, source: "download" };
  } else if (downloaded?.url === asset.url && "reason" in downloaded) {
    searched.push(`${downloaded.url} (download failed: ${downloaded.reason})`);
  } else {
    searched.push(
      `${asset.url} (not downloaded: the download runs in \`await ensureLibrary()\`, ` +
        `which the JSR entry does at import; this entry loads synchronously)`,
    );
  }
  throw new LibraryNotFoundError(searched);
}

// An error's message and the messages of its causes (fetch puts the network error there).
function describe(e: unknown): string {
  const parts: string[] = [];
  for (let c: unknown = e; c !== undefined && c !== null && parts.length < 4; c = (c as { cause?: unknown }).cause) {
    const m = c instanceof Error ? c.message : String(c);
    if (!parts.some((p) => p.includes(m))) parts.push(m);
  }
  return parts.join(": ");
}

/**
 * Makes the library available, downloading it when no local place has it: the release
 * asset of this platform is fetched from the pinned release URL ($SQLITE_MULTIWRITER_BASE_URL
 * overrides it), checked against the manifest's sha256 and cached (checked again on every
 * call). After it resolves, `new Database()` finds the file synchronously. Rejects with
 * LibraryNotFoundError listing every place looked at, the URL tried and why it failed.
 */
export async function ensureLibrary(options: ResolveOptions = {}): Promise<Resolved> {
  const local = findLocal(options, []);
  if (local !== null) return local;
  const env = options.env ?? process.env;
  const asset = releaseAsset(options);
  if (!downloadDisabled(env) && asset.ok) {
    try {
      const path = await fetchLibrary({ url: asset.url, expected: asset.expected, dir: asset.dir(), target: asset.target });
      downloaded = { url: asset.url, path };
    } catch (e) {
      downloaded = { url: asset.url, reason: describe(e) };
    }
  }
  return resolveLibrary(options);
}
