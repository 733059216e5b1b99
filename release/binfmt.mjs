// release/binfmt.mjs: reads ELF, Mach-O, PE/COFF and ar files with no external
// tool (readelf, nm, otool and dumpbin are absent on most machines that build a
// release). Each reader returns plain facts (kind, machine, defined and undefined
// symbols, needed libraries, versions); release/check-artifacts.mjs judges them.
// Only what the checks need is parsed; a malformed file throws a FormatError.

export class FormatError extends Error {
  constructor(message) {
    super(message);
    this.name = "FormatError";
  }
}

/** A bounds-checked little/big-endian reader over a Buffer. */
class Reader {
  constructor(buf, little = true) {
    this.buf = buf;
    this.little = little;
  }
  need(off, n, what) {
    if (!Number.isSafeInteger(off) || off < 0 || off + n > this.buf.length) {
      throw new FormatError(`${what}: offset ${off}+${n} is past the end of the file (${this.buf.length} bytes)`);
    }
  }
  u8(off, what = "u8") {
    this.need(off, 1, what);
    return this.buf[off];
  }
  u16(off, what = "u16") {
    this.need(off, 2, what);
    return this.little ? this.buf.readUInt16LE(off) : this.buf.readUInt16BE(off);
  }
  u32(off, what = "u32") {
    this.need(off, 4, what);
    return this.little ? this.buf.readUInt32LE(off) : this.buf.readUInt32BE(off);
  }
  u64(off, what = "u64") {
    this.need(off, 8, what);
    const v = this.little ? this.buf.readBigUInt64LE(off) : this.buf.readBigUInt64BE(off);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new FormatError(`${what}: value ${v} too large`);
    return Number(v);
  }
  i64(off, what = "i64") {
    this.need(off, 8, what);
    return this.little ? this.buf.readBigInt64LE(off) : this.buf.readBigInt64BE(off);
  }
  cstr(off, what = "string", max = 4096) {
    this.need(off, 1, what);
    let end = off;
    while (end < this.buf.length && this.buf[end] !== 0 && end - off < max) end++;
    if (end >= this.buf.length) throw new FormatError(`${what}: unterminated string at ${off}`);
    return this.buf.toString("latin1", off, end);
  }
  uleb(off, what = "uleb128") {
    let result = 0;
    let shift = 0;
    let p = off;
    for (;;) {
      const b = this.u8(p++, what);
      result += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if ((b & 0x80) === 0) break;
      if (shift > 63) throw new FormatError(`${what}: uleb128 too long at ${off}`);
    }
    return { value: result, next: p };
  }
}

/** Which format a buffer holds, from its magic number; null when none known. */
export function detect(buf) {
  if (buf.length >= 8 && buf.toString("latin1", 0, 8) === "!<arch>\n") return "ar";
  if (buf.length >= 4 && buf[0] === 0x7f && buf.toString("latin1", 1, 4) === "ELF") return "elf";
  if (buf.length >= 4) {
    const m = buf.readUInt32LE(0);
    if (m === 0xfeedfacf || m === 0xfeedface) return "macho";
    const be = buf.readUInt32BE(0);
    if (be === 0xcafebabe || be === 0xcafebabf) return "macho-fat";
  }
  if (buf.length >= 2 && buf.toString("latin1", 0, 2) === "MZ") return "pe";
  if (buf.length >= 20) {
    const machine = buf.readUInt16LE(0);
    if (COFF_MACHINES[machine]) return "coff";
  }
  return null;
}

// ---------------------------------------------------------------- ELF

