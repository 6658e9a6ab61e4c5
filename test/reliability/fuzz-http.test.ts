// Fuzzes the HTTP API: random methods, paths, headers and bodies against the real app over a
// private Redis. For every request: no 5xx, every error is a documented {"error": {code, message}}
// with its status, no stack or token leaks, 2xx is JSON, and a rejected request changes nothing
// (the DEBUG DIGEST of the dataset is the same before and after).
//
// HEAD and OPTIONS, as Hono answers them (nothing in the app handles them on purpose):
// - HEAD runs the GET route (auth and all) and drops the body: same status and headers as the
//   GET, an empty body. So a HEAD error has no JSON to check; its status must match the GET's.
// - OPTIONS is routed like any method with no route: 401 under /v1 without a valid token, else
//   404 not_found (or 400/413 from the body reader, which runs for every /v1 method). There is
//   no CORS preflight, so OPTIONS is never 2xx.
//
// DQ_FUZZ_RUNS sets the runs per property (default 300), DQ_FUZZ_SEED replays a seed.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DelayQueue } from "../../src/index";
import {
  badValueArb,
  checkProperty,
  checkResponse,
  contentTypeArb,
  exercise as exerciseOn,
  type FuzzRequest,
  type FuzzResponse,
  invalidNameArb,
  MAX_BODY_BYTES,
  MAX_REQUEST_BYTES,
  mutate,
  mutationArb,
  oddBodyArb,
  RUNS,
  segmentArb,
  startTarget,
  type Target,
  TIMEOUT,
  toJsonText,
  unknownKeyArb,
  validAddArb,
  validIdArb,
  validTopicArb,
  validTopicConfigArb,
  wellFormed,
  wire,
} from "./support/fuzz";

const ADMIN = "fuzz-admin-7Qe2vX9k";
const SECRETS = [ADMIN];
const METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"] as const;

// ---------------------------------------------------------------------------------------------
// The seeded dataset: topic t1 has jobs in every state, t2 one delayed job.

type Seeded = { receipts: Record<string, string> };

/** Seeded ids, and one that never exists. */
const KNOWN_IDS = ["d1", "d2", "q1", "r1", "r2", "x1", "f1", "z1", "o1", "nope"];
const KNOWN_TOPICS = ["t1", "t2", "t3"];

async function seed(queue: DelayQueue): Promise<Seeded> {
  await queue.configure("t1", { ttr: 120, maxAttempts: 5, backoff: "wechatpay" });
  for (const id of ["d1", "d2"]) {
    await queue.add({ topic: "t1", id, delay: 3600, body: { seeded: id } });
  }
  for (const id of ["r1", "r2", "x1", "f1"]) {
    await queue.add({ topic: "t1", id, body: { seeded: id } });
  }
  const popped = await queue.pop("t1", { count: 4 });
  const receipts: Record<string, string> = {};
  for (const job of popped) receipts[job.id] = job.receipt as string;
  if (Object.keys(receipts).length !== 4) throw new Error("seed: pop did not reserve 4 jobs");
  await queue.finish("f1", { receipt: receipts.f1 });
  await queue.bury("x1", { receipt: receipts.x1 });
  await queue.add({ topic: "t1", id: "q1", body: "ready" });
  await queue.add({ topic: "t1", id: "z1", body: null });
  await queue.delete("z1");
  await queue.add({ topic: "t2", id: "o1", delay: 60, body: [1, 2, 3] });
  return { receipts };
}

// ---------------------------------------------------------------------------------------------
// Routes and their inputs

type BodyKind = "add" | "batch" | "receipt" | "release" | "pop" | "kick" | "config" | "command";
type QueryKind = "list" | "topics" | "dead";
type Route = { method: string; template: string; body?: BodyKind; query?: QueryKind };

