// src/domain/bytes.ts against node:crypto and Buffer, an independent implementation.
import { createHmac, randomBytes } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hmacSha256Hex, randomHex, sameBytes, sameText, toHex } from "../../src/domain/bytes";

describe("randomHex (push claims' receipt nonces, payment request nonces)", () => {
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

describe("toHex and hmacSha256Hex", () => {
  it("agree with Buffer and node:crypto", async () => {
    for (let i = 0; i < 50; i++) {
      const bytes = randomBytes(i * 7);
      expect(toHex(new Uint8Array(bytes))).toBe(bytes.toString("hex"));
    }
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1 }), fc.string(), async (key, text) => {
        expect(await hmacSha256Hex(key, text)).toBe(
          createHmac("sha256", key).update(text).digest("hex"),
        );
      }),
      { numRuns: 200 },
    );
  });
});

describe("sameText and sameBytes", () => {
  it("are equality, lengths and prefixes included", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        expect(sameText(a, b)).toBe(a === b);
        expect(sameText(a, a)).toBe(true);
        const [x, y] = [Buffer.from(a), Buffer.from(b)];
        expect(sameBytes(x, y)).toBe(x.equals(y));
      }),
    );
    expect(sameText("abc", "abcd")).toBe(false);
    expect(sameText("abcd", "abc")).toBe(false);
    expect(sameBytes(new Uint8Array([1, 2]), new Uint8Array([1, 2, 0]))).toBe(false);
    expect(sameBytes(new Uint8Array([1, 2, 0]), new Uint8Array([1, 2]))).toBe(false);
  });
});