const ELF_MACHINES = { 3: "x86", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv" };
const ELF_TYPES = { 1: "relocatable", 2: "executable", 3: "shared object", 4: "core" };
const SHT_SYMTAB = 2, SHT_DYNAMIC = 6, SHT_DYNSYM = 11, SHT_GNU_VERNEED = 0x6ffffffe;
const DT_NEEDED = 1n, DT_SONAME = 14n;

export function readElf(buf) {
  const r0 = new Reader(buf);
  if (detect(buf) !== "elf") throw new FormatError("not an ELF file");
  const cls = r0.u8(4, "EI_CLASS");
  const data = r0.u8(5, "EI_DATA");
  if (cls !== 2) throw new FormatError(`ELF class ${cls}: only 64-bit files are released`);
  if (data !== 1) throw new FormatError(`ELF data encoding ${data}: only little-endian files are released`);
  const r = new Reader(buf, true);
  const type = r.u16(16, "e_type");
  const machineId = r.u16(18, "e_machine");
  const phoff = r.u64(0x20, "e_phoff");
  const phentsize = r.u16(0x36, "e_phentsize");
  const phnum = r.u16(0x38, "e_phnum");
  // PT_GNU_STACK: without it, or with PF_X, the loader maps an executable stack
  // (and glibc 2.41+ refuses to dlopen such a library).
  let execStack = type === 1 ? null : true;
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    if (r.u32(o, "p_type") === 0x6474e551) execStack = (r.u32(o + 4, "p_flags") & 1) !== 0;
  }
  const shoff = r.u64(0x28, "e_shoff");
  const shentsize = r.u16(0x3a, "e_shentsize");
  const shnum = r.u16(0x3c, "e_shnum");
  if (shoff === 0 || shnum === 0) throw new FormatError("ELF file has no section headers");
  if (shentsize !== 64) throw new FormatError(`ELF section header size ${shentsize}`);
  const sections = [];
  for (let i = 0; i < shnum; i++) {
    const o = shoff + i * shentsize;
    sections.push({
      type: r.u32(o + 4, "sh_type"),
      offset: r.u64(o + 0x18, "sh_offset"),
      size: r.u64(o + 0x20, "sh_size"),
      link: r.u32(o + 0x28, "sh_link"),
      entsize: r.u64(o + 0x38, "sh_entsize"),
    });
  }
  const strAt = (sec, idx) => r.cstr(sections[sec.link]?.offset + idx, "ELF string");
  for (const s of sections) if (s.type !== 8 /* NOBITS */) r.need(s.offset, s.size, "ELF section");

  // Symbols: .dynsym for a shared object (what the dynamic linker sees), .symtab
  // for a relocatable object.
  const symSec = sections.find((s) => s.type === (type === 1 ? SHT_SYMTAB : SHT_DYNSYM));
  const defined = [];
  const undefined_ = [];
  if (symSec) {
    for (let o = symSec.offset + 24; o + 24 <= symSec.offset + symSec.size; o += 24) {
      const nameIdx = r.u32(o, "st_name");
      const info = r.u8(o + 4, "st_info");
      const other = r.u8(o + 5, "st_other");
      const shndx = r.u16(o + 6, "st_shndx");
      const bind = info >> 4;
      const vis = other & 3;
      if (nameIdx === 0) continue;
      const name = strAt(symSec, nameIdx);
      if (bind !== 1 && bind !== 2) continue; // LOCAL
      if (shndx === 0) undefined_.push(name);
      else if (vis === 0 || vis === 3) defined.push(name); // DEFAULT or PROTECTED
    }
  }

  const needed = [];
  let soname = null;
  let textrel = false;
  const dyn = sections.find((s) => s.type === SHT_DYNAMIC);
  if (dyn) {
    for (let o = dyn.offset; o + 16 <= dyn.offset + dyn.size; o += 16) {
      const tag = r.i64(o, "d_tag");
      if (tag === 0n) break;
      const val = r.u64(o + 8, "d_val");
      if (tag === DT_NEEDED) needed.push(strAt(dyn, val));
      if (tag === DT_SONAME) soname = strAt(dyn, val);
      if (tag === 22n /* DT_TEXTREL */ || (tag === 30n /* DT_FLAGS */ && (val & 4) !== 0)) textrel = true;
    }
  }

  // .gnu.version_r: each library and the symbol versions required from it.
  const versionNeeds = [];
  const vr = sections.find((s) => s.type === SHT_GNU_VERNEED);
  if (vr) {
    let o = vr.offset;
    for (let guard = 0; guard < 1000; guard++) {
      const cnt = r.u16(o + 2, "vn_cnt");
      const file = strAt(vr, r.u32(o + 4, "vn_file"));
      const aux = r.u32(o + 8, "vn_aux");
      const next = r.u32(o + 12, "vn_next");
      let a = o + aux;
      for (let i = 0; i < cnt; i++) {
        versionNeeds.push({ file, version: strAt(vr, r.u32(a + 8, "vna_name")) });
        const an = r.u32(a + 12, "vna_next");
        if (an === 0) break;
        a += an;
      }
      if (next === 0) break;
      o += next;
    }
  }
  return {
    format: "elf",
    kind: ELF_TYPES[type] ?? `type ${type}`,
    machine: ELF_MACHINES[machineId] ?? `machine ${machineId}`,
    defined,
    undefined: undefined_,
    needed,
    soname,
    versionNeeds,
    execStack,
    textrel,
  };
}

