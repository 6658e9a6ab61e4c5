// What a provider's answer concludes for a watch, and the outcome job's body a conclusion writes.

import type { OutcomeEvent } from "../domain/payments";
import type { Amount, Provider, ProviderAnswer } from "./provider";
import type { Conclusion, Spec } from "./watch-types";

/** WeChat Pay's ORDER_NOT_EXIST is taken as "not yet" for this long after the watch starts. */
const NOT_FOUND_GRACE_MS = 5 * 60_000;
/** Past its deadline a watch whose close keeps failing transiently gives up after this. */
const CLOSE_GIVE_UP_MS = 10 * 60_000;

/**
 * At the deadline: closes the order (when asked to), then queries once more, whatever the close
 * answered: the order may have been paid meanwhile. A close not to be trusted (unverified, 5xx) is
 * tried again soon unless that query settles the trade.
 */
export async function atDeadline(
  spec: Spec,
  api: Provider,
  clock: () => number,
): Promise<Conclusion> {
  let retryClose: string | undefined;
  if (spec.closeOnDeadline) {
    const closed = await api.close(spec.outTradeNo);
    if (closed.kind === "config") {
      return { kind: "outcome", state: "failed", tradeState: `close: ${closed.reason}` };
    }
    if (closed.kind === "transient" && clock() < spec.deadline + CLOSE_GIVE_UP_MS) {
      retryClose = `close: ${closed.reason}`;
    }
  }
  const last = await api.query(spec.outTradeNo);
  if (last.kind === "trade" && last.outcome !== "pending") {
    // Paid or failed it is that; closed, the close (or the provider's timeout) did its work.
    if (last.outcome === "closed") return expired(last.tradeState, last);
    return judge(spec, last, clock);
  }
  if (retryClose) return { kind: "transient", tradeState: retryClose };
  if (last.kind === "transient" && clock() < spec.deadline + CLOSE_GIVE_UP_MS) {
    return { kind: "transient", tradeState: last.reason };
  }
  if (last.kind === "trade") return expired(last.tradeState, last);
  return expired(last.kind === "notFound" ? last.tradeState : "expired");
}

function expired(tradeState: string, answer?: ProviderAnswer & { kind: "trade" }): Conclusion {
  return { kind: "outcome", state: "expired", tradeState, ...(answer ? { answer } : {}) };
}

/**
 * What a verified answer means for the watch (DESIGN §4, reference/payments.md). Paid with
 * another amount than the watch's is a mismatch, never paid.
 */
export function judge(spec: Spec, answer: ProviderAnswer, clock: () => number): Conclusion {
  switch (answer.kind) {
    case "trade": {
      if (answer.outcome === "pending") return { kind: "pending", tradeState: answer.tradeState };
      const mismatch = answer.outcome === "paid" && !sameAmount(spec.amount, answer.amount);
      const state = mismatch ? "mismatch" : answer.outcome;
      return { kind: "outcome", state, tradeState: answer.tradeState, answer };
    }
    case "transient":
      return { kind: "transient", tradeState: answer.reason };
    case "config":
      return { kind: "outcome", state: "failed", tradeState: answer.reason };
    case "notFound":
      if (clock() - spec.createdAt < NOT_FOUND_GRACE_MS) {
        return { kind: "pending", tradeState: answer.tradeState };
      }
      return { kind: "outcome", state: "failed", tradeState: answer.tradeState };
  }
}

/** Whether a paid answer's amount is the one the watch expects (any, when it expects none). */
function sameAmount(expected: Amount | undefined, paid: Amount | undefined): boolean {
  if (!expected) return true;
  return paid?.total === expected.total && paid.currency === expected.currency;
}

/** The outcome job's body up to its metadata (the script appends the stored metadata and "}"). */
export function outcomePrefix(
  spec: Spec,
  source: "poll" | "notify",
  polls: number,
  conclusion: Conclusion & { kind: "outcome" },
): string {
  const event: OutcomeEvent = `payment.${conclusion.state}`;
  const answer = conclusion.answer;
  const parts: string[] = [
    `"event":${JSON.stringify(event)}`,
    `"provider":${JSON.stringify(spec.provider)}`,
    `"account":${JSON.stringify(spec.account)}`,
    `"outTradeNo":${JSON.stringify(spec.outTradeNo)}`,
  ];
  if (answer?.tradeNo) parts.push(`"tradeNo":${JSON.stringify(answer.tradeNo)}`);
  parts.push(`"tradeState":${JSON.stringify(conclusion.tradeState)}`);
  if (answer?.amount) parts.push(`"amount":${JSON.stringify(answer.amount)}`);
  if (conclusion.state === "mismatch") parts.push(`"expected":${JSON.stringify(spec.amount)}`);
  if (answer?.paidAt !== undefined) parts.push(`"paidAt":${answer.paidAt}`);
  parts.push(`"source":${JSON.stringify(source)}`, `"polls":${polls}`);
  return `{${parts.join(",")},"metadata":`;
}
