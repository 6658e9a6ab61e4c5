// Direct push delivery end to end: real receivers, real Redis, the real clock. Signatures are
// checked with node:crypto's HMAC, not with delayq's own verifier.
import { createHmac } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { DelayqError, tick } from "../../src/index";
import { createScriptRunner } from "../../src/redis/runner";
import type { Run } from "../../src/run";
import { pushStep } from "../../src/scheduler/push";
import { type PushApp, type Receiver, startReceiver, testPushApp } from "../support/push";
import { slotOf } from "../support/queue";

const SECRET = "test-secret-0123456789";
let receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

async function setup(push: Record<string, unknown> = {}, topic = "p") {
  const receiver = await startReceiver();
  receivers.push(receiver);
  const app = testPushApp();
  const put = await app.call("PUT", `/v1/topics/${topic}`, {
    body: { push: { url: `${receiver.url}/hook`, secret: SECRET, ...push }, ttr: 30 },
  });
  expect(put.status).toBe(200);
  return { ...app, receiver };
}

/** The signature header as node:crypto computes it. */
function expectSigned(header: string | string[] | undefined, body: string, secret = SECRET) {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(header));
  expect(match, `signature header ${header}`).not.toBeNull();
  const [, t, v1] = match as RegExpExecArray;
  expect(v1).toBe(createHmac("sha256", secret).update(`${t}.${body}`).digest("hex"));
  expect(Math.abs(Number(t) - Date.now() / 1000)).toBeLessThan(120);
}

const settled = (app: PushApp) => app.settled();

