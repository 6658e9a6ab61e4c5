// The raw keyspace after each transition: what the scripts write, key by key.
// One keyspace (partitions: 1) in every project, the node-cluster one too: the keys are read.
import type { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import { tick } from "../../src/index";
import { decodeMeta } from "../../src/redis/record";
import { popReceipt, type TestQueue, testQueue } from "../support/queue";

type Snapshot = Record<string, unknown>;

/** Every key under the queue's prefix with its content: records decoded, zsets as [member, score]. */
async function snapshot(redis: Redis, base: string): Promise<Snapshot> {
  const out: Snapshot = {};
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, { match: `${base}*`, count: 1000 });
    cursor = String(next);
    for (const key of found.sort()) {
      const name = key.slice(base.length);
      const type = await redis.type(key);
      if (type === "zset") {
        const flat = await redis.zrange<string[]>(key, 0, -1, { withScores: true });
        const pairs: [string, number][] = [];
        for (let i = 0; i < flat.length; i += 2) pairs.push([String(flat[i]), Number(flat[i + 1])]);
        out[name] = pairs;
      } else if (type === "list") {
        out[name] = await redis.lrange(key, 0, -1);
      } else if (name.endsWith(":timing")) {
        // A topic's timing: times as numbers, "-" for none, "" for not known.
        const [next, lease, slot] = String(await redis.get(key))
          .split("|")
          .map((at) => (at === "-" || at === "" ? at : Number(at)));
        out[name] = { next, lease, slot };
      } else {
        const raw = String(await redis.get(key));
        const cut = raw.indexOf("\n");
        const ttl = await redis.pttl(key);
        out[name] =
          cut < 0
            ? JSON.parse(raw)
            : { meta: decodeMeta(raw.slice(0, cut)), body: raw.slice(cut + 1), ttl: ttl > 0 };
      }
    }
  } while (cursor !== "0");
  return out;
}

const state = (t: TestQueue) => snapshot(t.redis, t.keys.base);

