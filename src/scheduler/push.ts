// The push step: claims push jobs due before the next tick and delivers them at their due times;
// sends the failure notices of push jobs that died.
import type { Dispatcher } from "../dispatch/dispatcher";
import { type Logger, messageOf } from "../log";
import type { DrainReport } from "./drain";
import type { SchedulerStep, StepContext, StepReport } from "./scheduler";

export type PushReport = StepReport & {
  /** Failure notices sent, when the tick waited for them (no `defer`). */
  notices?: number;
};

/**
 * Runs only when the drain saw push work near (the schedule's `~push` and `~notices` entries),
 * so an idle tick costs nothing more. Claims come first: they have the budget before failure
 * notices, and a notice can neither hold them up (a failureUrl that hangs for its timeout delays
 * only the notices) nor stop them (a notice round that fails is logged). Deliveries wait for
 * their due times, and notices for their answers; with `defer` (a Worker's waitUntil, Node's own
 * tracking) the tick waits for neither.
 */
export function pushStep(dispatcher: Dispatcher, log: Logger): SchedulerStep<PushReport> {
  // One round of notices at a time in this process: a round whose failureUrls hang for their
  // timeout is not joined by another each tick, each holding up to 50 more open requests.
  let noticesRunning = false;
  return {
    name: "push",
    async run({ now, reports, defer, budget }: StepContext): Promise<PushReport> {
      const drain = reports.drain as DrainReport | undefined;
      const report: PushReport = { more: false };
      const work: Promise<void>[] = [];
      let claimed = Promise.resolve();
      if (!drain || drain.pushDue) {
        let onClaimed = () => {};
        claimed = new Promise<void>((resolve) => {
          onClaimed = resolve;
        });
        // A run claims at once and resolves when the last delivery is settled.
        const run = dispatcher.run({ now, budget, onClaimed });
        work.push(
          run.then(
            (done) => {
              if (done.more) log({ level: "warn", event: "push_budget", ...done });
            },
            (error: unknown) => {
              log({ level: "error", event: "push_failed", message: messageOf(error) });
            },
          ),
        );
      }
      if ((!drain || drain.noticesDue) && !noticesRunning) {
        noticesRunning = true;
        const notices = claimed.then(() => dispatcher.sendNotices(50, budget));
        work.push(
          notices
            .then(
              (sent) => {
                report.notices = sent;
              },
              (error: unknown) => {
                log({ level: "error", event: "notices_failed", message: messageOf(error) });
              },
            )
            .finally(() => {
              noticesRunning = false;
            }),
        );
      }
      const all = Promise.all(work);
      if (defer) defer(all);
      else await all;
      return report;
    },
  };
}
