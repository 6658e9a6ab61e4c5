// The client against the real app on a real queue over redis-server: shapes, errors, retries.
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import {
  type ClientOptions,
  createClient,
  DelayqClientError,
  type FetchLike,
  type Job,
} from "../../src/client";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
// After the app: @hono/zod-openapi must extend zod before the domain schemas are built.
import { DelayQueue } from "../../src/index";
import { ADMIN, SHOP_A, type TestApp, testApp } from "../support/app";
import { expectRejection } from "../support/expect";

const BASE = "http://delayq.test";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A sent JSON body, as far as the assertions read it. */
type SentBody = { id?: string; jobs?: { id?: string }[] };
type Sent = { method: string; url: string; headers: Headers; body?: SentBody };

/** Records every request the client sends, then hands it to `next`. */
function recording(next: FetchLike): { fetch: FetchLike; sent: Sent[] } {
  const sent: Sent[] = [];
  return {
    sent,
    fetch: (input, init) => {
      const body = typeof init.body === "string" ? JSON.parse(init.body) : undefined;
      sent.push({
        method: init.method ?? "GET",
        url: input,
        headers: new Headers(init.headers),
        body,
      });
      return next(input, init);
    },
  };
}

/** A real app and a client of it; `sent` holds what the client sent. */
function setup(options: Partial<ClientOptions> = {}, app: TestApp = testApp()) {
  const { fetch, sent } = recording((input, init) => app.app.request(input, init));
  const client = createClient({ baseUrl: BASE, token: ADMIN, fetch, retryDelayMs: 1, ...options });
  return { t: app, client, sent };
}

/** The real app on a queue whose Redis is not there: every Redis call fails, so 503. */
function brokenApp() {
  const redis = new Redis({
    url: "http://127.0.0.1:1",
    token: "x",
    retry: { retries: 0 },
    automaticDeserialization: false,
    enableTelemetry: false,
  });
  return createApp({
    queue: new DelayQueue({ redis }),
    tokens: parseTokens(ADMIN),
    log: () => {},
  });
}

/** The rejection of a call, which must be a DelayqClientError. */
function failure(promise: Promise<unknown>): Promise<DelayqClientError> {
  return expectRejection(promise, DelayqClientError);
}

