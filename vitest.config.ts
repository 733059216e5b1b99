// vitest configuration, shared by both runtimes: `bun --bun vitest run` and
// `deno run -A npm:vitest run` (scripts/test.mjs runs both). Each test file runs in its own
// process, so a library loaded or an extension registered by one file never leaks into another.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});
