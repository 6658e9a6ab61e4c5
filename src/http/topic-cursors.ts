// The cursors of topic pages (GET /v1/topics, the dashboard): a page's cursor is the last topic
// name it read, and to a token limited to some topics that may be a topic it may not see. Such a
// cursor is sealed (AES-GCM, under a key derived from DQ_TOKENS, which every isolate has), so it
// still says where the next page starts without telling the name.
import { fromBase64url, toBase64url } from "../domain/base64url";
import { DelayqError } from "../domain/errors";
import type { TopicPage } from "../domain/results";
import { scopeAllows } from "../domain/scope";
import type { DelayQueue } from "../queue";

/** Sealed cursors start with "~", which no topic name contains. */
const SEALED = /^~[A-Za-z0-9_-]{40,300}$/;
const IV_BYTES = 12;
const encoder = new TextEncoder();

export type TopicCursors = {
  seal(name: string): Promise<string>;
  /** The name a cursor stands for; a sealed one this deployment did not make is 400. */
  open(cursor: string): Promise<string>;
};

/** Cursors sealed under a key derived from `secret` (the DQ_TOKENS value). */
export function topicCursors(secret: string): TopicCursors {
  const key = crypto.subtle
    .digest("SHA-256", encoder.encode(`delayq topic cursor v1\n${secret}`))
    .then((raw) => crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]));
  return {
    async seal(name) {
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const sealed = new Uint8Array(
        await crypto.subtle.encrypt({ name: "AES-GCM", iv }, await key, encoder.encode(name)),
      );
      const bytes = new Uint8Array(IV_BYTES + sealed.length);
      bytes.set(iv);
      bytes.set(sealed, IV_BYTES);
      return `~${toBase64url(bytes)}`;
    },
    async open(cursor) {
      if (!cursor.startsWith("~")) return cursor;
      const bytes = SEALED.test(cursor) ? fromBase64url(cursor.slice(1)) : undefined;
      try {
        if (!bytes || bytes.length <= IV_BYTES) throw new Error("malformed");
        const name = await crypto.subtle.decrypt(
          { name: "AES-GCM", iv: bytes.subarray(0, IV_BYTES) },
          await key,
          bytes.subarray(IV_BYTES),
        );
        return new TextDecoder().decode(name);
      } catch {
        throw new DelayqError(
          "invalid_request",
          "after: not a cursor this deployment gave (or DQ_TOKENS changed since); start again " +
            "from the first page",
        );
      }
    },
  };
}

/**
 * A page of the topics `queue`'s scope allows, after `after` (a topic name or a cursor); its
 * cursor sealed when it names a topic the scope does not allow.
 */
export async function readTopics(
  queue: DelayQueue,
  cursors: TopicCursors,
  options: { after?: string | undefined; limit?: number | undefined },
): Promise<TopicPage> {
  const after = options.after === undefined ? undefined : await cursors.open(options.after);
  const page = await queue.topics({
    ...(after === undefined ? {} : { after }),
    ...(options.limit === undefined ? {} : { limit: options.limit }),
  });
  if (page.cursor === undefined || scopeAllows(queue.scope, page.cursor)) return page;
  return { ...page, cursor: await cursors.seal(page.cursor) };
}
