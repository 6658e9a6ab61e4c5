// Shared by the HTTP fuzzers: generators of names, values, valid inputs, mutations and bodies.
import fc from "fast-check";
import {
  MAX_ATTEMPTS,
  MAX_DELAY_SECONDS,
  MAX_TIMESTAMP,
  MAX_TTR_SECONDS,
} from "../../../src/domain/schemas";
import { FIXED_NOW, MAX_BODY_BYTES, MAX_REQUEST_BYTES } from "./fuzz";

// ---------------------------------------------------------------------------------------------
// JSON with raw number literals (1e999, -0, …) that JSON.stringify cannot write

/** A JSON text spliced in verbatim, e.g. `1e999` (JSON.parse reads Infinity) or `-0`. */
export class Raw {
  constructor(readonly text: string) {}
  [fc.toStringMethod](): string {
    return `raw(${this.text.length > 60 ? `${this.text.slice(0, 60)}… (${this.text.length})` : this.text})`;
  }
}

/** JSON text of a value that may contain Raw pieces. `undefined` → "" (an empty body). */
export function toJsonText(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, v) =>
    v instanceof Raw ? `\u0000raw${raws.push(v.text) - 1}\u0000` : v,
  );
  if (text === undefined) return "";
  return text.replace(/"\\u0000raw(\d+)\\u0000"/g, (_, i: string) => raws[Number(i)] ?? "null");
}

/** `arb` about once in `n` draws, else undefined (fc.option's `freq` is the other way round). */
export function sometimes<T>(arb: fc.Arbitrary<T>, n: number): fc.Arbitrary<T | undefined> {
  return fc.oneof(
    { weight: n - 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: arb },
  );
}

// ---------------------------------------------------------------------------------------------
// Arbitraries: ids, topics, path segments

export const TOPIC_RE = /^[A-Za-z0-9_.:-]{1,100}$/;
export const ID_RE = /^[A-Za-z0-9_.:@~+=-]{1,128}$/;

/** "." and ".." are refused: a URL path resolves them away. */
const notDots = (s: string) => s !== "." && s !== "..";
/** A topic name: TOPIC_RE, not "." or "..", and not starting with "__" (delayq's own topics). */
export const isTopicName = (s: string) => TOPIC_RE.test(s) && notDots(s) && !s.startsWith("__");
export const validTopicArb = fc.stringMatching(TOPIC_RE).filter(isTopicName);
export const validIdArb = fc.stringMatching(ID_RE).filter(notDots);

/** Strings that are not valid ids or topics, of every kind. */
export const invalidNameArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "",
    " ",
    "a b",
    "a/b",
    "a%2Fb",
    "%",
    "%zz",
    "%00",
    "a\u0000b",
    "a\nb",
    "é",
    "日本",
    "😀",
    "a?b",
    "a#b",
    "a\\b",
    "<script>",
    "$" + "{x}",
    "a'b\"c",
  ),
  fc.string({ unit: "binary", minLength: 1, maxLength: 40 }),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }),
  fc
    .tuple(fc.integer({ min: 129, max: 10_000 }), fc.constantFrom("a", "é", "0", "-", "😀", "%20"))
    .map(([n, c]) => c.repeat(Math.ceil(n / c.length)).slice(0, Math.max(n, c.length))),
  validIdArb.map((s) => `${s} ${s}`),
  validIdArb.map((s) => `${s}/x`),
);

/** Lone surrogates → U+FFFD, as a URL parser or TextEncoder would make them. */
export function wellFormed(text: string): string {
  return text.replace(
    /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
    "\uFFFD",
  );
}

/** encodeURIComponent that does not throw on lone surrogates. */
export function encodeSegment(text: string): string {
  return encodeURIComponent(wellFormed(text));
}

/** A path segment from a name: usually percent-encoded, sometimes raw (slashes and all). */
export function segmentArb(name: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: name.map(encodeSegment) },
    { weight: 1, arbitrary: name },
    { weight: 1, arbitrary: name.map((s) => encodeURIComponent(encodeSegment(s))) },
  );
}

// ---------------------------------------------------------------------------------------------
// Arbitraries: values

