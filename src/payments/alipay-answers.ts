// What Alipay's trade records and error codes mean for the poller, shared by both APIs.

import { parseBeijingTime } from "./alipay-signing";
import {
  type CloseAnswer,
  clip,
  type ProviderAnswer,
  stringField,
  type TradeOutcome,
  yuanToFen,
} from "./provider";

/** Alipay's trade_status words and what the poller makes of them. */
export const ALIPAY_TRADE_STATES: Readonly<Record<string, TradeOutcome>> = {
  WAIT_BUYER_PAY: "pending",
  TRADE_SUCCESS: "paid",
  TRADE_FINISHED: "paid",
  TRADE_CLOSED: "closed",
};

/** A QR trade exists only once scanned, so "not found" on a query means "not yet": pending. */
const TRADE_NOT_EXIST = "ACQ.TRADE_NOT_EXIST";
const SYSTEM_ERROR = "ACQ.SYSTEM_ERROR";
/** Close refused because of the trade's state: query again, it may be paid. */
const CLOSE_REFUSED = new Set([
  "ACQ.TRADE_STATUS_ERROR",
  "ACQ.REASON_TRADE_STATUS_INVALID",
  "ACQ.REASON_ILLEGAL_STATUS",
]);

/** The answer for a successful trade record (classic response object, v3 body, or notification). */
export function tradeAnswer(record: Record<string, unknown>, paidAtField: string): ProviderAnswer {
  const tradeState = stringField(record, "trade_status");
  if (!tradeState) return { kind: "transient", reason: "answer without trade_status" };
  const outcome = ALIPAY_TRADE_STATES[tradeState] ?? "pending";
  const answer: ProviderAnswer & { kind: "trade" } = { kind: "trade", outcome, tradeState };
  const tradeNo = stringField(record, "trade_no");
  if (tradeNo) answer.tradeNo = tradeNo;
  const total = yuanToFen(record.total_amount);
  if (total !== undefined) answer.amount = { total, currency: "CNY" };
  else if (outcome === "paid") {
    // A paid outcome is final and carries the amount; one we cannot read is retried instead.
    return { kind: "transient", reason: `${tradeState} answer without a readable total_amount` };
  }
  const paidAt = parseBeijingTime(record[paidAtField]);
  if (paidAt !== undefined && outcome === "paid") answer.paidAt = paidAt;
  return answer;
}

export function describeError(code: string, subCode?: string, message?: string): string {
  return clip([code, subCode].filter(Boolean).join(" ") + (message ? `: ${message}` : ""));
}

/** Query: an error code (v3 `code`, classic `sub_code`) → answer. */
export function queryError(code: string, reason: string, retryable: boolean): ProviderAnswer {
  if (code === TRADE_NOT_EXIST) return { kind: "trade", outcome: "pending", tradeState: code };
  if (retryable || code === SYSTEM_ERROR) return { kind: "transient", reason };
  return { kind: "config", reason };
}

/** Close: an error code → answer. */
export function closeError(code: string, reason: string, retryable: boolean): CloseAnswer {
  if (code === TRADE_NOT_EXIST) return { kind: "notFound" };
  if (CLOSE_REFUSED.has(code)) return { kind: "refused", reason };
  if (retryable || code === SYSTEM_ERROR) return { kind: "transient", reason };
  return { kind: "config", reason };
}

export function mismatch(record: Record<string, unknown>, outTradeNo: string): boolean {
  const named = stringField(record, "out_trade_no");
  return named !== undefined && named !== outTradeNo;
}
