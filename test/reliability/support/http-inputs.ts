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
  Raw,
  segmentArb,
  sometimes,
  toJsonText,
  unknownKeyArb,
  validAddArb,
  validIdArb,
  validTopicArb,
  validTopicConfigArb,
  validTopicPatchArb,
  wellFormed,
  wire,
} from "./arbitraries";
import { csrfOf, type FuzzRequest, SESSION_COOKIE, type SeedTools, sessionOf } from "./fuzz";
import type { SignatureKind } from "./qstash-signature";

export const ADMIN = "fuzz-admin-7Qe2vX9k";
const METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"] as const;
/** The seeded push topics' secrets: no answer may contain them (they are masked, "…" + 4). */
export const PUSH_SECRETS = ["p1-secret-Zq8w3Lk5Mn7Rt2Vx", "p2-secret-Hb4Jd9Fs6Gy1Pc0W"];
/** A job body the dashboard must escape. */
export const HTML_BODY = '{"note":"<script>alert(1)</script><img src=x onerror=alert(2)>"}';

// ---------------------------------------------------------------------------------------------
// The seeded dataset: topic t1 has jobs in every state, t2 one delayed job and one with markup
// in its body; p1 is pushed directly (a job delayed, one claimed for delivery, one whose
// delivery failed, one finished by its receiver's answer), p2 via QStash.

export type Seeded = { receipts: Record<string, string> };

/** Seeded ids, and one that never exists. */
const KNOWN_IDS = [
  "d1",
  "d2",
  "q1",
  "r1",
  "r2",
  "x1",
  "f1",
  "z1",
  "o1",
  "h1",
  "pd1",
  "pr1",
  "pf1",
  "pk1",
  "qd1",
  "nope",
];
const KNOWN_TOPICS = ["t1", "t2", "t3", "p1", "p2"];

export async function seed(queue: DelayQueue, tools: SeedTools): Promise<Seeded> {
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
  await queue.add({ topic: "t2", id: "h1", delay: 60, body: JSON.parse(HTML_BODY) });

  // A backoff past the 65 s a settled delivery's follow-up claims ahead: a failed attempt is
  // not delivered again within the request (that would wait for its due time).
  await queue.configure("p1", {
    ttr: 30,
    backoff: [3600],
    push: {
      url: `${tools.receiverUrl}/hook`,
      secret: PUSH_SECRETS[0],
      timeout: 5,
      failureUrl: `${tools.receiverUrl}/failed`,
      headers: { "X-Api-Key": "k_live_seeded" },
    },
  });
  await queue.add({ topic: "p1", id: "pd1", delay: 3600, body: { push: "later" } });
  for (const id of ["pr1", "pf1", "pk1"]) await queue.add({ topic: "p1", id, body: { push: id } });
  for (const { id, receipt } of await tools.claim("p1")) receipts[id] = receipt;
  if (!receipts.pr1 || !receipts.pf1 || !receipts.pk1) throw new Error("seed: claim missed jobs");
  await tools.settle("pf1", receipts.pf1, "fail", 503, 60_000);
  await tools.settle("pk1", receipts.pk1, "done", 200);
  await queue.configure("p2", {
    push: { url: "https://shop.example/hooks/q", via: "qstash", secret: PUSH_SECRETS[1] },
  });
  await queue.add({ topic: "p2", id: "qd1", delay: 3600, body: { push: "qstash" } });
  return { receipts };
}

// ---------------------------------------------------------------------------------------------
// Routes and their inputs

export type BodyKind =
  | "add"
  | "batch"
  | "finishMany"
  | "receipt"
  | "release"
  | "pop"
  | "kick"
  | "config"
  | "patch"
  | "command"
  | "callback"
  | "reschedule"
  | "schedule";
export type QueryKind = "list" | "topics" | "dead" | "callback" | "schedules";
export type Route = { method: string; template: string; body?: BodyKind; query?: QueryKind };