/** Numbers at and past every limit, plus the classic troublemakers. */
export const edgeNumberArb = fc.constantFrom(
  0,
  -0,
  -1,
  0.5,
  1.5,
  -0.001,
  1e-7,
  5e-324,
  1e21,
  1e308,
  -1e308,
  2 ** 31,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  MAX_TIMESTAMP,
  MAX_TIMESTAMP + 1,
  MAX_DELAY_SECONDS,
  MAX_DELAY_SECONDS + 1,
  MAX_TTR_SECONDS,
  MAX_TTR_SECONDS + 1,
  MAX_ATTEMPTS,
  MAX_ATTEMPTS + 1,
  20,
  21,
  100,
  101,
  1000,
  1001,
  FIXED_NOW,
  FIXED_NOW - 1,
);

/** Number literals JSON.stringify never writes. */
export const rawNumberArb = fc
  .constantFrom(
    "1e999",
    "-1e999",
    "-0",
    "-0.0",
    "0e0",
    "1E400",
    "1.0",
    "0.1e-400",
    "123456789012345678901234567890",
    "99999999999999.5",
  )
  .map((text) => new Raw(text));

/** ISO-8601-looking date-times, valid or nearly so (bad days, leap years, offsets, far years). */
export const dateTimeArb: fc.Arbitrary<string> = fc.oneof(
  fc
    .date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc
    .record({
      year: fc.constantFrom("0000", "0001", "1970", "2024", "2026", "2027", "2100", "9999"),
      month: fc.constantFrom("00", "01", "02", "12", "13"),
      day: fc.constantFrom("00", "01", "28", "29", "30", "31", "32"),
      time: fc.constantFrom(
        "00:00:00",
        "23:59:59",
        "24:00:00",
        "12:00:60",
        "12:00",
        "12:00:00.123456789",
      ),
      zone: fc.constantFrom(
        "Z",
        "z",
        "+00:00",
        "-23:59",
        "+24:00",
        "+14:00",
        "+0530",
        "",
        "+99:99",
      ),
    })
    .map((p) => `${p.year}-${p.month}-${p.day}T${p.time}${p.zone}`),
);

