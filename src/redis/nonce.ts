// Random nonces for push claims' receipts (a pop's receipt is derived from the job's record).

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

/** `bytes` random bytes as lowercase hex. */
export function randomHex(bytes: number): string {
  let out = "";
  for (const byte of crypto.getRandomValues(new Uint8Array(bytes))) out += HEX[byte];
  return out;
}
