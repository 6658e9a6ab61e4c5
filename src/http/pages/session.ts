// The dashboard's session: the bearer token in an HttpOnly, SameSite=Strict cookie (never in a URL,
// never readable by page script), and a CSRF token derived from it for every form that changes state.
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { hmacSha256Hex } from "../../domain/bytes";
import type { AccountScope, TopicScope } from "../../domain/scope";
import type { TokenSet } from "../auth";

export const SESSION_COOKIE = "delayq_dashboard";
const COOKIE_PATH = "/dashboard";
const CSRF_LABEL = "delayq dashboard csrf v1";

export type DashboardSession = {
  /** The topics the token may act on (undefined: all). */
  scope: TopicScope;
  /** The payment accounts whose watches it may see (undefined: all). */
  accounts: AccountScope;
  /** The value every state-changing form must send back as `csrf`. */
  csrf: string;
};

/** The session of the request, or undefined when there is no cookie or its token is not ours. */
export async function readSession(
  c: Context,
  tokens: TokenSet,
): Promise<DashboardSession | undefined> {
  const token = getCookie(c, SESSION_COOKIE);
  if (!token) return undefined;
  const principal = await tokens.identify(token);
  if (!principal) return undefined;
  return { scope: principal.scope, accounts: principal.accounts, csrf: await csrfFor(token) };
}

/** Starts a session for a token already checked with `tokens.identify`. */
export function startSession(c: Context, token: string): void {
  setCookie(c, SESSION_COOKIE, token, {
    path: COOKIE_PATH,
    httpOnly: true,
    sameSite: "Strict",
    // Secure wherever the page is served over https; the dev stack's plain http keeps working.
    secure: isHttps(c),
  });
}

export function endSession(c: Context): void {
  deleteCookie(c, SESSION_COOKIE, { path: COOKIE_PATH, secure: isHttps(c) });
}

/**
 * HMAC-SHA256 of a fixed label keyed with the token: a page of the session can print it, a page
 * of another site cannot compute it. Nothing to store, so it works on any number of isolates.
 */
export function csrfFor(token: string): Promise<string> {
  return hmacSha256Hex(token, CSRF_LABEL);
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
