// Clocks that disagree (two service instances, a request delayed in transit) or jump (a service
// that was down): nothing is lost, handed out early, out of order or counted wrong.
import { describe, expect, it } from "vitest";
import { DelayQueue, tick } from "../../src/index";
import { SLOT_OPENS, slotOf, testQueue } from "../support/queue";
import { TEST_PARTITIONS } from "../support/redis";

describe("clock skew between callers", () => {
  it("a far job deleted, its slot opened by a caller ahead, re-added by one behind, is delivered (issue 8.3)", async () => {
    const ahead = testQueue({ retention: 86_400, partitions: 1 });
    const behindClock = { now: ahead.clock.now };
    const behind = new DelayQueue({
      redis: ahead.redis,
      prefix: ahead.keys.base.slice(1, -2),
      clock: () => behindClock.now,
      retention: 86_400,
    });
    const slot = slotOf(ahead.clock.now + 3_600_000); // 1 h ahead: a far slot
    await ahead.queue.add({ topic: "q", id: "j", runAt: slot + 1000 });
    expect(await ahead.redis.lrange(`${ahead.keys.base}t:q:slots:${slot}`, 0, -1)).toEqual(["j"]);
    await ahead.queue.delete("j");
    // The caller ahead reaches the slot's opening and pops: the deleted id leaves the list.
    ahead.clock.set(slot - SLOT_OPENS);
    expect(await ahead.queue.pop("q")).toEqual([]);
    expect(await ahead.redis.exists(`${ahead.keys.base}t:q:slots:${slot}`)).toBe(0);
    // One second behind, the slot is still far: the job is added back into it.
    behindClock.now = slot - SLOT_OPENS - 1000;
    const { created } = await behind.add({
      topic: "q",
      id: "j",
      runAt: slot + 2000,
      replace: true,
    });
    expect(created).toBe(true);
    expect((await ahead.queue.topic("q")).counts.delayed).toBe(1);
    ahead.clock.set(slot + 2000);
    expect((await ahead.queue.pop("q")).map((job) => job.id)).toEqual(["j"]);
    expect((await ahead.queue.topic("q")).counts).toEqual({
      delayed: 0,
      ready: 0,
      reserved: 1,
      dead: 0,
    });
  });
});

describe("a clock that jumps far ahead", () => {
  it("hands jobs out earliest due first although more slots opened than one call moves (issue 8.9)", async () => {
    const t = testQueue();
    const start = t.clock.now;
    // One far job in each of 12 slots, 10 minutes apart, the first an hour ahead.
    const slots = Array.from({ length: 12 }, (_, n) => start + (6 + n) * 600_000);
    await t.queue.addBatch(slots.map((slot, n) => ({ topic: "q", id: `s${n + 1}`, runAt: slot })));
    // Later a job due just after the last slot starts, added when its slot was open: the bucket.
    t.clock.set((slots[11] as number) - 60_000);
    await t.queue.add({ topic: "q", id: "z", runAt: (slots[11] as number) + 60_000 });
    // The service was down; it comes back when everything is due.
    t.clock.set((slots[11] as number) + 120_000);
    const order: string[] = [];
    for (let i = 0; i < 5 && order.length < 13; i++) {
      order.push(...(await t.queue.pop("q", { count: 20 })).map((job) => job.id));
    }
    expect(order).toEqual([...slots.map((_, n) => `s${n + 1}`), "z"]);
  });

  it("keeps that order for a job added due at once after the jump (it skips the bucket)", async () => {
    const t = testQueue();
    const start = t.clock.now;
    const slots = Array.from({ length: 12 }, (_, n) => start + (6 + n) * 600_000);
    await t.queue.addBatch(slots.map((slot, n) => ({ topic: "q", id: `s${n + 1}`, runAt: slot })));
    t.clock.set((slots[11] as number) + 120_000);
    await t.queue.add({ topic: "q", id: "z", delay: 0 });
    // The pop opens all 12 slot lists, so z, due last, comes after them.
    expect((await t.queue.pop("q", { count: 20 })).map((job) => job.id)).toEqual([
      ...slots.map((_, n) => `s${n + 1}`),
      "z",
    ]);
  });

  it("a pop after more than 100 minutes without a call opens every due slot list itself", async () => {
    const t = testQueue();
    const start = t.clock.now;
    // Far jobs in 12 slot lists 10 minutes apart; the first 10 are deleted, which leaves their
    // ids in the lists (skipped when a list opens).
    const slots = Array.from({ length: 12 }, (_, n) => start + (6 + n) * 600_000);
    await t.queue.addBatch(slots.map((slot, n) => ({ topic: "q", id: `s${n + 1}`, runAt: slot })));
    for (let n = 1; n <= 10; n++) await t.queue.delete(`s${n}`);
    // Nothing calls (no pop, no tick) until all of them are due: 12 lists open at once.
    t.clock.set((slots[11] as number) + 60_000);
    // One call used to open 10 lists, all stale here, and hand out nothing until a tick.
    expect((await t.queue.pop("q", { count: 5 })).map((job) => job.id)).toEqual(["s11", "s12"]);
    expect((await t.queue.topic("q")).counts).toEqual({
      delayed: 0,
      ready: 0,
      reserved: 2,
      dead: 0,
    });
  });
});

describe("touch through a caller behind", () => {
  it("never shortens a lease, so the tick takes it back on time", async () => {
    const ahead = testQueue();
    const behindClock = { now: ahead.clock.now - 5000 };
    const behind = new DelayQueue({
      partitions: TEST_PARTITIONS,
      redis: ahead.redis,
      prefix: ahead.keys.base.slice(1, -2),
      clock: () => behindClock.now,
    });
    await ahead.queue.add({ topic: "q", id: "j", ttr: 5 });
    const [job] = await ahead.queue.pop("q");
    const leaseEnd = job?.reservedUntil as number;
    // Behind by 5 s, a touch would end the lease at ahead's now: it keeps the later end.
    const touched = await behind.touch("j", { receipt: job?.receipt });
    expect(touched.reservedUntil).toBe(leaseEnd);
    ahead.clock.set(leaseEnd);
    expect(await tick(ahead.queue)).toMatchObject({ expired: 1 });
    expect((await ahead.queue.get("j")).state).toBe("ready");
  });
});
