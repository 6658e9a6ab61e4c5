// Receipt nonces: hex of the asked length, and not repeating across pool refills.
import { describe, expect, it } from "vitest";
import { randomHex } from "../../src/redis/nonce";

describe("randomHex", () => {
  it("gives `bytes` random bytes as hex, distinct across many pool refills", () => {
    const seen = new Set<string>();
    const n = 20_000; // 120,000 bytes: about 30 refills of the 4 KB pool
    for (let i = 0; i < n; i++) seen.add(randomHex(6));
    expect(seen.size).toBe(n);
    for (const nonce of [...seen].slice(0, 100)) expect(nonce).toMatch(/^[0-9a-f]{12}$/);
    // Every hex digit shows up in every position: the bytes are not stuck.
    for (let position = 0; position < 12; position++) {
      const digits = new Set([...seen].map((nonce) => nonce[position]));
      expect(digits.size).toBe(16);
    }
    expect(randomHex(5000)).toMatch(/^[0-9a-f]{10000}$/);
  });
});
