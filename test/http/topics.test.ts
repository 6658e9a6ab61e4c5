// Topic routes through the real app: pop and long-poll, kick, stats, config, paging, purge.
import { describe, expect, it } from "vitest";
import { testApp } from "../support/app";

describe("POST /v1/topics/{topic}/pop", () => {
  it("reserves due jobs with receipts, never before their time", async () => {
    const { call, clock } = testApp();
    await call("POST", "/v1/jobs/batch", {
      body: { jobs: [1, 2, 3].map((n) => ({ topic: "t", id: `j${n}`, delay: n })) },
    });
    clock.advance(1999);
    const early = await call("POST", "/v1/topics/t/pop", { body: { count: 10 } });
    expect(early.json.jobs.map((j: { id: string }) => j.id)).toEqual(["j1"]);
    clock.advance(1001);
    const rest = await call("POST", "/v1/topics/t/pop", { body: { count: 10 } });
    expect(rest.json.jobs.map((j: { id: string }) => j.id)).toEqual(["j2", "j3"]);
    expect(rest.json.jobs[0]).toMatchObject({ state: "reserved", attempts: 1 });
    expect(rest.json.jobs[0].receipt).toEqual(expect.any(String));
  });

  it("long-polls: with wait and nothing ready it answers an empty list when the wait ends", async () => {
    const { call } = testApp({ pollIntervalMs: 100 });
    const started = Date.now();
    const res = await call("POST", "/v1/topics/t/pop", { body: { wait: 0.3 } });
    expect(res).toMatchObject({ status: 200, json: { jobs: [] } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
  });

  it("long-polls: a job added during the wait is returned", async () => {
    const { call, app } = testApp({ pollIntervalMs: 60_000 });
    const waiting = call("POST", "/v1/topics/t/pop", { body: { wait: 10 } });
    await new Promise((r) => setTimeout(r, 50));
    await app.request("/v1/jobs", {
      method: "POST",
      headers: { authorization: "Bearer admin-token" },
      body: JSON.stringify({ topic: "t", id: "fresh" }),
    });
    expect((await waiting).json.jobs.map((j: { id: string }) => j.id)).toEqual(["fresh"]);
  });

  it.each([
    [{ count: 0 }, /count/],
    [{ count: 101 }, /count/],
    [{ wait: 21 }, /wait/],
    [{ wait: "5" }, /wait/],
    [{ topic: "x" }, /unknown field "topic"/],
  ])("answers 400 for %j", async (body, message) => {
    const { call } = testApp();
    const res = await call("POST", "/v1/topics/t/pop", { body });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(message);
  });
});

describe("dead letter routes", () => {
  it("pages dead jobs, kicks some back, and deletes the rest", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs/batch", {
      body: { jobs: ["a", "b", "c"].map((id) => ({ topic: "t", id })) },
    });
    const popped = await call("POST", "/v1/topics/t/pop", { body: { count: 3 } });
    for (const job of popped.json.jobs) await call("POST", `/v1/jobs/${job.id}/bury`);

    const page = await call("GET", "/v1/topics/t/jobs?state=dead&limit=2");
    expect(page.json.jobs).toHaveLength(2);
    // A keyset cursor: the score (time of death) and id of the page's last job.
    const last = page.json.jobs[1];
    expect(page.json.cursor).toBe(`z${last.endedAt}:${last.id}`);
    expect(page.json.hasMore).toBe(true);
    const next = await call(
      "GET",
      `/v1/topics/t/jobs?state=dead&limit=2&cursor=${page.json.cursor}`,
    );
    expect(next.json.jobs).toHaveLength(1);
    expect(next.json.cursor).toBeUndefined();
    expect(next.json.hasMore).toBe(false);

    expect((await call("POST", "/v1/topics/t/kick", { body: { ids: ["b"] } })).json).toEqual({
      kicked: 1,
    });
    expect((await call("DELETE", "/v1/topics/t/dead?count=1")).json).toEqual({ deleted: 1 });
    expect((await call("POST", "/v1/topics/t/kick")).json).toEqual({ kicked: 1 });
    expect((await call("GET", "/v1/topics/t")).json.counts).toEqual({
      delayed: 0,
      ready: 2,
      reserved: 0,
      dead: 0,
    });
  });

  it("answers 400 for a bad state or cursor, and for ids with count", async () => {
    const { call } = testApp();
    expect((await call("GET", "/v1/topics/t/jobs?state=done")).status).toBe(400);
    expect((await call("GET", "/v1/topics/t/jobs")).status).toBe(400);
    expect((await call("GET", "/v1/topics/t/jobs?state=dead&cursor=-1")).status).toBe(400);
    expect((await call("GET", "/v1/topics/t/jobs?state=dead&limit=0")).status).toBe(400);
    const both = await call("POST", "/v1/topics/t/kick", { body: { ids: ["a"], count: 1 } });
    expect(both.status).toBe(400);
    expect((await call("DELETE", "/v1/topics/t/dead?count=5000")).status).toBe(400);
  });
});

