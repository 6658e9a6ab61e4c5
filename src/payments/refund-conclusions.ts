// What a refund answer concludes for a refund watch, and the outcome job's body it writes: what
// is a refund's own in the code every watch shares (poller.ts, watch-conclude.ts).
import type { RefundEvent } from "../domain/refunds";
import type { RefundAnswer, RefundAsked, RefundProvider } from "./refund-provider";
import type { RefundConclusion, RefundSpec } from "./refund-types";
import { refundProviderOf } from "./watch-accounts";
import { outcomeText } from "./watch-conclude";
import type { PollAccounts } from "./watch-kind";

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
        return { kind: "pending", word: `answer names another order (${which})` };
      }
      if (answer.outcome === "pending") return { kind: "pending", word: answer.status };
      return { kind: "outcome", state: answer.outcome, word: answer.status, answer };
    case "transient":
      return { kind: "transient", word: answer.reason };
    case "config":
      return { kind: "pending", word: answer.reason };
  }
}

/** A poll's question: the refund's query (at the deadline the last one, refundAtDeadline). */
export async function askRefund(
  accounts: PollAccounts,
  spec: RefundSpec,
  clock: () => number,
): Promise<RefundConclusion> {
  const api = refundProviderOf(accounts, spec.provider, spec.account);
  if (clock() >= spec.deadline) return refundAtDeadline(spec, api, clock);
  return judgeRefund(spec, await api.queryRefund(askedOf(spec)));
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
  return { kind: "outcome", state: "expired", word: last.word };
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
  const own = [`"outRefundNo":${JSON.stringify(spec.outRefundNo)}`];
  const outTradeNo = answer?.outTradeNo ?? spec.outTradeNo;
  if (outTradeNo !== undefined) own.push(`"outTradeNo":${JSON.stringify(outTradeNo)}`);
  if (answer?.refundNo) own.push(`"refundNo":${JSON.stringify(answer.refundNo)}`);
  own.push(`"status":${JSON.stringify(conclusion.word)}`);
  if (answer?.amount) own.push(`"amount":${JSON.stringify(answer.amount)}`);
  if (answer?.succeededAt !== undefined) own.push(`"succeededAt":${answer.succeededAt}`);
  return outcomeText(event, spec, own, source, polls);
}
