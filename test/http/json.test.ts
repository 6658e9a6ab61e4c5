// stringifyJson (the API's JSON writer) against JSON.stringify, and against an independent
// writer that puts RawJson texts in with a replacer and placeholders, on many values.
import { describe, expect, it } from "vitest";
import { RawJson, stringifyJson } from "../../src/domain/raw-json";

/** A second way to write RawJson: JSON.stringify with placeholders, then a RegExp pass. */
function viaReplacer(value: unknown): string | undefined {
  const raws: string[] = [];
  const marker = `\u0000raw${Math.random().toString(36).slice(2, 10)}:`;
  const text = JSON.stringify(value, (_key, item: unknown) =>
    item instanceof RawJson ? `${marker}${raws.push(item.text) - 1}` : item,
  );
  if (raws.length === 0) return text;
  const escaped = JSON.stringify(marker)
    .slice(1, -1)
    .replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
  return text.replace(
    new RegExp(`"${escaped}(\\d+)"`, "g"),
    (_, n: string) => raws[Number(n)] ?? "null",
  );
}

/** Deterministic values of every shape JSON.stringify treats specially. */
function sample(seed: number, depth: number): unknown {
  const leaves: unknown[] = [
    null,
    undefined,
    true,
    false,
    0,
    -0,
    1.5,
    -42,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    1e21,
    "",
    "plain",
    'quote " backslash \\ newline \n tab \t',
    "\u0000 nul \u001f \u2028 \u2029",
    "lone \ud800 surrogate",
    "emoji 😀 中文",
    () => 1,
    Symbol("s"),
    new Date(1_700_000_000_000),
    new Number(3),
    new String("boxed"),
    new Boolean(false),
    { toJSON: (key: string) => `toJSON of ${JSON.stringify(key)}` },
    new Map([["a", 1]]),
  ];
  if (depth === 0 || seed % 3 === 0) return leaves[seed % leaves.length];
  const size = seed % 5;
  if (seed % 2 === 0) {
    return Array.from({ length: size }, (_, i) => sample(seed * 7 + i + 1, depth - 1));
  }
  const object: Record<string, unknown> = {};
  const names = ["id", "body", "2", "1", 'we"ird', "\n", "ünï", "__proto_", "z"];
  for (let i = 0; i < size; i++) {
    object[names[(seed + i) % names.length] as string] = sample(seed * 11 + i + 1, depth - 1);
  }
  return object;
}

/** Replaces some leaves by RawJson holding JSON text (what a job body is). */
function withRaw(value: unknown, seed: number): unknown {
  const texts = ['{"a":1}', "4200001234567890123", "1e400", '"s"', "[1, 2 ,3]", " null "];
  if (Array.isArray(value)) return value.map((item, i) => withRaw(item, seed + i));
  if (value !== null && typeof value === "object" && value.constructor === Object) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v], i) => [
        k,
        (seed + i) % 4 === 0
          ? new RawJson(texts[(seed + i) % texts.length] as string)
          : withRaw(v, seed + i),
      ]),
    );
  }
  return value;
}

describe("stringifyJson", () => {
  it("writes what JSON.stringify writes for values without RawJson", () => {
    for (let seed = 0; seed < 2000; seed++) {
      const value = sample(seed, 4);
      expect(stringifyJson(value)).toBe(JSON.stringify(value));
    }
  });

  it("writes what a replacer-based writer writes for values with RawJson", () => {
    let raws = 0;
    for (let seed = 0; seed < 2000; seed++) {
      const value = withRaw(sample(seed, 4), seed);
      const text = stringifyJson(value);
      expect(text).toBe(viaReplacer(value));
      // RawJson made a difference here (else the walk was only tested on plain values).
      if (text !== JSON.stringify(value)) raws++;
    }
    expect(raws).toBeGreaterThan(200);
  });

  it("writes a pop answer's bodies as their text", () => {
    const answer = {
      jobs: [{ id: "a", topic: "t", body: new RawJson('{"n": 4200001234567890123}'), attempts: 1 }],
    };
    expect(stringifyJson(answer)).toBe(
      '{"jobs":[{"id":"a","topic":"t","body":{"n": 4200001234567890123},"attempts":1}]}',
    );
  });

  it("writes keys as JSON.stringify does past its cache of quoted keys: many, long, escaped", () => {
    const object: Record<string, number> = {};
    for (let i = 0; i < 1500; i++) object[`k${i}${i % 7 === 0 ? '"\\\n' : ""}`] = i;
    object["long".repeat(40)] = -1;
    // Twice: the second time reads what the first put in the cache.
    expect(stringifyJson(object)).toBe(JSON.stringify(object));
    expect(stringifyJson(object)).toBe(JSON.stringify(object));
  });

  it("throws like JSON.stringify on a BigInt", () => {
    expect(() => stringifyJson({ n: 1n })).toThrow(TypeError);
    expect(() => stringifyJson([Object(1n)])).toThrow(TypeError);
  });
});
