// Shared by the HTTP fuzzers: a private stack with a fixed clock, the request runner, the
// response invariants and the arbitraries (routes, ids, topics, bodies, bad values).
import fc from "fast-check";
import { expect } from "vitest";
import { type CountedStack, startCountedStack } from "../../../dev/counted-stack";
import {
  MAX_ATTEMPTS,
  MAX_DELAY_SECONDS,
  MAX_TIMESTAMP,
  MAX_TTR_SECONDS,
} from "../../../src/domain/schemas";
import { createApp } from "../../../src/http/app";
import { parseTokens } from "../../../src/http/auth";
import { DelayQueue, ERROR_STATUS, type ErrorCode } from "../../../src/index";

/** The queue's clock never moves: nothing becomes due or expires between two digests. */
export const FIXED_NOW = 1_800_000_000_000;
/** Runs per property: DQ_FUZZ_RUNS, default 300. */
export const RUNS = Math.max(1, Number(process.env.DQ_FUZZ_RUNS) || 300);
/** DQ_FUZZ_SEED replays a run (fast-check prints the seed of a failure). */
export const SEED = process.env.DQ_FUZZ_SEED ? Number(process.env.DQ_FUZZ_SEED) : undefined;
/** A test's timeout that grows with DQ_FUZZ_RUNS (about 0.2 s per run is plenty). */
export const TIMEOUT = Math.max(120_000, RUNS * 400);

/** Job bodies over this are refused (413); small, so that long strings reach the limit. */
export const MAX_BODY_BYTES = 16 * 1024;
/** Requests over this are refused (413) before they are parsed. */
export const MAX_REQUEST_BYTES = 256 * 1024;

export const CODES = Object.keys(ERROR_STATUS) as ErrorCode[];
const CODE_PATTERN = new RegExp(`^(${CODES.join("|")}): .`, "s");
/** A V8 stack frame: "at fn (/path/file.ts:1:2)", "at file:///x.js:3:4", "at node:internal/…". */
const STACK_FRAME = /\bat\s+(?:\S+\s+\()?(?:file:\/\/|node:|\/|[A-Za-z]:\\)[^\s)]*:\d+(?::\d+)?/;

// ---------------------------------------------------------------------------------------------
// The stack under test

export type FuzzResponse = {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body, when it is JSON. */
  json?: unknown;
  isJson: boolean;
};

export type FuzzRequest = {
  method: string;
  /** Starts with "/"; sent as is after "http://localhost". */
  path: string;
  /** Header name → value; values are sent as given (latin1, like bytes on the wire). */
  headers: Record<string, string>;
  /** Dropped for GET and HEAD (a Request cannot carry one). */
  body?: string | Uint8Array;
};

export type Target<S> = {
  app: ReturnType<typeof createApp>;
  stack: CountedStack;
  /** Entries the app logged (only 5xx are logged). */
  logs: Record<string, unknown>[];
  /** What the last seeding returned (receipts and the like). */
  seeded(): S;
  /** DEBUG DIGEST of the whole dataset. */
  digest(): Promise<string>;
  /**
   * Re-seeds when the dataset is not the seeded one any more (an accepted write changed it),
   * and returns the digest every run starts from: each run sees the same jobs, so a shrunk
   * counterexample replays.
   */
  fresh(): Promise<string>;
  /** Tells fresh() what the dataset is now, saving a digest. */
  observed(digest: string): void;
  /** Sends one request straight to app.fetch (no server); substitutes @@RECEIPT:<id>@@. */
  send(request: FuzzRequest): Promise<FuzzResponse>;
  /** Requests sent so far. */
  requests: number;
  stop(): Promise<void>;
};

/**
 * A private redis-server (DEBUG enabled) and bridge, one DelayQueue with a fixed clock, and the
 * app on top. `seed` fills the empty dataset through the unscoped queue.
 */