/** The JSON API: every operation of /openapi.json, and only those. */
export const ROUTES: Route[] = [
  { method: "POST", template: "/v1/jobs", body: "add" },
  { method: "POST", template: "/v1/jobs/batch", body: "batch" },
  { method: "GET", template: "/v1/jobs/{id}" },
  { method: "DELETE", template: "/v1/jobs/{id}" },
  { method: "POST", template: "/v1/jobs/finish", body: "finishMany" },
  { method: "POST", template: "/v1/jobs/{id}/finish", body: "receipt" },
  { method: "POST", template: "/v1/jobs/{id}/touch", body: "receipt" },
  { method: "POST", template: "/v1/jobs/{id}/release", body: "release" },
  { method: "POST", template: "/v1/jobs/{id}/bury", body: "receipt" },
  { method: "POST", template: "/v1/jobs/{id}/reschedule", body: "reschedule" },
  { method: "POST", template: "/v1/jobs/{id}/promote" },
  { method: "POST", template: "/v1/topics/{topic}/pop", body: "pop" },
  { method: "POST", template: "/v1/topics/{topic}/kick", body: "kick" },
  { method: "DELETE", template: "/v1/topics/{topic}/dead", query: "dead" },
  { method: "GET", template: "/v1/topics", query: "topics" },
  { method: "GET", template: "/v1/topics/{topic}" },
  { method: "PUT", template: "/v1/topics/{topic}", body: "config" },
  { method: "PATCH", template: "/v1/topics/{topic}", body: "patch" },
  { method: "GET", template: "/v1/topics/{topic}/jobs", query: "list" },
  { method: "POST", template: "/v1/command", body: "command" },
  { method: "POST", template: "/v1/qstash/callback", body: "callback", query: "callback" },
  { method: "GET", template: "/v1/schedules", query: "schedules" },
  { method: "PUT", template: "/v1/schedules/{name}", body: "schedule" },
  { method: "GET", template: "/v1/schedules/{name}" },
  { method: "DELETE", template: "/v1/schedules/{name}" },
  { method: "GET", template: "/health" },
];

/** The query parameters each route documents (an unknown one is refused, 400). */
export const QUERY_NAMES: Record<QueryKind, readonly string[]> = {
  list: ["state", "cursor", "limit"],
  topics: ["cursor", "after", "limit"],
  dead: ["count"],
  callback: ["id", "receipt"],
  schedules: ["cursor", "after", "limit"],
};

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
    arbitrary: fc
      .constantFrom("r1", "r2", "x1", "f1", "pr1", "pf1", "pk1")
      .map((id) => `@@RECEIPT:${id}@@`),
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
  fc.record(
    { command: fc.constant("reschedule"), id: idArb, delay: fc.integer({ min: 0, max: 3600 }) },
    { requiredKeys: ["command", "id"] },
  ),
  fc.record({ command: fc.constant("promote"), id: idArb }),
);

/** A schedule's name: a few the fuzzer's PUTs make and read again, or any valid one. */
const scheduleNameArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom("s1", "s2", "nope") },
  { weight: 1, arbitrary: validTopicArb },
);

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

/**
 * What QStash POSTs to the callback: the receiver's status, headers and base64 body (success),
 * or a failure (no 2xx, or no answer), as JSON text.
 */