// ---------------------------------------------------------------- Mach-O

const MACHO_CPUS = { 0x01000007: "x86_64", 0x0100000c: "arm64", 7: "x86", 12: "arm" };
const MACHO_TYPES = { 1: "relocatable", 2: "executable", 6: "shared object", 8: "bundle" };
const MACHO_PLATFORMS = { 1: "macos", 2: "ios", 3: "tvos", 4: "watchos", 6: "maccatalyst", 7: "iossimulator" };
const LC_SYMTAB = 0x2, LC_LOAD_DYLIB = 0xc, LC_ID_DYLIB = 0xd, LC_CODE_SIGNATURE = 0x1d;
const LC_DYLD_INFO = 0x22, LC_DYLD_INFO_ONLY = 0x80000022, LC_VERSION_MIN_MACOSX = 0x24;
const LC_VERSION_MIN_IPHONEOS = 0x25, LC_BUILD_VERSION = 0x32, LC_DYLD_EXPORTS_TRIE = 0x80000033;
const LC_LOAD_WEAK_DYLIB = 0x80000018, LC_REEXPORT_DYLIB = 0x8000001f;

function machoVersion(v) {
  return `${v >>> 16}.${(v >>> 8) & 0xff}${v & 0xff ? `.${v & 0xff}` : ""}`;
}

/** Names in a dyld export trie (a prefix tree whose terminal nodes are exports). */
function readExportTrie(r, start, size) {
  const names = [];
  const end = start + size;
  r.need(start, size, "export trie");
  const stack = [{ off: 0, prefix: "" }];
  let visited = 0;
  while (stack.length) {
    const { off, prefix } = stack.pop();
    if (++visited > 1_000_000) throw new FormatError("export trie: too many nodes (a loop?)");
    if (start + off >= end) throw new FormatError("export trie: node offset past the end");
    const term = r.uleb(start + off, "trie terminal size");
    if (term.value > 0) names.push(prefix);
    let p = term.next + term.value;
    const children = r.u8(p++, "trie child count");
    for (let i = 0; i < children; i++) {
      const edge = r.cstr(p, "trie edge");
      p += edge.length + 1;
      const child = r.uleb(p, "trie child offset");
      p = child.next;
      stack.push({ off: child.value, prefix: prefix + edge });
    }
  }
  return names;
}

