// ouqiang/delay-queue's API under /compat/ouqiang/{token}: every endpoint, its envelope and codes.

import { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
import { DelayQueue } from "../../src/queue";
import { ADMIN, SHOP_A, type TestApp, testApp } from "../support/app";
import { startReceiver, testPushApp } from "../support/push";

type Envelope = { code: number; message: string; data: any; error?: string };

/** A request as ouqiang's clients send it: POST, a JSON body, the token in the path only. */
async function oq(
  t: TestApp,
  endpoint: string,
  body: unknown,
  options: { token?: string; method?: string } = {},
): Promise<Envelope> {
  const { token = ADMIN, method = "POST" } = options;
  const res = await t.call(method, `/compat/ouqiang/${token}/${endpoint}`, { body, token: null });
  // ouqiang answers every request with 200 and its envelope, failures included.
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  expect(Object.keys(res.json).slice(0, 3)).toEqual(["code", "message", "data"]);
  return res.json as Envelope;
}

const ORDER = { topic: "order", id: "15702398321", delay: 3600, ttr: 120 };
// ouqiang's README example body: a JSON document carried as a string.
const BODY = '{"uid": 10829378,"created": 1498657365 }';

describe("push, get, pop, finish, delete", () => {
  it("pushes a job and answers ouqiang's envelope", async () => {
    const t = testApp();
    expect(await oq(t, "push", { ...ORDER, body: BODY })).toEqual({
      code: 0,
      message: "添加成功",
      data: null,
    });
    const { job } = (await t.call("GET", `/v1/jobs/${ORDER.id}`)).json;
    expect(job).toMatchObject({
      topic: "order",
      state: "delayed",
      ttr: 120,
      body: BODY,
      dueAt: t.clock.now + 3_600_000,
    });
  });

  it("gets a job with its due time in unix seconds and its body as the string sent", async () => {
    const t = testApp();
    await oq(t, "push", { ...ORDER, body: BODY });
    expect(await oq(t, "get", { id: ORDER.id })).toEqual({
      code: 0,
      message: "操作成功",
      data: {
        topic: "order",
        id: ORDER.id,
        delay: Math.floor(t.clock.now / 1000) + 3600,
        ttr: 120,
        body: BODY,
        state: "delayed",
      },
    });
    expect(await oq(t, "get", { id: "no-such-job" })).toEqual({
      code: 0,
      message: "操作成功",
      data: null,
    });
  });

  it("pops nothing before the job is due, then {id, body}; finish ends it for good", async () => {
    const t = testApp();
    await oq(t, "push", { ...ORDER, delay: 30, body: BODY });
    expect(await oq(t, "pop", { topic: "order", wait: 0 })).toEqual({
      code: 0,
      message: "操作成功",
      data: null,
    });
    t.clock.advance(30_000);
    const popped = await oq(t, "pop", { topic: "order", wait: 0 });
    expect(popped).toMatchObject({ code: 0, message: "操作成功" });
    expect(popped.data).toEqual({ id: ORDER.id, body: BODY, receipt: expect.any(String) });
    expect((await oq(t, "get", { id: ORDER.id })).data.state).toBe("reserved");

    expect(await oq(t, "finish", { id: ORDER.id })).toEqual({
      code: 0,
      message: "操作成功",
      data: null,
    });
    expect((await t.call("GET", `/v1/jobs/${ORDER.id}`)).json.job.state).toBe("finished");
    // ouqiang deletes a finished job: /get no longer finds it.
    expect((await oq(t, "get", { id: ORDER.id })).data).toBeNull();
    t.clock.advance(3600_000);
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data).toBeNull();
  });

  it("keeps bodies byte for byte: unicode, escapes, big numbers, whitespace, empty", async () => {
    const t = testApp();
    const bodies = [
      '{"tx":4200001234567890123,"amount":1e400}',
      "订单 №1 ✓ \u{1F600}",
      '  "quoted"\n\t\\ \u0000 ',
      "",
      "null",
    ];
    for (const [i, body] of bodies.entries()) {
      await oq(t, "push", { topic: "bodies", id: `b-${i}`, delay: 0, ttr: 60, body });
    }
    for (const [i, body] of bodies.entries()) {
      expect((await oq(t, "get", { id: `b-${i}` })).data.body).toBe(body);
      expect((await oq(t, "pop", { topic: "bodies", wait: 0 })).data).toMatchObject({
        id: `b-${i}`,
        body,
      });
    }
    // No body at all is ouqiang's zero value, the empty string.
    await oq(t, "push", { topic: "bodies", id: "none", delay: 0, ttr: 60 });
    expect((await oq(t, "pop", { topic: "bodies", wait: 0 })).data.body).toBe("");
  });

  it("deletes a job in any state; it is never handed out afterwards", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "order", id: "d-1", delay: 0, ttr: 60, body: "x" });
    await oq(t, "push", { topic: "order", id: "d-2", delay: 10, ttr: 60, body: "y" });
    await oq(t, "pop", { topic: "order", wait: 0 });
    for (const id of ["d-1", "d-2"]) {
      expect(await oq(t, "delete", { id })).toEqual({ code: 0, message: "操作成功", data: null });
      expect((await t.call("GET", `/v1/jobs/${id}`)).json.job.state).toBe("deleted");
    }
    t.clock.advance(3600_000);
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data).toBeNull();
  });

  it("answers success for ids it does not know, as ouqiang does", async () => {
    const t = testApp();
    for (const endpoint of ["finish", "delete"]) {
      expect(await oq(t, endpoint, { id: "never-pushed" })).toEqual({
        code: 0,
        message: "操作成功",
        data: null,
      });
    }
  });

  it("finish of a job nobody holds deletes it, so it is not delivered again", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "order", id: "late", delay: 0, ttr: 5, body: "x" });
    await oq(t, "pop", { topic: "order", wait: 0 });
    t.clock.advance(6_000); // the lease ran out: the job is ready again
    await t.queue.tickSlice();
    expect((await oq(t, "get", { id: "late" })).data.state).toBe("ready");
    expect((await oq(t, "finish", { id: "late" })).code).toBe(0);
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data).toBeNull();
  });

  it("finish with pop's receipt refuses a reservation that has ended", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "order", id: "r-1", delay: 0, ttr: 5, body: "x" });
    const first = (await oq(t, "pop", { topic: "order", wait: 0 })).data;
    t.clock.advance(6_000);
    const second = (await oq(t, "pop", { topic: "order", wait: 0 })).data;
    expect(second.id).toBe("r-1");
    const stale = await oq(t, "finish", { id: "r-1", receipt: first.receipt });
    expect(stale).toMatchObject({ code: 1, data: null, error: "stale_receipt" });
    expect(await oq(t, "finish", { id: "r-1", receipt: second.receipt })).toMatchObject({
      code: 0,
    });
  });
});

