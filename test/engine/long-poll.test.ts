// Long-polling pop on the real clock: wakes at the due time, on writes, and stays cheap.
import { describe, expect, it } from "vitest";
import { DelayQueue } from "../../src/index";
import { testClock } from "../support/queue";
import { testRedis } from "../support/redis";

function queues(pollIntervalMs = 1000) {
  const prefix = `lp${crypto.randomUUID().slice(0, 8)}`;
  const consumer = testRedis();
  const make = (redis = testRedis().redis) => new DelayQueue({ redis, prefix, pollIntervalMs });
  return { consumer: make(consumer.redis), stats: consumer.stats, other: make() };
}

describe("pop with wait", () => {
  it("returns a delayed job as soon as it is due, never before", async () => {
    const { consumer, other } = queues();
    const { job } = await other.add({ topic: "t", id: "soon", delay: 0.3 });
    const jobs = await consumer.pop("t", { wait: 5 });
    const late = Date.now() - job.dueAt;
    expect(jobs.map((j) => j.id)).toEqual(["soon"]);
    expect(late).toBeGreaterThanOrEqual(0);
    // Woken by the due time it learned from pop, not by the 1 s poll (which would be ~700 ms late).
    expect(late).toBeLessThan(600);
  });

  it("wakes at once for a job added through the same queue object", async () => {
    const { consumer } = queues(60_000);
    const started = Date.now();
    const waiting = consumer.pop("t", { wait: 10 });
    await new Promise((r) => setTimeout(r, 50));
    await consumer.add({ topic: "t", id: "now" });
    expect((await waiting).map((j) => j.id)).toEqual(["now"]);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("sees a job added elsewhere within one poll interval", async () => {
    const { consumer, other } = queues(200);
    const waiting = consumer.pop("t", { wait: 10 });
    await new Promise((r) => setTimeout(r, 100));
    const added = Date.now();
    await other.add({ topic: "t", id: "elsewhere" });
    expect((await waiting).map((j) => j.id)).toEqual(["elsewhere"]);
    expect(Date.now() - added).toBeLessThan(1500);
  });

  it("sees a job added elsewhere to a topic in use, by a caller whose clock runs 20 s ahead", async () => {
    const prefix = `lp${crypto.randomUUID().slice(0, 8)}`;
    const consumer = new DelayQueue({ redis: testRedis().redis, prefix, pollIntervalMs: 200 });
    const ahead = new DelayQueue({
      redis: testRedis().redis,
      prefix,
      clock: () => Date.now() + 20_000,
    });
    // The topic is in use: its first add registered it, so later adds are not a fresh topic's.
    await ahead.add({ topic: "busy", id: "first", runAt: Date.now() });
    expect(await consumer.pop("busy")).toHaveLength(1);
    const waiting = consumer.pop("busy", { wait: 10 });
    await new Promise((r) => setTimeout(r, 100));
    const added = Date.now();
    // Adds bump the change counter only while a caller may be waiting (the pop registered one).
    await ahead.add({ topic: "busy", id: "later", runAt: Date.now() });
    expect((await waiting).map((j) => j.id)).toEqual(["later"]);
    expect(Date.now() - added).toBeLessThan(1500);
  });

  it("wakes no other waiter once the one job that fell due is taken", async () => {
    const { consumer, stats } = queues(60_000);
    const waits = [1, 2, 3].map(() => consumer.pop("t", { wait: 2 }));
    await new Promise((r) => setTimeout(r, 100));
    await consumer.add({ topic: "t", id: "one", delay: 0.3 });
    const got = (await Promise.all(waits)).flat();
    expect(got.map((j) => j.id)).toEqual(["one"]);
    // Three pops that found nothing, the add, and one pop at the due time (commands sent: the
    // client may pipeline concurrent ones into one request), which knew that
    // nothing more was ready (before, it passed a wake-up on and a fourth pop found nothing).
    expect((await stats()).commands).toBe(5);
  });

  it("wakes waiter after waiter while the jobs last, when another process added them", async () => {
    const { consumer, other } = queues(200);
    const waits = [1, 2, 3].map(() => consumer.pop("t", { wait: 5 }));
    await new Promise((r) => setTimeout(r, 100));
    const added = Date.now();
    await other.addBatch(["a", "b", "c"].map((id) => ({ topic: "t", id })));
    const got = await Promise.all(waits);
    expect(got.map((jobs) => jobs.length)).toEqual([1, 1, 1]);
    // One counter read wakes one waiter; each pop that says more is ready wakes the next.
    expect(Date.now() - added).toBeLessThan(1500);
  });

  it("costs about one request per poll interval while nothing happens", async () => {
    const { consumer, stats } = queues(250);
    const started = Date.now();
    expect(await consumer.pop("empty", { wait: 2 })).toEqual([]);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(2000);
    const { requests } = await stats();
    // One pop, then one GET of the change counter per 250 ms nap.
    expect(requests.total).toBeLessThanOrEqual(1 + Math.ceil(waited / 250));
    expect(requests.total).toBeGreaterThanOrEqual(4);
  });

  it("a waiter keeps its own due time once another waiter took an earlier one (found by the bench)", async () => {
    // The poll interval is out of reach: only due times wake these waiters.
    const { consumer, other } = queues(60_000);
    // Two consumers wait; a job written through this queue object tells them when it is due.
    const first = consumer.pop("t", { wait: 5 });
    const second = consumer.pop("t", { wait: 5 });
    await new Promise((r) => setTimeout(r, 50));
    await consumer.add({ topic: "t", id: "a", delay: 0.2 });
    // One waiter wakes for it; the other keeps sleeping (no herd).
    const got = await Promise.race([first, second]);
    expect(got.map((j) => j.id)).toEqual(["a"]);
    // Another process adds a job due a little later; a new pop learns its due time from Redis
    // and must wake for it, not for the due time the first waiter already took.
    const { job } = await other.add({ topic: "t", id: "b", delay: 0.3 });
    const jobs = await consumer.pop("t", { wait: 3 });
    expect(jobs.map((j) => j.id)).toEqual(["b"]);
    expect(Date.now() - job.dueAt).toBeLessThan(1000);
    await Promise.all([first, second]);
  });

  it("a waiter that gave its due time up wakes for the next one, which the pop that took the job told", async () => {
    // Only due times wake these waiters: the poll interval is out of reach, and the jobs were
    // added by another process before anyone waited, so no add here hints at them.
    const { consumer, other } = queues(60_000);
    await other.add({ topic: "t", id: "a", delay: 0.3 });
    const { job: second } = await other.add({ topic: "t", id: "b", delay: 0.9 });
    const waits = [consumer.pop("t", { wait: 5 }), consumer.pop("t", { wait: 5 })];
    // One waiter takes "a"; its caller holds it. The other had given a's due time up to it, and
    // learns b's from that pop (before, it slept until its wait ran out).
    const got = await Promise.all(waits);
    expect(
      got
        .flat()
        .map((j) => j.id)
        .sort(),
    ).toEqual(["a", "b"]);
    expect(Date.now() - second.dueAt).toBeLessThan(1500);
  });

  it("a caller that pops for a due time that has come claims it, so a waiter asleep does not pop for it too", async () => {
    const prefix = `lp${crypto.randomUUID().slice(0, 8)}`;
    const clock = testClock();
    const consumer = testRedis();
    const queue = new DelayQueue({
      redis: consumer.redis,
      prefix,
      pollIntervalMs: 60_000,
      clock: () => clock.now,
    });
    await queue.addBatch([
      { topic: "t", id: "a", delay: 1 },
      { topic: "t", id: "b", delay: 2 },
    ]);
    // Two consumers of one process wait; at a's due time one of them takes it, and its pop
    // says b is next (the other waiter is told so too).
    const waits = [queue.pop("t", { wait: 2 }), queue.pop("t", { wait: 2 })];
    await new Promise((r) => setTimeout(r, 100));
    clock.advance(1000);
    expect((await Promise.race(waits)).map((j) => j.id)).toEqual(["a"]);
    const before = (await consumer.stats()).commands;
    // b falls due, and the caller of "a" is back before the waiter's next look at the clock:
    // its pop takes b, and the waiter, finding the due time taken, does not pop for nothing.
    clock.advance(1000);
    const again = queue.pop("t", { wait: 2 });
    const got = (await Promise.all([...waits, again])).flat();
    expect(got.map((j) => j.id).sort()).toEqual(["a", "b"]);
    expect((await consumer.stats()).commands - before).toBe(1);
  });

  it("reads the change counter no sooner than an interval after its pop (which just read it)", async () => {
    const { consumer, stats } = queues(600);
    expect(await consumer.pop("empty", { wait: 1 })).toEqual([]);
    // The pop, then nothing: the first look would come at 600 ms, in the wait's last interval,
    // where the next pop sees as much for a command less.
    expect((await stats()).requests.total).toBe(1);
  });

  it("ends the wait with no jobs when the signal aborts", async () => {
    const { consumer, other } = queues();
    const controller = new AbortController();
    const waiting = consumer.pop("t", { wait: 10 }, controller.signal);
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    expect(await waiting).toEqual([]);
    expect(Date.now() - started).toBeLessThan(1000);
    await other.add({ topic: "t", id: "after" });
    expect((await other.pop("t")).map((j) => j.id)).toEqual(["after"]);
  });

  it("finds a ready job behind one that died at its deadline (issue 8.5)", async () => {
    const { consumer, other } = queues();
    const now = Date.now();
    await other.add({ topic: "t", id: "a", runAt: now - 2000, deadline: now - 1000 });
    await other.add({ topic: "t", id: "b", runAt: now - 1000 });
    const started = Date.now();
    const jobs = await consumer.pop("t", { count: 1, wait: 3 });
    expect(jobs.map((j) => j.id)).toEqual(["b"]);
    expect(Date.now() - started).toBeLessThan(1000);
    expect((await other.get("a")).state).toBe("dead");
  });

  it("sleeps on a paused topic instead of spinning, and wakes when it resumes (issue 8.2)", async () => {
    const { consumer, other, stats } = queues(500);
    await other.configure("t", { paused: true });
    await other.add({ topic: "t", id: "x", delay: 0.2 });
    const waiting = consumer.pop("t", { wait: 2.5 });
    await new Promise((r) => setTimeout(r, 1200));
    const before = (await stats()).requests.total;
    // One pop, then one GET per 500 ms: a spinning pop would have sent hundreds by now.
    expect(before).toBeLessThanOrEqual(5);
    await other.configure("t", {});
    expect((await waiting).map((j) => j.id)).toEqual(["x"]);
  });

  it("rejects a wait over 20 seconds", async () => {
    const { consumer } = queues();
    await expect(consumer.pop("t", { wait: 21 })).rejects.toThrow(/wait/);
  });
});
