// Ending or extending a reservation (finish, touch, release, bury) and its receipts.
import { describe, expect, it } from "vitest";
import { tick } from "../../src/index";
import { expectError } from "../support/expect";
import { popReceipt, testQueue } from "../support/queue";

describe("finish", () => {
  it("finishes with the receipt, and keeps the record for the retention window", async () => {
    const { queue, clock, redis, keys } = testQueue({ retention: 120, partitions: 1 });
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
      /another reservation holds the job now/,
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

  it("accepts a late finish after the lease was taken back, until another pop reserves the job", async () => {
    // docs, Decisions: a late finish. A tick takes the lease back (the job waits for its
    // backoff step, far enough to sit in a slot list) and the holder's finish still counts.
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "far", ttr: 1, backoff: 3600 });
    await queue.add({ topic: "t", id: "near", ttr: 1 });
    const jobs = await queue.pop("t", { count: 2 });
    const receipt = (id: string) => jobs.find((job) => job.id === id)?.receipt;
    clock.advance(5000);
    expect(await tick(queue)).toMatchObject({ expired: 2 });
    expect((await queue.topic("t")).counts).toEqual({ delayed: 1, ready: 1, reserved: 0, dead: 0 });
    await expectError(queue.touch("far", { receipt: receipt("far") }), "not_reserved");
    await expectError(queue.release("far", { receipt: receipt("far") }), "not_reserved");
    await expectError(queue.finish("far"), "not_reserved");
    await expectError(queue.finish("far", { receipt: "other.0" }), "stale_receipt");
    await queue.finish("far", { receipt: receipt("far") });
    await queue.finish("near", { receipt: receipt("near") });
    await queue.finish("near", { receipt: receipt("near") });
    expect(await queue.get("far")).toMatchObject({ state: "finished", endedAt: clock.now });
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
    clock.advance(7_200_000);
    expect(await queue.pop("t")).toEqual([]);
  });

  it("refuses a late finish once the job died", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 1, maxAttempts: 1 });
    const [job] = await queue.pop("t");
    clock.advance(5000);
    await tick(queue);
    await expectError(queue.finish("j", { receipt: job?.receipt }), "stale_receipt");
    expect((await queue.get("j")).state).toBe("dead");
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

describe("finishMany", () => {
  it("finishes what one pop gave, each job as finish would, in one script call", async () => {
    const { queue, clock, redis, keys } = testQueue({ retention: 120, partitions: 1 });
    for (const id of ["a", "b", "c"]) await queue.add({ topic: "t", id, body: id });
    const jobs = await queue.pop("t", { count: 3 });
    expect(jobs.map((job) => job.id)).toEqual(["a", "b", "c"]);
    clock.advance(5);
    expect(await queue.finishMany(jobs)).toEqual([
      { finished: true },
      { finished: true },
      { finished: true },
    ]);
    for (const id of ["a", "b", "c"]) {
      expect(await queue.get(id)).toMatchObject({
        state: "finished",
        endedAt: clock.now,
        body: id,
      });
      expect(await redis.pttl(keys.job(id))).toBeGreaterThan(115_000);
    }
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
    // Again, with the same receipts or none: finishing a finished job succeeds.
    expect(await queue.finishMany([...jobs, { id: "a" }])).toEqual(
      Array(4).fill({ finished: true }),
    );
  });

  it("decides each job on its own: one refused leaves the others finished", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "kept", ttr: 1 });
    await queue.add({ topic: "t", id: "lost", ttr: 1 });
    await queue.add({ topic: "t", id: "later", delay: 60 });
    const [kept, lost] = await queue.pop("t", { count: 2 });
    clock.advance(1000);
    const [again] = await queue.pop("t"); // "kept"'s lease ran out first: another consumer has it
    expect(again?.id).toBe("kept");
    const results = await queue.finishMany([
      { id: "kept", receipt: kept?.receipt },
      { id: "lost", receipt: lost?.receipt }, // a late finish, accepted: nobody reserved it since
      { id: "later" },
      { id: "nope" },
      { id: "bad id!" },
      { id: "x", receipt: "p1.x", extra: 1 } as never,
      // A job as pop gave it, but with its receipt misspelt: not a job, so checked strictly.
      { ...(lost as object), receipt: undefined, reciept: lost?.receipt } as never,
    ]);
    expect(results[0]).toMatchObject({
      error: { code: "stale_receipt", message: expect.stringMatching(/another reservation/) },
    });
    expect(results[1]).toEqual({ finished: true });
    expect(results[2]).toMatchObject({
      error: { code: "not_reserved", message: expect.stringMatching(/later is delayed/) },
    });
    expect(results[3]).toMatchObject({ error: { code: "job_not_found" } });
    expect(results[4]).toMatchObject({
      error: { code: "invalid_request", message: expect.stringMatching(/^Invalid jobs\.4/) },
    });
    expect(results[5]).toMatchObject({ error: { code: "invalid_request" } });
    expect(results[6]).toMatchObject({
      error: {
        code: "invalid_request",
        message: expect.stringMatching(/unknown fields .*"reciept"/),
      },
    });
    expect((await queue.get("kept")).state).toBe("reserved");
    expect((await queue.get("lost")).state).toBe("finished");
    expect((await queue.get("later")).state).toBe("delayed");
    await queue.finishMany([{ id: "kept", receipt: again?.receipt }]);
    expect((await queue.get("kept")).state).toBe("finished");
  });

  it("takes up to 100 jobs; none (a pop that found nothing) is nothing to do", async () => {
    const { queue } = testQueue();
    expect(await queue.finishMany(await queue.pop("t"))).toEqual([]);
    const many = Array.from({ length: 101 }, (_, i) => ({ id: `j${i}` }));
    await expectError(queue.finishMany(many), "invalid_request", /at most 100 jobs/);
  });

  it("answers a job of a topic outside the caller's scope as missing, and leaves it", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "shop-b.orders", id: "theirs" });
    await queue.add({ topic: "shop-a.orders", id: "mine" });
    await queue.pop("shop-b.orders");
    const scoped = queue.withScope(["shop-a.*"]);
    await scoped.pop("shop-a.orders");
    expect(await scoped.finishMany([{ id: "theirs" }, { id: "mine" }])).toEqual([
      { error: { code: "job_not_found", message: expect.stringMatching(/theirs does not exist/) } },
      { finished: true },
    ]);
    expect((await queue.get("theirs")).state).toBe("reserved");
  });
});

