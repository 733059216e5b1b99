#!/usr/bin/env node
// layers.mjs: checks that the engine's files include only headers of their own layer or of
// the layers below it (docs/design.md, "Files"). Every .c and .h of native/src is read; each
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
  {
    from: "compact/compact.c",
    to: "core/db.h",
    why: "mw_db_release_orphans_locked: each compactor step releases the transactions whose " +
      "threads all ended, and mw_db_oldest_now_locked: how far it may prune (core/db.c owns " +
      "the lanes' snapshots); core/db.c starts, stops and runs the compactor (a call loop " +
      "core <-> compact)",
  },
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
for (const ex of EXCEPTIONS) {
  if (!used.has(ex)) problems.push(`exception ${ex.from} -> ${ex.to} is no longer needed: remove it`);
}

if (problems.length) {
  console.error(`layers: ${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`layers: ${includes} includes follow the layers (${EXCEPTIONS.length} named exception(s))`);
