// WeChat Pay API v3 order query and close, SHA256withRSA signing and answer verification (public-key
// or platform-certificate mode) on WebCrypto; and the check and decryption of its notifications.

import type { WechatPayAccount } from "./accounts";
import {
  aesGcmDecrypt,
  type CryptoKey,
  importKeyCached,
  randomNonce,
  signRsaSha256,
  verifyRsaSha256,
} from "./crypto";
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
  staleness,
  stringField,
  type TradeOutcome,
} from "./provider";
import { type CertificateDownload, platformCertificateKey } from "./wechatpay-certificates";

/** WeChat Pay's trade_state words and what the poller makes of them. */
export const WECHATPAY_TRADE_STATES: Readonly<Record<string, TradeOutcome>> = {
  SUCCESS: "paid",
  REFUND: "paid",
  NOTPAY: "pending",
  USERPAYING: "pending",
  CLOSED: "closed",
  REVOKED: "closed",
  PAYERROR: "failed",
};

const ORDER_NOT_EXIST = "ORDER_NOT_EXIST";
/** Close refused because of the order's state: query again, it may be paid. */
const CLOSE_REFUSED = new Set([
  "ORDERPAID",
  "ORDER_PAID",
  "ORDERCLOSED",
  "ORDER_CLOSED",
  "ORDERREVERSED",
  "TRADE_ERROR",
  "USERPAYING",
]);
/** Error codes that say "WeChat is busy", whatever the HTTP status. */
export const RETRYABLE = new Set(["SYSTEM_ERROR", "SYSTEMERROR", "FREQUENCY_LIMITED", "BANKERROR"]);
const PROBE_PREFIX = "WECHATPAY/SIGNTEST/";

/** Platform certificates' keys are kept apart, with those fetched: wechatpay-certificates.ts. */
type Keys = {
  privateKey: CryptoKey;
  /** The WeChat Pay public key by its ID (PUB_KEY_ID_…). */
  publicKeys: Map<string, CryptoKey>;
};
async function importKeys(account: WechatPayAccount): Promise<Keys> {
  const keys: Keys = {
    privateKey: await importKeyCached("private", account.privateKey),
    publicKeys: new Map(),
  };
  if (account.platformPublicKey && account.platformPublicKeyId) {
    const key = await importKeyCached("public", account.platformPublicKey);
    keys.publicKeys.set(account.platformPublicKeyId, key);
  }
  return keys;
}

async function loadKeys(account: WechatPayAccount): Promise<Keys | { reason: string }> {
  try {
    return await importKeys(account);
  } catch (error) {
    const message = error instanceof PaymentsError ? error.message : "bad key";
    return { reason: `account "${account.name}": ${message}` };
  }
}

/** The key a Wechatpay-Serial names, or why there is none. */
type KeyLookup = (serial: string) => Promise<CryptoKey | { reason: string }>;

/**
 * The key that Wechatpay-Serial names: the public key's ID, or a platform certificate's serial
 * (fetching the account's certificates when it is unknown, at most once a minute).
 */
function keyLookup(
  account: WechatPayAccount,
  keys: Keys,
  options: ProviderOptions,
  now: number,
): KeyLookup {
  const download: CertificateDownload = {
    fetch: () => signedFetch(account, keys.privateKey, "GET", "/v3/certificates", "", options),
    verify: (headers, body, keyOf) =>
      verifyHeaders(
        async (serial) =>
          keyOf(serial) ?? { reason: `unknown Wechatpay-Serial ${clip(serial, 64)}` },
        headers,
        body,
        now,
      ),
  };
  return async (serial) =>
    keys.publicKeys.get(serial) ?? platformCertificateKey(account, serial, now, download);
}

