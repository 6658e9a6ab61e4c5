// Refunds in the WeChat Pay sandbox: a refund of a paid order (the control API makes it), its
// status moved by hand (PROCESSING → SUCCESS | CLOSED | ABNORMAL), the refund query of API v3
// (GET /v3/refund/domestic/refunds/{out_refund_no}) and the REFUND.* notification's resource, in
// WeChat Pay's shapes. The sandbox signs, encrypts and sends what this module answers.
import { digits } from "./sandbox-http";

export type WechatRefundStatus = "PROCESSING" | "SUCCESS" | "CLOSED" | "ABNORMAL";

export const WECHAT_REFUND_STATUSES: readonly WechatRefundStatus[] = [
  "PROCESSING",
  "SUCCESS",
  "CLOSED",
  "ABNORMAL",
];

export type WechatRefund = {
  outRefundNo: string;
  /** WeChat Pay's refund id (refund_id). */
  refundId: string;
  outTradeNo: string;
  transactionId: string;
  status: WechatRefundStatus;
  /** Fen. */
  refund: number;
  /** The order's total, fen. */
  total: number;
  /** RFC 3339 with +08:00. */
  createTime: string;
  successTime?: string;
};

/** The order a refund is made of, as the sandbox keeps it. */
export type RefundedTrade = {
  outTradeNo: string;
  transactionId: string;
  mchid: string;
  state: string;
  total: number;
};

type Reply = { status: number; body: string; code?: string };

export type WechatRefunds = {
  /** A refund of a paid order (SUCCESS or REFUND), PROCESSING; `refund` fen, default what is left. */
  create(trade: RefundedTrade, outRefundNo: string, opts?: { refund?: number }): WechatRefund;
  /** PROCESSING (or ABNORMAL, which the merchant may retry) → SUCCESS, CLOSED or ABNORMAL. */
  setStatus(outRefundNo: string, status: WechatRefundStatus): WechatRefund;
  get(outRefundNo: string): WechatRefund | undefined;
  /** The refund query's reply, or undefined for a path that is not the refund API. */
  route(method: string, url: URL): Reply | undefined;
  /** A REFUND.* notification's event type, summary and plaintext resource. */
  event(outRefundNo: string): {
    eventType: string;
    summary: string;
    resource: Record<string, unknown>;
  };
};

type Deps = {
  /** The sandbox's merchant. */
  mchid: string;
  /** Now, as WeChat Pay writes times (RFC 3339, +08:00). */
  now(): string;
  /** Throws the sandbox's error (its control API answers it with `status`). */
  fail(code: string, status: number, message: string): never;
  /** The order now has a refund: its trade_state becomes REFUND. */
  refunded(outTradeNo: string): void;
  error(status: number, code: string, message: string): Reply;
};

const SUMMARY: Record<Exclude<WechatRefundStatus, "PROCESSING">, string> = {
  SUCCESS: "退款成功",
  CLOSED: "退款关闭",
  ABNORMAL: "退款异常",
};

