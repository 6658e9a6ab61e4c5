// The wait before each retry under every backoff schedule, as the scheduler applies it.
import { describe, expect, it } from "vitest";
import { tick } from "../../src/index";
import { testQueue } from "../support/queue";

describe("backoff schedules", () => {
  async function waits(backoff: unknown, failures: number, maxAttempts = 20) {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", backoff: backoff as never, maxAttempts, ttr: 1 });
    const out: number[] = [];
    for (let i = 0; i < failures; i++) {
      const [job] = await queue.pop("t");
      if (!job) throw new Error("expected a job");
      clock.advance(1000); // the lease runs out: a failed attempt
      await tick(queue);
      const after = await queue.get("j");
      out.push((after.dueAt - clock.now) / 1000);
      clock.set(after.dueAt);
    }
    return out;
  }

  it("follows WeChat Pay's schedule and repeats its last step", async () => {
    expect(await waits("wechatpay", 9)).toEqual([5, 30, 60, 180, 300, 600, 1800, 1800, 1800]);
  });

  it("follows the Alipay and Youzan schedules", async () => {
    expect(await waits("alipay", 7)).toEqual([240, 600, 600, 3600, 7200, 21600, 54000]);
    expect(await waits("youzan", 4)).toEqual([0, 0, 120, 600]);
  });

  it("grows exponentially up to its cap", async () => {
    expect(await waits({ type: "exponential", delay: 1, factor: 3, max: 20 }, 5)).toEqual([
      1, 3, 9, 20, 20,
    ]);
  });

  it("waits a fixed time for a number, and nothing without a backoff", async () => {
    expect(await waits(2.5, 3)).toEqual([2.5, 2.5, 2.5]);
    expect(await waits(undefined, 2)).toEqual([0, 0]);
  });
});