/**
 * Why an answer or notification is not to be trusted ("unverified: …", "stale: …"), or undefined
 * when it is: `<Wechatpay-Timestamp>\n<Wechatpay-Nonce>\n<body>\n` against Wechatpay-Signature,
 * with the key that Wechatpay-Serial names, and the timestamp within ANSWER_CLOCK_SKEW_MS (5 min)
 * of `now` (ms).
 */
async function verifyHeaders(
  lookup: KeyLookup,
  headers: Headers,
  body: string,
  now: number,
): Promise<string | undefined> {
  const serial = headers.get("wechatpay-serial");
  const signature = headers.get("wechatpay-signature");
  const timestamp = headers.get("wechatpay-timestamp");
  const nonce = headers.get("wechatpay-nonce");
  if (!serial || !signature || !timestamp || !nonce)
    return "unverified: unsigned (Wechatpay-* headers missing)";
  if (signature.startsWith(PROBE_PREFIX))
    return "unverified: signature probe (WECHATPAY/SIGNTEST/)";
  if (!/^\d{1,12}$/.test(timestamp)) return "unverified: malformed Wechatpay-Timestamp";
  const key = await lookup(serial);
  if ("reason" in key) return `unverified: ${key.reason}`;
  if (!(await verifyRsaSha256(key, `${timestamp}\n${nonce}\n${body}\n`, signature))) {
    return "unverified: signature does not verify";
  }
  // Checked once verified: a timestamp only means something once it is known to be WeChat's.
  return staleness("Wechatpay-Timestamp", Number(timestamp) * 1000, now);
}

/** The answer for a transaction record (query body or decrypted notification resource). */
function tradeAnswer(record: Record<string, unknown>): ProviderAnswer {
  const tradeState = stringField(record, "trade_state");
  if (!tradeState) return { kind: "transient", reason: "answer without trade_state" };
  const outcome = WECHATPAY_TRADE_STATES[tradeState] ?? "pending";
  const answer: ProviderAnswer & { kind: "trade" } = { kind: "trade", outcome, tradeState };
  const tradeNo = stringField(record, "transaction_id");
  if (tradeNo) answer.tradeNo = tradeNo;
  const amount = record.amount as Record<string, unknown> | undefined;
  const total = amount?.total;
  if (typeof total === "number" && Number.isSafeInteger(total) && total >= 0) {
    answer.amount = { total, currency: stringField(amount, "currency") ?? "CNY" };
  } else if (outcome === "paid") {
    // A paid outcome is final and carries the amount; one we cannot read is retried instead.
    return { kind: "transient", reason: `${tradeState} answer without a readable amount.total` };
  }
  const successTime = stringField(record, "success_time");
  const paidAt = successTime ? Date.parse(successTime) : Number.NaN;
  if (outcome === "paid" && Number.isFinite(paidAt)) answer.paidAt = paidAt;
  return answer;
}

export type Call =
  | { ok: true; status: number; text: string }
  | { ok: false; answer: { kind: "transient" | "config"; reason: string } };

/** A request signed with the merchant's key (WECHATPAY2-SHA256-RSA2048), its answer read whole. */
async function signedFetch(
  account: WechatPayAccount,
  privateKey: CryptoKey,
  method: "GET" | "POST",
  path: string,
  body: string,
  options: ProviderOptions,
): Promise<Fetched> {
  const clock = options.clock ?? Date.now;
  const url = new URL(`${account.baseUrl}${path}`);
  const timestamp = Math.floor(clock() / 1000);
  const nonce = randomNonce();
  const message = `${method}\n${url.pathname}${url.search}\n${timestamp}\n${nonce}\n${body}\n`;
  const signature = await signRsaSha256(privateKey, message);
  const headers: Record<string, string> = {
    authorization:
      `WECHATPAY2-SHA256-RSA2048 mchid="${account.mchid}",nonce_str="${nonce}",` +
      `signature="${signature}",timestamp="${timestamp}",serial_no="${account.serialNo}"`,
    accept: "application/json",
    // WeChat Pay refuses requests without a User-Agent.
    "user-agent": "delayq-payments/1",
  };
  // In public-key mode this asks WeChat Pay to sign its answer with that key.
  if (account.platformPublicKeyId) headers["wechatpay-serial"] = account.platformPublicKeyId;
  if (method === "POST") headers["content-type"] = "application/json";
  return fetchText(
    url.href,
    { method, headers, body: method === "POST" ? body : undefined },
    options,
  );
}

