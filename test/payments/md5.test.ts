// Our MD5 (Alipay certificate SNs) against RFC 1321's test suite and node:crypto's md5 (golden).
import { createHash, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { md5Hex } from "../../src/payments/md5";

const nodeMd5 = (input: Uint8Array | string) => createHash("md5").update(input).digest("hex");

describe("md5Hex", () => {
  it("gives RFC 1321's test suite answers", () => {
    const suite: [string, string][] = [
      ["", "d41d8cd98f00b204e9800998ecf8427e"],
      ["a", "0cc175b9c0f1b6a831c399e269772661"],
      ["abc", "900150983cd24fb0d6963f7d28e17f72"],
      ["message digest", "f96b697d7cb7938d525a2f31aaf161d0"],
      ["abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"],
      [
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        "d174ab98d277d9f5a5611c2c9f419d9f",
      ],
      [
        "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
        "57edf4a22be3c955ac49da2e2107b67a",
      ],
    ];
    for (const [text, digest] of suite) expect(md5Hex(text)).toBe(digest);
  });

  it("equals node:crypto's md5 at every length around the block and padding edges, and on UTF-8", () => {
    for (let length = 0; length <= 200; length++) {
      const bytes = new Uint8Array(randomBytes(length));
      expect(md5Hex(bytes), `length ${length}`).toBe(nodeMd5(bytes));
    }
    const big = new Uint8Array(randomBytes(100_003));
    expect(md5Hex(big)).toBe(nodeMd5(big));
    const dn = "CN=Ant Financial Certification Authority Class 2 R1,OU=支付宝,O=蚂蚁金服,C=CN";
    expect(md5Hex(`${dn}4e2a17cd`)).toBe(nodeMd5(Buffer.from(`${dn}4e2a17cd`, "utf8")));
  });
});
