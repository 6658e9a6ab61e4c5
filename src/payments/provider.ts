// Shared shapes of the payment providers (Alipay, WeChat Pay) and the helpers both use on the wire.
import { withoutAddresses } from "../domain/errors";

/** What a verified answer says about the trade, in the poller's terms. */
export type TradeOutcome = "pending" | "paid" | "closed" | "failed";

/** An amount in the smallest unit (fen for CNY). */
export type Amount = { total: number; currency: string };

/**
 * One query's answer. Only `trade` and `notFound` come from verified answers; anything that
 * cannot be trusted (network, 5xx, bad signature, stale timestamp) is `transient`.
 */
export type ProviderAnswer =
  | {
      kind: "trade";
      outcome: TradeOutcome;
      /** The provider's own word, e.g. WAIT_BUYER_PAY, ACQ.TRADE_NOT_EXIST, NOTPAY. */
      tradeState: string;
      tradeNo?: string;
      amount?: Amount;
      /** Unix ms. */
      paidAt?: number;
    }
  /**
   * 5xx, timeout, ACQ.SYSTEM_ERROR, 429; or an answer not to be trusted, its reason saying which
   * rule decided ("unverified: …", "stale: …"): retry soon.
   */
  | { kind: "transient"; reason: string }
  /** The provider's message about our setup (bad key, app id, invalid parameter): stop as failed. */
  | { kind: "config"; reason: string }
  /** WeChat ORDER_NOT_EXIST: the caller applies a grace before giving up. */
  | { kind: "notFound"; tradeState: string };

/** A close's answer. `refused` means the trade's state forbids it: query again (it may be paid). */
export type CloseAnswer =
  | { kind: "closed" }
  | { kind: "refused"; reason: string }
  | { kind: "notFound" }
  | { kind: "transient"; reason: string }
  | { kind: "config"; reason: string };

export type Provider = {
  query(outTradeNo: string): Promise<ProviderAnswer>;
  close(outTradeNo: string): Promise<CloseAnswer>;
};

export type ProviderOptions = {
  /** The fetch to call the provider with. @default globalThis.fetch */
  fetch?: typeof fetch;
  /** Milliseconds one call may take, answer body included. @default 10000 */
  timeoutMs?: number;
  /** Now, unix ms: signs request timestamps and judges answer timestamps. @default Date.now */
  clock?: () => number;
};

/**
 * The result of checking a provider's asynchronous notification: the trade's answer and the
 * notification's own id (Alipay's notify_id, WeChat Pay's event id; resends keep it), or why it
 * is refused ("unverified: …", "stale: …", …).
 */
export type NotificationResult =
  | {
      ok: true;
      outTradeNo: string;
      answer: ProviderAnswer & { kind: "trade" };
      notifyId?: string;
    }
  | { ok: false; reason: string };

/**
 * PaymentsError's codes, each written here only. None reaches an HTTP answer: a bad accounts
 * variable stops the service with internal_error (service.ts: accountsOf), and a key or resource
 * that fails becomes the reason a poll or notification failed (its message, never the code). So
 * they are not ErrorCodes (domain/errors.ts); tests read them.
 */
export const PAYMENTS_ERROR_CODE = {
  /** DQ_ALIPAY_ACCOUNTS or DQ_WECHATPAY_ACCOUNTS: not JSON, not an object, or a bad account. */
  invalidAccounts: "invalid_accounts",
  /** A key or certificate does not parse or import. */
  invalidKey: "invalid_key",
  /** A WeChat Pay notification's resource does not decrypt (or the APIv3 key is not 32 bytes). */
  decryptFailed: "decrypt_failed",
} as const;

export type PaymentsErrorCode = (typeof PAYMENTS_ERROR_CODE)[keyof typeof PAYMENTS_ERROR_CODE];

/** An error with a stable code; its message never carries key material or bodies. */
export class PaymentsError extends Error {
  readonly code: PaymentsErrorCode;
  constructor(code: PaymentsErrorCode, message: string) {
    super(message);
    this.name = "PaymentsError";
    this.code = code;
  }
}