export function readMachO(buf) {
  const r = new Reader(buf, true);
  const magic = r.u32(0, "Mach-O magic");
  if (magic !== 0xfeedfacf) throw new FormatError("Mach-O: only 64-bit little-endian files are released");
  const cputype = r.u32(4, "cputype");
  const filetype = r.u32(12, "filetype");
  const ncmds = r.u32(16, "ncmds");
  const flags = r.u32(24, "flags");
  let o = 32;
  const loads = [];
  let installName = null;
  let platform = null;
  let minos = null;
  let codeSignature = false;
  let trie = null;
  let symtab = null;
  for (let i = 0; i < ncmds; i++) {
    const cmd = r.u32(o, "load command");
    const size = r.u32(o + 4, "load command size");
    if (size < 8) throw new FormatError(`Mach-O load command ${i} has size ${size}`);
    r.need(o, size, "load command");
    switch (cmd) {
      case LC_LOAD_DYLIB:
      case LC_LOAD_WEAK_DYLIB:
      case LC_REEXPORT_DYLIB:
        loads.push(r.cstr(o + r.u32(o + 8), "dylib name"));
        break;
      case LC_ID_DYLIB:
        installName = r.cstr(o + r.u32(o + 8), "install name");
        break;
      case LC_BUILD_VERSION:
        platform = MACHO_PLATFORMS[r.u32(o + 8)] ?? `platform ${r.u32(o + 8)}`;
        minos = machoVersion(r.u32(o + 12));
        break;
      case LC_VERSION_MIN_MACOSX:
      case LC_VERSION_MIN_IPHONEOS:
        platform = cmd === LC_VERSION_MIN_MACOSX ? "macos" : "ios";
        minos = machoVersion(r.u32(o + 8));
        break;
      case LC_CODE_SIGNATURE:
        codeSignature = true;
        break;
      case LC_DYLD_INFO:
      case LC_DYLD_INFO_ONLY:
        if (r.u32(o + 44) > 0) trie = { off: r.u32(o + 40), size: r.u32(o + 44) };
        break;
      case LC_DYLD_EXPORTS_TRIE:
        if (r.u32(o + 12) > 0) trie = { off: r.u32(o + 8), size: r.u32(o + 12) };
        break;
      case LC_SYMTAB:
        symtab = { symoff: r.u32(o + 8), nsyms: r.u32(o + 12), stroff: r.u32(o + 16), strsize: r.u32(o + 20) };
        break;
    }
    o += size;
  }
  // External symbols from the symbol table: defined (N_SECT) and undefined (N_UNDF).
  const symDefined = [];
  const undefined_ = [];
  if (symtab) {
    r.need(symtab.symoff, symtab.nsyms * 16, "Mach-O symbol table");
    r.need(symtab.stroff, symtab.strsize, "Mach-O string table");
    for (let i = 0; i < symtab.nsyms; i++) {
      const s = symtab.symoff + i * 16;
      const type = r.u8(s + 4);
      if (type & 0xe0) continue; // N_STAB debugging entries
      if (!(type & 0x01)) continue; // not N_EXT
      const name = r.cstr(symtab.stroff + r.u32(s), "symbol name");
      const kind = type & 0x0e;
      if (kind === 0x0) undefined_.push(name);
      else if (kind === 0xe) symDefined.push(name);
    }
  }
  // A dylib's exports are what dyld sees: the export trie when there is one.
  const defined = trie ? readExportTrie(r, trie.off, trie.size) : symDefined;
  const strip = (n) => (n.startsWith("_") ? n.slice(1) : n);
  return {
    format: "macho",
    kind: MACHO_TYPES[filetype] ?? `filetype ${filetype}`,
    machine: MACHO_CPUS[cputype] ?? `cputype 0x${cputype.toString(16)}`,
    defined: defined.map(strip),
    undefined: undefined_.map(strip),
    exportSource: trie ? "export trie" : "symbol table",
    needed: loads,
    installName,
    platform,
    minos,
    codeSignature,
    noUndefs: (flags & 0x1) !== 0,
  };
}

// ---------------------------------------------------------------- PE / COFF

const COFF_MACHINES = { 0x8664: "x86_64", 0xaa64: "arm64", 0x14c: "x86" };

function readCoffSymbols(r, symPtr, nsyms, what) {
  // The string table follows the symbol table; names longer than 8 bytes live there.
  const strBase = symPtr + nsyms * 18;
  const defined = [];
  const undefined_ = [];
  for (let i = 0; i < nsyms; i++) {
    const s = symPtr + i * 18;
    let name;
    if (r.u32(s, what) === 0) name = r.cstr(strBase + r.u32(s + 4, what), `${what} name`);
    else name = r.buf.toString("latin1", s, s + 8).replace(/\0.*$/s, "");
    const section = r.u16(s + 12, what);
    const storage = r.u8(s + 16, what);
    const aux = r.u8(s + 17, what);
    if (storage === 2 /* EXTERNAL */) {
      if (section === 0) undefined_.push(name);
      else if (section < 0xfffe) defined.push(name);
    }
    i += aux;
  }
  return { defined, undefined: undefined_ };
}

