// What a refund answer concludes for a refund watch, the outcome job's body it writes, and the
// conclusion applied through the one transition every watch shares (watch-conclude.ts:
// transition), with the work that follows: an outcome's pushes, the next poll due soon.
import type { ProviderName } from "../domain/payments";
import type { RefundEvent } from "../domain/refunds";
import { REFUNDS_TOPIC } from "../redis/replies";
import type { Run } from "../run/run";
import { soon } from "../run/work";
import type { RefundAnswer, RefundAsked, RefundProvider } from "./refund-provider";
import { refundWatchIdOf } from "./refund-records";
import type { RefundConclusion, RefundSpec } from "./refund-types";
import { type Concluded, NOTIFY_ID, transition } from "./watch-conclude";
import type { PaymentsOptions } from "./watch-types";

/** Past its deadline a refund watch whose last query keeps failing transiently gives up after this. */
const GIVE_UP_MS = 10 * 60_000;

/**
 * What a refund answer means for the watch (DESIGN §4): SUCCESS / REFUND_SUCCESS succeeded,
 * CLOSED closed, ABNORMAL abnormal; PROCESSING (or no refund_status) again at the next step;
 * anything not to be trusted again soon. Two verified answers decide nothing either, and are
 * asked again at the next step, kept as the last answer until the deadline: one about another
 * order than the watch was given, and a configuration error (a refund watch has no failed state).
 */
export function judgeRefund(spec: RefundSpec, answer: RefundAnswer): RefundConclusion {
  switch (answer.kind) {
    case "refund":
      if (spec.outTradeNo && answer.outTradeNo && answer.outTradeNo !== spec.outTradeNo) {
        const which = `out_trade_no ${answer.outTradeNo}, the watch's ${spec.outTradeNo}`;
        // Verified, so no reason to hurry: the watch was given another order than the refund's.
        return { kind: "pending", status: `answer names another order (${which})` };
      }
      if (answer.outcome === "pending") return { kind: "pending", status: answer.status };
      return { kind: "outcome", state: answer.outcome, status: answer.status, answer };
    case "transient":
      return { kind: "transient", status: answer.reason };
    case "config":
      return { kind: "pending", status: answer.reason };
  }
}

/** The refund a watch asks about. */
export function askedOf(spec: RefundSpec): RefundAsked {
  return {
    outRefundNo: spec.outRefundNo,
    ...(spec.outTradeNo !== undefined ? { outTradeNo: spec.outTradeNo } : {}),
  };
}

/**
 * At (or past) the deadline: one more query. An ended refund is that; one still processing (or
 * not found, or whose query is about our setup) ends the watch expired, its word kept; a query
 * not to be trusted is tried again after the transient wait, for up to 10 minutes.
 */
export async function refundAtDeadline(
  spec: RefundSpec,
  api: RefundProvider,
  clock: () => number,
): Promise<RefundConclusion> {
  const last = judgeRefund(spec, await api.queryRefund(askedOf(spec)));
  if (last.kind === "outcome") return last;
  if (last.kind === "transient" && clock() < spec.deadline + GIVE_UP_MS) return last;
  return { kind: "outcome", state: "expired", status: last.status };
}

/**
 * The outcome job's body up to its metadata (the script appends the stored metadata and "}").
 * outTradeNo is the provider's when its answer names it, else the watch's.
 */
