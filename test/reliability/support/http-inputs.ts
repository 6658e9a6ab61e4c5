// The HTTP fuzzer's inputs: the seeded dataset, the route table and the request generators.
import fc from "fast-check";
import type { DelayQueue } from "../../../src/index";
import {
  badValueArb,
  contentTypeArb,
  invalidNameArb,
  mutate,
  mutationArb,
  oddBodyArb,
  segmentArb,
  toJsonText,
  unknownKeyArb,
  validAddArb,
  validIdArb,
  validTopicArb,
  validTopicConfigArb,
  wellFormed,
  wire,
} from "./arbitraries";
import type { FuzzRequest } from "./fuzz";

export const ADMIN = "fuzz-admin-7Qe2vX9k";
const METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"] as const;

// ---------------------------------------------------------------------------------------------
// The seeded dataset: topic t1 has jobs in every state, t2 one delayed job.

export type Seeded = { receipts: Record<string, string> };

/** Seeded ids, and one that never exists. */
const KNOWN_IDS = ["d1", "d2", "q1", "r1", "r2", "x1", "f1", "z1", "o1", "nope"];
const KNOWN_TOPICS = ["t1", "t2", "t3"];

export async function seed(queue: DelayQueue): Promise<Seeded> {
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

export type BodyKind =
  | "add"
  | "batch"
  | "receipt"
  | "release"
  | "pop"
  | "kick"
  | "config"
  | "command";
export type QueryKind = "list" | "topics" | "dead";
export type Route = { method: string; template: string; body?: BodyKind; query?: QueryKind };

export const ROUTES: Route[] = [
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
export const headersArb: fc.Arbitrary<Record<string, string>> = fc
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
// Requests, one generator per property

/** A request to one route: its method or another, its path, any headers, a body for it. */
export const routeRequestArb = fc.constantFrom(...ROUTES).chain((route) =>
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
          fc.tuple(validBodyArb[route.body], mutationArb).map(([v, m]) => toJsonText(mutate(v, m))),
          anyBodyArb,
        )
      : anyBodyArb,
  }),
);

/** A request to a path no route has. */
export const junkRequestArb = fc.record({
  method: fc.constantFrom(...METHODS),
  path: junkPathArb,
  headers: headersArb,
  body: anyBodyArb,
});

/** Routes with a body, a query or a path parameter. */
const withInput = ROUTES.filter((r) => r.body || r.query || r.template.includes("{"));

/**
 * An admin request to a route with input: valid, or with one body field, query parameter or path
 * id/topic made wrong.
 */
export const oneWrongFieldRequestArb: fc.Arbitrary<FuzzRequest> = fc
  .constantFrom(...withInput)
  .chain((route) => {
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

/** A command with one field made wrong. */
const brokenCommandArb = fc
  .tuple(commandArb, mutationArb)
  .map(([command, m]) => mutate(command, m));

/** A /v1/command body: valid, broken, batched, edge cases, or not a command at all. */
export const commandBodyArb = fc.oneof(
  { weight: 3, arbitrary: commandArb },
  { weight: 4, arbitrary: brokenCommandArb },
  {
    weight: 2,
    arbitrary: fc.array(fc.oneof(commandArb, brokenCommandArb, fc.jsonValue({ maxDepth: 2 })), {
      minLength: 1,
      maxLength: 6,
    }),
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

const getRoutes = ROUTES.filter((r) => r.method === "GET");

/** Paths for HEAD and OPTIONS: GET routes' paths, any route's, and junk. */
export const headOptionsPathArb = fc.oneof(
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
