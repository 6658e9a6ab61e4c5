// The codes scripts answer with, read back by name: as a number (TCP) or its text (REST, Lua's
// tostring), and a number no script writes refused as the bug it would be.
import { describe, expect, it } from "vitest";
import { CODE, type CodeName, codeName } from "../../src/redis/codes";

describe("codeName", () => {
  it("names every code from its number and from its text", () => {
    for (const [name, value] of Object.entries(CODE) as [CodeName, number][]) {
      expect(codeName(value)).toBe(name);
      expect(codeName(String(value))).toBe(name);
    }
  });

  it("throws on a code no script writes, or none (never read as 0, a success)", () => {
    for (const code of [3, -99, "x", 1.5, null, undefined, "", false, []]) {
      expect(() => codeName(code)).toThrow(/unknown code/);
    }
  });
});
