// The one clock: a queue without a clock of its own runs every script on Redis's (TIME), so a
// caller's clock that runs behind or ahead changes nothing it is answered or handed.
import { afterEach, describe, expect, it, vi } from "vitest";
import { DelayQueue } from "../../src/index";
import { keys } from "../../src/redis/keys";
import { testRedis } from "../support/redis";

/** A queue on Redis's clock, and another on the same keys (a second service instance). */
function twoInstances() {
  const test = testRedis({ automaticDeserialization: false });
  const prefix = test.prefix.slice(0, -1);
  const one = new DelayQueue({ redis: test.redis, prefix });
  const two = new DelayQueue({ redis: test.redis, prefix });
  return { ...test, one, two, keys: keys(prefix) };
}

/** Redis's clock, unix ms, as a script reads it. */
async function redisNow(redis: ReturnType<typeof testRedis>["redis"]): Promise<number> {
  const [seconds, micros] = (await redis.eval("return redis.call('TIME')", [], [])) as string[];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

afterEach(() => {
  vi.useRealTimers();
});

describe("one clock: Redis's", () => {
  it("dates a job by Redis's clock whatever the caller's clock says", async () => {
    const t = twoInstances();
    expect(t.one.onRedisClock).toBe(true);
    // This process's clock is an hour behind: nothing it adds is dated by it.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() - 3_600_000);
    const before = await redisNow(t.redis);
    const { job } = await t.one.add({ topic: "q", id: "a", delay: 0 });
    const { job: later } = await t.one.add({ topic: "q", id: "b", delay: 60 });
    const after = await redisNow(t.redis);
    expect(job.state).toBe("ready");
    expect(job.createdAt).toBeGreaterThanOrEqual(before);
    expect(job.createdAt).toBeLessThanOrEqual(after);
    expect(job.dueAt).toBe(job.createdAt);
    expect(later.state).toBe("delayed");
    expect(later.dueAt).toBe((later.createdAt as number) + 60_000);
    // Due by Redis's clock, it is handed out at once, to one instance only.
    const [popped] = await t.two.pop("q");
    expect(popped?.id).toBe("a");
    expect(popped?.reservedUntil).toBeGreaterThanOrEqual(after + 30_000);
    expect(await t.one.pop("q")).toEqual([]);
    expect((await t.one.get("b")).state).toBe("delayed");
  });

  it("counts a reschedule's delay from Redis's clock", async () => {
    const t = twoInstances();
    await t.one.add({ topic: "q", id: "j", delay: 600 });
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 3_600_000);
    const before = await redisNow(t.redis);
    const job = await t.two.reschedule("j", { delay: 60 });
    const after = await redisNow(t.redis);
    expect(job.state).toBe("delayed");
    expect(job.dueAt).toBeGreaterThanOrEqual(before + 60_000);
    expect(job.dueAt).toBeLessThanOrEqual(after + 60_000);
  });
});
