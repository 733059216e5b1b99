// The one binding: the generated symbol table matches its description, every function
// it names is declared in the C headers, and both adapters load every symbol.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
// @ts-ignore: a plain .mjs script without types
import { generatedPath, readDescription, render } from "../scripts/gen-binding.mjs";
import { ffi } from "../lib/ffi/index.ts";
import { callbacks, functions } from "../lib/ffi/symbols.generated.ts";
import { root, runtime } from "./helpers.ts";

describe("binding", () => {
  it("the committed symbol table is what gen-binding.mjs generates (not stale)", () => {
    const expected = render(readDescription());
    const current = readFileSync(generatedPath, "utf8");
    expect(current, "lib/ffi/symbols.generated.ts is stale: run node scripts/gen-binding.mjs").toBe(expected);
  });

  it("detects a stale table: a changed description renders differently", () => {
    const d = readDescription();
    d.functions.sqlite3_step.returns = "i64";
    expect(render(d)).not.toBe(readFileSync(generatedPath, "utf8"));
  });

  it("rejects an unknown type in the description", () => {
    const d = readDescription();
    d.functions.sqlite3_step.args = ["pointer"];
    expect(() => render(d)).toThrow(/unknown type pointer/);
  });

  it("every function is declared in sqlite3.h or multiwriter.h", () => {
    const headers = readFileSync(join(root, "native/sqlite/sqlite3.h"), "utf8") +
      readFileSync(join(root, "native/include/multiwriter.h"), "utf8");
    for (const name of Object.keys(functions)) {
      expect(headers, name).toMatch(new RegExp(`\\b${name}\\s*\\(`));
    }
    expect(Object.keys(callbacks)).toContain("scalar");
  });

  it(`loads every symbol under ${runtime}`, () => {
    const f = ffi();
    expect(f.runtime).toBe(runtime);
    for (const name of Object.keys(functions)) {
      expect(typeof (f.sym as unknown as Record<string, unknown>)[name], name).toBe("function");
    }
    expect(f.cstring(f.sym.sqlite3_libversion())).toBe("3.54.1");
  });
});
