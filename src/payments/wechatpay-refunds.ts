// WeChat Pay refunds (API v3): the refund query, GET /v3/refund/domestic/refunds/{out_refund_no},
// signed and verified as every WeChat Pay call (wechatpay.ts: call), and the REFUND.*
// notifications that arrive at the same notify URL as the transactions'.
import type { WechatPayAccount } from "./accounts";
import { type NotificationResult, type ProviderOptions, parseJson, stringField } from "./provider";
import type {
  RefundAnswer,
  RefundNotification,
  RefundOutcome,
  RefundProvider,
} from "./refund-provider";
import {
  call,
  errorOf,
  type OpenedNotification,
  openWechatPayNotification,
  RETRYABLE,
  transactionNotification,
} from "./wechatpay";

/** WeChat Pay's refund status words and what the refund poller makes of them. */
export const WECHATPAY_REFUND_STATUSES: Readonly<Record<string, RefundOutcome>> = {
  SUCCESS: "succeeded",
  CLOSED: "closed",
  ABNORMAL: "abnormal",
  PROCESSING: "pending",
};

/** No such refund (yet): asked again at the next step, as a refund still processing is. */
const RESOURCE_NOT_EXISTS = "RESOURCE_NOT_EXISTS";

/**
 * The answer for a refund record: the query's body (its word in `status`) or a notification's
 * resource (`refund_status`). A succeeded refund carries its amounts; one whose amounts cannot be
 * read is retried instead.
 */
export function refundAnswerOf(
  record: Record<string, unknown>,
  field: "status" | "refund_status",
): RefundAnswer {
  const status = stringField(record, field);
  if (!status) return { kind: "transient", reason: `answer without ${field}` };
  const outcome = WECHATPAY_REFUND_STATUSES[status] ?? "pending";
  const answer: RefundAnswer & { kind: "refund" } = { kind: "refund", outcome, status };
  const refundNo = stringField(record, "refund_id");
  if (refundNo) answer.refundNo = refundNo;
  const outTradeNo = stringField(record, "out_trade_no");
  if (outTradeNo) answer.outTradeNo = outTradeNo;
  const amount = record.amount as Record<string, unknown> | undefined;
  const fen = (value: unknown) =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  const refund = fen(amount?.refund);
  const total = fen(amount?.total);
  if (refund !== undefined && total !== undefined) {
    // Notifications carry no currency: WeChat Pay refunds in the order's, CNY.
    answer.amount = { refund, total, currency: stringField(amount, "currency") ?? "CNY" };
  } else if (outcome === "succeeded") {
    return { kind: "transient", reason: `${status} answer without a readable amount` };
  }
  const successTime = stringField(record, "success_time");
  const succeededAt = successTime ? Date.parse(successTime) : Number.NaN;
  if (outcome === "succeeded" && Number.isFinite(succeededAt)) answer.succeededAt = succeededAt;
  return answer;
}

async function queryRefund(
  account: WechatPayAccount,
  outRefundNo: string,
  options: ProviderOptions,
): Promise<RefundAnswer> {
  const path = `/v3/refund/domestic/refunds/${encodeURIComponent(outRefundNo)}`;
  const result = await call(account, "GET", path, "", options);
  if (!result.ok) return result.answer;
  const { status, text } = result;
  if (status === 200) {
    const body = parseJson(text);
    if (typeof body !== "object" || body === null) {
      return { kind: "transient", reason: "answer is not JSON" };
    }
    const record = body as Record<string, unknown>;
    const named = stringField(record, "out_refund_no");
    if (named && named !== outRefundNo) {
      return { kind: "transient", reason: "answer names another refund" };
    }
    return refundAnswerOf(record, "status");
  }
  const { code, reason } = errorOf(text, status);
  if (code === RESOURCE_NOT_EXISTS) return { kind: "refund", outcome: "pending", status: code };
  if (RETRYABLE.has(code) || status < 400) return { kind: "transient", reason };
  return { kind: "config", reason };
}

/** Queries refunds of one WeChat Pay merchant (API v3). */
export function wechatPayRefunds(
  account: WechatPayAccount,
  options: ProviderOptions = {},
): RefundProvider {
  return { queryRefund: ({ outRefundNo }) => queryRefund(account, outRefundNo, options) };
}

/** A WeChat Pay notification, once checked: a transaction's, or a refund's (REFUND.*). */
export type WechatPayEvent =
  | ({ ok: true; kind: "transaction" } & NotificationResult & { ok: true })
  | ({ ok: true; kind: "refund" } & RefundNotification)
  | { ok: false; reason: string };

/** A refund notification's answer, from its opened resource. */
function refundNotification(opened: OpenedNotification & { ok: true }): WechatPayEvent {
  const outRefundNo = stringField(opened.record, "out_refund_no");
  if (!outRefundNo) return { ok: false, reason: "refund resource without out_refund_no" };
  const answer = refundAnswerOf(opened.record, "refund_status");
  if (answer.kind !== "refund") {
    return { ok: false, reason: answer.kind === "transient" ? answer.reason : "unreadable" };
  }
  const { notifyId } = opened;
  return { ok: true, kind: "refund", outRefundNo, answer, ...(notifyId ? { notifyId } : {}) };
}

/**
 * Checks a WeChat Pay notification that arrived at an account's notify URL (its headers, its
 * resource decrypted: openWechatPayNotification) and reads it as what its event type says: a
 * refund's (REFUND.SUCCESS, REFUND.ABNORMAL, REFUND.CLOSED) or a transaction's.
 */
export async function verifyWechatPayEvent(
  account: WechatPayAccount,
  headers: Headers,
  rawBody: string,
  now: number,
  options: ProviderOptions = {},
): Promise<WechatPayEvent> {
  const opened = await openWechatPayNotification(account, headers, rawBody, now, options);
  if (!opened.ok) return opened;
  if (opened.eventType.startsWith("REFUND.")) return refundNotification(opened);
  const transaction = transactionNotification(opened);
  return transaction.ok ? { ...transaction, kind: "transaction" } : transaction;
}
