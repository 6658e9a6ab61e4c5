// The job lifecycle through the public API, against a real redis-server, with a test clock.
import { describe, expect, it } from "vitest";
import { tick } from "../../src/index";
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
    [{ topic: "t", delay: 1, runAt: 5 }, /runAt.*either delay or runAt/],
    [{ topic: "t", runAt: "tomorrow" }, /runAt/],
    [{ topic: "t", backoff: "weekly" }, /backoff/],
    [{ topic: "t", dealy: 5 }, /unknown field "dealy"/],
    [{ topic: "t", runAt: Date.now() + 2 * 365 * 86400_000 }, /runAt: must be at most a year/],
    [{ topic: "t", delay: 60, deadline: 1 }, /deadline: must not be before/],
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
});

describe("addBatch", () => {
  it("adds many jobs in one request with one result per item, in order", async () => {
    const { queue, stats } = testQueue();
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

describe("pop", () => {
  it("never hands a job out before its due time, and does at the exact millisecond", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", delay: 2.5 });
    clock.advance(2499);
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(1);
    const [job] = await queue.pop("t");
    expect(job).toMatchObject({ id: "j", state: "reserved", attempts: 1 });
    expect(job?.reservedUntil).toBe(clock.now + 60_000);
    expect(job?.receipt).toMatch(/^[0-9a-f]{12}\.0$/);
  });

  it("takes up to count jobs, earliest due first", async () => {
    const { queue, clock } = testQueue();
    for (const [id, delay] of [
      ["c", 3],
      ["a", 1],
      ["b", 2],
      ["later", 100],
    ] as const) {
      await queue.add({ topic: "t", id, delay });
    }
    clock.advance(3000);
    const jobs = await queue.pop("t", { count: 10 });
    expect(jobs.map((j) => j.id)).toEqual(["a", "b", "c"]);
    expect(new Set(jobs.map((j) => j.receipt)).size).toBe(3);
  });

  it("hands nothing out of a paused topic", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    await queue.configure("t", { paused: true });
    expect(await queue.pop("t")).toEqual([]);
    await queue.configure("t", { paused: false });
    expect(await queue.pop("t")).toHaveLength(1);
  });

  it("takes back an expired reservation by itself, with a new receipt", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 10 });
    const [first] = await queue.pop("t");
    clock.advance(9999);
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(1);
    const [second] = await queue.pop("t");
    expect(second).toMatchObject({ id: "j", attempts: 2 });
    expect(second?.receipt).not.toBe(first?.receipt);
  });

  it("lets a job whose deadline passed die instead of handing it out", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "late", deadline: clock.now + 1000 });
    clock.advance(1001);
    expect(await queue.pop("t")).toEqual([]);
    expect(await queue.get("late")).toMatchObject({ state: "dead", deadReason: "deadline" });
  });

  it("rejects a bad count", async () => {
    const { queue } = testQueue();
    await expectError(queue.pop("t", { count: 101 }), "invalid_request", /count/);
    await expectError(queue.pop("t", { count: 0 }), "invalid_request", /count/);
  });
});