export function readCoff(buf) {
  const r = new Reader(buf, true);
  const machine = r.u16(0, "COFF machine");
  const nsyms = r.u32(12, "COFF symbol count");
  const symPtr = r.u32(8, "COFF symbol table");
  const syms = symPtr ? readCoffSymbols(r, symPtr, nsyms, "COFF symbol") : { defined: [], undefined: [] };
  return { format: "coff", kind: "relocatable", machine: COFF_MACHINES[machine] ?? `machine 0x${machine.toString(16)}`, ...syms };
}

export function readPe(buf) {
  const r = new Reader(buf, true);
  const peOff = r.u32(0x3c, "e_lfanew");
  if (r.u32(peOff, "PE signature") !== 0x00004550) throw new FormatError("PE signature missing");
  const c = peOff + 4;
  const machine = r.u16(c, "PE machine");
  const nsec = r.u16(c + 2, "section count");
  const optSize = r.u16(c + 16, "optional header size");
  const characteristics = r.u16(c + 18, "characteristics");
  const opt = c + 20;
  const optMagic = r.u16(opt, "optional header magic");
  if (optMagic !== 0x20b) throw new FormatError(`PE optional header magic 0x${optMagic.toString(16)}: not PE32+`);
  const dllCharacteristics = r.u16(opt + 70, "DllCharacteristics");
  const ndirs = r.u32(opt + 108, "NumberOfRvaAndSizes");
  const dir = (i) => (i < ndirs ? { rva: r.u32(opt + 112 + i * 8), size: r.u32(opt + 116 + i * 8) } : { rva: 0, size: 0 });
  const sections = [];
  const secBase = opt + optSize;
  for (let i = 0; i < nsec; i++) {
    const s = secBase + i * 40;
    sections.push({ vsize: r.u32(s + 8), va: r.u32(s + 12), rawSize: r.u32(s + 16), raw: r.u32(s + 20) });
  }
  const off = (rva) => {
    for (const s of sections) {
      if (rva >= s.va && rva < s.va + Math.max(s.vsize, s.rawSize)) return s.raw + (rva - s.va);
    }
    throw new FormatError(`PE: RVA 0x${rva.toString(16)} is in no section`);
  };
  const defined = [];
  const exp = dir(0);
  if (exp.rva) {
    const e = off(exp.rva);
    const nnames = r.u32(e + 24, "NumberOfNames");
    const names = off(r.u32(e + 32, "AddressOfNames"));
    for (let i = 0; i < nnames; i++) defined.push(r.cstr(off(r.u32(names + i * 4)), "export name"));
  }
  const needed = [];
  const undefined_ = [];
  const imp = dir(1);
  if (imp.rva) {
    for (let d = off(imp.rva); ; d += 20) {
      const nameRva = r.u32(d + 12, "import name");
      if (nameRva === 0) break;
      needed.push(r.cstr(off(nameRva), "import DLL name"));
      const lookup = r.u32(d, "OriginalFirstThunk") || r.u32(d + 16, "FirstThunk");
      if (!lookup) continue;
      for (let t = off(lookup); ; t += 8) {
        const lo = r.u32(t, "thunk");
        const hi = r.u32(t + 4, "thunk");
        if (lo === 0 && hi === 0) break;
        if (hi & 0x80000000) continue; // by ordinal
        undefined_.push(r.cstr(off(lo) + 2, "import name"));
      }
      if (needed.length > 1000) throw new FormatError("PE import directory: too many entries");
    }
  }
  return {
    format: "pe",
    kind: characteristics & 0x2000 ? "shared object" : characteristics & 0x0002 ? "executable" : "image",
    machine: COFF_MACHINES[machine] ?? `machine 0x${machine.toString(16)}`,
    defined,
    undefined: undefined_,
    needed,
    characteristics,
    dllCharacteristics,
  };
}

// ---------------------------------------------------------------- ar