/**
 * A signed request and its answer, verified: an answer that is not WeChat Pay's own (or is stale)
 * is transient, as are 5xx and 429; a key that does not import is a configuration error.
 */
export async function call(
  account: WechatPayAccount,
  method: "GET" | "POST",
  path: string,
  body: string,
  options: ProviderOptions,
): Promise<Call> {
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, answer: { kind: "config", reason: keys.reason } };
  const clock = options.clock ?? Date.now;
  const fetched = await signedFetch(account, keys.privateKey, method, path, body, options);
  const transient = (reason: string): Call => ({
    ok: false,
    answer: { kind: "transient", reason },
  });
  if (!fetched.ok) return transient(fetched.reason);
  const { status, text } = fetched;
  if (status >= 500 || status === 429) {
    const code = stringField(parseJson(text), "code");
    return transient(`HTTP ${status}${code ? ` ${code}` : ""}`);
  }
  // Every other answer, errors and 204 included, must be WeChat Pay's own before we act on it.
  const now = clock();
  const problem = await verifyHeaders(
    keyLookup(account, keys, options, now),
    fetched.headers,
    text,
    now,
  );
  if (problem) return transient(`${problem} (HTTP ${status})`);
  return { ok: true, status, text };
}

export function errorOf(text: string, status: number): { code: string; reason: string } {
  const body = parseJson(text);
  const code = stringField(body, "code") ?? `HTTP ${status}`;
  const message = stringField(body, "message");
  return { code, reason: clip(message ? `${code}: ${message}` : code) };
}

function path(outTradeNo: string): string {
  return `/v3/pay/transactions/out-trade-no/${encodeURIComponent(outTradeNo)}`;
}

