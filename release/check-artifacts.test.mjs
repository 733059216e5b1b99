// release/check-artifacts.test.mjs: proves that the artifact checker catches bad
// artifacts. It copies good ones from zig-out/release (built by
// `node scripts/zig.mjs build release`) into a temporary folder, damages one thing
// at a time, and expects the checker to name exactly that problem.
//   node --test release/check-artifacts.test.mjs
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { readMachO, readPe } from "./binfmt.mjs";
import { checkRelease } from "./check-artifacts.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const built = join(repo, "zig-out", "release");
const need = ["linux-x64-gnu", "linux-arm64-gnu", "darwin-arm64", "win32-x64"];
const skip = need.every((t) => existsSync(join(built, t))) ? false : "zig-out/release not built (run `node scripts/zig.mjs build release`)";

let work;
let n = 0;

/** A fresh copy of one target folder under the name `as`, in its own release folder. */
function copyTarget(from, as = from) {
  const dir = join(work, `case${++n}`);
  cpSync(join(built, from), join(dir, as), { recursive: true });
  return dir;
}

/** Replaces `from` by `to` (same length) at its first occurrence in a file. */
function patchBytes(file, from, to, start = 0) {
  const buf = readFileSync(file);
  const at = buf.indexOf(Buffer.from(from, "latin1"), start);
  assert.ok(at >= 0, `${from} not found in ${file}`);
  assert.equal(from.length, to.length);
  buf.write(to, at, "latin1");
  writeFileSync(file, buf);
}

function problemsOf(dir, target) {
  return checkRelease(dir, [target]).problems;
}

function expectProblem(dir, target, pattern) {
  const problems = problemsOf(dir, target);
  assert.ok(problems.some((p) => pattern.test(p)), `expected ${pattern} among:\n${problems.join("\n")}`);
}

