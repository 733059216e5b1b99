#!/usr/bin/env node
// Runs the pinned Zig (installed by bootstrap.mjs) with the given arguments.
import { spawnSync } from "node:child_process";
import { bootstrap, root } from "./bootstrap.mjs";

const { zig } = bootstrap();
const r = spawnSync(zig, process.argv.slice(2), { cwd: root, stdio: "inherit" });
process.exit(r.status ?? 1);
