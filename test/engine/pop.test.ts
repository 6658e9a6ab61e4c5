// Handing jobs out (pop): due times, order, paused topics, expired leases, deadlines.
import { describe, expect, it } from "vitest";
import { expectError } from "../support/expect";
import { popReceipt, testQueue } from "../support/queue";

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
    // The receipt: the attempt's number, the due time, the time added and a hash of the id.
    expect(job?.receipt).toBe(popReceipt(1, clock.now, clock.now - 2500, "j"));
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

  it("takes back a short lease that ends before a longer one, without a tick", async () => {
    const { queue, clock } = testQueue();
    // Delayed jobs make each pop do its upkeep, which records a bound of the first lease end.
    await queue.add({ topic: "t", id: "long", delay: 1, ttr: 600 });
    await queue.add({ topic: "t", id: "short", delay: 2, ttr: 5 });
    await queue.add({ topic: "t", id: "far", delay: 3600 });
    clock.advance(1000);
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["long"]);
    clock.advance(1000);
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["short"]);
    // The short lease lowered the bound the long one had set: pop looks at leases at 7 s.
    clock.advance(5000);
    expect(await queue.pop("t")).toMatchObject([{ id: "short", attempts: 2 }]);
  });

  it("opens a slot written after its topic's upkeep found none, without a tick", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "soon", delay: 1 });
    clock.advance(1000);
    // This upkeep finds no slot list and records none.
    const [soon] = await queue.pop("t");
    expect(soon?.id).toBe("soon");
    await queue.finish("soon", { receipt: soon?.receipt });
    // Due 2 h ahead: its id waits in a slot list, which must lower the topic's slot bound.
    await queue.add({ topic: "t", id: "far", delay: 7200 });
    clock.advance(7200_000);
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["far"]);
  });

  it("opens the slot of a reservation that pop itself took back into a far slot (found by the model test)", async () => {
    const { queue, clock } = testQueue();
    // A backoff of 25 minutes sends the retry to a slot list.
    await queue.add({ topic: "t", id: "j", delay: 1, ttr: 1, backoff: [1500], maxAttempts: 3 });
    clock.advance(1000);
    // This upkeep records that the topic has no slot list.
    expect((await queue.pop("t")).map((job) => job.id)).toEqual(["j"]);
    clock.advance(600_000);
    // This one takes the lease back into a slot list, which lowers the slot bound; the upkeep
    // must not write its earlier "none" back over it.
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(1_500_000);
    expect(await queue.pop("t")).toMatchObject([{ id: "j", attempts: 2 }]);
  });

  it("hands a job out once when its slot opens in the pop that takes it from the ready list (found by the model test)", async () => {
    const { queue, clock } = testQueue();
    const start = clock.now;
    await queue.add({ topic: "t", id: "j", runAt: start + 2 * 3600_000 });
    // After an outage the slot is open, unopened; the job is replaced to be due now: it goes
    // to the ready list and its old id stays in the slot list.
    clock.advance(2 * 3600_000 + 1000);
    await queue.add({ topic: "t", id: "j", runAt: clock.now - 500, replace: true });
    // The pop takes "j" off the ready list before its upkeep opens the slot: the slot's id
    // must not go to the delay bucket as if "j" waited nowhere.
    expect((await queue.pop("t", { count: 2 })).map((job) => job.id)).toEqual(["j"]);
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 1, dead: 0 });
    expect(await queue.pop("t")).toEqual([]);
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
