// Library resolution: explicit path, environment variable, per-platform npm package,
// the checkout's zig-out, the release download (test/download.test.ts); an error that
// lists every place it looked.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { Database, libraryPath, LibraryNotFoundError } from "../lib/mod.ts";
import {
  detectLibc,
  libcFromMaps,
  libraryFileName,
  packageName,
  resolveLibrary,
} from "../lib/ffi/resolve.ts";
import { releaseBaseUrl } from "../lib/ffi/download.ts";
import { libDir, tempDir } from "./helpers.ts";

const built = join(libDir, libraryFileName(process.platform));
// The library this test process loaded (zig-out unless SQLITE_MULTIWRITER_LIB says otherwise).
const real = libraryPath();

function fakePackage(base: string, name: string, sub = "lib"): string {
  const dir = join(base, "node_modules", ...name.split("/"));
  mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name, version: "0.0.0" }));
  const file = join(dir, sub, "libmwsqlite3.so");
  writeFileSync(file, "");
  return file;
}

describe("library resolution", () => {
  it("names the per-platform package, with -musl only on Linux", () => {
    expect(packageName("linux", "x64", "glibc")).toBe("@sqlite-multiwriter/linux-x64");
    expect(packageName("linux", "arm64", "musl")).toBe("@sqlite-multiwriter/linux-arm64-musl");
    expect(packageName("darwin", "arm64", "musl")).toBe("@sqlite-multiwriter/darwin-arm64");
    expect(libraryFileName("win32")).toBe("mwsqlite3.dll");
    expect(libraryFileName("darwin")).toBe("libmwsqlite3.dylib");
    expect(["glibc", "musl"]).toContain(detectLibc());
  });

  it("takes the C library from the process's own mapped files, not from what is installed", () => {
    const glibc = "7f1c2a000000-7f1c2a028000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6\n" +
      "7f1c2a300000-7f1c2a302000 r--p 00000000 08:01 1240 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2\n";
    const musl = "7f00aa000000-7f00aa014000 r--p 00000000 00:2f 77 /lib/ld-musl-aarch64.so.1\n";
    expect(libcFromMaps(glibc)).toBe("glibc");
    expect(libcFromMaps(musl)).toBe("musl");
    expect(libcFromMaps("00400000-00452000 r-xp 00000000 08:01 99 /usr/bin/static-thing\n")).toBeNull();
    // CI's glibc machine also has Debian's musl package (/lib/ld-musl-*.so): this
    // runtime's own maps still decide.
    const own = process.platform === "linux" ? libcFromMaps(readFileSync("/proc/self/maps", "latin1")) : null;
    if (own !== null) expect(detectLibc()).toBe(own);
  });

  it("finds the checkout's build output when no variable or package has it", () => {
    const r = resolveLibrary({ env: {}, requireFrom: join(tempDir(), "app.js") });
    expect(r).toEqual({ path: built, source: "checkout" });
    expect(real).toBe(resolveLibrary().path);
  });

  it("an explicit path that does not exist is an error naming it", () => {
    const missing = join(tempDir(), "nowhere", "libmwsqlite3.so");
    expect(() => resolveLibrary({ explicit: missing })).toThrow(LibraryNotFoundError);
    expect(() => resolveLibrary({ explicit: missing })).toThrow(missing);
  });

  it("new Database() with a libraryPath that does not exist lists where it looked", () => {
    const missing = join(tempDir(), "libmissing.so");
    let err: unknown;
    try {
      new Database(":memory:", { libraryPath: missing });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LibraryNotFoundError);
    expect((err as LibraryNotFoundError).searched.join("\n")).toContain(missing);
    expect((err as Error).message).toMatch(/Looked in:/);
  });

  it("an explicit path given as a file: URL is turned into a path", () => {
    const db = new Database(":memory:", { libraryPath: pathToFileURL(real) });
    expect(db.query("SELECT 1 AS x").get()).toEqual({ x: 1 });
    db.close();
    expect(resolveLibrary({ explicit: pathToFileURL(real).href }).path).toBe(real);
  });

  it("the environment variable comes before packages and the checkout", () => {
    const dir = tempDir();
    const file = join(dir, "custom.so");
    writeFileSync(file, "");
    expect(resolveLibrary({ env: { SQLITE_MULTIWRITER_LIB: file } })).toEqual({ path: file, source: "env" });
    expect(resolveLibrary({ explicit: real, env: { SQLITE_MULTIWRITER_LIB: file } }).source).toBe("explicit");
  });

  it("an environment variable pointing nowhere is an error naming it", () => {
    const missing = join(tempDir(), "gone.so");
    expect(() => resolveLibrary({ env: { SQLITE_MULTIWRITER_LIB: missing } })).toThrow(
      /SQLITE_MULTIWRITER_LIB: no such file/,
    );
  });

  it("finds the per-platform npm package for the detected libc", () => {
    const base = tempDir();
    const glibc = fakePackage(base, "@sqlite-multiwriter/linux-x64");
    const musl = fakePackage(base, "@sqlite-multiwriter/linux-x64-musl");
    const from = join(base, "app.js");
    const common = { env: {}, platform: "linux", arch: "x64", requireFrom: from, checkoutRoot: null };
    expect(resolveLibrary({ ...common, libc: "glibc" })).toEqual({ path: glibc, source: "package" });
    expect(resolveLibrary({ ...common, libc: "musl" })).toEqual({ path: musl, source: "package" });
  });

  it("when nothing has it, the error lists every place it looked", () => {
    const base = tempDir();
    let err: unknown;
    try {
      resolveLibrary({
        env: {},
        platform: "linux",
        arch: "arm64",
        libc: "musl",
        requireFrom: join(base, "app.js"),
        checkoutRoot: base,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LibraryNotFoundError);
    const searched = (err as LibraryNotFoundError).searched;
    expect(searched[0]).toMatch(/SQLITE_MULTIWRITER_LIB \(not set\)/);
    expect(searched[1]).toMatch(/@sqlite-multiwriter\/linux-arm64-musl \(not installed\)/);
    expect(searched[2]).toBe(`${join(base, "zig-out", "lib", "libmwsqlite3.so")} (build output of the checkout: no such file)`);
    expect(searched[4]).toBe(
      `${releaseBaseUrl()}linux-arm64-musl-libmwsqlite3.so (not downloaded: the download runs in \`await ensureLibrary()\`, ` +
        `which the JSR entry does at import; this entry loads synchronously)`,
    );
    expect(searched.length).toBe(5);
    for (const s of searched) expect((err as Error).message).toContain(s);
  });

  it("a library already loaded from one file refuses another", () => {
    const dir = tempDir();
    const other = join(dir, "libmwsqlite3.so");
    writeFileSync(other, "");
    expect(() => new Database(":memory:", { libraryPath: other })).toThrow(/already loaded/);
  });
});