export function refundOutcomePrefix(
  spec: RefundSpec,
  source: "poll" | "notify",
  polls: number,
  conclusion: RefundConclusion & { kind: "outcome" },
): string {
  const event: RefundEvent = `refund.${conclusion.state}`;
  const answer = conclusion.answer;
  const parts: string[] = [
    `"event":${JSON.stringify(event)}`,
    `"provider":${JSON.stringify(spec.provider)}`,
    `"account":${JSON.stringify(spec.account)}`,
    `"outRefundNo":${JSON.stringify(spec.outRefundNo)}`,
  ];
  const outTradeNo = answer?.outTradeNo ?? spec.outTradeNo;
  if (outTradeNo !== undefined) parts.push(`"outTradeNo":${JSON.stringify(outTradeNo)}`);
  if (answer?.refundNo) parts.push(`"refundNo":${JSON.stringify(answer.refundNo)}`);
  parts.push(`"status":${JSON.stringify(conclusion.status)}`);
  if (answer?.amount) parts.push(`"amount":${JSON.stringify(answer.amount)}`);
  if (answer?.succeededAt !== undefined) parts.push(`"succeededAt":${answer.succeededAt}`);
  parts.push(`"source":${JSON.stringify(source)}`, `"polls":${polls}`);
  return `{${parts.join(",")},"metadata":`;
}

/** What a refund conclusion comes to: who concluded it, for which poll (or "" for a notification). */
export type RefundConcluding = {
  watchId: string;
  spec: RefundSpec;
  /** The poll job's receipt; "" for a notification, which needs none. */
  receipt: string;
  source: "poll" | "notify";
  conclusion: RefundConclusion;
  polls: number;
  /** A notification's own id (WeChat Pay's event id), to take it once. */
  notifyId?: string;
};

/**
 * Applies a refund conclusion through the watch's one transition. An outcome is added to each
 * notify topic by the same script, exactly once; its pushes then go out from this run. A poll
 * that did not end the watch leads to the polls due soon. A verified success of a watch that had
 * ended (expired, closed, abnormal, stopped) is told once more, late.
 */
export async function concludeRefund(
  options: PaymentsOptions,
  run: Run,
  c: RefundConcluding,
): Promise<Concluded> {
  const { conclusion, spec } = c;
  const outcome = conclusion.kind === "outcome";
  const result = await transition(options, run, {
    watchId: c.watchId,
    receipt: c.receipt,
    kind: conclusion.kind,
    word: conclusion.status,
    state: outcome ? conclusion.state : "",
    prefix: outcome ? refundOutcomePrefix(spec, c.source, c.polls, conclusion) : "",
    ...(c.notifyId !== undefined ? { notifyId: c.notifyId } : {}),
  });
  const { how } = result;
  if (!result.applied) return { applied: false, how, work: [] };
  const now = run.clock();
  if (!outcome) return { applied: true, how, work: [soon(REFUNDS_TOPIC, now)] };
  run.log({
    level: "info",
    event: "refund_outcome",
    provider: spec.provider,
    account: spec.account,
    state: conclusion.state,
    status: conclusion.status,
    source: c.source,
    ...(how === "late" ? { late: true } : {}),
  });
  return { applied: true, how, work: [...new Set(spec.notify)].map((topic) => soon(topic, now)) };
}

/**
 * A provider's verified refund notification settles its refund watch through the same
 * transition as a poll (a late success of an ended one included); a refund nobody watches, and a
 * notification that says nothing final, are ignored. `notifyId`: the notification's own id.
 */
export async function concludeRefundByNotification(
  options: PaymentsOptions,
  run: Run,
  refund: { provider: ProviderName; account: string; outRefundNo: string },
  answer: RefundAnswer & { kind: "refund" },
  notifyId?: string,
): Promise<Concluded> {
  const nothing: Concluded = { applied: false, how: "", work: [] };
  const watchId = await refundWatchIdOf(refund.provider, refund.account, refund.outRefundNo);
  const stored = await options.scripts.run("watchRead", run.clock(), [watchId]);
  if (!stored) return nothing;
  const spec = JSON.parse(stored.fields.spec ?? "{}") as RefundSpec;
  const conclusion = judgeRefund(spec, answer);
  if (conclusion.kind !== "outcome") return nothing;
  return concludeRefund(options, run, {
    watchId,
    spec,
    receipt: "",
    source: "notify",
    conclusion,
    polls: Number(stored.fields.polls ?? 0),
    // Kept in the watch space-separated: an id of other characters is not remembered.
    ...(notifyId && NOTIFY_ID.test(notifyId) ? { notifyId } : {}),
  });
}
