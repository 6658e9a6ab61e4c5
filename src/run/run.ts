// One invocation's run: a Worker's request or cron event, a request or tick of the Node entry. The
// entry creates it and hands it down; everything the invocation does reads its clock, spends its
// subrequest budget, keeps work going through its `defer` and logs through its logger.
import { type Logger, messageOf } from "../log";
import { type Budget, createBudget } from "./budget";

export type Run = {
  /** The invocation's clock, unix ms. */
  readonly clock: () => number;
  /** When the invocation began (a cron's `scheduledTime`, a request's arrival), unix ms. */
  readonly startedAt: number;
  /** Whether the invocation is a tick of the cron (the next one comes an interval after it). */
  readonly tick: boolean;
  /**
   * No new work starts after this moment (by `clock`): the platform cuts work off not long after
   * (a Worker's `waitUntil` ends 30 s after a request's answer).
   */
  readonly until: number;
  /** The subrequests left to the invocation (DQ_SUBREQUESTS; Workers enforce the limit). */
  readonly budget: Budget;
  readonly log: Logger;
  /** Fields that say which invocation a log line came from (a request's path; a tick). */
  readonly label: Readonly<Record<string, string>>;
  /**
   * Keeps `work` going after the invocation answers (a Worker's `waitUntil`). A failure is logged
   * (`background_failed`, with the run's `label`), never left as a rejection nobody handles: on
   * Node one ends the process.
   */
  defer(work: Promise<unknown>): void;
  /** Resolves once all deferred work has settled, work deferred meanwhile included. */
  settled(): Promise<void>;
};

export type RunOptions = {
  /** @default Date.now */
  clock?: () => number;
  /** @default clock() */
  startedAt?: number;
  /** A tick of the cron. @default false */
  tick?: boolean;
  /** Subrequests the invocation may make. */
  subrequests: number;
  /** How long after `startedAt` the run may start new work, ms. */
  lifetimeMs: number;
  log: Logger;
  /** The platform's keeper of work that outlives the answer (a Worker's `ctx.waitUntil`). */
  waitUntil?: (work: Promise<unknown>) => void;
  /** Fields that say which invocation a log line of deferred work came from (e.g. its path). */
  label?: Record<string, string>;
};

export function createRun(options: RunOptions): Run {
  const clock = options.clock ?? Date.now;
  const startedAt = options.startedAt ?? clock();
  const { log } = options;
  const open = new Set<Promise<unknown>>();
  return {
    clock,
    startedAt,
    tick: options.tick ?? false,
    until: startedAt + options.lifetimeMs,
    budget: createBudget(options.subrequests),
    log,
    label: options.label ?? {},
    defer(work) {
      const guarded = work.then(undefined, (error: unknown) => {
        log({
          level: "error",
          event: "background_failed",
          ...options.label,
          message: messageOf(error),
        });
      });
      open.add(guarded);
      void guarded.finally(() => open.delete(guarded));
      options.waitUntil?.(guarded);
    },
    async settled() {
      while (open.size > 0) await Promise.all([...open]);
    },
  };
}
