// Test helpers: a DelayQueue over the shared bridge with its own prefix and a clock the test moves.
import { DelayQueue, type DelayQueueOptions } from "../../src/queue";
import { keys } from "../../src/redis/keys";
import { type TestRedis, testRedis } from "./redis";

export type TestClock = { now: number; advance(ms: number): number; set(ms: number): number };

/** A clock that only moves when the test says so. Starts at a round, recent time. */
export function testClock(start = 1_800_000_000_000): TestClock {
  const clock = {
    now: start,
    advance(ms: number) {
      clock.now += ms;
      return clock.now;
    },
    set(ms: number) {
      clock.now = ms;
      return clock.now;
    },
  };
  return clock;
}

export type TestQueue = TestRedis & {
  queue: DelayQueue;
  clock: TestClock;
  keys: ReturnType<typeof keys>;
};

export function testQueue(options: Partial<DelayQueueOptions> = {}): TestQueue {
  const test = testRedis();
  const clock = testClock();
  const prefix = test.prefix.slice(0, -1);
  const queue = new DelayQueue({ redis: test.redis, prefix, clock: () => clock.now, ...options });
  return { ...test, queue, clock, keys: keys(prefix) };
}
