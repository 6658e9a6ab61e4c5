// Push delivery through Upstash QStash: publishing claimed jobs (batched, timed with notBefore)
// and reading the signed callbacks that report the receiver's answer.
import { Client, QstashError, Receiver } from "@upstash/qstash";
import { type Settlement, settlementOf } from "../domain/push";
import { deliveryBody, deliveryHeaders, type Parcel, retryAfterFrom, sendTime } from "./delivery";

/** Messages per `/v2/batch` request. */
export const QSTASH_BATCH = 100;

/** How long one call to QStash may take by default, ms (DQ_QSTASH_TIMEOUT_MS). */
export const QSTASH_TIMEOUT_MS = 5000;

export type QStashSettings = {
  url: string;
  token: string;
  currentSigningKey: string;
  nextSigningKey: string;
  /**
   * How long one call to QStash (a batch publish, a cancel) may take, ms, its retry and the
   * reading of its answer included: a QStash that hangs must not hold a delete or a run.
   * @default QSTASH_TIMEOUT_MS
   */
  timeoutMs?: number;
};

/** Where QStash starts a run a hand-off asked for: delayq's own route (src/dispatch/hand-off.ts). */
export function continueUrl(publicUrl: string): string {
  return `${publicUrl.replace(/\/+$/, "")}/v1/qstash/continue`;
}

/**
 * The body of a hand-off's message: the topic its run claims (null: every push topic), the jobs
 * it was asked to take (its share of the hand-offs' promise) and the wave it was asked for.
 */
export type ContinueBody = { topic: string | null; share?: number; wave?: number };

/** Runs a hand-off asks for at one time: `runs` of them at `notBefore` (unix ms) or now. */
export type RunsAt = { runs: number; notBefore?: number; wave?: number };

/**
 * Where QStash reports an answer: delayq's own callback route, naming the reservation. `flow`:
 * the topic has `parallelism`, so the answer frees room and the callback claims the topic again.
 */
export function callbackUrl(publicUrl: string, id: string, receipt: string, flow = false): string {
  const base = publicUrl.replace(/\/+$/, "");
  const url = `${base}/v1/qstash/callback?id=${encodeURIComponent(id)}&receipt=${encodeURIComponent(receipt)}`;
  return flow ? `${url}&flow=1` : url;
}

/** Whether a parcel's answer frees room its topic's held-back jobs wait for (`parallelism`). */
function flowOf(parcel: Parcel): boolean {
  return parcel.push.parallelism !== undefined;
}

export type QStash = {
  /** Publishes claimed jobs, each at its due second (rounded up); answers their message ids. */
  publish(parcels: readonly Parcel[], publicUrl: string, now: number): Promise<string[]>;
  /**
   * Asks QStash for fresh invocations of delayq (POST /v1/qstash/continue), per wave `runs` of
   * them at its `notBefore` (unix ms) or now, each to claim `topic`'s jobs (or every push
   * topic's); 100 messages a batch request.
   */
  publishRuns(request: {
    publicUrl: string;
    waves: readonly RunsAt[];
    topic?: string;
    share?: number;
    /** QStash's deduplication id: asks made with the same one start one run. */
    deduplicationId?: string;
  }): Promise<void>;
  /** Cancels a message not yet delivered; one already gone is fine. */
  cancel(messageId: string): Promise<void>;
  /** Whether a callback's `Upstash-Signature` signs its raw body for that URL. */
  verify(signature: string, rawBody: string, url: string): Promise<boolean>;
};

