// Topic stats and listings (topic, topics, list) over a real redis-server.
import { describe, expect, it } from "vitest";
import { testQueue } from "../support/queue";

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
