// The push step: hands the run's loop the push jobs due before the next tick (claimed now,
// delivered at their due times) and the failure notices waiting.
import type { Dispatcher } from "../dispatch/dispatcher";
import { beforeNextTick, notices, type Work } from "../run/work";
import type { DrainReport } from "./drain";
import type { SchedulerStep, StepContext, StepReport } from "./scheduler";

/**
 * Runs only when the drain saw push work near (the schedule's `~push` and `~notices` entries),
 * or the schedules step made fires in push topics, so an idle tick costs nothing more. The loop claims first and sends notices once the claims
 * are answered (src/dispatch/loop.ts); deliveries wait for their due times in the run's `defer`,
 * so the tick does not wait for them.
 */
export function pushStep(dispatcher: Dispatcher): SchedulerStep<StepReport> {
  return {
    name: "push",
    async run({ run, reports }: StepContext): Promise<StepReport> {
      const drain = reports.drain as DrainReport | undefined;
      // Fires a schedule made this tick in push topics are claimed with the rest.
      const made = reports.schedules as { pushDue?: boolean } | undefined;
      const work: Work[] = [];
      if (!drain || drain.pushDue || made?.pushDue) work.push(beforeNextTick(run.startedAt));
      if (!drain || drain.noticesDue) work.push(notices());
      if (work.length === 0) return { more: false };
      run.defer(
        dispatcher.drain(run, work).then((report) => {
          if (report.more) run.log({ level: "warn", event: "push_budget", ...report });
        }),
      );
      return { more: false };
    },
  };
}