describe("topics", () => {
  it("sets a topic's config, which new jobs then use, and reports counts", async () => {
    const { call } = testApp();
    const put = await call("PUT", "/v1/topics/pay", {
      body: { ttr: 15, maxAttempts: 8, backoff: "wechatpay" },
    });
    expect(put.json).toEqual({
      topic: "pay",
      config: { ttr: 15, maxAttempts: 8, backoff: "wechatpay" },
    });
    const added = await call("POST", "/v1/jobs", { body: { topic: "pay", delay: 5 } });
    expect(added.json.job).toMatchObject({ ttr: 15, maxAttempts: 8, backoff: "wechatpay" });
    const stats = await call("GET", "/v1/topics/pay");
    expect(stats.json).toEqual({
      topic: "pay",
      counts: { delayed: 1, ready: 0, reserved: 0, dead: 0 },
      oldestDueAt: added.json.job.dueAt,
      config: { ttr: 15, maxAttempts: 8, backoff: "wechatpay" },
    });
  });

  it("pauses a topic: pop hands nothing out until it is resumed", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "p" } });
    await call("PUT", "/v1/topics/t", { body: { paused: true } });
    expect((await call("POST", "/v1/topics/t/pop")).json.jobs).toEqual([]);
    await call("PUT", "/v1/topics/t", { body: { paused: false } });
    expect((await call("POST", "/v1/topics/t/pop")).json.jobs).toHaveLength(1);
  });

  it("lists topics by name in pages: cursor back as cursor, hasMore on each page", async () => {
    const { call } = testApp();
    for (const topic of ["c", "a", "b"]) await call("POST", "/v1/jobs", { body: { topic } });
    const names = (res: { json: { topics: { topic: string }[] } }) =>
      res.json.topics.map((t) => t.topic);
    const first = await call("GET", "/v1/topics?limit=2");
    expect(names(first)).toEqual(["a", "b"]);
    expect(first.json).toMatchObject({ cursor: "b", hasMore: true });
    const rest = await call("GET", `/v1/topics?limit=2&cursor=${first.json.cursor}`);
    expect(names(rest)).toEqual(["c"]);
    expect(rest.json.hasMore).toBe(false);
    expect(rest.json.cursor).toBeUndefined();
    // after, the parameter's former name, is still accepted; both at once are refused.
    const old = await call("GET", `/v1/topics?limit=2&after=${first.json.cursor}`);
    expect(old.json).toEqual(rest.json);
    const both = await call("GET", "/v1/topics?cursor=a&after=a");
    expect(both.status).toBe(400);
    expect(both.json.error).toMatchObject({
      code: "invalid_request",
      message: expect.stringContaining("cursor and after"),
    });
  });

  it("answers 400 for an invalid config", async () => {
    const { call } = testApp();
    const res = await call("PUT", "/v1/topics/t", { body: { ttr: 0, webhook: "x" } });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(/ttr/);
    expect((await call("PUT", "/v1/topics/t")).status).toBe(400);
  });
});
