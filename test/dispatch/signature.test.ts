// The webhook signature against node:crypto's HMAC (an independent implementation), and its verifier.
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { signWebhook, verifySignature } from "../../src/dispatch/signature";

const secret = "whsec_0123456789abcdef";
const body = '{"id":"order-1","topic":"pay","body":{"tx":4200001234567890123},"attempt":1}';
const at = 1_800_000_000_123;

describe("signWebhook", () => {
  it("equals HMAC-SHA256 over '<t>.<body>' as node:crypto computes it", async () => {
    const t = Math.floor(at / 1000);
    const hex = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
    expect(await signWebhook(secret, body, at)).toBe(`t=${t},v1=${hex}`);
  });

  it("signs the UTF-8 bytes of non-ASCII bodies", async () => {
    const text = '{"subject":"订单 №1 ✓"}';
    const hex = createHmac("sha256", secret).update(`1800000000.${text}`, "utf8").digest("hex");
    expect(await signWebhook(secret, text, at)).toBe(`t=1800000000,v1=${hex}`);
  });
});

describe("verifySignature", () => {
  it("accepts a fresh signature and any of several v1 values", async () => {
    const header = await signWebhook(secret, body, at);
    expect(await verifySignature(secret, header, body, { now: at + 1000 })).toBe(true);
    const rotated = `${header.replace("v1=", "v1=00ff,v1=")}`;
    expect(await verifySignature(secret, rotated, body, { now: at })).toBe(true);
  });

  it("refuses a changed body, another secret, a stale or future timestamp, junk", async () => {
    const header = await signWebhook(secret, body, at);
    expect(await verifySignature(secret, header, `${body} `, { now: at })).toBe(false);
    expect(await verifySignature("another-secret-123", header, body, { now: at })).toBe(false);
    expect(await verifySignature(secret, header, body, { now: at + 301_000 })).toBe(false);
    expect(await verifySignature(secret, header, body, { now: at - 301_000 })).toBe(false);
    expect(await verifySignature(secret, header, body, { now: at + 600_000, tolerance: 900 })).toBe(
      true,
    );
    for (const junk of ["", "t=abc,v1=00", "v1=00", `t=${Math.floor(at / 1000)}`, null]) {
      expect(await verifySignature(secret, junk, body, { now: at })).toBe(false);
    }
  });

  it("is false, not an exception, for an empty secret (an unset DELAYQ_PUSH_SECRET)", async () => {
    // docs/push.md's receivers default the secret to "": WebCrypto refuses a zero-length HMAC key.
    const header = `t=${Math.floor(at / 1000)},v1=${"0".repeat(64)}`;
    await expect(verifySignature("", header, body, { now: at })).resolves.toBe(false);
  });
});
