// Refunds in the Alipay sandbox: a refund request of a paid trade (the control API makes it),
// processing until it succeeds, and alipay.trade.fastpay.refund.query (classic and v3) in
// Alipay's shape: refund_status REFUND_SUCCESS once it has succeeded, no refund_status before
// (Alipay's "not yet, or never received"). Amounts are yuan strings, as Alipay writes them. The
// sandbox signs what this module answers.

/** The refund query, by its classic method name. */
export const REFUND_QUERY = "alipay.trade.fastpay.refund.query";

export type AlipayRefund = {
  outTradeNo: string;
  tradeNo: string;
  /** out_request_no: unique within its trade at Alipay, not across trades. */
  outRequestNo: string;
  /** Yuan, "12.34". */
  refundAmount: string;
  /** The trade's total, yuan. */
  totalAmount: string;
  status: "PROCESSING" | "REFUND_SUCCESS";
  /** Beijing time `yyyy-MM-dd HH:mm:ss`, once it succeeded. */
  gmtRefundPay?: string;
};

/** The trade a refund is made of, as the sandbox keeps it (the refunds change its fields). */
export type RefundedTrade = {
  outTradeNo: string;
  tradeNo: string;
  status: string;
  totalAmount: string;
  refundFee?: string;
  gmtRefund?: string;
  gmtClose?: string;
};

/** A business failure, as the sandbox answers it (classic 40004 / v3 HTTP 400). */
export type RefundFailure = {
  ok: false;
  code: string;
  msg: string;
  subCode: string;
  subMsg: string;
  httpStatus: number;
};

export type AlipayRefunds = {
  /** A refund of a paid trade (TRADE_SUCCESS or TRADE_FINISHED), processing. */
  create(
    trade: RefundedTrade,
    outRequestNo: string,
    opts?: { refundAmount?: string },
  ): AlipayRefund;
  /** Processing → REFUND_SUCCESS; a refund of what was left closes the trade (TRADE_CLOSED). */
  succeed(trade: RefundedTrade, outRequestNo: string): AlipayRefund;
  get(outTradeNo: string, outRequestNo: string): AlipayRefund | undefined;
  /** The query's business fields for `trade` and the biz content asked, or a failure. */
  query(
    trade: RefundedTrade,
    biz: Record<string, unknown>,
  ): { ok: true; fields: Record<string, unknown> } | RefundFailure;
};

type Deps = {
  /** Now, Beijing time `yyyy-MM-dd HH:mm:ss`. */
  now(): string;
  /** Throws the sandbox's error (its control API answers it with `status`). */
  fail(code: string, status: number, message: string): never;
};

const AMOUNT = /^(?:0|[1-9]\d{0,9})(?:\.\d{1,2})?$/;
/** Yuan as whole fen, by string arithmetic (the sandbox never lets a float see an amount). */
const fen = (yuan: string) => {
  const [whole = "0", part = ""] = yuan.split(".");
  return Number(whole) * 100 + Number(part.padEnd(2, "0"));
};
const yuan = (fen: number) => `${Math.floor(fen / 100)}.${String(fen % 100).padStart(2, "0")}`;

