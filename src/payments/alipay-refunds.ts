// Alipay refunds: alipay.trade.fastpay.refund.query on the classic gateway, or POST
// /v3/alipay/trade/fastpay/refund/query on v3 (per account), with out_trade_no and out_request_no
// (= the watch's outRefundNo). refund_status REFUND_SUCCESS means done; an answer without it, not
// yet (or never received). Amounts are yuan strings, turned into fen without floats.
import type { AlipayAccount } from "./accounts";
import { classicCall, classicCode } from "./alipay-classic";
import { parseBeijingTime } from "./alipay-signing";
import { v3Call, v3Error } from "./alipay-v3";
import { type ProviderOptions, stringField, yuanToFen } from "./provider";
import {
  NO_REFUND_STATUS,
  type RefundAnswer,
  type RefundAsked,
  type RefundProvider,
} from "./refund-provider";

const REFUND_SUCCESS = "REFUND_SUCCESS";
/** The refunded trade does not exist (yet): asked again at the next step, as "not yet" is. */
const TRADE_NOT_EXIST = "ACQ.TRADE_NOT_EXIST";
const SYSTEM_ERROR = "ACQ.SYSTEM_ERROR";

/**
 * The biz content of a refund query. gmt_refund_pay (when the refund succeeded) comes only when
 * query_options asks for it.
 */
function bizOf(refund: RefundAsked): Record<string, unknown> {
  return {
    out_trade_no: refund.outTradeNo,
    out_request_no: refund.outRefundNo,
    query_options: ["gmt_refund_pay"],
  };
}

/** The answer for a successful refund query's record (classic response object or v3 body). */
export function alipayRefundAnswer(
  record: Record<string, unknown>,
  refund: RefundAsked,
): RefundAnswer {
  const named = stringField(record, "out_request_no");
  const trade = stringField(record, "out_trade_no");
  if ((named && named !== refund.outRefundNo) || (trade && trade !== refund.outTradeNo)) {
    return { kind: "transient", reason: "answer names another refund" };
  }
  const status = stringField(record, "refund_status");
  const answer: RefundAnswer & { kind: "refund" } = {
    kind: "refund",
    outcome: status === REFUND_SUCCESS ? "succeeded" : "pending",
    status: status ?? NO_REFUND_STATUS,
  };
  if (trade) answer.outTradeNo = trade;
  const refunded = yuanToFen(record.refund_amount);
  const total = yuanToFen(record.total_amount);
  if (refunded !== undefined && total !== undefined) {
    answer.amount = { refund: refunded, total, currency: "CNY" };
  } else if (answer.outcome === "succeeded") {
    // A success is final and carries its amounts; one we cannot read is retried instead.
    return {
      kind: "transient",
      reason: `${REFUND_SUCCESS} answer without a readable refund_amount and total_amount`,
    };
  }
  const succeededAt = parseBeijingTime(record.gmt_refund_pay);
  if (succeededAt !== undefined && answer.outcome === "succeeded") {
    answer.succeededAt = succeededAt;
  }
  return answer;
}

/** An error code (v3 `code`, classic `sub_code`) → answer. */
function refundError(code: string, reason: string, retryable: boolean): RefundAnswer {
  if (code === TRADE_NOT_EXIST) return { kind: "refund", outcome: "pending", status: code };
  if (retryable || code === SYSTEM_ERROR) return { kind: "transient", reason };
  return { kind: "config", reason };
}

async function classicRefundQuery(
  account: AlipayAccount,
  refund: RefundAsked,
  options: ProviderOptions,
): Promise<RefundAnswer> {
  const method = "alipay.trade.fastpay.refund.query";
  const result = await classicCall(account, method, bizOf(refund), options);
  if (!result.ok) return result.answer;
  const { code, subCode, reason } = classicCode(result.response);
  if (code === "10000") return alipayRefundAnswer(result.response, refund);
  if (code === "40004") return refundError(subCode, reason, false);
  // 20000 is Alipay's "service unavailable"; 4000x are about our request.
  return refundError(subCode, reason, !code.startsWith("4") && code !== "20001");
}

async function v3RefundQuery(
  account: AlipayAccount,
  refund: RefundAsked,
  options: ProviderOptions,
): Promise<RefundAnswer> {
  const path = "/v3/alipay/trade/fastpay/refund/query";
  const result = await v3Call(account, path, bizOf(refund), options);
  if (!result.ok) return result.answer;
  const { status, body } = result;
  if (status >= 200 && status < 300) return alipayRefundAnswer(body, refund);
  const { code, reason, retryable } = v3Error(body, status);
  return refundError(code, reason, retryable);
}

/** Queries refunds of one Alipay account, on the classic gateway or v3 per `account.api`. */
export function alipayRefunds(
  account: AlipayAccount,
  options: ProviderOptions = {},
): RefundProvider {
  return {
    queryRefund: (refund) =>
      account.api === "v3"
        ? v3RefundQuery(account, refund, options)
        : classicRefundQuery(account, refund, options),
  };
}
