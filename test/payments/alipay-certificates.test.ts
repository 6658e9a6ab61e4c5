// Alipay's certificate mode against independent implementations: SNs as the official alipay-sdk
// computes them (its own constructor, antcertutil.ts), chains made and checked by openssl and
// node:crypto, and the SN check of answers.
import { generateKeyPairSync, X509Certificate as NodeX509 } from "node:crypto";
import { AlipaySdk } from "alipay-sdk";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type AlipayCertificateFiles,
  alipayCertificateFiles,
  issueCertificate,
  privateKeyPem,
  rsaKeyPair,
} from "../../dev/payment-keys";
import {
  alipayCertSn,
  answerCertificateProblem,
  chainProblem,
  readAlipayCertificates,
} from "../../src/payments/alipay-certificates";
import { certificateBundle, certificates } from "../../src/payments/keys";
import { ANSWER_CLOCK_SKEW_MS } from "../../src/payments/provider";
import { issuedBy, parseCertificate } from "../../src/payments/x509";

const rsa = () => generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;

/** The SNs the official SDK computes for these files (and sends on every request). */
function sdkSns(files: { appCert: string; alipayCert: string; alipayRootCert: string }) {
  const sdk = new AlipaySdk({
    appId: "2021000000000001",
    privateKey: privateKeyPem(rsa()),
    keyType: "PKCS8",
    appCertContent: files.appCert,
    alipayPublicCertContent: files.alipayCert,
    alipayRootCertContent: files.alipayRootCert,
  });
  const config = sdk.config as unknown as Record<string, string>;
  return {
    appCertSn: config.appCertSn,
    alipayCertSn: config.alipayCertSn,
    alipayRootCertSn: config.alipayRootCertSn,
  };
}

let files: AlipayCertificateFiles;
beforeAll(async () => {
  const [app, alipay] = await Promise.all([rsaKeyPair("test-app"), rsaKeyPair("test-alipay")]);
  files = await alipayCertificateFiles({
    app: app.privateKey,
    alipay: alipay.privateKey,
    appId: "2021000000000001",
  });
}, 30_000);

describe("Alipay certificate SNs equal the official alipay-sdk's", () => {
  it("for Alipay-shaped files: leaf then intermediate, and a root bundle with an EC root", () => {
    const ours = readAlipayCertificates(files);
    const sdk = sdkSns(files);
    expect(ours.appCertSn).toBe(sdk.appCertSn);
    expect(ours.alipayCertSn).toBe(sdk.alipayCertSn);
    expect(ours.alipayRootCertSn).toBe(sdk.alipayRootCertSn);
    // The EC root is left out: one SN, 32 hex digits.
    expect(ours.alipayRootCertSn).toMatch(/^[0-9a-f]{32}$/);
    expect(certificateBundle(files.alipayRootCert)).toHaveLength(2);
  });

  it("for issuers of every kind of name and serials of every size", () => {
    const key = rsa();
    const leafKey = rsa();
    const subjects = [
      "/C=CN/ST=Zhejiang/L=Hangzhou/O=Ant Financial/OU=Certification Authority/CN=Ant CA",
      "/CN=蚂蚁金服 测试/O=支付宝（中国）网络技术有限公司/C=CN",
      "/emailAddress=ca@example.com/CN=With E/serialNumber=42/DC=example",
      '/O=Commas, and = signs/CN=quote " and backslash \\\\ here',
      "/CN=Single",
    ];
    // A serial whose top bit is set (DER pads a zero), a short one, and a long one.
    const serials = ["80FF00FF00FF00FF", "01", "7F1234567890ABCDEF1234567890ABCDEF123456"];
    for (const subject of subjects) {
      const root = issueCertificate(key, { subject, ca: true });
      for (const serial of serials) {
        const leaf = issueCertificate(leafKey, {
          subject: "/CN=leaf",
          serial,
          issuer: { pem: root.pem, privateKey: key },
        });
        const set = { appCert: leaf.pem, alipayCert: leaf.pem, alipayRootCert: root.pem };
        const ours = readAlipayCertificates(set);
        const sdk = sdkSns(set);
        expect(ours.appCertSn, `${subject} ${serial}`).toBe(sdk.appCertSn);
        expect(ours.alipayRootCertSn, subject).toBe(sdk.alipayRootCertSn);
      }
    }
  }, 60_000);

  it("for a root bundle of several RSA roots, `_`-joined in bundle order", () => {
    const roots = ["/CN=Root A", "/CN=Root B", "/CN=Root C"].map((subject) =>
      issueCertificate(rsa(), { subject, ca: true }),
    );
    const bundle = roots.map((root) => root.pem).join("");
    const set = {
      appCert: roots[0]?.pem ?? "",
      alipayCert: roots[0]?.pem ?? "",
      alipayRootCert: bundle,
    };
    const ours = readAlipayCertificates(set).alipayRootCertSn;
    expect(ours).toBe(sdkSns(set).alipayRootCertSn);
    expect(ours.split("_")).toHaveLength(3);
    expect(ours.split("_")[1]).toBe(alipayCertSn(certificates(roots[1]?.pem ?? "")[0] as never));
  }, 30_000);
});

