// The dashboard's session: signing in with a token opens a session of its own, a random id in an
// HttpOnly, SameSite=Strict cookie (never in a URL, never readable by page script), kept in Redis
// until it expires (DQ_DASHBOARD_SESSION_S) or its sign-out; a CSRF token derived from the id
// goes with every form that changes state. Redis keeps neither the cookie's value nor the token:
// a digest of the id, and the token's id, which every request looks up in DQ_TOKENS as it is now
// (a token removed there ends its sessions; a token's scope changed there changes theirs).
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { toBase64url } from "../../domain/base64url";
import { hmacSha256Hex, toHex } from "../../domain/bytes";
import type { AccountScope, TopicScope } from "../../domain/scope";
import type { DelayQueue } from "../../queue";
import type { TokenSet } from "../auth";

export const SESSION_COOKIE = "delayq_dashboard";
const COOKIE_PATH = "/dashboard";
const CSRF_LABEL = "delayq dashboard csrf v1";
/** How long a session lasts by default (DQ_DASHBOARD_SESSION_S): 12 hours, in seconds. */
export const DEFAULT_SESSION_SECONDS = 12 * 3600;
/** A session id: 32 random bytes, base64url (43 characters). */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

export type DashboardSession = {
  /** The topics the token may act on (undefined: all). */
  scope: TopicScope;
  /** The payment accounts whose watches it may see (undefined: all). */
  accounts: AccountScope;
  /** The value every state-changing form must send back as `csrf`. */
  csrf: string;
  /** Where Redis keeps the session (a digest of its id). */
  key: string;
};

/**
 * The session of the request, or undefined when its cookie names no open session (none, forged,
 * expired, signed out) or its token is no longer in DQ_TOKENS.
 */
export async function readSession(
  c: Context,
  tokens: TokenSet,
  queue: DelayQueue,
): Promise<DashboardSession | undefined> {
  const id = getCookie(c, SESSION_COOKIE);
  if (!id || !SESSION_ID.test(id)) return undefined;
  const key = await sessionKey(id);
  const tokenId = await queue.sessionToken(key);
  if (!tokenId) return undefined;
  const access = await tokens.byId(tokenId);
  if (!access) return undefined;
  return { scope: access.scope, accounts: access.accounts, csrf: await csrfFor(id), key };
}

/**
 * Opens a session for a token already checked with `tokens.identify` (its id: `tokenId`), for
 * `seconds`, and sets its cookie.
 */
export async function startSession(
  c: Context,
  queue: DelayQueue,
  tokenId: string,
  seconds: number,
): Promise<void> {
  const id = toBase64url(crypto.getRandomValues(new Uint8Array(32)));
  await queue.openSession(await sessionKey(id), tokenId, seconds * 1000);
  setCookie(c, SESSION_COOKIE, id, {
    path: COOKIE_PATH,
    httpOnly: true,
    sameSite: "Strict",
    // Secure wherever the page is served over https; the dev stack's plain http keeps working.
    secure: isHttps(c),
    maxAge: seconds,
  });
}

/** Ends the session: Redis forgets it (its cookie, kept somewhere, opens nothing) and the cookie goes. */
export async function endSession(
  c: Context,
  queue: DelayQueue,
  session: DashboardSession,
): Promise<void> {
  await queue.endSession(session.key);
  deleteCookie(c, SESSION_COOKIE, { path: COOKIE_PATH, secure: isHttps(c) });
}

/** Where Redis keeps a session: the SHA-256 of its id, hex. */
async function sessionKey(id: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(id));
  return toHex(new Uint8Array(digest));
}

/**
 * HMAC-SHA256 of a fixed label keyed with the session's id: a page of the session can print it, a
 * page of another site cannot compute it. Nothing more to store.
 */
export function csrfFor(sessionId: string): Promise<string> {
  return hmacSha256Hex(sessionId, CSRF_LABEL);
}

/**
 * Whether a form post may come from this site. Browsers say where a request comes from in
 * Sec-Fetch-Site; a cross-site or same-site (another subdomain) post is refused outright, before
 * the CSRF token is even looked at. Without the header (old browsers, curl) the token decides.
 */
export function fromThisSite(c: Context): boolean {
  const site = c.req.header("sec-fetch-site");
  return site === undefined || site === "same-origin" || site === "none";
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === "https:" || c.req.header("x-forwarded-proto") === "https";
}