const ROUTES: Route[] = [
  { method: "POST", template: "/v1/jobs", body: "add" },
  { method: "POST", template: "/v1/jobs/batch", body: "batch" },
  { method: "GET", template: "/v1/jobs/{id}" },
  { method: "DELETE", template: "/v1/jobs/{id}" },
  { method: "POST", template: "/v1/jobs/{id}/finish", body: "receipt" },
  { method: "POST", template: "/v1/jobs/{id}/touch", body: "receipt" },
  { method: "POST", template: "/v1/jobs/{id}/release", body: "release" },
  { method: "POST", template: "/v1/jobs/{id}/bury", body: "receipt" },
  { method: "POST", template: "/v1/topics/{topic}/pop", body: "pop" },
  { method: "POST", template: "/v1/topics/{topic}/kick", body: "kick" },
  { method: "DELETE", template: "/v1/topics/{topic}/dead", query: "dead" },
  { method: "GET", template: "/v1/topics", query: "topics" },
  { method: "GET", template: "/v1/topics/{topic}" },
  { method: "PUT", template: "/v1/topics/{topic}", body: "config" },
  { method: "GET", template: "/v1/topics/{topic}/jobs", query: "list" },
  { method: "POST", template: "/v1/command", body: "command" },
  { method: "GET", template: "/health" },
  { method: "GET", template: "/openapi.json" },
  { method: "GET", template: "/docs" },
];

const idArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...KNOWN_IDS) },
  { weight: 2, arbitrary: validIdArb },
  { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "a.b:c@d~e+f=g-h") },
);
const topicArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...KNOWN_TOPICS) },
  { weight: 2, arbitrary: validTopicArb },
  { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "a.b:c_d-e") },
);
/** A receipt: the job's current one (filled in at send time), another job's, or made up. */
const receiptArb = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom("r1", "r2", "x1", "f1").map((id) => `@@RECEIPT:${id}@@`),
  },
  { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 100 }) },
);

const addArb = validAddArb(
  fc.oneof({ weight: 4, arbitrary: fc.constant("t1") }, { weight: 1, arbitrary: topicArb }),
  fc.oneof({ weight: 1, arbitrary: idArb }, { weight: 2, arbitrary: validIdArb }),
);

const commandArb: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc.tuple(addArb, fc.boolean()).map(([job, upper]) => {
    const { ttr, ...rest } = job;
    const command: Record<string, unknown> = { command: "add", ...rest };
    if (ttr !== undefined) command[upper ? "TTR" : "ttr"] = ttr;
    return command;
  }),
  fc.record(
    { command: fc.constant("pop"), topic: topicArb, wait: fc.integer({ min: 0, max: 20 }) },
    { requiredKeys: ["command", "topic"] },
  ),
  fc.record(
    {
      command: fc.constantFrom("finish", "delete", "get", "touch", "bury"),
      id: idArb,
      receipt: receiptArb,
    },
    { requiredKeys: ["command", "id"] },
  ),
  fc.record(
    {
      command: fc.constant("release"),
      id: idArb,
      receipt: receiptArb,
      delay: fc.integer({ min: 0, max: 3600 }),
    },
    { requiredKeys: ["command", "id"] },
  ),
);

const validBodyArb: Record<BodyKind, fc.Arbitrary<unknown>> = {
  add: addArb,
  batch: fc.oneof(
    { weight: 8, arbitrary: fc.record({ jobs: fc.array(addArb, { minLength: 1, maxLength: 4 }) }) },
    // At MAX_BATCH (1000 jobs in one script call) and past it.
    {
      weight: 1,
      arbitrary: fc.constantFrom(1000, 1001).map((n) => ({
        jobs: Array.from({ length: n }, (_, i) => ({ topic: "t1", id: `b${i}` })),
      })),
    },
  ),
  receipt: fc.record({ receipt: receiptArb }, { requiredKeys: [] }),
  release: fc.record(
    { receipt: receiptArb, delay: fc.double({ min: 0, max: 3600, noNaN: true }) },
    { requiredKeys: [] },
  ),
  pop: fc.record(
    { count: fc.integer({ min: 1, max: 100 }), wait: fc.integer({ min: 0, max: 20 }) },
    { requiredKeys: [] },
  ),
  kick: fc.oneof(
    fc.record({ ids: fc.array(idArb, { minLength: 1, maxLength: 4 }) }),
    fc.record({ count: fc.integer({ min: 1, max: 1000 }) }),
    fc.constant({}),
  ),
  config: validTopicConfigArb,
  command: fc.oneof(
    { weight: 3, arbitrary: commandArb },
    { weight: 1, arbitrary: fc.array(commandArb, { minLength: 1, maxLength: 4 }) },
  ),
};

