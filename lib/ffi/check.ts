// lib/ffi/check.ts: looks at a library file before it is handed to dlopen (the package's
// own library, and extensions db.loadExtension() loads). The loader maps the file: a
// truncated one (an interrupted copy or download) kills the process with SIGBUS when a
// mapped page past the end is touched, and the extension (libmultiwriter, which has no
// SQLite inside) fails with a bare "undefined symbol". Both become clear errors here.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { basename } from "node:path";

function readHead(path: string, n: number): { head: Uint8Array; size: number } {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const head = new Uint8Array(Math.min(n, size));
    readSync(fd, head, 0, head.length, 0);
    return { head, size };
  } finally {
    closeSync(fd);
  }
}

function readAt(path: string, offset: number, n: number): Uint8Array {
  const fd = openSync(path, "r");
  try {
    const out = new Uint8Array(n);
    readSync(fd, out, 0, n, offset);
    return out;
  } finally {
    closeSync(fd);
  }
}

/**
 * Throws when the file cannot be a complete library: too small, or one of the tables the
 * loader maps reaching past its end: 64-bit ELF (program headers, sections, loaded
 * segments), 64-bit Mach-O (load commands, segments) and PE (section table, sections'
 * raw data). Other formats are left to the loader. Returns nothing otherwise.
 */
export function checkLibraryFile(path: string): void {
  let head: Uint8Array;
  let size: number;
  try {
    ({ head, size } = readHead(path, 64));
  } catch {
    return; // not readable here (e.g. Deno without --allow-read for it): dlopen decides
  }
  const broken = (why: string) =>
    new Error(
      `sqlite-multiwriter: ${path} is not a complete library (${why}); it may be a truncated ` +
        "copy or download: build or install it again",
    );
  if (size < 64) throw broken(`${size} bytes`);
  const v = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const why = head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46
    ? elfProblem(path, v, size)
    : v.getUint32(0, true) === 0xfeedfacf
    ? machoProblem(path, v, size)
    : head[0] === 0x4d && head[1] === 0x5a
    ? peProblem(path, v, size)
    : null;
  if (why !== null) throw broken(why);
}

// Reads n bytes at offset, or null when they cannot be read (then the loader decides).
function tryReadAt(path: string, offset: number, n: number): DataView | null {
  try {
    const b = readAt(path, offset, n);
    return new DataView(b.buffer, b.byteOffset, b.byteLength);
  } catch {
    return null;
  }
}

function elfProblem(path: string, v: DataView, size: number): string | null {
  if (v.getUint8(4) !== 2 || v.getUint8(5) !== 1) return null; // only 64-bit little-endian ELF
  const phoff = Number(v.getBigUint64(0x20, true));
  const shoff = Number(v.getBigUint64(0x28, true));
  const phentsize = v.getUint16(0x36, true);
  const phnum = v.getUint16(0x38, true);
  const shentsize = v.getUint16(0x3a, true);
  const shnum = v.getUint16(0x3c, true);
  if (phoff + phnum * phentsize > size) return "its program headers end past the file";
  if (shoff !== 0 && shoff + shnum * shentsize > size) return "its section table ends past the file";
  if (phentsize < 40 || phnum === 0) return null;
  const pv = tryReadAt(path, phoff, phnum * phentsize);
  if (pv === null) return null;
  for (let i = 0; i < phnum; i++) {
    const at = i * phentsize;
    if (pv.getUint32(at, true) !== 1) continue; // PT_LOAD
    const offset = Number(pv.getBigUint64(at + 8, true));
    const filesz = Number(pv.getBigUint64(at + 32, true));
    if (offset + filesz > size) return `a loaded segment ends at byte ${offset + filesz} of ${size}`;
  }
  return null;
}

function machoProblem(path: string, v: DataView, size: number): string | null {
  const ncmds = v.getUint32(16, true);
  const sizeofcmds = v.getUint32(20, true);
  if (32 + sizeofcmds > size) return "its load commands end past the file";
  const cv = tryReadAt(path, 32, sizeofcmds);
  if (cv === null) return null;
  for (let i = 0, at = 0; i < ncmds && at + 8 <= sizeofcmds; i++) {
    const cmd = cv.getUint32(at, true), cmdsize = cv.getUint32(at + 4, true);
    if (cmd === 0x19 && at + 72 <= sizeofcmds) { // LC_SEGMENT_64: fileoff at 40, filesize at 48
      const end = Number(cv.getBigUint64(at + 40, true)) + Number(cv.getBigUint64(at + 48, true));
      if (end > size) return `a segment ends at byte ${end} of ${size}`;
    }
    if (cmdsize < 8) break;
    at += cmdsize;
  }
  return null;
}

function peProblem(path: string, v: DataView, size: number): string | null {
  const pe = v.getUint32(0x3c, true);
  if (pe + 24 > size) return "its PE header lies past the file";
  const hv = tryReadAt(path, pe, 24);
  if (hv === null || hv.getUint32(0, true) !== 0x00004550) return null; // "PE\0\0"
  const nsections = hv.getUint16(6, true);
  const table = pe + 24 + hv.getUint16(20, true);
  if (table + nsections * 40 > size) return "its section table ends past the file";
  const sv = tryReadAt(path, table, nsections * 40);
  if (sv === null) return null;
  for (let i = 0; i < nsections; i++) {
    const end = sv.getUint32(i * 40 + 20, true) + sv.getUint32(i * 40 + 16, true);
    if (end > size) return `a section ends at byte ${end} of ${size}`;
  }
  return null;
}

/** The message for a dlopen failure: says so when the file is the extension, not the library. */
export function explainLoadError(path: string, error: unknown): Error {
  const message = error instanceof Error ? error.message : String(error);
  if (/multiwriter\.(so|dylib|dll)$/.test(basename(path)) || /undefined symbol: sqlite3_/.test(message)) {
    return new Error(
      `sqlite-multiwriter: ${path} is the SQLite extension (libmultiwriter), which has no SQLite ` +
        "inside and is for the sqlite3 shell and C programs; Bun and Deno load the library " +
        `libmwsqlite3 (e.g. zig-out/lib/libmwsqlite3.so). The loader said: ${message}`,
      { cause: error },
    );
  }
  return new Error(`sqlite-multiwriter: cannot load ${path}: ${message}`, { cause: error });
}