/** Deeply nested arrays or objects, as raw text (no recursion on our side). */
export const deepArb = fc
  .tuple(fc.integer({ min: 50, max: 20_000 }), fc.boolean())
  .map(([depth, arrays]) =>
    arrays
      ? new Raw(`${"[".repeat(depth)}1${"]".repeat(depth)}`)
      : new Raw(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`),
  );

/** Long strings, some over the 16 KiB job-body limit once JSON-encoded. */
export const longStringArb = fc.oneof(
  fc
    .tuple(
      fc.integer({ min: 129, max: 20_000 }),
      fc.constantFrom("a", "é", "😀", "\u0000", '"', "\\"),
    )
    .map(([n, c]) => c.repeat(n)),
  // At the job-body limit: "x" * n is n + 2 bytes of JSON.
  fc
    .constantFrom(MAX_BODY_BYTES - 3, MAX_BODY_BYTES - 2, MAX_BODY_BYTES - 1)
    .map((n) => "x".repeat(n)),
);

/** A value that is wrong for almost any field. */
export const badValueArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, "", " ", "NaN", "Infinity", "-Infinity", "1e308", "-0"),
  fc.constantFrom("0x10", "1_000", " 1", "1 ", "null", "true", "[]", "{}", "1e999", "１"),
  edgeNumberArb,
  rawNumberArb,
  fc.double(),
  fc.integer(),
  fc.string({ unit: "binary", maxLength: 64 }),
  longStringArb,
  dateTimeArb,
  deepArb,
  fc.constantFrom(
    [],
    {},
    [[]],
    [null],
    new Raw('{"__proto__":{"admin":true}}'),
    new Raw('{"a":1,"a":2}'),
  ),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 5 }),
  fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
  fc.jsonValue({ maxDepth: 3 }),
);

/** Keys that no schema knows, including JS prototype names. */
export const unknownKeyArb = fc.oneof(
  fc.constantFrom("__proto__", "constructor", "prototype", "dealy", "TTR", "Topic", "topic ", ""),
  fc.string({ maxLength: 12 }),
);

// ---------------------------------------------------------------------------------------------
// Arbitraries: valid inputs (the starting points of mutations)

const validBackoffArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom("wechatpay", "alipay", "youzan"),
  fc.integer({ min: 0, max: 3600 }),
  fc.array(fc.integer({ min: 0, max: 3600 }), { minLength: 1, maxLength: 5 }),
  fc.record(
    {
      type: fc.constant("exponential"),
      delay: fc.integer({ min: 1, max: 60 }),
      factor: fc.integer({ min: 1, max: 10 }),
      max: fc.integer({ min: 1, max: 3600 }),
    },
    { requiredKeys: ["type", "delay"] },
  ),
);

/** A job body: any JSON, tagged with a marker when the test wants to find it later. */
export function bodyArb(marker?: string): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constant(marker === undefined ? { n: 1 } : { marker }),
  );
}

/**
 * When a job is due, as unix ms or ISO-8601 (`runAt`): mostly after the fixed now, sometimes
 * before it (due at once; with a push topic, delivered by the request that added it), and the
 * smallest number taken as milliseconds (10^11; below it a time reads as seconds).
 */
const runAtArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: FIXED_NOW, max: MAX_TIMESTAMP }) },
  {
    weight: 2,
    arbitrary: fc
      .integer({ min: 0, max: MAX_DELAY_SECONDS * 1000 })
      .map((ms) => new Date(FIXED_NOW + ms).toISOString()),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(100_000_000_000, 1_700_000_000_000, "2024-01-15T08:00:00+08:00"),
  },
);

/** A valid AddJob (topic and id from the given arbitraries); `delay` or `runAt`, not both. */
export function validAddArb(
  topic: fc.Arbitrary<string>,
  id: fc.Arbitrary<string>,
  marker?: string,
): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .tuple(
      fc.record(
        {
          topic,
          id,
          body: bodyArb(marker),
          delay: fc.oneof(
            fc.integer({ min: 0, max: MAX_DELAY_SECONDS }),
            fc.double({ min: 0, max: MAX_DELAY_SECONDS, noNaN: true, noDefaultInfinity: true }),
          ),
          ttr: fc.integer({ min: 1, max: MAX_TTR_SECONDS }),
          maxAttempts: fc.integer({ min: 1, max: MAX_ATTEMPTS }),
          backoff: validBackoffArb,
          // Never before the job is due: at least a year from the fixed now.
          deadline: fc.oneof(
            fc.integer({ min: FIXED_NOW + MAX_DELAY_SECONDS * 1000, max: MAX_TIMESTAMP }),
            fc.constant("5000-01-01T00:00:00Z"),
          ),
          replace: fc.boolean(),
        },
        { requiredKeys: ["topic"] },
      ),
      sometimes(runAtArb, 4),
    )
    .map(([job, runAt]) => {
      if (runAt === undefined) return job;
      const { delay: _, ...rest } = job;
      return { ...rest, runAt };
    });
}

/** Header names a push config may set: not content-type, delayq-*, upstash-* or HTTP's own. */
const RESERVED_HEADER =
  /^(content-type|content-length|host|connection|transfer-encoding|te|upgrade|keep-alive|expect|delayq-.*|upstash-.*)$/i;
const pushHeaderNameArb = fc
  .stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,30}$/)
  .filter((name) => !RESERVED_HEADER.test(name));

/** A webhook URL: http or https, with a host. */
export const pushUrlArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "https://shop.example/hooks/delayq",
    "http://127.0.0.1:8080/hook",
    "https://shop.example:8443/a/b?c=d&e=%20f",
    "http://[::1]:3000/x",
  ),
  fc
    .webUrl({ validSchemes: ["http", "https"], withQueryParameters: true })
    .filter((url) => url.length <= 2000 && new URL(url).hostname !== ""),
);

/** A valid push config (any of its optional fields); secrets 16-60 characters. */
export const validPushArb: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    url: pushUrlArb,
    via: fc.constantFrom("direct", "qstash"),
    secret: fc.string({ minLength: 16, maxLength: 60 }),
    timeout: fc.integer({ min: 1, max: 60 }),
    failureUrl: pushUrlArb,
    headers: fc.dictionary(
      pushHeaderNameArb,
      fc.string({ maxLength: 40 }).map((v) => v.replace(/[\r\n]/g, "")),
      { maxKeys: 3 },
    ),
  },
  { requiredKeys: ["url"] },
);

export const validTopicConfigArb = fc.record(
  {
    ttr: fc.integer({ min: 1, max: MAX_TTR_SECONDS }),
    maxAttempts: fc.integer({ min: 1, max: MAX_ATTEMPTS }),
    backoff: validBackoffArb,
    paused: fc.boolean(),
    push: fc.oneof(
      { weight: 3, arbitrary: validPushArb },
      { weight: 1, arbitrary: fc.constant(null) },
    ),
  },
  { requiredKeys: [] },
);

/** A PATCH of a topic config: the fields given replace the stored ones, null removes one. */
export const validTopicPatchArb = fc.record(
  {
    ttr: fc.option(fc.integer({ min: 1, max: MAX_TTR_SECONDS }), { nil: null }),
    maxAttempts: fc.option(fc.integer({ min: 1, max: MAX_ATTEMPTS }), { nil: null }),
    backoff: fc.option(validBackoffArb, { nil: null }),
    paused: fc.option(fc.boolean(), { nil: null }),
    push: fc.option(validPushArb, { nil: null }),
  },
  { requiredKeys: [] },
);

// ---------------------------------------------------------------------------------------------
// Mutations: one field of a valid value made wrong

type Path = (string | number)[];

/** Every path into a JSON value (objects and arrays; not into Raw pieces). */
function pathsOf(value: unknown, prefix: Path = []): Path[] {
  const out: Path[] = [];
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      out.push([...prefix, i], ...pathsOf(item, [...prefix, i]));
    });
  } else if (value !== null && typeof value === "object" && !(value instanceof Raw)) {
    for (const [key, item] of Object.entries(value)) {
      out.push([...prefix, key], ...pathsOf(item, [...prefix, key]));
    }
  }
  return out;
}

function containerAt(value: unknown, path: Path): unknown {
  let node = value;
  for (const step of path) node = (node as Record<string | number, unknown>)[step];
  return node;
}

export type Mutation =
  | { kind: "replace"; at: number; value: unknown }
  | { kind: "delete"; at: number }
  | { kind: "extra"; at: number; key: string; value: unknown }
  | { kind: "whole"; value: unknown };

export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("replace" as const),
      at: fc.nat(),
      value: badValueArb,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("delete" as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("extra" as const),
      at: fc.nat(),
      key: unknownKeyArb,
      value: badValueArb,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("whole" as const), value: badValueArb }) },
);

/** Applies a mutation to a copy of a valid value; `at` picks a path modulo their number. */
export function mutate(valid: unknown, mutation: Mutation): unknown {
  if (mutation.kind === "whole") return mutation.value;
  const copy = structuredClone(valid) as unknown;
  const paths = pathsOf(copy);
  if (mutation.kind === "extra") {
    const holders = [[], ...paths].filter((p) => {
      const node = containerAt(copy, p);
      return node !== null && typeof node === "object" && !Array.isArray(node);
    });
    const at = holders[mutation.at % Math.max(1, holders.length)];
    if (!at) return mutation.value;
    Object.defineProperty(containerAt(copy, at), mutation.key, {
      value: mutation.value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    return copy;
  }
  const path = paths[mutation.at % Math.max(1, paths.length)];
  if (!path) return mutation.kind === "replace" ? mutation.value : undefined;
  const parent = containerAt(copy, path.slice(0, -1)) as Record<string | number, unknown>;
  const key = path[path.length - 1] as string | number;
  if (mutation.kind === "delete") {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key];
  } else {
    parent[key] = mutation.value;
  }
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Bodies and headers

/** Request bodies that are not a JSON object of the right shape, of every kind. */
export const oddBodyArb: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  fc.constantFrom("", " ", "\n\t", "{", "}", "[", "null", "0", '""', "{}", "[]", "{,}", "\ufeff{}"),
  fc.constantFrom('{"a":1}garbage', "NaN", "Infinity", "undefined", "{'topic':'t1'}", "{topic:1}"),
  fc.string({ maxLength: 200 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.uint8Array({ maxLength: 200 }),
  fc.jsonValue({ maxDepth: 4 }).map((v) => toJsonText(v)),
  deepArb.map((v) => v.text),
  // Around MAX_REQUEST_BYTES: over it is refused before parsing.
  fc
    .oneof(
      fc.integer({ min: MAX_REQUEST_BYTES + 1, max: MAX_REQUEST_BYTES + 4096 }),
      fc.constantFrom(MAX_REQUEST_BYTES - 1, MAX_REQUEST_BYTES, MAX_REQUEST_BYTES + 1),
    )
    .map((n) => `{"topic":"t1","body":"${"x".repeat(n - 24)}"}`),
);

export const contentTypeArb = fc.option(
  fc.constantFrom(
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=utf-16",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "*/*",
    "",
    "garbage",
    "application/merge-patch+json",
  ),
  { nil: undefined },
);

/** Header-safe text: what a string looks like as bytes on the wire (UTF-8 read as latin1). */
export function wire(text: string): string {
  return Buffer.from(text, "utf8")
    .toString("latin1")
    .replace(/[\0\r\n]/g, "");
}
