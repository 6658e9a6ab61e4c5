// Fuzzes authentication and topic scopes. Tokens that are not ours (random strings and near
// misses of the real ones) get 401 on every /v1 route and /metrics, a sign-in page on the
// dashboard and `code: 1` from ouqiang's API, and change nothing; no bearer token opens the QStash
// callback (only its signature does). A token limited to "shop-a.*" gets 403 on every other topic
// and 404 on every job of another topic, through /v1, its dashboard session, ouqiang's API and
// /metrics alike; it changes nothing there, never reads or changes another topic's push config,
// never sees a push secret or another topic's job body or receipt; and it still works on its own
// topics.
//
// What counts as "the real token": the server takes the header `Bearer <token>` with any case of
// "Bearer" and any whitespace around the token (HTTP trims the header, and the pattern allows
// more). So a candidate that is a real token once surrounding whitespace is trimmed is the real
// token, not a near miss; whitespace inside a token is a near miss.
//
// DQ_FUZZ_RUNS sets the runs per property (default 300), DQ_FUZZ_SEED replays a seed.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Raw, toJsonText, validIdArb } from "./support/arbitraries";
import {
  ADMIN,
  badAuthArb,
  badPageRequestArb,
  FOREIGN_IDS,
  foreignIdProbeArb,
  foreignTopicRequestArb,
  MARKER,
  matchesScope,
  OWN_IDS,
  OWN_PUSH_TOPIC,
  OWN_TOPIC,
  ownTopicArb,
  PUSH_SECRETS,
  type Seeded,
  SHOP,
  scopedPageRequestArb,
  seed,
  TOKENS,
  toRequest,
  unsignedCallbackArb,
  v1RequestArb,
} from "./support/auth-inputs";
import {
  checkProperty,
  exercise as exerciseOn,
  type FuzzRequest,
  type FuzzResponse,
  RUNS,
  startTarget,
  type Target,
  TIMEOUT,
} from "./support/fuzz";

const SECRETS = [...TOKENS, ...PUSH_SECRETS];

// ---------------------------------------------------------------------------------------------

let target: Target<Seeded>;
const tally = { violations: 0 };
const started = Date.now();

beforeAll(async () => {
  target = await startTarget({ tokens: `${ADMIN},${SHOP}:shop-a.*`, prefix: "fuzz-auth", seed });
}, 60_000);

afterAll(async () => {
  if (!target) return;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `fuzz-auth: fuzzed ${target.requests} requests, ${tally.violations} violations (${RUNS} runs per property, ${seconds} s)`,
  );
  await target.stop();
});

const exercise = (request: FuzzRequest) => exerciseOn(target, request, SECRETS);
const as = (token: string) => ({ authorization: `Bearer ${token}` });

/** Nothing of another topic's jobs: no marker, no receipt of a foreign job. */
function expectNoForeignData(res: FuzzResponse, where: string) {
  expect(res.text.includes(MARKER), `${where}: a foreign job's body leaked: ${res.text}`).toBe(
    false,
  );
  const receipts = target.seeded().receipts;
  for (const id of FOREIGN_IDS) {
    const receipt = receipts[id];
    if (receipt) expect(res.text.includes(receipt), `${where}: ${id}'s receipt leaked`).toBe(false);
  }
}

function expectForbidden(res: FuzzResponse, where: string) {
  expect(res.status, `${where}: ${res.text.slice(0, 300)}`).toBe(403);
  expect((res.json as { error: { code: string } }).error.code, where).toBe("forbidden");
}

/** A foreign job addressed by id reads as missing (issue 8.14): 404 job_not_found. */
function expectNotFound(res: FuzzResponse, where: string) {
  expect(res.status, `${where}: ${res.text.slice(0, 300)}`).toBe(404);
  expect((res.json as { error: { code: string } }).error.code, where).toBe("job_not_found");
}

/**
 * Every envelope of a /v1/command answer failed with `code: …` (`forbidden` for a foreign
 * topic, `job_not_found` for a foreign job's id).
 */
