// One push delivery: its body, its headers and signature, the POST itself, and what the answer
// means for the job (DESIGN §3). Also the failure notice sent when a push job dies.
import { type PushConfig, retryAfterMs, type Settlement, settlementOf } from "../domain/push";
import { type RecordMeta, recordText } from "../redis/record";
import { SIGNATURE_HEADER, signWebhook } from "./signature";

/** The most of a receiver's answer read: enough for `{"status":"retry","delay":30}` and more. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** A claimed job ready to deliver: its record split, the topic's push config, its receipt. */
export type Parcel = {
  meta: RecordMeta;
  /** The body's JSON text, as stored. */
  body: string;
  push: PushConfig;
  /**
   * When it is sent (unix ms), when not at its due time: a topic with `rate` spaces its
   * deliveries (never before the due time).
   */
  at?: number;
};

/** When a parcel is sent: its send time, else its due time. */
export function sendTime(parcel: Parcel): number {
  return parcel.at ?? parcel.meta.due;
}

/** The delivery body: one line of JSON, the job's body inserted as its stored text. */
export function deliveryBody(parcel: Parcel): string {
  const { meta, body } = parcel;
  return `{"id":${JSON.stringify(meta.id)},"topic":${JSON.stringify(meta.topic)},"body":${body},"attempt":${meta.attempts},"dueAt":${meta.due}}`;
}

/**
 * A topic's own headers as sent: one value per name, whatever its case. Configs are refused
 * names that differ only in case; one stored before that rule sends the last such name's value,
 * not both joined by a comma.
 */
function ownHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) out[name.toLowerCase()] = value;
  return out;
}

/** The headers of a delivery (without content-type), signed at `at`. */
export async function deliveryHeaders(
  parcel: Parcel,
  rawBody: string,
  at: number,
): Promise<Record<string, string>> {
  const { meta, push } = parcel;
  return {
    ...ownHeaders(push.headers),
    "delayq-id": meta.id,
    "delayq-topic": meta.topic,
    "delayq-attempt": String(meta.attempts),
    [SIGNATURE_HEADER]: await signWebhook(push.secret ?? "", rawBody, at),
  };
}

/** What a delivery attempt came to: how to settle the job, and what to record on it. */
export type Attempt = { settlement: Settlement; status: number; error?: string };

export type Post = (url: string, init: RequestInit) => Promise<Response>;

/** How one delivery or notice goes out: with `fetch` (the global one when absent), or not at all. */
export type Route = { fetch?: Post; refused?: undefined } | { refused: string; fetch?: undefined };

/**
 * POSTs the delivery (unless `refused` says why it may not go) and reads the answer (within the
 * topic's timeout, body included) into a settlement. A network error or a timeout is a failed
 * attempt with status 0; a connection lost before any answer is first tried again at once.
 */
export async function deliverDirect(
  parcel: Parcel,
  options: {
    fetch?: Post;
    now: () => number;
    refused?: string;
    /** Asked before a lost connection's retry (false: the budget cannot pay for it). @default yes */
    mayRetry?: () => boolean;
  },
): Promise<Attempt> {
  // Not sent: the destination is not one this topic may push to (DQ_PRIVATE_PUSH).
  if (options.refused) {
    return { settlement: { outcome: "fail" }, status: 0, error: `refused: ${options.refused}` };
  }
  const post = options.fetch ?? fetch;
  const raw = deliveryBody(parcel);
  const headers = await deliveryHeaders(parcel, raw, options.now());
  const signal = AbortSignal.timeout(parcel.push.timeout * 1000);
  try {
    const res = await postReconnecting(
      post,
      parcel.push.url,
      {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: raw,
        signal,
        redirect: "manual",
      },
      options.mayRetry,
    );
    const text = await readLimited(res, MAX_ANSWER_BYTES);
    const settlement = settlementOf(
      res.status,
      text,
      res.headers.get("retry-after"),
      options.now(),
    );
    return settlement.outcome === "fail"
      ? { settlement, status: res.status, error: `HTTP ${res.status}` }
      : { settlement, status: res.status };
  } catch (error) {
    const timedOut = signal.aborted;
    return {
      settlement: { outcome: "fail" },
      status: 0,
      error: timedOut
        ? `no answer within ${parcel.push.timeout} s`
        : `could not reach the receiver: ${describe(error)}`,
    };
  }
}