export async function startTarget<S extends { receipts: Record<string, string> }>(options: {
  tokens: string;
  prefix: string;
  seed: (queue: DelayQueue) => Promise<S>;
}): Promise<Target<S>> {
  const stack = await startCountedStack({ extraArgs: ["--enable-debug-command", "yes"] });
  const queue = new DelayQueue({
    redis: stack.client(),
    prefix: options.prefix,
    clock: () => FIXED_NOW,
    maxBodyBytes: MAX_BODY_BYTES,
    // Long-polls end when the request's signal aborts (send() aborts after 50 ms); no polling.
    pollIntervalMs: 60_000,
  });
  const logs: Record<string, unknown>[] = [];
  const app = createApp({
    queue,
    tokens: parseTokens(options.tokens),
    log: (entry) => logs.push(entry),
    maxRequestBytes: MAX_REQUEST_BYTES,
  });
  const digest = async () => {
    const reply = await stack.raw("DEBUG", "DIGEST");
    if (reply.type !== "bulk" && reply.type !== "status") {
      throw new Error(`DEBUG DIGEST answered ${JSON.stringify(reply)}`);
    }
    return String(reply.value);
  };
  let seeded: S;
  let baseline = "";
  let current = "";
  const reseed = async () => {
    await stack.raw("FLUSHALL");
    seeded = await options.seed(queue);
    baseline = await digest();
    current = baseline;
  };
  await reseed();
  const target: Target<S> = {
    app,
    stack,
    logs,
    seeded: () => seeded,
    digest,
    async fresh() {
      if (current !== baseline) await reseed();
      return baseline;
    },
    observed(value) {
      current = value;
    },
    async send(request) {
      target.requests++;
      const receipts = seeded.receipts;
      const fill = (text: string) =>
        text.replace(/@@RECEIPT:([^@]*)@@/g, (_, id: string) => receipts[id] ?? "no-receipt");
      const hasBody = request.body !== undefined && !["GET", "HEAD"].includes(request.method);
      const body = hasBody && typeof request.body === "string" ? fill(request.body) : request.body;
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), 50);
      try {
        const req = new Request(`http://localhost${request.path}`, {
          method: request.method,
          headers: request.headers,
          body: hasBody ? (body as string | Uint8Array<ArrayBuffer>) : undefined,
          signal: abort.signal,
        });
        const res = await app.fetch(req);
        const text = await res.text();
        let json: unknown;
        let isJson = false;
        try {
          json = JSON.parse(text);
          isJson = true;
        } catch {}
        return { status: res.status, headers: res.headers, text, json, isJson };
      } finally {
        clearTimeout(timer);
      }
    },
    requests: 0,
    stop: () => stack.stop(),
  };
  return target;
}