function expectFailedEnvelopes(res: FuzzResponse, where: string, code: string) {
  expect(res.status, `${where}: ${res.text.slice(0, 300)}`).toBe(200);
  const results = Array.isArray(res.json) ? res.json : [res.json];
  for (const result of results as { success: boolean; error: string }[]) {
    expect(result.success, `${where}: ${res.text.slice(0, 300)}`).toBe(false);
    expect(result.error, where).toMatch(new RegExp(`^${code}: `));
  }
}

// ---------------------------------------------------------------------------------------------

describe("fuzzing authentication", () => {
  it("accepts the real tokens (so the 401s below are not vacuous), also in lenient forms", async () => {
    for (const header of [
      `Bearer ${ADMIN}`,
      `bearer ${ADMIN}`,
      `Bearer   ${ADMIN}  `,
      `BEARER\t${SHOP}`,
      `Bearer ${SHOP}`,
    ]) {
      const { res } = await exercise({
        method: "GET",
        path: "/v1/topics",
        headers: { authorization: header },
      });
      expect(res.status, header).toBe(200);
    }
    const { res, before, after } = await exercise({
      method: "DELETE",
      path: `/v1/jobs/${encodeURIComponent("shop-b.orders~d")}`,
      headers: as(ADMIN),
    });
    expect(res.status).toBe(200);
    expect(after, "an accepted write changes the digest").not.toBe(before);
    // The admin's /metrics has series of foreign topics, so the scoped checks are not vacuous.
    const metrics = await target.send({ method: "GET", path: "/metrics", headers: as(ADMIN) });
    expect(metrics.text).toContain('topic="shop-b.push"');
    expect(metrics.text).toContain('topic="shop-b.orders"');
    const scoped = await target.send({ method: "GET", path: "/metrics", headers: as(SHOP) });
    expect(scoped.text).toContain(`topic="${OWN_TOPIC}"`);
  });

  it(
    "never accepts a token that is not ours: 401 unauthorized on every /v1 route and /metrics, nothing changed",
    async () => {
      await checkProperty(
        fc.asyncProperty(badAuthArb, v1RequestArb, async (auth, route) => {
          const headers: Record<string, string> = {};
          if (auth.header !== undefined) headers.authorization = auth.header;
          const request = toRequest(route, headers);
          const { res, before, after } = await exercise(request);
          const where = `${route.method} ${route.path} with ${JSON.stringify(auth.header)}`;
          expect(res.status, `${where}: ${res.text.slice(0, 300)}`).toBe(401);
          expect((res.json as { error: { code: string } }).error.code, where).toBe("unauthorized");
          expect(res.headers.get("www-authenticate"), where).toMatch(/^Bearer /);
          expect(after, `${where}: changed the dataset`).toBe(before);
          if (auth.token && auth.token.length >= 8) {
            expect(res.text.includes(auth.token), `${where}: echoes the token`).toBe(false);
          }
        }),
        tally,
      );
    },
    TIMEOUT,
  );
});

describe("fuzzing authentication beyond the bearer header", () => {
  it(
    "a dashboard cookie or an ouqiang path token that is not ours: sign-in page or code 1, nothing changed",
    async () => {
      await checkProperty(
        fc.asyncProperty(badPageRequestArb, async ({ kind, ...request }) => {
          const { res, before, after } = await exercise(request);
          const where = `${request.method} ${request.path}`;
          if (kind === "compat") {
            expect(res.status, where).toBe(200);
            expect(res.json, `${where}: ${res.text}`).toMatchObject({
              code: 1,
              data: null,
              error: "unauthorized",
            });
          } else if (request.method === "GET") {
            expect(res.status, `${where}: ${res.text.slice(0, 200)}`).toBe(303);
            expect(res.headers.get("location"), where).toBe("/dashboard/login");
          } else {
            expect(res.status, `${where}: ${res.text.slice(0, 200)}`).toBe(401);
          }
          expect(after, `${where}: changed the dataset`).toBe(before);
          expectNoForeignData(res, where);
          expect(res.text.includes(MARKER), where).toBe(false);
        }),
        tally,
      );
    },
    TIMEOUT,
  );

  it(
    "no bearer token opens the QStash callback: without a valid signature it is 401, nothing changed",
    async () => {
      await checkProperty(
        fc.asyncProperty(unsignedCallbackArb, async (request) => {
          const { res, before, after } = await exercise(request);
          const where = `${request.path} with ${request.headers.authorization}`;
          expect(res.status, `${where}: ${res.text}`).toBe(401);
          expect((res.json as { error: { code: string } }).error.code, where).toBe("unauthorized");
          expect(after, `${where}: changed the dataset`).toBe(before);
        }),
        tally,
        Math.max(1, Math.floor(RUNS / 3)),
      );
    },
    TIMEOUT,
  );
});

