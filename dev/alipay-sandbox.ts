// A local Alipay: the classic gateway and v3 trade query/close and refund query on Alipay's signed
// wire protocol, plus a control API.
import { createSign, type KeyObject, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { AlipaySdk } from "alipay-sdk";
import {
  type AlipaySandboxCertificates,
  certificateSnError,
  sandboxCertificates,
} from "./alipay-sandbox-certs";
import { type AlipayRefund, alipayRefunds, REFUND_QUERY } from "./alipay-sandbox-refunds";
import { pemToBase64, privateKeyPem, publicKeyPem, rsaKeyPair } from "./payment-keys";
import { digits, serveSandbox } from "./sandbox-http";

export type { AlipayRefund } from "./alipay-sandbox-refunds";

export type AlipayTradeStatus =
  | "WAIT_BUYER_PAY"
  | "TRADE_SUCCESS"
  | "TRADE_FINISHED"
  | "TRADE_CLOSED";

export type AlipayTrade = {
  outTradeNo: string;
  tradeNo: string;
  status: AlipayTradeStatus;
  /** Yuan with two decimals, "12.34". */
  totalAmount: string;
  subject: string;
  buyerLogonId: string;
  buyerUserId: string;
  /** Beijing time `yyyy-MM-dd HH:mm:ss`, as Alipay writes it. */
  gmtCreate: string;
  gmtPayment?: string;
  gmtClose?: string;
  refundFee?: string;
  gmtRefund?: string;
};

export type AlipayFault =
  | "5xx"
  | "timeout"
  /** Answers as usual, `slowMs` later (the answer reflects the trade as it is then). */
  | "slow"
  | "systemError"
  | "badSignature"
  | "tradeNotExist"
  /**
   * An error that would stop a watch were it trusted (ACQ.INVALID_PARAMETER), unsigned: v3 as
   * HTTP 400 without the alipay-signature headers, classic as a response without `sign`.
   */
  | "unsignedError"
  /** v3: the answer signed as usual, its alipay-timestamp 10 minutes old. Classic: no effect. */
  | "staleTimestamp"
  /** Certificate mode: the answer (signed by Alipay's key) names another certificate's SN. */
  | "wrongCertSn"
  /**
   * The real answer, signed, after 2 MiB of JSON whitespace, its Content-Length saying so (more
   * than a query's answer may be).
   */
  | "huge";

/** What the huge fault puts before an answer: 2 MiB of JSON whitespace. */
const paddingFor = (fault: AlipayFault | undefined): string =>
  fault === "huge" ? " ".repeat(2 * 1024 * 1024) : "";

/** Every fault, in the order the control API lists them. */
export const ALIPAY_FAULTS: readonly AlipayFault[] = [
  "5xx",
  "timeout",
  "slow",
  "systemError",
  "badSignature",
  "tradeNotExist",
  "unsignedError",
  "staleTimestamp",
  "wrongCertSn",
  "huge",
];

export type AlipayRequestRecord = {
  /** The HTTP method. */
  method: string;
  path: string;
  api: "classic" | "v3";
  /** The request's signature verified with the merchant's public key. */
  verified: boolean;
  /** Certificate mode: the request carried the app's and the root bundle's SNs. */
  certificateSns?: boolean;
  /** The Alipay method (alipay.trade.query, alipay.trade.close), when known. */
  method_?: string;
  bizContent?: unknown;
  at: number;
  /** The fault injected into this request, if any. */
  fault?: AlipayFault;
  /** What the sandbox answered: the HTTP status, and Alipay's code and sub_code. */
  status?: number;
  code?: string;
  subCode?: string;
};

type AlipayAccountBase = {
  appId: string;
  /** The merchant app private key, PEM PKCS#8. */
  privateKey: string;
  api: "classic" | "v3";
  baseUrl: string;
};

/** The shape of a DQ_ALIPAY_ACCOUNTS value, in public-key or certificate mode. */
export type AlipayAccount =
  /** The sandbox's ("Alipay's") public key, bare base64 SPKI, as the Alipay console shows it. */
  | (AlipayAccountBase & { alipayPublicKey: string })
  /** The app's certificate, Alipay's, and the root bundle (PEMs, each with its intermediates). */
  | (AlipayAccountBase & { appCert: string; alipayCert: string; alipayRootCert: string });

export type AlipaySandbox = {
  /** Base URL: the classic gateway is `${url}/gateway.do`, v3 is `${url}/v3/alipay/trade/...`. */
  url: string;
  /** An account entry in the shape of a DQ_ALIPAY_ACCOUNTS value. */
  account: AlipayAccount;
  mode: "publicKey" | "certificate";
  /** Certificate mode: the SNs (as alipay-sdk computes them) and the PEMs. */
  certificates?: AlipaySandboxCertificates;
  /** The merchant's public key (PEM SPKI) and the sandbox's own private key (PEM PKCS#8). */
  keys: { merchantPublicKey: string; alipayPrivateKey: string };
  createTrade(outTradeNo: string, opts?: { totalAmount?: string; subject?: string }): AlipayTrade;
  /** WAIT_BUYER_PAY → TRADE_SUCCESS (or TRADE_FINISHED; TRADE_SUCCESS → TRADE_FINISHED too). */
  pay(outTradeNo: string, opts?: { finished?: boolean }): AlipayTrade;
  /** Closes an unpaid trade as Alipay does when it times out: WAIT_BUYER_PAY → TRADE_CLOSED. */
  close(outTradeNo: string): AlipayTrade;
  /** Stops the sandbox (drops any held connection). */
  close(): Promise<void>;
  /** A full refund: TRADE_SUCCESS → TRADE_CLOSED with refund_fee, as Alipay reports it. */
  refund(outTradeNo: string): AlipayTrade;
  trade(outTradeNo: string): AlipayTrade | undefined;
  /**
   * Sends Alipay's async notification (form POST, RSA2-signed) to `url`; `tamper` changes a
   * signed field. `notifyId` (default: a new one) sends it again as a resend does, `notifyTime`
   * (unix ms; default now) dates it, signed either way.
   */
  notify(
    outTradeNo: string,
    url: string,
    opts?: NotifyOptions,
  ): Promise<{ status: number; text: string }>;
  /**
   * A refund request of a paid trade (out_request_no, unique within the trade), processing until
   * succeedRefund: refund queries answer it without refund_status until then. `refundAmount`:
   * yuan, default what is left to refund.
   */
  createRefund(
    outTradeNo: string,
    outRequestNo: string,
    opts?: { refundAmount?: string },
  ): AlipayRefund;
  /** The refund succeeds (REFUND_SUCCESS); refunding all of the trade closes it (TRADE_CLOSED). */
  succeedRefund(outTradeNo: string, outRequestNo: string): AlipayRefund;
  getRefund(outTradeNo: string, outRequestNo: string): AlipayRefund | undefined;
  /** Fault injection for the next `count` API requests (faults queue up in order). */
  inject(fault: AlipayFault, count?: number): void;
  requests(): AlipayRequestRecord[];
};

/** How the sandbox sends a notification. */
export type NotifyOptions = { tamper?: boolean; notifyId?: string; notifyTime?: number };

export type AlipaySandboxOptions = {
  /** @default 0 (a free port) */
  port?: number;
  /** @default "2021000000000001" */
  appId?: string;
  /** How long an injected "timeout" holds the request before dropping the connection. @default 30000 */
  hangMs?: number;
  /** How long an injected "slow" holds the request before answering it. @default 1000 */
  slowMs?: number;
  /** How far a request's timestamp may be from the sandbox's clock. @default 600000 (10 min) */
  timestampWindowMs?: number;
  /**
   * "publicKey" (Alipay's public key) or "certificate" (public-key certificates: requests carry
   * app_cert_sn and alipay_root_cert_sn, answers alipay_cert_sn). @default "publicKey"
   */
  mode?: "publicKey" | "certificate";
};

export class AlipaySandboxError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "AlipaySandboxError";
  }
}

