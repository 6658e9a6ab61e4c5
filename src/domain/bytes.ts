// Bytes and their WebCrypto steps, written once: hex, random hex, HMAC-SHA256, and comparisons of
// secrets without an early exit. WebCrypto only, so the same in Workers and on Node.

/** WebCrypto's key type, named from the API (Node's types declare no global `CryptoKey`). */
export type CryptoKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));
const encoder = new TextEncoder();

/** Lower-case hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += HEX[byte];
  return out;
}

/** `bytes` random bytes as lower-case hex. */
export function randomHex(bytes: number): string {
  return toHex(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** HMAC-SHA256 of `text` under `key` (both UTF-8), as lower-case hex. */
export async function hmacSha256Hex(key: string, text: string): Promise<string> {
  const imported = await crypto.subtle.importKey(
    "raw",
    encoder.encode(key),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return toHex(new Uint8Array(await crypto.subtle.sign("HMAC", imported, encoder.encode(text))));
}

/** Equal strings, compared without an early exit (the time tells nothing of where they differ). */
export function sameText(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

/** Equal bytes, compared without an early exit. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= (a[i] as number) ^ (b[i] ?? 0);
  return diff === 0;
}
