// Test support for the payment providers: key material made by node:crypto and the openssl CLI
// (independent of src/payments), and tiny Alipay / WeChat Pay gateways that check requests and sign
// answers with node:crypto, with a trade table and injectable faults.

import { execFileSync } from "node:child_process";
import {
  createCipheriv,
  createSign,
  createVerify,
  generateKeyPairSync,
  randomBytes,
  X509Certificate,
} from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Service } from "../../src/service";

/** One RSA key in every spelling the providers accept. */
export type KeyMaterial = {
  pkcs8Pem: string;
  pkcs1Pem: string;
  pkcs8Base64: string;
  pkcs1Base64: string;
  spkiPem: string;
  spkiBase64: string;
  pkcs1PublicPem: string;
  pkcs1PublicBase64: string;
};

const bare = (pem: string) => pem.replace(/-----[A-Z ]+-----|\s/g, "");

export function rsaKey(): KeyMaterial {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pkcs8Pem = privateKey.export({ type: "pkcs8", format: "pem" }) as string;
  const pkcs1Pem = privateKey.export({ type: "pkcs1", format: "pem" }) as string;
  const spkiPem = publicKey.export({ type: "spki", format: "pem" }) as string;
  const pkcs1PublicPem = publicKey.export({ type: "pkcs1", format: "pem" }) as string;
  return {
    pkcs8Pem,
    pkcs1Pem,
    pkcs8Base64: bare(pkcs8Pem),
    pkcs1Base64: bare(pkcs1Pem),
    spkiPem,
    spkiBase64: bare(spkiPem),
    pkcs1PublicPem,
    pkcs1PublicBase64: bare(pkcs1PublicPem),
  };
}

/** A self-signed certificate made by the openssl CLI, with its key and serial as Node reads it. */
export type Certificate = { pem: string; keyPem: string; serial: string; spkiDer: Buffer };