describe("x509: what the library reads, against node:crypto's X509Certificate", () => {
  it("serial, validity, SPKI and the chain signature", async () => {
    const [alipayPem] =
      files.alipayCert.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----\n/g) ?? [];
    const node = new NodeX509(alipayPem as string);
    const [leaf, intermediate] = certificates(files.alipayCert);
    if (!leaf || !intermediate) throw new Error("two certificates expected");
    expect(leaf.serial).toBe(node.serialNumber.toUpperCase().replace(/^0+/, ""));
    expect(BigInt(`0x${leaf.serial}`).toString()).toBe(leaf.serialDecimal);
    expect(leaf.notBefore).toBe(Date.parse(node.validFrom));
    expect(leaf.notAfter).toBe(Date.parse(node.validTo));
    expect(Buffer.from(leaf.spki)).toEqual(node.publicKey.export({ type: "spki", format: "der" }));
    const [root] = certificateBundle(files.alipayRootCert);
    if (!root) throw new Error("a root expected");
    // node:crypto agrees on who issued whom.
    const nodeIntermediate = new NodeX509(files.alipayCert.slice(alipayPem?.length));
    expect(node.verify(nodeIntermediate.publicKey)).toBe(true);
    expect(await issuedBy(leaf, intermediate)).toBe(true);
    expect(await issuedBy(intermediate, root)).toBe(true);
    expect(await issuedBy(leaf, root)).toBe(false);
    expect(await issuedBy(intermediate, leaf)).toBe(false);
  });

  it("refuses what is not one certificate, without quoting it", () => {
    const der = parseCertificate(certificates(files.appCert)[0]?.der as Uint8Array).der;
    for (const bad of [der.slice(0, 200), Uint8Array.from([...der, 0]), new Uint8Array([48, 0])]) {
      expect(() => parseCertificate(bad)).toThrow(/^not an X\.509 certificate$/);
    }
  });
});

describe("chainProblem: alipayCert must chain to a root of alipayRootCert", () => {
  it("accepts leaf → intermediate → root, intermediates in any order", async () => {
    expect(await chainProblem(readAlipayCertificates(files))).toBeUndefined();
    const [leafPem, intermediatePem] = files.alipayCert.split(/(?<=-----END CERTIFICATE-----\n)/);
    const extra = issueCertificate(rsa(), { subject: "/CN=unrelated", ca: true }).pem;
    const reordered = { ...files, alipayCert: `${leafPem}${extra}${intermediatePem}` };
    expect(await chainProblem(readAlipayCertificates(reordered))).toBeUndefined();
  });

  it("refuses a missing intermediate, another root, and a self-signed alipayCert", async () => {
    const [leafPem] = files.alipayCert.split(/(?<=-----END CERTIFICATE-----\n)/);
    const otherRoot = issueCertificate(rsa(), {
      subject:
        "/C=CN/O=Ant Financial/OU=Certification Authority/CN=Ant Financial Certification Authority R1 (sandbox)",
      ca: true,
    });
    const selfSigned = issueCertificate(rsa(), { subject: "/CN=Alipay RSA2048 (sandbox)" }).pem;
    const cases = [
      { ...files, alipayCert: leafPem as string },
      { ...files, alipayRootCert: otherRoot.pem },
      { ...files, alipayCert: selfSigned },
    ];
    for (const set of cases) {
      expect(await chainProblem(readAlipayCertificates(set))).toBe(
        `"alipayCert" does not chain to a certificate of "alipayRootCert" (its signature is not a root's, nor an intermediate's given after it in "alipayCert")`,
      );
    }
  }, 30_000);
});

describe("answerCertificateProblem: the SN an answer names", () => {
  it("is alipayCert's and within its validity, or the answer is not trusted", () => {
    const certs = readAlipayCertificates(files);
    const now = Date.now();
    expect(answerCertificateProblem(undefined, undefined, now)).toBeUndefined();
    expect(answerCertificateProblem(certs, certs.alipayCertSn, now)).toBeUndefined();
    // Clocks may be 5 minutes apart: a certificate issued a moment ago is valid.
    const justIssued = certs.alipayCert.notBefore - ANSWER_CLOCK_SKEW_MS + 1000;
    expect(answerCertificateProblem(certs, certs.alipayCertSn, justIssued)).toBeUndefined();
    expect(answerCertificateProblem(certs, undefined, now)).toBe(
      "unverified: no Alipay certificate named (alipay_cert_sn, alipay-sn)",
    );
    expect(answerCertificateProblem(certs, certs.appCertSn, now)).toBe(
      `unverified: signed with Alipay certificate ${certs.appCertSn}, not alipayCert's ${certs.alipayCertSn}`,
    );
    expect(
      answerCertificateProblem(
        certs,
        certs.alipayCertSn,
        certs.alipayCert.notAfter + ANSWER_CLOCK_SKEW_MS + 1000,
      ),
    ).toMatch(/^unverified: alipayCert is not valid now \(valid .* to .*\)$/);
    expect(
      answerCertificateProblem(
        certs,
        certs.alipayCertSn,
        certs.alipayCert.notBefore - ANSWER_CLOCK_SKEW_MS - 1000,
      ),
    ).toMatch(/^unverified: alipayCert is not valid now/);
  });
});