describe("check-artifacts", { skip }, () => {
  before(() => {
    work = mkdtempSync(join(tmpdir(), "mw-check-"));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test("the built release passes", () => {
    for (const t of need) assert.deepEqual(problemsOf(built, t), []);
  });

  test("a truncated shared library is unreadable", () => {
    const dir = copyTarget("linux-x64-gnu");
    truncateSync(join(dir, "linux-x64-gnu", "libmwsqlite3.so"), 4096);
    expectProblem(dir, "linux-x64-gnu", /libmwsqlite3\.so: unreadable: .*past the end/);
  });

  test("a truncated static library is unreadable", () => {
    const dir = copyTarget("linux-x64-gnu");
    truncateSync(join(dir, "linux-x64-gnu", "libmwsqlite3.a"), 100000);
    expectProblem(dir, "linux-x64-gnu", /libmwsqlite3\.a: unreadable: ar: member .* runs past the end/);
  });

  test("a symbol version newer than GLIBC_2.17 fails", () => {
    const dir = copyTarget("linux-x64-gnu");
    // memcpy@GLIBC_2.14 becomes GLIBC_2.34 (the same length, in .dynstr).
    patchBytes(join(dir, "linux-x64-gnu", "libmwsqlite3.so"), "GLIBC_2.14", "GLIBC_2.34");
    expectProblem(dir, "linux-x64-gnu", /needs GLIBC_2\.34 \(newer than 2\.17\)/);
  });

  test("an executable stack fails", () => {
    const dir = copyTarget("linux-x64-gnu");
    const file = join(dir, "linux-x64-gnu", "libmwsqlite3.so");
    const buf = readFileSync(file);
    const phoff = Number(buf.readBigUInt64LE(0x20));
    let found = false;
    for (let i = 0; i < buf.readUInt16LE(0x38); i++) {
      const o = phoff + i * buf.readUInt16LE(0x36);
      if (buf.readUInt32LE(o) === 0x6474e551) {
        buf.writeUInt32LE(buf.readUInt32LE(o + 4) | 1, o + 4);
        found = true;
      }
    }
    assert.ok(found, "no PT_GNU_STACK in the built library");
    writeFileSync(file, buf);
    expectProblem(dir, "linux-x64-gnu", /libmwsqlite3\.so: needs an executable stack/);
  });

  test("a glibc build in a musl folder fails", () => {
    const dir = copyTarget("linux-x64-gnu", "linux-x64-musl");
    expectProblem(dir, "linux-x64-musl", /libmwsqlite3\.so: depends on: .*libc\.so\.6/);
    expectProblem(dir, "linux-x64-musl", /musl build needs glibc versions/);
  });

  test("the wrong architecture fails", () => {
    const dir = copyTarget("linux-arm64-gnu", "linux-x64-gnu");
    expectProblem(dir, "linux-x64-gnu", /machine aarch64, expected x86_64/);
    expectProblem(dir, "linux-x64-gnu", /libmwsqlite3\.a: member .*machine aarch64/);
  });

  test("an extension with SQLite inside fails, and a library without the binding's functions", () => {
    const dir = copyTarget("linux-x64-gnu");
    const t = join(dir, "linux-x64-gnu");
    cpSync(join(t, "libmwsqlite3.so"), join(t, "libmultiwriter.so"));
    expectProblem(dir, "linux-x64-gnu", /libmultiwriter\.so: does not export sqlite3_multiwriter_init/);
    expectProblem(dir, "linux-x64-gnu", /libmultiwriter\.so: defines SQLite symbols/);
    expectProblem(dir, "linux-x64-gnu", /libmultiwriter\.so: holds a copy of SQLite/);
    patchBytes(join(t, "libmwsqlite3.so"), "mw_stats\0", "mw_statz\0");
    expectProblem(dir, "linux-x64-gnu", /libmwsqlite3\.so: does not export: mw_stats/);
  });

  test("a missing file and a stray file fail", () => {
    const dir = copyTarget("linux-x64-gnu");
    rmSync(join(dir, "linux-x64-gnu", "libmultiwriter.so"));
    writeFileSync(join(dir, "linux-x64-gnu", "notes.txt"), "x");
    expectProblem(dir, "linux-x64-gnu", /libmultiwriter\.so: missing/);
    expectProblem(dir, "linux-x64-gnu", /notes\.txt: unexpected file/);
  });

  test("an unsigned arm64 dylib and a newer minimum macOS fail", () => {
    const dir = copyTarget("darwin-arm64");
    const file = join(dir, "darwin-arm64", "libmwsqlite3.dylib");
    const buf = readFileSync(file);
    const info = readMachO(buf);
    assert.equal(info.codeSignature, true);
    // Walk the load commands: LC_CODE_SIGNATURE becomes an unknown command, and
    // LC_BUILD_VERSION's minos 11.0 becomes 12.0.
    let o = 32;
    for (let i = 0; i < buf.readUInt32LE(16); i++) {
      const cmd = buf.readUInt32LE(o);
      if (cmd === 0x1d) buf.writeUInt32LE(0x7f, o);
      if (cmd === 0x32) buf.writeUInt32LE(12 << 16, o + 12);
      o += buf.readUInt32LE(o + 4);
    }
    writeFileSync(file, buf);
    expectProblem(dir, "darwin-arm64", /libmwsqlite3\.dylib: no code signature/);
    expectProblem(dir, "darwin-arm64", /libmwsqlite3\.dylib: minimum OS 12\.0, expected 11\.0/);
  });

  test("a DLL that is not marked as one, or lacks the extension entry, fails", () => {
    const dir = copyTarget("win32-x64");
    const dll = join(dir, "win32-x64", "mwsqlite3.dll");
    const buf = readFileSync(dll);
    assert.ok(readPe(buf).characteristics & 0x2000);
    const chars = buf.readUInt32LE(0x3c) + 4 + 18;
    buf.writeUInt16LE(buf.readUInt16LE(chars) & ~0x2000, chars);
    writeFileSync(dll, buf);
    expectProblem(dir, "win32-x64", /mwsqlite3\.dll: not marked as a DLL/);
    expectProblem(dir, "win32-x64", /mwsqlite3\.dll: executable, expected a shared library/);
    patchBytes(join(dir, "win32-x64", "multiwriter.dll"), "sqlite3_multiwriter_init\0", "sqlite3_multiwriter_tini\0");
    expectProblem(dir, "win32-x64", /multiwriter\.dll: does not export sqlite3_multiwriter_init/);
  });

  test("an unknown target folder fails", () => {
    const dir = copyTarget("linux-x64-gnu", "linux-riscv64-gnu");
    expectProblem(dir, "linux-riscv64-gnu", /not a known release target/);
  });
});