/** A QStash client built from settings (always `devMode: false`, explicit URL, token, keys). */
export function createQStash(settings: QStashSettings): QStash {
  const timeoutMs = settings.timeoutMs ?? QSTASH_TIMEOUT_MS;
  const client = new Client({
    baseUrl: settings.url,
    token: settings.token,
    devMode: false,
    enableTelemetry: false,
  });
  // The SDK builds the messages (headers, notBefore); the timed requester sends them.
  client.http = timedRequester(client.http, settings.url, settings.token, timeoutMs);
  const receiver = new Receiver({
    currentSigningKey: settings.currentSigningKey,
    nextSigningKey: settings.nextSigningKey,
  });
  return {
    async publish(parcels, publicUrl, now) {
      const ids: string[] = [];
      for (let i = 0; i < parcels.length; i += QSTASH_BATCH) {
        const messages = await Promise.all(
          parcels.slice(i, i + QSTASH_BATCH).map(async (parcel) => {
            const body = deliveryBody(parcel);
            const receipt = parcel.meta.receipt ?? "";
            return {
              url: parcel.push.url,
              body,
              headers: {
                "content-type": "application/json",
                ...(await deliveryHeaders(parcel, body, now)),
              },
              // The SDK rounds notBefore to the nearest second; rounding up keeps it never early.
              notBefore: Math.ceil(sendTime(parcel) / 1000),
              retries: 0,
              timeout: parcel.push.timeout,
              callback: callbackUrl(publicUrl, parcel.meta.id, receipt, flowOf(parcel)),
              failureCallback: callbackUrl(publicUrl, parcel.meta.id, receipt, flowOf(parcel)),
            };
          }),
        );
        const answers = await client.batch(messages);
        for (const answer of answers) {
          const messageId = (answer as { messageId?: string }).messageId;
          if (!messageId) throw new Error("QStash answered a publish without a messageId");
          ids.push(messageId);
        }
      }
      return ids;
    },
    async publishRuns({ publicUrl, waves, topic, share, deduplicationId }) {
      const messages = waves.flatMap(({ runs, notBefore, wave }) => {
        const body: ContinueBody = {
          topic: topic ?? null,
          ...(share === undefined ? {} : { share }),
          ...(wave === undefined ? {} : { wave }),
        };
        const message = {
          url: continueUrl(publicUrl),
          body: JSON.stringify(body),
          headers: { "content-type": "application/json" },
          // Early is fine (the run waits for each job's due time): rounded down.
          ...(notBefore === undefined ? {} : { notBefore: Math.floor(notBefore / 1000) }),
          ...(deduplicationId === undefined ? {} : { deduplicationId }),
          retries: 2,
        };
        return Array.from({ length: runs }, () => message);
      });
      for (let i = 0; i < messages.length; i += QSTASH_BATCH) {
        await client.batch(messages.slice(i, i + QSTASH_BATCH));
      }
    },
    async cancel(messageId) {
      // QStash's own `DELETE /v2/messages/{id}`, not the SDK's messages.delete: the SDK writes
      // every answer that is not a 2xx to console.error before throwing, and a 404 here is the
      // common case, not an error (delivered, failed or cancelled already: nothing to stop).
      const url = `${settings.url.replace(/\/+$/, "")}/v2/messages/${encodeURIComponent(messageId)}`;
      const { status, text } = await callQStash(
        url,
        { method: "DELETE", headers: { authorization: `Bearer ${settings.token}` } },
        timeoutMs,
        `to cancelling message ${messageId}`,
      );
      if ((status >= 200 && status < 300) || status === 404) return;
      throw new Error(
        `QStash answered HTTP ${status} to cancelling message ${messageId}: ${text.slice(0, 200)}`,
      );
    },
    async verify(signature, rawBody, url) {
      try {
        return await receiver.verify({ signature, body: rawBody, url });
      } catch {
        return false;
      }
    },
  };
}

/**
 * One call to QStash, answered or failed within `timeoutMs`: the request, its one retry and the
 * reading of the answer share one deadline. It is retried only when fetch throws (the connection
 * failed before an answer), as the SDK does, never on an HTTP error, and never after the deadline.
 * `what` completes "QStash did not answer …" in the error a timeout gives.
 */
