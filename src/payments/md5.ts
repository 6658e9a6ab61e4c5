// MD5 (RFC 1321), for Alipay's certificate SNs only: WebCrypto has no MD5 on Node (workerd has
// one), and an SN is computed once per account at start-up, synchronously, from public data. Not
// for anything secret: MD5 is broken as a hash of secrets; here it is Alipay's name for a
// certificate.

import { toHex } from "../domain/bytes";

/** Per-round shift amounts. */
// biome-ignore format: the table reads best in rows of four
const S = [
  7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
  5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
  4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
  6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

/** K[i] = floor(2^32 × |sin(i + 1)|), as RFC 1321 defines the table. */
const K = Array.from(
  { length: 64 },
  (_, i) => Math.floor(2 ** 32 * Math.abs(Math.sin(i + 1))) >>> 0,
);

/** The padded message: the bytes, 0x80, zeros to 56 mod 64, the bit length (64-bit LE). */
function pad(bytes: Uint8Array): DataView {
  const length = (((bytes.length + 8) >> 6) + 1) << 6;
  const out = new Uint8Array(length);
  out.set(bytes);
  out[bytes.length] = 0x80;
  const view = new DataView(out.buffer);
  const bits = bytes.length * 8;
  view.setUint32(length - 8, bits >>> 0, true);
  view.setUint32(length - 4, Math.floor(bits / 2 ** 32), true);
  return view;
}

/** The 16-byte MD5 digest of `input` (a string is hashed as its UTF-8 bytes), as lower-case hex. */
export function md5Hex(input: Uint8Array | string): string {
  const view = pad(typeof input === "string" ? new TextEncoder().encode(input) : input);
  const state = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];
  for (let block = 0; block < view.byteLength; block += 64) {
    let [a, b, c, d] = state as [number, number, number, number];
    for (let i = 0; i < 64; i++) {
      let f: number;
      let g: number;
      if (i < 16) [f, g] = [(b & c) | (~b & d), i];
      else if (i < 32) [f, g] = [(d & b) | (~d & c), (5 * i + 1) % 16];
      else if (i < 48) [f, g] = [b ^ c ^ d, (3 * i + 5) % 16];
      else [f, g] = [c ^ (b | ~d), (7 * i) % 16];
      const sum = (a + f + (K[i] as number) + view.getUint32(block + g * 4, true)) | 0;
      const shift = S[i] as number;
      [a, d, c] = [d, c, b];
      b = (b + ((sum << shift) | (sum >>> (32 - shift)))) | 0;
    }
    state[0] = ((state[0] as number) + a) | 0;
    state[1] = ((state[1] as number) + b) | 0;
    state[2] = ((state[2] as number) + c) | 0;
    state[3] = ((state[3] as number) + d) | 0;
  }
  const digest = new DataView(new ArrayBuffer(16));
  for (const [i, word] of state.entries()) digest.setUint32(i * 4, word, true);
  return toHex(new Uint8Array(digest.buffer));
}
