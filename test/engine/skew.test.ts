// Callers whose clocks disagree (two service instances, a request delayed in transit): nothing is
// lost, handed out early or counted wrong because one caller is ahead of another.
import { describe, expect, it } from "vitest";
import { DelayQueue } from "../../src/index";
import { testQueue } from "../support/queue";

describe("clock skew between callers", () => {
  it("a far job deleted, its slot opened by a caller ahead, re-added by one behind, is delivered (issue 8.3)", async () => {
    const ahead = testQueue({ retention: 86_400 });
    const behindClock = { now: ahead.clock.now };
    const behind = new DelayQueue({
      redis: ahead.redis,
      prefix: ahead.keys.base.slice(1, -2),
      clock: () => behindClock.now,
      retention: 86_400,
    });
    const slotMs = 600_000;
    const start = ahead.clock.now; // a multiple of the slot width
    const slot = start + 6 * slotMs; // 1 h ahead: a far slot
    await ahead.queue.add({ topic: "q", id: "j", runAt: slot + 1000 });
    await ahead.queue.delete("j");
    // The caller ahead reaches the slot's opening and pops: the deleted id leaves the list.
    ahead.clock.set(slot - slotMs);
    expect(await ahead.queue.pop("q")).toEqual([]);
    // One second behind, the slot is still far: the job is added back into it.
    behindClock.now = slot - slotMs - 1000;
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
