// lib/jsr.ts: the JSR (Deno) entry: lib/mod.ts plus the library download. JSR installs no
// native file, so at module load, and only when no local place has the library (libraryPath
// aside: an explicit path is seen later, by new Database()), this awaits ensureLibrary(),
// which fetches the release asset of this platform, checks its sha256 and caches it. Then
// `new Database()` stays synchronous. A failed download is not thrown here: it is listed,
// with the URL tried, in the error of the first `new Database()` that needs the library.
// Bun and the npm package use lib/mod.ts, which has no top-level await and never downloads
// unless asked (`await ensureLibrary()`).
import { ensureLibrary } from "./ffi/resolve.ts";

export * from "./mod.ts";

await ensureLibrary().catch(() => {
  // Recorded by ensureLibrary; reported by the first new Database() that needs it.
});