/** The sandbox's refunds, by out_refund_no (unique per merchant at WeChat Pay). */
export function wechatRefunds(deps: Deps): WechatRefunds {
  const refunds = new Map<string, WechatRefund>();

  const mustGet = (outRefundNo: string): WechatRefund => {
    const refund = refunds.get(outRefundNo);
    if (!refund) deps.fail("refund_not_found", 404, `no refund ${outRefundNo}`);
    return refund;
  };

  const create: WechatRefunds["create"] = (trade, outRefundNo, opts = {}) => {
    if (!/^[0-9A-Za-z_\-|*@]{1,64}$/.test(outRefundNo))
      deps.fail("bad_request", 400, "outRefundNo must be 1-64 characters of 0-9 a-z A-Z _ - | * @");
    if (refunds.has(outRefundNo))
      deps.fail("refund_exists", 409, `refund ${outRefundNo} already exists`);
    if (trade.state !== "SUCCESS" && trade.state !== "REFUND")
      deps.fail(
        "bad_state",
        409,
        `only a paid order is refunded; ${trade.outTradeNo} is ${trade.state}`,
      );
    const taken = [...refunds.values()]
      .filter((r) => r.outTradeNo === trade.outTradeNo && r.status !== "CLOSED")
      .reduce((sum, r) => sum + r.refund, 0);
    const refund = opts.refund ?? trade.total - taken;
    if (!Number.isSafeInteger(refund) || refund <= 0 || refund > trade.total - taken)
      deps.fail("bad_request", 400, `refund must be 1-${trade.total - taken} fen (what is left)`);
    const created: WechatRefund = {
      outRefundNo,
      refundId: `50${digits(4)}${deps.now().slice(0, 10).replaceAll("-", "")}${digits(15)}`,
      outTradeNo: trade.outTradeNo,
      transactionId: trade.transactionId,
      status: "PROCESSING",
      refund,
      total: trade.total,
      createTime: deps.now(),
    };
    refunds.set(outRefundNo, created);
    deps.refunded(trade.outTradeNo);
    return { ...created };
  };

  const setStatus: WechatRefunds["setStatus"] = (outRefundNo, status) => {
    const refund = mustGet(outRefundNo);
    if (!WECHAT_REFUND_STATUSES.includes(status) || status === "PROCESSING")
      deps.fail("bad_request", 400, "status must be one of SUCCESS, CLOSED, ABNORMAL");
    if (refund.status !== "PROCESSING" && refund.status !== "ABNORMAL")
      deps.fail("bad_state", 409, `refund ${outRefundNo} is ${refund.status} already`);
    refund.status = status;
    if (status === "SUCCESS") refund.successTime = deps.now();
    return { ...refund };
  };

  /** The query's answer, in WeChat Pay's shape (keys sorted, as its answers come). */
  const answer = (r: WechatRefund): Record<string, unknown> => {
    const out: Record<string, unknown> = {
      amount: {
        currency: "CNY",
        discount_refund: 0,
        from: [],
        payer_refund: r.refund,
        payer_total: r.total,
        refund: r.refund,
        refund_fee: 0,
        settlement_refund: r.refund,
        settlement_total: r.total,
        total: r.total,
      },
      channel: "ORIGINAL",
      create_time: r.createTime,
      funds_account: "AVAILABLE",
      out_refund_no: r.outRefundNo,
      out_trade_no: r.outTradeNo,
      promotion_detail: [],
      refund_id: r.refundId,
      status: r.status,
    };
    if (r.successTime) out.success_time = r.successTime;
    out.transaction_id = r.transactionId;
    out.user_received_account = "支付用户零钱";
    return out;
  };

  const route: WechatRefunds["route"] = (method, url) => {
    const one = /^\/v3\/refund\/domestic\/refunds\/([^/]+)$/.exec(url.pathname);
    if (!one || method !== "GET") return undefined;
    const refund = refunds.get(decodeURIComponent(one[1] as string));
    if (!refund) return deps.error(404, "RESOURCE_NOT_EXISTS", "退款单不存在");
    return { status: 200, body: JSON.stringify(answer(refund)) };
  };

  const event: WechatRefunds["event"] = (outRefundNo) => {
    const r = mustGet(outRefundNo);
    if (r.status === "PROCESSING")
      deps.fail(
        "bad_state",
        409,
        `WeChat Pay notifies ended refunds only; ${outRefundNo} is PROCESSING`,
      );
    const resource: Record<string, unknown> = {
      mchid: deps.mchid,
      transaction_id: r.transactionId,
      out_trade_no: r.outTradeNo,
      refund_id: r.refundId,
      out_refund_no: r.outRefundNo,
      refund_status: r.status,
    };
    if (r.successTime) resource.success_time = r.successTime;
    resource.user_received_account = "支付用户零钱";
    resource.amount = {
      total: r.total,
      refund: r.refund,
      payer_total: r.total,
      payer_refund: r.refund,
    };
    return { eventType: `REFUND.${r.status}`, summary: SUMMARY[r.status], resource };
  };

  return {
    create,
    setStatus,
    get: (outRefundNo) => {
      const refund = refunds.get(outRefundNo);
      return refund ? { ...refund } : undefined;
    },
    route,
    event,
  };
}
