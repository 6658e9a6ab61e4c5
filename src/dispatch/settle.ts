// A delivery's answer applied to its job (the settle script), and the work that follows from it:
// a job given back due soon is claimed again by the same run, a death tells failureUrl at once.
import { type RecordMeta, recordText, splitRecord } from "../redis/record";
import type { Run } from "../run/run";
import { notices, type Work } from "../run/work";
import type { Attempt } from "./delivery";
import type { DispatchDeps } from "./deps";

/** A settled delivery: the job's record after it (none: the reservation had ended), what follows. */
export type Settled = { meta?: RecordMeta; work: Work[] };

/**
 * Settles the delivery of job `id` under `receipt` by `attempt`. A job given back due within
 * `windowMs` is claimed again by this run (not left for the next tick); a job that died tells
 * its topic's failureUrl from this run (its notice queued by the script), not a minute later.
 */
export async function settleDelivery(
  deps: DispatchDeps,
  run: Run,
  delivery: { id: string; receipt: string; attempt: Attempt; windowMs: number },
): Promise<Settled> {
  const { settlement } = delivery.attempt;
  const reply = await deps.scripts.run("settle", run.clock(), [
    delivery.id,
    delivery.receipt,
    settlement.outcome,
    "delayMs" in settlement && settlement.delayMs !== undefined ? settlement.delayMs : "",
    delivery.attempt.status,
    recordText(delivery.attempt.error ?? ""),
  ]);
  if (reply.code !== "ok") return { work: [] };
  const { meta } = splitRecord(reply.value);
  deps.count?.(meta.topic, settlement.outcome);
  return { meta, work: followingWork(meta, run.clock(), delivery.windowMs) };
}

/** What a settled job leads to within the run that settled it. */
export function followingWork(meta: RecordMeta, now: number, windowMs: number): Work[] {
  if (meta.state === "dead") return [notices()];
  if (meta.state === "waiting" && meta.due <= now + windowMs) {
    return [{ kind: "claim", topic: meta.topic, horizon: now + windowMs }];
  }
  return [];
}
