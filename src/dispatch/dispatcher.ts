// The push dispatcher: claims due push jobs, delivers them (directly, or by publishing to QStash)
// at their due times, settles each by its receiver's answer, and tells failureUrls about deaths.
import { nonPublicUrl, restrictionNote } from "../domain/destinations";
import { messageOf } from "../log";
import { CLAIM_AHEAD_MS } from "../redis/lua/lib/transitions";
import { published, settle, stillHeld } from "../redis/lua/scripts/push";
import { type RecordMeta, recordText, splitRecord } from "../redis/record";
import { createScriptRunner } from "../redis/runner";
import { type Budget, createBudget } from "./budget";
import { type Claimed, claimDue } from "./claims";
import { type Attempt, deliverDirect, type Parcel, type Route } from "./delivery";
import type { Dispatcher, DispatcherOptions, DispatchReport, RunOptions } from "./dispatcher-types";
import { sendNotices } from "./notices";
import type { QStash } from "./qstash";
import { coalesced } from "./soon";
import { until } from "./until";

export type { Budget } from "./budget";
export { createBudget } from "./budget";
export type { InternalHandler } from "./claims";
export type {
  Dispatcher,
  DispatcherOptions,
  DispatchReport,
  RunOptions,
} from "./dispatcher-types";

/** A direct job due this soon after the request that wrote it is delivered by that request. */
export const DIRECT_WINDOW_MS = 25_000;
/** Runs one delivery may start for jobs its receivers gave back due soon, one after another. */
const MAX_FOLLOW_UPS = 5;
/** What a direct job not sent after its look gives back: its POST and its settle. */
const COST_AFTER_LOOK = 2;
/** How long a failed look before sending waits before it is tried again, ms. */
const LOOK_RETRY_MS = 1000;

/** The earliest lease end of claimed jobs (a claim writes it into each record). */
function leaseEndOf(parcels: readonly Parcel[]): number {
  return Math.min(...parcels.map((parcel) => parcel.meta.leaseEnd ?? parcel.meta.due));
}

/**
 * How a topic's delivery or notice to `url` goes out: the fetch to send it with, or why it may
 * not be sent (a topic restricted to public addresses, and a URL that names a private one).
 */
