// Long-polling pop: sleeping until a topic may have a job, cheaply and without busy loops.
import type { RedisClient } from "../redis/runner";
import { redisError } from "../redis/runner";

/**
 * Long-polls waiting in this process, by topic: a write made through this process wakes them at
 * once (other processes' writes are seen through the topic's change counter).
 */
export class Wakeups {
  private readonly waiters = new Map<string, Set<() => void>>();

  /** Sleeps `ms`; resolves true early when `wake(topic)` is called or `signal` aborts. */
  sleep(topic: string, ms: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      let waiters = this.waiters.get(topic);
      if (!waiters) {
        waiters = new Set();
        this.waiters.set(topic, waiters);
      }
      const set = waiters;
      const done = (early: boolean) => {
        clearTimeout(timer);
        set.delete(wake);
        if (set.size === 0) this.waiters.delete(topic);
        signal?.removeEventListener("abort", wake);
        resolve(early);
      };
      const wake = () => done(true);
      const timer = setTimeout(() => done(false), ms);
      set.add(wake);
      signal?.addEventListener("abort", wake);
    });
  }

  /** Wakes this process's long-polls on the topics written to. */
  wake(topics: Iterable<string>): void {
    for (const topic of topics) {
      for (const wake of [...(this.waiters.get(topic) ?? [])]) wake();
    }
  }
}

export type WaitOptions = {
  redis: RedisClient;
  wakeups: Wakeups;
  topic: string;
  /** The topic's change counter key. */
  seqKey: string;
  /** When something of the topic may become available (unix ms by `clock`); undefined: unknown. */
  nextAt: number | undefined;
  /** The change counter as the pop saw it. */
  seq: number;
  /** When the wait is over, by Date.now(). */
  giveUpAt: number;
  pollIntervalMs: number;
  clock: () => number;
  signal?: AbortSignal;
};

/**
 * Sleeps until something may be ready in the topic: its next due time passes, its change
 * counter moves, or this process writes to it. False when the wait is over first.
 */
export async function waitForChange(options: WaitOptions): Promise<boolean> {
  const { redis, wakeups, topic, seqKey, seq, giveUpAt, pollIntervalMs, clock, signal } = options;
  const wakeAt = options.nextAt ?? Number.POSITIVE_INFINITY;
  for (;;) {
    const left = giveUpAt - Date.now();
    if (left <= 0 || signal?.aborted) return false;
    const untilDue = Math.max(0, wakeAt - clock());
    const nap = Math.min(left, pollIntervalMs, untilDue);
    if (await wakeups.sleep(topic, nap, signal)) return !signal?.aborted;
    if (clock() >= wakeAt) return true;
    if (Date.now() >= giveUpAt || signal?.aborted) return false;
    let current: unknown;
    try {
      current = await redis.get(seqKey);
    } catch (error) {
      throw redisError(error);
    }
    if (Number(current ?? 0) !== seq) return true;
  }
}