describe("finishAndPop", () => {
  it("finishes what the last pop gave and reserves the next, in one script call", async () => {
    const { queue, clock, stats } = testQueue({ retention: 120 });
    for (const id of ["a", "b", "c"]) await queue.add({ topic: "t", id, body: id });
    const first = await queue.pop("t");
    clock.advance(5);
    const before = (await stats()).requests.total;
    const next = await queue.finishAndPop("t", first, { count: 2 });
    expect((await stats()).requests.total - before).toBe(1);
    expect(next.finished).toEqual([{ finished: true }]);
    expect(next.jobs.map((job) => [job.id, job.state])).toEqual([
      ["b", "reserved"],
      ["c", "reserved"],
    ]);
    expect(await queue.get("a")).toMatchObject({ state: "finished", endedAt: clock.now });
    // The last round: nothing left to take, the jobs are finished all the same.
    const last = await queue.finishAndPop("t", next.jobs);
    expect(last).toEqual({ jobs: [], finished: [{ finished: true }, { finished: true }] });
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
    // No jobs to finish is a plain pop.
    await queue.add({ topic: "t", id: "d" });
    expect(await queue.finishAndPop("t", [])).toMatchObject({ jobs: [{ id: "d" }], finished: [] });
  });

  it("decides each job to finish on its own, and pops whatever they were", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "held" });
    await queue.add({ topic: "t", id: "waiting", delay: 60 });
    await queue.add({ topic: "t", id: "next" });
    const [held] = await queue.pop("t");
    const { jobs, finished } = await queue.finishAndPop("t", [
      held as NonNullable<typeof held>,
      { id: "waiting" },
      { id: "nope" },
      { id: "bad id!" },
    ]);
    expect(jobs.map((job) => job.id)).toEqual(["next"]);
    expect(finished[0]).toEqual({ finished: true });
    expect(finished[1]).toMatchObject({
      error: { code: "not_reserved", message: expect.stringMatching(/waiting is delayed/) },
    });
    expect(finished[2]).toMatchObject({ error: { code: "job_not_found" } });
    expect(finished[3]).toMatchObject({
      error: { code: "invalid_request", message: expect.stringMatching(/^Invalid finish\.3/) },
    });
    await expectError(
      queue.finishAndPop("t", Array(101).fill({ id: "x" })),
      "invalid_request",
      /finish: give at most 100/,
    );
  });

  it("finishes a job back in the ready list after its lease ran out, and does not pop it", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "slow", ttr: 1 });
    const [job] = await queue.pop("t");
    clock.advance(1500);
    // Its lease is over: the tick puts it back in the ready list for its next attempt. A late
    // finish is accepted, and this pop, which would otherwise take it from there, does not.
    expect(await tick(queue)).toMatchObject({ expired: 1 });
    expect((await queue.get("slow")).state).toBe("ready");
    const next = await queue.finishAndPop("t", [job as NonNullable<typeof job>]);
    expect(next).toEqual({ jobs: [], finished: [{ finished: true }] });
    expect((await queue.get("slow")).state).toBe("finished");
    expect(await queue.pop("t")).toEqual([]);
  });

  it("finishes the jobs even when the pop then waits in vain, or is refused", async () => {
    const { queue } = testQueue();
    for (const id of ["a", "b"]) await queue.add({ topic: "t", id });
    const [a, b] = await queue.pop("t", { count: 2 });
    const waited = await queue.finishAndPop("t", [a as NonNullable<typeof a>], { wait: 0.2 });
    expect(waited).toEqual({ jobs: [], finished: [{ finished: true }] });
    await queue.configure("hooks", { push: { url: "https://shop.example/hook" } });
    await expectError(queue.finishAndPop("hooks", [b as NonNullable<typeof b>]), "push_topic");
    expect((await queue.get("b")).state).toBe("finished");
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

  it("a lease whose time is up holds until a pop or tick takes it back (docs, Decisions)", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 1 });
    const [job] = await queue.pop("t");
    clock.advance(1500);
    // Nobody has looked at the topic since: its holder may still touch it, and keeps it.
    const touched = await queue.touch("j", { receipt: job?.receipt });
    expect(touched).toMatchObject({ state: "reserved", reservedUntil: clock.now + 1000 });
    expect(await queue.pop("t")).toEqual([]);
    // Once a pop has taken the job back, the reservation is gone.
    clock.advance(1500);
    expect(await queue.pop("t")).toMatchObject([{ id: "j", attempts: 2 }]);
    await expectError(queue.touch("j", { receipt: job?.receipt }), "stale_receipt");
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

describe("stale receipts say what happened", () => {
  it("names a release, a finish, a delete and a death (issue 8.16)", async () => {
    const { queue } = testQueue({ retention: 3600 });
    const cases: [string, (receipt: string) => Promise<unknown>, RegExp][] = [
      ["released", (r) => queue.release("j0", { receipt: r, delay: 60 }), /was released/],
      ["finished", (r) => queue.finish("j1", { receipt: r }), /finished under another/],
      ["deleted", () => queue.delete("j2"), /was deleted/],
      ["buried", (r) => queue.bury("j3", { receipt: r }), /is dead/],
    ];
    for (const [n] of cases.entries()) await queue.add({ topic: "s", id: `j${n}` });
    const popped = await queue.pop("s", { count: 4 });
    for (const [n, [, act, message]] of cases.entries()) {
      const receipt = popped.find((job) => job.id === `j${n}`)?.receipt as string;
      await act(receipt);
      await expectError(queue.touch(`j${n}`, { receipt: `${receipt}x` }), "stale_receipt", message);
    }
  });
});

describe("a pop's reservation, which lives in the lease zset alone", () => {
  it("reads as reserved wherever a job is read: get, the reserved list, a duplicate add", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", body: "b", ttr: 30 });
    clock.advance(5);
    const [job] = await queue.pop("t");
    const reserved = {
      state: "reserved",
      attempts: 1,
      receipt: job?.receipt,
      reservedUntil: clock.now + 30_000,
      body: "b",
    };
    expect(job).toMatchObject(reserved);
    expect(await queue.get("j")).toMatchObject(reserved);
    expect((await queue.list("t", { state: "reserved" })).jobs).toMatchObject([reserved]);
    expect(await queue.add({ topic: "t", id: "j", body: "other" })).toMatchObject({
      created: false,
      job: reserved,
    });
    await expectError(queue.add({ topic: "t", id: "j", replace: true }), "job_reserved");
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 1, dead: 0 });
  });

  it("touch moves only the lease; a delete counts the attempt", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 10 });
    const [job] = await queue.pop("t");
    clock.advance(4000);
    const touched = await queue.touch("j", { receipt: job?.receipt });
    expect(touched).toMatchObject({ receipt: job?.receipt, reservedUntil: clock.now + 10_000 });
    expect((await queue.get("j")).reservedUntil).toBe(clock.now + 10_000);
    await queue.delete("j");
    expect(await queue.get("j")).toMatchObject({ state: "deleted", attempts: 1 });
    expect((await queue.topic("t")).counts.reserved).toBe(0);
  });

  it("jobs added and popped alike get receipts of their own (found by the scope fuzzer)", async () => {
    const { queue } = testQueue();
    await queue.addBatch([
      { topic: "t", id: "a" },
      { topic: "t", id: "b" },
      { topic: "t", id: "order:42" },
    ]);
    const jobs = await queue.pop("t", { count: 3 });
    expect(new Set(jobs.map((job) => job.receipt)).size).toBe(3);
    const now = jobs[0]?.createdAt as number;
    expect(jobs.map((job) => job.receipt).sort()).toEqual(
      ["a", "b", "order:42"].map((id) => popReceipt(1, now, now, id)).sort(),
    );
  });

  it("a job added again under its id after a lapsed reservation gets a receipt of its own", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", ttr: 1, maxAttempts: 1 });
    const [first] = await queue.pop("t");
    clock.advance(1000);
    await tick(queue);
    expect((await queue.get("j")).state).toBe("dead");
    // Added anew with the same due time as before: the time added tells the reservations apart.
    await queue.add({ topic: "t", id: "j", runAt: clock.now - 1000, replace: true });
    const [second] = await queue.pop("t");
    expect(second?.receipt).not.toBe(first?.receipt);
    await expectError(queue.finish("j", { receipt: first?.receipt }), "stale_receipt");
    await queue.finish("j", { receipt: second?.receipt });
  });
});
