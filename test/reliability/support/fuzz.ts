// Shared by the HTTP fuzzers: a private stack with a fixed clock, the runner and the invariants.
import { createHmac } from "node:crypto";
import fc from "fast-check";
import { expect } from "vitest";
import { type CountedStack, startCountedStack } from "../../../dev/counted-stack";
import { freePort } from "../../../dev/redis-server";
import { createDispatcher, type Dispatcher } from "../../../src/dispatch/dispatcher";
import { createQStash } from "../../../src/dispatch/qstash";
import { createApp } from "../../../src/http/app";
import { parseTokens } from "../../../src/http/auth";
import { DelayQueue, ERROR_STATUS, type ErrorCode } from "../../../src/index";
import { type Counters, createCounters } from "../../../src/metrics/counters";
import { splitRecord } from "../../../src/redis/record";
import type { SettleOutcome } from "../../../src/redis/replies";
import { createScriptRunner } from "../../../src/redis/runner";
import { createRun } from "../../../src/run";
import { createSchedules } from "../../../src/schedules/schedules";
import { parseMetrics } from "../../ops/prometheus-lint";
import { type Receiver, startReceiver } from "../../support/push";
import { type SignatureKind, signCallback } from "./qstash-signature";

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

/** The service's public URL: QStash callbacks are signed for URLs under it. */
export const PUBLIC_URL = "https://delayq.fuzz.example";
/** QStash's signing keys of the target (the callback route verifies against them). */
export const QSTASH_KEYS = {
  current: "sig_fuzzCurrent7b3e9a1c5d2f8e4b6a0c",
  next: "sig_fuzzNext2d8f6b4a9e1c3d5f7a0b",
};
/** The dashboard's session cookie (src/http/pages/session.ts). */
export const SESSION_COOKIE = "delayq_dashboard";

export const CODES = Object.keys(ERROR_STATUS) as ErrorCode[];
const CODE_PATTERN = new RegExp(`^(${CODES.join("|")}): .`, "s");
/** A V8 stack frame: "at fn (/path/file.ts:1:2)", "at file:///x.js:3:4", "at node:internal/…". */
const STACK_FRAME = /\bat\s+(?:\S+\s+\()?(?:file:\/\/|node:|\/|[A-Za-z]:\\)[^\s)]*:\d+(?::\d+)?/;

/**
 * The dashboard session of `token` (signed in after each seeding), as a request carries it:
 * send() puts the session's id in its place (path, body, headers), or the token itself when the
 * token has none (it is not ours).
 */
export function sessionOf(token: string): string {
  return `@@SESSION:${token}@@`;
}

/**
 * The CSRF value of `token`'s dashboard session, filled in by send(); `cut` drops its first
 * character (a value almost right).
 */
export function csrfOf(token: string, options: { cut?: boolean } = {}): string {
  return `@@${options.cut ? "CSRFCUT" : "CSRF"}:${token}@@`;
}

/** A session's CSRF value, computed with node:crypto (not delayq's code). */
function csrfValue(sessionId: string): string {
  return createHmac("sha256", sessionId).update("delayq dashboard csrf v1").digest("hex");
}

/** The placeholders of sessionOf and csrfOf, as written or URL-encoded (in a form body). */
const SESSION_PLACEHOLDER =
  /(?:@@|%40%40)(SESSION|CSRF|CSRFCUT)(?::|%3A)([A-Za-z0-9_.-]*)(?:@@|%40%40)/g;

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

/** What a seed function may use besides the queue: push claims and settlements at FIXED_NOW. */
export type SeedTools = {
  /** The URL of the local receiver every delivery goes to. */
  receiverUrl: string;
  /** The process counters /metrics shows. */
  counters: Counters;
  /** Claims a push topic's jobs due by FIXED_NOW (as a tick would): ids and receipts. */
  claim(topic: string): Promise<{ id: string; receipt: string }[]>;
  /** Settles a claimed job as a delivery's answer would. */
  settle(
    id: string,
    receipt: string,
    outcome: SettleOutcome,
    status: number,
    delayMs?: number,
  ): Promise<void>;
};

