// The schedules step: makes the fires of the schedules whose turn has come, when the drain saw the
// schedule's `~schedules` entry due (so an idle tick costs nothing more).
import type { DrainReport } from "../scheduler/drain";
import type { SchedulerStep, StepContext, StepReport } from "../scheduler/scheduler";
import type { Schedules } from "./schedules";

/** Schedules read per call (each call: one read, one make; two script calls). */
const SCHEDULES_PER_CALL = 50;

export type SchedulesReport = StepReport & {
  /** Schedules whose fires were made. */
  schedules: number;
  /** Jobs made (fires). */
  fired: number;
  /** Script calls made. */
  slices: number;
  /** A fire went to a push topic: the push step claims this tick. */
  pushDue: boolean;
};

export function schedulesStep(schedules: Schedules): SchedulerStep<SchedulesReport> {
  return {
    name: "schedules",
    async run({ run, until, reports }: StepContext): Promise<SchedulesReport> {
      const report: SchedulesReport = {
        schedules: 0,
        fired: 0,
        slices: 0,
        more: false,
        pushDue: false,
      };
      const drain = reports.drain as DrainReport | undefined;
      if (drain && !drain.schedulesDue) return report;
      for (;;) {
        if (!run.budget.take(2)) {
          report.more = true;
          return report;
        }
        const made = await schedules.makeDue(run.startedAt, SCHEDULES_PER_CALL);
        report.slices += made.schedules > 0 ? 2 : 1;
        report.schedules += made.schedules;
        report.fired += made.fired;
        report.pushDue ||= made.pushed.length > 0;
        report.more = made.more;
        if (!made.more || Date.now() >= until) return report;
      }
    },
  };
}
