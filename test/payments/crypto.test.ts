// WebCrypto signing, verification, key wrapping and AES-GCM against node:crypto and openssl (golden).
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  aesGcmDecrypt,
  importKeyCached,
  importPrivateKey,
  importPublicKey,
  randomNonce,
  signRsaSha256,
  verifyRsaSha256,
} from "../../src/payments/crypto";
import {
  base64ToBytes,
  certificateInfo,
  certificates,
  privateKeyToPkcs8,
  publicKeyToSpki,
  wrapPkcs1PrivateKey,
  wrapPkcs1PublicKey,
} from "../../src/payments/keys";
import { PaymentsError } from "../../src/payments/provider";
import { nodeAesGcmEncrypt, nodeSign, nodeVerify, rsaKey, selfSignedCertificate } from "./support";

const key = rsaKey();
const texts = [
  'app_id=2021000000000000&biz_content={"out_trade_no":"order-1042"}&charset=utf-8',
  "GET\n/v3/pay/transactions/out-trade-no/o-1?mchid=1900000109\n1700000000\nabc\n\n",
  "订单 №1042 ✓ — 支付宝 / 微信支付 😀",
  "",
];

const der = (pem: string, type: "pkcs8" | "spki") =>
  type === "pkcs8"
    ? new Uint8Array(createPrivateKey(pem).export({ type: "pkcs8", format: "der" }))
    : new Uint8Array(createPublicKey(pem).export({ type: "spki", format: "der" }));

describe("signRsaSha256 equals node:crypto byte for byte (PKCS#1 v1.5 is deterministic)", () => {
  const spellings: [string, string][] = [
    ["PKCS#8 PEM", key.pkcs8Pem],
    ["PKCS#8 bare base64", key.pkcs8Base64],
    ["PKCS#1 PEM", key.pkcs1Pem],
    ["PKCS#1 bare base64", key.pkcs1Base64],
    ["PKCS#1 PEM with escaped newlines", key.pkcs1Pem.replaceAll("\n", "\\n")],
    ["PKCS#8 PEM with CRLF", key.pkcs8Pem.replaceAll("\n", "\r\n")],
  ];
  for (const [name, text] of spellings) {
    it(name, async () => {
      const imported = await importPrivateKey(text);
      for (const message of texts) {
        expect(await signRsaSha256(imported, message)).toBe(nodeSign(key.pkcs8Pem, message));
      }
    });
  }
});

describe("verifyRsaSha256 accepts node:crypto signatures and refuses others", () => {
  const cert = selfSignedCertificate("5157F09EFDC096DE15EBE81A47057A7232F1B8E1");
  const publics: [string, string, string][] = [
    ["SPKI PEM", key.spkiPem, key.pkcs8Pem],
    ["SPKI bare base64", key.spkiBase64, key.pkcs8Pem],
    ["RSA PUBLIC KEY PEM", key.pkcs1PublicPem, key.pkcs8Pem],
    ["RSA PUBLIC KEY bare base64", key.pkcs1PublicBase64, key.pkcs8Pem],
    ["X.509 certificate PEM", cert.pem, cert.keyPem],
    ["X.509 certificate bare base64", cert.pem.replace(/-----[A-Z ]+-----|\s/g, ""), cert.keyPem],
  ];
  for (const [name, text, signer] of publics) {
    it(name, async () => {
      const imported = await importPublicKey(text);
      for (const message of texts) {
        const signature = nodeSign(signer, message);
        expect(await verifyRsaSha256(imported, message, signature)).toBe(true);
        expect(await verifyRsaSha256(imported, `${message}.`, signature)).toBe(false);
      }
    });
  }

  it("is false for junk, empty and another key's signatures, and never throws", async () => {
    const imported = await importPublicKey(key.spkiPem);
    const other = rsaKey();
    expect(await verifyRsaSha256(imported, "x", nodeSign(other.pkcs8Pem, "x"))).toBe(false);
    for (const junk of ["", "!!!", "AAAA", "WECHATPAY/SIGNTEST/abc", "a".repeat(400)]) {
      expect(await verifyRsaSha256(imported, "x", junk)).toBe(false);
    }
  });

  it("our signatures verify with node:crypto too", async () => {
    const signature = await signRsaSha256(await importPrivateKey(key.pkcs1Base64), texts[2] ?? "");
    expect(nodeVerify(key.spkiPem, texts[2] ?? "", signature)).toBe(true);
  });
});

