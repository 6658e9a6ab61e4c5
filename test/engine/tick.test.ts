// The scheduler's tick: promotes due jobs, takes back leases, sends exhausted jobs dead.
import { describe, expect, it } from "vitest";
import { tick } from "../../src/index";
import { testQueue } from "../support/queue";

describe("tick", () => {
  it("promotes due jobs, takes back expired leases and sends exhausted jobs dead", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "a", id: "due", delay: 1 });
    await queue.add({ topic: "b", id: "lease", ttr: 1 });
    await queue.add({ topic: "b", id: "last", ttr: 1, maxAttempts: 1 });
    await queue.pop("b", { count: 2 });
    clock.advance(1000);
    expect(await tick(queue)).toMatchObject({
      promoted: 1,
      expired: 2,
      died: 1,
      slices: 1,
      more: false,
      pushDue: false,
    });
    expect((await queue.topic("a")).counts.ready).toBe(1);
    expect((await queue.get("lease")).state).toBe("ready");
    expect((await queue.get("last")).deadReason).toBe("attempts");
    expect(await tick(queue)).toMatchObject({
      promoted: 0,
      expired: 0,
      died: 0,
      slices: 1,
      more: false,
    });
  });

  it("says push jobs are due even when a page of due topics sorts before them", async () => {
    const { queue, clock, redis, keys } = testQueue({ partitions: 1 });
    await queue.configure("p", { push: { url: "https://hooks.example.com/p" } });
    await queue.add({ topic: "p", id: "pushed", delay: 70 });
    // A backlog: 101 topics due at +1 s, a full page of the schedule before ~push, which the
    // claim script would have set to 65 s before the push job is due (+5 s).
    for (let t = 0; t <= 100; t++) await queue.add({ topic: `busy-${t}`, id: `b${t}`, delay: 1 });
    await redis.zadd(keys.schedule, { score: clock.now + 5000, member: "~push" });
    clock.advance(6000);
    expect(await queue.tickSlice()).toMatchObject({ more: true, pushDue: true });
  });

  it("moves at most 500 jobs in one slice (each a few ms at 1M jobs) and says more is left", async () => {
    const { queue, clock } = testQueue();
    const n = 1200;
    for (let b = 0; b < n; b += 400) {
      await queue.addBatch(
        Array.from({ length: 400 }, (_, i) => ({ topic: "bulk", id: `j${b + i}`, delay: 1 })),
      );
    }
    clock.advance(1000);
    expect(await queue.tickSlice()).toMatchObject({ promoted: 500, more: true });
    expect(await tick(queue)).toMatchObject({ promoted: n - 500, slices: 2, more: false });
  });
});
