// The library file is looked at before dlopen: a truncated copy is a clear error (not a
// SIGBUS that kills the process), and the extension given in place of the library says so.
import { execFileSync } from "node:child_process";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { checkLibraryFile } from "../lib/ffi/check.ts";
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

  it("the extension in place of the library is named as such", () => {
    const dir = tempDir();
    const ext = join(dir, "libmultiwriter.so");
    copyFileSync(join(libDir, "libmultiwriter.so"), ext);
    const out = openWith(ext);
    expect(out).toMatch(/is the SQLite extension \(libmultiwriter\)/);
    expect(openWith(join(libDir, "libmwsqlite3.so")).trim()).toBe("opened");
  });
});