describe("keyspace", () => {
  it("add writes the record, the delay bucket, the schedule and the topic list", async () => {
    const t = testQueue({ partitions: 1 });
    const now = t.clock.now;
    await t.queue.add({ topic: "q", id: "a", body: { x: "ü" }, delay: 2, deadline: now + 9000 });
    await t.queue.add({ topic: "q", id: "b", body: 1 });
    // The record as stored: positional meta, then the body byte for byte.
    expect(await t.redis.get(`${t.keys.base}j:a`)).toBe(
      `w|a|q|${now + 2000}|${now}|60000|0|10|${now + 9000}|||||||||\n{"x":"ü"}`,
    );
    expect(await state(t)).toEqual({
      "j:a": {
        meta: {
          id: "a",
          topic: "q",
          state: "waiting",
          due: now + 2000,
          ttr: 60000,
          attempts: 0,
          maxAttempts: 10,
          createdAt: now,
          deadline: now + 9000,
        },
        body: '{"x":"ü"}',
        ttl: false,
      },
      "j:b": {
        meta: {
          id: "b",
          topic: "q",
          state: "waiting",
          due: now,
          ttr: 60000,
          attempts: 0,
          maxAttempts: 10,
          createdAt: now,
        },
        body: "1",
        ttl: false,
      },
      "t:q:delayed": [["a", now + 2000]],
      "t:q:ready": [["b", now]],
      // The topic's long-poll signal (bumped by the topic's first add; later adds bump it only
      // while a caller long-polls), and when pop must next do its upkeep: no lease, no slot.
      "t:q:seq": 1,
      "t:q:timing": { next: now + 2000, lease: "-", slot: "-" },
      schedule: [["q", now + 2000]],
      topics: [["q", 0]],
    });
  });

  it("a job due beyond the next slot waits as an id in its slot's list until the slot opens", async () => {
    const t = testQueue({ partitions: 1 });
    const now = t.clock.now; // a multiple of 10 minutes
    // Slots are a minute wide and start at half past a minute; one opens 90 s before it starts.
    const slot = now + 3_570_000; // 59.5 min ahead: the slot of a job due in 1 h
    await t.queue.addBatch([
      { topic: "q", id: "a", delay: 3600 },
      { topic: "q", id: "b", delay: 3600.5 },
      { topic: "q", id: "c", delay: 5 * 60 }, // 5 min: its slot (4.5 min) opens in 3 min
      { topic: "q", id: "near", delay: 2 * 60 }, // 2 min: its slot (1.5 min) is open, the zset
    ]);
    let keys = await state(t);
    expect(keys[`t:q:slots:${slot}`]).toEqual(["a", "b"]);
    expect(keys[`t:q:slots:${now + 270_000}`]).toEqual(["c"]);
    expect(keys["t:q:slots"]).toEqual([
      [String(now + 270_000), now + 270_000],
      [String(slot), slot],
    ]);
    expect(keys["t:q:slotted"]).toBe(3);
    expect(keys["t:q:delayed"]).toEqual([["near", now + 120_000]]);
    // The tick must come when "near" is due; the first slot opens 90 s before it starts.
    expect(keys.schedule).toEqual([["q", now + 120_000]]);
    expect(keys["t:q:timing"]).toEqual({ next: now + 120_000, lease: "-", slot: now + 180_000 });
    expect((await t.queue.topic("q")).counts).toMatchObject({ delayed: 4, ready: 0 });

    // Deleting a slotted job leaves its id in the list (no scan) and drops the count.
    await t.queue.delete("b");
    expect((await state(t))["t:q:slotted"]).toBe(2);

    // At the first slot's opening the tick moves its ids to the delayed zset.
    t.clock.advance(180_000);
    await tick(t.queue);
    keys = await state(t);
    expect(keys[`t:q:slots:${now + 270_000}`]).toBeUndefined();
    expect(keys["t:q:delayed"]).toEqual([["c", now + 300_000]]);
    expect(keys["t:q:ready"]).toEqual([["near", now + 120_000]]); // due: promoted too
    expect(keys["t:q:slotted"]).toBe(1);
    expect(keys.schedule).toEqual([["q", now + 300_000]]);

    // The last slot opens: "a" moves, the stale "b" is dropped, and nothing is counted twice.
    t.clock.set(slot - 90_000);
    await tick(t.queue);
    keys = await state(t);
    expect(keys[`t:q:slots:${slot}`]).toBeUndefined();
    expect(keys["t:q:slots"]).toBeUndefined();
    expect(keys["t:q:slotted"]).toBe(0);
    expect(keys["t:q:delayed"]).toEqual([["a", now + 3_600_000]]);
    expect(keys["t:q:ready"]).toEqual([
      ["near", now + 120_000],
      ["c", now + 300_000],
    ]);
    t.clock.advance(60 * 60_000);
    expect((await t.queue.pop("q", { count: 10 })).map((j) => j.id)).toEqual(["near", "c", "a"]);
  });

  it("opens whole a 10-minute slot list an earlier version wrote", async () => {
    // Versions up to 37f6d42 had 10-minute slots starting on multiples of 10 minutes, and
    // opened them 10 minutes ahead. Their lists are moved as they were written: a job due in
    // the list's 10 minutes is not taken for a stale entry of another (one-minute) slot.
    const t = testQueue({ partitions: 1 });
    const now = t.clock.now; // a multiple of 10 minutes
    const legacy = now + 60 * 60_000;
    await t.queue.addBatch([
      { topic: "q", id: "a", delay: 3600 + 5 * 60 + 7 },
      { topic: "q", id: "b", delay: 3600 + 9 * 60 },
    ]);
    // Rewrite the two one-minute lists as the one list of 10 minutes an earlier version wrote.
    const base = t.keys.base;
    const written = (await state(t))["t:q:slots"] as [string, number][];
    expect(written.map(([, start]) => start)).toEqual([now + 3_870_000, now + 4_110_000]);
    for (const [name] of written) {
      const ids = await t.redis.lrange(`${base}t:q:slots:${name}`, 0, -1);
      await t.redis.rpush(`${base}t:q:slots:${legacy}`, ...ids);
      await t.redis.del(`${base}t:q:slots:${name}`);
      await t.redis.zrem(`${base}t:q:slots`, name);
    }
    await t.redis.zadd(`${base}t:q:slots`, { score: legacy, member: String(legacy) });
    // Its timing and schedule said the list opens 10 minutes before it starts.
    await t.redis.set(`${base}t:q:timing`, `${legacy - 600_000}|-|${legacy - 600_000}`);
    await t.redis.zadd(`${base}schedule`, { score: legacy - 600_000, member: "q" });
    expect((await state(t))[`t:q:slots:${legacy}`]).toEqual(["a", "b"]);
    // Still far, its jobs are listed from it (not taken for stale entries) and counted.
    const listed = await t.queue.list("q", { state: "delayed" });
    expect(listed.jobs.map((job) => job.id)).toEqual(["a", "b"]);
    expect((await t.queue.topic("q")).counts).toMatchObject({ delayed: 2 });

    // This version opens it 90 s before it starts, as its own.
    t.clock.set(legacy - 600_000);
    await tick(t.queue);
    expect((await state(t))[`t:q:slots:${legacy}`]).toEqual(["a", "b"]);
    expect((await state(t)).schedule).toEqual([["q", legacy - 90_000]]);
    t.clock.set(legacy - 90_000);
    await tick(t.queue);
    const keys = await state(t);
    expect(keys["t:q:slots"]).toBeUndefined();
    expect(keys["t:q:slotted"]).toBe(0);
    expect(keys["t:q:delayed"]).toEqual([
      ["a", now + 3_907_000],
      ["b", now + 4_140_000],
    ]);
    t.clock.set(now + 4_140_000);
    expect((await t.queue.pop("q", { count: 10 })).map((j) => j.id)).toEqual(["a", "b"]);
  });

  it("a slotted job replaced into its own slot, or deleted and added back, is counted once and delivered once", async () => {
    const t = testQueue({ retention: 86_400, partitions: 1 });
    const slot = t.clock.now + 3_570_000; // the slot of a job due in 1 h
    await t.queue.add({ topic: "q", id: "a", delay: 3600 });
    await t.queue.add({ topic: "q", id: "a", delay: 3601, body: 2, replace: true });
    await t.queue.delete("a");
    await t.queue.add({ topic: "q", id: "a", delay: 3602, body: 3, replace: true });
    let keys = await state(t);
    // Listed again each time (whether an old entry is still there depends on clocks: issue
    // 8.3); counted once.
    expect(keys[`t:q:slots:${slot}`]).toEqual(["a", "a", "a"]);
    expect(keys["t:q:slotted"]).toBe(1);
    // Moved to another slot, the old entries stay (skipped later) and the new slot lists it.
    await t.queue.add({ topic: "q", id: "a", delay: 7200, replace: true });
    keys = await state(t);
    expect(keys[`t:q:slots:${slot + 60 * 60_000}`]).toEqual(["a"]);
    expect(keys["t:q:slotted"]).toBe(1);
    await t.queue.add({ topic: "q", id: "a", delay: 3603, body: 4, replace: true });
    // The slot opens: the duplicates collapse into one delayed entry, the count reaches zero.
    t.clock.set(slot - 90_000);
    await tick(t.queue);
    keys = await state(t);
    expect(keys[`t:q:slots:${slot}`]).toBeUndefined();
    expect(keys["t:q:delayed"]).toEqual([["a", slot + 33_000]]);
    // The entry left in the later slot's list is stale: it counts for nothing.
    expect(keys["t:q:slotted"]).toBe(0);
    t.clock.advance(20 * 60_000);
    expect((await t.queue.pop("q", { count: 10 })).map((job) => job.body)).toEqual([4]);
    t.clock.advance(60 * 60_000);
    await tick(t.queue);
    keys = await state(t);
    expect(keys["t:q:slotted"]).toBe(0);
    expect(keys[`t:q:slots:${slot + 60 * 60_000}`]).toBeUndefined();
  });

  it("pop never hands out a job whose record is not due, whatever its index says", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.add({ topic: "q", id: "a", delay: 60 });
    // An index out of step with the record: listed as ready, due in a minute.
    await t.redis.zadd(`${t.keys.base}t:q:ready`, { score: t.clock.now, member: "a" });
    await t.redis.zrem(`${t.keys.base}t:q:delayed`, "a");
    expect(await t.queue.pop("q")).toEqual([]);
    const keys = await state(t);
    expect(keys["t:q:ready"]).toBeUndefined();
    expect(keys["t:q:delayed"]).toEqual([["a", t.clock.now + 60_000]]);
  });

  it("the schedule keeps the earliest time of each topic (ZADD LT)", async () => {
    const t = testQueue({ partitions: 1 });
    const now = t.clock.now;
    await t.queue.add({ topic: "q", id: "late", delay: 50 });
    await t.queue.add({ topic: "q", id: "early", delay: 5 });
    await t.queue.add({ topic: "q", id: "middle", delay: 20 });
    expect((await state(t)).schedule).toEqual([["q", now + 5000]]);
  });

  it("pop promotes, reserves with a lease and leaves the record as it was, and schedules the lease's end", async () => {
    const t = testQueue({ partitions: 1 });
    const now = t.clock.now;
    await t.queue.addBatch([
      { topic: "q", id: "a", delay: 1, ttr: 30 },
      { topic: "q", id: "b", delay: 60 },
    ]);
    t.clock.advance(1000);
    const [job] = await t.queue.pop("q");
    expect(job).toMatchObject({ state: "reserved", attempts: 1, reservedUntil: now + 31_000 });
    const keys = await state(t);
    // The reservation is the lease entry alone: the record is as the add wrote it, and the
    // receipt is derived from it (test/support/queue.ts: popReceipt).
    expect(keys["j:a"]).toMatchObject({ meta: { state: "waiting", attempts: 0, due: now + 1000 } });
    expect((keys["j:a"] as { meta: object }).meta).not.toHaveProperty("receipt");
    expect(job?.receipt).toBe(popReceipt(1, now + 1000, now, "a"));
    expect(keys["t:q:delayed"]).toEqual([["b", now + 60_000]]);
    expect(keys["t:q:ready"]).toBeUndefined();
    expect(keys["t:q:reserved"]).toEqual([["a", now + 31_000]]);
    // pop did the topic's upkeep (its next, a's due time, had come), then the lease lowered it.
    // Its timing: the next event, and bounds of the first lease end and first slot opening.
    expect(keys["t:q:timing"]).toEqual({ next: now + 31_000, lease: now + 31_000, slot: "-" });
    // The schedule's entry stays where it was, a lower bound: the tick visits, finds nothing
    // due and sets it exactly (pop saves a write on every upkeep).
    expect(keys.schedule).toEqual([["q", now + 1000]]);
    await t.queue.tickSlice();
    expect((await state(t)).schedule).toEqual([["q", now + 31_000]]);
  });

  it("finish drops the lease and leaves only an expiring record", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.add({ topic: "q", id: "a" });
    await t.queue.pop("q");
    await t.queue.finish("a");
    const keys = await state(t);
    expect(keys["j:a"]).toMatchObject({
      meta: { state: "finished", endedAt: t.clock.now },
      ttl: true,
    });
    // finish leaves the schedule alone (one command less): its time is a lower bound, and the
    // tick that comes at the lease's end finds nothing and drops the topic.
    expect(keys.schedule).toEqual([["q", t.clock.now + 60_000]]);
    t.clock.advance(60_000);
    expect(await tick(t.queue)).toMatchObject({ promoted: 0, expired: 0 });
    expect(Object.keys(await state(t)).sort()).toEqual(["j:a", "t:q:seq", "t:q:timing", "topics"]);
    // Nothing timed: no next event, no lease, no slot.
    expect((await state(t))["t:q:timing"]).toEqual({ next: "-", lease: "-", slot: "-" });
  });

  it("an expired lease goes through backoff into the delay bucket, then dead", async () => {
    const t = testQueue({ partitions: 1 });
    const start = t.clock.now;
    await t.queue.add({ topic: "q", id: "a", ttr: 1, backoff: [7], maxAttempts: 2 });
    await t.queue.pop("q");
    t.clock.advance(1000);
    await tick(t.queue);
    let keys = await state(t);
    expect(keys["j:a"]).toMatchObject({
      meta: { state: "waiting", attempts: 1, due: start + 8000 },
    });
    // The lapsed receipt stays until the next pop, so a late finish still counts (131a103).
    expect((keys["j:a"] as { meta: object }).meta).toHaveProperty("receipt");
    expect(keys["t:q:delayed"]).toEqual([["a", start + 8000]]);
    expect(keys["t:q:reserved"]).toBeUndefined();
    expect(keys.schedule).toEqual([["q", start + 8000]]);

    t.clock.set(start + 8000);
    await t.queue.pop("q");
    t.clock.advance(1000);
    await tick(t.queue);
    keys = await state(t);
    expect(keys["j:a"]).toMatchObject({
      meta: { state: "dead", deadReason: "attempts", endedAt: t.clock.now },
    });
    expect(keys["t:q:dead"]).toEqual([["a", t.clock.now]]);
    expect(keys.schedule).toBeUndefined(); // nothing timed left in the topic
  });

  it("kick puts a dead job on the ready list with attempts reset", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.add({ topic: "q", id: "a" });
    await t.queue.pop("q");
    await t.queue.bury("a");
    t.clock.advance(10);
    await t.queue.kick("q");
    const keys = await state(t);
    expect(keys["j:a"]).toMatchObject({
      meta: { state: "waiting", attempts: 0, due: t.clock.now },
    });
    expect((keys["j:a"] as { meta: object }).meta).not.toHaveProperty("deadReason");
    expect(keys["t:q:ready"]).toEqual([["a", t.clock.now]]);
    expect(keys["t:q:dead"]).toBeUndefined();
  });

  it("delete removes the job from every index and leaves an expiring record", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.addBatch([
      { topic: "q", id: "d", delay: 5 },
      { topic: "q", id: "r" },
    ]);
    await t.queue.delete("d");
    await t.queue.delete("r");
    const keys = await state(t);
    expect(keys["j:d"]).toMatchObject({ meta: { state: "deleted" }, ttl: true });
    expect(keys["j:r"]).toMatchObject({ meta: { state: "deleted" }, ttl: true });
    expect(keys["t:q:delayed"]).toBeUndefined();
    expect(keys["t:q:ready"]).toBeUndefined();
  });

  it("configure stores the config as JSON and lists the topic", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.configure("q", { paused: true, backoff: "alipay" });
    expect(await state(t)).toEqual({
      "t:q:config": { paused: true, backoff: "alipay" },
      "t:q:seq": 1,
      topics: [["q", 0]],
    });
  });

  it("keeps every key of a deployment in one cluster slot", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.add({ topic: "q", id: "a", delay: 1 });
    await t.queue.add({ topic: "other", id: "b" });
    const names = Object.keys(await state(t));
    expect(names.length).toBeGreaterThan(4);
    const tag = t.keys.base.slice(0, t.keys.base.indexOf("}") + 1);
    for (const name of names) expect(`${t.keys.base}${name}`.startsWith(tag)).toBe(true);
  });
});

