// A refund watch's id, and the API's Refund (or refund_not_found) from a stored watch.
import { DelayqError } from "../domain/errors";
import { RawJson } from "../domain/raw-json";
import type { Refund } from "../domain/refunds";
import type { WatchRecord } from "../redis/replies";
import type { RefundSpec } from "./refund-types";
import { watchIdOf } from "./watch-records";

/**
 * A refund watch's id: 26 base32 characters of SHA-256 over ("refund", provider, account,
 * out_refund_no), so that it never is a payment watch's (whose hash starts with the provider).
 */
export function refundWatchIdOf(
  provider: string,
  account: string,
  outRefundNo: string,
): Promise<string> {
  return watchIdOf(`refund\n${provider}`, account, outRefundNo);
}

export function refundNotFound(provider: string, account: string, outRefundNo: string) {
  return new DelayqError(
    "refund_not_found",
    `No refund watch for ${provider}/${account}/${outRefundNo} (ended watches are forgotten ` +
      "after the retention window), or its notify topics are not ones this token may act on",
  );
}

/** Whether a stored watch is a refund's (its spec says so): the other kind is a payment's. */
export function isRefund(stored: WatchRecord): boolean {
  return (JSON.parse(stored.fields.spec ?? "{}") as { kind?: string }).kind === "refund";
}

/** The API's Refund from a stored watch; metadata and outcome as their stored JSON text. */
export function refundOf(stored: WatchRecord): Refund {
  const { fields } = stored;
  const spec = JSON.parse(fields.spec ?? "{}") as RefundSpec;
  const refund: Refund = {
    provider: spec.provider,
    account: spec.account,
    outRefundNo: spec.outRefundNo,
    state: (fields.state ?? "polling") as Refund["state"],
    polls: Number(fields.polls ?? 0),
    createdAt: Number(fields.createdAt ?? spec.createdAt),
    deadline: spec.deadline,
    notify: spec.notify,
    metadata: new RawJson(fields.metadata ?? "null"),
  };
  if (spec.outTradeNo !== undefined) refund.outTradeNo = spec.outTradeNo;
  if (refund.state === "polling" && stored.nextPollAt !== undefined) {
    refund.nextPollAt = stored.nextPollAt;
  }
  if (fields.lastAnswer) {
    // Stored as every watch's last answer is ({tradeState, at}); a refund's word is its status.
    const { tradeState, at } = JSON.parse(fields.lastAnswer) as { tradeState: string; at: number };
    refund.lastAnswer = { status: tradeState, at };
  }
  if (fields.outcome) refund.outcome = new RawJson(fields.outcome);
  if (fields.firstOutcome) refund.firstOutcome = new RawJson(fields.firstOutcome);
  return refund;
}
