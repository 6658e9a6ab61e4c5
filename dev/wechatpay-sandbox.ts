// A local WeChat Pay: APIv3 order query/close, refund query and notifications (payments and
// refunds) on WeChat Pay's signed wire protocol, plus a control API.
import { type KeyObject, randomBytes, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Aes, Formatter, Rsa } from "wechatpay-axios-plugin";
import {
  generateRsaKeyPair,
  privateKeyPem,
  publicKeyPem,
  type RsaKeyPair,
  randomSerialHex,
  rsaKeyPair,
  type SelfSignedCertificate,
  selfSignedCertificate,
} from "./payment-keys";
import { digits, serveSandbox } from "./sandbox-http";
import {
  type WechatRefund,
  type WechatRefundStatus,
  wechatRefunds,
} from "./wechatpay-sandbox-refunds";

export type { WechatRefund, WechatRefundStatus } from "./wechatpay-sandbox-refunds";

export type WechatTradeState =
  | "NOTPAY"
  | "USERPAYING"
  | "SUCCESS"
  | "REFUND"
  | "CLOSED"
  | "REVOKED"
  | "PAYERROR";

export type WechatTrade = {
  outTradeNo: string;
  transactionId: string;
  appid: string;
  mchid: string;
  state: WechatTradeState;
  /** Fen. */
  total: number;
  openid: string;
  tradeType: "NATIVE";
  bankType: string;
  /** RFC 3339 with +08:00, as WeChat Pay writes times. */
  createTime: string;
  successTime?: string;
};

export type WechatFault =
  | "5xx"
  | "timeout"
  /** Answers as usual, `slowMs` later (the answer reflects the trade as it is then). */
  | "slow"
  | "429"
  | "badSignature"
  | "staleTimestamp"
  /** An error that would stop a watch were it trusted (400 PARAM_ERROR), without Wechatpay-* headers. */
  | "unsignedError"
  /**
   * The real answer, signed, padded with 2 MiB of JSON whitespace and sent in chunks without a
   * Content-Length (more than a query's answer may be: only reading it tells).
   */
  | "huge";

/** The huge fault's padding: 32 chunks of 64 KiB (2 MiB). */
const PADDING_CHUNKS = 32;

/** Every fault, in the order the control API lists them. */
export const WECHAT_FAULTS: readonly WechatFault[] = [
  "5xx",
  "timeout",
  "slow",
  "429",
  "badSignature",
  "staleTimestamp",
  "unsignedError",
  "huge",
];

export type WechatRequestRecord = {
  method: string;
  /** Path and query as received. */
  path: string;
  /** The Authorization signature verified with the merchant's public key. */
  verified: boolean;
  at: number;
  fault?: WechatFault;
  /** What the sandbox answered: HTTP status and WeChat's error code. */
  status?: number;
  code?: string;
};

type AccountBase = {
  mchid: string;
  /** The merchant API certificate's serial (the sandbox has no merchant certificate; it checks this value). */
  serialNo: string;
  /** The merchant's apiclient_key.pem, PKCS#8. */
  privateKey: string;
  /** The APIv3 key, 32 characters. */
  apiV3Key: string;
  baseUrl: string;
};

/** The shape of a DQ_WECHATPAY_ACCOUNTS value. */
export type WechatPayAccount =
  | (AccountBase & { platformPublicKey: string; platformPublicKeyId: string })
  | (AccountBase & { platformCertificates: string[] });

