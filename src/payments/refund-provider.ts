// What a provider's refund query (or refund notification) says, in the refund poller's terms:
// shared by WeChat Pay (wechatpay-refunds.ts) and Alipay (alipay-refunds.ts).

/** What a verified refund answer says about the refund. */
export type RefundOutcome = "pending" | "succeeded" | "closed" | "abnormal";

/** A refund's amounts, in the smallest unit (fen for CNY): refunded, and the order's total. */
export type RefundAmount = { refund: number; total: number; currency: string };

/**
 * One refund query's answer. Only `refund` comes from verified answers; anything that cannot be
 * trusted (network, 5xx, bad signature, stale timestamp) is `transient`, and a verified error
 * about our setup (bad key, app id) is `config`.
 */
export type RefundAnswer =
  | {
      kind: "refund";
      outcome: RefundOutcome;
      /** The provider's own word (SUCCESS, PROCESSING, REFUND_SUCCESS, RESOURCE_NOT_EXISTS…). */
      status: string;
      /** The provider's refund id (WeChat Pay's refund_id). */
      refundNo?: string;
      /** The refunded order, as the provider names it. */
      outTradeNo?: string;
      amount?: RefundAmount;
      /** Unix ms. */
      succeededAt?: number;
    }
  | { kind: "transient"; reason: string }
  | { kind: "config"; reason: string };

/** The refund a watch asks about: its number and (Alipay: required) the refunded order's. */
export type RefundAsked = { outRefundNo: string; outTradeNo?: string };

/** Queries refunds of one account. */
export type RefundProvider = { queryRefund(refund: RefundAsked): Promise<RefundAnswer> };

/** A verified refund notification: the refund's answer and the notification's own id. */
export type RefundNotification = {
  outRefundNo: string;
  answer: RefundAnswer & { kind: "refund" };
  notifyId?: string;
};

/**
 * Alipay answers a refund it has not (yet) completed, or never received, without refund_status:
 * the word the watch records for that answer.
 */
export const NO_REFUND_STATUS = "no refund_status";
