// The client's retries: network errors, 503s, timeouts and aborts, and what is never retried.
import { describe, expect, it } from "vitest";
import { createClient, type FetchLike } from "../../src/client";
import { ADMIN, testApp } from "../support/app";
import { BASE, brokenApp, failure, recording, type SentBody, setup, UUID } from "./support";

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
