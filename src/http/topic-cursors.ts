// The cursors of topic pages (GET /v1/topics, the dashboard) for tokens limited to some topics. A
// page's cursor is the last topic name it read, which may be a topic the token may not see; and
// a page that starts after a name of the caller's choosing tells whether the name that follows
// is one it may see, enough to spell out others' names a character at a time. So a limited
// token's cursors are sealed (AES-GCM under the deployment's random secret, kept in Redis), all
// of one length, and its `after` must be one of them. An unlimited token sees every name: its
// cursors are names, and its `after` any name. The dashboard's payment-watch pages seal their
// cursors (`<start ms>|<watch id>` of the last watch read, maybe another account's) the same way
// for limited sessions; each sealed cursor says which listing it is for.
import { fromBase64url, toBase64url } from "../domain/base64url";
import type { CryptoKey } from "../domain/bytes";
import { DelayqError } from "../domain/errors";
import type { TopicPage } from "../domain/results";
import type { DelayQueue } from "../queue";

const IV_BYTES = 12;
/**
 * What a cursor stands for is padded to this length before sealing (after the one character of
 * its kind), so a cursor's length tells nothing: topic names are at most 100 characters.
 */
const SEALED_NAME_LENGTH = 100;
const TAG_BYTES = 16;
/** Sealed cursors start with "~", which no topic name contains. */
const SEALED = new RegExp(
  `^~[A-Za-z0-9_-]{${Math.ceil(((IV_BYTES + 1 + SEALED_NAME_LENGTH + TAG_BYTES) * 4) / 3)}}$`,
);
const encoder = new TextEncoder();

/** What a sealed cursor goes on from: a topic name, or a payment watch listing's position. */
export type CursorKind = "topic" | "watch";
const KIND_MARK: Record<CursorKind, string> = { topic: "t", watch: "w" };
/** The query parameter that carries each kind, for messages. */
const KIND_FIELD: Record<CursorKind, string> = { topic: "cursor", watch: "cursor" };

export type TopicCursors = {
  seal(value: string, kind?: CursorKind): Promise<string>;
  /**
   * What a sealed cursor of `kind` stands for; one this deployment did not seal, or sealed for
   * another listing, is 400.
   */
  open(cursor: string, kind?: CursorKind): Promise<string>;
};

/** Cursors sealed under the deployment's secret (DelayQueue.cursorSecret). */
export function topicCursors(queue: Pick<DelayQueue, "cursorSecret">): TopicCursors {
  // The key of the last secret read: derived again only when the secret changes.
  let last: { secret: string; key: Promise<CryptoKey> } | undefined;
  const keyOf = async (fresh = false) => {
    const secret = await queue.cursorSecret({ fresh });
    if (last?.secret !== secret) {
      const key = crypto.subtle
        .digest("SHA-256", encoder.encode(secret))
        .then((raw) =>
          crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]),
        );
      last = { secret, key };
    }
    return { secret, key: await last.key };
  };
  const decrypt = async (bytes: Uint8Array, key: CryptoKey) => {
    try {
      return await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: bytes.subarray(0, IV_BYTES) },
        key,
        bytes.subarray(IV_BYTES),
      );
    } catch {
      return undefined;
    }
  };
  return {
    async seal(value, kind = "topic") {
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const padded = encoder.encode(KIND_MARK[kind] + value.padEnd(SEALED_NAME_LENGTH, "\n"));
      const { key } = await keyOf();
      const sealed = new Uint8Array(
        await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, padded),
      );
      const bytes = new Uint8Array(IV_BYTES + sealed.length);
      bytes.set(iv);
      bytes.set(sealed, IV_BYTES);
      return `~${toBase64url(bytes)}`;
    },
    async open(cursor, kind = "topic") {
      const bytes = SEALED.test(cursor) ? fromBase64url(cursor.slice(1)) : undefined;
      let name: string | undefined;
      if (bytes) {
        const known = await keyOf();
        let plain = await decrypt(bytes, known.key);
        // Sealed under a secret made since this process read its own: read it again, once.
        if (!plain) {
          const fresh = await keyOf(true);
          if (fresh.secret !== known.secret) plain = await decrypt(bytes, fresh.key);
        }
        const text = plain && new TextDecoder().decode(plain);
        if (text?.startsWith(KIND_MARK[kind])) name = text.slice(1).replace(/\n+$/, "");
      }
      if (name === undefined) {
        throw new DelayqError(
          "invalid_request",
          `${KIND_FIELD[kind]}: not a cursor this deployment gave; start again from the first page`,
        );
      }
      return name;
    },
  };
}

/**
 * Where a page asked for starts: a sealed cursor opened; for a limited caller nothing else (400),
 * for an unlimited one also a name or position as given. Undefined: the first page.
 */
export async function cursorGiven(
  cursors: TopicCursors,
  cursor: string | undefined,
  kind: CursorKind,
  limited: boolean,
): Promise<string | undefined> {
  if (cursor === undefined || cursor.startsWith("~")) {
    return cursor && (await cursors.open(cursor, kind));
  }
  if (limited) {
    const field = KIND_FIELD[kind];
    throw new DelayqError(
      "invalid_request",
      `${field}: a token limited to some topics pages with the cursors it was given (start ` +
        `without ${field}); it cannot start at a name or a position of its own`,
    );
  }
  return cursor;
}

/**
 * A page of the topics `queue`'s scope allows, after `after`: for a limited scope a sealed
 * cursor (a name is 400), and its cursor sealed; otherwise a name, and its cursor a name.
 */
export async function readTopics(
  queue: DelayQueue,
  cursors: TopicCursors,
  options: { after?: string | undefined; limit?: number | undefined },
): Promise<TopicPage> {
  const limited = queue.scope !== undefined;
  const after = await cursorGiven(cursors, options.after, "topic", limited);
  const page = await queue.topics({
    ...(after === undefined ? {} : { after }),
    ...(options.limit === undefined ? {} : { limit: options.limit }),
  });
  if (page.cursor === undefined || !limited) return page;
  return { ...page, cursor: await cursors.seal(page.cursor) };
}
