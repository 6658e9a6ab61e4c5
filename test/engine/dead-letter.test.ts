// The dead letter: kicking dead jobs back, paging through them, deleting them.
import { describe, expect, it } from "vitest";
import { expectError } from "../support/expect";
import { testQueue } from "../support/queue";

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
    expect(last).toEqual({ jobs: [expect.objectContaining({ id: "d4" })], hasMore: false });
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