type Query = [string, string][];

const validQueryArb: Record<QueryKind, fc.Arbitrary<Query>> = {
  list: fc
    .record(
      {
        state: fc.constantFrom("delayed", "ready", "reserved", "dead"),
        cursor: fc.oneof(fc.constant("0"), fc.integer({ min: 0, max: 999_999_999 }).map(String)),
        limit: fc.integer({ min: 1, max: 1000 }).map(String),
      },
      { requiredKeys: ["state"] },
    )
    .map((q) => Object.entries(q)),
  topics: fc
    .record(
      { after: topicArb, limit: fc.integer({ min: 1, max: 100 }).map(String) },
      { requiredKeys: [] },
    )
    .map((q) => Object.entries(q)),
  dead: fc
    .record({ count: fc.integer({ min: 1, max: 1000 }).map(String) }, { requiredKeys: [] })
    .map((q) => Object.entries(q)),
};

const badQueryValueArb = fc.oneof(
  fc.constantFrom("", "0", "-1", "1.5", "1e3", "NaN", "Infinity", "-0", "0x10", " 1", "1 "),
  fc.constantFrom("1001", "101", "99999999999999999999", "1000000000", "DEAD", "dead ", "finished"),
  fc.string({ maxLength: 20 }),
  invalidNameArb,
);

type QueryMutation =
  | { kind: "replace"; at: number; value: string }
  | { kind: "delete"; at: number }
  | { kind: "duplicate"; at: number; value: string }
  | { kind: "extra"; key: string; value: string };

const queryMutationArb: fc.Arbitrary<QueryMutation> = fc.oneof(
  fc.record({ kind: fc.constant("replace" as const), at: fc.nat(), value: badQueryValueArb }),
  fc.record({ kind: fc.constant("delete" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("duplicate" as const), at: fc.nat(), value: badQueryValueArb }),
  fc.record({
    kind: fc.constant("extra" as const),
    key: unknownKeyArb.map(String),
    value: badQueryValueArb,
  }),
);

function mutateQuery(query: Query, m: QueryMutation): Query {
  const copy = query.map(([k, v]) => [k, v] as [string, string]);
  if (m.kind === "extra") return [...copy, [m.key, m.value]];
  const at = copy.length === 0 ? -1 : m.at % copy.length;
  const entry = copy[at];
  if (!entry) return [[m.kind === "delete" ? "x" : "state", "value" in m ? m.value : ""]];
  if (m.kind === "delete") copy.splice(at, 1);
  else if (m.kind === "replace") entry[1] = m.value;
  else copy.push([entry[0], m.value]);
  return copy;
}

function buildPath(route: Route, id: string, topic: string, query?: Query): string {
  const path = route.template.replace("{id}", id).replace("{topic}", topic);
  const qs = query && query.length > 0 ? `?${new URLSearchParams(query).toString()}` : "";
  return path + qs;
}

const anyNameSegment = segmentArb(
  fc.oneof(
    { weight: 3, arbitrary: fc.oneof(idArb, topicArb) },
    { weight: 2, arbitrary: invalidNameArb },
  ),
);
const validIdSegment = idArb.map(encodeURIComponent);
const validTopicSegment = topicArb.map(encodeURIComponent);

/** A route's path with valid or invalid ids/topics and a valid, mutated or random query. */
const routePathArb = (route: Route): fc.Arbitrary<string> =>
  fc
    .record({
      id: anyNameSegment,
      topic: anyNameSegment,
      query: route.query
        ? fc.oneof(
            validQueryArb[route.query],
            fc
              .tuple(validQueryArb[route.query], queryMutationArb)
              .map(([q, m]) => mutateQuery(q, m)),
          )
        : fc.constant(undefined),
      junkQuery: fc.option(fc.webQueryParameters(), { nil: undefined }),
    })
    .map(({ id, topic, query, junkQuery }) => {
      const path = buildPath(route, id, topic, query);
      return junkQuery === undefined ? path : `${path.split("?")[0]}?${junkQuery}`;
    });
const anyRoutePathArb = fc.constantFrom(...ROUTES).chain(routePathArb);

/** Paths no route has: near misses of real ones, and random ones. */
const junkPathArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "/",
    "/v1",
    "/v1/",
    "/v2/jobs",
    "/v1/jobs/",
    "/v1/jobs//finish",
    "/v1/topics//pop",
    "//v1/jobs",
    "/v1/jobs/a/b/c",
    "/V1/JOBS",
    "/v1/jobs/d1/finish/",
    "/v1/jobs/d1/FINISH",
    "/v1/command/",
    "/v1/commands",
    "/health/",
    "/openapi.json/x",
    "/docs/",
    "/v1/topics/t1/dead/x",
    "/v1/jobs/%2e%2e/finish",
    "/v1/jobs/..%2F..%2Fhealth",
    "/v1/topics/t1/../../health",
    "/%",
    "/v1/%ZZ",
    "/v1/jobs/%C0%AF",
  ),
  fc.webPath().map((p) => (p.startsWith("/") ? p : `/${p}`)),
  fc.webPath().map((p) => `/v1${p.startsWith("/") ? p : `/${p}`}`),
  fc.string({ unit: "binary", maxLength: 60 }).map((s) => `/v1/${encodeURI(wellFormed(s))}`),
);

