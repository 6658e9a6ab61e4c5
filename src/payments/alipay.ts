// Alipay trade query and close, classic gateway (gateway.do) or OpenAPI v3, with RSA2 signing and
// verification on WebCrypto; and the check of Alipay's asynchronous (form POST) notifications.

import type { AlipayAccount } from "./accounts";
import { type CryptoKey, importKeyCached, signRsaSha256, verifyRsaSha256 } from "./crypto";
import {
  type CloseAnswer,
  clip,
  type Fetched,
  fetchText,
  type NotificationResult,
  PaymentsError,
  type Provider,
  type ProviderAnswer,
  type ProviderOptions,
  parseJson,
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

type Method = "alipay.trade.query" | "alipay.trade.close";

type Keys = { privateKey: CryptoKey; alipayPublicKey: CryptoKey };

async function loadKeys(account: AlipayAccount): Promise<Keys | { reason: string }> {
  try {
    return {
      privateKey: await importKeyCached("private", account.privateKey),
      alipayPublicKey: await importKeyCached("public", account.alipayPublicKey),
    };
  } catch (error) {
    const message = error instanceof PaymentsError ? error.message : "bad key";
    return { reason: `account "${account.name}": ${message}` };
  }
}

const pad = (n: number) => String(n).padStart(2, "0");

/** `yyyy-MM-dd HH:mm:ss` in Beijing time (UTC+8, no DST) for unix ms, whatever the host's zone. */
export function beijingTimestamp(ms: number): string {
  const d = new Date(ms + 8 * 3_600_000);
  return (
    `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`
  );
}

/** Unix ms of a Beijing `yyyy-MM-dd HH:mm:ss`, or undefined. */
export function parseBeijingTime(text: unknown): number | undefined {
  if (typeof text !== "string") return undefined;
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return Date.UTC(y, mo - 1, d, h, mi, s) - 8 * 3_600_000;
}

/** The signing string: every non-empty param except `sign`, sorted by key, `k=v` joined by `&`. */
export function alipaySignContent(
  params: Record<string, string>,
  omit: string[] = ["sign"],
): string {
  return Object.keys(params)
    .filter((key) => !omit.includes(key) && params[key] !== undefined && params[key] !== "")
    .sort()
    .map((key) => `${key}=${params[key]}`)
    .join("&");
}

const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);

function skipWhitespace(text: string, at: number): number {
  while (at < text.length && WHITESPACE.has(text[at] as string)) at++;
  return at;
}

/** The index after the string literal opening at `at`. */
function endOfString(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === '"') return i + 1;
  }
  return -1;
}