export type WechatPaySandbox = {
  url: string;
  account: WechatPayAccount;
  /**
   * PEMs, and the serial the sandbox puts in Wechatpay-Serial (PUB_KEY_ID_… or the certificate's):
   * the current ones, which rotateCertificate() changes.
   */
  keys: { merchantPublicKey: string; platformPrivateKey: string; platformSerial: string };
  mode: "publicKey" | "certificate";
  /**
   * Certificate mode: a new platform key and certificate, which signs every answer and
   * notification from now on; GET /v3/certificates serves it beside the earlier ones (as WeChat
   * Pay does while both are valid). Answers its serial.
   */
  rotateCertificate(): Promise<{ serial: string }>;
  createTrade(outTradeNo: string, opts?: { total?: number }): WechatTrade;
  /** NOTPAY/USERPAYING → SUCCESS. */
  pay(outTradeNo: string): WechatTrade;
  /** NOTPAY/USERPAYING/PAYERROR → CLOSED, as when an order expires. */
  close(outTradeNo: string): WechatTrade;
  /** Stops the sandbox (drops any held connection). */
  close(): Promise<void>;
  /** SUCCESS → REFUND. */
  refund(outTradeNo: string): WechatTrade;
  /** Forces any state (USERPAYING, PAYERROR, REVOKED… have no other way in). */
  setState(outTradeNo: string, state: WechatTradeState): WechatTrade;
  trade(outTradeNo: string): WechatTrade | undefined;
  /**
   * POSTs WeChat Pay's TRANSACTION.SUCCESS notification (resource AES-256-GCM-encrypted with the
   * APIv3 key, headers signed) to `url`. `tamper` changes the body after signing; `probe` sends
   * a `WECHATPAY/SIGNTEST/…` signature, as WeChat Pay's own probes do. `eventId` (default: a
   * new one) sends the same event again, as WeChat Pay's resends do.
   */
  notify(
    outTradeNo: string,
    url: string,
    opts?: { tamper?: boolean; probe?: boolean; eventId?: string },
  ): Promise<{ status: number; text: string }>;
  /**
   * A refund of a paid order (SUCCESS or REFUND; the order's trade_state becomes REFUND), in
   * PROCESSING until setRefundStatus moves it. `refund`: fen, default what is left to refund.
   */
  createRefund(outTradeNo: string, outRefundNo: string, opts?: { refund?: number }): WechatRefund;
  /** PROCESSING (or ABNORMAL) → SUCCESS, CLOSED or ABNORMAL. */
  setRefundStatus(outRefundNo: string, status: WechatRefundStatus): WechatRefund;
  getRefund(outRefundNo: string): WechatRefund | undefined;
  /**
   * POSTs WeChat Pay's REFUND.SUCCESS, REFUND.CLOSED or REFUND.ABNORMAL notification (the
   * refund's status; a PROCESSING one is refused) to `url`, signed and encrypted as notify's.
   */
  notifyRefund(
    outRefundNo: string,
    url: string,
    opts?: { tamper?: boolean; eventId?: string },
  ): Promise<{ status: number; text: string }>;
  /** Fault injection for the next `count` API requests (faults queue up in order). */
  inject(fault: WechatFault, count?: number): void;
  requests(): WechatRequestRecord[];
};

export type WechatPaySandboxOptions = {
  /** @default 0 (a free port) */
  port?: number;
  /** @default "1900000001" */
  mchid?: string;
  /** @default "wx8888888888888888" */
  appid?: string;
  /** "publicKey" (the WeChat Pay public key, as for all new merchants) or "certificate" (platform certificates). @default "publicKey" */
  mode?: "publicKey" | "certificate";
  /** How long an injected "timeout" holds the request before dropping the connection. @default 30000 */
  hangMs?: number;
  /** How long an injected "slow" holds the request before answering it. @default 1000 */
  slowMs?: number;
};

export class WechatPaySandboxError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "WechatPaySandboxError";
  }
}

const STATES: WechatTradeState[] = [
  "NOTPAY",
  "USERPAYING",
  "SUCCESS",
  "REFUND",
  "CLOSED",
  "REVOKED",
  "PAYERROR",
];
const STATE_DESC: Record<WechatTradeState, string> = {
  SUCCESS: "支付成功",
  REFUND: "转入退款",
  NOTPAY: "订单未支付",
  CLOSED: "订单已关闭",
  REVOKED: "已撤销（付款码支付）",
  USERPAYING: "用户支付中（付款码支付）",
  PAYERROR: "支付失败，请重新下单支付",
};
/** WeChat Pay rejects (and its SDKs reject) a timestamp further than this from now. */
const CLOCK_SKEW_S = 300;
const SIGNATURE_TYPE = "WECHATPAY2-SHA256-RSA2048";

/** RFC 3339 in Beijing time, `2024-01-02T03:04:05+08:00`, WeChat Pay's time format. */
export function rfc3339Beijing(at: number | Date = Date.now()): string {
  const ms = (typeof at === "number" ? at : at.getTime()) + 8 * 3600_000;
  return `${new Date(ms).toISOString().slice(0, 19)}+08:00`;
}

