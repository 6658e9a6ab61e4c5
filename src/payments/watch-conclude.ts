// The one transition of a watch to what a poll or a notification concluded, shared by both, and
// the work that follows: an outcome's pushes to its notify topics, the next poll due soon.
import type { ProviderName } from "../domain/payments";
import { PAYMENTS_TOPIC } from "../redis/replies";
import type { Run } from "../run/run";
import { soon, type Work } from "../run/work";
import type { ProviderAnswer } from "./provider";
import { judge, outcomePrefix } from "./watch-conclusions";
import { watchIdOf } from "./watch-records";
import type { Conclusion, PaymentsOptions, Spec } from "./watch-types";

/**
 * A conclusion applied (or not: the watch had moved on) and the work that follows. `how`: "late"
 * for a late payment told, "duplicate" for a notification the watch had taken already.
 */
export type Concluded = { applied: boolean; how: "" | "late" | "duplicate"; work: Work[] };

const NOTHING: Concluded = { applied: false, how: "", work: [] };

/** A notification id the watch can remember (Alipay's notify_id, WeChat Pay's event id). */
export const NOTIFY_ID = /^[\w.:-]{1,128}$/;

/** One application of a watch's one transition (watchPolled), a payment's or a refund's. */
export type Transition = {
  watchId: string;
  /** The poll job's receipt; "" for a notification, which needs none. */
  receipt: string;
  kind: "pending" | "transient" | "outcome";
  /** The answer's word (trade state, refund status) or the error: the watch's lastAnswer. */
  word: string;
  /** The outcome's state, for an outcome. */
  state: string;
  /** The outcome job's body up to its metadata, for an outcome. */
  prefix: string;
  /** A notification's own id, to take it once. */
  notifyId?: string;
};

/** Runs a watch's transition: the one script polls and notifications of both kinds share. */
export function transition(
  options: Pick<PaymentsOptions, "scripts" | "defaults">,
  run: Run,
  t: Transition,
) {
  return options.scripts.run("watchPolled", run.clock(), [
    t.watchId,
    t.receipt,
    t.kind,
    t.word,
    t.state,
    t.prefix,
    options.defaults.ttrMs,
    options.defaults.maxAttempts,
    t.notifyId ?? "",
  ]);
}

/** What a conclusion comes to: who concluded it, for which poll (or "" for a notification). */
export type Concluding = {
  watchId: string;
  spec: Spec;
  /** The poll job's receipt; "" for a notification, which needs none. */
  receipt: string;
  source: "poll" | "notify";
  conclusion: Conclusion;
  polls: number;
  /** A notification's own id (Alipay's notify_id, WeChat Pay's event id), to take it once. */
  notifyId?: string;
};

/**
 * Applies a conclusion through the watch's one transition. An outcome is added to each notify
 * topic by the same script, exactly once; its pushes then go out from this run. A poll that did
 * not end the watch leads to the polls due soon. A verified payment of a watch that had ended
 * (expired, closed, failed, stopped) is told once more, late.
 */
export async function conclude(
  options: PaymentsOptions,
  run: Run,
  c: Concluding,
): Promise<Concluded> {
  const { conclusion, spec } = c;
  const outcome = conclusion.kind === "outcome";
  const result = await transition(options, run, {
    watchId: c.watchId,
    receipt: c.receipt,
    kind: conclusion.kind,
    word: conclusion.tradeState,
    state: outcome ? conclusion.state : "",
    prefix: outcome ? outcomePrefix(spec, c.source, c.polls, conclusion) : "",
    ...(c.notifyId !== undefined ? { notifyId: c.notifyId } : {}),
  });
  const { how } = result;
  if (!result.applied) return { ...NOTHING, how };
  const now = run.clock();
  if (!outcome) return { applied: true, how, work: [soon(PAYMENTS_TOPIC, now)] };
  run.log({
    level: "info",
    event: "payment_outcome",
    provider: spec.provider,
    account: spec.account,
    state: conclusion.state,
    tradeState: conclusion.tradeState,
    source: c.source,
    ...(how === "late" ? { late: true } : {}),
  });
  return { applied: true, how, work: [...new Set(spec.notify)].map((topic) => soon(topic, now)) };
}

/**
 * A provider's verified notification about an order settles its watch through the same
 * transition as a poll (a late payment of an ended watch included); an order nobody watches, and
 * a notification that says nothing final, are ignored. `notifyId`: the notification's own id.
 */
export async function concludeByNotification(
  options: PaymentsOptions,
  run: Run,
  order: { provider: ProviderName; account: string; outTradeNo: string },
  answer: ProviderAnswer & { kind: "trade" },
  notifyId?: string,
): Promise<Concluded> {
  const watchId = await watchIdOf(order.provider, order.account, order.outTradeNo);
  const stored = await options.scripts.run("watchRead", run.clock(), [watchId]);
  if (!stored) return NOTHING;
  const spec = JSON.parse(stored.fields.spec ?? "{}") as Spec;
  const conclusion = judge(spec, answer, run.clock);
  if (conclusion.kind !== "outcome") return NOTHING;
  const polls = Number(stored.fields.polls ?? 0);
  return conclude(options, run, {
    watchId,
    spec,
    receipt: "",
    source: "notify",
    conclusion,
    polls,
    // Kept in the watch space-separated: an id of other characters is not remembered.
    ...(notifyId && NOTIFY_ID.test(notifyId) ? { notifyId } : {}),
  });
}
