// lib/ffi/check.ts: looks at a library file before it is handed to dlopen. The loader maps
// the file: a truncated one (an interrupted copy or download) kills the process with SIGBUS
// when a mapped page past the end is touched, and the extension (libmultiwriter, which has
// no SQLite inside) fails with a bare "undefined symbol". Both become clear errors here.
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
 * Throws when the file cannot be a complete library: too small, or (64-bit ELF) a program
 * header, segment or section table reaching past its end. Returns nothing otherwise.
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
  const elf = head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46;
  if (!elf || head[4] !== 2 || head[5] !== 1) return; // only 64-bit little-endian ELF is parsed
  const v = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const phoff = Number(v.getBigUint64(0x20, true));
  const shoff = Number(v.getBigUint64(0x28, true));
  const phentsize = v.getUint16(0x36, true);
  const phnum = v.getUint16(0x38, true);
  const shentsize = v.getUint16(0x3a, true);
  const shnum = v.getUint16(0x3c, true);
  if (phoff + phnum * phentsize > size) throw broken("its program headers end past the file");
  if (shoff !== 0 && shoff + shnum * shentsize > size) throw broken("its section table ends past the file");
  if (phentsize < 40 || phnum === 0) return;
  let ph: Uint8Array;
  try {
    ph = readAt(path, phoff, phnum * phentsize);
  } catch {
    return;
  }
  const pv = new DataView(ph.buffer);
  for (let i = 0; i < phnum; i++) {
    const at = i * phentsize;
    if (pv.getUint32(at, true) !== 1) continue; // PT_LOAD
    const offset = Number(pv.getBigUint64(at + 8, true));
    const filesz = Number(pv.getBigUint64(at + 32, true));
    if (offset + filesz > size) throw broken(`a loaded segment ends at byte ${offset + filesz} of ${size}`);
  }
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