describe("happy paths", () => {
  it("add creates a job, and re-adding its id answers the stored job with created: false", async () => {
    const { t, client, sent } = setup();
    const now = t.clock.now;
    const first = await client.add({ topic: "orders", id: "o-1", body: { n: 1 }, delay: 30 });
    expect(first).toEqual({
      created: true,
      job: {
        id: "o-1",
        topic: "orders",
        state: "delayed",
        body: { n: 1 },
        dueAt: now + 30_000,
        ttr: 60,
        attempts: 0,
        maxAttempts: 10,
        createdAt: now,
      },
    });
    const again = await client.add({ topic: "orders", id: "o-1", body: { n: 2 } });
    expect(again).toEqual({ created: false, job: first.job });
    expect(sent[0]).toMatchObject({ method: "POST", url: `${BASE}/v1/jobs` });
    expect(sent[0]?.headers.get("authorization")).toBe(`Bearer ${ADMIN}`);
    expect(sent[0]?.headers.get("content-type")).toBe("application/json");
  });

  it("add without an id sends a UUID the client made, and the job has it", async () => {
    const { client, sent } = setup();
    const { created, job } = await client.add({ topic: "orders", body: "x" });
    expect(created).toBe(true);
    expect(job.id).toMatch(UUID);
    expect(sent[0]?.body).toEqual({ topic: "orders", body: "x", id: job.id });
  });

  it("addBatch answers one result per item, in order, with ids made for items without", async () => {
    const { t, client, sent } = setup();
    const results = await client.addBatch([
      { topic: "mail" },
      { topic: "mail", id: "m-2", body: [1] },
      { topic: "mail", delay: -1 },
    ]);
    expect(results).toHaveLength(3);
    const [made, given, bad] = results;
    expect(made).toEqual({
      created: true,
      job: expect.objectContaining({ id: sent[0]?.body?.jobs?.[0]?.id, state: "ready" }),
    });
    expect(sent[0]?.body?.jobs?.[0]?.id).toMatch(UUID);
    expect(given).toEqual({
      created: true,
      job: {
        id: "m-2",
        topic: "mail",
        state: "ready",
        body: [1],
        dueAt: t.clock.now,
        ttr: 60,
        attempts: 0,
        maxAttempts: 10,
        createdAt: t.clock.now,
      },
    });
    expect(bad).toEqual({
      error: { code: "invalid_request", message: expect.stringContaining("delay") },
    });
  });

  it("get answers the job; delete deletes it, and deleting again succeeds", async () => {
    const { client, sent } = setup();
    const { job } = await client.add({ topic: "t", id: "g-1", body: { a: 1 } });
    expect(await client.get("g-1")).toEqual(job);
    await expect(client.delete("g-1")).resolves.toBeUndefined();
    expect(await client.get("g-1")).toMatchObject({ id: "g-1", state: "deleted" });
    await expect(client.delete("g-1")).resolves.toBeUndefined();
    expect(sent.map((s) => `${s.method} ${s.url}`)).toEqual([
      `POST ${BASE}/v1/jobs`,
      `GET ${BASE}/v1/jobs/g-1`,
      `DELETE ${BASE}/v1/jobs/g-1`,
      `GET ${BASE}/v1/jobs/g-1`,
      `DELETE ${BASE}/v1/jobs/g-1`,
    ]);
  });

  it("pop reserves jobs with receipts; finish finishes them, twice if need be", async () => {
    const { t, client } = setup();
    await client.addBatch([
      { topic: "work", id: "w-1" },
      { topic: "work", id: "w-2" },
      { topic: "work", id: "w-3", delay: 10 },
    ]);
    const jobs = await client.pop("work", { count: 5 });
    expect(jobs.map((j) => j.id).sort()).toEqual(["w-1", "w-2"]);
    for (const job of jobs) {
      expect(job).toMatchObject({
        state: "reserved",
        attempts: 1,
        reservedUntil: t.clock.now + 60_000,
        receipt: expect.any(String),
      });
    }
    const [one] = jobs as [Job];
    await expect(client.finish(one.id, { receipt: one.receipt })).resolves.toBeUndefined();
    expect(await client.get(one.id)).toMatchObject({ state: "finished" });
    await expect(client.finish(one.id, { receipt: one.receipt })).resolves.toBeUndefined();
    expect(await client.pop("work")).toEqual([]);
    t.clock.advance(10_000);
    expect((await client.pop("work")).map((j) => j.id)).toEqual(["w-3"]);
  });

  it("touch extends the lease; release puts the job back after its delay", async () => {
    const { t, client } = setup();
    await client.add({ topic: "lease", id: "l-1" });
    const [job] = (await client.pop("lease")) as [Job];
    t.clock.advance(30_000);
    const touched = await client.touch(job.id, { receipt: job.receipt });
    expect(touched).toMatchObject({ state: "reserved", reservedUntil: t.clock.now + 60_000 });
    const released = await client.release(job.id, { receipt: job.receipt, delay: 10 });
    expect(released).toMatchObject({ id: "l-1", state: "delayed", dueAt: t.clock.now + 10_000 });
    expect(released.reservedUntil).toBeUndefined();
  });

  it("bury, kick by ids and by count, and deleteDead", async () => {
    const { client, sent } = setup();
    await client.addBatch([
      { topic: "dl", id: "d-1" },
      { topic: "dl", id: "d-2" },
    ]);
    for (const job of await client.pop("dl", { count: 2 })) {
      const buried = await client.bury(job.id, { receipt: job.receipt });
      expect(buried).toMatchObject({ id: job.id, state: "dead", deadReason: "buried" });
    }
    expect((await client.topic("dl")).counts.dead).toBe(2);
    expect(await client.kick("dl", { ids: ["d-1"] })).toBe(1);
    expect(await client.get("d-1")).toMatchObject({ state: "ready", attempts: 0 });
    expect(await client.kick("dl", { count: 5 })).toBe(1);
    expect(await client.kick("dl")).toBe(0);

    for (const job of await client.pop("dl", { count: 2 })) await client.bury(job.id);
    expect(await client.deleteDead("dl", { count: 1 })).toBe(1);
    expect(await client.deleteDead("dl")).toBe(1);
    expect((await client.topic("dl")).counts).toEqual({
      delayed: 0,
      ready: 0,
      reserved: 0,
      dead: 0,
    });
    expect(sent.filter((s) => s.method === "DELETE").map((s) => s.url)).toEqual([
      `${BASE}/v1/topics/dl/dead?count=1`,
      `${BASE}/v1/topics/dl/dead`,
    ]);
  });

  it("topic answers counts, the earliest due time and the config", async () => {
    const { t, client } = setup();
    await client.add({ topic: "stats", id: "s-1", delay: 30 });
    await client.add({ topic: "stats", id: "s-2", delay: 5 });
    await client.add({ topic: "stats", id: "s-3" });
    await client.pop("stats");
    expect(await client.topic("stats")).toEqual({
      topic: "stats",
      counts: { delayed: 2, ready: 0, reserved: 1, dead: 0 },
      oldestDueAt: t.clock.now + 5_000,
      config: {},
    });
  });

  it("topics pages by name; the cursor goes back as after", async () => {
    const { client, sent } = setup();
    await client.add({ topic: "a-1" });
    await client.add({ topic: "a-2" });
    const first = await client.topics({ limit: 1 });
    expect(first).toEqual({
      topics: [
        {
          topic: "a-1",
          counts: { delayed: 0, ready: 1, reserved: 0, dead: 0 },
          oldestDueAt: expect.any(Number),
          config: {},
        },
      ],
      cursor: "a-1",
    });
    const second = await client.topics({ after: first.cursor, limit: 1 });
    expect(second.topics.map((s) => s.topic)).toEqual(["a-2"]);
    const all = await client.topics();
    expect(all.topics.map((s) => s.topic)).toEqual(["a-1", "a-2"]);
    expect(all.cursor).toBeUndefined();
    expect(sent.slice(-3).map((s) => s.url)).toEqual([
      `${BASE}/v1/topics?limit=1`,
      `${BASE}/v1/topics?after=a-1&limit=1`,
      `${BASE}/v1/topics`,
    ]);
  });

  it("listJobs pages through one state", async () => {
    const { client } = setup();
    await client.addBatch(["j-1", "j-2", "j-3"].map((id) => ({ topic: "list", id })));
    await client.add({ topic: "list", id: "j-4", delay: 60 });
    const first = await client.listJobs("list", { state: "ready", limit: 2 });
    expect(first.jobs).toHaveLength(2);
    expect(first.cursor).toEqual(expect.any(String));
    const second = await client.listJobs("list", {
      state: "ready",
      limit: 2,
      cursor: first.cursor,
    });
    expect([...first.jobs, ...second.jobs].map((j) => j.id).sort()).toEqual(["j-1", "j-2", "j-3"]);
    expect(second.cursor).toBeUndefined();
    const delayed = await client.listJobs("list", { state: "delayed" });
    expect(delayed).toEqual({ jobs: [expect.objectContaining({ id: "j-4", state: "delayed" })] });
  });

  it("configureTopic stores the config with defaults filled in, and it takes effect", async () => {
    const { client } = setup();
    const config = await client.configureTopic("conf", {
      ttr: 5,
      backoff: { type: "exponential", delay: 1 },
      paused: true,
    });
    expect(config).toEqual({
      ttr: 5,
      backoff: { type: "exponential", delay: 1, factor: 2 },
      paused: true,
    });
    expect((await client.topic("conf")).config).toEqual(config);
    const { job } = await client.add({ topic: "conf" });
    expect(job.ttr).toBe(5);
    expect(await client.pop("conf")).toEqual([]);
    await client.configureTopic("conf", {});
    expect((await client.pop("conf")).map((j) => j.id)).toEqual([job.id]);
  });

  it("command runs one command or an array; failures are results, not throws", async () => {
    const { client, sent } = setup();
    const added = await client.command({ command: "add", topic: "cmd", body: { k: 1 } });
    expect(added).toEqual({ success: true, error: "", id: sent[0]?.body?.id });
    expect(sent[0]?.body?.id).toMatch(UUID);
    const results = await client.command([
      { command: "pop", topic: "cmd" },
      { command: "finish", id: added.id as string },
      { command: "get", id: "nope" },
    ]);
    expect(results).toEqual([
      { success: true, error: "", id: added.id, value: { k: 1 } },
      { success: true, error: "", id: added.id },
      { success: false, error: expect.stringMatching(/^job_not_found: /), id: "nope" },
    ]);
  });

  it("health answers ok without sending the token, and the degraded body on 503", async () => {
    const { client, sent } = setup();
    expect(await client.health()).toEqual({ status: "ok", redis: "ok" });
    expect(sent[0]?.url).toBe(`${BASE}/health`);
    expect(sent[0]?.headers.has("authorization")).toBe(false);

    const broken = brokenApp();
    const { fetch, sent: brokenSent } = recording((i, init) => broken.request(i, init));
    const down = createClient({ baseUrl: BASE, token: ADMIN, fetch, retryDelayMs: 1 });
    expect(await down.health()).toEqual({
      status: "degraded",
      redis: "unreachable",
      message: expect.stringContaining("Redis is unavailable"),
    });
    // A degraded answer is the answer asked for, not a failure to retry.
    expect(brokenSent).toHaveLength(1);
  });

  it("a long-polling pop returns when a job is added, and its wait is not a timeout", async () => {
    const { client } = setup({ timeoutMs: 200 });
    const started = Date.now();
    const popping = client.pop("lp", { wait: 5 });
    await new Promise((resolve) => setTimeout(resolve, 400));
    await client.add({ topic: "lp", id: "lp-1" });
    const jobs = await popping;
    expect(jobs.map((j) => j.id)).toEqual(["lp-1"]);
    expect(Date.now() - started).toBeLessThan(3_000);

    // Nothing comes: the server answers [] after the wait, past timeoutMs but within wait + it.
    const empty = Date.now();
    expect(await client.pop("lp-empty", { wait: 0.5 })).toEqual([]);
    expect(Date.now() - empty).toBeGreaterThanOrEqual(450);
  });

  it("path segments are URL-encoded, and . and .. are refused before sending", async () => {
    const { client, sent } = setup();
    const id = "a:b@c+d=e~f";
    await client.add({ topic: "enc:1", id });
    expect((await client.get(id)).id).toBe(id);
    expect(sent[1]?.url).toBe(`${BASE}/v1/jobs/a%3Ab%40c%2Bd%3De~f`);
    expect((await client.topic("enc:1")).counts.ready).toBe(1);
    expect(sent[2]?.url).toBe(`${BASE}/v1/topics/enc%3A1`);

    const before = sent.length;
    for (const call of [client.get(".."), client.listJobs(".", { state: "ready" })]) {
      const error = await failure(call);
      expect(error).toMatchObject({ code: "invalid_request", status: 0 });
    }
    expect(sent).toHaveLength(before);
  });

  it("a baseUrl with a trailing slash still makes clean URLs", async () => {
    const { client, sent } = setup({ baseUrl: `${BASE}/` });
    await client.topics();
    expect(sent[0]?.url).toBe(`${BASE}/v1/topics`);
  });
});

