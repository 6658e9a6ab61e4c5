// The scheduler room: createScheduler and its steps, and `tick` for embedding the library.
import { silentLogger } from "../log";
import type { DelayQueue } from "../queue";
import { createRun } from "../run/run";
import { type DrainReport, drainStep } from "./drain";

export { type DrainReport, drainStep } from "./drain";
export {
  createScheduler,
  type Scheduler,
  type SchedulerOptions,
  type SchedulerStep,
  type StepContext,
  type StepReport,
  type TickReport,
} from "./scheduler";

export type TickOptions = {
  /** The tick's time, unix ms (the cron's `scheduledTime`). @default the queue's clock */
  now?: number;
  /** Stop starting new slices after this long, ms. @default 20000 */
  budgetMs?: number;
};

/** What `tick` did: the drain step's report. */
export type TickResult = DrainReport;

/**
 * The scheduler's drain for one queue, for users who embed the library and run their own cron:
 * promote due jobs and take back expired leases until nothing is due or the budget is spent.
 */
export async function tick(queue: DelayQueue, options: TickOptions = {}): Promise<TickResult> {
  const budgetMs = options.budgetMs ?? 20_000;
  // A run of its own: the embedding process has no subrequest limit.
  const run = createRun({
    clock: queue.clock,
    startedAt: options.now ?? queue.clock(),
    subrequests: Number.POSITIVE_INFINITY,
    lifetimeMs: budgetMs,
    log: silentLogger,
  });
  return drainStep(queue).run({ run, until: Date.now() + budgetMs, reports: {} });
}