describe("direct delivery", () => {
  it("delivers jobs that waited in a pulled topic as soon as it is switched to push, not at the next tick", async () => {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const app = testPushApp();
    const add = await app.call("POST", "/v1/jobs", { body: { topic: "late", id: "w1", body: 1 } });
    expect(add.status).toBe(201);
    const put = await app.call("PUT", "/v1/topics/late", {
      body: { push: { url: `${receiver.url}/hook`, secret: SECRET } },
    });
    expect(put.status).toBe(200);
    // No tick runs here: the PUT's own background work claims and delivers the waiting job.
    await settled(app);
    expect(receiver.received.map((r) => JSON.parse(r.body).id)).toEqual(["w1"]);
  });

  it("POSTs a due job at its due time, signed, with the documented body and headers", async () => {
    const app = await setup({ headers: { "X-Api-Key": "k1" } });
    const body = '{"tx":4200001234567890123,"note":"支付"}';
    const res = await app.app.request("/v1/jobs", {
      method: "POST",
      headers: { authorization: "Bearer admin-token", "content-type": "application/json" },
      body: `{"topic":"p","id":"j1","delay":0.4,"body":${body}}`,
    });
    const { job } = (await res.json()) as { job: { dueAt: number } };
    // The add itself delivers it (due within 25 s): no tick is needed.
    await settled(app);
    const [got] = await app.receiver.waitFor(1);
    expect(got?.at).toBeGreaterThanOrEqual(job.dueAt);
    expect(got?.at).toBeLessThan(job.dueAt + 1000);
    expect(got?.path).toBe("/hook");
    expect(got?.body).toBe(
      `{"id":"j1","topic":"p","body":${body},"attempt":1,"dueAt":${job.dueAt}}`,
    );
    expect(got?.headers["content-type"]).toBe("application/json");
    expect(got?.headers["delayq-id"]).toBe("j1");
    expect(got?.headers["delayq-topic"]).toBe("p");
    expect(got?.headers["delayq-attempt"]).toBe("1");
    expect(got?.headers["x-api-key"]).toBe("k1");
    expectSigned(got?.headers["delayq-signature"], got?.body as string);
    const after = await app.call("GET", "/v1/jobs/j1");
    expect(after.json.job).toMatchObject({ state: "finished", lastDelivery: { status: 204 } });
    const stats = await app.call("GET", "/v1/topics/p");
    expect(stats.json.counts).toMatchObject({ reserved: 0, ready: 0, delayed: 0 });
  });

  it.each([
    ["a 2xx with an empty body", { status: 200 }, { state: "finished" }],
    ["a 2xx that is not JSON", { status: 202, body: "ok" }, { state: "finished" }],
    ['{"status":"done"}', { status: 200, body: '{"status":"done"}' }, { state: "finished" }],
    [
      '{"status":"bury"}',
      { status: 200, body: '{"status":"bury"}' },
      { state: "dead", deadReason: "buried" },
    ],
    [
      '{"status":"retry","delay":60}',
      { status: 200, body: '{"status":"retry","delay":60}' },
      { state: "delayed", wait: 60_000 },
    ],
    [
      '{"status":"retry","delay":172800} (capped at a day)',
      { status: 200, body: '{"status":"retry","delay":172800}' },
      { state: "delayed", wait: 86_400_000 },
    ],
    [
      '{"status":"retry","delay":"30"} (not a number: the backoff step)',
      { status: 200, body: '{"status":"retry","delay":"30"}' },
      { state: "delayed", wait: 30_000 },
    ],
    [
      '{"status":"retry","delay":null} (the backoff step)',
      { status: 200, body: '{"status":"retry","delay":null}' },
      { state: "delayed", wait: 30_000 },
    ],
    [
      '{"status":"retry","delay":-5} (the backoff step)',
      { status: 200, body: '{"status":"retry","delay":-5}' },
      { state: "delayed", wait: 30_000 },
    ],
    [
      '{"status":"retry"} (the backoff step)',
      { status: 200, body: '{"status":"retry"}' },
      { state: "delayed", wait: 30_000 },
    ],
    ["a 500 (the backoff step)", { status: 500 }, { state: "delayed", wait: 30_000, failed: true }],
    [
      "a 503 with Retry-After: 120",
      { status: 503, headers: { "retry-after": "120" } },
      { state: "delayed", wait: 120_000, failed: true },
    ],
    [
      "a 429 with Retry-After of two days (capped at one)",
      { status: 429, headers: { "retry-after": "172800" } },
      { state: "delayed", wait: 86_400_000, failed: true },
    ],
  ])("settles %s", async (_what, answer, expected) => {
    const app = await setup({}, "s");
    await app.call("PUT", "/v1/topics/s", {
      body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET }, backoff: [30] },
    });
    app.receiver.answer(() => answer);
    const started = Date.now();
    await app.call("POST", "/v1/jobs", { body: { topic: "s", id: "x", body: 1 } });
    await settled(app);
    const { job } = (await app.call("GET", "/v1/jobs/x")).json;
    expect(job.state).toBe(expected.state);
    if ("deadReason" in expected) expect(job.deadReason).toBe(expected.deadReason);
    if ("wait" in expected) {
      expect(job.dueAt - started).toBeGreaterThanOrEqual((expected.wait as number) - 50);
      expect(job.dueAt - Date.now()).toBeLessThanOrEqual(expected.wait as number);
    }
    expect(job.lastDelivery.status).toBe(answer.status);
    expect(job.attempts).toBe(1);
    const stats = (await app.call("GET", "/v1/topics/s")).json;
    const failed = "failed" in expected && expected.failed;
    expect(stats.push).toEqual(failed ? { delivered: 0, failed: 1 } : { delivered: 1, failed: 0 });
  });

  it("sends a job its receiver gave back due soon again from the same run, not at the next tick", async () => {
    const app = await setup();
    let calls = 0;
    app.receiver.answer(() =>
      ++calls === 1 ? { status: 200, body: '{"status":"retry","delay":1}' } : { status: 204 },
    );
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "again" } });
    await settled(app);
    const [first, second] = await app.receiver.waitFor(2);
    expect(JSON.parse(second?.body as string)).toMatchObject({ id: "again", attempt: 2 });
    expect((second?.at as number) - (first?.at as number)).toBeGreaterThanOrEqual(1000);
    expect((await app.call("GET", "/v1/jobs/again")).json.job).toMatchObject({
      state: "finished",
      attempts: 2,
    });
  });

  it("counts a receiver that does not answer in time, or drops the connection, as a failed attempt", async () => {
    const app = await setup({ timeout: 1 });
    // A backoff step past the direct window: the failed attempt waits instead of going out again.
    await app.call("PATCH", "/v1/topics/p", { body: { backoff: [60] } });
    app.receiver.answer((request) => (request.headers["delayq-id"] === "hang" ? "hang" : "reset"));
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "hang" } });
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "reset" } });
    await settled(app);
    const hang = (await app.call("GET", "/v1/jobs/hang")).json.job;
    expect(hang).toMatchObject({ state: "delayed", attempts: 1 });
    expect(hang.lastDelivery).toMatchObject({ status: 0, error: "no answer within 1 s" });
    const reset = (await app.call("GET", "/v1/jobs/reset")).json.job;
    expect(reset.lastDelivery.status).toBe(0);
    expect(reset.lastDelivery.error).toMatch(/could not reach the receiver/);
  });

  it("sends one value per header name of a config stored before names differing in case were refused", async () => {
    const app = await setup({ headers: { "X-Tenant": "a" } });
    const stored = JSON.parse((await app.redis.get(app.keys.config("p"))) as string);
    stored.push.headers = { "X-Tenant": "a", "x-tenant": "b" };
    await app.redis.set(app.keys.config("p"), JSON.stringify(stored));
    await app.queue.add({ topic: "p", id: "h1" });
    await app.push();
    const [got] = await app.receiver.waitFor(1);
    expect(got?.headers["x-tenant"]).toBe("b");
  });

  it("tells failureUrl, signed, from the run in which the job died, not a tick later", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup();
    await app.call("PUT", "/v1/topics/p", {
      body: {
        maxAttempts: 1,
        push: {
          url: `${app.receiver.url}/hook`,
          secret: SECRET,
          failureUrl: `${failures.url}/dead`,
        },
      },
    });
    app.receiver.answer(() => ({ status: 500 }));
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "doomed", body: { n: 7 } } });
    // The add's own run delivers the job, which dies, and tells failureUrl: no tick runs here.
    await settled(app);
    expect((await app.call("GET", "/v1/jobs/doomed")).json.job).toMatchObject({
      state: "dead",
      deadReason: "attempts",
    });
    const [notice] = await failures.waitFor(1, 100);
    expect(notice?.body).toBe(
      '{"id":"doomed","topic":"p","body":{"n":7},"attempts":1,"reason":"attempts","lastStatus":500}',
    );
    expectSigned(notice?.headers["delayq-signature"], notice?.body as string);
    // Sent once: the queue of notices is empty now.
    expect(await app.notices()).toBe(0);
  });

  it("tells failureUrl of every job that died in one run, round after round, not a round a tick", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup({ failureUrl: failures.url });
    app.receiver.answer(() => ({ status: 500 }));
    // More than two rounds' worth (50 each) of deaths in one run, all before it sends any.
    const ids = Array.from({ length: 120 }, (_, n) => `burst${n}`);
    await app.queue.addBatch(ids.map((id) => ({ topic: "p", id, maxAttempts: 1 })));
    const run = app.newRun();
    const claimed = await app.push({ run });
    expect(claimed).toMatchObject({ claimed: 120, failed: 120 });
    expect(new Set(failures.received.map((r) => JSON.parse(r.body).id))).toEqual(new Set(ids));
    // And a backlog queued by runs cut off before telling: one run sends it all, round after
    // round, while its budget lasts.
    const more = Array.from({ length: 120 }, (_, n) => `queued${n}`);
    for (const id of more) await buryOne(app, "p", id);
    expect(await app.notices()).toBe(120);
    const told = failures.received.map((r) => JSON.parse(r.body).id);
    expect(new Set(told.slice(120))).toEqual(new Set(more));
  });

  it("keeps a notice for later when failureUrl is down", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    failures.answer(() => ({ status: 502 }));
    const app = await setup();
    await app.call("PUT", "/v1/topics/p", {
      body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: failures.url } },
    });
    await buryOne(app, "p", "n1");
    expect(await app.notices()).toBe(0);
    failures.answer(() => ({ status: 200 }));
    // Tried again once its minute has passed, not before.
    expect(await app.notices()).toBe(0);
    expect(await app.notices(undefined, { aheadMs: 61_000 })).toBe(1);
    expect(failures.received).toHaveLength(2);
  });

  it("retries a failing notice each minute beside new ones, neither starving, and gives it up after 3 days", async () => {
    const failing = await startReceiver();
    const working = await startReceiver();
    receivers.push(failing, working);
    failing.answer(() => ({ status: 503 }));
    const app = await setup({}, "a");
    const configure = (topic: string, failureUrl: string) =>
      app.call("PUT", `/v1/topics/${topic}`, {
        body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl } },
      });
    await configure("a", `${failing.url}/a`);
    await configure("b", `${working.url}/b`);
    const kill = (topic: string, id: string) => buryOne(app, topic, id);
    // Sent at once, so in any order.
    const sentTo = (receiver: Receiver) =>
      receiver.received.map((r) => JSON.parse(r.body).id as string).sort();
    for (const id of ["a1", "a2", "a3"]) await kill("a", id);
    expect(await app.notices(50)).toBe(0);
    expect(sentTo(failing)).toEqual(["a1", "a2", "a3"]);
    // b's job dies after: its notice goes at once, a's wait out their minute.
    await kill("b", "b1");
    expect(await app.notices(50)).toBe(1);
    expect(sentTo(working)).toEqual(["b1"]);
    expect(failing.received).toHaveLength(3);
    // Only retries wait: the ticks' sentinel waits with them, not every tick sooner.
    const sentinel = Number(await app.redis.zscore(app.keys.schedule, "~notices"));
    expect(sentinel).toBeGreaterThan(Date.now() + 50_000);
    // A minute on, with more new notices than room: b has waited longest and takes its part
    // (3 of 5) first, then a's due retries the rest.
    for (const id of ["b2", "b3", "b4", "b5", "b6"]) await kill("b", id);
    expect(await app.notices(5, { aheadMs: 61_000 })).toBe(3);
    expect(sentTo(working)).toEqual(["b1", "b2", "b3", "b4"]);
    // Two of a's three retries (the first two that failed, in whatever order that was).
    expect(sentTo(failing)).toHaveLength(5);
    expect(new Set(sentTo(failing))).toEqual(new Set(["a1", "a2", "a3"]));
    // Three days after their first failure the failing ones are dropped, logged, not sent.
    expect(await app.notices(50, { aheadMs: 3 * 24 * 3600 * 1000 })).toBe(2);
    expect(sentTo(working)).toEqual(["b1", "b2", "b3", "b4", "b5", "b6"]);
    expect(failing.received).toHaveLength(5);
    const expired = app.logs.filter((entry) => entry.event === "notice_expired");
    expect(expired.map((entry) => entry.id).sort()).toEqual(["a1", "a2", "a3"]);
    for (const topic of ["a", "b"]) {
      expect(await app.redis.llen(app.keys.topicNoticeRetries(topic))).toBe(0);
      expect(await app.redis.llen(app.keys.topicNotices(topic))).toBe(0);
    }
    expect(await app.redis.zcard(app.keys.noticing)).toBe(0);
    expect(await app.redis.zscore(app.keys.schedule, "~notices")).toBeNull();
    // The jobs stay dead, listable and kickable.
    expect((await app.call("GET", "/v1/jobs/a1")).json.job.state).toBe("dead");
  });

  it("shares each round between topics: one topic's mass of deaths or failing retries does not hold back another's notice", async () => {
    const busy = await startReceiver();
    const quiet = await startReceiver();
    receivers.push(busy, quiet);
    busy.answer(() => ({ status: 503 }));
    const app = await setup({}, "mass");
    for (const [topic, receiver] of [
      ["mass", busy],
      ["calm", quiet],
    ] as const) {
      await app.call("PUT", `/v1/topics/${topic}`, {
        body: {
          push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: receiver.url },
        },
      });
    }
    const kill = (topic: string, id: string) => buryOne(app, topic, id);
    // 30 of mass's jobs die, then one of calm's: a round of 10 sends calm's too.
    for (let i = 0; i < 30; i++) await kill("mass", `m${i}`);
    await kill("calm", "c1");
    expect(await app.notices(10)).toBe(1);
    expect(quiet.received.map((r) => JSON.parse(r.body).id)).toEqual(["c1"]);
    expect(busy.received).toHaveLength(9);
    // The next round goes on with mass's new notices, not its retries (due in a minute).
    expect(await app.notices(10)).toBe(0);
    expect(busy.received).toHaveLength(19);
    // A minute on, mass has 19 retries due and 11 new notices; calm's next notice failed once
    // too. calm's retry is sent in the first round, beside mass's.
    await app.call("PUT", "/v1/topics/calm", {
      body: {
        push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: `${busy.url}/calm` },
      },
    });
    await kill("calm", "c2");
    expect(await app.notices(10)).toBe(0);
    const calmTries = () => busy.received.filter((r) => r.path === "/calm").length;
    expect(calmTries()).toBe(1);
    await app.call("PUT", "/v1/topics/calm", {
      body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: quiet.url } },
    });
    expect(await app.notices(10, { aheadMs: 61_000 })).toBe(1);
    expect(quiet.received.map((r) => JSON.parse(r.body).id)).toEqual(["c1", "c2"]);
  });

  it("brings the topics a round served back in the order it served them, not by name", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup();
    // Six topics whose jobs die latest-named first: t5 has waited longest, t0 least.
    const topics = ["t5", "t4", "t3", "t2", "t1", "t0"];
    for (const topic of topics) {
      await app.call("PUT", `/v1/topics/${topic}`, {
        body: {
          push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: failures.url },
        },
      });
    }
    for (const topic of topics) {
      for (const n of [1, 2]) await buryOne(app, topic, `${topic}-${n}`);
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    const sentOf = () =>
      Object.fromEntries(
        topics.map((t) => [
          t,
          failures.received.filter((r) => JSON.parse(r.body).topic === t).length,
        ]),
      );
    // Room for five: t5-t1 one each. Then t0, which waited, and t5-t2 in the order served.
    expect(await app.notices(5)).toBe(5);
    expect(await app.notices(5)).toBe(5);
    expect(sentOf()).toEqual({ t5: 2, t4: 2, t3: 2, t2: 2, t1: 1, t0: 1 });
  });

  it("drops the notices of a topic without failureUrl, taking none of a round's room", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup({}, "quiet");
    await app.call("PUT", "/v1/topics/loud", {
      body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: failures.url } },
    });
    const kill = (topic: string, id: string) => buryOne(app, topic, id);
    for (let i = 0; i < 30; i++) await kill("quiet", `q${i}`);
    for (let i = 0; i < 12; i++) await kill("loud", `l${i}`);
    expect(await app.notices(10)).toBe(10);
    expect(await app.redis.exists(app.keys.topicNotices("quiet"))).toBe(0);
    expect(await app.redis.zscore(app.keys.noticing, "quiet")).toBeNull();
  });

  it("sends a topic's new notices and due retries in the order they could first be sent", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    failures.answer(() => ({ status: 503 }));
    const app = await setup();
    await app.call("PUT", "/v1/topics/p", {
      body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: failures.url } },
    });
    const kill = (id: string) => buryOne(app, "p", id);
    const ids = () => failures.received.map((r) => JSON.parse(r.body).id as string);
    // r1-r3 failed two minutes ago, so are due again since a minute (written as renotice would
    // have: the test's clock cannot go back). n1-n4 die now, after that.
    for (const id of ["r1", "r2", "r3"]) await kill(id);
    await app.redis.del(app.keys.topicNotices("p"));
    const now = Date.now();
    for (const id of ["r1", "r2", "r3"]) {
      await app.redis.rpush(
        app.keys.topicNoticeRetries("p"),
        `${now - 60_000}|${now - 120_000}|${id}`,
      );
    }
    await app.redis.zadd(app.keys.noticing, { score: now - 60_000, member: "p" });
    for (const id of ["n1", "n2", "n3", "n4"]) await kill(id);
    expect(await app.notices(4)).toBe(0);
    expect(ids().sort()).toEqual(["n1", "r1", "r2", "r3"]);
    // n2-n4 were queued before any retry is due again (n1 and the r's in a minute).
    expect(await app.notices(3, { aheadMs: 61_000 })).toBe(0);
    expect(ids().slice(4).sort()).toEqual(["n2", "n3", "n4"]);
  });

  it("keeps a topic's turn while retries are left beyond a round's part", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup({ failureUrl: failures.url });
    const ids = ["r1", "r2", "r3", "r4"];
    for (const id of ids) await buryOne(app, "p", id);
    // All four failed a minute ago and are due again (written as renotice would have).
    await app.redis.del(app.keys.topicNotices("p"));
    const now = Date.now();
    for (const id of ids) {
      await app.redis.rpush(app.keys.topicNoticeRetries("p"), `${now - 1}|${now - 60_000}|${id}`);
    }
    await app.redis.zadd(app.keys.noticing, { score: now - 1, member: "p" });
    expect(await app.notices(2)).toBe(2);
    expect(await app.notices(2)).toBe(2);
    expect(failures.received.map((r) => JSON.parse(r.body).id).sort()).toEqual(ids);
  });

  it("sends the notices an earlier version queued in one list for all topics", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup();
    await app.call("PUT", "/v1/topics/p", {
      body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: failures.url } },
    });
    for (const id of ["old1", "old2", "gone"]) {
      await buryOne(app, "p", id);
    }
    // Queued as the version before per-topic notices did: one list of ids, one of retries.
    await app.redis.del(app.keys.topicNotices("p"));
    await app.redis.zrem(app.keys.noticing, "p");
    const base = app.keys.base;
    await app.redis.rpush(`${base}push:notices`, "old1", "gone");
    await app.redis.rpush(`${base}push:notices:retry`, `${Date.now() - 1000}|${Date.now()}|old2`);
    await app.redis.del(app.keys.job("gone"));
    expect(await app.notices(50)).toBe(2);
    expect(failures.received.map((r) => JSON.parse(r.body).id).sort()).toEqual(["old1", "old2"]);
    expect(await app.redis.exists(`${base}push:notices`, `${base}push:notices:retry`)).toBe(0);
    expect(await app.redis.zscore(app.keys.schedule, "~notices")).toBeNull();
  });
});

