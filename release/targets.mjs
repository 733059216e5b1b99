// release/targets.mjs: every release target as the packaging scripts see it: the
// folder name under zig-out/release (the same names as build.zig's release_targets
// and mobile_targets), what its files must be, and the npm package it goes into.
// Keep in step with build.zig.

/** Minimum glibc of the Linux glibc builds (the .2.17 of their Zig triples). */
export const MAX_GLIBC = "2.17";

const linuxFiles = { shared: "libmwsqlite3.so", extension: "libmultiwriter.so", static: "libmwsqlite3.a" };
const darwinFiles = { shared: "libmwsqlite3.dylib", extension: "libmultiwriter.dylib", static: "libmwsqlite3.a" };
const windowsFiles = { shared: "mwsqlite3.dll", extension: "multiwriter.dll", static: "mwsqlite3.lib" };

// os / cpu are Node's process.platform / process.arch values, which npm's "os" and
// "cpu" fields and lib/ffi/resolve.ts use too.
export const TARGETS = {
  "linux-x64-gnu": { os: "linux", cpu: "x64", libc: "glibc", format: "elf", machine: "x86_64", files: linuxFiles },
  "linux-arm64-gnu": { os: "linux", cpu: "arm64", libc: "glibc", format: "elf", machine: "aarch64", files: linuxFiles },
  "linux-x64-musl": { os: "linux", cpu: "x64", libc: "musl", format: "elf", machine: "x86_64", files: linuxFiles },
  "linux-arm64-musl": { os: "linux", cpu: "arm64", libc: "musl", format: "elf", machine: "aarch64", files: linuxFiles },
  "darwin-x64": { os: "darwin", cpu: "x64", format: "macho", machine: "x86_64", platform: "macos", minos: "11.0", files: darwinFiles },
  "darwin-arm64": { os: "darwin", cpu: "arm64", format: "macho", machine: "arm64", platform: "macos", minos: "11.0", files: darwinFiles },
  "win32-x64": { os: "win32", cpu: "x64", format: "pe", machine: "x86_64", files: windowsFiles },
  // Built only with an SDK (build.zig -Dandroid-ndk / -Dios-sdk / -Dios-simulator-sdk);
  // no npm package: neither Bun nor Deno runs there.
  "android-arm64": { os: "android", cpu: "arm64", libc: "bionic", format: "elf", machine: "aarch64", files: linuxFiles, mobile: true },
  "android-x64": { os: "android", cpu: "x64", libc: "bionic", format: "elf", machine: "x86_64", files: linuxFiles, mobile: true },
  "ios-arm64": { os: "ios", cpu: "arm64", format: "macho", machine: "arm64", platform: "ios", minos: "14.0", files: darwinFiles, mobile: true },
  "ios-arm64-simulator": { os: "ios", cpu: "arm64", format: "macho", machine: "arm64", platform: "iossimulator", minos: "14.0", files: darwinFiles, mobile: true },
};

/** The targets `zig build release` always builds (no SDK needed). */
export const DEFAULT_TARGETS = Object.keys(TARGETS).filter((t) => !TARGETS[t].mobile);

/** The npm package of a target, as lib/ffi/resolve.ts looks it up. */
export function npmPackageName(target) {
  const t = TARGETS[target];
  return `@sqlite-multiwriter/${t.os}-${t.cpu}${t.libc === "musl" ? "-musl" : ""}`;
}