export type Target<S> = {
  app: ReturnType<typeof createApp>;
  /** The same service without QStash settings: its callback route answers 404 not_found. */
  appWithoutQStash: ReturnType<typeof createApp>;
  stack: CountedStack;
  /** Entries the app logged (only 5xx are logged). */
  logs: Record<string, unknown>[];
  /** Entries push delivery logged (deliveries made by requests that wrote push jobs). */
  pushLogs: Record<string, unknown>[];
  /** Where every push delivery of the target goes (whatever URL the topic has). */
  receiver: Receiver;
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
  /**
   * Sends one request straight to app.fetch (no server); substitutes @@RECEIPT:<id>@@ (path and
   * body) and signs a QStash callback whose Upstash-Signature reads @@SIGN:<kind>@@. Push
   * deliveries the request started in the background are awaited before it resolves.
   */
  send(request: FuzzRequest, options?: { withoutQStash?: boolean }): Promise<FuzzResponse>;
  /** Requests sent so far. */
  requests: number;
  stop(): Promise<void>;
};

/**
 * A private redis-server (DEBUG enabled) and bridge, one DelayQueue with a fixed clock, and the
 * app on top, with push delivery as the service wires it: a dispatcher (QStash configured with
 * QSTASH_KEYS, so the callback route verifies signatures) whose deliveries go to a local
 * receiver. `seed` fills the empty dataset through the unscoped queue.
 */
