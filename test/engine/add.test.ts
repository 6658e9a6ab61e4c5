// Adding jobs (add, addBatch): due times, defaults, idempotency, replace, refused input.
import { describe, expect, it } from "vitest";
import { expectError } from "../support/expect";
import { testQueue } from "../support/queue";

describe("add", () => {
  it("adds a delayed job with its due time and defaults", async () => {
    const { queue, clock } = testQueue();
    const { created, job } = await queue.add({
      topic: "orders",
      id: "o1",
      body: { n: 1 },
      delay: 1.5,
    });
    expect(created).toBe(true);
    expect(job).toEqual({
      id: "o1",
      topic: "orders",
      state: "delayed",
      body: { n: 1 },
      dueAt: clock.now + 1500,
      ttr: 60,
      attempts: 0,
      maxAttempts: 10,
      createdAt: clock.now,
    });
    expect(await queue.get("o1")).toEqual(job);
  });

  it("takes runAt as unix ms or ISO-8601, and a past runAt is ready at once", async () => {
    const { queue, clock } = testQueue();
    const at = clock.now + 10_000;
    expect((await queue.add({ topic: "t", id: "ms", runAt: at })).job.dueAt).toBe(at);
    const iso = new Date(at).toISOString().replace("Z", "+00:00");
    expect((await queue.add({ topic: "t", id: "iso", runAt: iso })).job.dueAt).toBe(at);
    const past = await queue.add({ topic: "t", id: "past", runAt: clock.now - 1 });
    expect(past.job.state).toBe("ready");
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["past"]);
  });

  it("generates an id when none is given", async () => {
    const { queue } = testQueue();
    const { job } = await queue.add({ topic: "t", body: "x" });
    expect(job.id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await queue.get(job.id)).body).toBe("x");
  });

  it("stores any JSON body exactly, including strings that look like numbers", async () => {
    const { queue } = testQueue();
    const bodies = ["123", 123, null, true, "", [1, "ü", { a: null }], { "😀": "中文", n: -0.5 }];
    for (const [i, body] of bodies.entries()) {
      await queue.add({ topic: "t", id: `b${i}`, body });
      expect((await queue.get(`b${i}`)).body).toEqual(body);
    }
    const popped = await queue.pop("t", { count: 100 });
    expect(popped.map((j) => j.body)).toEqual(bodies);
  });

  it("works with a client that deserializes replies (the @upstash/redis default)", async () => {
    const { queue } = testQueue({ deserializingClient: true });
    await queue.add({ topic: "123", id: "456", body: "789" });
    expect((await queue.get("456")).body).toBe("789");
    const [job] = await queue.pop("123");
    expect(job?.body).toBe("789");
    expect((await queue.topic("123")).topic).toBe("123");
  });

  it("is idempotent by id: re-adding returns the stored job unchanged", async () => {
    const { queue, clock } = testQueue();
    const first = await queue.add({ topic: "t", id: "same", body: 1, delay: 10 });
    clock.advance(1000);
    const again = await queue.add({ topic: "t", id: "same", body: 2, delay: 99 });
    expect(again).toEqual({ created: false, job: first.job });
  });

  it("refuses the same id in another topic", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "a", id: "shared" });
    await expectError(queue.add({ topic: "b", id: "shared" }), "job_exists", /another topic/);
    await expectError(
      queue.add({ topic: "b", id: "shared", replace: true }),
      "job_exists",
      /another topic/,
    );
    expect((await queue.get("shared")).topic).toBe("a");
  });

  it("replaces a waiting job: new body and due time, attempts reset, old slot gone", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "r", body: "old", delay: 1 });
    const { created, job } = await queue.add({
      topic: "t",
      id: "r",
      body: "new",
      delay: 5,
      replace: true,
    });
    expect(created).toBe(true);
    expect(job).toMatchObject({ body: "new", dueAt: clock.now + 5000, state: "delayed" });
    clock.advance(1000);
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(4000);
    expect((await queue.pop("t")).map((j) => j.body)).toEqual(["new"]);
  });

  it("refuses to replace a reserved job, and replaces a dead one", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "busy" });
    await queue.pop("t");
    await expectError(queue.add({ topic: "t", id: "busy", replace: true }), "job_reserved");
    await queue.bury("busy");
    expect((await queue.topic("t")).counts.dead).toBe(1);
    await queue.add({ topic: "t", id: "busy", body: 2, replace: true });
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 1, reserved: 0, dead: 0 });
  });

  it("takes ttr, maxAttempts and backoff from the topic's config, then from the defaults", async () => {
    const { queue } = testQueue({ defaults: { ttr: 5, maxAttempts: 2, backoff: [1] } });
    expect((await queue.add({ topic: "plain", id: "p" })).job).toMatchObject({
      ttr: 5,
      maxAttempts: 2,
      backoff: [1],
    });
    await queue.configure("cfg", { ttr: 30, maxAttempts: 7, backoff: "wechatpay" });
    expect((await queue.add({ topic: "cfg", id: "c" })).job).toMatchObject({
      ttr: 30,
      maxAttempts: 7,
      backoff: "wechatpay",
    });
    const own = await queue.add({
      topic: "cfg",
      id: "o",
      ttr: 1,
      maxAttempts: 1,
      backoff: { type: "exponential", delay: 2 },
    });
    expect(own.job).toMatchObject({
      ttr: 1,
      maxAttempts: 1,
      backoff: { type: "exponential", delay: 2, factor: 2 },
    });
  });

  it.each([
    [{ topic: "bad topic" }, /topic/],
    [{ topic: "t", id: "x".repeat(129) }, /id/],
    [{ topic: "t", id: "a/b" }, /id/],
    [{ topic: "t", id: ".." }, /id/],
    [{ topic: "." }, /topic/],
    [{ topic: "t", delay: -1 }, /delay/],
    [{ topic: "t", delay: 400 * 86400 }, /delay/],
    [{ topic: "t", ttr: 0 }, /ttr/],
    [{ topic: "t", ttr: 1.5 }, /ttr/],
    [{ topic: "t", maxAttempts: 0 }, /maxAttempts/],
    [{ topic: "t", delay: 1, runAt: 1_800_000_005_000 }, /runAt.*either delay or runAt/],
    [{ topic: "t", runAt: "tomorrow" }, /runAt/],
    [{ topic: "t", backoff: "weekly" }, /backoff/],
    [{ topic: "t", dealy: 5 }, /unknown field "dealy"/],
    [{ topic: "t", runAt: Date.now() + 2 * 365 * 86400_000 }, /runAt: must be at most a year/],
    [{ topic: "t", delay: 60, deadline: 1_800_000_000_000 }, /deadline: must not be before/],
  ])("rejects invalid input %j", async (input, message) => {
    const { queue, keys, redis } = testQueue();
    await expectError(queue.add(input as never), "invalid_request", message);
    expect(await redis.exists(keys.topics)).toBe(0);
  });

  it("refuses a body over the limit and stores nothing", async () => {
    const { queue } = testQueue({ maxBodyBytes: 1000 });
    await expectError(
      queue.add({ topic: "t", id: "big", body: "é".repeat(500) }),
      "payload_too_large",
      /1002 bytes.*limit is 1000/,
    );
    await expectError(queue.get("big"), "job_not_found");
  });

  it("takes a body of exactly the limit in bytes, whatever its characters, and refuses one byte more", async () => {
    const { queue } = testQueue({ maxBodyBytes: 1000 });
    // As JSON: 998 + 2 quotes; 332 × 3 bytes (€) + 2 + 2; 499 × 2 (é) + 2.
    for (const [id, body] of [
      ["ascii", "x".repeat(998)],
      ["euro", `${"€".repeat(332)}xx`],
      ["e", "é".repeat(499)],
    ]) {
      expect((await queue.add({ topic: "t", id, body })).created).toBe(true);
    }
    await expectError(
      queue.add({ topic: "t", id: "over", body: `${"€".repeat(332)}xxx` }),
      "payload_too_large",
      /1001 bytes.*limit is 1000/,
    );
  });
});

