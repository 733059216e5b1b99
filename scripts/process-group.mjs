// scripts/process-group.mjs: the process groups that the test runners start their runs in
// (spawn with detached: true makes the child the leader of a group and a session of its own),
// so that a run's limit or a ^C stops everything the run started. Used by scripts/test.mjs,
// scripts/mutate.mjs and release/platforms.mjs.
import { spawnSync } from "node:child_process";

/** Sends `signal` to every process of the group that `pid` leads; nothing once it is gone. */
export function killGroup(pid, signal = "SIGKILL") {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** What still runs in the session that `pid` leads, each process with its age (ps), to name
 * what a run killed at its limit was waiting for. */
export function stillRunning(pid) {
  const ps = spawnSync("ps", ["-o", "pid,etimes,args", "-s", String(pid)], { encoding: "utf8" });
  return ps.stdout ?? ps.error?.message ?? "";
}
