// The release download (lib/ffi/download.ts, ensureLibrary in resolve.ts, the JSR entry
// lib/jsr.ts): a local HTTP server serves release assets from a temp folder, and a fresh
// process of the same runtime resolves the library from scratch with the checkout's
// zig-out skipped (SQLITE_MULTIWRITER_NO_CHECKOUT=1), so only the download can find it.
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  baseUrl,
  cacheDir,
  embeddedManifest,
  findTarget,
  type NativeManifest,
  releaseBaseUrl,
} from "../lib/ffi/download.ts";
import { detectLibc, LibraryNotFoundError, libraryFileName, resolveLibrary } from "../lib/ffi/resolve.ts";
import { libDir, root, runtime, tempDir } from "./helpers.ts";

const libc = process.platform === "linux" ? detectLibc() : undefined;
const hostTarget = `${process.platform}-${process.arch}${libc ? (libc === "musl" ? "-musl" : "-gnu") : ""}`;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let server: Server;
let base = "";
let requests: string[] = [];
let assets = "";
let manifest: NativeManifest;
let manifestFile = "";
let assetName = "";

beforeAll(async () => {
  // The host build turned into release assets by release/manifest.mjs, as a release would be.
  const release = tempDir();
  mkdirSync(join(release, hostTarget));
  for (const f of [libraryFileName(process.platform), "libmultiwriter.so"]) {
    copyFileSync(join(libDir, f), join(release, hostTarget, f));
  }
  assets = tempDir();
  execFileSync("node", ["release/manifest.mjs", "--release", release, "--targets", hostTarget, "--assets", assets], { cwd: root });
  manifestFile = join(assets, "manifest.json");
  manifest = JSON.parse(readFileSync(manifestFile, "utf8"));
  assetName = manifest.targets[hostTarget].library.asset;

  server = createServer((req, res) => {
    requests.push(req.url ?? "");
    const name = decodeURIComponent((req.url ?? "/").replace(/^\/+/, ""));
    const path = join(assets, name);
    if (name.includes("/") || !existsSync(path)) {
      res.writeHead(404).end("not found");
      return;
    }
    const bytes = readFileSync(path);
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": bytes.length }).end(bytes);
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await new Promise((ok) => server.close(ok));
});

interface Outcome {
  ok: boolean;
  source?: string;
  path?: string;
  version?: string;
  name?: string;
  message?: string;
}

// A fresh process of this runtime: `entry` "ensure" awaits ensureLibrary() with the test's
// manifest; "jsr" imports the JSR entry (embedded manifest, download at module load).
function fresh(entry: "ensure" | "jsr", env: Record<string, string>): Promise<Outcome> {
  const dir = tempDir();
  const script = join(dir, "probe.ts");
  const mod = pathToFileURL(join(root, "lib", entry === "jsr" ? "jsr.ts" : "mod.ts")).href;
  writeFileSync(
    script,
    `import { readFileSync } from "node:fs";
import process from "node:process";
const m = await import(${JSON.stringify(mod)});
try {
  let source = "jsr";
  if (${entry === "ensure"}) {
    const manifest = JSON.parse(readFileSync(process.env.MW_TEST_MANIFEST, "utf8"));
    source = (await m.ensureLibrary({ manifest })).source;
  }
  const db = new m.Database(":memory:");
  // Both faces have prepare(...).get() (the JSR entry, shaped after @db/sqlite, has no query()).
  const version = db.prepare("SELECT mw_version() AS v").get().v;
  db.close();
  console.log(JSON.stringify({ ok: true, source, path: m.libraryPath(), version }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, name: e.name, message: e.message }));
}
`,
  );
  const childEnv: Record<string, string> = { ...process.env as Record<string, string>, ...env };
  delete childEnv.SQLITE_MULTIWRITER_LIB;
  delete childEnv.SQLITE_MULTIWRITER_NO_DOWNLOAD;
  Object.assign(childEnv, { SQLITE_MULTIWRITER_NO_CHECKOUT: "1", MW_TEST_MANIFEST: manifestFile }, env);
  const args = runtime === "bun" ? [script] : ["run", "-A", "--quiet", script];
  return new Promise((ok, fail) => {
    // Asynchronous on purpose: this process's event loop serves the downloads.
    execFile(process.execPath, args, { cwd: dir, env: childEnv, timeout: 30_000 }, (err, stdout, stderr) => {
      const line = stdout.trim().split("\n").pop() ?? "";
      try {
        ok(JSON.parse(line));
      } catch {
        fail(new Error(`probe failed (${err?.message ?? "no JSON"}):\n${stdout}\n${stderr}`));
      }
    });
  });
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((d) => d.isFile()).map((d) => d.name);
}

describe("release download", () => {
  it("the pinned URL is the release of this version; the cache folder is per version", () => {
    expect(releaseBaseUrl("1.2.3")).toBe("https://github.com/sqlite-multiwriter/sqlite-multiwriter/releases/download/v1.2.3/");
    expect(baseUrl({}, embeddedManifest)).toBe(releaseBaseUrl(embeddedManifest.version));
    expect(baseUrl({ SQLITE_MULTIWRITER_BASE_URL: "http://mirror/x" }, embeddedManifest)).toBe("http://mirror/x/");
    expect(cacheDir({ SQLITE_MULTIWRITER_CACHE: "/c" }, "0.1.0", "linux")).toBe(join("/c", "0.1.0"));
    expect(cacheDir({ XDG_CACHE_HOME: "/x" }, "0.1.0", "linux")).toBe(join("/x", "sqlite-multiwriter", "0.1.0"));
    expect(cacheDir({ HOME: "/h" }, "0.1.0", "linux")).toBe(join("/h", ".cache", "sqlite-multiwriter", "0.1.0"));
    expect(cacheDir({ LOCALAPPDATA: "/l" }, "0.1.0", "win32")).toBe(join("/l", "sqlite-multiwriter", "0.1.0"));
    expect(() => cacheDir({}, "0.1.0", "linux")).toThrow(/set SQLITE_MULTIWRITER_CACHE/);
  });

  it("the embedded manifest has every npm platform, matched by os, cpu and libc", () => {
    expect(Object.keys(embeddedManifest.targets).sort()).toEqual(
      ["darwin-arm64", "darwin-x64", "linux-arm64-gnu", "linux-arm64-musl", "linux-x64-gnu", "linux-x64-musl", "win32-x64"],
    );
    expect(findTarget(embeddedManifest, "linux", "arm64", "musl")?.[0]).toBe("linux-arm64-musl");
    expect(findTarget(embeddedManifest, "linux", "x64", "glibc")?.[0]).toBe("linux-x64-gnu");
    expect(findTarget(embeddedManifest, "win32", "x64", undefined)?.[1].library.asset).toBe("win32-x64-mwsqlite3.dll");
    expect(findTarget(embeddedManifest, "linux", "riscv64", "glibc")).toBeNull();
    for (const t of Object.values(embeddedManifest.targets)) expect(t.library.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("without ensureLibrary(), the synchronous search lists the URL it did not try", () => {
    let err: unknown;
    try {
      resolveLibrary({ env: { SQLITE_MULTIWRITER_NO_CHECKOUT: "1", SQLITE_MULTIWRITER_BASE_URL: base }, requireFrom: join(tempDir(), "a.js") });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LibraryNotFoundError);
    const searched = (err as LibraryNotFoundError).searched;
    expect(searched).toContain("the build output of a checkout (skipped: SQLITE_MULTIWRITER_NO_CHECKOUT is set)");
    expect(searched.at(-1)).toMatch(new RegExp(`^${base}.*\\(not downloaded: .*ensureLibrary`));
  });

  it("downloads, checks, caches and loads the library; the next process uses the cache", async () => {
    const cache = tempDir();
    requests = [];
    const first = await fresh("ensure", { SQLITE_MULTIWRITER_BASE_URL: base, SQLITE_MULTIWRITER_CACHE: cache });
    expect(first).toMatchObject({ ok: true, source: "download" });
    expect(first.version).toMatch(/^\d+\.\d+/);
    const cached = join(cache, manifest.version, hostTarget, libraryFileName(process.platform));
    expect(first.path).toBe(cached);
    expect(sha256(readFileSync(cached))).toBe(manifest.targets[hostTarget].library.sha256);
    expect(requests).toEqual([`/${assetName}`]);
    // No temporary file is left next to it.
    expect(filesUnder(cache)).toEqual([libraryFileName(process.platform)]);

    const second = await fresh("ensure", { SQLITE_MULTIWRITER_BASE_URL: base, SQLITE_MULTIWRITER_CACHE: cache });
    expect(second).toMatchObject({ ok: true, source: "download", path: cached });
    expect(requests.length).toBe(1);

    // A damaged cached copy is found by the check on load and replaced.
    const good = readFileSync(cached);
    const bad = new Uint8Array(good);
    bad[bad.length >> 1] ^= 0xff;
    writeFileSync(cached, bad);
    const third = await fresh("ensure", { SQLITE_MULTIWRITER_BASE_URL: base, SQLITE_MULTIWRITER_CACHE: cache });
    expect(third).toMatchObject({ ok: true, source: "download", path: cached });
    expect(requests.length).toBe(2);
    expect(sha256(readFileSync(cached))).toBe(sha256(good));
  });

  it("the JSR entry refuses bytes whose sha256 is not the manifest's and caches nothing", async () => {
    // The server has the host build under the release asset name; the embedded manifest
    // describes the release build, so the hashes differ.
    const target = findTarget(embeddedManifest, process.platform, process.arch, libc);
    expect(target).not.toBeNull();
    const [, t] = target!;
    const served = readFileSync(join(libDir, libraryFileName(process.platform)));
    expect(sha256(served)).not.toBe(t.library.sha256);
    writeFileSync(join(assets, t.library.asset), served);
    const cache = tempDir();
    const out = await fresh("jsr", { SQLITE_MULTIWRITER_BASE_URL: base, SQLITE_MULTIWRITER_CACHE: cache });
    expect(out).toMatchObject({ ok: false, name: "LibraryNotFoundError" });
    expect(out.message).toContain(`${base}${t.library.asset} (download failed: checksum mismatch`);
    expect(out.message).toContain(t.library.sha256);
    expect(out.message).toContain(sha256(served));
    expect(filesUnder(cache)).toEqual([]);
  });

  // The real release file of this host, when `zig build release` has run and matches the
  // committed manifest (a stale one is release/check.mjs's to report): the JSR entry as users
  // get it, embedded manifest and all.
  const hostEntry = findTarget(embeddedManifest, process.platform, process.arch, libc);
  const releaseFile = hostEntry && join(root, "zig-out", "release", hostEntry[0], hostEntry[1].library.file);
  const releaseMatches = releaseFile !== null && existsSync(releaseFile) &&
    sha256(readFileSync(releaseFile)) === hostEntry![1].library.sha256;
  it.skipIf(!releaseMatches)("the JSR entry downloads the released library of this platform and runs it", async () => {
    const [target, t] = hostEntry!;
    const dir = tempDir();
    execFileSync("node", ["release/manifest.mjs", "--targets", target, "--assets", dir], { cwd: root });
    copyFileSync(join(dir, t.library.asset), join(assets, t.library.asset));
    const cache = tempDir();
    const out = await fresh("jsr", { SQLITE_MULTIWRITER_BASE_URL: base, SQLITE_MULTIWRITER_CACHE: cache });
    expect(out).toMatchObject({ ok: true, path: join(cache, embeddedManifest.version, target, t.library.file) });
    expect(out.version).toBe(embeddedManifest.version);
  });

  it("the server down: the error lists the URL and why it failed", async () => {
    const down = createServer();
    await new Promise<void>((ok) => down.listen(0, "127.0.0.1", ok));
    const port = (down.address() as AddressInfo).port;
    await new Promise((ok) => down.close(ok));
    const url = `http://127.0.0.1:${port}/`;
    const out = await fresh("jsr", { SQLITE_MULTIWRITER_BASE_URL: url, SQLITE_MULTIWRITER_CACHE: tempDir() });
    expect(out).toMatchObject({ ok: false, name: "LibraryNotFoundError" });
    const asset = findTarget(embeddedManifest, process.platform, process.arch, libc)![1].library.asset;
    expect(out.message).toContain(`${url}${asset} (download failed: `);
    expect(out.message).toContain("SQLITE_MULTIWRITER_LIB (not set)");
    expect(out.message).toContain("SQLITE_MULTIWRITER_NO_CHECKOUT is set");
  });

  it("a missing asset is an HTTP error; SQLITE_MULTIWRITER_NO_DOWNLOAD=1 fetches nothing", async () => {
    const cache = tempDir();
    const gone = { ...manifest, targets: { [hostTarget]: { ...manifest.targets[hostTarget], library: { ...manifest.targets[hostTarget].library, asset: "no-such-asset.so" } } } };
    const goneFile = join(tempDir(), "manifest.json");
    writeFileSync(goneFile, JSON.stringify(gone));
    const out = await fresh("ensure", { SQLITE_MULTIWRITER_BASE_URL: base, SQLITE_MULTIWRITER_CACHE: cache, MW_TEST_MANIFEST: goneFile });
    expect(out).toMatchObject({ ok: false, name: "LibraryNotFoundError" });
    expect(out.message).toContain(`${base}no-such-asset.so (download failed: HTTP 404`);

    requests = [];
    const off = await fresh("ensure", { SQLITE_MULTIWRITER_BASE_URL: base, SQLITE_MULTIWRITER_CACHE: cache, SQLITE_MULTIWRITER_NO_DOWNLOAD: "1" });
    expect(off).toMatchObject({ ok: false, name: "LibraryNotFoundError" });
    expect(off.message).toContain(`${base}${assetName} (download disabled: SQLITE_MULTIWRITER_NO_DOWNLOAD is set)`);
    expect(requests).toEqual([]);
    expect(filesUnder(cache)).toEqual([]);
  });
});