/** The Authorization header: the admin token most of the time. */
const authArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 12, arbitrary: fc.constant(`Bearer ${ADMIN}`) },
  { weight: 1, arbitrary: fc.constant(`bearer   ${ADMIN} `) },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constantFrom("", "Bearer", "Bearer ", `Basic ${ADMIN}`, ADMIN) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }).map(wire) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((s) => `Bearer ${wire(s)}`) },
);

/** Headers: auth, content-type, now and then a lying content-length or other noise. */
const headersArb: fc.Arbitrary<Record<string, string>> = fc
  .record({
    auth: authArb,
    contentType: contentTypeArb,
    length: fc.option(fc.constantFrom("0", "1", "-1", "abc", "99999999999", "1e9", ""), {
      freq: 10,
      nil: undefined,
    }),
    noise: fc.option(
      fc.record({
        name: fc.constantFrom("x-forwarded-for", "accept", "x-http-method-override", "cookie"),
        value: fc.string({ maxLength: 30 }).map(wire),
      }),
      { freq: 10, nil: undefined },
    ),
  })
  .map(({ auth, contentType, length, noise }) => {
    const headers: Record<string, string> = {};
    if (auth !== undefined) headers.authorization = auth;
    if (contentType !== undefined) headers["content-type"] = contentType;
    if (length !== undefined) headers["content-length"] = length;
    if (noise) headers[noise.name] = noise.value;
    return headers;
  });

const anyValidBodyArb = fc
  .constantFrom(...(Object.keys(validBodyArb) as BodyKind[]))
  .chain((kind) => validBodyArb[kind]);

/** Any body: valid for some route, valid-but-mutated, any JSON, or not JSON at all. */
const anyBodyArb: fc.Arbitrary<string | Uint8Array | undefined> = fc.oneof(
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: oddBodyArb },
  { weight: 2, arbitrary: anyValidBodyArb.map(toJsonText) },
  {
    weight: 2,
    arbitrary: fc.tuple(anyValidBodyArb, mutationArb).map(([v, m]) => toJsonText(mutate(v, m))),
  },
  { weight: 1, arbitrary: fc.jsonValue().map(toJsonText) },
);

