// Direct delivery of claimed jobs: a look just before sending (a job deleted or settled since
// its claim is not sent), the POST, and the answer settled.
import { DIRECT_WINDOW_MS } from "../domain/push";
import { messageOf } from "../log";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import { deliverDirect, type Parcel, sendTime } from "./delivery";
import type { DispatchDeps, DrainReport } from "./deps";
import type { Delivery, Settled } from "./settle";
import { until } from "./until";

/** What a direct job not sent after its look gives back: its POST and its settle. */
const COST_AFTER_LOOK = 2;
/** How long a failed look before sending waits before it is tried again, ms. */
const LOOK_RETRY_MS = 1000;

/**
 * The parcels due at `due` that are still to be sent, once it has come (never before). A claim
 * made ahead of the due time is looked at again then, in one call for the group, so that a
 * delete acknowledged before the due time always wins. The claim took one look for the group
 * (claims.ts: cost): it is given back when none is needed, and so is the cost of the parcels
 * that will not be sent.
 */
export async function stillToSend(run: Run, deps: DispatchDeps, due: number, parcels: Parcel[]) {
  const { budget } = run;
  if (due <= run.clock()) {
    budget.giveBack(1);
    return parcels;
  }
  await until(due, run.clock);
  const pairs = parcels.flatMap((parcel) => [parcel.meta.id, parcel.meta.receipt ?? ""]);
  const leaseEnd = Math.min(...parcels.map((p) => p.meta.leaseEnd ?? p.meta.due));
  const held = await lookAgain(run, deps, pairs, leaseEnd);
  const send = parcels.filter((_, i) => held[i]);
  budget.giveBack(COST_AFTER_LOOK * (parcels.length - send.length));
  return send;
}

/**
 * stillHeld for jobs about to be sent. A failure (Redis down for a moment) is tried again every
 * LOOK_RETRY_MS while the leases last and the budget pays, so a short outage delays the jobs
 * by about its length rather than by their TTR (their leases would bring them back, an attempt
 * spent and never sent).
 */
async function lookAgain(run: Run, deps: DispatchDeps, pairs: string[], leaseEnd: number) {
  for (;;) {
    try {
      return await deps.scripts.run("stillHeld", run.clock(), pairs);
    } catch (error) {
      if (run.clock() + LOOK_RETRY_MS >= leaseEnd || !run.budget.take(1)) throw error;
      run.log({ level: "warn", event: "push_check_retried", message: messageOf(error) });
      await until(run.clock() + LOOK_RETRY_MS, run.clock);
    }
  }
}

/**
 * POSTs one parcel and settles it by the answer (through `settle`: the run's batches); answers
 * the work that follows.
 */
export async function deliverOne(
  run: Run,
  deps: DispatchDeps,
  parcel: Parcel,
  report: DrainReport,
  settle: (delivery: Delivery) => Promise<Settled>,
): Promise<Work[]> {
  const route = deps.route(parcel.meta.topic, parcel.push.url);
  // A send again on a fresh connection (the receiver closed the pooled one) is one more
  // subrequest: made only when the run's budget pays for it.
  const attempt = await deliverDirect(parcel, {
    ...route,
    now: run.clock,
    mayRetry: () => run.budget.take(1),
  });
  if (attempt.settlement.outcome === "fail") {
    report.failed += 1;
    run.log({
      level: "warn",
      event: "push_failed",
      topic: parcel.meta.topic,
      id: parcel.meta.id,
      status: attempt.status,
      error: attempt.error,
    });
  } else {
    report.delivered += 1;
  }
  const settled = await settle({
    id: parcel.meta.id,
    receipt: parcel.meta.receipt ?? "",
    attempt,
    windowMs: DIRECT_WINDOW_MS,
  });
  return settled.work;
}

/**
 * Claimed direct parcels by send time (their due time, or a rate's slot): each group is looked
 * at and sent together.
 */
export function byDue(parcels: readonly Parcel[]): Map<number, Parcel[]> {
  const groups = new Map<number, Parcel[]>();
  for (const parcel of parcels) {
    const at = sendTime(parcel);
    const group = groups.get(at);
    if (group) group.push(parcel);
    else groups.set(at, [parcel]);
  }
  return groups;
}