/** The members of an ar archive (GNU, BSD or COFF flavour) and its symbol index. */
export function readAr(buf) {
  if (detect(buf) !== "ar") throw new FormatError("not an ar archive");
  const r = new Reader(buf, true);
  const members = [];
  let longNames = null;
  let index = null;
  let o = 8;
  while (o < buf.length) {
    if (o + 60 > buf.length) throw new FormatError(`ar: truncated member header at ${o}`);
    const header = buf.toString("latin1", o, o + 60);
    if (header.slice(58, 60) !== "`\n") throw new FormatError(`ar: bad member header at ${o}`);
    let name = header.slice(0, 16).trimEnd();
    const size = Number.parseInt(header.slice(48, 58).trim(), 10);
    if (!Number.isSafeInteger(size) || size < 0) throw new FormatError(`ar: bad member size at ${o}`);
    let data = o + 60;
    let dataSize = size;
    if (data + size > buf.length) throw new FormatError(`ar: member "${name}" runs past the end of the file`);
    if (name.startsWith("#1/")) {
      // BSD: the name's length follows "#1/", the name opens the data.
      const n = Number.parseInt(name.slice(3), 10);
      name = buf.toString("latin1", data, data + n).replace(/\0+$/, "");
      data += n;
      dataSize -= n;
    } else if (name === "//") {
      longNames = buf.subarray(data, data + size);
    } else if (name.startsWith("/") && /^\/\d+$/.test(name) && longNames) {
      const at = Number.parseInt(name.slice(1), 10);
      const end = longNames.indexOf("\n", at);
      name = longNames.toString("latin1", at, end < 0 ? longNames.length : end).replace(/\/$/, "");
    } else if (name.endsWith("/") && name !== "/") {
      name = name.slice(0, -1);
    }
    const body = buf.subarray(data, data + dataSize);
    if (name === "/" || name === "/SYM64/") {
      // GNU and COFF first linker member: count, offsets, names (big-endian).
      if (index === null) index = readGnuIndex(body, name === "/SYM64/" ? 8 : 4);
    } else if (name.startsWith("__.SYMDEF")) {
      index = readBsdIndex(body, name.includes("64") ? 8 : 4);
    } else if (name !== "//") {
      members.push({ name, data: body });
    }
    o = data + dataSize + ((o + 60 + size) % 2); // members are 2-byte aligned
  }
  return { members, index };
}

function readGnuIndex(body, width) {
  const r = new Reader(body, false);
  const count = width === 8 ? r.u64(0, "ar index count") : r.u32(0, "ar index count");
  let p = width + count * width;
  const names = [];
  for (let i = 0; i < count; i++) {
    const n = r.cstr(p, "ar index name");
    names.push(n);
    p += n.length + 1;
  }
  return names;
}

function readBsdIndex(body, width) {
  const r = new Reader(body, true);
  const ranlibBytes = width === 8 ? r.u64(0, "ranlib size") : r.u32(0, "ranlib size");
  const entries = ranlibBytes / (2 * width);
  const strBase = width + ranlibBytes + width;
  const names = [];
  for (let i = 0; i < entries; i++) {
    const strx = width === 8 ? r.u64(width + i * 2 * width) : r.u32(width + i * 2 * width);
    names.push(r.cstr(strBase + strx, "ranlib name"));
  }
  return names;
}

/** Reads any supported file: one result, or for an archive its members' results. */
export function readBinary(buf) {
  switch (detect(buf)) {
    case "elf":
      return readElf(buf);
    case "macho":
      return readMachO(buf);
    case "pe":
      return readPe(buf);
    case "coff":
      return readCoff(buf);
    case "macho-fat":
      throw new FormatError("universal (fat) Mach-O files are not released");
    case "ar": {
      const { members, index } = readAr(buf);
      const read = members.map((m) => ({ name: m.name, ...readBinary(m.data) }));
      // Mach-O symbol names carry a leading underscore; the readers drop it.
      const macho = read.length > 0 && read.every((m) => m.format === "macho");
      const names = index && macho ? index.map((n) => (n.startsWith("_") ? n.slice(1) : n)) : index;
      return { format: "ar", kind: "static library", index: names, members: read };
    }
    default:
      throw new FormatError("unknown file format (no ELF, Mach-O, PE, COFF or ar magic)");
  }
}
