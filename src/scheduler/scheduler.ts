// The scheduler: what the cron does each tick, as steps sharing one run (its clock, time and
// subrequest budget).
import { type Logger, messageOf, silentLogger } from "../log";
import type { Run } from "../run/run";

/** What a step reports: counts of what it did, and whether work was left when it stopped. */
export type StepReport = { more: boolean; [count: string]: number | boolean };

export type StepContext = {
  /**
   * The tick's run: its time (`startedAt`, the cron's `scheduledTime`), its subrequest budget
   * shared by the steps and all the work they start, and `defer` for work that may outlive the
   * tick (deliveries waiting for their due times).
   */
  run: Run;
  /** Stop starting new slices after this moment (by Date.now()). */
  until: number;
  /** What the steps before this one reported in this tick. */
  reports: Readonly<Record<string, StepReport>>;
};

/** One kind of due work: draining delay buckets, delivering push jobs, polling payments. */
export type SchedulerStep<Report extends StepReport = StepReport> = {
  name: string;
  run(context: StepContext): Promise<Report>;
};

export type SchedulerOptions = {
  steps: readonly SchedulerStep[];
  /** How long one tick may start new slices, ms (shared by its steps, in order). @default 20000 */
  budgetMs?: number;
  /** @default silent */
  log?: Logger;
};

/** What a tick did, step by step. A step that failed reports `error` and the others still run. */
export type TickReport = {
  now: number;
  steps: Record<string, StepReport | { error: string; more: true }>;
  /** Whether any step left work for the next tick. */
  more: boolean;
};

export type Scheduler = {
  /** Runs the steps in `run`, the tick's invocation (its time is the run's `startedAt`). */
  tick(run: Run): Promise<TickReport>;
};

/**
 * Builds the scheduler. Each tick runs the steps in order; each step works in bounded slices
 * until it is done or the tick's budget is spent, and whatever is left stays due for the next
 * tick (nothing is lost by stopping). Ticks may overlap, in one process or many: every slice is
 * one atomic script. A tick logs one line when it did something, and one per failing step.
 */
export function createScheduler(options: SchedulerOptions): Scheduler {
  const log = options.log ?? silentLogger;
  const budgetMs = options.budgetMs ?? 20_000;
  return {
    async tick(run) {
      const until = Date.now() + budgetMs;
      const report: TickReport = { now: run.startedAt, steps: {}, more: false };
      const reports: Record<string, StepReport> = {};
      for (const step of options.steps) {
        try {
          const done = await step.run({ run, until, reports });
          reports[step.name] = done;
          report.steps[step.name] = done;
          report.more ||= done.more;
        } catch (error) {
          report.steps[step.name] = { error: messageOf(error), more: true };
          report.more = true;
          log({
            level: "error",
            event: "tick_step_failed",
            step: step.name,
            message: messageOf(error),
          });
        }
      }
      if (didSomething(report)) log({ level: "info", event: "tick", ...report });
      return report;
    },
  };
}

function didSomething(report: TickReport): boolean {
  return Object.values(report.steps).some((step) =>
    Object.entries(step).some(
      ([name, value]) => name !== "slices" && typeof value === "number" && value > 0,
    ),
  );
}