describe("errors", () => {
  it("job_not_found is 404", async () => {
    const { client, sent } = setup();
    const error = await failure(client.get("missing"));
    expect(error).toMatchObject({ name: "DelayqClientError", code: "job_not_found", status: 404 });
    expect(error.message).toContain("missing");
    expect(sent).toHaveLength(1);
  });

  it("stale_receipt is 409 and is not retried", async () => {
    const { t, client, sent } = setup();
    await client.add({ topic: "stale", id: "st-1", ttr: 10 });
    const [old] = (await client.pop("stale")) as [Job];
    t.clock.advance(11_000);
    const [again] = (await client.pop("stale")) as [Job];
    expect(again.receipt).not.toBe(old.receipt);
    const before = sent.length;
    const error = await failure(client.finish("st-1", { receipt: old.receipt }));
    expect(error).toMatchObject({ code: "stale_receipt", status: 409 });
    expect(sent.length - before).toBe(1);
    await expect(client.finish("st-1", { receipt: again.receipt })).resolves.toBeUndefined();
  });

  it("invalid_request is 400 and names the field, and is not retried", async () => {
    const { client, sent } = setup();
    const error = await failure(client.add({ topic: "v", delay: -1 }));
    expect(error).toMatchObject({ code: "invalid_request", status: 400 });
    expect(error.message).toMatch(/delay/);
    const pop = await failure(client.pop("v", { count: 0 }));
    expect(pop).toMatchObject({ code: "invalid_request", status: 400 });
    expect(pop.message).toMatch(/count/);
    expect(sent).toHaveLength(2);
  });

  it("unauthorized is 401 with a wrong token", async () => {
    const { client } = setup({ token: "not-a-token" });
    const error = await failure(client.topics());
    expect(error).toMatchObject({ code: "unauthorized", status: 401 });
  });

  it("forbidden is 403 when a scoped token acts on another topic", async () => {
    const { client } = setup({ token: SHOP_A });
    await expect(client.add({ topic: "shop-a.orders" })).resolves.toMatchObject({ created: true });
    const error = await failure(client.add({ topic: "shop-b.orders" }));
    expect(error).toMatchObject({ code: "forbidden", status: 403 });
    await failure(client.pop("shop-b.orders")).then((e) => expect(e.code).toBe("forbidden"));
  });

  it("an answer that is not delayq's is invalid_response, with its status, and not retried", async () => {
    let calls = 0;
    const html: FetchLike = async () => {
      calls++;
      return new Response("<html>Bad gateway</html>", { status: 502 });
    };
    const client = createClient({ baseUrl: BASE, token: ADMIN, fetch: html, retryDelayMs: 1 });
    const error = await failure(client.topics());
    expect(error).toMatchObject({ code: "invalid_response", status: 502 });
    expect(error.message).toContain("Bad gateway");
    expect(calls).toBe(1);

    const notJson: FetchLike = async () => new Response("ok", { status: 200 });
    const other = createClient({ baseUrl: BASE, token: ADMIN, fetch: notJson });
    await failure(other.topics()).then((e) =>
      expect(e).toMatchObject({ code: "invalid_response", status: 200 }),
    );
    const wrongShape: FetchLike = async () => Response.json({ nope: 1 });
    const third = createClient({ baseUrl: BASE, token: ADMIN, fetch: wrongShape });
    await failure(third.get("x")).then((e) =>
      expect(e).toMatchObject({ code: "invalid_response", status: 200 }),
    );
  });

  it("a bad option is a TypeError at construction", () => {
    expect(() => createClient({ baseUrl: "", token: ADMIN })).toThrow(TypeError);
    expect(() => createClient({ baseUrl: BASE, token: "" })).toThrow(TypeError);
    expect(() => createClient({ baseUrl: BASE, token: ADMIN, retries: -1 })).toThrow(/retries/);
  });
});