// ---------------------------------------------------------------------------------------------
// Running one request

let target: Target<Seeded>;
const tally = { violations: 0 };
/** Statuses ("404", "2xx") and error codes the current property has produced. */
let seen = new Set<string>();
/** The same over the whole file, with counts. */
const everSeen = new Map<string, number>();

/**
 * The property reached these outcomes (with the default number of runs): a fuzzer that only
 * ever hits one error path would pass every invariant and test little.
 */
function expectCoverage(outcomes: string[]) {
  if (RUNS < 100) return;
  for (const outcome of outcomes) expect([...seen], `never produced ${outcome}`).toContain(outcome);
}
const started = Date.now();

beforeAll(async () => {
  target = await startTarget({ tokens: ADMIN, prefix: "fuzz-http", seed });
}, 60_000);

afterAll(async () => {
  if (!target) return;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `fuzz-http: fuzzed ${target.requests} requests, ${tally.violations} violations (${RUNS} runs per property, ${seconds} s)`,
  );
  await target.stop();
});

/** exercise() from the support module, noting the statuses and codes for expectCoverage. */
async function exercise(request: FuzzRequest) {
  const outcome = await exerciseOn(target, request, SECRETS);
  const status = outcome.res.status;
  for (const o of [String(status), `${Math.floor(status / 100)}xx`, ...outcome.verdict.codes]) {
    seen.add(o);
    everSeen.set(o, (everSeen.get(o) ?? 0) + 1);
  }
  return outcome;
}

// ---------------------------------------------------------------------------------------------

describe("the invariant checker (so that a broken server would fail the properties)", () => {
  const json = (status: number, body: unknown, type = "application/json"): FuzzResponse => {
    const text = typeof body === "string" ? body : JSON.stringify(body);
    let parsed: unknown;
    let isJson = false;
    try {
      parsed = JSON.parse(text);
      isJson = true;
    } catch {}
    return { status, headers: new Headers({ "content-type": type }), text, json: parsed, isJson };
  };
  const error = (code: string, message = "Something is wrong") => ({ error: { code, message } });
  const post = (path: string): FuzzRequest => ({ method: "POST", path, headers: {} });
  const same = { before: "a", after: "a" };
  const check =
    (request: FuzzRequest, res: FuzzResponse, digests = same) =>
    () =>
      checkResponse(request, res, digests, SECRETS);

  it("passes what the contract allows", () => {
    expect(check(post("/v1/jobs"), json(400, error("invalid_request")))).not.toThrow();
    expect(
      check(post("/v1/jobs"), json(201, { created: true }), { before: "a", after: "b" }),
    ).not.toThrow();
    expect(
      check({ method: "GET", path: "/docs", headers: {} }, json(200, "<html>", "text/html")),
    ).not.toThrow();
    expect(
      check(post("/v1/command"), json(200, { success: false, error: "job_not_found: no" })),
    ).not.toThrow();
    expect(check({ method: "HEAD", path: "/x", headers: {} }, json(404, ""))).not.toThrow();
  });

  it.each([
    ["a 5xx", post("/v1/jobs"), json(500, error("internal_error")), same],
    ["an undocumented code", post("/v1/jobs"), json(400, error("bad_thing")), same],
    ["a code with another status", post("/v1/jobs"), json(404, error("invalid_request")), same],
    ["an error that is not JSON", post("/v1/jobs"), json(400, "Bad Request", "text/plain"), same],
    [
      "an error with more fields",
      post("/v1/jobs"),
      json(400, { ...error("invalid_request"), stack: "x" }),
      same,
    ],
    ["an empty message", post("/v1/jobs"), json(400, error("invalid_request", "")), same],
    [
      "a stack frame",
      post("/v1/jobs"),
      json(400, error("invalid_request", "x\n    at f (/app/src/queue.ts:12:3)")),
      same,
    ],
    ["the token", post("/v1/jobs"), json(401, error("unauthorized", `bad token ${ADMIN}`)), same],
    [
      "a changed digest on a 4xx",
      post("/v1/jobs"),
      json(409, error("job_exists")),
      { before: "a", after: "b" },
    ],
    ["a 2xx that is not JSON", post("/v1/jobs"), json(200, "ok", "text/plain"), same],
    [
      "an envelope without a code",
      post("/v1/command"),
      json(200, { success: false, error: "oops" }),
      same,
    ],
    [
      "an envelope with internal_error",
      post("/v1/command"),
      json(200, { success: false, error: "internal_error: x" }),
      same,
    ],
    [
      "a failed lone command that wrote",
      post("/v1/command"),
      json(200, { success: false, error: "forbidden: no" }),
      { before: "a", after: "b" },
    ],
    [
      "a batch error with an undocumented code",
      post("/v1/jobs/batch"),
      json(200, { results: [{ error: { code: "nope", message: "x" } }] }),
      same,
    ],
    [
      "a batch that failed entirely and wrote",
      post("/v1/jobs/batch"),
      json(200, { results: [{ error: { code: "forbidden", message: "x" } }] }),
      { before: "a", after: "b" },
    ],
    [
      "a HEAD with a body",
      { method: "HEAD", path: "/health", headers: {} },
      json(200, { status: "ok" }),
      same,
    ],
  ] as [string, FuzzRequest, FuzzResponse, { before: string; after: string }][])(
    "fails on %s",
    (_name, request, res, digests) => {
      expect(check(request, res, digests)).toThrow();
    },
  );
});