describe("fuzzing topic scopes (a token limited to shop-a.*)", () => {
  it(
    "answers 403 forbidden on every topic-addressed route for topics outside its scope",
    async () => {
      await checkProperty(
        fc.asyncProperty(foreignTopicRequestArb, async (route) => {
          const request = toRequest(route, as(SHOP));
          const { res, before, after } = await exercise(request);
          const where = `${route.method} ${route.path} ${request.body ?? ""}`.slice(0, 300);
          if (route.kind === "http") expectForbidden(res, where);
          else if (route.kind === "command") expectFailedEnvelopes(res, where, "forbidden");
          else {
            expect(res.status, where).toBe(200);
            const { results } = res.json as { results: { error?: { code: string } }[] };
            expect(
              results.map((r) => r.error?.code),
              where,
            ).toEqual(["forbidden"]);
          }
          expect(after, `${where}: changed the dataset`).toBe(before);
          expectNoForeignData(res, where);
        }),
        tally,
      );
    },
    TIMEOUT,
  );

  it(
    "answers 404 job_not_found on every id-addressed route for jobs of other topics, and leaks nothing",
    async () => {
      await checkProperty(
        fc.asyncProperty(foreignIdProbeArb, async (probe) => {
          const request = toRequest(probe, as(SHOP));
          const { res, before, after } = await exercise(request);
          const where = `${probe.method} ${probe.path} ${request.body ?? ""}`.slice(0, 300);
          switch (probe.expect) {
            case "403":
              expectForbidden(res, where);
              break;
            case "404":
              expectNotFound(res, where);
              break;
            case "envelopes":
              expectFailedEnvelopes(res, where, "job_not_found");
              break;
            case "exists": {
              // The id is taken by another topic: job_exists (409, or the command's envelope),
              // with or without `replace`; forbidden would do too. Never created or replaced.
              const code =
                probe.path === "/v1/command"
                  ? String((res.json as { success: boolean; error: string }).error).split(":")[0]
                  : (res.json as { error?: { code: string } }).error?.code;
              expect(["job_exists", "forbidden"], `${where}: ${res.text.slice(0, 300)}`).toContain(
                code,
              );
              break;
            }
            case "results404": {
              expect(res.status, `${where}: ${res.text.slice(0, 300)}`).toBe(200);
              const { results } = res.json as { results: { error?: { code: string } }[] };
              const sent = (probe.body as { jobs: unknown[] }).jobs;
              expect(
                results.map((r) => r.error?.code),
                where,
              ).toEqual(sent.map(() => "job_not_found"));
              break;
            }
            case "kick0":
              expect(res.status, where).toBe(200);
              expect(res.json, where).toEqual({ kicked: 0 });
              break;
            case "listOwn": {
              expect(res.status, where).toBe(200);
              const page = res.json as { jobs?: { topic: string }[]; topics?: { topic: string }[] };
              for (const item of [...(page.jobs ?? []), ...(page.topics ?? [])]) {
                expect(matchesScope(item.topic), `${where}: lists ${item.topic}`).toBe(true);
              }
              break;
            }
          }
          if (probe.expect !== "listOwn") {
            expect(after, `${where}: changed the dataset`).toBe(before);
          }
          expectNoForeignData(res, where);
        }),
        tally,
      );
    },
    TIMEOUT,
  );

  it(
    "through its dashboard session, ouqiang's API and /metrics: nothing of another topic, nothing changed there",
    async () => {
      const seen = new Set<string>();
      await checkProperty(
        fc.asyncProperty(scopedPageRequestArb, async ({ kind, ...request }) => {
          const { res, before, after } = await exercise(request);
          const where = `${request.method} ${request.path} ${request.body ?? ""}`.slice(0, 300);
          const named = namedTopic(request);
          const foreign = named !== undefined && !matchesScope(named);
          seen.add(`${kind}:${foreign ? "foreign" : "own"}:${res.status}`);
          expectNoForeignData(res, where);
          if (kind === "metrics") {
            expect(res.status, where).toBe(200);
            for (const [, topic] of res.text.matchAll(/topic="([^"]*)"/g)) {
              expect(matchesScope(topic as string), `${where}: a series of ${topic}`).toBe(true);
            }
            return;
          }
          if (kind === "dashboard") {
            expect(res.status, `${where}: ${res.text.slice(0, 200)}`).toBeLessThan(500);
            for (const [, topic] of res.text.matchAll(/data-topic="([^"]*)"/g)) {
              expect(matchesScope(topic as string), `${where}: lists ${topic}`).toBe(true);
            }
            if (foreign) {
              // A foreign topic's page or action: 403; a foreign job's page or action: 404.
              expect([403, 404], `${where}: ${res.status}`).toContain(res.status);
              expect(after, `${where}: changed the dataset`).toBe(before);
            }
            return;
          }
          // ouqiang: HTTP 200, an envelope; a foreign topic refused, a foreign job missing.
          expect(res.status, where).toBe(200);
          const envelope = res.json as { code: number; error?: string; data: unknown };
          if (foreign) {
            const endpoint = request.path.split("/").pop();
            if (endpoint === "push" || endpoint === "pop") {
              expect(envelope, `${where}: ${res.text}`).toMatchObject({
                code: 1,
                error: "forbidden",
              });
            } else {
              // finish, delete, get of a foreign id: reads as a job that is not there.
              expect(envelope.data, `${where}: ${res.text}`).toBeNull();
            }
            expect(after, `${where}: changed the dataset`).toBe(before);
          }
        }),
        tally,
      );
      if (RUNS >= 100) {
        for (const outcome of [
          "dashboard:foreign:403",
          "dashboard:foreign:404",
          "dashboard:own:200",
          "compat:foreign:200",
          "compat:own:200",
          "metrics:own:200",
        ]) {
          expect([...seen], `never produced ${outcome}`).toContain(outcome);
        }
      }
    },
    TIMEOUT,
  );

  it(
    "still works on its own topics: add, get, pop, touch, finish, stats, list, commands",
    async () => {
      await target.fresh();
      let n = 0;
      await checkProperty(
        fc.asyncProperty(
          ownTopicArb,
          validIdArb,
          fc.jsonValue({ maxDepth: 2 }),
          async (topic, rawId, extra) => {
            // A fresh id each run: earlier runs' jobs stay (this property does not re-seed).
            const id = `${rawId.slice(0, 100)}-${++n}`;
            const headers = as(SHOP);
            const enc = encodeURIComponent;
            const send = async (method: string, path: string, body?: unknown) => {
              const res = await target.send(toRequest({ method, path, body }, headers));
              expect(res.status, `${method} ${path}: ${res.text.slice(0, 300)}`).toBeLessThan(300);
              return res;
            };
            // Sent as text, spaced as a person would: it comes back byte for byte.
            const bodyText = `{ "own" : "own-marker-${n}" , "extra" : ${toJsonText(extra)} }`;
            const added = await send("POST", "/v1/jobs", { topic, id, body: new Raw(bodyText) });
            expect(added.status).toBe(201);
            const got = await send("GET", `/v1/jobs/${enc(id)}`);
            expect(got.text).toContain(`"body":${bodyText}`);
            const popped = await send("POST", `/v1/topics/${enc(topic)}/pop`, { count: 100 });
            const jobs = (popped.json as { jobs: { id: string; receipt: string }[] }).jobs;
            const mine = jobs.find((job) => job.id === id);
            expect(mine, `pop of ${topic} did not hand out ${id}`).toBeDefined();
            const receipt = (mine as { receipt: string }).receipt;
            await send("POST", `/v1/jobs/${enc(id)}/touch`, { receipt });
            const command = await send("POST", "/v1/command", { command: "get", id });
            expect(command.json).toMatchObject({ success: true, value: { id, state: "reserved" } });
            await send("POST", `/v1/jobs/${enc(id)}/finish`, { receipt });
            const stats = await send("GET", `/v1/topics/${enc(topic)}`);
            expect(stats.json).toMatchObject({ topic });
            await send("GET", `/v1/topics/${enc(topic)}/jobs?state=reserved`);
            await send("PUT", `/v1/topics/${enc(topic)}`, { ttr: 30 });
            for (const own of OWN_IDS) await send("GET", `/v1/jobs/${enc(own)}`);
            // Its own push topic: config changed, the secret kept and masked, the stats there.
            const patched = await send("PATCH", `/v1/topics/${OWN_PUSH_TOPIC}`, { paused: true });
            expect(
              (patched.json as { config: { push: { secret: string } } }).config.push.secret,
            ).toBe(`…${PUSH_SECRETS[2]?.slice(-4)}`);
            const pushStats = await send("GET", `/v1/topics/${OWN_PUSH_TOPIC}`);
            expect(pushStats.json).toMatchObject({ push: { delivered: 0, failed: 0 } });
            const listed = await send("GET", `/v1/topics/${OWN_TOPIC}/jobs?state=dead`);
            expect((listed.json as { jobs: { id: string }[] }).jobs.map((j) => j.id)).toEqual([
              "own~x",
            ]);
          },
        ),
        tally,
      );
      target.observed("changed"); // re-seed before anything else runs
    },
    TIMEOUT,
  );
});

