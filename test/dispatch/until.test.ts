// Waiting for a due time: never before it by the clock that set it, even when that clock runs
// slower than the timers (a timer then fires early by it).
import { describe, expect, it } from "vitest";
import { until } from "../../src/dispatch/until";

describe("until", () => {
  it("waits again when the timer fires before the clock reaches the due time", async () => {
    // A clock at half the timers' speed: one timer of `due - now` ms ends halfway there.
    const start = Date.now();
    const slow = () => start + (Date.now() - start) / 2;
    const due = slow() + 100;
    await until(due, slow);
    expect(slow()).toBeGreaterThanOrEqual(due);
  });

  it("returns at once for a due time already past", async () => {
    const started = Date.now();
    await until(started - 1000, Date.now);
    expect(Date.now() - started).toBeLessThan(50);
  });
});
