// The push step: claims push jobs due before the next tick and delivers them at their due times;
// sends the failure notices of push jobs that died.
import type { Dispatcher } from "../dispatch/dispatcher";
import { type Logger, messageOf } from "../log";
import type { DrainReport } from "./drain";
import type { SchedulerStep, StepContext, StepReport } from "./scheduler";

export type PushReport = StepReport & {
  /** Failure notices sent. */
  notices: number;
};

/**
 * Runs only when the drain saw push work near (the schedule's `~push` and `~notices` entries),
 * so an idle tick costs nothing more. Deliveries wait for their due times; with `defer` (a
 * Worker's waitUntil, Node's own tracking) the tick does not wait for them.
 */
export function pushStep(dispatcher: Dispatcher, log: Logger): SchedulerStep<PushReport> {
  return {
    name: "push",
    async run({ now, reports, defer, budget }: StepContext): Promise<PushReport> {
      const drain = reports.drain as DrainReport | undefined;
      const report: PushReport = { notices: 0, more: false };
      if (!drain || drain.noticesDue) report.notices = await dispatcher.sendNotices(50, budget);
      if (drain && !drain.pushDue) return report;
      // A run claims at once and resolves when the last delivery is settled.
      const run = dispatcher.run({ now, budget });
      const work = run.then(
        (done) => {
          if (done.more) log({ level: "warn", event: "push_budget", ...done });
        },
        (error: unknown) => {
          log({ level: "error", event: "push_failed", message: messageOf(error) });
        },
      );
      if (defer) defer(work);
      else await work;
      return report;
    },
  };
}
