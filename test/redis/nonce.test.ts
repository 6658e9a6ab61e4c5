// Push claims' receipt nonces: hex of the asked length, and not repeating.
import { describe, expect, it } from "vitest";
import { randomHex } from "../../src/redis/nonce";

describe("randomHex", () => {
  it("gives `bytes` random bytes as hex, distinct across many calls", () => {
    const seen = new Set<string>();
    const n = 20_000;
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