describe("a topic written by an earlier version", () => {
  /** Moves a topic's keys back into the one hash earlier versions kept (keys.ts: legacyMeta). */
  async function asEarlierVersion(t: TestQueue, topic: string) {
    const [config, timing, seq] = await Promise.all(
      [t.keys.config(topic), t.keys.timing(topic), t.keys.seq(topic)].map((key) =>
        t.redis.get<string>(key),
      ),
    );
    const [next, lease, slot] = String(timing ?? "-|-|-").split("|");
    const fields: Record<string, string> = { next: String(next), seq: String(seq) };
    // The oldest hashes had no lease and slot bounds: pop then reads those heads itself.
    if (lease !== "") fields.lease = String(lease);
    if (slot !== "") fields.slot = String(slot);
    if (config !== null) fields.config = String(config);
    await t.redis.del(t.keys.config(topic), t.keys.timing(topic), t.keys.seq(topic));
    await t.redis.hset(t.keys.legacyMeta(topic), fields);
  }

  it("keeps its config, timing and counter: the first write moves them into the topic's keys", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.configure("q", { ttr: 7 });
    await t.queue.add({ topic: "q", id: "a", delay: 2 });
    await asEarlierVersion(t, "q");
    expect(await t.redis.exists(t.keys.legacyMeta("q"), t.keys.seq("q"))).toBe(1);
    // A counter that has moved on, as a busy topic's has.
    await t.redis.hset(t.keys.legacyMeta("q"), { seq: "41" });

    await t.queue.add({ topic: "q", id: "b", delay: 5 });
    const keys = await state(t);
    expect(keys["t:q:meta"]).toBeUndefined();
    expect(keys["t:q:config"]).toEqual({ ttr: 7 });
    expect(keys["t:q:seq"]).toBe(41);
    expect(keys["t:q:timing"]).toEqual({ next: t.clock.now + 2000, lease: "-", slot: "-" });
    // The adopted config gave the new job its ttr; the adopted next lets a pop promote "a".
    expect((await t.queue.get("b")).ttr).toBe(7);
    t.clock.advance(2000);
    expect((await t.queue.pop("q")).map((job) => job.id)).toEqual(["a"]);
  });

  it("a pop that finds jobs moves it too, and a paused topic stays paused", async () => {
    const t = testQueue({ partitions: 1 });
    await t.queue.add({ topic: "p", id: "a" });
    await t.queue.configure("p", { paused: true });
    await asEarlierVersion(t, "p");
    expect(await t.queue.pop("p")).toEqual([]);
    const keys = await state(t);
    expect(keys["t:p:meta"]).toBeUndefined();
    expect(keys["t:p:config"]).toEqual({ paused: true });
    // The entry the pop took is back in place.
    expect(keys["t:p:ready"]).toEqual([["a", t.clock.now]]);
    await t.queue.configure("p", { paused: false });
    expect((await t.queue.pop("p")).map((job) => job.id)).toEqual(["a"]);
  });
});
