// Bearer tokens from DQ_TOKENS, each optionally limited to topic patterns and payment accounts;
// compared in constant time.
import type { Context, MiddlewareHandler } from "hono";
import { hmacSha256Hex, sameBytes, sameText } from "../domain/bytes";
import { DelayqError } from "../domain/errors";
import {
  type Access,
  AccountPattern,
  type AccountScope,
  TopicPattern,
  type TopicScope,
} from "../domain/scope";
import type { DelayQueue } from "../queue";
import type { PushedTopic } from "../queue/add-batch";
import type { AppEnv } from "./context";
import { errorResponse } from "./errors";

type Entry = {
  digest: Promise<Uint8Array>;
  id: Promise<string>;
  scope: TopicScope;
  accounts: AccountScope;
};

/**
 * A token's id: what Redis keeps to know a token by (the watches it started, a dashboard session's
 * token), 128 bits of an HMAC keyed with the token over a fixed label. Nothing in Redis gives the
 * token back, and the same token always has the same id, whatever its place in DQ_TOKENS.
 */
export async function tokenIdOf(token: string): Promise<string> {
  return (await hmacSha256Hex(token, "delayq token id v1")).slice(0, 32);
}

/** The tokens the API accepts, and the scope of each. */
export type TokenSet = {
  /**
   * What the token presented may act on (its topics and payment accounts), or undefined when it
   * is not one of ours.
   */
  identify(token: string): Promise<Access | undefined>;
  /** Every token's id (tokenIdOf), in DQ_TOKENS order. */
  ids(): Promise<string[]>;
  /** What the token with this id (tokenIdOf) may act on, or undefined when none has it now. */
  byId(id: string): Promise<Access | undefined>;
  /** How many tokens there are (for logs; never the tokens). */
  size: number;
  /** The scopes of the tokens limited to some topics (the push destination policy reads them). */
  limitedScopes: readonly (readonly string[])[];
};

const encoder = new TextEncoder();

/**
 * How a problem of DQ_TOKENS's entry `i` (from 0) begins: the variable and the entry's position,
 * never its text (a token, or a token pasted where a pattern goes).
 */
const entryAt = (i: number) => `delayq is misconfigured: DQ_TOKENS: entry ${i + 1}: `;

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/**
 * Parses `DQ_TOKENS`: comma-separated entries, each `token` (every topic and payment account) or
 * `token:pattern|pattern` (only topics matching a pattern, `*` being a wildcard, and only the
 * payment accounts named by a `provider/account` pattern: none when there is none).
 * Example: `admin-secret,shop-a-secret:shop-a.*|payments|wechatpay/shop-a`.
 */
export function parseTokens(value: string): TokenSet {
  const parsed = value
    .split(",")
    .map((raw) => raw.trim())
    .map((raw, i) => {
      const cut = raw.indexOf(":");
      const token = cut < 0 ? raw : raw.slice(0, cut);
      if (!token) {
        throw new DelayqError(
          "internal_error",
          `${entryAt(i)}has no token (format: token or token:pattern|pattern, comma-separated)`,
        );
      }
      if (/\s/.test(token)) {
        throw new DelayqError(
          "internal_error",
          `${entryAt(i)}its token contains a space or line break; tokens cannot (entries are separated by commas)`,
        );
      }
      let scope: TopicScope;
      let accounts: AccountScope;
      if (cut >= 0) {
        const patterns = raw.slice(cut + 1).split("|");
        for (const [j, pattern] of patterns.entries()) {
          const account = pattern.includes("/");
          const check = account
            ? AccountPattern.safeParse(pattern)
            : TopicPattern.safeParse(pattern);
          if (!check.success) {
            // The pattern is not quoted: a token pasted after a colon would be printed.
            const which = `pattern ${j + 1} (after the token's colon, counting by |)`;
            throw new DelayqError(
              "internal_error",
              account
                ? `${entryAt(i)}${which} is not a valid payment account pattern (use alipay/<account>, wechatpay/<account> or */<account>; * is a wildcard)`
                : `${entryAt(i)}${which} is not a valid topic pattern (use 1-100 of A-Z a-z 0-9 _ . : - and *)`,
            );
          }
        }
        scope = patterns.filter((pattern) => !pattern.includes("/"));
        accounts = patterns.filter((pattern) => pattern.includes("/"));
      }
      return { token, digest: sha256(token), scope, accounts };
    });
  // A token listed twice would act with the first entry's scope alone: refuse it.
  const seen = new Map<string, number>();
  for (const [i, entry] of parsed.entries()) {
    const first = seen.get(entry.token);
    if (first !== undefined) {
      throw new DelayqError(
        "internal_error",
        `${entryAt(i)}repeats the token of entry ${first + 1}; list each token once, with all its patterns (token:a.*|b.*)`,
      );
    }
    seen.set(entry.token, i);
  }
  const entries: Entry[] = parsed.map(({ token, digest, scope, accounts }) => ({
    digest,
    id: tokenIdOf(token),
    scope,
    accounts,
  }));
  const accessOf = async (entry: Entry): Promise<Access> => ({
    scope: entry.scope,
    accounts: entry.accounts,
    tokenId: await entry.id,
  });
  // Tokens already found valid, by their text: a request with one skips the digest (an async
  // SubtleCrypto job per request was a tenth of the service's CPU). Only valid tokens go in, so
  // it holds at most one key per entry; a lookup compares hashes, so a miss tells a caller no
  // more than the 401 does.
  const known = new Map<string, Entry>();
  return {
    size: entries.length,
    limitedScopes: entries.flatMap(({ scope }) => (scope ? [scope] : [])),
    async identify(token) {
      const hit = known.get(token);
      if (hit) return accessOf(hit);
      const presented = await sha256(token);
      let found: Entry | undefined;
      // Compare against every entry, so timing does not tell which one matched.
      for (const entry of entries) {
        if (sameBytes(presented, await entry.digest) && !found) found = entry;
      }
      if (found) known.set(token, found);
      return found && accessOf(found);
    },
    ids: () => Promise.all(entries.map((entry) => entry.id)),
    async byId(id) {
      let found: Entry | undefined;
      for (const entry of entries) {
        if (sameText(await entry.id, id) && !found) found = entry;
      }
      return found && accessOf(found);
    },
  };
}

/**
 * The bearer-auth middleware of the /v1 routes: 401 without a token or with a wrong one;
 * otherwise the request's queue is `queue` limited to the token's topics, and its `accounts` the
 * payment accounts the token may watch orders of.
 */
export function bearerAuth(
  tokens: TokenSet,
  queue: DelayQueue,
  /** Called (with the request's context) when the request wrote jobs to push topics. */
  onPushed?: (c: Context<AppEnv>, pushed: PushedTopic[]) => void,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) {
      return errorResponse(
        c,
        "unauthorized",
        "Missing bearer token: send the header Authorization: Bearer <token>",
      );
    }
    const principal = await tokens.identify(match[1]);
    if (!principal) return errorResponse(c, "unauthorized", "Invalid bearer token");
    c.set("accounts", principal.accounts);
    c.set("tokenId", principal.tokenId);
    c.set(
      "queue",
      queue.view({
        scope: principal.scope,
        onPushed: onPushed && ((pushed) => onPushed(c, pushed)),
      }),
    );
    await next();
  };
}