describe("key wrapping and the DER walk, against node:crypto's own encodings", () => {
  it("wraps PKCS#1 private keys into the PKCS#8 node:crypto exports", () => {
    const pkcs1 = base64ToBytes(key.pkcs1Base64);
    expect(Buffer.from(wrapPkcs1PrivateKey(pkcs1))).toEqual(
      Buffer.from(der(key.pkcs8Pem, "pkcs8")),
    );
    expect(Buffer.from(privateKeyToPkcs8(key.pkcs1Pem))).toEqual(
      Buffer.from(der(key.pkcs8Pem, "pkcs8")),
    );
    expect(Buffer.from(privateKeyToPkcs8(key.pkcs8Base64))).toEqual(
      Buffer.from(der(key.pkcs8Pem, "pkcs8")),
    );
  });

  it("wraps RSA PUBLIC KEY into the SPKI node:crypto exports", () => {
    const pkcs1 = base64ToBytes(key.pkcs1PublicBase64);
    expect(Buffer.from(wrapPkcs1PublicKey(pkcs1))).toEqual(Buffer.from(der(key.spkiPem, "spki")));
    expect(Buffer.from(publicKeyToSpki(key.pkcs1PublicBase64))).toEqual(
      Buffer.from(der(key.spkiPem, "spki")),
    );
  });

  it("reads a certificate's SPKI and serial as node:crypto's X509Certificate does", () => {
    // Serials with the high bit set need a 00 sign byte in DER; short ones, none.
    for (const serial of [
      "5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
      "80FF0000000000000001",
      "0A",
      "1234",
    ]) {
      const cert = selfSignedCertificate(serial);
      const [info] = certificates(cert.pem);
      expect(info?.serial).toBe(cert.serial.replace(/^0+(?=.)/, ""));
      expect(info?.serial).toBe(serial.replace(/^0+(?=.)/, ""));
      expect(Buffer.from(info?.spki ?? [])).toEqual(cert.spkiDer);
      expect(Buffer.from(publicKeyToSpki(cert.pem))).toEqual(cert.spkiDer);
    }
  });

  it("reads every certificate of a PEM bundle", () => {
    const a = selfSignedCertificate("01AB");
    const b = selfSignedCertificate("02CD");
    expect(certificates(`${a.pem}\n${b.pem}`).map((c) => c.serial)).toEqual(["1AB", "2CD"]);
  });

  it("refuses what is not a key, with invalid_key and no key text in the message", async () => {
    const broken = [
      key.pkcs8Base64.slice(0, 300),
      `${key.pkcs8Base64.slice(0, 100)}!${key.pkcs8Base64.slice(101)}`,
      key.spkiPem,
      "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----",
      "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES\n\nMIIB\n-----END RSA PRIVATE KEY-----",
      "",
      `${key.pkcs8Pem}${key.pkcs8Pem}`,
    ];
    for (const text of broken) {
      let caught: unknown;
      try {
        await importPrivateKey(text);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(PaymentsError);
      expect((caught as PaymentsError).code).toBe("invalid_key");
      expect((caught as PaymentsError).message).not.toContain(key.pkcs8Base64.slice(40, 60));
    }
    await expect(importPublicKey(key.pkcs8Pem)).rejects.toMatchObject({ code: "invalid_key" });
    expect(() => certificateInfo(base64ToBytes(key.spkiBase64))).toThrow(PaymentsError);
  });

  it("refuses a non-RSA key", async () => {
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const pem = ec.privateKey.export({ type: "pkcs8", format: "pem" }) as string;
    await expect(importPrivateKey(pem)).rejects.toThrow("not an RSA private key");
  });
});

describe("aesGcmDecrypt (WeChat Pay resources)", () => {
  const apiV3Key = "0123456789abcdefABCDEF0123456789";
  const plain = JSON.stringify({ out_trade_no: "o-1", trade_state: "SUCCESS", note: "支付成功" });

  it("decrypts node:crypto's AES-256-GCM (ciphertext‖tag)", async () => {
    const nonce = randomBytes(6).toString("hex");
    const ciphertext = nodeAesGcmEncrypt(apiV3Key, nonce, "transaction", plain);
    expect(await aesGcmDecrypt(apiV3Key, nonce, "transaction", ciphertext)).toBe(plain);
    const noAad = nodeAesGcmEncrypt(apiV3Key, nonce, "", plain);
    expect(await aesGcmDecrypt(apiV3Key, nonce, "", noAad)).toBe(plain);
  });

  it("fails with decrypt_failed on another aad, nonce, key, a flipped bit, a short key", async () => {
    const nonce = "a1b2c3d4e5f6";
    const ciphertext = nodeAesGcmEncrypt(apiV3Key, nonce, "transaction", plain);
    const bytes = Buffer.from(ciphertext, "base64");
    bytes[3] = (bytes[3] ?? 0) ^ 1;
    const attempts: [string, string, string, string][] = [
      [apiV3Key, nonce, "certificate", ciphertext],
      [apiV3Key, "a1b2c3d4e5f7", "transaction", ciphertext],
      ["X123456789abcdefABCDEF0123456789", nonce, "transaction", ciphertext],
      [apiV3Key, nonce, "transaction", bytes.toString("base64")],
      ["short", nonce, "transaction", ciphertext],
      [apiV3Key, nonce, "transaction", "AAAA"],
    ];
    for (const [k, n, a, c] of attempts) {
      await expect(aesGcmDecrypt(k, n, a, c)).rejects.toMatchObject({ code: "decrypt_failed" });
    }
  });
});

describe("importKeyCached", () => {
  it("imports a key text once, forgets failures, and keeps at most 64 keys", async () => {
    const first = importKeyCached("private", key.pkcs1Pem);
    expect(importKeyCached("private", key.pkcs1Pem)).toBe(first);
    expect(importKeyCached("public", key.pkcs1Pem)).not.toBe(first);
    expect(await signRsaSha256(await first, "x")).toBe(nodeSign(key.pkcs8Pem, "x"));
    const bad = importKeyCached("private", "AAAA");
    await expect(bad).rejects.toMatchObject({ code: "invalid_key" });
    const again = importKeyCached("private", "AAAA");
    expect(again).not.toBe(bad);
    await expect(again).rejects.toMatchObject({ code: "invalid_key" });
    // 64 other keys later, the first is evicted (spelt differently, each text is its own entry).
    const others = Array.from({ length: 64 }, (_, i) =>
      importKeyCached("public", `${key.spkiPem}${" ".repeat(i + 1)}`),
    );
    await Promise.all(others);
    expect(importKeyCached("private", key.pkcs1Pem)).not.toBe(first);
  });
});

describe("randomNonce", () => {
  it("gives 32 hex characters, different each time", () => {
    const a = randomNonce();
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(randomNonce()).not.toBe(a);
  });
});