export async function startTarget<S extends { receipts: Record<string, string> }>(options: {
  tokens: string;
  prefix: string;
  seed: (queue: DelayQueue, tools: SeedTools) => Promise<S>;
}): Promise<Target<S>> {
  const stack = await startCountedStack({ extraArgs: ["--enable-debug-command", "yes"] });
  const receiver = await startReceiver();
  const logs: Record<string, unknown>[] = [];
  const pushLogs: Record<string, unknown>[] = [];
  const counters = createCounters();
  // Nothing listens there: a publish to QStash fails at once (and is logged), as when QStash is
  // down; the claimed jobs come back when their leases run out.
  const qstashUrl = `http://127.0.0.1:${await freePort()}`;
  const dispatcherOf = (withQStash: boolean): Dispatcher =>
    createDispatcher({
      scripts: createScriptRunner(stack.client(), options.prefix, 3_600_000),
      qstash: withQStash
        ? createQStash({
            url: qstashUrl,
            token: "fuzz-qstash-token",
            currentSigningKey: QSTASH_KEYS.current,
            nextSigningKey: QSTASH_KEYS.next,
          })
        : undefined,
      publicUrl: withQStash ? PUBLIC_URL : undefined,
      // Fuzzed configs name any URL; every delivery goes to the local receiver instead (no DNS).
      fetch: (_url, init) => fetch(`${receiver.url}/deliveries`, init),
      log: (entry) => pushLogs.push(entry),
      count: (topic, outcome) => counters.inc("delayq_deliveries_total", { topic, outcome }),
    });
  const dispatcher = dispatcherOf(true);
  const queue = new DelayQueue({
    redis: stack.client(),
    prefix: options.prefix,
    clock: () => FIXED_NOW,
    maxBodyBytes: MAX_BODY_BYTES,
    // Long-polls end when the request's signal aborts (send() aborts after 50 ms); no polling.
    pollIntervalMs: 60_000,
    // As the service has it: job bodies are answered as the text they were sent as.
    rawBodies: true,
    cancelDelivery: (messageId) => dispatcher.cancel(messageId),
  });
  const background: Promise<unknown>[] = [];
  const appOf = (withQStash: boolean) =>
    createApp({
      queue,
      tokens: parseTokens(options.tokens),
      log: (entry) => logs.push(entry),
      maxRequestBytes: MAX_REQUEST_BYTES,
      counters,
      schedules: createSchedules({
        scripts: createScriptRunner(stack.client(), options.prefix, 3_600_000),
        defaults: { ttrMs: 60_000, maxAttempts: 10 },
      }),
      push: {
        dispatcher: withQStash ? dispatcher : dispatcherOf(false),
        publicUrl: withQStash ? PUBLIC_URL : undefined,
        qstashReady: withQStash,
        log: (entry) => pushLogs.push(entry),
      },
      // Each request's run hands its background work (deliveries) to the list the fuzzer awaits.
      newRun: ({ path }) =>
        createRun({
          subrequests: 1000,
          lifetimeMs: 30_000,
          log: (entry) => pushLogs.push(entry),
          waitUntil: (work) => background.push(work),
          label: { path },
        }),
    });
  const app = appOf(true);
  const appWithoutQStash = appOf(false);
  const scripts = createScriptRunner(stack.client(), options.prefix, 3_600_000);
  const tools: SeedTools = {
    receiverUrl: receiver.url,
    counters,
    async claim(topic) {
      const groups = await scripts.run("claim", FIXED_NOW, [FIXED_NOW, 100, 10, "seed", topic, 0]);
      return groups.flatMap((group) =>
        group.records.map((raw) => {
          const { meta } = splitRecord(raw);
          return { id: meta.id, receipt: meta.receipt ?? "" };
        }),
      );
    },
    async settle(id, receipt, outcome, status, delayMs) {
      const error = status >= 200 && status < 300 ? "" : `HTTP ${status}`;
      const [reply] = await scripts.run("settle", FIXED_NOW, [
        id,
        receipt,
        outcome,
        delayMs ?? "",
        status,
        error,
      ]);
      if (reply?.code !== "ok") throw new Error(`seed: settle of ${id} answered ${reply?.code}`);
    },
  };
  const digest = async () => {
    const reply = await stack.raw("DEBUG", "DIGEST");
    if (reply.type !== "bulk" && reply.type !== "status") {
      throw new Error(`DEBUG DIGEST answered ${JSON.stringify(reply)}`);
    }
    return String(reply.value);
  };
  let seeded: S;
  // The dashboard session of each token of the target, by token: signed in after each seeding,
  // through the app, so that the baseline holds them.
  let sessions: Record<string, string> = {};
  const signIn = async () => {
    const opened: Record<string, string> = {};
    for (const entry of options.tokens.split(",")) {
      const token = entry.trim().split(":")[0] as string;
      const res = await app.request("/dashboard/login", {
        method: "POST",
        body: new URLSearchParams({ token }),
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
      const id = /^delayq_dashboard=([^;]+)/.exec(res.headers.get("set-cookie") ?? "")?.[1];
      if (!id) throw new Error(`seed: signing in with ${token} answered ${res.status}`);
      opened[token] = id;
    }
    return opened;
  };
  let baseline = "";
  let current = "";
  const reseed = async () => {
    await stack.raw("FLUSHALL");
    seeded = await options.seed(queue, tools);
    sessions = await signIn();
    baseline = await digest();
    current = baseline;
  };
  await reseed();
  const target: Target<S> = {
    app,
    appWithoutQStash,
    stack,
    logs,
    pushLogs,
    receiver,
    seeded: () => seeded,
    digest,
    async fresh() {
      if (current !== baseline) await reseed();
      return baseline;
    },
    observed(value) {
      current = value;
    },
    async send(request, { withoutQStash = false } = {}) {
      target.requests++;
      const receipts = seeded.receipts;
      const fill = (text: string) =>
        text
          .replace(/@@RECEIPT:([^@]*)@@/g, (_, id: string) => receipts[id] ?? "no-receipt")
          .replace(SESSION_PLACEHOLDER, (_, what: string, token: string) => {
            const id = sessions[token];
            if (what === "SESSION") return id ?? token;
            const csrf = csrfValue(id ?? token);
            return what === "CSRF" ? csrf : csrf.slice(1);
          });
      const hasBody = request.body !== undefined && !["GET", "HEAD"].includes(request.method);
      const body = hasBody && typeof request.body === "string" ? fill(request.body) : request.body;
      const url = `http://localhost${fill(request.path)}`;
      const headers = { ...request.headers };
      if (headers.cookie !== undefined) headers.cookie = fill(headers.cookie);
      // A QStash callback to sign: over the URL and body as sent (receipts filled in).
      const sign = /^@@SIGN:([a-z-]+)@@$/.exec(headers["upstash-signature"] ?? "");
      if (sign) {
        const { pathname, search } = new URL(url);
        headers["upstash-signature"] = signCallback(
          sign[1] as SignatureKind,
          QSTASH_KEYS,
          `${PUBLIC_URL}${pathname}${search}`,
          typeof body === "string" ? body : "",
        );
      }
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), 50);
      try {
        const req = new Request(url, {
          method: request.method,
          headers,
          body: hasBody ? (body as string | Uint8Array<ArrayBuffer>) : undefined,
          signal: abort.signal,
        });
        const res = await (withoutQStash ? appWithoutQStash : app).fetch(req);
        const text = await res.text();
        // Deliveries the request started (a push job due soon) settle before the next digest.
        // The seeded dataset starts none that waits for a due time; one that does is a finding.
        const limit = Date.now() + 10_000;
        while (background.length > 0) {
          const left = limit - Date.now();
          const timedOut = await Promise.race([
            Promise.all(background.splice(0)).then(() => false),
            new Promise<boolean>((resolve) => setTimeout(() => resolve(true), Math.max(0, left))),
          ]);
          if (timedOut) {
            throw new Error(
              `${describeRequest(request)}: its background delivery outlived it by 10 s`,
            );
          }
        }
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
    stop: async () => {
      await receiver.close();
      await stack.stop();
    },
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

/**
 * Which part of the service a path reaches, as Hono routes it (the URL's path, percent-decoded
 * as decodeURI does, %2F kept): the JSON API (/v1, /health, /openapi.json and every unknown
 * path), or one of the routes that do not answer JSON errors.
 */
export type RouteClass = "api" | "docs" | "metrics" | "dashboard" | "compat";

export function routeClass(path: string): RouteClass {
  let pathname: string;
  try {
    pathname = new URL(`http://localhost${path}`).pathname;
  } catch {
    return "api";
  }
  try {
    pathname = decodeURI(pathname);
  } catch {}
  if (pathname === "/docs") return "docs";
  if (pathname === "/metrics") return "metrics";
  if (pathname === "/dashboard" || pathname.startsWith("/dashboard/")) return "dashboard";
  // An empty token ("/compat/ouqiang/", "/compat/ouqiang//push") matches none of its routes.
  if (pathname === "/compat/ouqiang" || /^\/compat\/ouqiang\/[^/]/.test(pathname)) return "compat";
  return "api";
}

/** The path of a request without its query, as the routes see it. */
function pathOf(request: FuzzRequest): string {
  try {
    return new URL(`http://localhost${request.path}`).pathname;
  } catch {
    return request.path.split(/[?#]/)[0] ?? "";
  }
}

/** A message a client may see: non-empty, no stack frame, none of the secrets. */
export function expectCleanMessage(message: unknown, secrets: readonly string[], where: string) {
  expect(typeof message, `${where}: message type`).toBe("string");
  const text = message as string;
  expect(text.length, `${where}: empty message`).toBeGreaterThan(0);
  expect(STACK_FRAME.test(text), `${where}: stack frame in "${text}"`).toBe(false);
  for (const secret of secrets) {
    expect(text.includes(secret), `${where}: message contains a secret`).toBe(false);
  }
}

/**
 * `{"error": {"code", "message", "requestId"}}` with a documented code whose status is the
 * response's, and the request id its x-request-id header's.
 */
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
  const error = body.error as { code?: unknown; message?: unknown; requestId?: unknown };
  expect(Object.keys(error).sort(), `${where}: ${res.text.slice(0, 300)}`).toEqual([
    "code",
    "message",
    "requestId",
  ]);
  expect(error.requestId, `${where}: requestId`).toBe(res.headers.get("x-request-id"));
  expect(CODES, `${where}: undocumented code ${String(error.code)}`).toContain(error.code);
  const code = error.code as ErrorCode;
  expect(res.status, `${where}: status of ${code}`).toBe(ERROR_STATUS[code]);
  expectCleanMessage(error.message, secrets, where);
  return code;
}

/**
 * One `{success, error, id?, value?, created?, receipt?}` of the command protocol, answering
 * `command` (the request's command, when it was an object with a name). Returns its error code.
 * `created` answers a successful add (true or false), `receipt` a pop that handed a job out.
 */
export function expectCommandResult(
  result: unknown,
  secrets: readonly string[],
  where: string,
  command?: unknown,
): ErrorCode | undefined {
  expect(result !== null && typeof result === "object" && !Array.isArray(result), where).toBe(true);
  const r = result as Record<string, unknown>;
  for (const key of Object.keys(r)) {
    expect(
      ["success", "error", "id", "value", "created", "receipt"],
      `${where}: field ${key}`,
    ).toContain(key);
  }
  expect(typeof r.success, `${where}: success`).toBe("boolean");
  expect(typeof r.error, `${where}: error`).toBe("string");
  if (r.id !== undefined) expect(typeof r.id, `${where}: id`).toBe("string");
  const name =
    command !== null && typeof command === "object" && !Array.isArray(command)
      ? (command as { command?: unknown }).command
      : undefined;
  if (r.success) {
    expect(r.error, `${where}: error of a success`).toBe("");
    if (name === "add") expect(typeof r.created, `${where}: created of an add`).toBe("boolean");
    else expect(r.created, `${where}: created on a ${String(name)}`).toBeUndefined();
    if (name === "pop" && r.id !== undefined) {
      expect(typeof r.receipt, `${where}: receipt of a pop`).toBe("string");
      expect((r.receipt as string).length, `${where}: empty receipt`).toBeGreaterThan(0);
    } else {
      expect(r.receipt, `${where}: receipt on a ${String(name)}`).toBeUndefined();
    }
    return undefined;
  }
  expect(r.created, `${where}: created on a failure`).toBeUndefined();
  expect(r.receipt, `${where}: receipt on a failure`).toBeUndefined();
  const error = r.error as string;
  expect(error, `${where}: envelope error "${error.slice(0, 300)}"`).toMatch(CODE_PATTERN);
  const code = error.slice(0, error.indexOf(":")) as ErrorCode;
  // Only bugs and outages are not envelopes: runCommand rethrows internal_error.
  expect(["internal_error", "redis_unavailable"], `${where}: ${error}`).not.toContain(code);
  expectCleanMessage(error.slice(code.length + 2), secrets, where);
  return code;
}

/**
 * ouqiang's envelope, `{code, message, data}` (and `error`, delayq's code, on a failure), as the
 * compatibility routes answer everything. Returns the error code of a failure.
 */
export function expectOuqiangEnvelope(
  res: FuzzResponse,
  secrets: readonly string[],
  where: string,
): ErrorCode | undefined {
  expect(res.status, `${where}: ouqiang's API answers HTTP 200: ${res.text.slice(0, 300)}`).toBe(
    200,
  );
  expect(res.isJson, `${where}: not JSON: ${res.text.slice(0, 300)}`).toBe(true);
  const body = res.json as Record<string, unknown>;
  expect(body !== null && typeof body === "object" && !Array.isArray(body), where).toBe(true);
  for (const key of Object.keys(body)) {
    expect(["code", "message", "data", "error"], `${where}: field ${key}`).toContain(key);
  }
  expect([0, 1], `${where}: code ${String(body.code)}`).toContain(body.code);
  expect("data" in body, `${where}: no data`).toBe(true);
  expectCleanMessage(body.message, secrets, where);
  if (body.code === 0) {
    expect(body.error, `${where}: error on a success`).toBeUndefined();
    return undefined;
  }
  expect(body.data, `${where}: data of a failure`).toBeNull();
  expect(CODES, `${where}: undocumented code ${String(body.error)}`).toContain(body.error);
  const code = body.error as ErrorCode;
  // Never a 5xx in disguise: a bug or an outage (Redis is up here).
  expect(ERROR_STATUS[code], `${where}: ${code}: ${String(body.message)}`).toBeLessThan(500);
  return code;
}

export type Verdict = {
  /** The request was refused as a whole: nothing may have changed. */
  rejected: boolean;
  /** Error codes seen (top level, batch items, command envelopes or ouqiang envelopes). */
  codes: ErrorCode[];
  /** The part of the service the request reached. */
  route: RouteClass;
};

/**
 * The invariants every response keeps, whatever the request:
 * - never 5xx; no response contains a secret (tokens, push secrets); no stack frame in an error;
 * - HEAD: no body (Hono answers HEAD by running the GET route and dropping the body);
 * - the JSON API (/v1, /health, /openapi.json, unknown paths) and /docs and /metrics: every
 *   non-2xx is `{"error": {"code", "message", "requestId"}}`, code documented, status = ERROR_STATUS[code];
 *   2xx is JSON, except GET /docs (an HTML page) and GET /metrics (Prometheus text, every line
 *   of the format);
 * - /v1/command answers envelopes whose errors read "<documented code>: <message>", `created`
 *   on adds and `receipt` on pops that handed a job out;
 * - /v1/jobs/batch and /v1/jobs/finish answer `{results}` whose errors are documented codes;
 * - /dashboard: HTML pages (or its stylesheet and icon), never a <script>; a redirect stays on
 *   this site under /dashboard;
 * - /compat/ouqiang: always HTTP 200 with ouqiang's envelope, `code: 1` with a documented error;
 * - a rejected request leaves the dataset digest as it was: any status >= 400, a lone command
 *   answered `success: false`, a batch whose every item failed, an ouqiang `code: 1`, and a
 *   QStash callback answered `settled: false`.
 */
export function checkResponse(
  request: FuzzRequest,
  res: FuzzResponse,
  digests: { before: string; after: string },
  secrets: readonly string[],
): Verdict {
  const where = `${describeRequest(request)} → ${res.status}`;
  const route = routeClass(request.path);
  expect(res.status, `${where}: ${res.text.slice(0, 500)}`).toBeLessThan(500);
  for (const secret of secrets) {
    expect(res.text.includes(secret), `${where}: the response contains a secret`).toBe(false);
  }
  const codes: ErrorCode[] = [];
  let rejected = res.status >= 400;
  const ok = res.status >= 200 && res.status < 300;
  const path = pathOf(request);
  if (request.method === "HEAD") {
    expect(res.text, `${where}: HEAD with a body`).toBe("");
  } else if (route === "dashboard") {
    checkDashboardPage(res, where);
  } else if (route === "compat") {
    const code = expectOuqiangEnvelope(res, secrets, where);
    if (code) {
      codes.push(code);
      rejected = true;
    }
    expectNoPathToken(request, res, where);
  } else if (!ok) {
    codes.push(expectErrorBody(res, secrets, where));
  } else if (request.method === "GET" && route === "docs") {
    expect(res.headers.get("content-type"), where).toMatch(/^text\/html/);
  } else if (request.method === "GET" && route === "metrics") {
    expect(res.headers.get("content-type"), where).toMatch(/^text\/plain; version=0\.0\.4/);
    // promtool's rules, then a parser that is not ours (test/ops/prometheus-lint.ts).
    expect(() => parseMetrics(res.text), `${where}: not the Prometheus text format`).not.toThrow();
  } else {
    expect(res.isJson, `${where}: a 2xx that is not JSON: ${res.text.slice(0, 300)}`).toBe(true);
    expect(res.headers.get("content-type") ?? "", `${where}: content-type`).toMatch(
      /^application\/json/,
    );
    if (request.method === "POST" && path === "/v1/command") {
      let sent: unknown;
      try {
        sent = JSON.parse(typeof request.body === "string" ? request.body : "");
      } catch {}
      const results = Array.isArray(res.json) ? res.json : [res.json];
      const commands = Array.isArray(res.json) && Array.isArray(sent) ? sent : [sent];
      expect(results.length, where).toBeGreaterThan(0);
      results.forEach((result, i) => {
        const code = expectCommandResult(result, secrets, where, commands[i]);
        if (code) codes.push(code);
      });
      if (!Array.isArray(res.json) && codes.length > 0) rejected = true;
    }
    if (request.method === "POST" && (path === "/v1/jobs/batch" || path === "/v1/jobs/finish")) {
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
        } else if (path === "/v1/jobs/finish") {
          expect(item, where).toEqual({ finished: true });
        } else {
          expect(item, where).toMatchObject({ created: expect.any(Boolean) });
        }
      }
      if (results.length > 0 && failed === results.length) rejected = true;
    }
    if (request.method === "POST" && path === "/v1/qstash/callback") {
      expect(res.json, where).toEqual({ settled: expect.any(Boolean) });
      if ((res.json as { settled: boolean }).settled === false) rejected = true;
    }
    if (request.method === "GET" || request.method === "PUT" || request.method === "PATCH") {
      expectMaskedSecrets(request, res.json, where);
    }
    expectShapes(res.json, where);
  }
  if (rejected) {
    expect(digests.after, `${where}: a rejected request changed the dataset`).toBe(digests.before);
  }
  return { rejected, codes, route };
}

/** A dashboard answer: a page, an asset, or a redirect that stays on the dashboard. */
function checkDashboardPage(res: FuzzResponse, where: string): void {
  const type = res.headers.get("content-type") ?? "";
  if (res.status >= 300 && res.status < 400) {
    const location = res.headers.get("location") ?? "";
    // A path on this site, under /dashboard: never another origin (no open redirect: not
    // "//host", "/\\host", "https://…" or "javascript:…").
    expect(location, `${where}: redirect to "${location}"`).toMatch(/^\/dashboard(?:[/?]|$)/);
    return;
  }
  if (res.status === 413) {
    // hono's bodyLimit, before any page: a short text.
    expect(type, `${where}: content-type`).toMatch(/^text\/(plain|html)/);
  } else {
    expect(type, `${where}: content-type`).toMatch(/^(text\/html|text\/css|image\/svg\+xml)/);
  }
  if (type.startsWith("text/html")) {
    expect(/<script/i.test(res.text), `${where}: a page with a script`).toBe(false);
  }
  if (res.status >= 400) {
    expect(STACK_FRAME.test(res.text), `${where}: stack frame in the page`).toBe(false);
  }
}

/** ouqiang's routes carry the token in the path: an answer never repeats a path segment of it. */
function expectNoPathToken(request: FuzzRequest, res: FuzzResponse, where: string): void {
  const segment = pathOf(request).split("/")[3];
  if (segment === undefined) return;
  let token = segment;
  try {
    token = decodeURIComponent(segment);
  } catch {}
  if (token.length >= 8 && /^[A-Za-z0-9_-]+$/.test(token)) {
    expect(res.text.includes(token), `${where}: the answer repeats the path's token`).toBe(false);
  }
}

/** The fields a job answer may have (src/domain/schemas.ts: Job): nothing internal leaks. */
const JOB_FIELDS = new Set([
  "id",
  "topic",
  "state",
  "body",
  "dueAt",
  "ttr",
  "attempts",
  "maxAttempts",
  "backoff",
  "deadline",
  "createdAt",
  "reservedUntil",
  "receipt",
  "endedAt",
  "deadReason",
  "lastDelivery",
  "lastError",
]);

/**
 * The jobs and topic stats of a 2xx answer have the documented fields only: a job's
 * `lastDelivery` is `{status, at, error?}`; a topic's `push` counts `{delivered, failed}` are
 * there exactly when its config has `push`.
 */
export function expectShapes(json: unknown, where: string): void {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return;
  const answer = json as Record<string, unknown>;
  const jobs: unknown[] = [];
  if (answer.job !== undefined) jobs.push(answer.job);
  if (Array.isArray(answer.jobs)) jobs.push(...answer.jobs);
  if (Array.isArray(answer.results)) {
    for (const result of answer.results) jobs.push((result as { job?: unknown }).job);
  }
  for (const job of jobs.filter((j) => j !== undefined)) {
    expect(typeof job, `${where}: job`).toBe("object");
    const fields = Object.keys(job as object);
    for (const field of fields)
      expect(JOB_FIELDS.has(field), `${where}: job field ${field}`).toBe(true);
    const last = (job as { lastDelivery?: Record<string, unknown> }).lastDelivery;
    if (last !== undefined) {
      expect(Object.keys(last).sort(), `${where}: lastDelivery`).toEqual(
        "error" in last ? ["at", "error", "status"] : ["at", "status"],
      );
      expect(typeof last.status, where).toBe("number");
      expect(typeof last.at, where).toBe("number");
      if ("error" in last) expect(typeof last.error, where).toBe("string");
    }
  }
  const stats = Array.isArray(answer.topics) ? answer.topics : "counts" in answer ? [answer] : [];
  for (const topic of stats as { config?: { push?: unknown }; push?: Record<string, unknown> }[]) {
    const pushed = topic.config?.push !== undefined;
    expect(
      topic.push !== undefined,
      `${where}: push counts ${pushed ? "missing" : "on a pulled topic"}`,
    ).toBe(pushed);
    if (topic.push) {
      expect(Object.keys(topic.push).sort(), where).toEqual(["delivered", "failed"]);
    }
  }
}

/**
 * Push secrets in a JSON answer are masked (`…` and the last 4), except the one a PUT or PATCH
 * generated (its config named no secret), which that answer shows once, in full.
 */
export function expectMaskedSecrets(request: FuzzRequest, json: unknown, where: string): void {
  const configs: unknown[] = [];
  const visit = (node: unknown, depth: number) => {
    if (depth > 6 || node === null || typeof node !== "object") return;
    if (Array.isArray(node)) {
      for (const item of node) visit(item, depth + 1);
      return;
    }
    const record = node as Record<string, unknown>;
    if ("config" in record && typeof record.config === "object") configs.push(record.config);
    if ("topics" in record) visit(record.topics, depth + 1);
  };
  visit(json, 0);
  let sent: { push?: { secret?: unknown } | null } | undefined;
  try {
    sent = JSON.parse(typeof request.body === "string" ? request.body : "");
  } catch {}
  const mayGenerate =
    (request.method === "PUT" || request.method === "PATCH") &&
    sent !== null &&
    typeof sent === "object" &&
    typeof sent?.push === "object" &&
    sent.push !== null &&
    sent.push.secret === undefined;
  for (const config of configs) {
    const push = (config as { push?: { secret?: unknown } }).push;
    if (push === undefined) continue;
    expect(typeof push, `${where}: push config`).toBe("object");
    const secret = (push as { secret?: unknown }).secret;
    if (secret === undefined) continue;
    expect(typeof secret, `${where}: push secret`).toBe("string");
    if (mayGenerate && (secret as string).startsWith("dqwh_")) {
      expect(secret as string, `${where}: generated secret`).toMatch(/^dqwh_[A-Za-z0-9_-]{43}$/);
    } else {
      const masked = (secret as string).startsWith("…") && (secret as string).length === 5;
      expect(masked, `${where}: a push secret that is not masked: ${String(secret)}`).toBe(true);
    }
  }
}

/**
 * Sends one request from the seeded dataset (re-seeding first if an earlier request changed it)
 * and checks every invariant of checkResponse on the answer; nothing may be logged as a 5xx.
 */
export async function exercise<S>(
  target: Target<S>,
  request: FuzzRequest,
  secrets: readonly string[],
  options: { withoutQStash?: boolean; reseed?: boolean } = {},
): Promise<{ res: FuzzResponse; verdict: Verdict; before: string; after: string }> {
  // reseed: false keeps what earlier requests wrote (a test that reads back its own writes).
  const before = options.reseed === false ? await target.digest() : await target.fresh();
  const logged = target.logs.length;
  const pushLogged = target.pushLogs.length;
  const res = await target.send(request, { withoutQStash: options.withoutQStash });
  const after = await target.digest();
  target.observed(after);
  const verdict = checkResponse(request, res, { before, after }, secrets);
  const logs = target.logs.slice(logged);
  expect(logs, `${describeRequest(request)}: logged as an internal error`).toEqual([]);
  // Push delivery may log failed deliveries and QStash being unreachable (nothing listens at
  // its URL here); anything else is a bug.
  const pushLogs = target.pushLogs
    .slice(pushLogged)
    .filter(
      (e) =>
        !(e.event === "push_failed" && e.level === "warn") && e.event !== "qstash_publish_failed",
    );
  expect(pushLogs, `${describeRequest(request)}: push delivery logged`).toEqual([]);
  for (const entry of target.pushLogs.slice(pushLogged)) {
    for (const secret of secrets) {
      expect(JSON.stringify(entry).includes(secret), "a push log line holds a secret").toBe(false);
    }
  }
  return { res, verdict, before, after };
}