describe("finish", () => {
  it("finishes with the receipt, and keeps the record for the retention window", async () => {
    const { queue, clock, redis, keys } = testQueue({ retention: 120 });
    await queue.add({ topic: "t", id: "j", body: "b" });
    const [job] = await queue.pop("t");
    clock.advance(5);
    await queue.finish("j", { receipt: job?.receipt });
    expect(await queue.get("j")).toMatchObject({
      state: "finished",
      endedAt: clock.now,
      body: "b",
    });
    const ttl = await redis.pttl(keys.job("j"));
    expect(ttl).toBeGreaterThan(115_000);
    expect(ttl).toBeLessThanOrEqual(120_000);
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
  });

  it("is idempotent for the same receipt or none, and refuses another receipt", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    const [job] = await queue.pop("t");
    await queue.finish("j", { receipt: job?.receipt });
    await queue.finish("j", { receipt: job?.receipt });
    await queue.finish("j");
    await expectError(queue.finish("j", { receipt: "other.0" }), "stale_receipt");
  });

  it("refuses a stale receipt after the job was handed out again", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 1 });
    const [first] = await queue.pop("t");
    clock.advance(1000);
    const [second] = await queue.pop("t");
    await expectError(
      queue.finish("j", { receipt: first?.receipt }),
      "stale_receipt",
      /lease ran out/,
    );
    await queue.finish("j", { receipt: second?.receipt });
  });

  it("accepts a late finish while nobody else has the job", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 1 });
    const [job] = await queue.pop("t");
    clock.advance(5000);
    await queue.finish("j", { receipt: job?.receipt });
    expect(await queue.pop("t")).toEqual([]);
  });

  it("finishes for whoever holds the job when no receipt is given", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    await queue.pop("t");
    await queue.finish("j");
    expect((await queue.get("j")).state).toBe("finished");
  });

  it("names the problem: unknown job, job not reserved", async () => {
    const { queue } = testQueue();
    await expectError(queue.finish("nope"), "job_not_found", /nope does not exist/);
    await queue.add({ topic: "t", id: "d", delay: 9 });
    await expectError(queue.finish("d"), "not_reserved", /d is delayed, not reserved/);
    await queue.add({ topic: "t", id: "r" });
    await expectError(queue.touch("r"), "not_reserved", /r is ready, not reserved/);
    await expectError(queue.finish("bad id!"), "invalid_request", /job id/);
  });
});

describe("touch, release, bury", () => {
  it("touch extends the lease from now", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 10 });
    const [job] = await queue.pop("t");
    clock.advance(8000);
    const touched = await queue.touch("j", { receipt: job?.receipt });
    expect(touched.reservedUntil).toBe(clock.now + 10_000);
    expect(touched.receipt).toBe(job?.receipt);
    clock.advance(8000);
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(2000);
    expect(await queue.pop("t")).toHaveLength(1);
  });

  it("release with a delay puts the job back to wait that long", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    await queue.pop("t");
    const released = await queue.release("j", { delay: 30 });
    expect(released).toMatchObject({ state: "delayed", dueAt: clock.now + 30_000, attempts: 1 });
    expect(released.receipt).toBeUndefined();
    clock.advance(29_999);
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(1);
    expect((await queue.pop("t"))[0]?.attempts).toBe(2);
  });

  it("release without a delay waits the backoff step; attempts used up means dead", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", backoff: [5, 20], maxAttempts: 3 });
    await queue.pop("t");
    expect((await queue.release("j")).dueAt).toBe(clock.now + 5000);
    clock.advance(5000);
    await queue.pop("t");
    expect((await queue.release("j")).dueAt).toBe(clock.now + 20_000);
    clock.advance(20_000);
    await queue.pop("t");
    const dead = await queue.release("j", { delay: 1 });
    expect(dead).toMatchObject({ state: "dead", deadReason: "attempts", attempts: 3 });
    expect((await queue.topic("t")).counts.dead).toBe(1);
  });

  it("release dies instead of retrying past the deadline", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", deadline: clock.now + 10_000 });
    await queue.pop("t");
    expect((await queue.release("j", { delay: 10 })).state).toBe("delayed");
    clock.advance(10_000);
    await queue.pop("t");
    expect(await queue.release("j", { delay: 0.001 })).toMatchObject({
      state: "dead",
      deadReason: "deadline",
    });
  });

  it("bury moves a reserved job to the dead letter", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    const [job] = await queue.pop("t");
    await expectError(queue.bury("j", { receipt: "x.1" }), "stale_receipt");
    const buried = await queue.bury("j", { receipt: job?.receipt });
    expect(buried).toMatchObject({ state: "dead", deadReason: "buried", endedAt: clock.now });
    const page = await queue.list("t", { state: "dead" });
    expect(page.jobs.map((j) => j.id)).toEqual(["j"]);
  });
});

