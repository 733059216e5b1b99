#!/usr/bin/env node
// layers.mjs: checks that the engine's files include only headers of their own layer or of
// the layers below it (docs/design/engine.md, "Layers"). Every .c and .h of native/src is read; each
// `#include "..."` must name a file under native/src by its folder ("core/db.h"), or one
// of SQLite's or the public headers. Fails, listing every offending include, when a file
// includes a header of a higher layer that is not one of the named exceptions below, when
// an include names no file, or when a file belongs to no layer (a new folder: add it here).
//
// Usage: node scripts/layers.mjs
import { readdirSync, readFileSync, existsSync, statSync } from "node:fs";
import { join, relative, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "native", "src");

// The layers, from the bottom up: a file may include the headers of its own rank or lower.
// A path prefix or a whole path; the longest match wins.
const RANKS = [
  ["platform/", 0],            // the OS, background workers, crash points
  ["mw_internal.h", 0],        // the SQLite interface of the build
  ["btree/", 1],               // the b-tree page reader
  ["durability/", 2],          // the log
  ["engine.h", 3],             // the shared types
  // the core's lower part: what growth, rebase, processes and the compactor use of it
  ["core/store.", 3],
  ["core/pageset.", 3],
  ["core/owner.", 3],
  ["core/datafile.", 3],
  ["growth/", 4],
  ["processes/", 4],
  ["rebase/", 5],              // uses growth's mw_snap_page
  ["replica/", 5],             // the replica stream: reads the log, the file
  ["compact/", 6],
  ["core/", 7],                // db.c, commit.c, turn.c: drive everything below
  ["vfs/", 8],
];

// Includes that go up, on purpose. Each names the call it is for.
const EXCEPTIONS = [
  // none: the compactor asks the core through db->host (compact/compact.h), a methods table
];

// Headers from outside native/src.
const OUTSIDE = new Set(["sqlite3.h", "sqlite3ext.h", "multiwriter.h"]);

function rankOf(rel) {
  let best = null;
  for (const [prefix, rank] of RANKS) {
    if ((rel === prefix || rel.startsWith(prefix)) && (!best || prefix.length > best[0].length)) best = [prefix, rank];
  }
  return best ? best[1] : null;
}

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (/\.[ch]$/.test(name)) out.push(p);
  }
  return out;
}

const problems = [];
const used = new Set();
let includes = 0;
for (const path of walk(src)) {
  const rel = relative(src, path).split("\\").join("/");
  const rank = rankOf(rel);
  if (rank === null) {
    problems.push(`${rel}: belongs to no layer (add its folder to RANKS in scripts/layers.mjs)`);
    continue;
  }
  const text = readFileSync(path, "utf8");
  for (const m of text.matchAll(/^\s*#\s*include\s+"([^"]+)"/gm)) {
    const inc = m[1];
    includes++;
    if (OUTSIDE.has(inc)) continue;
    if (!existsSync(join(src, inc))) {
      problems.push(`${rel}: includes "${inc}", which is not a file under native/src (name its folder)`);
      continue;
    }
    const to = rankOf(inc);
    if (to === null || to <= rank) continue;
    const ex = EXCEPTIONS.find((e) => e.from === rel && e.to === inc);
    if (ex) {
      used.add(ex);
      continue;
    }
    problems.push(`${rel} (layer ${rank}) includes ${inc} (layer ${to}), a layer above its own`);
  }
}
// Calls: an include of a lower header cannot declare a function of a higher layer
// (engine.h is shared), so the calls are checked too. Each non-static function defined
// in a .c file belongs to that file's layer; a call from a file of a lower layer fails.
// Comments and string literals are blanked first; a function defined in two files (the
// POSIX and Windows platform layers) has one rank either way.
const blank = (text) =>
  text
    .replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, " "))
    .replace(/\/\/[^\n]*/g, "")
    .replace(/"(?:\\.|[^"\\\n])*"/g, '""');
const sources = walk(src)
  .filter((p) => p.endsWith(".c"))
  .map((p) => ({ rel: relative(src, p).split("\\").join("/"), text: blank(readFileSync(p, "utf8")) }));
const definedIn = new Map();
for (const f of sources) {
  for (const m of f.text.matchAll(/^(?!static\b)[A-Za-z_][\w \t*]*?\b(mw_\w+)\s*\([^;{]*\)\s*\{/gm)) {
    definedIn.set(m[1], f.rel);
  }
}
let calls = 0;
for (const f of sources) {
  const rank = rankOf(f.rel);
  if (rank === null) continue;
  const seen = new Set();
  for (const m of f.text.matchAll(/\b(mw_\w+)\s*\(/g)) {
    const def = definedIn.get(m[1]);
    if (!def || def === f.rel || seen.has(m[1])) continue;
    seen.add(m[1]);
    calls++;
    const to = rankOf(def);
    if (to !== null && to > rank) {
      problems.push(`${f.rel} (layer ${rank}) calls ${m[1]} of ${def} (layer ${to}), a layer above its own`);
    }
  }
}

for (const ex of EXCEPTIONS) {
  if (!used.has(ex)) problems.push(`exception ${ex.from} -> ${ex.to} is no longer needed: remove it`);
}

if (problems.length) {
  console.error(`layers: ${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`layers: ${includes} includes and ${calls} calls between files follow the layers (${EXCEPTIONS.length} named exception(s))`);