/**
 * The topic a request acts on, if any: a dashboard topic page or action (delete and bury act on
 * the job's topic, the others on the form's topic), a job page, an ouqiang push, the first topic
 * of an ouqiang pop (it tries them in order), an ouqiang finish, delete or get's job. (The
 * dashboard's find only redirects: it names nothing it acts on.)
 */
function namedTopic(request: FuzzRequest): string | undefined {
  const url = new URL(`http://localhost${request.path}`);
  const body = typeof request.body === "string" ? request.body : "";
  const page = /^\/dashboard\/topics\/([^/]+)$/.exec(url.pathname);
  if (page?.[1]) return decodeURIComponent(page[1]);
  const job = /^\/dashboard\/jobs\/([^/]+)$/.exec(url.pathname);
  if (job?.[1]) return jobTopic(decodeURIComponent(job[1]));
  if (url.pathname === "/dashboard/actions") {
    const form = new URLSearchParams(body);
    const byJob = ["delete", "bury"].includes(form.get("action") ?? "");
    return byJob ? jobTopic(form.get("id")) : (form.get("topic") ?? undefined);
  }
  if (url.pathname.startsWith("/compat/ouqiang/")) {
    let parsed: { topic?: string; id?: string } = {};
    try {
      parsed = JSON.parse(body);
    } catch {}
    if (parsed.topic !== undefined) return parsed.topic.split(",")[0];
    return jobTopic(parsed.id);
  }
  return undefined;
}

/** The topic of a seeded job id ("<topic>~d", "own~q", ...); undefined for others. */
function jobTopic(id: string | null | undefined): string | undefined {
  if (!id) return undefined;
  if (FOREIGN_IDS.includes(id)) return id.slice(0, id.lastIndexOf("~"));
  if (OWN_IDS.includes(id)) return OWN_TOPIC;
  return undefined;
}
