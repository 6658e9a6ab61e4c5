// The TypeScript backoff rule agrees with the Lua one, step by step, for every form of schedule.
import { describe, expect, it } from "vitest";
import { backoffStepMs } from "../../src/domain/backoff";
import { testQueue } from "../support/queue";

describe("backoffStepMs", () => {
  it.each([
    ["wechatpay" as const],
    ["alipay" as const],
    [[5, 30] as number[]],
    [12.5],
    [{ type: "exponential" as const, delay: 2, factor: 3, max: 100 }],
  ])("matches the delays the engine applies for %j", async (backoff) => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "b", id: "j", backoff, maxAttempts: 20 });
    for (let n = 1; n <= 9; n++) {
      const [job] = await queue.pop("b");
      const released = await queue.release("j", { receipt: job?.receipt });
      expect(released.dueAt - clock.now, `step ${n}`).toBe(backoffStepMs(released.backoff, n));
      clock.set(released.dueAt);
    }
  });
});