/** Runs a property with fc.check and throws fast-check's report when it fails. */
export async function checkProperty<T>(
  property: fc.IAsyncProperty<T>,
  tally: { violations: number },
  runs = RUNS,
): Promise<void> {
  const details = await fc.check(property, {
    numRuns: runs,
    seed: SEED,
    endOnFailure: false,
  });
  if (details.failed) {
    tally.violations++;
    const cause = details.errorInstance;
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new Error(`${fc.defaultReportMessage(details) ?? "property failed"}\n\nWhy: ${why}`, {
      cause,
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Invariants

/** Where a request went, for assertion messages. */
export function describeRequest(request: FuzzRequest): string {
  const body =
    request.body === undefined
      ? ""
      : typeof request.body === "string"
        ? ` ${request.body.slice(0, 200)}${request.body.length > 200 ? "…" : ""}`
        : ` <${request.body.byteLength} bytes>`;
  const path = request.path.length > 200 ? `${request.path.slice(0, 200)}…` : request.path;
  return `${request.method} ${path}${body}`;
}

/** A message a client may see: non-empty, no stack frame, none of the secrets. */
export function expectCleanMessage(message: unknown, secrets: readonly string[], where: string) {
  expect(typeof message, `${where}: message type`).toBe("string");
  const text = message as string;
  expect(text.length, `${where}: empty message`).toBeGreaterThan(0);
  expect(STACK_FRAME.test(text), `${where}: stack frame in "${text}"`).toBe(false);
  for (const secret of secrets) {
    expect(text.includes(secret), `${where}: message contains a token`).toBe(false);
  }
}

/** `{"error": {"code", "message"}}` with a documented code whose status is the response's. */
export function expectErrorBody(
  res: FuzzResponse,
  secrets: readonly string[],
  where: string,
): ErrorCode {
  expect(res.isJson, `${where}: a ${res.status} that is not JSON: ${res.text.slice(0, 300)}`).toBe(
    true,
  );
  expect(res.headers.get("content-type") ?? "", `${where}: content-type`).toMatch(
    /^application\/json/,
  );
  const body = res.json as { error?: { code?: unknown; message?: unknown } };
  expect(body !== null && typeof body === "object" && !Array.isArray(body), where).toBe(true);
  expect(Object.keys(body), `${where}: ${res.text.slice(0, 300)}`).toEqual(["error"]);
  const error = body.error as { code?: unknown; message?: unknown };
  expect(Object.keys(error).sort(), `${where}: ${res.text.slice(0, 300)}`).toEqual([
    "code",
    "message",
  ]);
  expect(CODES, `${where}: undocumented code ${String(error.code)}`).toContain(error.code);
  const code = error.code as ErrorCode;
  expect(res.status, `${where}: status of ${code}`).toBe(ERROR_STATUS[code]);
  expectCleanMessage(error.message, secrets, where);
  return code;
}

/** One `{success, error, id?, value?}` of the command protocol. Returns its error code, if any. */
export function expectCommandResult(
  result: unknown,
  secrets: readonly string[],
  where: string,
): ErrorCode | undefined {
  expect(result !== null && typeof result === "object" && !Array.isArray(result), where).toBe(true);
  const r = result as Record<string, unknown>;
  for (const key of Object.keys(r)) {
    expect(["success", "error", "id", "value"], `${where}: field ${key}`).toContain(key);
  }
  expect(typeof r.success, `${where}: success`).toBe("boolean");
  expect(typeof r.error, `${where}: error`).toBe("string");
  if (r.id !== undefined) expect(typeof r.id, `${where}: id`).toBe("string");
  if (r.success) {
    expect(r.error, `${where}: error of a success`).toBe("");
    return undefined;
  }
  const error = r.error as string;
  expect(error, `${where}: envelope error "${error.slice(0, 300)}"`).toMatch(CODE_PATTERN);
  const code = error.slice(0, error.indexOf(":")) as ErrorCode;
  // Only bugs and outages are not envelopes: runCommand rethrows internal_error.
  expect(["internal_error", "redis_unavailable"], `${where}: ${error}`).not.toContain(code);
  expectCleanMessage(error.slice(code.length + 2), secrets, where);
  return code;
}

export type Verdict = {
  /** The request was refused as a whole: nothing may have changed. */
  rejected: boolean;
  /** Error codes seen (top level, batch items or command envelopes). */
  codes: ErrorCode[];
};

/**
 * The invariants every response keeps, whatever the request:
 * - never 5xx;
 * - HEAD: no body (Hono answers HEAD by running the GET route and dropping the body);
 * - every other non-2xx is `{"error": {"code", "message"}}`, code documented, status = ERROR_STATUS[code];
 * - 2xx is JSON (GET /docs aside: an HTML page), except HEAD;
 * - /v1/command answers envelopes whose errors read "<documented code>: <message>";
 * - /v1/jobs/batch answers `{results}` whose errors are documented codes;
 * - no response contains a secret (the tokens) or a stack frame in a message;
 * - a rejected request leaves the dataset digest as it was: any status >= 400, a lone command
 *   answered `success: false`, and a batch whose every item failed.
 */
export function checkResponse(
  request: FuzzRequest,
  res: FuzzResponse,
  digests: { before: string; after: string },
  secrets: readonly string[],
): Verdict {
  const where = `${describeRequest(request)} → ${res.status}`;
  expect(res.status, `${where}: ${res.text.slice(0, 500)}`).toBeLessThan(500);
  for (const secret of secrets) {
    expect(res.text.includes(secret), `${where}: the response contains a token`).toBe(false);
  }
  const codes: ErrorCode[] = [];
  let rejected = res.status >= 400;
  const ok = res.status >= 200 && res.status < 300;
  if (request.method === "HEAD") {
    expect(res.text, `${where}: HEAD with a body`).toBe("");
  } else if (!ok) {
    codes.push(expectErrorBody(res, secrets, where));
  } else {
    const path = request.path.split(/[?#]/)[0];
    if (request.method === "GET" && path === "/docs") {
      expect(res.headers.get("content-type"), where).toMatch(/^text\/html/);
    } else {
      expect(res.isJson, `${where}: a 2xx that is not JSON: ${res.text.slice(0, 300)}`).toBe(true);
      expect(res.headers.get("content-type") ?? "", `${where}: content-type`).toMatch(
        /^application\/json/,
      );
    }
    if (request.method === "POST" && path === "/v1/command") {
      const results = Array.isArray(res.json) ? res.json : [res.json];
      expect(results.length, where).toBeGreaterThan(0);
      for (const result of results) {
        const code = expectCommandResult(result, secrets, where);
        if (code) codes.push(code);
      }
      if (!Array.isArray(res.json) && codes.length > 0) rejected = true;
    }
    if (request.method === "POST" && path === "/v1/jobs/batch") {
      const { results } = res.json as { results: unknown[] };
      expect(Array.isArray(results), where).toBe(true);
      let failed = 0;
      for (const item of results) {
        const error = (item as { error?: { code: unknown; message: unknown } }).error;
        if (error) {
          failed++;
          expect(CODES, `${where}: undocumented batch code ${String(error.code)}`).toContain(
            error.code,
          );
          expectCleanMessage(error.message, secrets, where);
          codes.push(error.code as ErrorCode);
        } else {
          expect(item, where).toMatchObject({ created: expect.any(Boolean) });
        }
      }
      if (results.length > 0 && failed === results.length) rejected = true;
    }
  }
  if (rejected) {
    expect(digests.after, `${where}: a rejected request changed the dataset`).toBe(digests.before);
  }
  return { rejected, codes };
}

/**
 * Sends one request from the seeded dataset (re-seeding first if an earlier request changed it)
 * and checks every invariant of checkResponse on the answer; nothing may be logged as a 5xx.
 */
export async function exercise<S>(
  target: Target<S>,
  request: FuzzRequest,
  secrets: readonly string[],
): Promise<{ res: FuzzResponse; verdict: Verdict; before: string; after: string }> {
  const before = await target.fresh();
  const logged = target.logs.length;
  const res = await target.send(request);
  const after = await target.digest();
  target.observed(after);
  const verdict = checkResponse(request, res, { before, after }, secrets);
  const logs = target.logs.slice(logged);
  expect(logs, `${describeRequest(request)}: logged as an internal error`).toEqual([]);
  return { res, verdict, before, after };
}

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

// ---------------------------------------------------------------------------------------------
// Arbitraries: ids, topics, path segments

export const TOPIC_RE = /^[A-Za-z0-9_.:-]{1,100}$/;
export const ID_RE = /^[A-Za-z0-9_.:@~+=-]{1,128}$/;

/** "." and ".." are refused: a URL path resolves them away. */
const notDots = (s: string) => s !== "." && s !== "..";
export const validTopicArb = fc.stringMatching(TOPIC_RE).filter(notDots);
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

/** A valid AddJob (topic and id from the given arbitraries). */
export function validAddArb(
  topic: fc.Arbitrary<string>,
  id: fc.Arbitrary<string>,
  marker?: string,
): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(
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
      deadline: fc.integer({ min: FIXED_NOW + MAX_DELAY_SECONDS * 1000, max: MAX_TIMESTAMP }),
      replace: fc.boolean(),
    },
    { requiredKeys: ["topic"] },
  );
}

export const validTopicConfigArb = fc.record(
  {
    ttr: fc.integer({ min: 1, max: MAX_TTR_SECONDS }),
    maxAttempts: fc.integer({ min: 1, max: MAX_ATTEMPTS }),
    backoff: validBackoffArb,
    paused: fc.boolean(),
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
