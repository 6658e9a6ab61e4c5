// The client against the real app on a real queue: every call's request and answer, and real HTTP.
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { describe, expect, it } from "vitest";
import { createClient, type Job } from "../../src/client";
import { ADMIN, testApp } from "../support/app";
import { BASE, brokenApp, failure, recording, setup, UUID } from "./support";

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

  it("finishMany finishes what one pop gave in one request, sending only ids and receipts", async () => {
    const { client, sent } = setup();
    await client.addBatch([
      { topic: "many", id: "m-1", body: { big: "x".repeat(100) } },
      { topic: "many", id: "m-2" },
    ]);
    const jobs = await client.pop("many", { count: 2 });
    const before = sent.length;
    const results = await client.finishMany([...jobs, { id: "m-9" }]);
    expect(results).toEqual([
      { finished: true },
      { finished: true },
      { error: { code: "job_not_found", message: expect.stringMatching(/m-9 does not exist/) } },
    ]);
    expect(sent.length - before).toBe(1);
    expect(sent[before]).toMatchObject({ method: "POST", url: `${BASE}/v1/jobs/finish` });
    expect(sent[before]?.body).toEqual({
      jobs: [...jobs.map(({ id, receipt }) => ({ id, receipt })), { id: "m-9" }],
    });
    expect((await client.get("m-1")).state).toBe("finished");
    // An item made by hand goes as it is: a misspelt receipt is refused, not dropped.
    const [refused] = await client.finishMany([{ id: "m-9", reciept: "p1.x" } as never]);
    expect(refused).toMatchObject({
      error: { code: "invalid_request", message: expect.stringMatching(/"reciept"/) },
    });
    // What an empty pop gave: nothing to send.
    expect(await client.finishMany(await client.pop("many"))).toEqual([]);
    expect(sent.length - before).toBe(4); // the finish, the get, the refused finish, the pop
  });

  it("finishAndPop finishes the last pop's jobs and takes the next in one request", async () => {
    const { client, sent } = setup();
    for (const id of ["n-1", "n-2"]) await client.add({ topic: "next", id, body: { id } });
    let held = await client.pop("next");
    const before = sent.length;
    const next = await client.finishAndPop("next", held, { wait: 1 });
    expect(sent.length - before).toBe(1);
    expect(sent[before]).toMatchObject({ method: "POST", url: `${BASE}/v1/topics/next/pop` });
    expect(sent[before]?.body).toEqual({
      wait: 1,
      finish: held.map(({ id, receipt }) => ({ id, receipt })),
    });
    expect(next.finished).toEqual([{ finished: true }]);
    expect(next.jobs.map((job) => [job.id, job.body])).toEqual([["n-2", { id: "n-2" }]]);
    held = next.jobs;
    expect(await client.finishAndPop("next", held)).toEqual({
      jobs: [],
      finished: [{ finished: true }],
    });
    expect((await client.get("n-2")).state).toBe("finished");
  });

  it("finishMany sends a job read with get as it is, so a misspelt receipt is refused", async () => {
    const { client } = setup();
    await client.add({ topic: "got", id: "g-1" });
    // Read while ready: job-shaped, without a receipt.
    const got = await client.get("g-1");
    expect(got).toMatchObject({ state: "ready" });
    expect(got.receipt).toBeUndefined();
    const [popped] = await client.pop("got");
    // Not cut down to its id, which would finish the job for whoever holds it.
    const [refused] = await client.finishMany([{ ...got, reciept: popped?.receipt } as never]);
    expect(refused).toMatchObject({
      error: { code: "invalid_request", message: expect.stringMatching(/"reciept"/) },
    });
    expect((await client.get("g-1")).state).toBe("reserved");
    // The same job with its receipt spelt right finishes.
    expect(await client.finishMany([{ ...got, receipt: popped?.receipt }])).toEqual([
      { finished: true },
    ]);
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

  it("topics pages by name; the cursor goes back as cursor (after, its former name, too)", async () => {
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
      hasMore: true,
    });
    const second = await client.topics({ cursor: first.cursor, limit: 1 });
    expect(second.topics.map((s) => s.topic)).toEqual(["a-2"]);
    expect(second.hasMore).toBe(false);
    const all = await client.topics();
    expect(all.topics.map((s) => s.topic)).toEqual(["a-1", "a-2"]);
    expect(all.cursor).toBeUndefined();
    expect(all.hasMore).toBe(false);
    const deprecated = await client.topics({ after: first.cursor, limit: 1 });
    expect(deprecated.topics.map((s) => s.topic)).toEqual(["a-2"]);
    expect(sent.slice(-4).map((s) => s.url)).toEqual([
      `${BASE}/v1/topics?limit=1`,
      `${BASE}/v1/topics?cursor=a-1&limit=1`,
      `${BASE}/v1/topics`,
      `${BASE}/v1/topics?cursor=a-1&limit=1`,
    ]);
  });

  it("listJobs pages through one state", async () => {
    const { client } = setup();
    await client.addBatch(["j-1", "j-2", "j-3"].map((id) => ({ topic: "list", id })));
    await client.add({ topic: "list", id: "j-4", delay: 60 });
    const first = await client.listJobs("list", { state: "ready", limit: 2 });
    expect(first.jobs).toHaveLength(2);
    expect(first.cursor).toEqual(expect.any(String));
    expect(first.hasMore).toBe(true);
    const second = await client.listJobs("list", {
      state: "ready",
      limit: 2,
      cursor: first.cursor,
    });
    expect([...first.jobs, ...second.jobs].map((j) => j.id).sort()).toEqual(["j-1", "j-2", "j-3"]);
    expect(second.cursor).toBeUndefined();
    expect(second.hasMore).toBe(false);
    const delayed = await client.listJobs("list", { state: "delayed" });
    expect(delayed).toEqual({
      jobs: [expect.objectContaining({ id: "j-4", state: "delayed" })],
      hasMore: false,
    });
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
    expect(added).toEqual({ success: true, error: "", id: sent[0]?.body?.id, created: true });
    expect(sent[0]?.body?.id).toMatch(UUID);
    const results = await client.command([
      { command: "pop", topic: "cmd" },
      { command: "finish", id: added.id as string },
      { command: "get", id: "nope" },
    ]);
    expect(results).toEqual([
      { success: true, error: "", id: added.id, value: { k: 1 }, receipt: expect.any(String) },
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
      message: expect.stringContaining("Redis does not answer"),
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
