#!/usr/bin/env node
// release/publish-dry-run.mjs: rehearses the publication of a release, nothing uploaded.
//   1. `npm publish --dry-run` of every tarball of release/build-npm.mjs --pack, platform
//      packages first (the main package's optional dependencies name them), each checked
//      to report the package name and version that its package.json says.
//   2. the release assets as a user downloads them: release/manifest.mjs --assets writes
//      them, then `sha256sum -c SHA256SUMS` in that folder (what the release notes tell
//      users to run) and every manifest entry's size and sha256 against its file.
//   3. the JSR package's documentation: `deno doc --lint` of its entry point; JSR shows
//      what it reports on the package's page and scores it. Its errors are printed as a
//      warning until lib/ is documented (lib/ is not the release scripts' to change);
//      --docs-must-pass makes them a failure (for the release itself).
//   node release/publish-dry-run.mjs [--docs-must-pass] [tarballs folder]
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_TARGETS, npmPackageName } from "./targets.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const cli = process.argv.slice(2);
const docsMustPass = cli.includes("--docs-must-pass");
const tarballs = resolve(cli.find((a) => !a.startsWith("--")) ?? join(repo, "zig-out", "npm", "tarballs"));
const { name: mainName, version } = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));
const assets = join(repo, "zig-out", "assets");
const noColor = { ...process.env, NO_COLOR: "1" };
let failed = 0;
const fail = (msg) => {
  console.log(`FAIL ${msg}`);
  failed++;
};

// ---------------------------------------------------------------- 1. npm publish --dry-run
const tgz = (name) => join(tarballs, `${name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`);
const order = [...DEFAULT_TARGETS.map(npmPackageName), mainName];
for (const name of order) {
  if (!existsSync(tgz(name))) {
    fail(`${tgz(name)} missing: run node release/build-npm.mjs --pack`);
    continue;
  }
  // --access public: scoped packages are private by default. --tag: a dry run of the
  // real command. The registry is asked nothing in a dry run.
  const r = spawnSync("npm", ["publish", "--dry-run", "--access", "public", "--tag", "latest", tgz(name)], { encoding: "utf8", env: noColor });
  const out = `${r.stdout}${r.stderr}`;
  const said = /\+ (\S+)@(\S+)/.exec(out);
  if (r.status !== 0) fail(`npm publish --dry-run ${name}: exit ${r.status}\n${out}`);
  else if (!said || said[1] !== name || said[2] !== version) fail(`npm publish --dry-run ${name}: it would publish ${said ? `${said[1]}@${said[2]}` : "nothing it names"}`);
  else console.log(`ok   npm publish --dry-run ${name}@${version} (${/total files:\s*(\d+)/.exec(out)?.[1] ?? "?"} files)`);
}

// ---------------------------------------------------------------- 2. release assets
rmSync(assets, { recursive: true, force: true });
const m = spawnSync(process.execPath, ["release/manifest.mjs", "--out", join(repo, "zig-out", "npm", "manifest.json"), "--assets", assets], { cwd: repo, encoding: "utf8" });
if (m.status !== 0) fail(`release/manifest.mjs --assets: ${m.stdout}${m.stderr}`);
else {
  const sums = spawnSync("sha256sum", ["--check", "--strict", "SHA256SUMS"], { cwd: assets, encoding: "utf8" });
  const lines = sums.stdout.trim().split("\n").filter(Boolean);
  if (sums.status !== 0) fail(`sha256sum -c SHA256SUMS:\n${sums.stdout}${sums.stderr}`);
  else console.log(`ok   sha256sum -c SHA256SUMS: ${lines.length} files OK`);
  const manifest = JSON.parse(readFileSync(join(assets, "manifest.json"), "utf8"));
  let entries = 0;
  for (const [target, t] of Object.entries(manifest.targets)) {
    for (const role of ["library", "extension"]) {
      const e = t[role];
      const file = join(assets, e.asset);
      if (!existsSync(file)) {
        fail(`${target} ${role}: asset ${e.asset} missing`);
        continue;
      }
      const hash = createHash("sha256").update(readFileSync(file)).digest("hex");
      if (hash !== e.sha256 || statSync(file).size !== e.size) fail(`${target} ${role}: ${e.asset} is not what manifest.json says`);
      entries++;
    }
  }
  const listed = new Set(Object.values(manifest.targets).flatMap((t) => [t.library.asset, t.extension.asset]));
  const extra = readdirSync(assets).filter((f) => !listed.has(f) && f !== "manifest.json" && f !== "SHA256SUMS");
  if (extra.length) fail(`assets not in manifest.json: ${extra.join(", ")}`);
  console.log(`ok   manifest.json: ${entries} assets, sizes and sha256 match`);
}

// ---------------------------------------------------------------- 3. JSR documentation
const deno = join(repo, "node_modules", ".bin", "deno");
const entry = JSON.parse(readFileSync(join(repo, "deno.json"), "utf8")).exports;
const doc = spawnSync(deno, ["doc", "--lint", entry], { cwd: repo, encoding: "utf8", env: noColor });
const docErrors = Number(/Found (\d+) documentation lint error/.exec(doc.stderr + doc.stdout)?.[1] ?? (doc.status === 0 ? 0 : NaN));
if (doc.status !== 0) {
  const kinds = [...`${doc.stdout}${doc.stderr}`.matchAll(/^error\[([\w-]+)\]/gm)].map((x) => x[1]);
  const count = (k) => kinds.filter((x) => x === k).length;
  const msg = `deno doc --lint ${entry}: ${docErrors} errors (${[...new Set(kinds)].map((k) => `${count(k)} ${k}`).join(", ")}); run it to see each`;
  if (docsMustPass) fail(msg);
  else console.log(`WARN ${msg}`);
} else console.log(`ok   deno doc --lint ${entry}: no errors`);

console.log(`${failed ? `${failed} failed` : "publication rehearsed"}: ${order.length} npm packages, the release assets, the JSR docs`);
process.exit(failed ? 1 : 0);
