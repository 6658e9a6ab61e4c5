// Each script carries the part of the Lua library it calls (src/redis/lua/lib/shake.ts): never
// less, or a helper is a nil global at run time on the one path that calls it.
import { describe, expect, it } from "vitest";
import { LUA_LIB } from "../../src/redis/lua/lib";
import { libraryFor, statementsOf } from "../../src/redis/lua/lib/shake";
import { SCRIPTS, scriptText } from "../../src/redis/lua/scripts";

const SAMPLE = `
local rcall = redis.call
local NOW = tonumber(ARGV[2])
local key = {}
key.job = function(x) return "j:" .. x end
key.topics = "topics"
-- column-0 comment naming unused()
local A, B = 1, 2
local function unused()
  return A
end
local function setup()
  redis.setresp(2)
end
local function load(id)
  -- an indented comment naming unused()
  return rcall("GET", key.job(id))
end
local function age(id)
  local raw = load(id)
  if raw then
    return NOW - B
  end
end
redis.setresp(2)
setup()
`;

describe("the library each script carries", () => {
  const statements = statementsOf(SAMPLE);

  it("splits the library into its top-level statements and the names each defines", () => {
    expect(statements.map((s) => s.defines)).toEqual([
      ["rcall"],
      ["NOW"],
      ["key"],
      ["key"],
      ["key"],
      ["A", "B"],
      ["unused"],
      ["setup"],
      ["load"],
      ["age"],
      [],
      [],
    ]);
    expect(statements[8]?.text).toContain('return rcall("GET", key.job(id))\nend');
  });

  it("keeps what a script calls and what that calls, in order, and drops the rest", () => {
    const lib = libraryFor(statements, "-- unused() is named only here\nreturn age(ARGV[4])");
    expect(lib).toBe(
      [
        "local rcall = redis.call",
        "local NOW = tonumber(ARGV[2])",
        "local key = {}",
        'key.job = function(x) return "j:" .. x end',
        'key.topics = "topics"',
        "local A, B = 1, 2",
        "local function setup()",
        "  redis.setresp(2)",
        "end",
        "local function load(id)",
        "  -- an indented comment naming unused()",
        '  return rcall("GET", key.job(id))',
        "end",
        "local function age(id)",
        "  local raw = load(id)",
        "  if raw then",
        "    return NOW - B",
        "  end",
        "end",
        "redis.setresp(2)",
        "setup()",
      ].join("\n"),
    );
    // A statement kept for its effect keeps what it calls.
    expect(libraryFor(statements, "return 1")).toBe(
      ["local function setup()", "  redis.setresp(2)", "end", "redis.setresp(2)", "setup()"].join(
        "\n",
      ),
    );
  });

  it("refuses a library statement it cannot read the names of", () => {
    expect(() => statementsOf("local function f()\nend\nlocal {x} = 1")).toThrow(/Unexpected/);
    expect(() => statementsOf("  indented()\nlocal a = 1")).toThrow(/inside a statement/);
  });

  it("gives every script a definition of each library name its text uses", () => {
    const names = new Set(statementsOf(LUA_LIB).flatMap((s) => s.defines));
    for (const [name, script] of Object.entries(SCRIPTS)) {
      const text = scriptText(script);
      const code = text.replace(/--\[(=*)\[[\s\S]*?\]\1\]/g, "").replace(/--.*$/gm, "");
      const used = [...new Set(code.match(/[A-Za-z_]\w*/g))].filter((word) => names.has(word));
      const defined = (word: string) =>
        new RegExp(`^local (function ${word}\\b|[\\w, ]*\\b${word}\\b[\\w, ]*(=|$))`, "m").test(
          text,
        );
      expect(
        used.filter((word) => !defined(word)),
        `${name}: used but not defined`,
      ).toEqual([]);
    }
  });

  it("leaves out of a script the helpers only other scripts call", () => {
    const lines = (name: keyof typeof SCRIPTS) => scriptText(SCRIPTS[name]).split("\n").length;
    expect(scriptText(SCRIPTS.get)).not.toMatch(/^local function reserveReady\b/m);
    expect(scriptText(SCRIPTS.pop)).toMatch(/^local function reserveReady\b/m);
    expect(scriptText(SCRIPTS.list)).not.toMatch(/^local function claim\b/m);
    expect(lines("get")).toBeLessThan(LUA_LIB.split("\n").length / 2);
  });
});