async function query(
  account: WechatPayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<ProviderAnswer> {
  const result = await call(
    account,
    "GET",
    `${path(outTradeNo)}?mchid=${encodeURIComponent(account.mchid)}`,
    "",
    options,
  );
  if (!result.ok) return result.answer;
  const { status, text } = result;
  if (status === 200) {
    const body = parseJson(text);
    if (typeof body !== "object" || body === null) {
      return { kind: "transient", reason: "answer is not JSON" };
    }
    const record = body as Record<string, unknown>;
    const named = stringField(record, "out_trade_no");
    const mchid = stringField(record, "mchid");
    if ((named && named !== outTradeNo) || (mchid && mchid !== account.mchid)) {
      return { kind: "transient", reason: "answer names another order" };
    }
    return tradeAnswer(record);
  }
  const { code, reason } = errorOf(text, status);
  if (code === ORDER_NOT_EXIST) return { kind: "notFound", tradeState: code };
  if (RETRYABLE.has(code) || status < 400) return { kind: "transient", reason };
  return { kind: "config", reason };
}

async function close(
  account: WechatPayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<CloseAnswer> {
  const body = JSON.stringify({ mchid: account.mchid });
  const result = await call(account, "POST", `${path(outTradeNo)}/close`, body, options);
  if (!result.ok) return result.answer;
  const { status, text } = result;
  if (status === 204 || status === 200) return { kind: "closed" };
  const { code, reason } = errorOf(text, status);
  if (code === ORDER_NOT_EXIST) return { kind: "notFound" };
  if (CLOSE_REFUSED.has(code)) return { kind: "refused", reason };
  if (RETRYABLE.has(code) || status < 400) return { kind: "transient", reason };
  return { kind: "config", reason };
}

/** Queries and closes orders of one WeChat Pay merchant (API v3). */
export function wechatPayProvider(
  account: WechatPayAccount,
  options: ProviderOptions = {},
): Provider {
  return {
    query: (outTradeNo) => query(account, outTradeNo, options),
    close: (outTradeNo) => close(account, outTradeNo, options),
  };
}

/** A verified, decrypted WeChat Pay notification: its event type, id and plaintext resource. */
export type OpenedNotification =
  | { ok: true; eventType: string; notifyId?: string; record: Record<string, unknown> }
  | { ok: false; reason: string };

/**
 * Checks a WeChat Pay notification (a transaction's or a refund's): its Wechatpay-* headers over
 * the raw body (a `WECHATPAY/SIGNTEST/` probe fails; the timestamp within 5 minutes of `now`, unix
 * ms), then decrypts `resource` with the APIv3 key (AES-256-GCM); its mchid must be the
 * account's. On success the event's type and id, and the resource.
 */
export async function openWechatPayNotification(
  account: WechatPayAccount,
  headers: Headers,
  rawBody: string,
  now: number,
  options: ProviderOptions = {},
): Promise<OpenedNotification> {
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, reason: keys.reason };
  const problem = await verifyHeaders(
    keyLookup(account, keys, options, now),
    headers,
    rawBody,
    now,
  );
  if (problem) return { ok: false, reason: problem };
  const event = parseJson(rawBody) as { resource?: unknown } | undefined;
  const resource = event?.resource;
  const ciphertext = stringField(resource, "ciphertext");
  const nonce = stringField(resource, "nonce");
  if (!ciphertext || !nonce) return { ok: false, reason: "no encrypted resource" };
  const algorithm = stringField(resource, "algorithm");
  if (algorithm !== "AEAD_AES_256_GCM")
    return { ok: false, reason: "resource algorithm is not AEAD_AES_256_GCM" };
  let plain: string;
  try {
    plain = await aesGcmDecrypt(
      account.apiV3Key,
      nonce,
      stringField(resource, "associated_data") ?? "",
      ciphertext,
    );
  } catch (error) {
    return {
      ok: false,
      reason: error instanceof Error ? error.message : "resource did not decrypt",
    };
  }
  const record = parseJson(plain);
  if (typeof record !== "object" || record === null)
    return { ok: false, reason: "resource is not JSON" };
  const mchid = stringField(record, "mchid");
  if (mchid && mchid !== account.mchid) return { ok: false, reason: "mchid is not this account's" };
  // The event's id, signed with the body: WeChat Pay's resends of one event keep it.
  const notifyId = stringField(event, "id");
  const eventType = stringField(event, "event_type") ?? "";
  return {
    ok: true,
    eventType,
    record: record as Record<string, unknown>,
    ...(notifyId ? { notifyId } : {}),
  };
}

/** A transaction notification's answer, from its opened resource. */
export function transactionNotification(
  opened: OpenedNotification & { ok: true },
): NotificationResult {
  const transaction = opened.record;
  const outTradeNo = stringField(transaction, "out_trade_no");
  if (!outTradeNo) return { ok: false, reason: "resource without out_trade_no" };
  const answer = tradeAnswer(transaction);
  if (answer.kind !== "trade")
    return { ok: false, reason: answer.kind === "transient" ? answer.reason : "unreadable" };
  const { notifyId } = opened;
  return { ok: true, outTradeNo, answer, ...(notifyId ? { notifyId } : {}) };
}

/**
 * Checks a WeChat Pay notification of a transaction (openWechatPayNotification), and answers the
 * transaction's answer and the event's id.
 */
export async function verifyWechatPayNotification(
  account: WechatPayAccount,
  headers: Headers,
  rawBody: string,
  now: number,
  options: ProviderOptions = {},
): Promise<NotificationResult> {
  const opened = await openWechatPayNotification(account, headers, rawBody, now, options);
  return opened.ok ? transactionNotification(opened) : opened;
}
