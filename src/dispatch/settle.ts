// Deliveries' answers applied to their jobs (the settle script), and the work that follows: a job
// given back due soon is claimed again by the same run, a death tells failureUrl at once. The
// answers a run gets within a few milliseconds of each other are settled in one script call.
import { errorField, type RecordMeta, splitRecord } from "../redis/record";
import type { Run } from "../run/run";
import { notices, type Work } from "../run/work";
import type { Attempt } from "./delivery";
import type { DispatchDeps } from "./deps";

/** A delivery to settle: its job, the reservation it went out under, its answer. */
export type Delivery = {
  id: string;
  receipt: string;
  attempt: Attempt;
  /** A job given back due within this long is claimed again by the run that settled it. */
  windowMs: number;
};

/** A settled delivery: the job's record after it (none: the reservation had ended), what follows. */
export type Settled = { meta?: RecordMeta; work: Work[] };

/** How long the first answer of a batch waits for others, ms. */
const BATCH_MS = 10;
/** Most answers one settle call takes. */
const BATCH_MOST = 100;

/**
 * Settles deliveries in one script call. Each was priced one subrequest at its claim: the call
 * gives back all but the one it made.
 */
export async function settleDeliveries(
  deps: DispatchDeps,
  run: Run,
  deliveries: readonly Delivery[],
): Promise<Settled[]> {
  const args = deliveries.flatMap(({ id, receipt, attempt }) => {
    const { settlement } = attempt;
    const wait =
      "delayMs" in settlement && settlement.delayMs !== undefined ? settlement.delayMs : "";
    return [id, receipt, settlement.outcome, wait, attempt.status, errorField(attempt.error ?? "")];
  });
  const replies = await deps.scripts.run("settle", run.clock(), args);
  run.budget.giveBack(deliveries.length - 1);
  const now = run.clock();
  return deliveries.map((delivery, i) => {
    const reply = replies[i];
    if (reply?.code !== "ok") return { work: [] };
    const { meta } = splitRecord(reply.value);
    deps.count?.(meta.topic, delivery.attempt.settlement.outcome);
    return { meta, work: followingWork(meta, now, delivery.windowMs) };
  });
}

/**
 * A run's settles, batched: each answer waits up to BATCH_MS for others (or until BATCH_MOST
 * wait), then they go in one call. Answers the settle of one delivery.
 */
export function settleBatches(deps: DispatchDeps, run: Run) {
  let waiting: { delivery: Delivery; done: (settled: Promise<Settled>) => void }[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  const flush = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    const batch = waiting;
    waiting = [];
    const settled = settleDeliveries(
      deps,
      run,
      batch.map((item) => item.delivery),
    );
    for (const [i, item] of batch.entries()) {
      item.done(settled.then((all) => all[i] ?? { work: [] }));
    }
  };
  return (delivery: Delivery): Promise<Settled> =>
    new Promise<Settled>((resolve) => {
      waiting.push({ delivery, done: resolve });
      if (waiting.length >= BATCH_MOST) flush();
      else timer ??= setTimeout(flush, BATCH_MS);
    });
}

/** What a settled job leads to within the run that settled it. */
export function followingWork(meta: RecordMeta, now: number, windowMs: number): Work[] {
  if (meta.state === "dead") return [notices()];
  if (meta.state === "waiting" && meta.due <= now + windowMs) {
    return [{ kind: "claim", topic: meta.topic, horizon: now + windowMs }];
  }
  return [];
}
