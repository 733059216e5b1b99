// lib/ffi/resolve.ts: finds the native library file. Order: an explicit path, the
// SQLITE_MULTIWRITER_LIB environment variable, the per-platform npm package
// (@sqlite-multiwriter/<os>-<cpu>[-musl]), the build output (zig-out) of a checkout.
// It only looks at files; loading is the adapters' job.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

export const LIBRARY_ENV = "SQLITE_MULTIWRITER_LIB";

/** Thrown when no place has the library; `searched` lists each place and why it failed. */
export class LibraryNotFoundError extends Error {
  readonly searched: readonly string[];
  constructor(searched: string[]) {
    super(
      "sqlite-multiwriter: cannot find the native library. Looked in:\n" +
        searched.map((s) => `  - ${s}`).join("\n") +
        `\nBuild it with \`node scripts/zig.mjs build\`, install the package for this platform, ` +
        `or set ${LIBRARY_ENV} to the library file.`,
    );
    this.name = "LibraryNotFoundError";
    this.searched = searched;
  }
}

export interface ResolveOptions {
  /** An explicit library path (or file: URL); when given it is the only place looked at. */
  explicit?: string | URL;
  /** The environment (defaults to process.env). */
  env?: Record<string, string | undefined>;
  platform?: string;
  arch?: string;
  /** "glibc" or "musl" on Linux (detected when omitted). */
  libc?: "glibc" | "musl";
  /** Where npm packages are resolved from (defaults to this module). */
  requireFrom?: string;
  /** The checkout whose zig-out is searched (defaults to the one holding this file, if any). */
  checkoutRoot?: string | null;
}

export interface Resolved {
  path: string;
  source: "explicit" | "env" | "package" | "checkout";
}

/** The library's file name on a platform. */
export function libraryFileName(platform: string): string {
  if (platform === "win32") return "mwsqlite3.dll";
  if (platform === "darwin") return "libmwsqlite3.dylib";
  return "libmwsqlite3.so";
}

/** glibc or musl: Bun installs both per-platform packages, so this picks at run time. */
export function detectLibc(): "glibc" | "musl" {
  try {
    if (readFileSync("/usr/bin/ldd", "latin1").includes("musl")) return "musl";
  } catch { /* no ldd */ }
  try {
    if (readdirSync("/lib").some((f) => f.startsWith("ld-musl-"))) return "musl";
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

export function resolveLibrary(options: ResolveOptions = {}): Resolved {
  const platform = options.platform ?? process.platform;
  const arch = options.arch ?? process.arch;
  const file = libraryFileName(platform);
  const searched: string[] = [];

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
  if (root !== null) {
    const candidates = [join(root, "zig-out", "lib", file), join(root, "zig-out", "bin", file)];
    const hit = candidates.find(isFile);
    if (hit) return { path: isAbsolute(hit) ? hit : resolve(hit), source: "checkout" };
    searched.push(...candidates.map((c) => `${c} (build output of the checkout: no such file)`));
  } else {
    searched.push("the build output of a checkout (this module is not loaded from files)");
  }
  throw new LibraryNotFoundError(searched);
}
