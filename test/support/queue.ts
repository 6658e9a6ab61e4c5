// Test helpers: a DelayQueue over the shared bridge with its own prefix and a clock the test moves.
import { DelayQueue, type DelayQueueOptions } from "../../src/index";
import { keys } from "../../src/redis/keys";
import { TEST_PARTITIONS, type TestRedis, testRedis } from "./redis";

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

/**
 * A queue with its own key prefix. The client has the options the entry points use, unless
 * `deserializingClient` asks for @upstash/redis's defaults (which JSON-parse every reply).
 */
export function testQueue(
  options: Partial<DelayQueueOptions> & { deserializingClient?: boolean } = {},
): TestQueue {
  const test = testRedis({ automaticDeserialization: options.deserializingClient ?? false });
  const clock = testClock();
  const prefix = test.prefix.slice(0, -1);
  const queue = new DelayQueue({
    redis: test.redis,
    prefix,
    clock: () => clock.now,
    partitions: TEST_PARTITIONS,
    ...options,
  });
  return { ...test, queue, clock, keys: keys(prefix) };
}

/**
 * The receipt a pop gives (src/redis/lua/lib/transitions.ts: popReceipt), computed here on its
 * own: the attempt's number, the due time and the time added, then djb2 of the id's UTF-8 bytes
 * modulo 2^32, each in base 36.
 */
export function popReceipt(attempt: number, due: number, addedAt: number, id: string): string {
  const hash = [...Buffer.from(id, "utf8")].reduce((h, byte) => (h * 33 + byte) % 2 ** 32, 5381);
  return `p${attempt}.${due.toString(36)}.${addedAt.toString(36)}.${hash.toString(36)}`;
}

/**
 * The start of the slot list a job due at `due` waits in (src/redis/lua/lib/slots.ts): slots
 * are a minute wide and start at hh:mm:30. Written out rather than imported, so that a change of
 * the geometry shows in the tests that depend on it.
 */
export const slotOf = (due: number) => due - ((due - 30_000) % 60_000);
/** How long before its start a slot opens, ms. */
export const SLOT_OPENS = 90_000;