export const callbackBodyArb: fc.Arbitrary<string> = fc
  .record(
    {
      status: fc.constantFrom(200, 201, 204, 400, 429, 500, 503, 0),
      // Waits of 0 (delivered again by the request itself, at once) or past the 65 s a follow-up
      // claims ahead (left for a tick): none that the request would wait for.
      header: fc.option(
        fc.constantFrom({ "Retry-After": ["0"] }, { "retry-after": "3600" }, { "X-A": ["b"] }),
        { nil: undefined },
      ),
      body: fc.option(
        fc
          .constantFrom(
            "",
            "ok",
            '{"status":"done"}',
            '{"status":"retry","delay":3600}',
            '{"status":"retry","delay":0}',
            '{"status":"retry"}',
            '{"status":"bury"}',
            '{"status":"other"}',
          )
          .map(b64),
        { nil: undefined },
      ),
      sourceMessageId: fc.constant("msg_fuzz"),
      retried: fc.nat(3),
      dlqId: fc.option(fc.constant("dlq_1"), { nil: undefined }),
    },
    { requiredKeys: ["status"] },
  )
  .map((body) => toJsonText(body));

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
  finishMany: fc.oneof(
    {
      weight: 8,
      arbitrary: fc.record({
        jobs: fc.array(fc.record({ id: idArb, receipt: receiptArb }, { requiredKeys: ["id"] }), {
          minLength: 1,
          maxLength: 4,
        }),
      }),
    },
    // At MAX_POP (100 jobs in one script call) and past it.
    {
      weight: 1,
      arbitrary: fc.constantFrom(100, 101).map((n) => ({
        jobs: Array.from({ length: n }, (_, i) => ({ id: i === 0 ? "r1" : `b${i}` })),
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
  patch: validTopicPatchArb,
  callback: callbackBodyArb.map((text) => new Raw(text)),
  reschedule: fc.oneof(
    fc.record({ delay: fc.double({ min: 0, max: 3600, noNaN: true }) }),
    fc
      .integer({ min: -3_600_000, max: 30 * 86_400_000 })
      .map((ms) => ({ runAt: Math.floor(Date.now() / 1000) * 1000 + ms })),
    fc.constant({}),
  ),
  schedule: fc.record(
    {
      cron: fc.constantFrom("*/5 * * * *", "0 8 * * MON-FRI", "30 * * * * *", "0 0 1 1 *"),
      timezone: fc.constantFrom("UTC", "Asia/Shanghai", "America/New_York"),
      topic: fc.oneof(
        { weight: 4, arbitrary: fc.constant("t1") },
        { weight: 1, arbitrary: topicArb },
      ),
      body: fc.jsonValue({ maxDepth: 2 }),
      ttr: fc.integer({ min: 1, max: 3600 }),
      maxAttempts: fc.integer({ min: 1, max: 20 }),
      paused: fc.boolean(),
    },
    { requiredKeys: ["cron", "topic"] },
  ),
  command: fc.oneof(
    { weight: 3, arbitrary: commandArb },
    { weight: 1, arbitrary: fc.array(commandArb, { minLength: 1, maxLength: 4 }) },
  ),
};

type Query = [string, string][];

const validQueryArb: Record<QueryKind, fc.Arbitrary<Query>> = {
  // Cursors are `z<score>:<id>` (any state) or `s<slot>:<offset>` (delayed only).
  list: fc
    .record(
      {
        state: fc.constantFrom("delayed", "ready", "reserved", "dead"),
        cursor: fc.option(
          fc.oneof(
            fc
              .tuple(
                fc.integer({ min: 0, max: 99_999_999_999_999 }),
                fc.oneof(idArb, fc.constant("")),
              )
              .map(([score, id]) => `z${score}:${id}`),
            fc
              .tuple(
                fc.integer({ min: 0, max: 999_999_999 }),
                fc.integer({ min: 0, max: 999_999_999 }),
              )
              .map(([slot, offset]) => `s${slot}:${offset}`),
          ),
          { nil: undefined },
        ),
        limit: fc.integer({ min: 1, max: 1000 }).map(String),
      },
      { requiredKeys: ["state"] },
    )
    .map(({ state, cursor, limit }) => {
      const query: [string, string][] = [["state", state]];
      // An s-cursor pages delayed jobs only; with another state it is refused (400).
      if (cursor !== undefined && (state === "delayed" || cursor.startsWith("z"))) {
        query.push(["cursor", cursor]);
      }
      if (limit !== undefined) query.push(["limit", limit]);
      return query;
    }),
  callback: fc.tuple(fc.oneof(idArb, fc.constantFrom("pr1", "pf1")), receiptArb).map(
    ([id, receipt]): Query => [
      ["id", id],
      ["receipt", receipt],
    ],
  ),
  // The cursor by its name, or by its former name (after); both at once is a 400 of its own.
  topics: fc
    .record(
      {
        name: fc.constantFrom("cursor", "after"),
        start: topicArb,
        limit: fc.integer({ min: 1, max: 100 }).map(String),
      },
      { requiredKeys: ["name"] },
    )
    .map(
      ({ name, start, limit }): Query => [
        ...(start === undefined ? [] : [[name, start] as [string, string]]),
        ...(limit === undefined ? [] : [["limit", limit] as [string, string]]),
      ],
    ),
  dead: fc
    .record({ count: fc.integer({ min: 1, max: 1000 }).map(String) }, { requiredKeys: [] })
    .map((q) => Object.entries(q)),
  schedules: fc
    .record(
      {
        name: fc.constantFrom("cursor", "after"),
        start: scheduleNameArb,
        limit: fc.integer({ min: 1, max: 1000 }).map(String),
      },
      { requiredKeys: ["name"] },
    )
    .map(
      ({ name, start, limit }): Query => [
        ...(start === undefined ? [] : [[name, start] as [string, string]]),
        ...(limit === undefined ? [] : [["limit", limit] as [string, string]]),
      ],
    ),
};

const badQueryValueArb = fc.oneof(
  fc.constantFrom("", "0", "-1", "1.5", "1e3", "NaN", "Infinity", "-0", "0x10", " 1", "1 "),
  fc.constantFrom("1001", "101", "99999999999999999999", "1000000000", "DEAD", "dead ", "finished"),
  // Cursors of the old format, or nearly right: z with no id separator, s with a letter, …
  fc.constantFrom("0", "123", "z12", "z:abc", "zz1:a", "s1", "s1:x", "s1:1:2", "z1:a b", "z1:a/b"),
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
  // A schedule's name has a topic name's rules: the topic segment serves as one.
  const path = route.template
    .replace("{id}", id)
    .replace("{topic}", topic)
    .replace("{name}", topic);
  const qs = query && query.length > 0 ? `?${new URLSearchParams(query).toString()}` : "";
  // Receipt placeholders stay readable, for send() to fill in.
  return (path + qs).replace(/%40%40RECEIPT%3A([A-Za-z0-9]*)%40%40/g, "@@RECEIPT:$1@@");
}

/** The documented route a request reaches (method and path), if any. */
export function documentedRoute(method: string, path: string): Route | undefined {
  let pathname: string;
  try {
    pathname = new URL(`http://localhost${path}`).pathname;
  } catch {
    return undefined;
  }
  return ROUTES.find(
    (route) =>
      route.method === method &&
      new RegExp(`^${route.template.replace(/\{[^}]+\}/g, "[^/]+")}$`).test(pathname),
  );
}

/**
 * The query parameters of a request to a /v1 route that the route does not document: the API
 * refuses them (400). The QStash callback is left out: QStash calls the URL delayq signed, and
 * the route reads its two parameters before the /v1 middleware runs.
 */
export function unknownQueryParams(route: Route, path: string): string[] {
  if (!route.template.startsWith("/v1/") || route.template === "/v1/qstash/callback") return [];
  const url = new URL(`http://localhost${path}`);
  if (url.search.length <= 1) return [];
  const known = route.query ? QUERY_NAMES[route.query] : [];
  return [...new Set(url.searchParams.keys())].filter((name) => !known.includes(name));
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
    "/v1/qstash",
    "/v1/qstash/callback/",
    "/v1/qstash/callback/x",
    "/metrics/",
    "/metrics/x",
    "/METRICS",
    "/dashboardx",
    "/compat",
    "/compat/",
    "/compat/ouqiangx/t/push",
    "/compat/ouqiang%2Fx/push",
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

// ---------------------------------------------------------------------------------------------
// The routes that do not answer JSON errors: /docs, /metrics, /dashboard, /compat/ouqiang

/** The dashboard's session cookie: the admin's, a wrong token's, garbage, or none. */
const cookieArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 8, arbitrary: fc.constant(`${SESSION_COOKIE}=${sessionOf(ADMIN)}`) },
  { weight: 1, arbitrary: fc.constant(undefined) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      `${SESSION_COOKIE}=${sessionOf(ADMIN)}x`,
      // The token itself is no session.
      `${SESSION_COOKIE}=${ADMIN}`,
      `${SESSION_COOKIE}=`,
      `${SESSION_COOKIE}=${encodeURIComponent(`${ADMIN} `)}`,
      `other=${ADMIN}`,
      `${SESSION_COOKIE}=wrong; ${SESSION_COOKIE}=${sessionOf(ADMIN)}`,
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((v) => `${SESSION_COOKIE}=${wire(v)}`) },
);

// Pause first: fast-check leans to the first constants, and a pause always writes.
const DASHBOARD_ACTIONS = ["pause", "resume", "kick-dead", "delete", "bury", "kick", "delete-dead"];

/** Where a dashboard action returns to: its own pages, or attempts to leave the site. */
const backArb = fc.oneof(
  fc.constantFrom("/dashboard", "/dashboard/topics/t1?state=dead", "/dashboard/jobs/r1", ""),
  fc.constantFrom(
    "//evil.example/x",
    "https://evil.example/dashboard",
    "/dashboard/../..//evil.example",
    "/dashboard/%2e%2e//evil.example",
    "/dashboard/\\evil.example",
    "/\\evil.example",
    "javascript:alert(1)",
    "/dashboardx",
    "/dashboard?done=kick&n=9",
  ),
  fc.webPath(),
);

/** A dashboard form: sign in, sign out, or an action (with or without its CSRF value). */
const dashboardFormArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .record(
        {
          action: fc.oneof(fc.constantFrom(...DASHBOARD_ACTIONS), fc.constantFrom("nope", "")),
          topic: fc.oneof(
            { weight: 3, arbitrary: topicArb },
            { weight: 1, arbitrary: invalidNameArb },
          ),
          id: fc.oneof({ weight: 3, arbitrary: idArb }, { weight: 1, arbitrary: invalidNameArb }),
          back: backArb,
          csrf: fc.oneof(
            { weight: 4, arbitrary: fc.constant(csrfOf(ADMIN)) },
            {
              weight: 1,
              arbitrary: fc.constantFrom(csrfOf("other"), "", csrfOf(ADMIN, { cut: true })),
            },
          ),
          confirm: fc.oneof(
            { weight: 3, arbitrary: fc.constant("yes") },
            { weight: 1, arbitrary: fc.constant("no") },
          ),
        },
        { requiredKeys: ["action", "topic", "id", "csrf", "confirm"] },
      )
      .map((form) => ({ path: "/dashboard/actions", form: form as Record<string, string> })),
  },
  fc
    .constantFrom(ADMIN, `${ADMIN} `, "wrong-token", "", ADMIN.toUpperCase())
    .map((token) => ({ path: "/dashboard/login", form: { token } })),
  fc
    .option(fc.constantFrom(csrfOf(ADMIN), csrfOf("other"), ""), { nil: undefined })
    .map((csrf) => ({ path: "/dashboard/logout", form: csrf === undefined ? {} : { csrf } })),
);

/** A dashboard page's path, with its query. */
const dashboardPathArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "/dashboard",
    "/dashboard/",
    "/dashboard/login",
    "/dashboard/payments",
    "/dashboard/payments?cursor=abc",
    "/dashboard/assets/style.css",
    "/dashboard/assets/favicon.svg",
    "/dashboard/jobs/",
    "/dashboard/topics/",
    "/dashboard?done=kick&n=abc",
    "/dashboard?done=%3Cscript%3E",
  ),
  fc
    .record({
      after: fc.option(fc.oneof(topicArb, invalidNameArb), { nil: undefined }),
      limit: fc.option(fc.constantFrom("1", "0", "-5", "100", "1000", "x", "1e3"), {
        nil: undefined,
      }),
    })
    .map(({ after, limit }) => {
      const q: [string, string][] = [];
      if (after !== undefined) q.push(["after", wellFormed(after)]);
      if (limit !== undefined) q.push(["limit", limit]);
      return `/dashboard${q.length > 0 ? `?${new URLSearchParams(q)}` : ""}`;
    }),
  fc
    .tuple(fc.constantFrom("topic", "job"), fc.oneof(topicArb, idArb, invalidNameArb))
    .map(
      ([field, value]) => `/dashboard/find?${new URLSearchParams([[field, wellFormed(value)]])}`,
    ),
  fc
    .record({
      topic: segmentArb(fc.oneof(topicArb, invalidNameArb)),
      state: fc.option(fc.constantFrom("ready", "delayed", "reserved", "dead", "finished", "x"), {
        nil: undefined,
      }),
      cursor: fc.option(fc.constantFrom("z0:", "s1:0", "z1800000000000:d1", "garbage"), {
        nil: undefined,
      }),
      limit: fc.option(fc.constantFrom("1", "50", "1000", "x"), { nil: undefined }),
    })
    .map(({ topic, state, cursor, limit }) => {
      const q: [string, string][] = [];
      if (state !== undefined) q.push(["state", state]);
      if (cursor !== undefined) q.push(["cursor", cursor]);
      if (limit !== undefined) q.push(["limit", limit]);
      return `/dashboard/topics/${topic}${q.length > 0 ? `?${new URLSearchParams(q)}` : ""}`;
    }),
  segmentArb(fc.oneof(idArb, invalidNameArb)).map((id) => `/dashboard/jobs/${id}`),
  fc.webPath().map((p) => `/dashboard${p.startsWith("/") ? p : `/${p}`}`),
);

