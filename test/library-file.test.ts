// The library file is looked at before dlopen: a truncated copy is a clear error (not a
// SIGBUS that kills the process), and the extension given in place of the library says so.
// The same for an extension given to db.loadExtension(), in the ELF, Mach-O and PE formats.
import { execFileSync } from "node:child_process";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { checkLibraryFile } from "../lib/ffi/check.ts";
import { Database } from "../lib/mod.ts";
import { libDir, runtime, tempDir } from "./helpers.ts";

const child = fileURLToPath(new URL("./fixtures/open-with-lib.ts", import.meta.url));

// Opens a database in a fresh process with SQLITE_MULTIWRITER_LIB set; returns its output.
function openWith(lib: string): string {
  const args = runtime === "bun" ? [child] : ["run", "-A", child];
  try {
    return execFileSync(process.execPath, args, {
      encoding: "utf8",
      stdio: "pipe",
      timeout: 60_000,
      env: { ...process.env, SQLITE_MULTIWRITER_LIB: lib },
    });
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; signal?: string; status?: number };
    return `exit ${err.status} signal ${err.signal}\n${err.stdout}${err.stderr}`;
  }
}

describe("the library file", () => {
  it("a truncated library is refused before dlopen, with a message that says so", () => {
    const good = join(libDir, "libmwsqlite3.so");
    expect(() => checkLibraryFile(good)).not.toThrow();
    const bytes = readFileSync(good);
    const dir = tempDir();
    for (const keep of [10, 4096, Math.floor(bytes.length / 2), bytes.length - 100]) {
      const cut = join(dir, `cut-${keep}.so`);
      writeFileSync(cut, bytes.subarray(0, keep));
      expect(() => checkLibraryFile(cut), `${keep} bytes`).toThrow(/not a complete library/);
    }
    const out = openWith(join(dir, `cut-${Math.floor(bytes.length / 2)}.so`));
    expect(out).toMatch(/not a complete library/);
    expect(out).not.toMatch(/signal SIGBUS/);
  });

  it("loadExtension() of a truncated extension is an error naming the file, not a crash", () => {
    const bytes = readFileSync(join(libDir, "libmultiwriter.so"));
    const dir = tempDir();
    const db = new Database(":memory:");
    // 64 KiB: without the check Bun dies of SIGBUS in dlopen (exit 135), Deno exits 1.
    for (const keep of [65536, Math.floor(bytes.length / 2)]) {
      const cut = join(dir, `libcut${keep}.so`);
      writeFileSync(cut, bytes.subarray(0, keep));
      expect(() => db.loadExtension(cut)).toThrow(cut);
      expect(() => db.loadExtension(cut)).toThrow(/not a complete library/);
    }
    writeFileSync(join(dir, "libcut.so"), bytes.subarray(0, 65536));
    // Without its suffix, as SQLite finds it too.
    expect(() => db.loadExtension(join(dir, "libcut"))).toThrow(/not a complete library/);
    // The whole extension loads (it registers the VFS the library has already).
    db.loadExtension(join(libDir, "libmultiwriter.so"));
    expect(db.query("SELECT mw_version() AS v").get()!.v).toBe(Database.engineVersion);
    db.close();
  });

  it("Mach-O and PE files are measured against their tables too", () => {
    const dir = tempDir();
    // A 64-bit Mach-O: header (32 bytes), one LC_SEGMENT_64 whose file range ends past the file.
    const macho = new DataView(new ArrayBuffer(256));
    macho.setUint32(0, 0xfeedfacf, true);
    macho.setUint32(16, 1, true); // ncmds
    macho.setUint32(20, 72, true); // sizeofcmds
    macho.setUint32(32, 0x19, true); // LC_SEGMENT_64
    macho.setUint32(36, 72, true);
    macho.setBigUint64(32 + 40, 0n, true); // fileoff
    macho.setBigUint64(32 + 48, 4096n, true); // filesize: past the 256 bytes
    const m = join(dir, "cut.dylib");
    writeFileSync(m, new Uint8Array(macho.buffer));
    expect(() => checkLibraryFile(m)).toThrow(/a segment ends at byte 4096 of 256/);
    macho.setBigUint64(32 + 48, 200n, true);
    writeFileSync(m, new Uint8Array(macho.buffer));
    expect(() => checkLibraryFile(m)).not.toThrow();
    // A PE: "MZ", e_lfanew, "PE\0\0", one section whose raw data ends past the file.
    const pe = new DataView(new ArrayBuffer(512));
    pe.setUint8(0, 0x4d);
    pe.setUint8(1, 0x5a);
    pe.setUint32(0x3c, 0x80, true);
    pe.setUint32(0x80, 0x00004550, true);
    pe.setUint16(0x80 + 6, 1, true); // NumberOfSections
    pe.setUint16(0x80 + 20, 0, true); // SizeOfOptionalHeader
    const sec = 0x80 + 24;
    pe.setUint32(sec + 16, 0x1000, true); // SizeOfRawData
    pe.setUint32(sec + 20, 0x100, true); // PointerToRawData
    const w = join(dir, "cut.dll");
    writeFileSync(w, new Uint8Array(pe.buffer));
    expect(() => checkLibraryFile(w)).toThrow(/a section ends at byte 4352 of 512/);
    pe.setUint32(sec + 16, 0x80, true);
    writeFileSync(w, new Uint8Array(pe.buffer));
    expect(() => checkLibraryFile(w)).not.toThrow();
    // A real Windows DLL and macOS dylib of the release, where built, pass whole and fail cut.
    for (const f of ["win32-x64/multiwriter.dll", "darwin-arm64/libmultiwriter.dylib"]) {
      let real: Uint8Array;
      try {
        real = readFileSync(join(libDir, "..", "release", f));
      } catch {
        continue;
      }
      const whole = join(dir, f.replace("/", "-"));
      writeFileSync(whole, real);
      expect(() => checkLibraryFile(whole)).not.toThrow();
      const half = whole + ".cut";
      writeFileSync(half, real.subarray(0, Math.floor(real.length / 2)));
      expect(() => checkLibraryFile(half), f).toThrow(/not a complete library/);
    }
  });

  it("the extension in place of the library is named as such", () => {
    const dir = tempDir();
    const ext = join(dir, "libmultiwriter.so");
    copyFileSync(join(libDir, "libmultiwriter.so"), ext);
    const out = openWith(ext);
    expect(out).toMatch(/is the SQLite extension \(libmultiwriter\)/);
    expect(openWith(join(libDir, "libmwsqlite3.so")).trim()).toBe("opened");
  });
});