describe("backoff schedules", () => {
  async function waits(backoff: unknown, failures: number, maxAttempts = 20) {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", backoff: backoff as never, maxAttempts, ttr: 1 });
    const out: number[] = [];
    for (let i = 0; i < failures; i++) {
      const [job] = await queue.pop("t");
      if (!job) throw new Error("expected a job");
      clock.advance(1000); // the lease runs out: a failed attempt
      await tick(queue);
      const after = await queue.get("j");
      out.push((after.dueAt - clock.now) / 1000);
      clock.set(after.dueAt);
    }
    return out;
  }

  it("follows WeChat Pay's schedule and repeats its last step", async () => {
    expect(await waits("wechatpay", 9)).toEqual([5, 30, 60, 180, 300, 600, 1800, 1800, 1800]);
  });

  it("follows the Alipay and Youzan schedules", async () => {
    expect(await waits("alipay", 7)).toEqual([240, 600, 600, 3600, 7200, 21600, 54000]);
    expect(await waits("youzan", 4)).toEqual([0, 0, 120, 600]);
  });

  it("grows exponentially up to its cap", async () => {
    expect(await waits({ type: "exponential", delay: 1, factor: 3, max: 20 }, 5)).toEqual([
      1, 3, 9, 20, 20,
    ]);
  });

  it("waits a fixed time for a number, and nothing without a backoff", async () => {
    expect(await waits(2.5, 3)).toEqual([2.5, 2.5, 2.5]);
    expect(await waits(undefined, 2)).toEqual([0, 0]);
  });
});

describe("delete", () => {
  it("deletes a job in any state, and it is never handed out afterwards", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "delayed", delay: 5 });
    await queue.add({ topic: "t", id: "ready" });
    await queue.add({ topic: "t", id: "reserved" });
    await queue.add({ topic: "t", id: "dead" });
    await queue.pop("t", { count: 1 }); // "ready" ... takes the earliest due
    const reserved = await queue.list("t", { state: "reserved" });
    const heldId = reserved.jobs[0]?.id as string;
    await queue.pop("t", { count: 1 });
    const [other] = (await queue.list("t", { state: "reserved" })).jobs.filter(
      (j) => j.id !== heldId,
    );
    await queue.bury(other?.id as string);
    for (const id of ["delayed", "ready", "reserved", "dead"]) await queue.delete(id);
    expect((await queue.get("delayed")).state).toBe("deleted");
    clock.advance(10_000);
    expect(await queue.pop("t", { count: 100 })).toEqual([]);
    await expectError(queue.finish(heldId), "not_reserved", /deleted/);
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
  });

  it("is idempotent, and unknown ids are not found", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    await queue.delete("j");
    await queue.delete("j");
    await expectError(queue.delete("nope"), "job_not_found");
  });
});

