// The webhook signature delayq puts on every push delivery and failure notice, and its verifier.
//   delayq-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
// Stripe's scheme: the timestamp is signed with the body, so a captured delivery cannot be replayed
// after the tolerance window, and a receiver can accept several v1 values while rotating secrets.

import { hmacSha256Hex, sameText } from "../domain/bytes";

/** The header name, lower-case as HTTP/2 sends it. */
export const SIGNATURE_HEADER = "delayq-signature";

/** The default window, seconds, within which a signature's timestamp must fall. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** The `delayq-signature` header value for a raw body, signed at `at` (unix ms). */
export async function signWebhook(secret: string, rawBody: string, at: number): Promise<string> {
  const t = Math.floor(at / 1000);
  return `t=${t},v1=${await hmacSha256Hex(secret, `${t}.${rawBody}`)}`;
}

export type VerifyOptions = {
  /** Seconds a signature stays valid either side of now. @default 300 */
  tolerance?: number;
  /** Now, unix ms. @default Date.now() */
  now?: number;
};

/**
 * Whether `header` (the `delayq-signature` value) signs `rawBody` with `secret` within the
 * tolerance. Pass the body exactly as received, before any JSON parsing. Any `v1` entry may match
 * (several are sent while a secret rotates). Compares in constant time. An empty secret (a
 * missing environment variable, say) is false, never an exception.
 */
export async function verifySignature(
  secret: string,
  header: string | null | undefined,
  rawBody: string,
  options: VerifyOptions = {},
): Promise<boolean> {
  // An empty secret (an unset environment variable) verifies nothing; WebCrypto would throw.
  if (!header || !secret) return false;
  let t: number | undefined;
  const candidates: string[] = [];
  for (const part of header.split(",")) {
    const [name, value] = part.trim().split("=", 2);
    if (name === "t" && value && /^\d{1,12}$/.test(value)) t = Number(value);
    else if (name === "v1" && value) candidates.push(value.toLowerCase());
  }
  if (t === undefined || candidates.length === 0) return false;
  const now = options.now ?? Date.now();
  const tolerance = options.tolerance ?? DEFAULT_TOLERANCE_SECONDS;
  if (Math.abs(now / 1000 - t) > tolerance) return false;
  const expected = await hmacSha256Hex(secret, `${t}.${rawBody}`);
  let ok = false;
  for (const candidate of candidates) if (sameText(candidate, expected)) ok = true;
  return ok;
}