const SUPPORTED_METHODS = new Set(["alipay.trade.query", "alipay.trade.close", REFUND_QUERY]);
const V3_PATHS: Record<string, string> = {
  "/v3/alipay/trade/query": "alipay.trade.query",
  "/v3/alipay/trade/close": "alipay.trade.close",
  "/v3/alipay/trade/fastpay/refund/query": REFUND_QUERY,
};
const BEIJING_OFFSET_MS = 8 * 3600_000;
const AMOUNT = /^(?:0|[1-9]\d{0,9})(?:\.\d{1,2})?$/;

/** `yyyy-MM-dd HH:mm:ss` in Beijing time (UTC+8, no DST), the format of Alipay's `timestamp`. */
export function beijingTime(at: number | Date = Date.now()): string {
  const d = new Date((typeof at === "number" ? at : at.getTime()) + BEIJING_OFFSET_MS);
  const p = (n: number) => String(n).padStart(2, "0");
  return (
    `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ` +
    `${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`
  );
}

/** Parses Beijing `yyyy-MM-dd HH:mm:ss` into epoch ms, or undefined. */
export function parseBeijingTime(text: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const ms = Date.UTC(y, mo - 1, d, h, mi, s) - BEIJING_OFFSET_MS;
  // Date.UTC rolls 2024-02-31 over; a real calendar date reads back the same.
  return beijingTime(ms) === text ? ms : undefined;
}

/**
 * JSON text the way Alipay's gateway writes it: raw UTF-8, and every `/` escaped as `\/`. A
 * `/` only occurs inside strings in JSON text, so the replacement keeps it valid; verifiers
 * that re-serialize the parsed answer instead of taking the raw text lose the escapes and fail.
 */
export function alipayJson(value: unknown): string {
  return JSON.stringify(value).replaceAll("/", "\\/");
}

function rsa2Sign(content: string, key: KeyObject): string {
  return createSign("RSA-SHA256").update(content, "utf8").sign(key, "base64");
}

/** Alipay's classic sign content: every param but `sign`, empty ones dropped, sorted, `k=v&…`, raw values. */
export function classicSignContent(params: Map<string, string> | Record<string, string>): string {
  const entries = params instanceof Map ? [...params.entries()] : Object.entries(params);
  return entries
    .filter(([k, v]) => k !== "sign" && v !== "")
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
}