describe("retries", () => {
  /** Throws like a dropped connection for the first `n` calls, then hands over to `next`. */
  function flaky(n: number, next: FetchLike) {
    const state = { attempts: 0 };
    const fetch: FetchLike = async (input, init) => {
      state.attempts++;
      if (state.attempts <= n) throw new TypeError("fetch failed");
      return next(input, init);
    };
    return { fetch, state };
  }

  it("a network error is retried, and the call answers once one gets through", async () => {
    const t = testApp();
    const { fetch, state } = flaky(2, (i, init) => t.app.request(i, init));
    const client = createClient({ baseUrl: BASE, token: ADMIN, fetch, retryDelayMs: 1 });
    const { created, job } = await client.add({ topic: "net", body: 1 });
    expect(created).toBe(true);
    expect(state.attempts).toBe(3);
    expect(await client.get(job.id)).toEqual(job);
  });

  it("when every attempt fails, network_error with status 0 after 1 + retries attempts", async () => {
    const t = testApp();
    const { fetch, state } = flaky(10, (i, init) => t.app.request(i, init));
    const client = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch,
      retries: 2,
      retryDelayMs: 1,
    });
    const error = await failure(client.topics());
    expect(error).toMatchObject({ code: "network_error", status: 0 });
    expect(error.cause).toBeInstanceOf(TypeError);
    expect(state.attempts).toBe(3);
  });

  it("the client-made id makes a retried add idempotent when the first answer was lost", async () => {
    const t = testApp();
    const bodies: SentBody[] = [];
    let attempts = 0;
    // The first attempt reaches the server and adds the job; its answer is lost on the way back.
    const lossy: FetchLike = async (input, init) => {
      attempts++;
      if (typeof init.body === "string") bodies.push(JSON.parse(init.body));
      const response = await t.app.request(input, init);
      if (attempts === 1) throw new TypeError("fetch failed");
      return response;
    };
    const client = createClient({ baseUrl: BASE, token: ADMIN, fetch: lossy, retryDelayMs: 1 });
    const result = await client.add({ topic: "idem", body: { once: true } });
    expect(attempts).toBe(2);
    expect(bodies[0]?.id).toMatch(UUID);
    expect(bodies[1]?.id).toBe(bodies[0]?.id);
    expect(result).toMatchObject({
      created: false,
      job: { id: bodies[0]?.id, body: { once: true } },
    });
    expect((await client.topic("idem")).counts.ready).toBe(1);

    attempts = 0;
    bodies.length = 0;
    const batch = await client.addBatch([{ topic: "idem-b" }, { topic: "idem-b", id: "mine" }]);
    expect(attempts).toBe(2);
    expect(bodies[1]?.jobs).toEqual(bodies[0]?.jobs);
    expect(batch.map((r) => ("created" in r ? r.created : r.error.code))).toEqual([false, false]);
    expect((await client.topic("idem-b")).counts.ready).toBe(2);
  });

  it("503 redis_unavailable is retried, with retryAfter from Retry-After, then thrown", async () => {
    const broken = brokenApp();
    const { fetch, sent } = recording((i, init) => broken.request(i, init));
    const client = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch,
      retries: 2,
      retryDelayMs: 1,
      maxRetryDelayMs: 10,
    });
    const error = await failure(client.get("x"));
    expect(error).toMatchObject({ code: "redis_unavailable", status: 503, retryAfter: 1 });
    expect(sent).toHaveLength(3);
  });

  it("503 then recovery: the call answers the healthy server's result", async () => {
    const broken = brokenApp();
    const t = testApp();
    let attempts = 0;
    const recovering: FetchLike = (input, init) =>
      ++attempts <= 2 ? broken.request(input, init) : t.app.request(input, init);
    const client = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch: recovering,
      retryDelayMs: 1,
      maxRetryDelayMs: 10,
    });
    const { created, job } = await client.add({ topic: "recover", id: "r-1" });
    expect(attempts).toBe(3);
    expect(created).toBe(true);
    expect(job.id).toBe("r-1");
  });

  it("Retry-After is honoured up to maxRetryDelayMs", async () => {
    const broken = brokenApp();
    const fetch: FetchLike = (input, init) => broken.request(input, init);
    const patient = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch,
      retries: 1,
      retryDelayMs: 1,
    });
    let started = Date.now();
    await failure(patient.topics());
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);

    const capped = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch,
      retries: 1,
      retryDelayMs: 1,
      maxRetryDelayMs: 50,
    });
    started = Date.now();
    await failure(capped.topics());
    expect(Date.now() - started).toBeLessThan(700);
  });

  it("a lone command's 503 is retried and thrown as redis_unavailable", async () => {
    const broken = brokenApp();
    const { fetch, sent } = recording((i, init) => broken.request(i, init));
    const client = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch,
      retries: 1,
      retryDelayMs: 1,
      maxRetryDelayMs: 10,
    });
    const error = await failure(client.command({ command: "get", id: "x" }));
    expect(error).toMatchObject({ code: "redis_unavailable", status: 503, retryAfter: 1 });
    expect(error.message).toMatch(/^Redis is unavailable/);
    expect(sent).toHaveLength(2);
  });

  it("a slow answer is a timeout, retried, then thrown with status 0", async () => {
    const t = testApp();
    let attempts = 0;
    const signals: AbortSignal[] = [];
    // Ignores its signal on purpose: the time limit must hold even so.
    const slow: FetchLike = async (input, init) => {
      attempts++;
      if (init.signal) signals.push(init.signal);
      await new Promise((resolve) => setTimeout(resolve, 500));
      return t.app.request(input, init);
    };
    const client = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch: slow,
      timeoutMs: 50,
      retries: 1,
      retryDelayMs: 1,
    });
    const started = Date.now();
    const error = await failure(client.topics());
    expect(error).toMatchObject({ code: "timeout", status: 0 });
    expect(Date.now() - started).toBeLessThan(400);
    expect(attempts).toBe(2);
    expect(signals.every((s) => s.aborted)).toBe(true);
  });

  it("the caller's signal ends a pop at once with its reason, never retried", async () => {
    const { client, sent } = setup();
    const controller = new AbortController();
    const popping = client.pop("abort", { wait: 10, signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const started = Date.now();
    const error = await popping.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe("AbortError");
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(sent).toHaveLength(1);
  });

  it("the caller's signal also ends the wait between retries", async () => {
    let attempts = 0;
    const down: FetchLike = async () => {
      attempts++;
      throw new TypeError("fetch failed");
    };
    const client = createClient({
      baseUrl: BASE,
      token: ADMIN,
      fetch: down,
      retryDelayMs: 10_000,
      maxRetryDelayMs: 10_000,
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("stop")), 50);
    const started = Date.now();
    await expect(client.pop("abort", { signal: controller.signal })).rejects.toThrow("stop");
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(attempts).toBe(1);
  });
});

describe("over real HTTP with the global fetch", () => {
  it("works end to end, and a refused connection is a retried network_error", async () => {
    const t = testApp();
    const server = serve({ fetch: t.app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    const { port } = server.address() as AddressInfo;
    const baseUrl = `http://127.0.0.1:${port}`;
    try {
      const client = createClient({ baseUrl, token: ADMIN });
      const { job } = await client.add({ topic: "real", body: { over: "http" } });
      const [popped] = (await client.pop("real", { wait: 1 })) as [Job];
      expect(popped).toMatchObject({ id: job.id, state: "reserved", body: { over: "http" } });
      await client.finish(popped.id, { receipt: popped.receipt });
      expect(await client.health()).toEqual({ status: "ok", redis: "ok" });
      await failure(client.get("missing")).then((e) =>
        expect(e).toMatchObject({ code: "job_not_found", status: 404 }),
      );
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    // Nothing listens there any more.
    const gone = createClient({ baseUrl, token: ADMIN, retries: 1, retryDelayMs: 1 });
    const error = await failure(gone.topics());
    expect(error).toMatchObject({ code: "network_error", status: 0 });
    expect(error.message).toContain("GET /v1/topics");
  });
});