describe("addBatch", () => {
  it("adds many jobs in one request with one result per item, in order", async () => {
    // One request counted: one keyspace (with partitions, a call per partition written).
    const { queue, stats } = testQueue({ partitions: 1 });
    const results = await queue.addBatch([
      { topic: "t", id: "a", delay: 1 },
      { topic: "bad topic" },
      { topic: "t", id: "a" },
      { topic: "u", id: "b" },
    ]);
    expect(results.map((r) => ("error" in r ? r.error.code : r.created))).toEqual([
      true,
      "invalid_request",
      false,
      true,
    ]);
    expect((await stats()).requests.total).toBe(1);
  });

  it("indexes an id added and replaced in one batch once, at its last due time", async () => {
    // Found by the model test: the id sat in both the ready list and the delay bucket.
    const { queue, clock } = testQueue();
    await queue.addBatch([
      { topic: "t", id: "x", body: 1 },
      { topic: "t", id: "x", body: 2, delay: 1, replace: true },
    ]);
    expect((await queue.topic("t")).counts).toMatchObject({ delayed: 1, ready: 0 });
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(1000);
    expect((await queue.pop("t", { count: 10 })).map((j) => j.body)).toEqual([2]);
  });

  it("refuses an empty or oversized batch", async () => {
    const { queue } = testQueue();
    await expectError(queue.addBatch([]), "invalid_request", /1 to 1000/);
    await expectError(queue.addBatch(new Array(1001).fill({ topic: "t" })), "invalid_request");
  });
});
