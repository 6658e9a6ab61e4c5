// responseJson (the API's JSON writer) against JSON.stringify and stringifyJson on many values.
import { describe, expect, it } from "vitest";
import { RawJson, stringifyJson } from "../../src/domain/raw-json";
import { responseJson } from "../../src/http/json";

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

describe("responseJson", () => {
  it("writes what JSON.stringify writes for values without RawJson", () => {
    for (let seed = 0; seed < 2000; seed++) {
      const value = sample(seed, 4);
      expect(responseJson(value)).toBe(JSON.stringify(value));
    }
  });

  it("writes what stringifyJson writes for values with RawJson", () => {
    let raws = 0;
    for (let seed = 0; seed < 2000; seed++) {
      const value = withRaw(sample(seed, 4), seed);
      const text = responseJson(value);
      expect(text).toBe(stringifyJson(value));
      // RawJson made a difference here (else the walk was only tested on plain values).
      if (text !== JSON.stringify(value)) raws++;
    }
    expect(raws).toBeGreaterThan(200);
  });

  it("writes a pop answer's bodies as their text", () => {
    const answer = {
      jobs: [{ id: "a", topic: "t", body: new RawJson('{"n": 4200001234567890123}'), attempts: 1 }],
    };
    expect(responseJson(answer)).toBe(
      '{"jobs":[{"id":"a","topic":"t","body":{"n": 4200001234567890123},"attempts":1}]}',
    );
  });

  it("throws like JSON.stringify on a BigInt", () => {
    expect(() => responseJson({ n: 1n })).toThrow(TypeError);
    expect(() => responseJson([Object(1n)])).toThrow(TypeError);
  });
});
