// lib/ffi/index.ts: loads the native library once per JS thread (each Worker loads its
// own binding of the same process-wide library) through the adapter of the runtime that
// runs us. The rest of lib/ calls ffi() and never asks which runtime it is.
import { loadBun } from "./bun.ts";
import { checkLibraryFile, explainLoadError } from "./check.ts";
import { loadDeno } from "./deno.ts";
import { resolveLibrary } from "./resolve.ts";
import type { Ffi } from "./types.ts";

export type { Ffi, NativeCallback, Ptr } from "./types.ts";

let loaded: Ffi | null = null;

export function currentRuntime(): "bun" | "deno" | null {
  const g = globalThis as { Bun?: unknown; Deno?: { dlopen?: unknown } };
  if (g.Bun !== undefined) return "bun";
  if (g.Deno !== undefined && typeof g.Deno.dlopen === "function") return "deno";
  return null;
}

/**
 * The loaded library. The first call picks the file (see resolve.ts); a later call with a
 * different explicit path is an error, because a process holds one SQLite.
 */
export function ffi(explicitPath?: string | URL): Ffi {
  if (loaded !== null && explicitPath === undefined) return loaded;
  const { path } = resolveLibrary({ explicit: explicitPath });
  if (loaded !== null) {
    if (loaded.path === path) return loaded;
    throw new Error(
      `sqlite-multiwriter: the native library is already loaded from ${loaded.path}; ` +
        `cannot load ${path} as well`,
    );
  }
  const runtime = currentRuntime();
  if (runtime === null) {
    throw new Error(
      "sqlite-multiwriter runs on Bun (bun:ffi) or Deno (Deno.dlopen, with --allow-ffi); " +
        "this runtime offers neither",
    );
  }
  checkLibraryFile(path); // before dlopen maps it
  let made: Ffi;
  try {
    made = runtime === "bun" ? loadBun(path) : loadDeno(path);
  } catch (e) {
    throw explainLoadError(path, e);
  }
  loaded = made;
  return made;
}