/** The index after the JSON value starting at `at` (string-aware, so braces in text don't count). */
function endOfValue(text: string, at: number): number {
  const first = text[at];
  if (first === '"') return endOfString(text, at);
  if (first === "{" || first === "[") {
    let depth = 0;
    for (let i = at; i < text.length; ) {
      const c = text[i];
      if (c === '"') {
        i = endOfString(text, i);
        if (i < 0) return -1;
        continue;
      }
      if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    return -1;
  }
  let i = at;
  while (i < text.length && !",}] \t\n\r".includes(text[i] as string)) i++;
  return i;
}

/**
 * The raw text of every value of top-level member `key` in a JSON object text, exactly as received
 * (`\/` escapes and spacing kept): Alipay signs those bytes, so they must never be re-serialised.
 * Expects text that JSON.parse accepted.
 */
export function rawMembers(text: string, key: string): string[] {
  const found: string[] = [];
  let at = skipWhitespace(text, 0);
  if (text[at] !== "{") return found;
  at++;
  for (;;) {
    at = skipWhitespace(text, at);
    if (text[at] !== '"') return found;
    const keyEnd = endOfString(text, at);
    if (keyEnd < 0) return found;
    const name = parseJson(text.slice(at, keyEnd));
    at = skipWhitespace(text, keyEnd);
    if (text[at] !== ":") return found;
    at = skipWhitespace(text, at + 1);
    const valueEnd = endOfValue(text, at);
    if (valueEnd < 0) return found;
    if (name === key) found.push(text.slice(at, valueEnd));
    at = skipWhitespace(text, valueEnd);
    if (text[at] !== ",") return found;
    at++;
  }
}

/** The answer for a successful trade record (classic response object, v3 body, or notification). */
function tradeAnswer(record: Record<string, unknown>, paidAtField: string): ProviderAnswer {
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

function describeError(code: string, subCode?: string, message?: string): string {
  return clip([code, subCode].filter(Boolean).join(" ") + (message ? `: ${message}` : ""));
}

/** Query: an error code (v3 `code`, classic `sub_code`) → answer. */
function queryError(code: string, reason: string, retryable: boolean): ProviderAnswer {
  if (code === TRADE_NOT_EXIST) return { kind: "trade", outcome: "pending", tradeState: code };
  if (retryable || code === SYSTEM_ERROR) return { kind: "transient", reason };
  return { kind: "config", reason };
}

/** Close: an error code → answer. */
function closeError(code: string, reason: string, retryable: boolean): CloseAnswer {
  if (code === TRADE_NOT_EXIST) return { kind: "notFound" };
  if (CLOSE_REFUSED.has(code)) return { kind: "refused", reason };
  if (retryable || code === SYSTEM_ERROR) return { kind: "transient", reason };
  return { kind: "config", reason };
}

function mismatch(record: Record<string, unknown>, outTradeNo: string): boolean {
  const named = stringField(record, "out_trade_no");
  return named !== undefined && named !== outTradeNo;
}

// ---- classic gateway ---------------------------------------------------------------------------

type ClassicResult =
  | { ok: true; response: Record<string, unknown> }
  | { ok: false; answer: { kind: "transient" | "config"; reason: string } };

async function classicCall(
  account: AlipayAccount,
  method: Method,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<ClassicResult> {
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, answer: { kind: "config", reason: keys.reason } };
  const now = (options.clock ?? Date.now)();
  const bizContent = JSON.stringify({ out_trade_no: outTradeNo });
  const params: Record<string, string> = {
    app_id: account.appId,
    method,
    charset: "utf-8",
    sign_type: "RSA2",
    timestamp: beijingTimestamp(now),
    version: "1.0",
    biz_content: bizContent,
  };
  const sign = await signRsaSha256(keys.privateKey, alipaySignContent(params));
  const url = new URL(`${account.baseUrl}/gateway.do`);
  for (const [key, value] of Object.entries(params)) {
    if (key !== "biz_content") url.searchParams.set(key, value);
  }
  url.searchParams.set("sign", sign);
  const fetched = await fetchText(
    url.href,
    {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded;charset=utf-8",
        accept: "application/json",
      },
      body: new URLSearchParams({ biz_content: bizContent }).toString(),
    },
    options,
  );
  return readClassic(fetched, method, keys.alipayPublicKey);
}

async function readClassic(
  fetched: Fetched,
  method: Method,
  publicKey: CryptoKey,
): Promise<ClassicResult> {
  const transient = (reason: string): ClassicResult => ({
    ok: false,
    answer: { kind: "transient", reason },
  });
  if (!fetched.ok) return transient(fetched.reason);
  if (fetched.status !== 200) return transient(`HTTP ${fetched.status}`);
  const body = parseJson(fetched.text);
  if (typeof body !== "object" || body === null) return transient("answer is not JSON");
  const responseKey = `${method.replaceAll(".", "_")}_response`;
  let raws = rawMembers(fetched.text, responseKey);
  if (raws.length === 0) raws = rawMembers(fetched.text, "error_response");
  const raw = raws[0];
  if (raw === undefined || raws.length > 1) return transient(`answer without one ${responseKey}`);
  const response = parseJson(raw);
  if (typeof response !== "object" || response === null)
    return transient("unreadable response object");
  const record = response as Record<string, unknown>;
  const code = String(record.code ?? "");
  const what = describeError(
    code,
    stringField(record, "sub_code"),
    stringField(record, "sub_msg") ?? stringField(record, "msg"),
  );
  const sign = stringField(body, "sign");
  // An answer we cannot verify says nothing about the trade, whatever its code: retry.
  if (!sign) return transient(`unsigned answer (${what})`);
  if (!(await verifyRsaSha256(publicKey, raw, sign))) {
    return transient(`answer signature does not verify (${what})`);
  }
  return { ok: true, response: record };
}

function classicCode(record: Record<string, unknown>): {
  code: string;
  subCode: string;
  reason: string;
} {
  const code = String(record.code ?? "");
  const subCode = stringField(record, "sub_code") ?? "";
  const message = stringField(record, "sub_msg") ?? stringField(record, "msg");
  return { code, subCode, reason: describeError(code, subCode, message) };
}

async function classicQuery(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<ProviderAnswer> {
  const result = await classicCall(account, "alipay.trade.query", outTradeNo, options);
  if (!result.ok) return result.answer;
  const record = result.response;
  const { code, subCode, reason } = classicCode(record);
  if (code === "10000") {
    if (mismatch(record, outTradeNo))
      return { kind: "transient", reason: "answer names another order" };
    return tradeAnswer(record, "send_pay_date");
  }
  if (code === "40004") return queryError(subCode, reason, false);
  // 20000 is Alipay's "service unavailable" (isp.unknow-error, aop.unknow-error); 4000x are ours.
  return queryError(subCode, reason, !code.startsWith("4") && code !== "20001");
}

async function classicClose(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<CloseAnswer> {
  const result = await classicCall(account, "alipay.trade.close", outTradeNo, options);
  if (!result.ok) return result.answer;
  const { code, subCode, reason } = classicCode(result.response);
  if (code === "10000") return { kind: "closed" };
  if (code === "40004") return closeError(subCode, reason, false);
  return closeError(subCode, reason, !code.startsWith("4") && code !== "20001");
}

// ---- OpenAPI v3 --------------------------------------------------------------------------------

type V3Result =
  | { ok: true; status: number; body: Record<string, unknown> }
  | { ok: false; answer: { kind: "transient" | "config"; reason: string } };

async function v3Call(
  account: AlipayAccount,
  action: "query" | "close",
  outTradeNo: string,
  options: ProviderOptions,
): Promise<V3Result> {
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, answer: { kind: "config", reason: keys.reason } };
  const now = (options.clock ?? Date.now)();
  const body = JSON.stringify({ out_trade_no: outTradeNo });
  const url = new URL(`${account.baseUrl}/v3/alipay/trade/${action}`);
  const authString = `app_id=${account.appId},nonce=${crypto.randomUUID()},timestamp=${now}`;
  const content = `${authString}\nPOST\n${url.pathname}${url.search}\n${body}\n`;
  const sign = await signRsaSha256(keys.privateKey, content);
  const fetched = await fetchText(
    url.href,
    {
      method: "POST",
      headers: {
        authorization: `ALIPAY-SHA256withRSA ${authString},sign=${sign}`,
        "content-type": "application/json",
        accept: "application/json",
        "alipay-request-id": crypto.randomUUID().replaceAll("-", ""),
      },
      body,
    },
    options,
  );
  const transient = (reason: string): V3Result => ({
    ok: false,
    answer: { kind: "transient", reason },
  });
  if (!fetched.ok) return transient(fetched.reason);
  const { status, headers, text } = fetched;
  if (status >= 500 || status === 429) {
    const code = stringField(parseJson(text), "code");
    return transient(`HTTP ${status}${code ? ` ${code}` : ""}`);
  }
  const signature = headers.get("alipay-signature");
  // Alipay signs its 2xx answers; its 4xx errors come unsigned, and are checked when signed.
  if (signature || (status >= 200 && status < 300)) {
    const timestamp = headers.get("alipay-timestamp");
    const nonce = headers.get("alipay-nonce");
    if (!signature || !timestamp || !nonce) return transient(`unsigned answer (HTTP ${status})`);
    const signed = `${timestamp}\n${nonce}\n${text}\n`;
    if (!(await verifyRsaSha256(keys.alipayPublicKey, signed, signature))) {
      return transient(`answer signature does not verify (HTTP ${status})`);
    }
  }
  const parsed = parseJson(text);
  if (status >= 200 && status < 300 && text === "") return { ok: true, status, body: {} };
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return transient(`HTTP ${status} answer is not a JSON object`);
  }
  return { ok: true, status, body: parsed as Record<string, unknown> };
}

function v3Error(
  body: Record<string, unknown>,
  status: number,
): { code: string; reason: string; retryable: boolean } {
  const code = stringField(body, "code") ?? `HTTP ${status}`;
  return {
    code,
    reason: describeError(code, undefined, stringField(body, "message")),
    retryable: status === 408,
  };
}

async function v3Query(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<ProviderAnswer> {
  const result = await v3Call(account, "query", outTradeNo, options);
  if (!result.ok) return result.answer;
  const { status, body } = result;
  if (status >= 200 && status < 300) {
    if (mismatch(body, outTradeNo))
      return { kind: "transient", reason: "answer names another order" };
    return tradeAnswer(body, "send_pay_date");
  }
  const { code, reason, retryable } = v3Error(body, status);
  return queryError(code, reason, retryable);
}

async function v3Close(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<CloseAnswer> {
  const result = await v3Call(account, "close", outTradeNo, options);
  if (!result.ok) return result.answer;
  const { status, body } = result;
  if (status >= 200 && status < 300) return { kind: "closed" };
  const { code, reason, retryable } = v3Error(body, status);
  return closeError(code, reason, retryable);
}

// ---- public API --------------------------------------------------------------------------------

/** Queries and closes trades of one Alipay account, on the classic gateway or v3 per `account.api`. */
export function alipayProvider(account: AlipayAccount, options: ProviderOptions = {}): Provider {
  if (account.api === "v3") {
    return {
      query: (outTradeNo) => v3Query(account, outTradeNo, options),
      close: (outTradeNo) => v3Close(account, outTradeNo, options),
    };
  }
  return {
    query: (outTradeNo) => classicQuery(account, outTradeNo, options),
    close: (outTradeNo) => classicClose(account, outTradeNo, options),
  };
}

/**
 * Checks an Alipay asynchronous notification (the form it POSTs) with the account's Alipay public
 * key: every field but `sign` and `sign_type`, sorted, `k=v` joined by `&`. Like the official SDK
 * it also accepts the older content that keeps `sign_type`. On success the trade's answer.
 */
export async function verifyAlipayNotification(
  account: AlipayAccount,
  form: URLSearchParams | Record<string, string>,
): Promise<NotificationResult> {
  const fields: Record<string, string> = {};
  const entries = form instanceof URLSearchParams ? [...form.entries()] : Object.entries(form);
  for (const [key, value] of entries) {
    if (typeof value !== "string")
      return { ok: false, reason: `field ${clip(key, 40)} is not text` };
    if (Object.hasOwn(fields, key))
      return { ok: false, reason: `field ${clip(key, 40)} appears twice` };
    fields[key] = value;
  }
  const sign = fields.sign;
  if (!sign) return { ok: false, reason: "no sign field" };
  if (fields.sign_type !== undefined && fields.sign_type !== "RSA2") {
    return { ok: false, reason: "sign_type is not RSA2" };
  }
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, reason: keys.reason };
  const candidates = [alipaySignContent(fields, ["sign", "sign_type"])];
  if (fields.sign_type !== undefined) candidates.push(alipaySignContent(fields, ["sign"]));
  let verified = false;
  for (const content of candidates) {
    if (await verifyRsaSha256(keys.alipayPublicKey, content, sign)) {
      verified = true;
      break;
    }
  }
  if (!verified) return { ok: false, reason: "signature does not verify" };
  if (fields.app_id !== undefined && fields.app_id !== account.appId) {
    return { ok: false, reason: "app_id is not this account's" };
  }
  const outTradeNo = fields.out_trade_no;
  if (!outTradeNo) return { ok: false, reason: "no out_trade_no" };
  const answer = tradeAnswer(fields, "gmt_payment");
  if (answer.kind !== "trade")
    return { ok: false, reason: answer.kind === "transient" ? answer.reason : "unreadable" };
  return { ok: true, outTradeNo, answer };
}