describe("fuzzing the HTTP API", () => {
  it("knows every route of the OpenAPI document (so none goes unfuzzed)", async () => {
    const res = await target.send({ method: "GET", path: "/openapi.json", headers: {} });
    const doc = res.json as { paths: Record<string, Record<string, unknown>> };
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const known = ROUTES.map((r) => `${r.method} ${r.template}`);
    expect(documented.length).toBeGreaterThanOrEqual(15);
    for (const op of documented) expect(known, `${op} is not fuzzed`).toContain(op);
  });

  it("the seeded dataset answers as expected (so existing ids are exercised)", async () => {
    await target.fresh();
    const auth = { authorization: `Bearer ${ADMIN}` };
    const states: Record<string, string> = {};
    for (const id of ["d1", "q1", "r1", "x1", "f1", "z1", "o1"]) {
      const res = await target.send({ method: "GET", path: `/v1/jobs/${id}`, headers: auth });
      expect(res.status, id).toBe(200);
      states[id] = (res.json as { job: { state: string } }).job.state;
    }
    expect(states).toEqual({
      d1: "delayed",
      q1: "ready",
      r1: "reserved",
      x1: "dead",
      f1: "finished",
      z1: "deleted",
      o1: "delayed",
    });
    // A release with the seeded receipt is accepted and changes the dataset. (A touch would
    // not: the clock is frozen, so the lease it writes is the one the job has.)
    const released = await exercise({
      method: "POST",
      path: "/v1/jobs/r1/release",
      headers: auth,
      body: '{"receipt":"@@RECEIPT:r1@@","delay":5}',
    });
    expect(released.res.status).toBe(200);
    expect(released.after).not.toBe(released.before);

    // One request per conflict and limit, through the same invariants as the fuzzed ones.
    const post = (path: string, body: unknown) =>
      exercise({ method: "POST", path, headers: auth, body: toJsonText(body) });
    const expectations: [() => Promise<{ res: FuzzResponse }>, number, string][] = [
      [() => post("/v1/jobs", { topic: "t2", id: "d1" }), 409, "job_exists"],
      [() => post("/v1/jobs", { topic: "t1", id: "r1", replace: true }), 409, "job_reserved"],
      [() => post("/v1/jobs/d1/finish", {}), 409, "not_reserved"],
      [() => post("/v1/jobs/r1/bury", { receipt: "not-it" }), 409, "stale_receipt"],
      [
        () => post("/v1/jobs", { topic: "t1", body: "x".repeat(MAX_BODY_BYTES) }),
        413,
        "payload_too_large",
      ],
      [
        () => post("/v1/jobs", { topic: "t1", body: "x".repeat(MAX_REQUEST_BYTES) }),
        413,
        "payload_too_large",
      ],
    ];
    for (const [send, status, code] of expectations) {
      const { res } = await send();
      expect(res.status, code).toBe(status);
      expect((res.json as { error: { code: string } }).error.code).toBe(code);
    }
  });

  it(
    "any method, path, headers and body: no 5xx, documented errors, rejected requests change nothing",
    async () => {
      const routeRequestArb = fc.constantFrom(...ROUTES).chain((route) =>
        fc.record({
          method: fc.oneof(
            { weight: 2, arbitrary: fc.constant(route.method) },
            { weight: 1, arbitrary: fc.constantFrom(...METHODS) },
          ),
          path: routePathArb(route),
          headers: headersArb,
          body: route.body
            ? fc.oneof(
                validBodyArb[route.body].map(toJsonText),
                fc
                  .tuple(validBodyArb[route.body], mutationArb)
                  .map(([v, m]) => toJsonText(mutate(v, m))),
                anyBodyArb,
              )
            : anyBodyArb,
        }),
      );
      const junkRequestArb = fc.record({
        method: fc.constantFrom(...METHODS),
        path: junkPathArb,
        headers: headersArb,
        body: anyBodyArb,
      });
      seen = new Set();
      await checkProperty(
        fc.asyncProperty(
          fc.oneof(
            { weight: 4, arbitrary: routeRequestArb },
            { weight: 1, arbitrary: junkRequestArb },
          ),
          async (request) => {
            await exercise(request);
          },
        ),
        tally,
      );
      expectCoverage(["2xx", "400", "401", "404", "413", "not_found", "invalid_request"]);
    },
    TIMEOUT,
  );

  it(
    "valid requests with one field made wrong (body field, query parameter or path id/topic)",
    async () => {
      const withInput = ROUTES.filter((r) => r.body || r.query || r.template.includes("{"));
      const requestArb = fc.constantFrom(...withInput).chain((route) => {
        const targets = [
          ...(route.body ? ["body"] : []),
          ...(route.query ? ["query"] : []),
          ...(route.template.includes("{") ? ["param"] : []),
        ];
        return fc
          .record({
            id: validIdSegment,
            topic: validTopicSegment,
            badName: segmentArb(invalidNameArb),
            body: route.body ? validBodyArb[route.body] : fc.constant(undefined),
            query: route.query ? validQueryArb[route.query] : fc.constant(undefined),
            what: fc.oneof(
              { weight: 4, arbitrary: fc.constantFrom(...targets) },
              { weight: 2, arbitrary: fc.constant("nothing") },
            ),
            mutation: mutationArb,
            queryMutation: queryMutationArb,
            contentType: fc.option(fc.constant("application/json"), { freq: 4, nil: undefined }),
          })
          .map((input): FuzzRequest => {
            let { id, topic, body, query } = input;
            if (input.what === "body") body = mutate(body, input.mutation);
            if (input.what === "query" && query) query = mutateQuery(query, input.queryMutation);
            if (input.what === "param") {
              if (route.template.includes("{id}")) id = input.badName;
              else topic = input.badName;
            }
            const headers: Record<string, string> = { authorization: `Bearer ${ADMIN}` };
            if (input.contentType) headers["content-type"] = input.contentType;
            return {
              method: route.method,
              path: buildPath(route, id, topic, query),
              headers,
              body: route.body ? toJsonText(body) : undefined,
            };
          });
      });
      seen = new Set();
      await checkProperty(
        fc.asyncProperty(requestArb, async (request) => {
          await exercise(request);
        }),
        tally,
      );
      expectCoverage(["2xx", "400", "404", "invalid_request", "job_not_found"]);
    },
    TIMEOUT,
  );

  it(
    "the command protocol: valid, broken and batched commands answer documented envelopes",
    async () => {
      const brokenCommandArb = fc
        .tuple(commandArb, mutationArb)
        .map(([command, m]) => mutate(command, m));
      const bodyArb = fc.oneof(
        { weight: 3, arbitrary: commandArb },
        { weight: 4, arbitrary: brokenCommandArb },
        {
          weight: 2,
          arbitrary: fc.array(
            fc.oneof(commandArb, brokenCommandArb, fc.jsonValue({ maxDepth: 2 })),
            { minLength: 1, maxLength: 6 },
          ),
        },
        {
          weight: 1,
          arbitrary: fc.constantFrom<unknown>(
            [],
            [[]],
            [[{ command: "get", id: "d1" }]],
            Array.from({ length: 1001 }, () => ({ command: "get", id: "d1" })),
            { command: "GET", id: "d1" },
            { command: "get", id: "d1", TTR: 5 },
            { command: "add", topic: "t1", TTR: 5, ttr: 6 },
            { command: "add", topic: "t1", delay: 1, runAt: 1_800_000_000_000 },
          ),
        },
        { weight: 1, arbitrary: badValueArb },
      );
      seen = new Set();
      await checkProperty(
        fc.asyncProperty(bodyArb, contentTypeArb, async (body, contentType) => {
          const headers: Record<string, string> = { authorization: `Bearer ${ADMIN}` };
          if (contentType !== undefined) headers["content-type"] = contentType;
          const request = { method: "POST", path: "/v1/command", headers, body: toJsonText(body) };
          const { res } = await exercise(request);
          // Valid JSON always reaches the handler: 200 envelopes, or 400 for a bad array.
          if (request.body.trim() !== "") expect([200, 400, 413]).toContain(res.status);
        }),
        tally,
      );
      expectCoverage(["200", "400", "invalid_request", "job_not_found"]);
    },
    TIMEOUT,
  );

  it(
    "HEAD answers the GET's status with no body; OPTIONS is never 2xx",
    async () => {
      const getRoutes = ROUTES.filter((r) => r.method === "GET");
      const pathArb = fc.oneof(
        fc.constantFrom(...getRoutes).chain((route) =>
          fc
            .record({
              id: anyNameSegment,
              topic: anyNameSegment,
              query: route.query ? validQueryArb[route.query] : fc.constant(undefined),
            })
            .map(({ id, topic, query }) => buildPath(route, id, topic, query)),
        ),
        anyRoutePathArb,
        junkPathArb,
      );
      seen = new Set();
      await checkProperty(
        fc.asyncProperty(
          fc.constantFrom("HEAD", "OPTIONS"),
          pathArb,
          headersArb,
          fc.option(oddBodyArb, { nil: undefined }),
          async (method, path, headers, body) => {
            const request = { method, path, headers, body };
            const { res } = await exercise(request);
            if (method === "OPTIONS") {
              expect(res.status, `OPTIONS ${path}`).toBeGreaterThanOrEqual(400);
              return;
            }
            const get = await exercise({ method: "GET", path, headers });
            expect(res.status, `HEAD ${path} vs GET`).toBe(get.res.status);
            expect(res.headers.get("content-type"), `HEAD ${path} content-type`).toBe(
              get.res.headers.get("content-type"),
            );
          },
        ),
        tally,
      );
      expectCoverage(["200", "401", "404", "not_found"]);
    },
    TIMEOUT,
  );

  it("reached every error an admin can meet, over all the properties above", () => {
    if (process.env.DQ_FUZZ_DEBUG) console.log(Object.fromEntries(everSeen));
    // Only meaningful after the properties (not when a -t filter ran this test alone).
    if (everSeen.size === 0) return;
    seen = new Set(everSeen.keys());
    // job_exists and job_reserved are rarer; the seeded-dataset test meets them on purpose.
    expectCoverage([
      "201",
      "invalid_request",
      "unauthorized",
      "not_found",
      "job_not_found",
      "not_reserved",
      "stale_receipt",
      "payload_too_large",
    ]);
  });
});
