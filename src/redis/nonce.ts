// Random nonces for the scripts' receipts, drawn from a pooled buffer of random bytes.

const POOL_BYTES = 4096;
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));
let pool = new Uint8Array(0);
let taken = 0;

/**
 * `bytes` random bytes as lowercase hex. One `crypto.getRandomValues` per 4 KB instead of one
 * per call: on the service's hot path (a nonce per pop) the call itself cost more than the pop's
 * own JavaScript.
 */
export function randomHex(bytes: number): string {
  if (taken + bytes > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(Math.max(POOL_BYTES, bytes)));
    taken = 0;
  }
  let out = "";
  for (let i = 0; i < bytes; i++) out += HEX[pool[taken++] as number];
  return out;
}
