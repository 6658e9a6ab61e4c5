// What a provider's answer concludes for a watch, and the outcome job's body a conclusion writes.

import type { OutcomeEvent } from "../domain/payments";
import type { Amount, Provider, ProviderAnswer } from "./provider";
import { providerOf } from "./watch-accounts";
import { outcomeText } from "./watch-conclude";
import type { PollAccounts } from "./watch-kind";
import type { Conclusion, Spec } from "./watch-types";

/** WeChat Pay's ORDER_NOT_EXIST is taken as "not yet" for this long after the watch starts. */
const NOT_FOUND_GRACE_MS = 5 * 60_000;
/** Past its deadline a watch whose close keeps failing transiently gives up after this. */
const CLOSE_GIVE_UP_MS = 10 * 60_000;

/** A poll's question: the order's query, or at the deadline a close and a query (atDeadline). */
export async function askPayment(
  accounts: PollAccounts,
  spec: Spec,
  clock: () => number,
): Promise<Conclusion> {
  const api = providerOf(accounts, spec.provider, spec.account);
  if (clock() >= spec.deadline) return atDeadline(spec, api, clock);
  return judge(spec, await api.query(spec.outTradeNo), clock);
}

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
      return { kind: "outcome", state: "failed", word: `close: ${closed.reason}` };
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
  if (retryClose) return { kind: "transient", word: retryClose };
  if (last.kind === "transient" && clock() < spec.deadline + CLOSE_GIVE_UP_MS) {
    return { kind: "transient", word: last.reason };
  }
  if (last.kind === "trade") return expired(last.tradeState, last);
  return expired(last.kind === "notFound" ? last.tradeState : "expired");
}

function expired(word: string, answer?: ProviderAnswer & { kind: "trade" }): Conclusion {
  return { kind: "outcome", state: "expired", word, ...(answer ? { answer } : {}) };
}

/**
 * What a verified answer means for the watch (DESIGN §4, reference/payments.md). Paid with
 * another amount than the watch's is a mismatch, never paid.
 */
export function judge(spec: Spec, answer: ProviderAnswer, clock: () => number): Conclusion {
  switch (answer.kind) {
    case "trade": {
      if (answer.outcome === "pending") return { kind: "pending", word: answer.tradeState };
      const mismatch = answer.outcome === "paid" && !sameAmount(spec.amount, answer.amount);
      const state = mismatch ? "mismatch" : answer.outcome;
      return { kind: "outcome", state, word: answer.tradeState, answer };
    }
    case "transient":
      return { kind: "transient", word: answer.reason };
    case "config":
      return { kind: "outcome", state: "failed", word: answer.reason };
    case "notFound":
      if (clock() - spec.createdAt < NOT_FOUND_GRACE_MS) {
        return { kind: "pending", word: answer.tradeState };
      }
      return { kind: "outcome", state: "failed", word: answer.tradeState };
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
  const own = [`"outTradeNo":${JSON.stringify(spec.outTradeNo)}`];
  if (answer?.tradeNo) own.push(`"tradeNo":${JSON.stringify(answer.tradeNo)}`);
  own.push(`"tradeState":${JSON.stringify(conclusion.word)}`);
  if (answer?.amount) own.push(`"amount":${JSON.stringify(answer.amount)}`);
  if (conclusion.state === "mismatch") own.push(`"expected":${JSON.stringify(spec.amount)}`);
  if (answer?.paidAt !== undefined) own.push(`"paidAt":${answer.paidAt}`);
  return outcomeText(event, spec, own, source, polls);
}
