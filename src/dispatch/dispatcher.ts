// The push dispatcher: claims due push jobs, delivers them (directly, or by publishing to QStash)
// at their due times, settles each by its receiver's answer, and tells failureUrls about deaths.
import type { PushConfig } from "../domain/push";
import { type Logger, messageOf } from "../log";
import { CLAIM_AHEAD_MS } from "../redis/lua/lib/transitions";
import { type ClaimedTopic, claim, published, settle, stillHeld } from "../redis/lua/scripts/push";
import { type RecordMeta, splitRecord } from "../redis/record";
import { createScriptRunner, type RedisClient } from "../redis/runner";
import { type Attempt, deliverDirect, type Parcel, type Post } from "./delivery";
import { sendNotices } from "./notices";
import type { QStash } from "./qstash";
import { until } from "./until";

/** A direct job due this soon after the request that wrote it is delivered by that request. */
export const DIRECT_WINDOW_MS = 25_000;
/** Claims one run makes while they take only QStash jobs (each claims up to `batch`). */
const MAX_CLAIM_ROUNDS = 10;
/** Runs one delivery may start for jobs its receivers gave back due soon, one after another. */
const MAX_FOLLOW_UPS = 5;

export type DispatcherOptions = {
  redis: RedisClient;
  prefix: string;
  retentionMs: number;
  clock?: () => number;
  /** For `via: "qstash"` topics; without it they are delivered directly (and a warning logged). */
  qstash?: QStash;
  /** The service's own public URL, for QStash callbacks. */
  publicUrl?: string;
  /** The fetch deliveries and notices go out with. @default the global fetch */
  fetch?: Post;
  log: Logger;
  /** Counts deliveries: `delayq_deliveries_total{topic,outcome}`. */
  count?: (name: string, labels: Record<string, string>, n?: number) => void;
  /**
   * Subrequests one invocation may make (Workers: 50 on the free plan, 1000 and more on paid);
   * what does not fit stays due for the next run. @default 1000
   */
  subrequests?: number;
  /** Most jobs one claim takes. @default 500 */
  batch?: number;
  /**
   * Handlers of delayq's own push topics, by their push url (`internal:<name>`): payment polls.
   * A handler settles its job itself.
   */
  internal?: Record<string, (meta: RecordMeta, body: string) => Promise<void>>;
};

export type DispatchReport = {
  claimed: number;
  delivered: number;
  failed: number;
  published: number;
  /** Whether the budget stopped the run with push work possibly left. */
  more: boolean;
};