function routeOf(
  options: Pick<DispatcherOptions, "fetch" | "destinations">,
  topic: string,
  url: string,
): Route {
  const { destinations } = options;
  if (!destinations?.policy.restricted(topic)) return { fetch: options.fetch };
  const why = nonPublicUrl(url);
  if (why) return { refused: `${why}; ${restrictionNote(destinations.policy.setting)}` };
  return { fetch: destinations.fetch ?? options.fetch };
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const clock = options.clock ?? Date.now;
  const scripts = createScriptRunner(options.redis, options.prefix, options.retentionMs);
  const limit = options.subrequests ?? 1000;
  const newBudget = () => createBudget(limit);
  const batch = options.batch ?? 500;
  const { log } = options;
  let warnedNoQStash = false;
  const warnNoQStash = () => {
    if (warnedNoQStash) return;
    warnedNoQStash = true;
    log({
      level: "warn",
      event: "qstash_not_configured",
      message:
        "A topic pushes via QStash, but QSTASH_URL, QSTASH_TOKEN, the signing keys or " +
        "DQ_PUBLIC_URL are not set: delivering directly",
    });
  };

  /** Settles a delivery; answers the job's record after it, or undefined (reservation over). */
  async function settleOne(
    id: string,
    receipt: string,
    attempt: Attempt,
  ): Promise<RecordMeta | undefined> {
    const { settlement } = attempt;
    const reply = await scripts.run(settle, clock(), [
      id,
      receipt,
      settlement.outcome,
      "delayMs" in settlement && settlement.delayMs !== undefined ? settlement.delayMs : "",
      attempt.status,
      recordText(attempt.error ?? ""),
    ]);
    if (reply.code !== "ok") return undefined;
    const { meta } = splitRecord(reply.value);
    options.count?.("delayq_deliveries_total", { topic: meta.topic, outcome: settlement.outcome });
    return meta;
  }

  /**
   * A job its receiver gave back (retry) due within `window` is claimed again by the run that
   * settled it, from the same budget, not left for the next tick; at most MAX_FOLLOW_UPS such
   * runs in a chain.
   */
  function followUp(meta: RecordMeta | undefined, window: number, depth: number, budget: Budget) {
    if (meta?.state !== "waiting" || depth >= MAX_FOLLOW_UPS) return undefined;
    const now = clock();
    if (meta.due > now + window) return undefined;
    return runDispatch({ now, horizon: now + window, topic: meta.topic, budget }, depth + 1).catch(
      (error: unknown) => {
        log({ level: "error", event: "push_failed", topic: meta.topic, message: messageOf(error) });
      },
    );
  }

  /** Runs an internal job at its due time (never before), giving back what it did not spend. */
  async function runInternal(job: Claimed["internal"][number], budget: Budget): Promise<void> {
    await until(job.meta.due, clock);
    try {
      const used = await job.handler.run(job.meta, job.body, budget);
      budget.giveBack(job.handler.subrequests - used);
    } catch (error) {
      log({
        level: "error",
        event: "internal_job_failed",
        id: job.meta.id,
        message: messageOf(error),
      });
    }
  }

  /**
   * Delivers the parcels due at `due` (never before). A claim made ahead of the due time is looked
   * at again once it comes, in one call for the group: a job deleted (or settled) meanwhile is
   * not sent, so a delete acknowledged before the due time always wins. Each parcel took a look
   * from the budget: the group gives back all but the one it made.
   */
  async function deliverGroup(
    due: number,
    parcels: Parcel[],
    report: DispatchReport,
    depth: number,
    budget: Budget,
  ) {
    let send = parcels;
    if (due > clock()) {
      budget.giveBack(parcels.length - 1);
      await until(due, clock);
      const pairs = parcels.flatMap((parcel) => [parcel.meta.id, parcel.meta.receipt ?? ""]);
      const held = await lookAgain(pairs, leaseEndOf(parcels), budget);
      send = parcels.filter((_, i) => held[i]);
      budget.giveBack(COST_AFTER_LOOK * (parcels.length - send.length));
    } else {
      budget.giveBack(parcels.length);
    }
    await Promise.all(
      send.map((parcel) =>
        deliver(parcel, report, depth, budget).catch((error: unknown) => {
          log({
            level: "error",
            event: "push_settle_failed",
            id: parcel.meta.id,
            message: messageOf(error),
          });
        }),
      ),
    );
  }

  /**
   * stillHeld for jobs about to be sent. A failure (Redis down for a moment) is tried again every
   * LOOK_RETRY_MS while the leases last and the budget pays, so a short outage delays the jobs
   * by about its length rather than by their TTR (their leases would bring them back, an attempt
   * spent and never sent).
   */
  async function lookAgain(pairs: string[], leaseEnd: number, budget: Budget): Promise<boolean[]> {
    for (;;) {
      try {
        return await scripts.run(stillHeld, clock(), pairs);
      } catch (error) {
        if (clock() + LOOK_RETRY_MS >= leaseEnd || !budget.take(1)) throw error;
        log({ level: "warn", event: "push_check_retried", message: messageOf(error) });
        await until(clock() + LOOK_RETRY_MS, clock);
      }
    }
  }

  async function deliver(
    parcel: Parcel,
    report: DispatchReport,
    depth: number,
    budget: Budget,
  ): Promise<void> {
    const route = routeOf(options, parcel.meta.topic, parcel.push.url);
    const attempt = await deliverDirect(parcel, { ...route, now: clock });
    if (attempt.settlement.outcome === "fail") {
      report.failed += 1;
      log({
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
    const meta = await settleOne(parcel.meta.id, parcel.meta.receipt ?? "", attempt);
    await followUp(meta, DIRECT_WINDOW_MS, depth, budget);
  }

  /** Publishes the QStash jobs (their cost taken at the claim) and records their message ids. */
  async function publish(parcels: Parcel[], report: DispatchReport, budget: Budget) {
    const qstash = options.qstash as QStash;
    const ids = await qstash.publish(parcels, options.publicUrl as string, clock());
    report.published += ids.length;
    const triples = parcels.flatMap((parcel, i) => [
      parcel.meta.id,
      parcel.meta.receipt ?? "",
      ids[i] ?? "",
    ]);
    const stale = await scripts.run(published, clock(), triples);
    for (const messageId of stale) {
      // Rare (the job ended while it was published): a cancel the budget cannot pay for is not
      // made; the message's delivery is then answered to a reservation that is over (ignored).
      if (budget.take(1)) await qstash.cancel(messageId);
      else
        log({ level: "warn", event: "qstash_cancel_skipped", message: "subrequest budget spent" });
    }
  }

  async function runDispatch(
    { now, horizon = now + CLAIM_AHEAD_MS, topic, budget = newBudget() }: RunOptions,
    depth: number,
    onClaimed?: () => void,
  ): Promise<DispatchReport> {
    const claimed = await claimDue(
      {
        scripts,
        budget,
        batch,
        internal: options.internal,
        qstash: options.qstash !== undefined && options.publicUrl !== undefined,
        refused: (topic, url) => routeOf(options, topic, url).refused !== undefined,
        log,
        warnNoQStash,
      },
      { now, horizon, topic },
    ).finally(() => onClaimed?.());
    const report: DispatchReport = {
      claimed: claimed.claimed,
      delivered: 0,
      failed: 0,
      published: 0,
      more: claimed.more,
    };
    const byDue = new Map<number, Parcel[]>();
    for (const parcel of claimed.direct) {
      const group = byDue.get(parcel.meta.due);
      if (group) group.push(parcel);
      else byDue.set(parcel.meta.due, [parcel]);
    }
    const work: Promise<void>[] = [...byDue].map(([due, parcels]) =>
      deliverGroup(due, parcels, report, depth, budget).catch((error: unknown) => {
        // Not looked at again (Redis failed): not sent; the leases bring the jobs back.
        log({ level: "error", event: "push_check_failed", message: messageOf(error) });
      }),
    );
    if (claimed.viaQStash.length > 0) {
      work.push(
        publish(claimed.viaQStash, report, budget).catch((error: unknown) => {
          // Not published (or not recorded): the leases bring the jobs back for another try.
          log({ level: "error", event: "qstash_publish_failed", message: messageOf(error) });
        }),
      );
    }
    for (const job of claimed.internal) work.push(runInternal(job, budget));
    await Promise.all(work);
    return report;
  }

  const soon = coalesced((topic, windowMs, budget, claimed) => {
    const now = clock();
    return runDispatch({ now, horizon: now + windowMs, topic, budget }, 0, claimed);
  });

  return {
    qstash: options.qstash,
    run: (args) => runDispatch(args, 0, args.onClaimed),
    soon: (topic, windowMs, budget = newBudget()) => soon(topic, windowMs, budget),
    async settle(id, receipt, attempt, defer, budget = newBudget()) {
      const meta = await settleOne(id, receipt, attempt);
      // A QStash answer: the job may be due again before the next tick.
      const again = followUp(meta, CLAIM_AHEAD_MS, 0, budget);
      if (again !== undefined && defer) defer(again);
      else await again;
      return meta !== undefined;
    },
    sendNotices: (most = 50, budget = newBudget()) =>
      sendNotices(scripts, clock, (topic, url) => routeOf(options, topic, url), log, most, budget),
    async cancel(messageId) {
      await options.qstash?.cancel(messageId);
    },
    budget: newBudget,
  };
}