export const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * How far the signed time of a verified answer or notification (Wechatpay-Timestamp,
 * alipay-timestamp, a notification's notify_time ahead of now) may be from our clock: 5 minutes,
 * WeChat Pay's own rule, used for both providers. Further off, it may be a replay: transient.
 */
export const ANSWER_CLOCK_SKEW_MS = 5 * 60_000;

/**
 * Why a signed time is too far from `now` ("stale: alipay-timestamp 412 s off"), or undefined
 * when it is within ANSWER_CLOCK_SKEW_MS. `at` and `now` are unix ms.
 */
export function staleness(what: string, at: number, now: number): string | undefined {
  const off = Math.abs(at - now);
  if (off <= ANSWER_CLOCK_SKEW_MS) return undefined;
  return `stale: ${what} ${Math.round(off / 1000)} s off (more than ${ANSWER_CLOCK_SKEW_MS / 1000} s)`;
}

/**
 * The largest answer read from a provider: 1 MiB. A query's answer is a few KiB and a certificate
 * download a few more; past this the answer is transient (nothing decided), never read on.
 */
export const MAX_ANSWER_BYTES = 1024 * 1024;

/** A fetched answer, read whole, or why it could not be had. */
export type Fetched =
  | { ok: true; status: number; headers: Headers; text: string }
  | { ok: false; reason: string };

/** Calls `fetch` with a timeout covering the body too; network failures become a reason. */
export async function fetchText(
  url: string,
  init: RequestInit,
  options: ProviderOptions,
): Promise<Fetched> {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  try {
    const res = await doFetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const text = await cappedAnswer(res, MAX_ANSWER_BYTES);
    if (text === undefined) {
      return {
        ok: false,
        reason: `HTTP ${res.status} answer over ${MAX_ANSWER_BYTES} bytes, not read (the limit)`,
      };
    }
    return { ok: true, status: res.status, headers: res.headers, text };
  } catch (error) {
    const name = error instanceof Error ? error.name : "";
    if (name === "TimeoutError" || name === "AbortError") {
      return { ok: false, reason: `timeout after ${timeoutMs} ms` };
    }
    // The error's own message may quote the URL (the gateway, a proxy) and the order number:
    // the reason is shown in the watch, so addresses are left out, and it is kept short.
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, reason: `network error: ${clip(withoutAddresses(message))}` };
  }
}

/**
 * An answer's body as UTF-8 text, or undefined when it is over `maxBytes`: refused from its
 * Content-Length before anything is read, else once the stream passes the limit (cancelled, so
 * that the connection is let go). Streams, so it is the same on Workers and Node.
 */
async function cappedAnswer(res: Response, maxBytes: number): Promise<string | undefined> {
  if (Number(res.headers.get("content-length")) > maxBytes) {
    await res.body?.cancel().catch(() => {});
    return undefined;
  }
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

/**
 * `options` with a fetch that counts the calls made through it, failed ones too: the
 * subrequests a poll made, a certificate download included.
 */
export function countingFetches(options: ProviderOptions = {}): {
  options: ProviderOptions;
  made(): number;
} {
  const doFetch = options.fetch ?? fetch;
  let made = 0;
  const counted: typeof fetch = (input, init) => {
    made += 1;
    return doFetch(input, init);
  };
  return { options: { ...options, fetch: counted }, made: () => made };
}

/** A provider's message cut to a length fit for logs and stored answers. */
export function clip(text: string, max = 200): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/**
 * "12.34" yuan → 1234 fen, by string arithmetic (no float ever sees the amount). Undefined when
 * the text is not a non-negative decimal with at most two places.
 */
export function yuanToFen(text: unknown): number | undefined {
  if (typeof text !== "string") return undefined;
  const match = /^(\d{1,13})(?:\.(\d{1,2}))?$/.exec(text);
  if (!match) return undefined;
  const yuan = match[1] ?? "0";
  const cents = (match[2] ?? "").padEnd(2, "0");
  const fen = Number(yuan) * 100 + Number(cents);
  return Number.isSafeInteger(fen) ? fen : undefined;
}

/** The value at `key` when it is a non-empty string. */
export function stringField(object: unknown, key: string): string | undefined {
  if (typeof object !== "object" || object === null) return undefined;
  const value = (object as Record<string, unknown>)[key];
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** JSON.parse that answers undefined instead of throwing (its message would quote the body). */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
