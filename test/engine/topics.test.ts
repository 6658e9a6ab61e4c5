// Topic stats and listings (topic, topics, list) over a real redis-server.
import { describe, expect, it } from "vitest";
import { SLOT_OPENS, slotOf, testQueue } from "../support/queue";

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

  it("reads the earliest due time from whichever index holds jobs, or the first slot", async () => {
    const { queue, clock } = testQueue();
    // Only delayed jobs; then only slotted ones (due hours ahead: a slot list, not the index).
    await queue.addBatch([
      { topic: "delayed", id: "d2", delay: 20 },
      { topic: "delayed", id: "d1", delay: 10 },
    ]);
    const far = clock.now + 3 * 3_600_000 + 1234;
    const slot = slotOf(far);
    await queue.add({ topic: "slotted", id: "s", runAt: far });
    await queue.add({ topic: "emptied", id: "e" });
    await queue.delete("e");
    const stats = await Promise.all(["delayed", "slotted", "emptied"].map((t) => queue.topic(t)));
    expect(stats.map((t) => [t.topic, t.counts, t.oldestDueAt])).toEqual([
      ["delayed", { delayed: 2, ready: 0, reserved: 0, dead: 0 }, clock.now + 10_000],
      ["slotted", { delayed: 1, ready: 0, reserved: 0, dead: 0 }, slot],
      ["emptied", { delayed: 0, ready: 0, reserved: 0, dead: 0 }, undefined],
    ]);
    // Once its slot opens (90 s before the slot starts), reading the stats moves the job into
    // the delay bucket, with no tick or pop first: its exact due time shows.
    clock.set(slot - SLOT_OPENS);
    expect(await queue.topic("slotted")).toMatchObject({
      counts: { delayed: 1, ready: 0, reserved: 0, dead: 0 },
      oldestDueAt: far,
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
