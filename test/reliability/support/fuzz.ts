// Shared by the HTTP fuzzers: a private stack with a fixed clock, the runner and the invariants.
import fc from "fast-check";
import { expect } from "vitest";
import { type CountedStack, startCountedStack } from "../../../dev/counted-stack";
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