/**
 * Adds a push job, claims it and buries it: it dies, and its failure notice is queued. The work
 * the settle returns (telling failureUrl at once) is left undone, as by a run cut off there.
 */
async function buryOne(app: PushApp, topic: string, id: string) {
  const { receipt } = await claimOne(app, topic, id);
  const bury = { settlement: { outcome: "bury" as const }, status: 200 };
  const { work } = await app.dispatcher.settle(app.newRun(), { id, receipt, attempt: bury });
  expect(work).toEqual([{ kind: "notices" }]);
}

/** Adds a push job due now and claims it with the claim script itself (no delivery). */
async function claimOne(app: PushApp, topic: string, id: string, ttrSeconds = 30) {
  const runner = createScriptRunner(app.redis, app.keys.base.slice(1, -2), 3_600_000);
  await app.queue.add({ topic, id, ttr: ttrSeconds });
  await settled(app); // the add's own delivery attempt, if any
  const now = Date.now();
  const claimed = await runner.run("claim", now, [now, 10, 10, "t", topic, 0]);
  const job = await app.queue.get(id);
  return { claimed, receipt: job.receipt as string };
}

describe("the push step", () => {
  /** A tick's push step in a run of its own; answers once the run's deferred work is done. */
  const step = async (app: PushApp, run: Run = app.newRun()) => {
    await pushStep(app.dispatcher).run({ run, until: Date.now() + 20_000, reports: {} });
    await run.settled();
  };

  it("claims before it sends failure notices: a failureUrl that hangs holds up no delivery", async () => {
    const slow = await startReceiver();
    receivers.push(slow);
    slow.answer(() => "hang");
    const app = await setup();
    await app.call("PUT", "/v1/topics/slow", {
      body: {
        push: { url: `${app.receiver.url}/slow`, secret: SECRET, failureUrl: slow.url, timeout: 2 },
      },
    });
    await buryOne(app, "slow", "dead");
    await app.queue.add({ topic: "p", id: "due" });
    await step(app);
    const [notice] = await slow.waitFor(1);
    const delivery = app.receiver.received.find((r) => r.headers["delayq-id"] === "due");
    // Sent while the notice's request was open: before, the claims waited for its timeout.
    expect(delivery, "the due job was delivered").toBeDefined();
    expect((delivery?.at ?? 0) - (notice?.at ?? 0)).toBeLessThan(2000);
  });

  it("keeps sending notices beside a round that waits, up to a cap of open requests, and counts a round over after 70 s", async () => {
    const slow = await startReceiver();
    receivers.push(slow);
    slow.answer(() => "hang");
    const app = await setup({ failureUrl: slow.url, timeout: 2 });
    const kill = (id: string) => buryOne(app, "p", id);
    /** A tick of `dispatcher`'s push step, its clock `aheadMs` ahead; answers its run. */
    const tick = async (dispatcher = app.dispatcher, aheadMs = 0) => {
      const run = app.runAt(aheadMs);
      await pushStep(dispatcher).run({ run, until: Date.now() + 20_000, reports: {} });
      return run;
    };
    const ids = () => slow.received.map((r) => JSON.parse(r.body).id);
    // The default cap: a second round goes while the first waits on its hanging receiver.
    await kill("d1");
    const first = await tick();
    await slow.waitFor(1);
    await kill("d2");
    await tick();
    await slow.waitFor(2);
    // A cap of one open notice (per process: the dispatcher's): no round while one waits, until
    // that one is 70 s old (a Worker may have cut it off).
    const capped = app.otherDispatcher({ maxOpenNotices: 1 });
    await kill("d3");
    const held = await tick(capped);
    await slow.waitFor(3);
    await kill("d4");
    await (await tick(capped)).settled();
    expect(ids()).toEqual(["d1", "d2", "d3"]);
    await tick(capped, 70_000);
    await slow.waitFor(4);
    expect(ids()).toEqual(["d1", "d2", "d3", "d4"]);
    await Promise.all([first.settled(), held.settled()]);
  });

  it("sends notices while a backlog of deliveries would spend the whole budget", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup({ failureUrl: failures.url });
    await buryOne(app, "p", "dead1");
    for (let i = 0; i < 30; i++) await app.queue.add({ topic: "p", id: `due${i}` });
    // A free plan's 45 subrequests: the claims alone would take 43 of them.
    await step(app, app.newRun(45));
    expect(failures.received.map((r) => JSON.parse(r.body).id)).toEqual(["dead1"]);
    expect(app.receiver.received.length).toBeGreaterThan(0);
  });

  it("reads notice entries of earlier formats instead of failing every round, and claims whatever a round does", async () => {
    const failures = await startReceiver();
    receivers.push(failures);
    const app = await setup();
    await app.call("PUT", "/v1/topics/p", {
      body: { push: { url: `${app.receiver.url}/hook`, secret: SECRET, failureUrl: failures.url } },
    });
    for (const id of ["bare", "two"]) {
      await buryOne(app, "p", id);
    }
    // A bare id (05e3be0's new notices), a retry of 061d713's "<first failure>|<id>", and junk.
    await app.redis.del(app.keys.topicNotices("p"));
    await app.redis.rpush(app.keys.topicNotices("p"), "bare", "|");
    await app.redis.rpush(`${app.keys.base}push:notices:retry`, `${Date.now() - 90_000}|two`);
    await app.redis.rpush(app.keys.topicNoticeRetries("p"), "x|y|");
    await app.queue.add({ topic: "p", id: "due" });
    await step(app);
    expect(app.receiver.received.map((r) => r.headers["delayq-id"])).toContain("due");
    expect(failures.received.map((r) => JSON.parse(r.body).id).sort()).toEqual(["bare", "two"]);
    expect(app.logs.filter((entry) => entry.event === "notices_failed")).toEqual([]);
    expect(await app.redis.llen(app.keys.topicNotices("p"))).toBe(0);
    expect(await app.redis.llen(app.keys.topicNoticeRetries("p"))).toBe(0);
  });
});