describe("push of an id that exists", () => {
  it("replaces a waiting job: new body, new delay, like ouqiang's overwrite", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "order", id: "o-1", delay: 0, ttr: 60, body: "old" });
    await oq(t, "push", { topic: "order", id: "o-1", delay: 60, ttr: 30, body: "new" });
    // The old entry must not deliver the job early (ouqiang hands out the new body at once).
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data).toBeNull();
    t.clock.advance(60_000);
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data).toMatchObject({
      id: "o-1",
      body: "new",
    });
  });

  it("gives back a job a consumer holds and replaces it (retry-later by re-pushing)", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "order", id: "o-2", delay: 0, ttr: 60, body: '{"n":1}' });
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data.id).toBe("o-2");
    expect(
      await oq(t, "push", { topic: "order", id: "o-2", delay: 120, ttr: 60, body: '{"n":2}' }),
    ).toEqual({ code: 0, message: "添加成功", data: null });
    const got = (await oq(t, "get", { id: "o-2" })).data;
    expect(got).toMatchObject({ state: "delayed", body: '{"n":2}' });
    expect(got.delay).toBe(Math.floor(t.clock.now / 1000) + 120);
    t.clock.advance(119_000);
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data).toBeNull();
    t.clock.advance(1_000);
    expect((await oq(t, "pop", { topic: "order", wait: 0 })).data.body).toBe('{"n":2}');
  });

  it("refuses an id another topic uses (ids are unique across topics, unlike ouqiang #13)", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "order", id: "shared", delay: 0, ttr: 60, body: "a" });
    const res = await oq(t, "push", { topic: "sms", id: "shared", delay: 0, ttr: 60, body: "b" });
    expect(res).toMatchObject({ code: 1, data: null, error: "job_exists" });
    expect(res.message).toMatch(/another topic/);
    expect((await oq(t, "get", { id: "shared" })).data).toMatchObject({
      topic: "order",
      body: "a",
    });
  });
});