type Answer = { status: number; code?: string; subCode?: string };

/** Starts the sandbox on 127.0.0.1. Keys are generated once per process (see payment-keys.ts). */
export async function startAlipaySandbox(
  options: AlipaySandboxOptions = {},
): Promise<AlipaySandbox> {
  const appId = options.appId ?? "2021000000000001";
  const hangMs = options.hangMs ?? 30_000;
  const slowMs = options.slowMs ?? 1000;
  const window = options.timestampWindowMs ?? 600_000;
  const [merchant, platform] = await Promise.all([
    rsaKeyPair("alipay-merchant"),
    rsaKeyPair("alipay-platform"),
  ]);
  const mode = options.mode ?? "publicKey";
  const certs =
    mode === "certificate"
      ? await sandboxCertificates({
          app: merchant.privateKey,
          alipay: platform.privateKey,
          appId,
        })
      : undefined;
  /** The SN an answer names: Alipay's certificate's, or (fault) another's. */
  const answerSn = (fault: AlipayFault | undefined) =>
    fault === "wrongCertSn" ? certs?.appCertSn : certs?.alipayCertSn;
  // A "badSignature" answer is signed with a key that is not Alipay's; the merchant's is at hand.
  const wrong = merchant;
  // The official SDK with the roles swapped: "Alipay's public key" here is the merchant's, so
  // its rsaCheck verifies what the merchant signed. It never signs anything in the sandbox.
  const checker = new AlipaySdk({
    appId,
    privateKey: pemToBase64(privateKeyPem(platform.privateKey)),
    keyType: "PKCS8",
    alipayPublicKey: pemToBase64(publicKeyPem(merchant.publicKey)),
    signType: "RSA2",
  });

  const trades = new Map<string, AlipayTrade>();
  const log: AlipayRequestRecord[] = [];
  const faults: { fault: AlipayFault; left: number }[] = [];
  const hangs = new Set<NodeJS.Timeout>();
  const sellerId = `2088${digits(12)}`;

  const takeFault = (): AlipayFault | undefined => {
    const head = faults[0];
    if (!head) return undefined;
    head.left -= 1;
    if (head.left <= 0) faults.shift();
    return head.fault;
  };

  const mustGet = (outTradeNo: string): AlipayTrade => {
    const trade = trades.get(outTradeNo);
    if (!trade) throw new AlipaySandboxError("trade_not_found", 404, `no trade ${outTradeNo}`);
    return trade;
  };

  const createTrade: AlipaySandbox["createTrade"] = (outTradeNo, opts = {}) => {
    if (!outTradeNo || outTradeNo.length > 64)
      throw new AlipaySandboxError("bad_request", 400, "outTradeNo must be 1-64 characters");
    if (trades.has(outTradeNo))
      throw new AlipaySandboxError("trade_exists", 409, `trade ${outTradeNo} already exists`);
    const amount = opts.totalAmount ?? "0.01";
    if (!AMOUNT.test(amount) || Number(amount) <= 0)
      throw new AlipaySandboxError(
        "bad_request",
        400,
        `amount must be yuan like "12.34", got ${amount}`,
      );
    const trade: AlipayTrade = {
      outTradeNo,
      tradeNo: `${beijingTime().slice(0, 10).replaceAll("-", "")}22001${digits(15)}`,
      status: "WAIT_BUYER_PAY",
      totalAmount: Number(amount).toFixed(2),
      // A `/` in a field Alipay returns, so its `\/` escape reaches every verifier.
      subject: opts.subject ?? "delayq sandbox/测试订单",
      buyerLogonId: `${digits(3)}****${digits(4)}`,
      buyerUserId: `2088${digits(12)}`,
      gmtCreate: beijingTime(),
    };
    trades.set(outTradeNo, trade);
    return { ...trade };
  };

  const pay: AlipaySandbox["pay"] = (outTradeNo, opts = {}) => {
    const trade = mustGet(outTradeNo);
    const target: AlipayTradeStatus = opts.finished ? "TRADE_FINISHED" : "TRADE_SUCCESS";
    const ok =
      trade.status === "WAIT_BUYER_PAY" ||
      (trade.status === "TRADE_SUCCESS" && target === "TRADE_FINISHED");
    if (!ok)
      throw new AlipaySandboxError("bad_state", 409, `cannot pay a trade in ${trade.status}`);
    trade.gmtPayment ??= beijingTime();
    trade.status = target;
    return { ...trade };
  };

  const refunds = alipayRefunds({
    now: () => beijingTime(),
    fail: (code, status, message) => {
      throw new AlipaySandboxError(code, status, message);
    },
  });

  const closeTrade = (outTradeNo: string): AlipayTrade => {
    const trade = mustGet(outTradeNo);
    if (trade.status !== "WAIT_BUYER_PAY")
      throw new AlipaySandboxError("bad_state", 409, `cannot close a trade in ${trade.status}`);
    trade.status = "TRADE_CLOSED";
    trade.gmtClose = beijingTime();
    return { ...trade };
  };

  const refund: AlipaySandbox["refund"] = (outTradeNo) => {
    const trade = mustGet(outTradeNo);
    if (trade.status !== "TRADE_SUCCESS")
      throw new AlipaySandboxError("bad_state", 409, `cannot refund a trade in ${trade.status}`);
    trade.status = "TRADE_CLOSED";
    trade.refundFee = trade.totalAmount;
    trade.gmtRefund = beijingTime();
    trade.gmtClose = trade.gmtRefund;
    return { ...trade };
  };

  /** The business fields of alipay.trade.query for a trade, in Alipay's answer shape. */
  const queryFields = (trade: AlipayTrade): Record<string, unknown> => {
    const paid = trade.gmtPayment !== undefined;
    const fields: Record<string, unknown> = {
      buyer_logon_id: trade.buyerLogonId,
      buyer_pay_amount: paid ? trade.totalAmount : "0.00",
      buyer_user_id: trade.buyerUserId,
    };
    if (paid)
      fields.fund_bill_list = [{ amount: trade.totalAmount, fund_channel: "ALIPAYACCOUNT" }];
    Object.assign(fields, {
      invoice_amount: paid ? trade.totalAmount : "0.00",
      out_trade_no: trade.outTradeNo,
      point_amount: "0.00",
      receipt_amount: paid ? trade.totalAmount : "0.00",
    });
    if (paid) fields.send_pay_date = trade.gmtPayment;
    Object.assign(fields, {
      subject: trade.subject,
      total_amount: trade.totalAmount,
      trade_no: trade.tradeNo,
      trade_status: trade.status,
    });
    return fields;
  };

  type Outcome =
    | { ok: true; fields: Record<string, unknown> }
    | { ok: false; code: string; msg: string; subCode: string; subMsg: string; httpStatus: number };

  const business = (method: string, biz: unknown, fault: AlipayFault | undefined): Outcome => {
    if (fault === "systemError")
      return {
        ok: false,
        code: "20000",
        msg: "Service Currently Unavailable",
        subCode: "ACQ.SYSTEM_ERROR",
        subMsg: "系统错误",
        httpStatus: 500,
      };
    const b = (typeof biz === "object" && biz !== null ? biz : {}) as Record<string, unknown>;
    const outTradeNo = typeof b.out_trade_no === "string" ? b.out_trade_no : undefined;
    const tradeNo = typeof b.trade_no === "string" ? b.trade_no : undefined;
    if (!outTradeNo && !tradeNo)
      return {
        ok: false,
        code: "40004",
        msg: "Business Failed",
        subCode: "ACQ.INVALID_PARAMETER",
        subMsg: "参数无效",
        httpStatus: 400,
      };
    let trade = outTradeNo ? trades.get(outTradeNo) : undefined;
    if (!trade && tradeNo) trade = [...trades.values()].find((t) => t.tradeNo === tradeNo);
    if (!trade || fault === "tradeNotExist")
      return {
        ok: false,
        code: "40004",
        msg: "Business Failed",
        subCode: "ACQ.TRADE_NOT_EXIST",
        subMsg: "交易不存在",
        httpStatus: 400,
      };
    if (method === "alipay.trade.query") return { ok: true, fields: queryFields(trade) };
    if (method === REFUND_QUERY) return refunds.query(trade, b);
    if (trade.status !== "WAIT_BUYER_PAY")
      return {
        ok: false,
        code: "40004",
        msg: "Business Failed",
        subCode: "ACQ.TRADE_STATUS_ERROR",
        subMsg: "交易状态不合法",
        httpStatus: 400,
      };
    trade.status = "TRADE_CLOSED";
    trade.gmtClose = beijingTime();
    return { ok: true, fields: { out_trade_no: trade.outTradeNo, trade_no: trade.tradeNo } };
  };

  const traceId = () => randomUUID().replaceAll("-", "");

  const writeClassic = (
    res: ServerResponse,
    responseKey: string,
    inner: Record<string, unknown>,
    signer: KeyObject | undefined,
    certSn?: string,
    padding = "",
  ): Answer => {
    const innerText = alipayJson(inner);
    const sign = signer ? `,"sign":"${rsa2Sign(innerText, signer)}"` : "";
    // Certificate mode names the certificate after the signature, as Alipay's gateway does.
    const sn = certSn === undefined ? "" : `,"alipay_cert_sn":"${certSn}"`;
    const text = `${padding}{"${responseKey}":${innerText}${sign}${sn}}`;
    res.writeHead(200, {
      "content-type": "text/html;charset=utf-8",
      "content-length": Buffer.byteLength(text),
      trace_id: traceId(),
    });
    res.end(text);
    const answer: Answer = { status: 200, code: String(inner.code) };
    if (typeof inner.sub_code === "string") answer.subCode = inner.sub_code;
    return answer;
  };

  /** Writes a v3 answer, signed by `signer` (none: unsigned) at `Date.now() + clockOffsetMs`. */
  const writeV3 = (
    res: ServerResponse,
    status: number,
    payload: Record<string, unknown>,
    signer: KeyObject | undefined,
    clockOffsetMs = 0,
    certSn?: string,
    padding = "",
  ): Answer => {
    const text = padding + alipayJson(payload);
    const headers: Record<string, string | number> = {
      "content-type": "application/json;charset=utf-8",
      "content-length": Buffer.byteLength(text),
      "alipay-trace-id": traceId(),
    };
    if (signer) {
      const ts = String(Date.now() + clockOffsetMs);
      const nonce = randomUUID();
      headers["alipay-timestamp"] = ts;
      headers["alipay-nonce"] = nonce;
      headers["alipay-signature"] = rsa2Sign(`${ts}\n${nonce}\n${text}\n`, signer);
    }
    if (certSn !== undefined) headers["alipay-sn"] = certSn;
    res.writeHead(status, headers);
    res.end(text);
    return typeof payload.code === "string" ? { status, code: payload.code } : { status };
  };

  /** 5xx and timeout faults act before the gateway looks at the request. */
  const transportFault = (res: ServerResponse, fault: AlipayFault | undefined): Answer | null => {
    if (fault === "5xx") {
      const text = "<html><body><h1>502 Bad Gateway</h1></body></html>";
      res.writeHead(502, {
        "content-type": "text/html",
        "content-length": Buffer.byteLength(text),
      });
      res.end(text);
      return { status: 502 };
    }
    if (fault === "timeout") {
      const timer = setTimeout(() => {
        hangs.delete(timer);
        res.destroy();
      }, hangMs);
      timer.unref();
      hangs.add(timer);
      return { status: 0 };
    }
    return null;
  };

  const classic = async (
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    body: Buffer,
  ): Promise<void> => {
    const params = new Map<string, string>();
    for (const [k, v] of url.searchParams) if (!params.has(k)) params.set(k, v);
    const type = req.headers["content-type"] ?? "";
    if (body.length > 0 && type.includes("application/x-www-form-urlencoded")) {
      for (const [k, v] of new URLSearchParams(body.toString("utf8")))
        if (!params.has(k)) params.set(k, v);
    }
    const method = params.get("method");
    let bizContent: unknown;
    const rawBiz = params.get("biz_content");
    if (rawBiz !== undefined) {
      try {
        bizContent = JSON.parse(rawBiz);
      } catch {
        bizContent = rawBiz;
      }
    }
    const sign = params.get("sign");
    const signContent = classicSignContent(params);
    const verified = sign !== undefined && checker.rsaCheck(signContent, sign, "RSA2");
    const snError =
      certs &&
      certificateSnError(certs, params.get("app_cert_sn"), params.get("alipay_root_cert_sn"));
    const record: AlipayRequestRecord = {
      method: req.method ?? "GET",
      path: url.pathname,
      api: "classic",
      verified,
      at: Date.now(),
    };
    if (certs) record.certificateSns = !snError;
    if (method !== undefined) record.method_ = method;
    if (bizContent !== undefined) record.bizContent = bizContent;
    log.push(record);
    const fault = takeFault();
    if (fault) record.fault = fault;
    const transport = transportFault(res, fault);
    if (transport) {
      Object.assign(record, transport);
      return;
    }
    if (fault === "slow") await new Promise((resolve) => setTimeout(resolve, slowMs));

    const signer = fault === "badSignature" ? wrong.privateKey : platform.privateKey;
    const responseKey =
      method && SUPPORTED_METHODS.has(method)
        ? `${method.replaceAll(".", "_")}_response`
        : "error_response";
    const gatewayError = (code: "40001" | "40002", subCode: string, subMsg: string) => ({
      code,
      msg: code === "40001" ? "Missing Required Arguments" : "Invalid Arguments",
      sub_code: subCode,
      sub_msg: subMsg,
    });
    const answer = (): Record<string, unknown> => {
      if (fault === "unsignedError")
        return {
          code: "40004",
          msg: "Business Failed",
          sub_code: "ACQ.INVALID_PARAMETER",
          sub_msg: "参数无效",
        };
      if (!method) return gatewayError("40001", "isv.missing-method", "缺少方法名参数");
      if (!params.get("app_id"))
        return gatewayError("40001", "isv.missing-app-id", "缺少appId参数");
      if (!SUPPORTED_METHODS.has(method))
        return gatewayError("40002", "isv.invalid-method", "不存在的方法名");
      if (params.get("app_id") !== appId)
        return gatewayError("40002", "isv.invalid-app-id", "无效的AppID参数");
      if (!sign) return gatewayError("40001", "isv.missing-signature", "缺少签名参数");
      const signType = params.get("sign_type");
      if (!signType) return gatewayError("40001", "isv.missing-signature-type", "缺少签名类型参数");
      if (signType !== "RSA2")
        return gatewayError("40002", "isv.invalid-signature-type", "无效的签名类型");
      const timestamp = params.get("timestamp");
      if (!timestamp) return gatewayError("40001", "isv.missing-timestamp", "缺少时间戳参数");
      if (!params.get("version"))
        return gatewayError("40001", "isv.missing-version", "缺少版本参数");
      const charset = params.get("charset");
      if (charset !== undefined && charset.toLowerCase() !== "utf-8")
        return gatewayError("40002", "isv.invalid-charset", "字符集错误");
      const at = parseBeijingTime(timestamp);
      if (at === undefined || Math.abs(at - Date.now()) > window)
        return gatewayError("40002", "isv.invalid-timestamp", "非法的时间戳参数");
      if (!verified)
        return gatewayError(
          "40002",
          "isv.invalid-signature",
          `验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配，网关生成的验签字符串为：${signContent}`,
        );
      if (snError) return gatewayError("40002", snError.subCode, snError.message);
      const outcome = business(method, bizContent, fault);
      if (outcome.ok) return { code: "10000", msg: "Success", ...outcome.fields };
      const asked = (bizContent as { out_trade_no?: unknown } | undefined)?.out_trade_no;
      return {
        code: outcome.code,
        msg: outcome.msg,
        sub_code: outcome.subCode,
        sub_msg: outcome.subMsg,
        ...(typeof asked === "string" ? { out_trade_no: asked } : {}),
      };
    };
    const unsigned = fault === "unsignedError";
    Object.assign(
      record,
      writeClassic(
        res,
        responseKey,
        answer(),
        unsigned ? undefined : signer,
        answerSn(fault),
        paddingFor(fault),
      ),
    );
  };

  const v3 = async (
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    body: Buffer,
  ): Promise<void> => {
    const method = V3_PATHS[url.pathname] as string;
    const text = body.toString("utf8");
    let bizContent: unknown;
    try {
      bizContent = text ? JSON.parse(text) : undefined;
    } catch {
      bizContent = text;
    }
    const header = req.headers.authorization ?? "";
    const auth = /^ALIPAY-SHA256withRSA (.+),sign=([^,]+)$/.exec(header);
    const authString = auth?.[1] ?? "";
    const fields = new Map<string, string>();
    for (const part of authString.split(",")) {
      const eq = part.indexOf("=");
      if (eq > 0) fields.set(part.slice(0, eq), part.slice(eq + 1));
    }
    const appAuthToken = req.headers["alipay-app-auth-token"];
    const signString =
      `${authString}\n${req.method}\n${req.url}\n${text}\n` +
      (typeof appAuthToken === "string" ? `${appAuthToken}\n` : "");
    const verified = auth !== null && checker.rsaCheck(signString, auth[2] ?? "", "RSA2");
    const rootSnHeader = req.headers["alipay-root-cert-sn"];
    const snError =
      certs &&
      certificateSnError(
        certs,
        fields.get("app_cert_sn"),
        typeof rootSnHeader === "string" ? rootSnHeader : undefined,
      );
    const record: AlipayRequestRecord = {
      method: req.method ?? "GET",
      path: url.pathname,
      api: "v3",
      verified,
      method_: method,
      at: Date.now(),
    };
    if (certs) record.certificateSns = !snError;
    if (bizContent !== undefined) record.bizContent = bizContent;
    log.push(record);
    const fault = takeFault();
    if (fault) record.fault = fault;
    const transport = transportFault(res, fault);
    if (transport) {
      Object.assign(record, transport);
      return;
    }
    if (fault === "slow") await new Promise((resolve) => setTimeout(resolve, slowMs));
    const signer = fault === "badSignature" ? wrong.privateKey : platform.privateKey;
    const fail = (status: number, code: string, message: string) => ({
      status,
      payload: { code, message },
    });
    const answer = (): { status: number; payload: Record<string, unknown> } => {
      if (req.method !== "POST") return fail(405, "invalid-method", "不支持的HTTP方法，请使用POST");
      if (!auth) return fail(401, "missing-signature", "缺少签名参数或 Authorization 格式错误");
      if (fields.get("app_id") !== appId) return fail(401, "invalid-app-id", "无效的AppID参数");
      const ts = Number(fields.get("timestamp"));
      if (!fields.get("nonce") || !Number.isFinite(ts) || Math.abs(ts - Date.now()) > window)
        return fail(401, "invalid-timestamp", "非法的时间戳参数");
      if (!verified)
        return fail(
          401,
          "invalid-signature",
          `验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配，网关生成的验签字符串为：${JSON.stringify(signString)}`,
        );
      if (snError) return fail(401, snError.subCode, snError.message);
      if (typeof bizContent !== "object" || bizContent === null)
        return fail(400, "ACQ.INVALID_PARAMETER", "参数无效");
      const outcome = business(method, bizContent, fault);
      if (!outcome.ok) return fail(outcome.httpStatus, outcome.subCode, outcome.subMsg);
      return { status: 200, payload: outcome.fields };
    };
    if (fault === "unsignedError") {
      const payload = { code: "ACQ.INVALID_PARAMETER", message: "参数无效" };
      Object.assign(record, writeV3(res, 400, payload, undefined));
      return;
    }
    const { status, payload } = answer();
    const offset = fault === "staleTimestamp" ? -10 * 60_000 : 0;
    Object.assign(
      record,
      writeV3(res, status, payload, signer, offset, answerSn(fault), paddingFor(fault)),
    );
  };

  const notifyFields = (trade: AlipayTrade, opts: NotifyOptions): Record<string, string> => {
    const paid = trade.gmtPayment !== undefined;
    const fields: Record<string, string> = {
      gmt_create: trade.gmtCreate,
      charset: "utf-8",
      seller_email: "sandbox-seller@example.com",
      subject: trade.subject,
      buyer_id: trade.buyerUserId,
      invoice_amount: paid ? trade.totalAmount : "0.00",
      notify_id:
        opts.notifyId ?? `${beijingTime().slice(0, 10).replaceAll("-", "")}00222${digits(27)}`,
      notify_type: "trade_status_sync",
      trade_status: trade.status,
      receipt_amount: paid ? trade.totalAmount : "0.00",
      app_id: appId,
      buyer_pay_amount: paid ? trade.totalAmount : "0.00",
      sign_type: "RSA2",
      seller_id: sellerId,
      notify_time: beijingTime(opts.notifyTime ?? Date.now()),
      version: "1.0",
      out_trade_no: trade.outTradeNo,
      total_amount: trade.totalAmount,
      trade_no: trade.tradeNo,
      auth_app_id: appId,
      buyer_logon_id: trade.buyerLogonId,
      point_amount: "0.00",
    };
    if (paid) {
      fields.gmt_payment = trade.gmtPayment as string;
      // A JSON string inside a form field, as Alipay sends it (camelCase keys inside).
      fields.fund_bill_list = JSON.stringify([
        { amount: trade.totalAmount, fundChannel: "ALIPAYACCOUNT" },
      ]);
    }
    if (trade.gmtClose) fields.gmt_close = trade.gmtClose;
    if (trade.refundFee) {
      fields.refund_fee = trade.refundFee;
      fields.gmt_refund = `${trade.gmtRefund}.000`;
      fields.out_biz_no = `refund-${trade.outTradeNo}`;
    }
    return fields;
  };

  const notify: AlipaySandbox["notify"] = async (outTradeNo, target, opts = {}) => {
    const fields = notifyFields(mustGet(outTradeNo), opts);
    // Notifications sign every field but sign and sign_type.
    const content = Object.keys(fields)
      .filter((k) => k !== "sign_type" && fields[k] !== "")
      .sort()
      .map((k) => `${k}=${fields[k]}`)
      .join("&");
    fields.sign = rsa2Sign(content, platform.privateKey);
    if (opts.tamper) fields.total_amount = (Number(fields.total_amount) + 100).toFixed(2);
    const res = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
      body: new URLSearchParams(fields).toString(),
      signal: AbortSignal.timeout(15_000),
    });
    return { status: res.status, text: await res.text() };
  };

  /**
   * The control API's refund routes: POST /trades/{no}/refunds {outRequestNo (or outRefundNo),
   * amount?}, GET /trades/{no}/refunds/{outRequestNo}, POST …/{outRequestNo}/succeed. Undefined
   * for another path.
   */
  const refundControl = (
    method: string,
    path: string,
    str: (name: string) => string | undefined,
  ): { status: number; value: unknown } | undefined => {
    const m = /^\/trades\/([^/]+)\/refunds(?:\/([^/]+)(?:\/(succeed))?)?$/.exec(path);
    if (!m) return undefined;
    const trade = mustGet(decodeURIComponent(m[1] as string));
    const outRequestNo = m[2] === undefined ? undefined : decodeURIComponent(m[2]);
    if (outRequestNo === undefined && method === "POST") {
      const asked = str("outRequestNo") ?? str("outRefundNo");
      if (!asked) throw new AlipaySandboxError("bad_request", 400, "outRequestNo is required");
      const amount = str("amount") ?? str("refundAmount");
      const opts = amount === undefined ? {} : { refundAmount: amount };
      return { status: 201, value: refunds.create(trade, asked, opts) };
    }
    if (outRequestNo === undefined) return undefined;
    if (m[3] === "succeed" && method === "POST")
      return { status: 200, value: refunds.succeed(trade, outRequestNo) };
    if (m[3] === undefined && method === "GET") {
      const refund = refunds.get(trade.outTradeNo, outRequestNo);
      return refund
        ? { status: 200, value: refund }
        : {
            status: 404,
            value: { error: "refund_not_found", message: `no refund ${outRequestNo}` },
          };
    }
    return undefined;
  };

  const control = async (
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    body: Buffer,
  ): Promise<void> => {
    const send = (status: number, value: unknown) => {
      const text = JSON.stringify(value);
      res.writeHead(status, {
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(text),
      });
      res.end(text);
    };
    try {
      let input: Record<string, unknown> = {};
      if (body.length > 0) {
        try {
          const parsed: unknown = JSON.parse(body.toString("utf8"));
          if (typeof parsed === "object" && parsed !== null)
            input = parsed as Record<string, unknown>;
        } catch {
          throw new AlipaySandboxError("bad_request", 400, "the body must be JSON");
        }
      }
      const path = url.pathname.replace(/^\/__sandbox/, "");
      const str = (name: string): string | undefined => {
        const v = input[name];
        if (v === undefined) return undefined;
        if (typeof v !== "string" && typeof v !== "number")
          throw new AlipaySandboxError("bad_request", 400, `${name} must be a string`);
        return String(v);
      };
      if (path === "/trades" && req.method === "POST") {
        const outTradeNo = str("outTradeNo");
        if (!outTradeNo) throw new AlipaySandboxError("bad_request", 400, "outTradeNo is required");
        const opts: { totalAmount?: string; subject?: string } = {};
        const amount = str("amount") ?? str("totalAmount");
        if (amount !== undefined) opts.totalAmount = amount;
        const subject = str("subject");
        if (subject !== undefined) opts.subject = subject;
        return send(201, createTrade(outTradeNo, opts));
      }
      if (path === "/requests" && req.method === "GET") return send(200, log);
      if (path === "/faults" && req.method === "POST") {
        const fault = str("fault") as AlipayFault | undefined;
        if (!fault || !ALIPAY_FAULTS.includes(fault))
          throw new AlipaySandboxError(
            "bad_request",
            400,
            `fault must be one of ${ALIPAY_FAULTS.join(", ")}`,
          );
        inject(fault, Number(str("count") ?? 1));
        return send(200, { queued: faults });
      }
      const refunded = refundControl(req.method ?? "GET", path, str);
      if (refunded) return send(refunded.status, refunded.value);
      const m = /^\/trades\/([^/]+)(?:\/(pay|close|refund|notify))?$/.exec(path);
      if (m) {
        const no = decodeURIComponent(m[1] as string);
        const action = m[2];
        if (!action && req.method === "GET") {
          const trade = trades.get(no);
          return trade
            ? send(200, trade)
            : send(404, { error: "trade_not_found", message: `no trade ${no}` });
        }
        if (req.method === "POST") {
          if (action === "pay") return send(200, pay(no, { finished: input.finished === true }));
          if (action === "close") return send(200, closeTrade(no));
          if (action === "refund") return send(200, refund(no));
          if (action === "notify") {
            const target = str("url");
            if (!target) throw new AlipaySandboxError("bad_request", 400, "url is required");
            mustGet(no);
            try {
              const opts: NotifyOptions = { tamper: input.tamper === true };
              const notifyId = str("notifyId");
              if (notifyId !== undefined) opts.notifyId = notifyId;
              if (input.notifyTime !== undefined) {
                if (typeof input.notifyTime !== "number")
                  throw new AlipaySandboxError("bad_request", 400, "notifyTime must be unix ms");
                opts.notifyTime = input.notifyTime;
              }
              return send(200, await notify(no, target, opts));
            } catch (error) {
              throw new AlipaySandboxError(
                "notify_failed",
                502,
                `could not deliver to ${target}: ${(error as Error).message}`,
              );
            }
          }
        }
      }
      send(404, { error: "not_found", message: `no control route ${req.method} ${url.pathname}` });
    } catch (error) {
      if (error instanceof AlipaySandboxError)
        return send(error.status, { error: error.code, message: error.message });
      throw error;
    }
  };

  const inject: AlipaySandbox["inject"] = (fault, count = 1) => {
    if (!Number.isInteger(count) || count < 1)
      throw new AlipaySandboxError("bad_request", 400, "count must be a positive integer");
    faults.push({ fault, left: count });
  };

  const { url, stop } = await serveSandbox(
    async (req, res, url, body) => {
      if (url.pathname.startsWith("/__sandbox/")) return control(req, res, url, body);
      if (url.pathname === "/gateway.do") return classic(req, res, url, body);
      if (url.pathname in V3_PATHS) return v3(req, res, url, body);
      const text = JSON.stringify({ error: "not_found", message: `no route ${url.pathname}` });
      res.writeHead(404, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      });
      res.end(text);
    },
    { port: options.port, hangs },
  );

  function close(outTradeNo: string): AlipayTrade;
  function close(): Promise<void>;
  function close(outTradeNo?: string): AlipayTrade | Promise<void> {
    return outTradeNo === undefined ? stop() : closeTrade(outTradeNo);
  }

  const base: AlipayAccountBase = {
    appId,
    privateKey: privateKeyPem(merchant.privateKey),
    api: "classic",
    baseUrl: url,
  };
  return {
    url,
    account: certs
      ? {
          ...base,
          appCert: certs.files.appCert,
          alipayCert: certs.files.alipayCert,
          alipayRootCert: certs.files.alipayRootCert,
        }
      : { ...base, alipayPublicKey: pemToBase64(publicKeyPem(platform.publicKey)) },
    mode,
    ...(certs ? { certificates: certs } : {}),
    keys: {
      merchantPublicKey: publicKeyPem(merchant.publicKey),
      alipayPrivateKey: privateKeyPem(platform.privateKey),
    },
    createTrade,
    pay,
    close,
    refund,
    trade: (outTradeNo) => {
      const trade = trades.get(outTradeNo);
      return trade ? { ...trade } : undefined;
    },
    notify,
    createRefund: (outTradeNo, outRequestNo, opts) =>
      refunds.create(mustGet(outTradeNo), outRequestNo, opts),
    succeedRefund: (outTradeNo, outRequestNo) => refunds.succeed(mustGet(outTradeNo), outRequestNo),
    getRefund: (outTradeNo, outRequestNo) => refunds.get(outTradeNo, outRequestNo),
    inject,
    requests: () => log.map((r) => ({ ...r })),
  };
}