/** Parses `WECHATPAY2-SHA256-RSA2048 k="v",…` (fields in any order); undefined when malformed. */
export function parseWechatAuthorization(header: string): Record<string, string> | undefined {
  const m = /^WECHATPAY2-SHA256-RSA2048\s+(.+)$/.exec(header.trim());
  if (!m) return undefined;
  const fields: Record<string, string> = {};
  for (const [, key, value] of (m[1] as string).matchAll(/(\w+)="([^"]*)"/g))
    fields[key as string] = value as string;
  const required = ["mchid", "nonce_str", "signature", "timestamp", "serial_no"];
  return required.every((k) => fields[k]) ? fields : undefined;
}

type Reply = { status: number; body: string; code?: string };

const error = (status: number, code: string, message: string, detail?: unknown): Reply => ({
  status,
  code,
  body: JSON.stringify(detail === undefined ? { code, message } : { code, detail, message }),
});

/** Starts the sandbox on 127.0.0.1. Keys are generated once per process (see payment-keys.ts). */
export async function startWechatPaySandbox(
  options: WechatPaySandboxOptions = {},
): Promise<WechatPaySandbox> {
  const mchid = options.mchid ?? "1900000001";
  const appid = options.appid ?? "wx8888888888888888";
  const mode = options.mode ?? "publicKey";
  const hangMs = options.hangMs ?? 30_000;
  const slowMs = options.slowMs ?? 1000;
  const [merchant, basePlatform] = await Promise.all([
    rsaKeyPair("wechatpay-merchant"),
    rsaKeyPair("wechatpay-platform"),
  ]);
  // A "badSignature" answer is signed with a key that is not the platform's; the merchant's is at hand.
  const wrong = merchant;
  const serialNo = randomSerialHex();
  const apiV3Key = Formatter.nonce(32);
  /** Certificate mode: every platform certificate issued, the newest (the signing one) last. */
  const issued: SelfSignedCertificate[] = [];
  const issue = (pair: RsaKeyPair) => {
    const certificate = selfSignedCertificate(pair.privateKey, {
      subject:
        "/C=CN/ST=Guangdong/L=Shenzhen/O=Tenpay.com/OU=Tenpay.com CA Center/CN=Tenpay.com sign",
    });
    issued.push(certificate);
    return certificate.serial;
  };
  /** What signs answers and notifications now, and the Wechatpay-Serial that names it. */
  let platform = basePlatform;
  let platformSerial =
    mode === "certificate"
      ? issue(platform)
      : `PUB_KEY_ID_01${mchid.padStart(10, "0").slice(-10)}${digits(20)}`;
  const rotateCertificate = async (): Promise<{ serial: string }> => {
    if (mode !== "certificate")
      throw new WechatPaySandboxError(
        "bad_mode",
        409,
        "only certificate mode rotates certificates",
      );
    const pair = await generateRsaKeyPair();
    platformSerial = issue(pair);
    platform = pair;
    return { serial: platformSerial };
  };

  const trades = new Map<string, WechatTrade>();
  const log: WechatRequestRecord[] = [];
  const faults: { fault: WechatFault; left: number }[] = [];
  const hangs = new Set<NodeJS.Timeout>();

  const takeFault = (): WechatFault | undefined => {
    const head = faults[0];
    if (!head) return undefined;
    head.left -= 1;
    if (head.left <= 0) faults.shift();
    return head.fault;
  };

  const mustGet = (outTradeNo: string): WechatTrade => {
    const trade = trades.get(outTradeNo);
    if (!trade) throw new WechatPaySandboxError("trade_not_found", 404, `no trade ${outTradeNo}`);
    return trade;
  };

  const createTrade: WechatPaySandbox["createTrade"] = (outTradeNo, opts = {}) => {
    // WeChat Pay's charset for out_trade_no (it also wants 6+ characters; short test ids pass).
    if (!/^[0-9A-Za-z_\-|*]{1,32}$/.test(outTradeNo))
      throw new WechatPaySandboxError(
        "bad_request",
        400,
        "outTradeNo must be 1-32 characters of letters, digits, _ - | *",
      );
    if (trades.has(outTradeNo))
      throw new WechatPaySandboxError("trade_exists", 409, `trade ${outTradeNo} already exists`);
    const total = opts.total ?? 1;
    if (!Number.isSafeInteger(total) || total <= 0)
      throw new WechatPaySandboxError(
        "bad_request",
        400,
        "amount must be a positive integer (fen)",
      );
    const now = rfc3339Beijing();
    const trade: WechatTrade = {
      outTradeNo,
      transactionId: `42000${digits(5)}${now.slice(0, 10).replaceAll("-", "")}${digits(10)}`,
      appid,
      mchid,
      state: "NOTPAY",
      total,
      openid: `oUpF8u${randomBytes(16).toString("base64url").slice(0, 22)}`,
      tradeType: "NATIVE",
      bankType: "OTHERS",
      createTime: now,
    };
    trades.set(outTradeNo, trade);
    return { ...trade };
  };

  const move = (
    outTradeNo: string,
    from: WechatTradeState[],
    to: WechatTradeState,
  ): WechatTrade => {
    const trade = mustGet(outTradeNo);
    if (!from.includes(trade.state))
      throw new WechatPaySandboxError(
        "bad_state",
        409,
        `cannot move a trade from ${trade.state} to ${to}`,
      );
    return { ...setTradeState(trade, to) };
  };

  const setTradeState = (trade: WechatTrade, state: WechatTradeState): WechatTrade => {
    trade.state = state;
    if ((state === "SUCCESS" || state === "REFUND") && !trade.successTime)
      trade.successTime = rfc3339Beijing();
    return trade;
  };

  const refunds = wechatRefunds({
    mchid,
    now: () => rfc3339Beijing(),
    fail: (code, status, message) => {
      throw new WechatPaySandboxError(code, status, message);
    },
    refunded: (outTradeNo) => setTradeState(mustGet(outTradeNo), "REFUND"),
    error,
  });

  const setState: WechatPaySandbox["setState"] = (outTradeNo, state) => {
    if (!STATES.includes(state))
      throw new WechatPaySandboxError(
        "bad_request",
        400,
        `state must be one of ${STATES.join(", ")}`,
      );
    return { ...setTradeState(mustGet(outTradeNo), state) };
  };

  /** A transaction in WeChat Pay's shape (keys sorted, as its answers come). */
  const transaction = (t: WechatTrade): Record<string, unknown> => {
    const paid = t.state === "SUCCESS" || t.state === "REFUND";
    const touched =
      paid || t.state === "PAYERROR" || t.state === "REVOKED" || t.state === "USERPAYING";
    const out: Record<string, unknown> = {
      amount: paid
        ? { currency: "CNY", payer_currency: "CNY", payer_total: t.total, total: t.total }
        : { currency: "CNY", payer_currency: "CNY", total: t.total },
      appid: t.appid,
      attach: "",
    };
    if (touched) out.bank_type = t.bankType;
    out.mchid = t.mchid;
    out.out_trade_no = t.outTradeNo;
    if (touched) out.payer = { openid: t.openid };
    out.promotion_detail = [];
    if (paid) out.success_time = t.successTime;
    out.trade_state = t.state;
    out.trade_state_desc = STATE_DESC[t.state];
    if (touched) {
      out.trade_type = t.tradeType;
      out.transaction_id = t.transactionId;
    }
    return out;
  };

  const requestId = () =>
    `${randomBytes(12).toString("hex").toUpperCase()}${randomBytes(8).toString("hex").toUpperCase()}-0`;

  const write = (res: ServerResponse, reply: Reply, fault: WechatFault | undefined): void => {
    if (fault === "unsignedError") {
      res.writeHead(reply.status, {
        "Request-ID": requestId(),
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": Buffer.byteLength(reply.body),
      });
      res.end(reply.body);
      return;
    }
    const stale = fault === "staleTimestamp";
    const ts = Formatter.timestamp() - (stale ? 10 * 60 : 0);
    const nonce = Formatter.nonce(32);
    const signer: KeyObject = fault === "badSignature" ? wrong.privateKey : platform.privateKey;
    const padding = fault === "huge" ? " ".repeat(64 * 1024) : "";
    // The huge fault's padding (leading whitespace) is signed with the body, as it is sent.
    const signed = padding.repeat(PADDING_CHUNKS) + reply.body;
    const headers: Record<string, string | number> = {
      "Request-ID": requestId(),
      "Wechatpay-Nonce": nonce,
      "Wechatpay-Serial": platformSerial,
      "Wechatpay-Signature": Rsa.sign(Formatter.response(ts, nonce, signed), signer),
      "Wechatpay-Signature-Type": SIGNATURE_TYPE,
      "Wechatpay-Timestamp": ts,
    };
    if (padding) {
      headers["Content-Type"] = "application/json; charset=utf-8";
      res.writeHead(reply.status, headers);
      for (let i = 0; i < PADDING_CHUNKS; i++) res.write(padding);
      res.end(reply.body);
      return;
    }
    if (reply.status !== 204) {
      headers["Content-Type"] = "application/json; charset=utf-8";
      headers["Content-Length"] = Buffer.byteLength(reply.body);
    }
    res.writeHead(reply.status, headers);
    res.end(reply.status === 204 ? undefined : reply.body);
  };

  const route = (req: IncomingMessage, url: URL, text: string, authMchid: string): Reply => {
    const method = req.method ?? "GET";
    const byOutTradeNo = /^\/v3\/pay\/transactions\/out-trade-no\/([^/]+)$/.exec(url.pathname);
    const closeOne = /^\/v3\/pay\/transactions\/out-trade-no\/([^/]+)\/close$/.exec(url.pathname);
    const byId = /^\/v3\/pay\/transactions\/id\/([^/]+)$/.exec(url.pathname);
    const queryMchid = (): Reply | undefined => {
      const asked = url.searchParams.get("mchid");
      if (!asked)
        return error(
          400,
          "PARAM_ERROR",
          "输入源“/query/mchid”映射到字段“直连商户号”必填性规则校验失败，此字段为必填项",
          {
            location: "query",
            value: "",
          },
        );
      if (asked !== authMchid)
        return error(400, "PARAM_ERROR", "mchid 与 Authorization 中的商户号不一致");
      return undefined;
    };
    if (method === "GET" && byOutTradeNo) {
      const bad = queryMchid();
      if (bad) return bad;
      const trade = trades.get(decodeURIComponent(byOutTradeNo[1] as string));
      if (!trade) return error(404, "ORDER_NOT_EXIST", "订单不存在");
      return { status: 200, body: JSON.stringify(transaction(trade)) };
    }
    if (method === "GET" && byId) {
      const bad = queryMchid();
      if (bad) return bad;
      const id = decodeURIComponent(byId[1] as string);
      const trade = [...trades.values()].find(
        (t) => t.transactionId === id && t.state !== "NOTPAY" && t.state !== "CLOSED",
      );
      if (!trade) return error(404, "ORDER_NOT_EXIST", "订单不存在");
      return { status: 200, body: JSON.stringify(transaction(trade)) };
    }
    if (method === "POST" && closeOne) {
      let input: unknown;
      try {
        input = JSON.parse(text);
      } catch {
        return error(400, "PARAM_ERROR", "请求的body不是合法的JSON");
      }
      const asked = (input as { mchid?: unknown } | null)?.mchid;
      if (typeof asked !== "string" || !asked)
        return error(
          400,
          "PARAM_ERROR",
          "输入源“/body/mchid”映射到字段“直连商户号”必填性规则校验失败，此字段为必填项",
          {
            location: "body",
            value: "",
          },
        );
      if (asked !== authMchid)
        return error(400, "PARAM_ERROR", "mchid 与 Authorization 中的商户号不一致");
      const trade = trades.get(decodeURIComponent(closeOne[1] as string));
      if (!trade) return error(404, "ORDER_NOT_EXIST", "订单不存在");
      if (trade.state === "SUCCESS" || trade.state === "REFUND")
        return error(400, "ORDERPAID", "订单已支付");
      // Closing a closed order again is not an error at WeChat Pay: the close is idempotent.
      if (trade.state !== "CLOSED" && trade.state !== "REVOKED") setTradeState(trade, "CLOSED");
      return { status: 204, body: "" };
    }
    if (method === "GET" && url.pathname === "/v3/certificates" && issued.length > 0) {
      const data = issued.map((certificate) => {
        const nonce = Formatter.nonce(12);
        return {
          effective_time: rfc3339Beijing(certificate.notBefore),
          encrypt_certificate: {
            algorithm: "AEAD_AES_256_GCM",
            associated_data: "certificate",
            ciphertext: Aes.AesGcm.encrypt(certificate.pem, apiV3Key, nonce, "certificate"),
            nonce,
          },
          expire_time: rfc3339Beijing(certificate.notAfter),
          serial_no: certificate.serial,
        };
      });
      return { status: 200, body: JSON.stringify({ data }) };
    }
    const refundReply = refunds.route(method, url);
    if (refundReply) return refundReply;
    return error(404, "NOT_FOUND", `请求的资源不存在：${method} ${url.pathname}`);
  };

  const api = async (
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    body: Buffer,
  ): Promise<void> => {
    const text = body.toString("utf8");
    const method = req.method ?? "GET";
    const auth = parseWechatAuthorization(req.headers.authorization ?? "");
    const pathAndQuery = req.url ?? url.pathname;
    const signMessage = auth
      ? Formatter.request(
          method,
          pathAndQuery,
          auth.timestamp as string,
          auth.nonce_str as string,
          text,
        )
      : "";
    const verified =
      auth !== undefined && Rsa.verify(signMessage, auth.signature as string, merchant.publicKey);
    const record: WechatRequestRecord = { method, path: pathAndQuery, verified, at: Date.now() };
    log.push(record);
    const fault = takeFault();
    if (fault) record.fault = fault;
    if (fault === "timeout") {
      const timer = setTimeout(() => {
        hangs.delete(timer);
        res.destroy();
      }, hangMs);
      timer.unref();
      hangs.add(timer);
      record.status = 0;
      return;
    }
    if (fault === "slow") await new Promise((resolve) => setTimeout(resolve, slowMs));

    const answer = (): Reply => {
      if (fault === "unsignedError") return error(400, "PARAM_ERROR", "参数错误");
      if (fault === "5xx") return error(500, "SYSTEM_ERROR", "系统异常，请稍后重试");
      if (fault === "429")
        return error(429, "FREQUENCY_LIMITED", "请求频率超限，请降低请求接口频率");
      if (!auth)
        return error(
          401,
          "SIGN_ERROR",
          "Http头Authorization值格式错误，请参考《微信支付商户REST API签名规则》",
        );
      if (auth.mchid !== mchid) return error(400, "MCH_NOT_EXISTS", "商户号不存在");
      if (auth.serial_no !== serialNo)
        return error(401, "SIGN_ERROR", "商户证书序列号有误。请使用签名私钥匹配的证书序列号");
      const ts = Number(auth.timestamp);
      if (!Number.isInteger(ts) || Math.abs(Formatter.timestamp() - ts) > CLOCK_SKEW_S)
        return error(401, "SIGN_ERROR", "请求的时间戳与服务器时间相差超过5分钟");
      if (!verified)
        return error(401, "SIGN_ERROR", "签名错误，请检查后再试", {
          detail: { issue: "sign not match" },
          field: "signature",
          location: "authorization",
          sign_information: {
            method,
            sign_message_length: Buffer.byteLength(signMessage),
            truncated_sign_message: `${signMessage.slice(0, 60)}\n`,
            url: pathAndQuery,
          },
        });
      return route(req, url, text, auth.mchid as string);
    };
    const reply = answer();
    record.status = reply.status;
    if (reply.code) record.code = reply.code;
    write(res, reply, fault);
  };

  /** What one notification carries: its event type, summary, and the resource to encrypt. */
  type Note = {
    eventType: string;
    summary: string;
    originalType: "transaction" | "refund";
    resource: Record<string, unknown>;
  };

  const notify: WechatPaySandbox["notify"] = async (outTradeNo, target, opts = {}) => {
    const trade = mustGet(outTradeNo);
    if (trade.state !== "SUCCESS")
      throw new WechatPaySandboxError(
        "bad_state",
        409,
        `WeChat Pay notifies paid orders only; ${outTradeNo} is ${trade.state}`,
      );
    const note: Note = {
      eventType: "TRANSACTION.SUCCESS",
      summary: "支付成功",
      originalType: "transaction",
      resource: transaction(trade),
    };
    return send(note, target, opts);
  };

  const notifyRefund: WechatPaySandbox["notifyRefund"] = async (outRefundNo, target, opts = {}) =>
    send({ ...refunds.event(outRefundNo), originalType: "refund" }, target, opts);

  /** Encrypts a notification's resource, signs the event and POSTs it to `target`. */
  const send = async (
    note: Note,
    target: string,
    opts: { tamper?: boolean; probe?: boolean; eventId?: string },
  ): Promise<{ status: number; text: string }> => {
    const nonce = Formatter.nonce(12);
    const event = {
      id: opts.eventId ?? randomUUID(),
      create_time: rfc3339Beijing(),
      resource_type: "encrypt-resource",
      event_type: note.eventType,
      summary: note.summary,
      resource: {
        original_type: note.originalType,
        algorithm: "AEAD_AES_256_GCM",
        ciphertext: Aes.AesGcm.encrypt(
          JSON.stringify(note.resource),
          apiV3Key,
          nonce,
          note.originalType,
        ),
        associated_data: note.originalType,
        nonce,
      },
    };
    let body = JSON.stringify(event);
    const ts = Formatter.timestamp();
    const headerNonce = Formatter.nonce(32);
    const signature = opts.probe
      ? `WECHATPAY/SIGNTEST/${randomBytes(180).toString("base64")}`
      : Rsa.sign(Formatter.response(ts, headerNonce, body), platform.privateKey);
    // Tampered in transit: the signature stays, the (still decryptable) body changes.
    if (opts.tamper) body = JSON.stringify({ ...event, summary: `${note.summary} ` });
    const res = await fetch(target, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "Request-ID": requestId(),
        "Wechatpay-Nonce": headerNonce,
        "Wechatpay-Serial": platformSerial,
        "Wechatpay-Signature": signature,
        "Wechatpay-Signature-Type": SIGNATURE_TYPE,
        "Wechatpay-Timestamp": String(ts),
      },
      body,
      signal: AbortSignal.timeout(15_000),
    });
    return { status: res.status, text: await res.text() };
  };

  const inject: WechatPaySandbox["inject"] = (fault, count = 1) => {
    if (!Number.isInteger(count) || count < 1)
      throw new WechatPaySandboxError("bad_request", 400, "count must be a positive integer");
    faults.push({ fault, left: count });
  };

  /**
   * The control API's refund routes: POST /trades/{no}/refunds {outRefundNo, amount?}, GET
   * /refunds/{no}, POST /refunds/{no}/succeed|close|abnormal, POST /refunds/{no}/notify {url,
   * eventId?, tamper?}. Undefined for another path.
   */
  const refundControl = async (
    method: string,
    path: string,
    input: Record<string, unknown>,
  ): Promise<{ status: number; value: unknown } | undefined> => {
    const made = /^\/trades\/([^/]+)\/refunds$/.exec(path);
    if (made && method === "POST") {
      const outRefundNo = input.outRefundNo;
      if (typeof outRefundNo !== "string")
        throw new WechatPaySandboxError("bad_request", 400, "outRefundNo is required");
      const amount = input.amount ?? input.refund;
      if (amount !== undefined && typeof amount !== "number")
        throw new WechatPaySandboxError("bad_request", 400, "amount must be an integer (fen)");
      const trade = decodeURIComponent(made[1] as string);
      const opts = amount === undefined ? {} : { refund: amount };
      return { status: 201, value: createRefund(trade, outRefundNo, opts) };
    }
    const one = /^\/refunds\/([^/]+)(?:\/(succeed|close|abnormal|notify))?$/.exec(path);
    if (!one) return undefined;
    const no = decodeURIComponent(one[1] as string);
    const action = one[2];
    if (!action && method === "GET") {
      const refund = refunds.get(no);
      return refund
        ? { status: 200, value: refund }
        : { status: 404, value: { error: "refund_not_found", message: `no refund ${no}` } };
    }
    if (method !== "POST" || !action) return undefined;
    if (action !== "notify") {
      const to = { succeed: "SUCCESS", close: "CLOSED", abnormal: "ABNORMAL" } as const;
      return { status: 200, value: refunds.setStatus(no, to[action as keyof typeof to]) };
    }
    if (typeof input.url !== "string")
      throw new WechatPaySandboxError("bad_request", 400, "url is required");
    const opts = {
      tamper: input.tamper === true,
      ...(typeof input.eventId === "string" ? { eventId: input.eventId } : {}),
    };
    refunds.event(no); // a PROCESSING or unknown refund is refused before anything is sent
    try {
      return { status: 200, value: await notifyRefund(no, input.url, opts) };
    } catch (error) {
      throw new WechatPaySandboxError(
        "notify_failed",
        502,
        `could not deliver to ${input.url}: ${(error as Error).message}`,
      );
    }
  };

  const createRefund: WechatPaySandbox["createRefund"] = (outTradeNo, outRefundNo, opts) =>
    refunds.create(mustGet(outTradeNo), outRefundNo, opts);

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
          throw new WechatPaySandboxError("bad_request", 400, "the body must be JSON");
        }
      }
      const path = url.pathname.replace(/^\/__sandbox/, "");
      if (path === "/trades" && req.method === "POST") {
        const outTradeNo = input.outTradeNo;
        if (typeof outTradeNo !== "string")
          throw new WechatPaySandboxError("bad_request", 400, "outTradeNo is required");
        const amount = input.amount ?? input.total;
        if (amount !== undefined && typeof amount !== "number")
          throw new WechatPaySandboxError("bad_request", 400, "amount must be an integer (fen)");
        return send(201, createTrade(outTradeNo, amount === undefined ? {} : { total: amount }));
      }
      if (path === "/requests" && req.method === "GET") return send(200, log);
      if (path === "/certificates/rotate" && req.method === "POST") {
        return send(200, await rotateCertificate());
      }
      if (path === "/faults" && req.method === "POST") {
        const fault = input.fault as WechatFault;
        if (!WECHAT_FAULTS.includes(fault))
          throw new WechatPaySandboxError(
            "bad_request",
            400,
            `fault must be one of ${WECHAT_FAULTS.join(", ")}`,
          );
        inject(fault, typeof input.count === "number" ? input.count : 1);
        return send(200, { queued: faults });
      }
      const refunded = await refundControl(req.method ?? "GET", path, input);
      if (refunded) return send(refunded.status, refunded.value);
      const m = /^\/trades\/([^/]+)(?:\/(pay|close|refund|state|notify))?$/.exec(path);
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
          if (action === "pay") return send(200, move(no, ["NOTPAY", "USERPAYING"], "SUCCESS"));
          if (action === "close")
            return send(200, move(no, ["NOTPAY", "USERPAYING", "PAYERROR"], "CLOSED"));
          if (action === "refund") return send(200, move(no, ["SUCCESS"], "REFUND"));
          if (action === "state") return send(200, setState(no, input.state as WechatTradeState));
          if (action === "notify") {
            if (typeof input.url !== "string")
              throw new WechatPaySandboxError("bad_request", 400, "url is required");
            const target = input.url;
            mustGet(no);
            let result: { status: number; text: string };
            try {
              result = await notify(no, target, {
                tamper: input.tamper === true,
                probe: input.probe === true,
                ...(typeof input.eventId === "string" ? { eventId: input.eventId } : {}),
              });
            } catch (error) {
              if (error instanceof WechatPaySandboxError) throw error;
              throw new WechatPaySandboxError(
                "notify_failed",
                502,
                `could not deliver to ${target}: ${(error as Error).message}`,
              );
            }
            return send(200, result);
          }
        }
      }
      send(404, { error: "not_found", message: `no control route ${req.method} ${url.pathname}` });
    } catch (error) {
      if (error instanceof WechatPaySandboxError)
        return send(error.status, { error: error.code, message: error.message });
      throw error;
    }
  };

  const { url, stop } = await serveSandbox(
    async (req, res, url, body) => {
      if (url.pathname.startsWith("/__sandbox/")) return control(req, res, url, body);
      await api(req, res, url, body);
    },
    { port: options.port, hangs },
  );

  function close(outTradeNo: string): WechatTrade;
  function close(): Promise<void>;
  function close(outTradeNo?: string): WechatTrade | Promise<void> {
    return outTradeNo === undefined
      ? stop()
      : move(outTradeNo, ["NOTPAY", "USERPAYING", "PAYERROR"], "CLOSED");
  }

  const base: AccountBase = {
    mchid,
    serialNo,
    privateKey: privateKeyPem(merchant.privateKey),
    apiV3Key,
    baseUrl: url,
  };
  const account: WechatPayAccount = issued[0]
    ? { ...base, platformCertificates: [issued[0].pem] }
    : {
        ...base,
        platformPublicKey: publicKeyPem(platform.publicKey),
        platformPublicKeyId: platformSerial,
      };

  return {
    url,
    account,
    keys: {
      merchantPublicKey: publicKeyPem(merchant.publicKey),
      get platformPrivateKey() {
        return privateKeyPem(platform.privateKey);
      },
      get platformSerial() {
        return platformSerial;
      },
    },
    mode,
    rotateCertificate,
    createTrade,
    pay: (outTradeNo) => move(outTradeNo, ["NOTPAY", "USERPAYING"], "SUCCESS"),
    close,
    refund: (outTradeNo) => move(outTradeNo, ["SUCCESS"], "REFUND"),
    setState,
    trade: (outTradeNo) => {
      const trade = trades.get(outTradeNo);
      return trade ? { ...trade } : undefined;
    },
    notify,
    createRefund,
    setRefundStatus: (outRefundNo, status) => refunds.setStatus(outRefundNo, status),
    getRefund: (outRefundNo) => refunds.get(outRefundNo),
    notifyRefund,
    inject,
    requests: () => log.map((r) => ({ ...r })),
  };
}