describe("pop over several topics", () => {
  it("takes from the first topic in the list that has a job, as BLPOP does", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "sms", id: "s-1", delay: 0, ttr: 60, body: "sms" });
    await oq(t, "push", { topic: "order", id: "o-1", delay: 0, ttr: 60, body: "order" });
    const order = ["order,sms", " order , sms ,", "order,order,sms"];
    expect((await oq(t, "pop", { topic: order[0], wait: 0 })).data.id).toBe("o-1");
    expect((await oq(t, "pop", { topic: order[1], wait: 0 })).data.id).toBe("s-1");
    expect((await oq(t, "pop", { topic: order[2], wait: 0 })).data).toBeNull();
  });

  it("long-polls every topic and answers the first job that comes", async () => {
    const t = testApp({ pollIntervalMs: 50 });
    const started = Date.now();
    const popping = oq(t, "pop", { topic: "a,b,c", wait: 5 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await t.call("POST", "/v1/jobs", { body: { topic: "c", id: "late-c", body: "from v1" } });
    const popped = await popping;
    // A /v1 body that is a JSON string reads as that string, like the bodies pushed here.
    expect(popped.data).toMatchObject({ id: "late-c", body: "from v1" });
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it("names at most 20 topics in one pop", async () => {
    const t = testApp();
    const many = Array.from({ length: 21 }, (_, i) => `t${i}`);
    const refused = await oq(t, "pop", { topic: many.join(","), wait: 0 });
    expect(refused).toMatchObject({ code: 1, error: "invalid_request" });
    expect(refused.message).toContain("at most 20 topics (21 given)");
    const fine = await oq(t, "pop", { topic: many.slice(1).join(","), wait: 0 });
    expect(fine).toMatchObject({ code: 0, data: null });
  });

  it("says what is wrong with a topic it pops, as /v1 does", async () => {
    const t = testApp();
    const own = await oq(t, "pop", { topic: "orders,__payments", wait: 0 });
    expect(own).toMatchObject({ code: 1, error: "invalid_request" });
    expect(own.message).toContain('topic: "__payments" must be 1-100 characters');
    expect(own.message).toContain('not starting with "__"');
  });

  it("answers data: null when the wait is over", async () => {
    const t = testApp({ pollIntervalMs: 50 });
    const started = Date.now();
    expect(await oq(t, "pop", { topic: "a,b", wait: 0.5 })).toEqual({
      code: 0,
      message: "操作成功",
      data: null,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
  });

  it("leaves no job reserved but the one it answers when topics fill at once, none an attempt spent", async () => {
    const t = testApp({ pollIntervalMs: 50 });
    // One attempt each: a job given back with its attempt counted would die unseen.
    for (const topic of ["x", "y", "z"]) {
      await t.call("PUT", `/v1/topics/${topic}`, { body: { maxAttempts: 1 } });
    }
    const popping = oq(t, "pop", { topic: "x,y,z", wait: 5 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await t.call("POST", "/v1/jobs/batch", {
      body: { jobs: ["x", "y", "z"].map((topic) => ({ topic, id: `j-${topic}`, body: topic })) },
    });
    const popped = (await popping).data;
    expect(popped.id).toMatch(/^j-[xyz]$/);
    for (const topic of ["x", "y", "z"]) {
      const job = (await t.call("GET", `/v1/jobs/j-${topic}`)).json.job;
      const taken = popped.id === `j-${topic}`;
      expect(job.state, topic).toBe(taken ? "reserved" : "ready");
      expect(job.attempts, topic).toBe(taken ? 1 : 0);
      if (taken) continue;
      // Handed out later as a first attempt, with a receipt of its own.
      const again = (await oq(t, "pop", { topic, wait: 0 })).data;
      expect(again.id).toBe(`j-${topic}`);
      expect((await t.call("GET", `/v1/jobs/j-${topic}`)).json.job).toMatchObject({
        state: "reserved",
        attempts: 1,
      });
    }
  });
});

describe("with the /v1 API on the same jobs", () => {
  it("a job pushed through compat is consumed through /v1, its body the string sent", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "order", id: "c-1", delay: 0, ttr: 60, body: BODY });
    const { jobs } = (await t.call("POST", "/v1/topics/order/pop", { body: {} })).json;
    expect(jobs).toMatchObject([{ id: "c-1", body: BODY, ttr: 60 }]);
    await t.call("POST", "/v1/jobs/c-1/finish", { body: { receipt: jobs[0].receipt } });
    expect((await oq(t, "get", { id: "c-1" })).data).toBeNull();
  });

  it("a job added through /v1 is consumed through compat, its body the JSON text sent", async () => {
    const t = testApp();
    const text = '{"order":"1042", "tx": 4200001234567890123}';
    await t.call("POST", "/v1/jobs", {
      body: `{"topic":"order","id":"v-1","body":${text}}`,
    });
    await t.call("POST", "/v1/jobs", { body: { topic: "order", id: "v-2", body: "plain" } });
    await t.call("POST", "/v1/jobs", { body: { topic: "order", id: "v-3" } });
    const bodies = [];
    for (let i = 0; i < 3; i++) bodies.push((await oq(t, "pop", { topic: "order", wait: 0 })).data);
    expect(bodies).toMatchObject([
      { id: "v-1", body: text },
      { id: "v-2", body: "plain" },
      { id: "v-3", body: "" },
    ]);
    expect((await oq(t, "finish", { id: "v-1" })).code).toBe(0);
    expect((await t.call("GET", "/v1/jobs/v-1")).json.job.state).toBe("finished");
  });

  it("a job that used up its attempts is dead, and /get shows it", async () => {
    const t = testApp();
    await t.call("PUT", "/v1/topics/order", { body: { maxAttempts: 1 } });
    await oq(t, "push", { topic: "order", id: "dies", delay: 0, ttr: 1, body: "x" });
    await oq(t, "pop", { topic: "order", wait: 0 });
    t.clock.advance(2_000);
    await t.queue.tickSlice();
    expect((await oq(t, "get", { id: "dies" })).data).toMatchObject({ id: "dies", state: "dead" });
  });
});

describe("on a push topic", () => {
  it("delivers a job pushed here at once, its body the string sent; pop refuses the topic", async () => {
    const receiver = await startReceiver();
    try {
      const t = testPushApp();
      const put = await t.call("PUT", "/v1/topics/hooks", {
        body: { push: { url: `${receiver.url}/hook`, secret: "test-secret-0123456789" } },
      });
      expect(put.status).toBe(200);
      const job = { topic: "hooks", id: "h-1", delay: 0, ttr: 30, body: BODY };
      expect((await oq(t, "push", job)).code).toBe(0);
      // Delivered by the push request itself (due now), not by a later tick.
      await t.settled();
      const [got] = await receiver.waitFor(1);
      expect(JSON.parse(got?.body ?? "")).toMatchObject({ id: "h-1", topic: "hooks", body: BODY });
      expect(await oq(t, "pop", { topic: "hooks", wait: 0 })).toMatchObject({
        code: 1,
        error: "push_topic",
      });
    } finally {
      await receiver.close();
    }
  });
});

describe("bad input", () => {
  const bad: [string, unknown, RegExp][] = [
    ["push", "not json", /not valid JSON/],
    ["push", "", /empty/],
    ["push", [ORDER], /JSON object/],
    ["push", { ...ORDER, topic: undefined }, /topic/],
    ["push", { ...ORDER, topic: "   " }, /topic/],
    ["push", { ...ORDER, id: "" }, /id/],
    ["push", { ...ORDER, id: "has space" }, /id/],
    ["push", { ...ORDER, topic: "订单" }, /topic/],
    ["push", { ...ORDER, delay: -1 }, /delay/],
    ["push", { ...ORDER, delay: 1.5 }, /delay/],
    ["push", { ...ORDER, delay: "60" }, /delay/],
    ["push", { ...ORDER, delay: 366 * 24 * 3600 }, /delay/],
    ["push", { ...ORDER, ttr: 0 }, /ttr/],
    ["push", { ...ORDER, ttr: 86_401 }, /ttr/],
    ["push", { ...ORDER, body: { uid: 1 } }, /body: must be a string/],
    ["pop", {}, /topic/],
    ["pop", { topic: " , " }, /topic/],
    ["pop", { topic: "ok,bad topic" }, /bad topic/],
    ["pop", { topic: "order", wait: 21 }, /wait/],
    ["finish", {}, /id/],
    ["delete", { id: 42 }, /id/],
    ["get", { id: null }, /id/],
  ];

  it("answers code 1 with invalid_request and a message naming the field", async () => {
    const t = testApp();
    for (const [endpoint, body, message] of bad) {
      const res = await oq(t, endpoint, body);
      const what = `${endpoint} ${JSON.stringify(body)}`;
      expect(res, what).toMatchObject({ code: 1, data: null, error: "invalid_request" });
      expect(res.message, what).toMatch(message);
      expect(res.message, what).not.toMatch(/\bat .*\.ts:\d+/);
    }
    expect(await t.redis.exists(t.keys.topics)).toBe(0);
  });

  it("reads fields as Go does: any case, null as absent, unknown fields ignored", async () => {
    const t = testApp();
    const res = await oq(t, "push", {
      Topic: " order ",
      ID: "go-1",
      Delay: 0,
      ttr: 60,
      body: null,
      extra: { ignored: true },
    });
    expect(res.code).toBe(0);
    expect((await oq(t, "pop", { TOPIC: "order", wait: 0 })).data).toEqual({
      id: "go-1",
      body: "",
      receipt: expect.any(String),
    });
  });

  it("answers unknown endpoints and other methods in the envelope, without echoing the path", async () => {
    const t = testApp();
    const unknown = await oq(t, "status", { id: "x" });
    expect(unknown).toMatchObject({ code: 1, error: "not_found" });
    const get = await oq(t, "push", undefined, { method: "GET" });
    expect(get).toMatchObject({ code: 1, error: "method_not_allowed" });
    expect(get.message).toMatch(/POST/);
    const deeper = await oq(t, "push/more", ORDER);
    expect(deeper).toMatchObject({ code: 1, error: "not_found" });
    for (const res of [unknown, get, deeper]) expect(JSON.stringify(res)).not.toContain(ADMIN);
  });

  it("refuses a body over the request limit", async () => {
    const t = testApp({ maxRequestBytes: 1000 });
    const res = await oq(t, "push", { ...ORDER, body: "x".repeat(2000) });
    expect(res).toMatchObject({ code: 1, error: "payload_too_large" });
  });

  it("refuses a streamed body (no Content-Length) once it passes the limit, storing nothing", async () => {
    const t = testApp({ maxRequestBytes: 1000 });
    const text = JSON.stringify({ ...ORDER, id: "streamed", body: "x".repeat(2000) });
    const chunks = [text.slice(0, 600), text.slice(600)].map((part) =>
      new TextEncoder().encode(part),
    );
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const chunk = chunks.shift();
        if (chunk) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await t.app.request(`/compat/ouqiang/${ADMIN}/push`, {
      method: "POST",
      body,
      duplex: "half",
    } as RequestInit);
    expect(await res.json()).toMatchObject({ code: 1, error: "payload_too_large" });
    expect(await oq(t, "get", { id: "streamed" })).toMatchObject({ code: 0, data: null });
  });
});

describe("the token in the path", () => {
  it("refuses a wrong or missing token with code 1 and stores nothing", async () => {
    const t = testApp();
    for (const token of ["wrong-token", `${ADMIN}x`, "%20"]) {
      for (const endpoint of ["push", "pop", "finish", "delete", "get"]) {
        const res = await oq(t, endpoint, { ...ORDER, delay: 0, wait: 0 }, { token });
        expect(res, `${endpoint} with ${token}`).toMatchObject({
          code: 1,
          data: null,
          error: "unauthorized",
        });
        expect(res.message).not.toContain(token);
      }
    }
    expect(await t.redis.exists(t.keys.topics)).toBe(0);
    // A bearer header does not stand in for the path's token.
    const res = await t.call("POST", "/compat/ouqiang/nope/push", { body: ORDER, token: ADMIN });
    expect(res.json).toMatchObject({ code: 1, error: "unauthorized" });
  });

  it("limits a scoped token to its topics", async () => {
    const t = testApp();
    await oq(t, "push", { topic: "shop-b.orders", id: "b-1", delay: 0, ttr: 60, body: "secret" });
    const asShopA = (endpoint: string, body: unknown) => oq(t, endpoint, body, { token: SHOP_A });
    expect(
      await asShopA("push", { topic: "shop-b.orders", id: "a-1", delay: 0, ttr: 60, body: "" }),
    ).toMatchObject({ code: 1, error: "forbidden" });
    expect(await asShopA("pop", { topic: "shop-a.orders,shop-b.orders", wait: 0 })).toMatchObject({
      code: 1,
      error: "forbidden",
    });
    // By id, another topic's job reads as missing (issue 8.14) and is left alone.
    expect((await asShopA("get", { id: "b-1" })).data).toBeNull();
    expect((await asShopA("delete", { id: "b-1" })).code).toBe(0);
    expect((await asShopA("finish", { id: "b-1" })).code).toBe(0);
    expect((await oq(t, "get", { id: "b-1" })).data).toMatchObject({ state: "ready" });
    expect(
      await asShopA("push", { topic: "shop-a.orders", id: "a-2", delay: 0, ttr: 60, body: "" }),
    ).toMatchObject({ code: 0 });
  });

  it("never reaches a log line, even when Redis is down", async () => {
    const logs: Record<string, unknown>[] = [];
    // Nothing listens on port 1: every Redis request fails at once.
    const redis = new Redis({ url: "http://127.0.0.1:1", token: "x", retry: { retries: 0 } });
    const app = createApp({
      queue: new DelayQueue({ redis }),
      tokens: parseTokens(ADMIN),
      log: (entry) => logs.push(entry),
    });
    for (const endpoint of ["push", "pop", "get"]) {
      const res = await app.request(`/compat/ouqiang/${ADMIN}/${endpoint}`, {
        method: "POST",
        body: JSON.stringify({ ...ORDER, wait: 0 }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(await res.json()).toMatchObject({ code: 1, error: "redis_unavailable" });
    }
    expect(logs).toHaveLength(3);
    expect(logs[0]).toMatchObject({
      code: "redis_unavailable",
      route: "POST /compat/ouqiang/:token/push",
    });
    expect(JSON.stringify(logs)).not.toContain(ADMIN);
  });
});