/** The failure notice's body (DESIGN §3), one line of JSON. */
export function noticeBody(meta: RecordMeta, body: string): string {
  return `{"id":${JSON.stringify(meta.id)},"topic":${JSON.stringify(meta.topic)},"body":${body},"attempts":${meta.attempts},"reason":${JSON.stringify(meta.deadReason ?? "attempts")},"lastStatus":${meta.lastStatus ?? null}}`;
}

/** POSTs a failure notice, signed like deliveries. True when the receiver took it (2xx). */
export async function sendNotice(
  url: string,
  push: PushConfig,
  meta: RecordMeta,
  body: string,
  options: { fetch?: Post; now: () => number; mayRetry?: () => boolean },
): Promise<boolean> {
  const post = options.fetch ?? fetch;
  const raw = noticeBody(meta, body);
  try {
    const res = await postReconnecting(
      post,
      url,
      {
        method: "POST",
        headers: {
          ...ownHeaders(push.headers),
          "content-type": "application/json",
          "delayq-id": meta.id,
          "delayq-topic": meta.topic,
          [SIGNATURE_HEADER]: await signWebhook(push.secret ?? "", raw, options.now()),
        },
        body: raw,
        signal: AbortSignal.timeout(push.timeout * 1000),
        redirect: "manual",
      },
      options.mayRetry,
    );
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

/** A retry wait from a callback's copy of the receiver's headers (QStash), if it asked for one. */
export function retryAfterFrom(
  headers: Record<string, string[] | string> | undefined,
  now: number,
) {
  if (!headers) return undefined;
  const entry = Object.entries(headers).find(([name]) => name.toLowerCase() === "retry-after");
  const value = Array.isArray(entry?.[1]) ? entry?.[1][0] : entry?.[1];
  return retryAfterMs(value, now);
}

/**
 * POSTs, and when the connection is lost before any answer, POSTs once more at once, under the
 * same deadline (`init.signal`), before the caller counts a failed attempt. Both runtimes reuse
 * idle connections, and receivers close idle ones all the time: a request sent on one the
 * receiver closed meanwhile fails (measured: undici's `other side closed` or ECONNRESET on Node,
 * `Network connection lost.` in workerd). Each runtime drops the failed connection, so the retry
 * takes a new one, or another idle one if any is pooled. workerd says the same of a refused
 * connection, tried twice there. At-least-once: a receiver that dropped the connection while it
 * worked on the request gets it twice (same `delayq-id` and `delayq-attempt`).
 */
async function postReconnecting(
  post: Post,
  url: string,
  init: RequestInit & { signal: AbortSignal },
  mayRetry: () => boolean = () => true,
): Promise<Response> {
  try {
    return await post(url, init);
  } catch (error) {
    if (init.signal.aborted || !connectionLost(error) || !mayRetry()) throw error;
    try {
      return await post(url, init);
    } catch (again) {
      throw new Error(`${describe(again)}, also on an immediate retry`);
    }
  }
}

/** Codes of a connection the other side closed or reset (Node: undici, node:http, sockets). */
const LOST_CODES = new Set(["ECONNRESET", "EPIPE"]);

/**
 * Whether an error means the connection was lost before an answer: workerd's `Network connection
 * lost.`; undici's SocketError (`other side closed`, `closed`), ECONNRESET (`socket hang up` too)
 * or EPIPE, on the error or its causes. Not a refused connection, a DNS failure, a timeout or a
 * malformed answer (undici's `bad response`).
 */
function connectionLost(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && LOST_CODES.has(code)) return true;
    if (code === "UND_ERR_SOCKET" && /^(other side )?closed$/.test(e.message)) return true;
    if (/^Network connection lost\b/.test(e.message)) return true;
  }
  return false;
}

async function readLimited(res: Response, limit: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
    if (size >= limit) {
      await reader.cancel();
      break;
    }
  }
  const bytes = new Uint8Array(Math.min(size, limit));
  let offset = 0;
  for (const chunk of chunks) {
    const part = chunk.subarray(0, Math.max(0, bytes.length - offset));
    bytes.set(part, offset);
    offset += part.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : "";
  return recordText(cause ? `${message} (${cause})` : message);
}
