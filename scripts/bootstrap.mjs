#!/usr/bin/env node
// Brings the pinned toolchain when it is missing: the npm dev dependencies (from the
// lock file) and Zig from PyPI into .tools/zig. Nothing is installed globally.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const ZIG_VERSION = "0.14.1";
export const zigDir = join(root, ".tools", "zig");
export const zigBinary = join(zigDir, "ziglang", process.platform === "win32" ? "zig.exe" : "zig");

function run(cmd, args) {
  console.log(`[bootstrap] ${cmd} ${args.join(" ")}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.error(`[bootstrap] failed: ${cmd} ${args.join(" ")} (exit ${r.status ?? r.signal})`);
    process.exit(1);
  }
}

// node_modules is current when it was installed from this very lock file.
const lockMarker = join(root, "node_modules", ".sqlite-multiwriter-lock.sha256");
function lockHash() {
  return createHash("sha256").update(readFileSync(join(root, "package-lock.json"))).digest("hex");
}

function runs(bin) {
  const r = spawnSync(join(root, "node_modules", ".bin", bin), ["--version"], { encoding: "utf8" });
  return r.status === 0;
}

function npmIsCurrent() {
  if (!existsSync(lockMarker) || readFileSync(lockMarker, "utf8") !== lockHash()) return false;
  for (const bin of ["bun", "deno", "vitest", "tsc"]) {
    if (!existsSync(join(root, "node_modules", ".bin", bin))) return false;
  }
  return runs("bun") && runs("deno");
}

function zigIsCurrent() {
  const info = join(zigDir, `ziglang-${ZIG_VERSION}.dist-info`);
  return existsSync(zigBinary) && existsSync(info);
}

export function bootstrap() {
  if (!npmIsCurrent()) {
    // bun and deno ship their binaries in per-platform optional packages, so no install
    // script has to run (npm 11 does not run them unless allowed). `npm ci` installs exactly
    // the lock file (and fails when package.json and the lock disagree).
    run("npm", ["ci", "--no-audit", "--no-fund", "--ignore-scripts"]);
    // Bun's own postinstall only swaps its placeholder for the binary of the platform
    // package that npm already installed: run it ourselves (no download).
    run("node", ["node_modules/bun/install.js"]);
    writeFileSync(lockMarker, lockHash());
  }
  if (!zigIsCurrent()) {
    run("python3", [
      "-m", "pip", "install", "--disable-pip-version-check", "--no-warn-script-location",
      "--upgrade", "--target", zigDir, `ziglang==${ZIG_VERSION}`,
    ]);
  }
  const version = spawnSync(zigBinary, ["version"], { encoding: "utf8" }).stdout?.trim();
  if (version !== ZIG_VERSION) {
    console.error(`[bootstrap] expected zig ${ZIG_VERSION} at ${zigBinary}, found ${version ?? "nothing"}`);
    process.exit(1);
  }
  return { zig: zigBinary };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  bootstrap();
  console.log("[bootstrap] toolchain ready");
}
