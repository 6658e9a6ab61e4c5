// The drain step: moves due jobs to ready lists and takes back expired leases, slice by slice.
import type { DelayQueue } from "../queue";
import type { SchedulerStep, StepContext, StepReport } from "./scheduler";

export type DrainReport = StepReport & {
  /** Jobs moved from delay buckets to ready lists. */
  promoted: number;
  /** Reservations whose lease ran out, taken back. */
  expired: number;
  /** Of those, jobs that died (attempts used up, or past their deadline). */
  died: number;
  /** Script calls made (each one REST request). */
  slices: number;
  /** Push jobs need claiming (for the push step). */
  pushDue: boolean;
  /** Failure notices wait (for the push step). */
  noticesDue: boolean;
  /** Recurring schedules have fires to make (for the schedules step). */
  schedulesDue: boolean;
};

/**
 * Runs slices (one atomic script each, at most 500 jobs) until nothing is due or the tick's
 * time (or its subrequest budget: one per slice) is up; a backlog of any size drains in pieces.
 * An idle drain is one slice costing two Redis commands whatever the number of topics.
 */
export function drainStep(queue: DelayQueue): SchedulerStep<DrainReport> {
  return {
    name: "drain",
    async run({ run, until }: StepContext): Promise<DrainReport> {
      const { budget, startedAt: now } = run;
      const report: DrainReport = {
        promoted: 0,
        expired: 0,
        died: 0,
        slices: 0,
        more: false,
        pushDue: false,
        noticesDue: false,
        schedulesDue: false,
      };
      for (;;) {
        if (!budget.take(1)) {
          report.more = true;
          return report;
        }
        // At the run's time (the cron's scheduledTime), as the schedules and push steps that follow
        // run: a tick's steps share one time. Pops take only what is due by Redis's clock.
        const slice = await queue.tickSlice(now);
        report.promoted += slice.promoted;
        report.expired += slice.expired;
        report.died += slice.died;
        report.slices += 1;
        report.more = slice.more;
        report.pushDue ||= slice.pushDue;
        report.noticesDue ||= slice.noticesDue;
        report.schedulesDue ||= slice.schedulesDue;
        if (!slice.more || Date.now() >= until) return report;
      }
    },
  };
}