describe("claiming", () => {
  it("never delivers before the due time, and each job once when several runs claim at once", async () => {
    const app = await setup();
    const now = Date.now();
    const ids = Array.from({ length: 20 }, (_, n) => `c${n}`);
    // Added through the library: no prompt delivery, so the runs below are the only claimers.
    await app.queue.addBatch(ids.map((id, n) => ({ topic: "p", id, runAt: now + 800 + n * 20 })));
    const runs = await Promise.all([1, 2, 3].map(() => app.push()));
    expect(runs.reduce((sum, run) => sum + run.claimed, 0)).toBe(20);
    const got = await app.receiver.waitFor(20);
    expect(new Set(got.map((r) => r.headers["delayq-id"])).size).toBe(20);
    for (const request of got) {
      const { dueAt } = JSON.parse(request.body) as { dueAt: number };
      expect(request.at).toBeGreaterThanOrEqual(dueAt);
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(app.receiver.received).toHaveLength(20);
  });

  it("claims a job that waited in a slot list as early as a job that did not: 65 s ahead", async () => {
    // A job due 10 minutes ahead waits in a slot list. The ~push sentinel brings a tick 65 s
    // before it is due, whose claim looks 65 s ahead: the list must be open by then (its slot
    // opens 90 s before it starts), or the job would be claimed a tick late.
    const app = await setup();
    const due = slotOf(Date.now() + 10 * 60_000); // a slot's start: its list opens latest
    await app.queue.add({ topic: "p", id: "far", runAt: due });
    expect(await app.redis.lrange(`${app.keys.base}t:p:slots:${due}`, 0, -1)).toEqual(["far"]);
    expect(Number(await app.redis.zscore(`${app.keys.base}schedule`, "~push"))).toBe(due - 65_000);
    const runner = createScriptRunner(app.redis, app.keys.base.slice(1, -2), 3_600_000);
    const at = due - 65_000;
    await runner.run("claim", at, [at + 65_000, 10, 10, "t", "", 0]);
    expect(await app.redis.zscore(app.keys.reserved("p"), "far")).not.toBeNull();
    expect(await app.redis.exists(`${app.keys.base}t:p:slots:${due}`)).toBe(0);
  });

  it("delivers nothing while its topic is paused, and what waited as soon as it resumes", async () => {
    // docs, Decisions: paused topics hand out nothing. The add's own run, a tick's run and a
    // run for the topic alone all leave its jobs waiting.
    const app = await setup();
    expect((await app.call("PATCH", "/v1/topics/p", { body: { paused: true } })).status).toBe(200);
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "held", body: 1 } });
    await settled(app);
    expect((await app.push()).claimed).toBe(0);
    expect((await app.push({ topic: "p" })).claimed).toBe(0);
    await new Promise((r) => setTimeout(r, 300));
    expect(app.receiver.received).toHaveLength(0);
    expect((await app.queue.get("held")).state).toBe("ready");
    // Resuming makes what waited claimable, and the PATCH's own run delivers it.
    expect((await app.call("PATCH", "/v1/topics/p", { body: { paused: false } })).status).toBe(200);
    await settled(app);
    const [got] = await app.receiver.waitFor(1);
    expect(got?.headers["delayq-id"]).toBe("held");
  });

  it("sends a claimed job about a second late, not a TTR late, when Redis fails the look before sending", async () => {
    // Redis down for a moment at the due time: the look (stillHeld) fails once, then answers.
    let failures = 1;
    const receiver = await startReceiver();
    receivers.push(receiver);
    const app = testPushApp({
      dispatcherRedis: (redis) => ({
        ...redis,
        createScript(script) {
          const inner = redis.createScript(script);
          if (!script.includes("stillHeld:")) return inner;
          return {
            exec: (keys, args) =>
              failures-- > 0
                ? Promise.reject(new DelayqError("redis_unavailable", "Redis is unavailable"))
                : inner.exec(keys, args),
          };
        },
      }),
    });
    await app.call("PUT", "/v1/topics/blip", {
      body: { push: { url: `${receiver.url}/hook`, secret: SECRET }, ttr: 30 },
    });
    const add = await app.call("POST", "/v1/jobs", {
      body: { topic: "blip", id: "b1", delay: 0.3, body: 1 },
    });
    const { dueAt } = add.json.job as { dueAt: number };
    await settled(app);
    const [got] = await receiver.waitFor(1);
    expect(failures).toBe(-1);
    expect(got?.headers["delayq-attempt"]).toBe("1");
    expect(got?.at).toBeGreaterThanOrEqual(dueAt + 1000);
    expect(got?.at).toBeLessThan(dueAt + 5000);
    expect(app.logs.map((entry) => entry.event)).toContain("push_check_retried");
  });

  it("brings a job back when the run that claimed it died: the lease runs out, a tick takes it back", async () => {
    const app = await setup();
    const { claimed, receipt } = await claimOne(app, "p", "orphan", 1);
    expect(claimed[0]?.records).toHaveLength(1);
    expect((await app.queue.get("orphan")).state).toBe("reserved");
    await new Promise((r) => setTimeout(r, 1100));
    await tick(app.queue);
    expect((await app.queue.get("orphan")).state).toBe("ready");
    const run = await app.push();
    expect(run.claimed).toBe(1);
    const [got] = await app.receiver.waitFor(1);
    expect(got?.headers["delayq-attempt"]).toBe("2");
    // The first reservation's late answer changes nothing.
    const late = await app.settle("orphan", receipt, {
      settlement: { outcome: "bury" },
      status: 200,
    });
    expect(late).toBe(false);
    expect((await app.queue.get("orphan")).state).toBe("finished");
  });

  it("settles each reservation once: a duplicate answer is ignored", async () => {
    const app = await setup();
    const { receipt } = await claimOne(app, "p", "dup");
    const done = { settlement: { outcome: "done" as const }, status: 200 };
    expect(await app.settle("dup", receipt, done)).toBe(true);
    expect(await app.settle("dup", receipt, done)).toBe(false);
    const retry = { settlement: { outcome: "retry" as const }, status: 200 };
    expect(await app.settle("dup", receipt, retry)).toBe(false);
    expect((await app.queue.get("dup")).state).toBe("finished");
  });

  it("never delivers a job deleted before its due time", async () => {
    const app = await setup();
    await app.queue.add({ topic: "p", id: "gone", delay: 0.5 });
    await app.queue.delete("gone");
    const run = await app.push();
    expect(run.claimed).toBe(0);
    await new Promise((r) => setTimeout(r, 700));
    expect(app.receiver.received).toHaveLength(0);
  });

  it("never delivers a job deleted after a run claimed it ahead of its due time", async () => {
    // DESIGN §3: a deleted job is never delivered after its delete was acknowledged. The run
    // claims the job (reserved until due + ttr) and waits for its due time; the delete comes in
    // between. Its neighbour, due at the same time and not deleted, is delivered.
    const app = await setup();
    await app.queue.add({ topic: "p", id: "gone", delay: 0.6 });
    await app.queue.add({ topic: "p", id: "kept", delay: 0.6 });
    const run = app.push();
    for (let i = 0; i < 100 && (await app.queue.get("gone")).state !== "reserved"; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((await app.queue.get("gone")).state).toBe("reserved");
    await app.queue.delete("gone");
    const deletedAt = Date.now();
    expect(await run).toMatchObject({ claimed: 2, delivered: 1 });
    expect(app.receiver.received.map((r) => JSON.parse(r.body).id)).toEqual(["kept"]);
    expect(app.receiver.received[0]?.at).toBeGreaterThan(deletedAt);
    expect((await app.queue.get("gone")).state).toBe("deleted");
    expect((await app.queue.get("kept")).state).toBe("finished");
  });
});