export type Dispatcher = {
  /**
   * Claims push jobs due by `horizon` (of every push topic, or of `topic`) and delivers them at
   * their due times. Resolves once every claimed job is delivered or published.
   */
  run(options: { now: number; horizon?: number; topic?: string }): Promise<DispatchReport>;
  /**
   * Settles one delivery by its answer; false when the reservation had ended (ignored). A job
   * given back due before the next tick is claimed again at once, its run handed to `defer`
   * (a request's waitUntil; awaited without one).
   */
  settle(
    id: string,
    receipt: string,
    attempt: Attempt,
    defer?: (work: Promise<unknown>) => void,
  ): Promise<boolean>;
  /** Sends queued failure notices; answers how many went out. */
  sendNotices(limit?: number): Promise<number>;
  /** Cancels a job's QStash message (a delete does, before it answers). */
  cancel(messageId: string): Promise<void>;
  qstash?: QStash;
};

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const clock = options.clock ?? Date.now;
  const scripts = createScriptRunner(options.redis, options.prefix, options.retentionMs);
  const budget = options.subrequests ?? 1000;
  const batch = options.batch ?? 500;
  const { log } = options;
  let warnedNoQStash = false;

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
      (attempt.error ?? "").replace(/[|\r\n]+/g, " ").slice(0, 200),
    ]);
    if (reply.code !== "ok") return undefined;
    const { meta } = splitRecord(reply.value);
    options.count?.("delayq_deliveries_total", { topic: meta.topic, outcome: settlement.outcome });
    return meta;
  }

  /**
   * A job its receiver gave back (retry) due within `window` is claimed again by the run that
   * settled it, not left for the next tick; at most MAX_FOLLOW_UPS such runs in a chain.
   */
  function followUp(meta: RecordMeta | undefined, window: number, depth: number) {
    if (meta?.state !== "waiting" || depth >= MAX_FOLLOW_UPS) return undefined;
    const now = clock();
    if (meta.due > now + window) return undefined;
    return runDispatch({ now, horizon: now + window, topic: meta.topic }, depth + 1).catch(
      (error: unknown) => {
        log({ level: "error", event: "push_failed", topic: meta.topic, message: messageOf(error) });
      },
    );
  }

  /** Runs `work` at `due` (never before), logging instead of throwing. */
  async function runAt(due: number, work: () => Promise<void>, id: string): Promise<void> {
    await until(due, clock);
    try {
      await work();
    } catch (error) {
      log({ level: "error", event: "internal_job_failed", id, message: messageOf(error) });
    }
  }

  /**
   * Delivers the parcels due at `due` (never before). A claim made ahead of the due time is looked
   * at again once it comes, in one call for the group: a job deleted (or settled) meanwhile is
   * not sent, so a delete acknowledged before the due time always wins.
   */
  async function deliverGroup(
    due: number,
    parcels: Parcel[],
    report: DispatchReport,
    depth: number,
  ) {
    let send = parcels;
    if (due > clock()) {
      await until(due, clock);
      const pairs = parcels.flatMap((parcel) => [parcel.meta.id, parcel.meta.receipt ?? ""]);
      const held = await scripts.run(stillHeld, clock(), pairs);
      send = parcels.filter((_, i) => held[i]);
    }
    await Promise.all(
      send.map((parcel) =>
        deliver(parcel, report, depth).catch((error: unknown) => {
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

  async function deliver(parcel: Parcel, report: DispatchReport, depth: number): Promise<void> {
    const attempt = await deliverDirect(parcel, { fetch: options.fetch, now: clock });
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
    await followUp(meta, DIRECT_WINDOW_MS, depth);
  }

  async function runDispatch(
    { now, horizon = now + CLAIM_AHEAD_MS, topic }: Parameters<Dispatcher["run"]>[0],
    depth: number,
  ): Promise<DispatchReport> {
    const report: DispatchReport = {
      claimed: 0,
      delivered: 0,
      failed: 0,
      published: 0,
      more: false,
    };
    const direct: Parcel[] = [];
    const viaQStash: Parcel[] = [];
    const internal: Promise<void>[] = [];
    function classify(claimed: ClaimedTopic[]): void {
      for (const group of claimed) {
        const push = (JSON.parse(group.config) as { push?: PushConfig }).push;
        for (const raw of group.records) {
          const { meta, body } = splitRecord(raw);
          report.claimed += 1;
          if (!push) continue; // un-pushed since: its lease brings it back to the pulled topic
          const parcel = { meta, body, push };
          const handler = (push.via as string) === "internal" && options.internal?.[push.url];
          if (handler) {
            internal.push(runAt(meta.due, () => handler(meta, body), meta.id));
            continue;
          }
          if (push.via === "qstash" && options.qstash && options.publicUrl) viaQStash.push(parcel);
          else {
            if (push.via === "qstash" && !warnedNoQStash) {
              warnedNoQStash = true;
              log({
                level: "warn",
                event: "qstash_not_configured",
                message:
                  "A topic pushes via QStash, but QSTASH_URL, QSTASH_TOKEN, the signing keys or " +
                  "DQ_PUBLIC_URL are not set: delivering directly",
              });
            }
            direct.push(parcel);
          }
        }
      }
    }

    // Subrequests this run may spend, a few kept back for the claim and the notices. Each direct
    // (or internal) job costs a delivery, a settle and (claimed ahead of its due time) a look
    // before it is sent, so a claim takes at most a third of what is left; QStash jobs cost one
    // request per 100 (and one record of them all), so a claim that took only those is followed
    // by another.
    let extraClaims = 0;
    const spent = () =>
      extraClaims +
      3 * (direct.length + internal.length) +
      Math.ceil(viaQStash.length / 100) +
      (viaQStash.length > 0 ? 1 : 0);
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const most = Math.max(0, Math.min(batch, Math.floor((budget - 4 - spent()) / 3)));
      if (most === 0) {
        report.more = true;
        break;
      }
      if (round > 0) extraClaims += 1;
      const before = { claimed: report.claimed, pushed: direct.length + internal.length };
      classify(await scripts.run(claim, now, [horizon, most, 100, randomHex(6), topic ?? ""]));
      report.more = report.claimed - before.claimed >= most;
      if (!report.more || direct.length + internal.length > before.pushed) break;
    }
    const byDue = new Map<number, Parcel[]>();
    for (const parcel of direct) {
      const group = byDue.get(parcel.meta.due);
      if (group) group.push(parcel);
      else byDue.set(parcel.meta.due, [parcel]);
    }
    const work: Promise<void>[] = [...byDue].map(([due, parcels]) =>
      deliverGroup(due, parcels, report, depth).catch((error: unknown) => {
        // Not looked at again (Redis failed): not sent; the leases bring the jobs back.
        log({ level: "error", event: "push_check_failed", message: messageOf(error) });
      }),
    );
    if (viaQStash.length > 0 && options.qstash && options.publicUrl) {
      const qstash = options.qstash;
      work.push(
        (async () => {
          const ids = await qstash.publish(viaQStash, options.publicUrl as string, clock());
          report.published += ids.length;
          const triples = viaQStash.flatMap((parcel, i) => [
            parcel.meta.id,
            parcel.meta.receipt ?? "",
            ids[i] ?? "",
          ]);
          const stale = await scripts.run(published, clock(), triples);
          for (const messageId of stale) await qstash.cancel(messageId);
        })().catch((error: unknown) => {
          // Not published (or not recorded): the leases bring the jobs back for another try.
          log({ level: "error", event: "qstash_publish_failed", message: messageOf(error) });
        }),
      );
    }
    await Promise.all([...work, ...internal]);
    return report;
  }

  return {
    qstash: options.qstash,
    run: (args) => runDispatch(args, 0),
    async settle(id, receipt, attempt, defer) {
      const meta = await settleOne(id, receipt, attempt);
      // A QStash answer: the job may be due again before the next tick.
      const again = followUp(meta, CLAIM_AHEAD_MS, 0);
      if (again !== undefined && defer) defer(again);
      else await again;
      return meta !== undefined;
    },
    sendNotices: (limit = 50) => sendNotices(scripts, clock, options.fetch, limit),
    async cancel(messageId) {
      await options.qstash?.cancel(messageId);
    },
  };
}

function randomHex(bytes: number): string {
  const buffer = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(buffer, (b) => b.toString(16).padStart(2, "0")).join("");
}