async function callQStash(
  url: string,
  init: RequestInit,
  timeoutMs: number,
  what: string,
): Promise<{ status: number; text: string }> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    let response: Response;
    try {
      response = await fetch(url, { ...init, signal });
    } catch (error) {
      if (signal.aborted) throw error;
      response = await fetch(url, { ...init, signal });
    }
    return { status: response.status, text: await response.text() };
  } catch (error) {
    if (!signal.aborted) throw error;
    throw new Error(`QStash did not answer within ${timeoutMs} ms ${what}`, { cause: error });
  }
}

type Requester = Client["http"];

/**
 * The SDK's transport, with a time limit. @upstash/qstash 2.12 takes none: its HttpClient calls
 * the global fetch with method, headers, body and keepalive only (no signal, no fetch or timeout
 * option; `retry` retries only when fetch throws, which a QStash that hangs makes it do only at
 * undici's own 300 s headers timeout on Node, and then the retry hangs as long). Every
 * sub-API (`batch` included) sends through the client's public `http` field, so it is replaced
 * by this, which sends the same request as the SDK's (its URL, `Authorization`, a non-2xx answer
 * a `QstashError`) through `callQStash`. Streaming (the SDK's LLM chat) is not used by delayq.
 */
function timedRequester(
  sdk: Requester,
  baseUrl: string,
  token: string,
  timeoutMs: number,
): Requester {
  const base = baseUrl.replace(/\/+$/, "");
  return {
    headers: sdk.headers,
    telemetryHeaders: sdk.telemetryHeaders,
    async request(request) {
      const url = new URL([request.baseUrl ?? base, ...request.path].join("/"));
      for (const [key, value] of Object.entries(request.query ?? {})) {
        if (value === undefined) continue;
        for (const item of Array.isArray(value) ? value : [value]) {
          url.searchParams.append(key, String(item instanceof Date ? item.getTime() : item));
        }
      }
      // The SDK's HeadersInit also names iterators of pairs, which Headers takes as well.
      const headers = new Headers(request.headers as ConstructorParameters<typeof Headers>[0]);
      if (!headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
      const method = request.method ?? "GET";
      const { status, text } = await callQStash(
        url.toString(),
        // Not the SDK's `keepalive` (a page's unload; workerd's RequestInit has none).
        { method, headers, body: request.body ?? null },
        timeoutMs,
        `to ${method} ${url.pathname}`,
      );
      if (status < 200 || status >= 300) {
        throw new QstashError(text.length > 0 ? text : `Error: status=${status}`, status);
      }
      return request.parseResponseAsJson === false ? (undefined as never) : JSON.parse(text);
    },
    requestStream() {
      throw new Error("delayq's QStash client does not stream");
    },
  };
}

/** The part of a QStash callback body delayq reads. */
type CallbackBody = {
  status?: number;
  header?: Record<string, string[] | string>;
  /** Base64 of the receiver's response body. */
  body?: string;
  dlqId?: string;
};

/**
 * What a callback says about the delivery: the receiver's status and its answer, settled by the
 * same table as a direct delivery. A failure callback (no 2xx, or no answer) is a failed attempt.
 */
export function callbackAttempt(
  rawBody: string,
  now: number,
): { settlement: Settlement; status: number; error?: string } | undefined {
  let parsed: CallbackBody;
  try {
    parsed = JSON.parse(rawBody) as CallbackBody;
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const status = Number(parsed.status ?? 0) || 0;
  const answer = parsed.body ? decodeBase64(parsed.body) : "";
  if (status >= 200 && status < 300) {
    return { settlement: settlementOf(status, answer, null, now), status };
  }
  const delayMs = retryAfterFrom(parsed.header, now);
  return {
    settlement: delayMs === undefined ? { outcome: "fail" } : { outcome: "fail", delayMs },
    status,
    error: status === 0 ? "no answer (QStash)" : `HTTP ${status} (QStash)`,
  };
}

function decodeBase64(text: string): string {
  try {
    const binary = atob(text);
    return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  } catch {
    return "";
  }
}