export function selfSignedCertificate(
  serialHex: string,
  subject = "/CN=WeChatPay Test",
): Certificate {
  const dir = mkdtempSync(join(tmpdir(), "dq-cert-"));
  try {
    const keyPath = join(dir, "key.pem");
    const certPath = join(dir, "cert.pem");
    // biome-ignore format: one openssl command line
    const args = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyPath, "-out", certPath, "-days", "30", "-subj", subject, "-set_serial", `0x${serialHex}`];
    execFileSync("openssl", args, { stdio: "ignore" });
    const pem = readFileSync(certPath, "utf8");
    const cert = new X509Certificate(pem);
    return {
      pem,
      keyPem: readFileSync(keyPath, "utf8"),
      serial: cert.serialNumber,
      spkiDer: cert.publicKey.export({ type: "spki", format: "der" }),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function nodeSign(privateKeyPem: string, text: string): string {
  return createSign("RSA-SHA256").update(text, "utf8").sign(privateKeyPem, "base64");
}

export function nodeVerify(publicKeyPem: string, text: string, signature: string): boolean {
  return createVerify("RSA-SHA256").update(text, "utf8").verify(publicKeyPem, signature, "base64");
}

/** AES-256-GCM as WeChat Pay encrypts notification resources: base64(ciphertext‖tag). */
export function nodeAesGcmEncrypt(key: string, nonce: string, aad: string, plain: string): string {
  const cipher = createCipheriv(
    "aes-256-gcm",
    Buffer.from(key, "utf8"),
    Buffer.from(nonce, "utf8"),
  );
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const out = Buffer.concat([cipher.update(plain, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return out.toString("base64");
}

/** Beijing wall time for unix ms, computed apart from the code under test (via Intl). */
export function beijingByIntl(ms: number): string {
  const parts = new Intl.DateTimeFormat("en-CA", {
    timeZone: "Asia/Shanghai",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23",
  }).formatToParts(new Date(ms));
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? "";
  return `${get("year")}-${get("month")}-${get("day")} ${get("hour")}:${get("minute")}:${get("second")}`;
}

// ---- fake gateways -----------------------------------------------------------------------------

/** A fault applied to the gateway's next answer. */
export type Fault =
  | "status500"
  | "status429"
  | "tamper" // change the body after signing
  | "unsigned" // drop the signature
  | "wrongKey" // sign with a key that is not the gateway's
  | "wrongSerial" // WeChat: name a serial the merchant does not know
  | "staleTimestamp" // WeChat, Alipay v3: sign with a timestamp 301 s old
  | "slow" // answer after 1.5 s
  | "reset"; // drop the connection

/** A trade as the gateway knows it; `state` is the provider's word. */
export type Trade = { state: string; totalFen: number; tradeNo: string; paidAt?: number };

export type Gateway = {
  url: string;
  trades: Map<string, Trade>;
  /** Faults for the next answers, one per request, in order. */
  faults: Fault[];
  /** Error codes to answer instead of the trade, one per request (e.g. "ACQ.SYSTEM_ERROR"). */
  errors: string[];
  /** What each request looked like once checked: path, verified signature, params. */
  requests: { path: string; verified: boolean; params: Record<string, string> }[];
  close(): Promise<void>;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

type Handler = (
  req: IncomingMessage,
  body: string,
  fault: Fault | undefined,
) => Promise<{ status: number; headers?: Record<string, string>; body: string }>;

async function serve(handler: Handler, state: Omit<Gateway, "url" | "close">): Promise<Gateway> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const body = await readBody(req);
      const fault = state.faults.shift();
      if (fault === "reset") {
        req.socket.destroy();
        return;
      }
      if (fault === "slow") {
        await sleep(1500);
        // The caller gave up meanwhile (its timeout): answer nothing, and take no injected error
        // meant for a later request.
        if (req.destroyed || res.destroyed) return;
      }
      if (fault === "status500" || fault === "status429") {
        const status = fault === "status500" ? 500 : 429;
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify({ code: status === 500 ? "SYSTEM_ERROR" : "FREQUENCY_LIMITED" }));
        return;
      }
      const answer = await handler(req, body, fault);
      res.writeHead(answer.status, answer.headers ?? {});
      res.end(answer.body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    ...state,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Alipay's way of writing JSON: slashes escaped, as its gateway sends them. */
const alipayJson = (value: unknown) => JSON.stringify(value).replaceAll("/", "\\/");

export type AlipayGatewayOptions = {
  appId: string;
  /** The merchant's public key (checks requests). */
  merchantPublicKey: string;
  /** The gateway's private key (signs answers). */
  gatewayPrivateKey: string;
  otherPrivateKey: string;
  /** Put an alipay_cert_sn after the response object, as certificate mode does. */
  certSn?: string;
};

function alipayTradeRecord(outTradeNo: string, trade: Trade): Record<string, unknown> {
  const record: Record<string, unknown> = {
    code: "10000",
    msg: "Success",
    buyer_logon_id: "159****5620",
    out_trade_no: outTradeNo,
    trade_no: trade.tradeNo,
    trade_status: trade.state,
    total_amount: (trade.totalFen / 100).toFixed(2),
    buyer_pay_amount: "0.00",
    fund_bill_list: [{ amount: (trade.totalFen / 100).toFixed(2), fund_channel: "ALIPAYACCOUNT" }],
    subject: 'T-shirt {size: "L"} / 蓝色',
    qr_code: "https://qr.alipay.com/bax0{1}",
  };
  if (trade.paidAt !== undefined) record.send_pay_date = beijingByIntl(trade.paidAt);
  return record;
}

const ALIPAY_ERRORS: Record<string, [string, string]> = {
  "ACQ.SYSTEM_ERROR": ["40004", "Business Failed"],
  "ACQ.INVALID_PARAMETER": ["40004", "Business Failed"],
  "isp.unknow-error": ["20000", "Service Currently Unavailable"],
  "isv.invalid-app-id": ["40002", "Invalid Arguments"],
};

/** Alipay's classic gateway (POST /gateway.do) and OpenAPI v3 (/v3/alipay/trade/query|close). */
export function alipayGateway(options: AlipayGatewayOptions): Promise<Gateway> {
  const state: Omit<Gateway, "url" | "close"> = {
    trades: new Map(),
    faults: [],
    errors: [],
    requests: [],
  };
  const signWith = (fault: Fault | undefined) =>
    fault === "wrongKey" ? options.otherPrivateKey : options.gatewayPrivateKey;

  /** Runs one business call: the record to answer, or an error [code, sub_code]. */
  const business = (
    method: string,
    outTradeNo: string,
  ): { ok: true; record: Record<string, unknown> } | { ok: false; subCode: string } => {
    const injected = state.errors.shift();
    if (injected) return { ok: false, subCode: injected };
    const trade = state.trades.get(outTradeNo);
    if (!trade) return { ok: false, subCode: "ACQ.TRADE_NOT_EXIST" };
    if (method === "alipay.trade.query")
      return { ok: true, record: alipayTradeRecord(outTradeNo, trade) };
    if (trade.state !== "WAIT_BUYER_PAY") return { ok: false, subCode: "ACQ.TRADE_STATUS_ERROR" };
    trade.state = "TRADE_CLOSED";
    return {
      ok: true,
      record: { code: "10000", msg: "Success", trade_no: trade.tradeNo, out_trade_no: outTradeNo },
    };
  };

  return serve(async (req, body, fault) => {
    const url = new URL(req.url ?? "/", "http://gateway");
    if (url.pathname === "/gateway.do") {
      const params: Record<string, string> = Object.fromEntries(url.searchParams);
      for (const [key, value] of new URLSearchParams(body)) params[key] = value;
      const content = Object.keys(params)
        .filter((key) => key !== "sign" && params[key] !== "")
        .sort()
        .map((key) => `${key}=${params[key]}`)
        .join("&");
      const verified = nodeVerify(options.merchantPublicKey, content, params.sign ?? "");
      state.requests.push({ path: url.pathname, verified, params });
      const method = params.method ?? "";
      const responseKey = `${method.replaceAll(".", "_")}_response`;
      let record: Record<string, unknown>;
      if (!verified) {
        record = {
          code: "40002",
          msg: "Invalid Arguments",
          sub_code: "isv.invalid-signature",
          sub_msg: "验签出错",
        };
      } else if (params.app_id !== options.appId) {
        record = {
          code: "40002",
          msg: "Invalid Arguments",
          sub_code: "isv.invalid-app-id",
          sub_msg: "无效的AppID参数",
        };
      } else {
        const bizContent = JSON.parse(params.biz_content ?? "{}") as { out_trade_no?: string };
        const result = business(method, bizContent.out_trade_no ?? "");
        if (result.ok) record = result.record;
        else {
          const [code, msg] = ALIPAY_ERRORS[result.subCode] ?? ["40004", "Business Failed"];
          record = {
            code,
            msg,
            sub_code: result.subCode,
            sub_msg: `${result.subCode} 说明 https://opendocs.alipay.com/`,
          };
        }
      }
      const inner = alipayJson(record);
      const sign = nodeSign(signWith(fault), inner);
      const shown = fault === "tamper" ? inner.replace('"code":"', '"code":"1') : inner;
      let text = `{"${responseKey}":${shown}`;
      if (fault !== "unsigned") text += `,"sign":"${sign}"`;
      if (options.certSn) text += `,"alipay_cert_sn":"${options.certSn}"`;
      text += "}";
      return { status: 200, headers: { "content-type": "text/html;charset=utf-8" }, body: text };
    }
    const match = /^\/v3\/alipay\/trade\/(query|close)$/.exec(url.pathname);
    if (!match || req.method !== "POST") return { status: 404, body: '{"code":"NOT_FOUND"}' };
    const authorization = req.headers.authorization ?? "";
    const auth =
      /^ALIPAY-SHA256withRSA (app_id=([^,]*),nonce=[^,]*,timestamp=(\d+)),sign=(.+)$/.exec(
        authorization,
      );
    const verified =
      auth !== null &&
      nodeVerify(
        options.merchantPublicKey,
        `${auth[1]}\nPOST\n${req.url}\n${body}\n`,
        auth[4] ?? "",
      );
    state.requests.push({
      path: url.pathname,
      verified,
      params: { authorization, body, appId: auth?.[2] ?? "", timestamp: auth?.[3] ?? "" },
    });
    let status = 200;
    let answer: Record<string, unknown>;
    if (!verified) {
      status = 401;
      answer = { code: "invalid-signature", message: "验签失败" };
    } else if (auth?.[2] !== options.appId) {
      status = 400;
      answer = { code: "isv.invalid-app-id", message: "无效的AppID参数" };
    } else {
      const method = match[1] === "query" ? "alipay.trade.query" : "alipay.trade.close";
      const { out_trade_no: outTradeNo = "" } = JSON.parse(body) as { out_trade_no?: string };
      const result = business(method, outTradeNo);
      if (result.ok) {
        const { code: _code, msg: _msg, ...rest } = result.record;
        answer = rest;
      } else {
        status = result.subCode === "ACQ.SYSTEM_ERROR" ? 500 : 400;
        answer = { code: result.subCode, message: `${result.subCode} 说明` };
      }
    }
    const text = alipayJson(answer);
    const headers: Record<string, string> = { "content-type": "application/json" };
    // Every answer signed, errors too (a verified error is what a configuration error needs);
    // "unsigned" drops it, as Alipay may for its 4xx.
    if (fault !== "unsigned") {
      const timestamp = String(Date.now() - (fault === "staleTimestamp" ? 301_000 : 0));
      const nonce = randomBytes(8).toString("hex");
      headers["alipay-timestamp"] = timestamp;
      headers["alipay-nonce"] = nonce;
      headers["alipay-signature"] = nodeSign(signWith(fault), `${timestamp}\n${nonce}\n${text}\n`);
    }
    return { status, headers, body: fault === "tamper" ? text.replace("{", '{"x":1,') : text };
  }, state);
}

export type WechatGatewayOptions = {
  mchid: string;
  merchantSerial: string;
  merchantPublicKey: string;
  /** Signs answers: the WeChat Pay public key's private half, or a platform certificate's key. */
  signingKey: string;
  /** The Wechatpay-Serial to send: PUB_KEY_ID_… or the certificate's serial. */
  signingSerial: string;
  otherPrivateKey: string;
};

/** WeChat Pay v3: GET /v3/pay/transactions/out-trade-no/{no}?mchid= and POST …/{no}/close. */
export function wechatGateway(options: WechatGatewayOptions): Promise<Gateway> {
  const state: Omit<Gateway, "url" | "close"> = {
    trades: new Map(),
    faults: [],
    errors: [],
    requests: [],
  };
  return serve(async (req, body, fault) => {
    const url = new URL(req.url ?? "/", "http://gateway");
    const authorization = req.headers.authorization ?? "";
    const fields: Record<string, string> = {};
    if (authorization.startsWith("WECHATPAY2-SHA256-RSA2048 ")) {
      for (const m of authorization.slice(26).matchAll(/(\w+)="([^"]*)"/g))
        fields[m[1] ?? ""] = m[2] ?? "";
    }
    const message = `${req.method}\n${req.url}\n${fields.timestamp}\n${fields.nonce_str}\n${body}\n`;
    const verified =
      fields.serial_no === options.merchantSerial &&
      fields.mchid === options.mchid &&
      nodeVerify(options.merchantPublicKey, message, fields.signature ?? "");
    state.requests.push({
      path: url.pathname,
      verified,
      params: { ...fields, "user-agent": req.headers["user-agent"] ?? "", query: url.search },
    });
    let status = 200;
    let answer: Record<string, unknown> | undefined;
    const match = /^\/v3\/pay\/transactions\/out-trade-no\/([^/]+)(\/close)?$/.exec(url.pathname);
    const injected = state.errors.shift();
    if (!verified) {
      status = 401;
      answer = { code: "SIGN_ERROR", message: "签名错误" };
    } else if (!match) {
      status = 404;
      answer = { code: "NOT_FOUND", message: "no such path" };
    } else if (injected) {
      status = injected === "SYSTEM_ERROR" ? 500 : 400;
      answer = { code: injected, message: `${injected} 说明` };
    } else {
      const outTradeNo = decodeURIComponent(match[1] ?? "");
      const trade = state.trades.get(outTradeNo);
      if (!trade) {
        status = 404;
        answer = { code: "ORDER_NOT_EXIST", message: "订单不存在" };
      } else if (match[2]) {
        const sent = JSON.parse(body) as { mchid?: string };
        if (sent.mchid !== options.mchid) {
          status = 400;
          answer = { code: "PARAM_ERROR", message: "mchid mismatch" };
        } else if (trade.state === "SUCCESS" || trade.state === "REFUND") {
          status = 400;
          answer = { code: "ORDERPAID", message: "订单已支付" };
        } else {
          trade.state = "CLOSED";
          status = 204;
        }
      } else if (url.searchParams.get("mchid") !== options.mchid) {
        status = 400;
        answer = { code: "PARAM_ERROR", message: "mchid mismatch" };
      } else {
        answer = {
          appid: "wxd678efh567hg6787",
          mchid: options.mchid,
          out_trade_no: outTradeNo,
          transaction_id: trade.tradeNo,
          trade_type: "NATIVE",
          trade_state: trade.state,
          trade_state_desc: "状态说明",
          amount: {
            total: trade.totalFen,
            payer_total: trade.totalFen,
            currency: "CNY",
            payer_currency: "CNY",
          },
        };
        if (trade.paidAt !== undefined) {
          answer.success_time = `${beijingByIntl(trade.paidAt).replace(" ", "T")}+08:00`;
        }
      }
    }
    const text = answer === undefined ? "" : JSON.stringify(answer);
    const headers: Record<string, string> = { "request-id": randomBytes(8).toString("hex") };
    if (text) headers["content-type"] = "application/json";
    if (fault !== "unsigned") {
      const seconds = Math.floor(Date.now() / 1000) - (fault === "staleTimestamp" ? 301 : 0);
      const nonce = randomBytes(16).toString("hex");
      const key = fault === "wrongKey" ? options.otherPrivateKey : options.signingKey;
      headers["wechatpay-serial"] =
        fault === "wrongSerial" ? "PUB_KEY_ID_0000000000000000" : options.signingSerial;
      headers["wechatpay-timestamp"] = String(seconds);
      headers["wechatpay-nonce"] = nonce;
      headers["wechatpay-signature"] = nodeSign(key, `${seconds}\n${nonce}\n${text}\n`);
    }
    return { status, headers, body: fault === "tamper" ? `${text} ` : text };
  }, state);
}

/**
 * Starts a watch on an in-process app: `POST /v1/payments` as `token` with `watch` as its body,
 * and `executionCtx` when the test collects the request's background work (none: as on Node).
 */
export function postWatch(
  app: Service["app"],
  token: string,
  watch: Record<string, unknown>,
  executionCtx?: Parameters<Service["app"]["request"]>[3],
): Promise<Response> {
  return Promise.resolve(
    app.request(
      "/v1/payments",
      {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(watch),
      },
      undefined,
      executionCtx,
    ),
  );
}
