// Push delivery through Upstash QStash: publishing claimed jobs (batched, timed with notBefore)
// and reading the signed callbacks that report the receiver's answer.
import { Client, Receiver } from "@upstash/qstash";
import { type Settlement, settlementOf } from "../domain/push";
import { deliveryBody, deliveryHeaders, type Parcel, retryAfterFrom } from "./delivery";

/** Messages per `/v2/batch` request. */
export const QSTASH_BATCH = 100;

export type QStashSettings = {
  url: string;
  token: string;
  currentSigningKey: string;
  nextSigningKey: string;
};

/** Where QStash reports an answer: delayq's own callback route, naming the reservation. */
export function callbackUrl(publicUrl: string, id: string, receipt: string): string {
  const base = publicUrl.replace(/\/+$/, "");
  return `${base}/v1/qstash/callback?id=${encodeURIComponent(id)}&receipt=${encodeURIComponent(receipt)}`;
}

export type QStash = {
  /** Publishes claimed jobs, each at its due second (rounded up); answers their message ids. */
  publish(parcels: readonly Parcel[], publicUrl: string, now: number): Promise<string[]>;
  /** Cancels a message not yet delivered; one already gone is fine. */
  cancel(messageId: string): Promise<void>;
  /** Whether a callback's `Upstash-Signature` signs its raw body for that URL. */
  verify(signature: string, rawBody: string, url: string): Promise<boolean>;
};

/** A QStash client built from settings (always `devMode: false`, explicit URL, token, keys). */
export function createQStash(settings: QStashSettings): QStash {
  const client = new Client({
    baseUrl: settings.url,
    token: settings.token,
    devMode: false,
    enableTelemetry: false,
    retry: { retries: 1 },
  });
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
              notBefore: Math.ceil(parcel.meta.due / 1000),
              retries: 0,
              timeout: parcel.push.timeout,
              callback: callbackUrl(publicUrl, parcel.meta.id, receipt),
              failureCallback: callbackUrl(publicUrl, parcel.meta.id, receipt),
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
    async cancel(messageId) {
      // QStash's own `DELETE /v2/messages/{id}`, not the SDK's messages.delete: the SDK writes
      // every answer that is not a 2xx to console.error before throwing, and a 404 here is the
      // common case, not an error (delivered, failed or cancelled already: nothing to stop).
      const url = `${settings.url.replace(/\/+$/, "")}/v2/messages/${encodeURIComponent(messageId)}`;
      const response = await fetch(url, {
        method: "DELETE",
        headers: { authorization: `Bearer ${settings.token}` },
      });
      const text = await response.text();
      if (response.ok || response.status === 404) return;
      throw new Error(
        `QStash answered HTTP ${response.status} to cancelling message ${messageId}: ${text.slice(0, 200)}`,
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