const BOUNDARY = "fuzzBoundary7d3a9c";
const MULTIPART = `multipart/form-data; boundary=${BOUNDARY}`;

/** A form as multipart/form-data, each field a part. */
function multipartOf(form: Record<string, string>): string {
  const parts = Object.entries(form).map(
    ([name, value]) =>
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value.replaceAll(BOUNDARY, "")}\r\n`,
  );
  return `${parts.join("")}--${BOUNDARY}--\r\n`;
}

/** An action a signed-in admin confirms, from a page of the dashboard: it goes through. */
const dashboardActionArb: fc.Arbitrary<FuzzRequest> = fc
  .record({
    action: fc.constantFrom(...DASHBOARD_ACTIONS),
    topic: fc.constantFrom("t1", "t2", "p1", "t3"),
    id: fc.constantFrom(...KNOWN_IDS),
    back: backArb,
    site: fc.constantFrom("same-origin", "none", undefined),
  })
  .map(({ site, ...form }) => ({
    method: "POST",
    path: "/dashboard/actions",
    headers: {
      cookie: `${SESSION_COOKIE}=${sessionOf(ADMIN)}`,
      "content-type": "application/x-www-form-urlencoded",
      ...(site === undefined ? {} : { "sec-fetch-site": site }),
    },
    body: new URLSearchParams({ ...form, csrf: csrfOf(ADMIN), confirm: "yes" }).toString(),
  }));

/** Dashboard requests: pages (GET) and forms (POST), sometimes with another method. */
const anyDashboardRequestArb: fc.Arbitrary<FuzzRequest> = fc
  .record({
    page: fc.oneof(
      { weight: 2, arbitrary: dashboardFormArb },
      { weight: 3, arbitrary: dashboardPathArb.map((path) => ({ path, form: undefined })) },
    ),
    method: sometimes(fc.constantFrom(...METHODS), 6),
    cookie: cookieArb,
    site: sometimes(fc.constantFrom("same-origin", "none", "cross-site", "same-site"), 3),
    // Forms as browsers send them (url-encoded or well-formed multipart), or any Content-Type,
    // a multipart one with a body that is not multipart included (400, regressions.test.ts).
    contentType: fc.oneof(
      { weight: 6, arbitrary: fc.constant("application/x-www-form-urlencoded") },
      { weight: 1, arbitrary: fc.constant(MULTIPART) },
      { weight: 1, arbitrary: contentTypeArb },
    ),
    odd: sometimes(oddBodyArb, 8),
  })
  .map(({ page, method, cookie, site, contentType, odd }): FuzzRequest => {
    const headers: Record<string, string> = {};
    if (cookie !== undefined) headers.cookie = cookie;
    if (site !== undefined) headers["sec-fetch-site"] = site;
    const form = page.form as Record<string, string> | undefined;
    if (form && contentType !== undefined) headers["content-type"] = contentType;
    const multipart = form !== undefined && contentType === MULTIPART;
    const encoded = form && (multipart ? multipartOf(form) : new URLSearchParams(form).toString());
    return {
      method: method ?? (form ? "POST" : "GET"),
      path: page.path,
      headers,
      body: multipart ? encoded : (odd ?? encoded),
    };
  });

/** Dashboard requests: anything, and now and then an action that goes through. */
export const dashboardRequestArb: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { weight: 4, arbitrary: anyDashboardRequestArb },
  { weight: 1, arbitrary: dashboardActionArb },
);

const OUQIANG_ENDPOINTS = ["push", "pop", "finish", "delete", "get"] as const;

/** A Go-style field name: as ouqiang spells it, or in another case (Go matches any case). */
const goName = (name: string) =>
  fc.constantFrom(name, name.toUpperCase(), name[0]?.toUpperCase() + name.slice(1));

/** A valid request body of one of ouqiang's endpoints. */
const ouqiangBodyArb: Record<(typeof OUQIANG_ENDPOINTS)[number], fc.Arbitrary<unknown>> = {
  push: fc
    .record({
      topic: fc.oneof(topicArb, fc.constantFrom(" t1 ", "t1")),
      id: idArb,
      delay: fc.integer({ min: 0, max: 3600 }),
      ttr: fc.option(fc.integer({ min: 1, max: 86_400 }), { nil: undefined }),
      body: fc.oneof(fc.string({ maxLength: 40 }), fc.jsonValue({ maxDepth: 2 }).map(toJsonText)),
      topicName: goName("topic"),
    })
    .map(({ topicName, topic, ...rest }) => ({ [topicName]: topic, ...rest })),
  pop: fc.record(
    {
      topic: fc.oneof(
        topicArb,
        fc.constantFrom("t1,t2", "t2,t1", "p1,t1", "t1,p1", "t3,t2", "", ",", "t1,,t2"),
      ),
      wait: fc.integer({ min: 0, max: 20 }),
    },
    { requiredKeys: ["topic"] },
  ),
  finish: fc.record(
    { id: idArb, receipt: fc.oneof(receiptArb, fc.constant(null)) },
    { requiredKeys: ["id"] },
  ),
  delete: fc.record({ id: idArb }),
  get: fc.record({ id: fc.oneof(idArb, fc.constantFrom(" d1 ", "D1")) }),
};

/** A request to ouqiang's API: its token (the admin's, or not one of ours) in the path. */
export const compatRequestArb: fc.Arbitrary<FuzzRequest> = fc
  .record({
    token: fc.oneof(
      { weight: 6, arbitrary: fc.constant(ADMIN) },
      { weight: 1, arbitrary: fc.constantFrom(`${ADMIN}x`, ADMIN.slice(1), "", "%20", "..") },
      { weight: 1, arbitrary: segmentArb(fc.string({ minLength: 1, maxLength: 30 })) },
    ),
    endpoint: fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom(...OUQIANG_ENDPOINTS) },
      { weight: 1, arbitrary: fc.constantFrom("", "PUSH", "push/x", "push/", "status", "..") },
    ),
    method: sometimes(fc.constantFrom(...METHODS), 8),
    mutation: sometimes(mutationArb, 3),
    odd: sometimes(oddBodyArb, 8),
    contentType: contentTypeArb,
    pick: fc.nat(),
  })
  .chain((r) => {
    const known = (OUQIANG_ENDPOINTS as readonly string[]).includes(r.endpoint)
      ? (r.endpoint as (typeof OUQIANG_ENDPOINTS)[number])
      : OUQIANG_ENDPOINTS[r.pick % OUQIANG_ENDPOINTS.length];
    return ouqiangBodyArb[known as (typeof OUQIANG_ENDPOINTS)[number]].map((valid): FuzzRequest => {
      const body =
        r.odd ?? toJsonText(r.mutation === undefined ? valid : mutate(valid, r.mutation));
      const headers: Record<string, string> = {};
      if (r.contentType !== undefined) headers["content-type"] = r.contentType;
      const path = `/compat/ouqiang/${r.token}${r.endpoint === "" ? "" : `/${r.endpoint}`}`;
      return { method: r.method ?? "POST", path, headers, body };
    });
  });

/** /docs, /openapi.json and /metrics: any headers (the admin token mostly), a query sometimes. */
export const opsRequestArb: fc.Arbitrary<FuzzRequest> = fc
  .record({
    path: fc.constantFrom("/docs", "/openapi.json", "/metrics"),
    query: sometimes(fc.webQueryParameters(), 4),
    method: sometimes(fc.constantFrom(...METHODS), 6),
    headers: headersArb,
    body: sometimes(oddBodyArb, 4),
  })
  .map(({ path, query, method, headers, body }) => ({
    method: method ?? "GET",
    path: query === undefined ? path : `${path}?${query}`,
    headers,
    body,
  }));

/** Any request to a route that does not answer JSON errors. */
export const pageRequestArb: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { weight: 4, arbitrary: dashboardRequestArb },
  { weight: 3, arbitrary: compatRequestArb },
  { weight: 2, arbitrary: opsRequestArb },
);

/**
 * A QStash callback: a body as QStash sends it (or not), the reservation named in the query
 * (the right receipt, an old one, or none), and an Upstash-Signature that is right or spoiled
 * (send() signs `@@SIGN:<kind>@@`), or missing; sometimes a bearer token too, which opens
 * nothing here.
 */
export const callbackRequestArb: fc.Arbitrary<FuzzRequest & { signature?: SignatureKind }> = fc
  .record({
    query: fc.oneof(
      { weight: 6, arbitrary: validQueryArb.callback },
      {
        weight: 2,
        arbitrary: fc
          .tuple(validQueryArb.callback, queryMutationArb)
          .map(([q, m]) => mutateQuery(q, m)),
      },
    ),
    body: fc.oneof(
      { weight: 6, arbitrary: callbackBodyArb },
      { weight: 1, arbitrary: oddBodyArb },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map(toJsonText) },
    ),
    signature: fc.option(
      fc.oneof(
        { weight: 5, arbitrary: fc.constantFrom<SignatureKind>("current", "next") },
        {
          weight: 4,
          arbitrary: fc.constantFrom<SignatureKind>(
            "wrong-key",
            "wrong-url",
            "wrong-body",
            "expired",
            "not-yet",
            "wrong-issuer",
            "alg-none",
            "garbage",
          ),
        },
      ),
      { freq: 8, nil: undefined },
    ),
    bearer: sometimes(fc.constant(`Bearer ${ADMIN}`), 3),
    method: sometimes(fc.constantFrom(...METHODS), 10),
  })
  .map(({ query, body, signature, bearer, method }) => {
    const headers: Record<string, string> = {};
    if (signature !== undefined) headers["upstash-signature"] = `@@SIGN:${signature}@@`;
    if (bearer !== undefined) headers.authorization = bearer;
    const route = ROUTES.find((r) => r.template === "/v1/qstash/callback") as Route;
    return {
      method: method ?? "POST",
      path: buildPath(route, "", "", query),
      headers,
      body,
      ...(signature === undefined ? {} : { signature }),
    };
  });

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
  pageRequestArb.map((request) => request.path),
);