describe("dead letter", () => {
  async function deadJobs(n: number) {
    const test = testQueue();
    await test.queue.addBatch(Array.from({ length: n }, (_, i) => ({ topic: "t", id: `d${i}` })));
    for (const job of await test.queue.pop("t", { count: n })) {
      test.clock.advance(1);
      await test.queue.bury(job.id);
    }
    return test;
  }

  it("kicks by count, oldest first, with attempts reset and ready at once", async () => {
    const { queue } = await deadJobs(3);
    expect(await queue.kick("t", { count: 2 })).toBe(2);
    const ready = await queue.pop("t", { count: 10 });
    expect(ready.map((j) => j.id)).toEqual(["d0", "d1"]);
    expect(ready.every((j) => j.attempts === 1)).toBe(true);
    expect((await queue.topic("t")).counts.dead).toBe(1);
  });

  it("kicks by ids and skips ids that are not dead jobs of the topic", async () => {
    const { queue } = await deadJobs(3);
    await queue.add({ topic: "other", id: "x" });
    expect(await queue.kick("t", { ids: ["d2", "x", "nope"] })).toBe(1);
    expect(await queue.kick("t")).toBe(2);
  });

  it("pages through dead jobs and deletes them", async () => {
    const { queue } = await deadJobs(5);
    const first = await queue.list("t", { state: "dead", limit: 2 });
    expect(first.jobs.map((j) => j.id)).toEqual(["d0", "d1"]);
    const second = await queue.list("t", { state: "dead", limit: 2, cursor: first.cursor });
    expect(second.jobs.map((j) => j.id)).toEqual(["d2", "d3"]);
    const last = await queue.list("t", { state: "dead", limit: 2, cursor: second.cursor });
    expect(last).toEqual({ jobs: [expect.objectContaining({ id: "d4" })] });
    // A full last page says so: no cursor to an empty page.
    expect((await queue.list("t", { state: "dead", limit: 5 })).cursor).toBeUndefined();
    expect(await queue.deleteDead("t", { ids: ["d0"] })).toBe(1);
    expect(await queue.deleteDead("t", { count: 2 })).toBe(2);
    expect((await queue.get("d0")).state).toBe("deleted");
    expect((await queue.topic("t")).counts.dead).toBe(2);
  });

  it("refuses ids and count together", async () => {
    const { queue } = testQueue();
    await expectError(queue.kick("t", { ids: ["a"], count: 1 }), "invalid_request", /either/);
  });
});

describe("topics", () => {
  it("counts jobs per state, with the earliest due time and the config", async () => {
    const { queue, clock } = testQueue();
    await queue.configure("t", { ttr: 9 });
    await queue.addBatch([
      { topic: "t", id: "a", delay: 10 },
      { topic: "t", id: "b", delay: 20 },
      { topic: "t", id: "c" },
      { topic: "t", id: "d" },
    ]);
    await queue.pop("t");
    clock.advance(15_000);
    expect(await queue.topic("t")).toEqual({
      topic: "t",
      counts: { delayed: 1, ready: 2, reserved: 1, dead: 0 },
      oldestDueAt: clock.now - 15_000,
      config: { ttr: 9 },
    });
  });

  it("lists topics by name in pages", async () => {
    const { queue } = testQueue();
    for (const topic of ["b", "a", "c"]) await queue.add({ topic });
    const first = await queue.topics({ limit: 2 });
    expect(first.topics.map((t) => t.topic)).toEqual(["a", "b"]);
    const rest = await queue.topics({ limit: 2, after: first.cursor });
    expect(rest.topics.map((t) => t.topic)).toEqual(["c"]);
    expect(rest.cursor).toBeUndefined();
    expect((await queue.topics({ limit: 3 })).cursor).toBeUndefined();
  });

  it("lists delayed and ready jobs split at now", async () => {
    const { queue, clock } = testQueue();
    await queue.addBatch([
      { topic: "t", id: "soon", delay: 1 },
      { topic: "t", id: "later", delay: 100 },
    ]);
    clock.advance(1000);
    expect((await queue.list("t", { state: "ready" })).jobs.map((j) => j.id)).toEqual(["soon"]);
    expect((await queue.list("t", { state: "delayed" })).jobs.map((j) => j.id)).toEqual(["later"]);
  });
});

describe("tick", () => {
  it("promotes due jobs, takes back expired leases and sends exhausted jobs dead", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "a", id: "due", delay: 1 });
    await queue.add({ topic: "b", id: "lease", ttr: 1 });
    await queue.add({ topic: "b", id: "last", ttr: 1, maxAttempts: 1 });
    await queue.pop("b", { count: 2 });
    clock.advance(1000);
    expect(await tick(queue)).toEqual({ promoted: 1, expired: 2, died: 1, slices: 1, more: false });
    expect((await queue.topic("a")).counts.ready).toBe(1);
    expect((await queue.get("lease")).state).toBe("ready");
    expect((await queue.get("last")).deadReason).toBe("attempts");
    expect(await tick(queue)).toEqual({ promoted: 0, expired: 0, died: 0, slices: 1, more: false });
  });
});
