// The scheduler tick: the cron's work, done in bounded slices until nothing is due or time is up.
import type { DelayQueue } from "./queue";

export type TickOptions = {
  /** The tick's time, unix ms (the cron's `scheduledTime`). @default the queue's clock */
  now?: number;
  /** Stop starting new slices after this long, ms. @default 20000 */
  budgetMs?: number;
};

export type TickResult = {
  /** Jobs moved from delay buckets to ready lists. */
  promoted: number;
  /** Reservations whose lease ran out, taken back. */
  expired: number;
  /** Of those, jobs that died (attempts used up, or past their deadline). */
  died: number;
  /** Script calls made (each one REST request). */
  slices: number;
  /** Work was left when the budget ran out. */
  more: boolean;
};

/**
 * Runs slices of the scheduler's work until nothing is due or the budget is spent. Each slice
 * is one atomic script touching at most 1000 jobs, so a backlog of any size drains in pieces,
 * and any number of ticks may run at once without moving a job twice. An idle tick is one slice
 * costing two Redis commands.
 */
export async function tick(queue: DelayQueue, options: TickOptions = {}): Promise<TickResult> {
  const budgetMs = options.budgetMs ?? 20_000;
  const started = Date.now();
  const result: TickResult = { promoted: 0, expired: 0, died: 0, slices: 0, more: false };
  for (;;) {
    const slice = await queue.tickSlice(options.now);
    result.promoted += slice.promoted;
    result.expired += slice.expired;
    result.died += slice.died;
    result.slices += 1;
    result.more = slice.more;
    if (!slice.more || Date.now() - started >= budgetMs) return result;
  }
}
