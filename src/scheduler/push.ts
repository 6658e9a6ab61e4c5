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

/** Failure notices one round takes at most. */
const NOTICES_PER_ROUND = 50;
/** Notice requests one process keeps open at once, rounds together (see pushStep). */
const MAX_OPEN_NOTICES = 200;
/**
 * A round older than this is over, whether or not it said so: the longest push timeout is 60 s,
 * and a Worker may cut deferred work off without its `finally` running.
 */
const ROUND_MS = 70_000;

/**
 * Runs only when the drain saw push work near (the schedule's `~push` and `~notices` entries),
 * so an idle tick costs nothing more. Claims go out first, and failure notices right after them,
 * with a part of the budget set aside before the claims (up to a round's worth, at most half of
 * what is left), so neither a backlog of deliveries nor a mass of notices starves the other. A
 * notice can neither hold the claims up (a failureUrl that hangs for its timeout delays only its
 * own round) nor stop them (a round that fails is logged). Rounds may overlap, up to
 * `maxOpenNotices` notice requests at once in this process, so one hanging receiver does not set
 * everyone's pace. Deliveries wait for their due times, and notices for their answers; with
 * `defer` (a Worker's waitUntil, Node's own tracking) the tick waits for neither.
 */
export function pushStep(
  dispatcher: Dispatcher,
  log: Logger,
  options: { maxOpenNotices?: number } = {},
): SchedulerStep<PushReport> {
  const maxOpen = options.maxOpenNotices ?? MAX_OPEN_NOTICES;
  // The rounds of notices under way in this process: how many each may send, and when it began.
  const rounds = new Set<{ most: number; at: number }>();
  const room = (now: number) => {
    let open = 0;
    for (const round of rounds) {
      if (now - round.at >= ROUND_MS) rounds.delete(round);
      else open += round.most;
    }
    return Math.min(NOTICES_PER_ROUND, maxOpen - open);
  };
  return {
    name: "push",
    async run({ now, reports, defer, budget }: StepContext): Promise<PushReport> {
      const drain = reports.drain as DrainReport | undefined;
      const report: PushReport = { more: false };
      const work: Promise<void>[] = [];
      const most = !drain || drain.noticesDue ? room(now) : 0;
      // Set aside before the claims, given back to the round as soon as they are made.
      const reserved =
        most > 0 && budget ? budget.takeUpTo(Math.min(most + 2, Math.ceil(budget.left() / 2))) : 0;
      const sendNotices = () => {
        budget?.giveBack(reserved);
        const round = { most, at: now };
        rounds.add(round);
        // Called at once: the round takes its budget before any delivery spends more.
        const sent = dispatcher.sendNotices(most, budget);
        work.push(
          sent
            .then(
              (count) => {
                report.notices = count;
              },
              (error: unknown) => {
                log({ level: "error", event: "notices_failed", message: messageOf(error) });
              },
            )
            .finally(() => {
              rounds.delete(round);
            }),
        );
      };
      let claimed: Promise<void> = Promise.resolve();
      if (!drain || drain.pushDue) {
        let onClaimed = () => {};
        claimed = new Promise<void>((resolve) => {
          onClaimed = () => {
            if (most > 0) sendNotices();
            resolve();
          };
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
      } else if (most > 0) {
        sendNotices();
      }
      await claimed;
      const all = Promise.all(work);
      if (defer) defer(all);
      else await all;
      return report;
    },
  };
}
