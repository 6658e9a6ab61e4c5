// Upstash-Signature headers made with node:crypto (HS256 JWT with QStash's claims), independent of
// the @upstash/qstash Receiver that delayq verifies them with.
import { createHash, createHmac, randomUUID } from "node:crypto";

/** How a fuzzed callback is signed: right, or wrong in one way. */
export type SignatureKind =
  | "current"
  | "next"
  | "wrong-key"
  | "wrong-url"
  | "wrong-body"
  | "expired"
  | "not-yet"
  | "wrong-issuer"
  | "alg-none"
  | "garbage";

/** The kinds that verify (the current or the next signing key, the right URL and body). */
export const VALID_SIGNATURES: readonly SignatureKind[] = ["current", "next"];

const b64url = (data: string | Buffer) => Buffer.from(data).toString("base64url");

/**
 * An `Upstash-Signature` for `body` POSTed to `url`, signed with `keys.current` (or `next`), or
 * spoiled as `kind` says.
 */
export function signCallback(
  kind: SignatureKind,
  keys: { current: string; next: string },
  url: string,
  body: string,
): string {
  if (kind === "garbage") return "not.a.jwt";
  const now = Math.floor(Date.now() / 1000);
  const bodyHash = createHash("sha256")
    .update(kind === "wrong-body" ? `${body} ` : body)
    .digest("base64url");
  const claims = {
    iss: kind === "wrong-issuer" ? "Upstash-not" : "Upstash",
    sub: kind === "wrong-url" ? `${url}&x=1` : url,
    exp: kind === "expired" ? now - 600 : now + 300,
    nbf: kind === "not-yet" ? now + 600 : now,
    iat: now,
    jti: `jwt_${randomUUID()}`,
    body: bodyHash,
  };
  const header = b64url(
    JSON.stringify({ alg: kind === "alg-none" ? "none" : "HS256", typ: "JWT" }),
  );
  const payload = b64url(JSON.stringify(claims));
  if (kind === "alg-none") return `${header}.${payload}.`;
  const key =
    kind === "next" ? keys.next : kind === "wrong-key" ? `${keys.current}x` : keys.current;
  const signature = createHmac("sha256", Buffer.from(key, "utf8"))
    .update(`${header}.${payload}`)
    .digest("base64url");
  return `${header}.${payload}.${signature}`;
}