export function alipayRefunds(deps: Deps): AlipayRefunds {
  const refunds = new Map<string, AlipayRefund>();
  const keyOf = (outTradeNo: string, outRequestNo: string) => `${outTradeNo}\n${outRequestNo}`;

  const mustGet = (outTradeNo: string, outRequestNo: string): AlipayRefund => {
    const refund = refunds.get(keyOf(outTradeNo, outRequestNo));
    if (!refund) deps.fail("refund_not_found", 404, `no refund ${outRequestNo} of ${outTradeNo}`);
    return refund;
  };

  /** Fen refunded or being refunded of a trade. */
  const taken = (outTradeNo: string) =>
    [...refunds.values()]
      .filter((r) => r.outTradeNo === outTradeNo)
      .reduce((sum, r) => sum + fen(r.refundAmount), 0);

  const create: AlipayRefunds["create"] = (trade, outRequestNo, opts = {}) => {
    if (!/^[0-9A-Za-z_\-|*@.:]{1,64}$/.test(outRequestNo))
      deps.fail("bad_request", 400, "outRequestNo must be 1-64 characters");
    if (refunds.has(keyOf(trade.outTradeNo, outRequestNo)))
      deps.fail("refund_exists", 409, `refund ${outRequestNo} of ${trade.outTradeNo} exists`);
    if (trade.status !== "TRADE_SUCCESS" && trade.status !== "TRADE_FINISHED")
      deps.fail("bad_state", 409, `only a paid trade is refunded; it is ${trade.status}`);
    const left = fen(trade.totalAmount) - taken(trade.outTradeNo);
    const amount = opts.refundAmount ?? yuan(left);
    if (!AMOUNT.test(amount) || fen(amount) <= 0 || fen(amount) > left)
      deps.fail("bad_request", 400, `refundAmount must be yuan up to ${yuan(left)}, got ${amount}`);
    const refund: AlipayRefund = {
      outTradeNo: trade.outTradeNo,
      tradeNo: trade.tradeNo,
      outRequestNo,
      refundAmount: yuan(fen(amount)),
      totalAmount: trade.totalAmount,
      status: "PROCESSING",
    };
    refunds.set(keyOf(trade.outTradeNo, outRequestNo), refund);
    return { ...refund };
  };

  const succeed: AlipayRefunds["succeed"] = (trade, outRequestNo) => {
    const refund = mustGet(trade.outTradeNo, outRequestNo);
    if (refund.status !== "PROCESSING")
      deps.fail("bad_state", 409, `refund ${outRequestNo} has succeeded already`);
    refund.status = "REFUND_SUCCESS";
    refund.gmtRefundPay = deps.now();
    const refunded = [...refunds.values()]
      .filter((r) => r.outTradeNo === trade.outTradeNo && r.status === "REFUND_SUCCESS")
      .reduce((sum, r) => sum + fen(r.refundAmount), 0);
    trade.refundFee = yuan(refunded);
    trade.gmtRefund = refund.gmtRefundPay;
    // All of it refunded: Alipay closes the trade.
    if (refunded === fen(trade.totalAmount)) {
      trade.status = "TRADE_CLOSED";
      trade.gmtClose = refund.gmtRefundPay;
    }
    return { ...refund };
  };

  const query: AlipayRefunds["query"] = (trade, biz) => {
    const outRequestNo = biz.out_request_no;
    if (typeof outRequestNo !== "string" || outRequestNo === "")
      return {
        ok: false,
        code: "40004",
        msg: "Business Failed",
        subCode: "ACQ.INVALID_PARAMETER",
        subMsg: "参数无效: out_request_no",
        httpStatus: 400,
      };
    const fields: Record<string, unknown> = {
      out_request_no: outRequestNo,
      out_trade_no: trade.outTradeNo,
    };
    const refund = refunds.get(keyOf(trade.outTradeNo, outRequestNo));
    // Not yet (or never received): Alipay answers success without refund_status.
    if (refund?.status === "REFUND_SUCCESS") {
      const options = Array.isArray(biz.query_options) ? biz.query_options : [];
      if (options.includes("gmt_refund_pay")) fields.gmt_refund_pay = refund.gmtRefundPay;
      fields.refund_amount = refund.refundAmount;
      fields.refund_status = "REFUND_SUCCESS";
    }
    fields.total_amount = trade.totalAmount;
    fields.trade_no = trade.tradeNo;
    return { ok: true, fields };
  };

  return {
    create,
    succeed,
    get: (outTradeNo, outRequestNo) => {
      const refund = refunds.get(keyOf(outTradeNo, outRequestNo));
      return refund ? { ...refund } : undefined;
    },
    query,
  };
}
