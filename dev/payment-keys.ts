// RSA keys and certificates for the payment sandboxes and their tests: generation, PEM/base64 and PKCS#1/#8 conversions.
import { execFileSync } from "node:child_process";
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  X509Certificate,
} from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type RsaKeyPair = { privateKey: KeyObject; publicKey: KeyObject };

export type PemLabel =
  | "PRIVATE KEY"
  | "RSA PRIVATE KEY"
  | "PUBLIC KEY"
  | "RSA PUBLIC KEY"
  | "CERTIFICATE";

/** A fresh 2048-bit RSA pair, generated off the main thread (a few hundred ms on a slow core). */
export function generateRsaKeyPair(): Promise<RsaKeyPair> {
  return new Promise((resolve, reject) => {
    generateKeyPair("rsa", { modulusLength: 2048, publicExponent: 0x10001 }, (error, pub, priv) => {
      if (error) reject(error);
      else resolve({ privateKey: priv, publicKey: pub });
    });
  });
}

const pairs = new Map<string, Promise<RsaKeyPair>>();

/**
 * The key pair for `role` in this process, generated on first use: sandboxes and tests started
 * in one process share them, so each role costs one generation per process.
 */
export function rsaKeyPair(role: string): Promise<RsaKeyPair> {
  let pair = pairs.get(role);
  if (!pair) {
    pair = generateRsaKeyPair();
    pairs.set(role, pair);
  }
  return pair;
}

/** A private key as PEM: PKCS#8 (`BEGIN PRIVATE KEY`, the default) or PKCS#1 (`BEGIN RSA PRIVATE KEY`). */
export function privateKeyPem(key: KeyObject, format: "pkcs8" | "pkcs1" = "pkcs8"): string {
  return key.export({ type: format, format: "pem" }).toString();
}

/** A public key as PEM: SPKI (`BEGIN PUBLIC KEY`, the default) or PKCS#1 (`BEGIN RSA PUBLIC KEY`). */
export function publicKeyPem(key: KeyObject, format: "spki" | "pkcs1" = "spki"): string {
  return key.export({ type: format, format: "pem" }).toString();
}

/** The base64 body of a PEM, on one line (the way Alipay's key tool shows keys). */
export function pemToBase64(pem: string): string {
  return pem
    .replace(/-----(BEGIN|END) [A-Z0-9 ]+-----/g, "")
    .replace(/\s+/g, "")
    .trim();
}

/** Wraps bare base64 into a PEM with the given label, 64 characters a line. */
export function base64ToPem(base64: string, label: PemLabel): string {
  const body = base64.replace(/\s+/g, "");
  const lines = body.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

/** Is this bare base64 private key PKCS#8? (Its DER's second element is a SEQUENCE; PKCS#1's is an INTEGER.) */
export function isPkcs8Der(der: Buffer): boolean {
  // SEQUENCE header (long form length for 2048-bit keys), then the first element INTEGER 0,
  // then PKCS#8 has the AlgorithmIdentifier SEQUENCE where PKCS#1 has the modulus INTEGER.
  let i = 1;
  const first = der[i] ?? 0;
  i += first & 0x80 ? 1 + (first & 0x7f) : 1;
  if (der[i] !== 0x02) return false;
  const intLength = der[i + 1] ?? 0;
  i += 2 + intLength;
  return der[i] === 0x30;
}

/** Reads a private key given as PEM or bare base64, PKCS#8 or PKCS#1. */
export function readPrivateKey(key: string): KeyObject {
  if (key.includes("-----BEGIN")) return createPrivateKey(key);
  const der = Buffer.from(key.replace(/\s+/g, ""), "base64");
  return createPrivateKey({ key: der, format: "der", type: isPkcs8Der(der) ? "pkcs8" : "pkcs1" });
}

/** Reads a public key given as PEM (SPKI, PKCS#1 or a certificate) or bare base64 SPKI. */
export function readPublicKey(key: string): KeyObject {
  if (key.includes("-----BEGIN CERTIFICATE")) return new X509Certificate(key).publicKey;
  if (key.includes("-----BEGIN")) return createPublicKey(key);
  const der = Buffer.from(key.replace(/\s+/g, ""), "base64");
  return createPublicKey({ key: der, format: "der", type: "spki" });
}

/** PKCS#8 (PEM or base64) → PKCS#1 PEM. */
export function pkcs8ToPkcs1(key: string): string {
  return privateKeyPem(readPrivateKey(key), "pkcs1");
}

/** PKCS#1 (PEM or base64) → PKCS#8 PEM. */
export function pkcs1ToPkcs8(key: string): string {
  return privateKeyPem(readPrivateKey(key), "pkcs8");
}

/** SPKI (PEM or base64) → PKCS#1 `RSA PUBLIC KEY` PEM. */
export function spkiToPkcs1(key: string): string {
  return publicKeyPem(readPublicKey(key), "pkcs1");
}

/** PKCS#1 `RSA PUBLIC KEY` PEM → SPKI PEM. */
export function pkcs1ToSpki(key: string): string {
  return publicKeyPem(readPublicKey(key), "spki");
}

/** A random certificate serial as upper-case hex (WeChat Pay's style: 40 digits), positive. */
export function randomSerialHex(bytes = 20): string {
  const raw = randomBytes(bytes);
  // Clear the top bit and keep the first byte non-zero so DER needs no padding byte and
  // the serial prints with exactly `2 * bytes` digits.
  raw[0] = ((raw[0] ?? 0) & 0x7f) | 0x10;
  return raw.toString("hex").toUpperCase();
}

export type SelfSignedCertificate = {
  pem: string;
  serial: string;
  notBefore: Date;
  notAfter: Date;
};

/** A certificate and its key, to issue others with. */
export type CertificateAuthority = { pem: string; privateKey: KeyObject };

/** Runs the openssl binary in `dir`; says plainly when it is missing. */
function openssl(args: string[]): string {
  try {
    return execFileSync("openssl", args, { stdio: ["ignore", "pipe", "pipe"] }).toString();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(
      code === "ENOENT"
        ? "certificate mode needs the openssl binary on PATH (apt-get install openssl)"
        : `openssl could not make a certificate: ${String((error as Error).message).split("\n")[0]}`,
    );
  }
}

/**
 * An X.509 certificate for `privateKey`'s public half, made by the `openssl` binary (node:crypto
 * reads certificates but cannot issue them): self-signed (openssl's default extensions, those of
 * a CA), or signed by `issuer`, then marked a certificate authority or not by `ca`. Keys go through a
 * private temp directory that is removed at once.
 */
export function issueCertificate(
  privateKey: KeyObject,
  options: {
    subject: string;
    serial?: string;
    days?: number;
    issuer?: CertificateAuthority;
    ca?: boolean;
  },
): SelfSignedCertificate {
  const serial = options.serial ?? randomSerialHex();
  const dir = mkdtempSync(join(tmpdir(), "dq-cert-"));
  try {
    const file = (name: string, text: string) => {
      const path = join(dir, name);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    };
    const keyFile = file("key.pem", privateKeyPem(privateKey));
    const extFile = file(
      "ext.cnf",
      options.ca
        ? "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
        : "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n",
    );
    const days = String(options.days ?? 1825);
    let pem: string;
    if (options.issuer) {
      const csr = file(
        "csr.pem",
        openssl(["req", "-new", "-utf8", "-key", keyFile, "-subj", options.subject]),
      );
      const caFile = file("ca.pem", options.issuer.pem);
      const caKeyFile = file("ca-key.pem", privateKeyPem(options.issuer.privateKey));
      // biome-ignore format: one openssl command line
      pem = openssl(["x509", "-req", "-in", csr, "-CA", caFile, "-CAkey", caKeyFile, "-sha256", "-days", days, "-set_serial", `0x${serial}`, "-extfile", extFile]);
    } else {
      // biome-ignore format: one openssl command line
      pem = openssl(["req", "-new", "-x509", "-utf8", "-sha256", "-key", keyFile, "-subj", options.subject, "-days", days, "-set_serial", `0x${serial}`]);
    }
    const cert = new X509Certificate(pem);
    return {
      pem,
      serial: cert.serialNumber.toUpperCase(),
      notBefore: new Date(cert.validFrom),
      notAfter: new Date(cert.validTo),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A self-signed X.509 certificate for `privateKey` (see issueCertificate). */
export function selfSignedCertificate(
  privateKey: KeyObject,
  options: { subject: string; serial?: string; days?: number },
): SelfSignedCertificate {
  return issueCertificate(privateKey, options);
}

/** Alipay's certificate-mode files, as its console hands them out, made for given keys. */
export type AlipayCertificateFiles = {
  /** The app's certificate (for the merchant's key), then the intermediate that issued it. */
  appCert: string;
  /** Alipay's certificate (for Alipay's signing key), then the intermediate that issued it. */
  alipayCert: string;
  /** The root bundle: an RSA root (which issued both intermediates) and an EC root, as Alipay's. */
  alipayRootCert: string;
  /** The RSA root and its key, to issue more (another Alipay certificate, a rotation). */
  root: CertificateAuthority;
};

const ANT = "/C=CN/O=Ant Financial/OU=Certification Authority";

/**
 * Alipay's certificate chain in miniature: a root (RSA, with an EC root beside it in the bundle,
 * whose SN the SDKs leave out), two intermediates ("Class 1" for apps, "Class 2" for Alipay),
 * and the app's and Alipay's own certificates for the given keys. Names follow Alipay's, marked
 * as the sandbox's. Keys of the authorities are generated once per process (rsaKeyPair).
 */
export async function alipayCertificateFiles(keys: {
  app: KeyObject;
  alipay: KeyObject;
  appId: string;
}): Promise<AlipayCertificateFiles> {
  const [rootKeys, class1Keys, class2Keys] = await Promise.all([
    rsaKeyPair("alipay-root-ca"),
    rsaKeyPair("alipay-class1-ca"),
    rsaKeyPair("alipay-class2-ca"),
  ]);
  const ecRootKey = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
  const root = issueCertificate(rootKeys.privateKey, {
    subject: `${ANT}/CN=Ant Financial Certification Authority R1 (sandbox)`,
    ca: true,
  });
  const ecRoot = issueCertificate(ecRootKey, {
    subject: `${ANT}/CN=Ant Financial Certification Authority E1 (sandbox)`,
    ca: true,
  });
  const rootCa = { pem: root.pem, privateKey: rootKeys.privateKey };
  const class1 = issueCertificate(class1Keys.privateKey, {
    subject: `${ANT}/CN=Ant Financial Certification Authority Class 1 R1 (sandbox)`,
    ca: true,
    issuer: rootCa,
  });
  const class2 = issueCertificate(class2Keys.privateKey, {
    subject: `${ANT}/CN=Ant Financial Certification Authority Class 2 R1 (sandbox)`,
    ca: true,
    issuer: rootCa,
  });
  const appCert = issueCertificate(keys.app, {
    subject: `/C=CN/O=delayq sandbox merchant/OU=Alipay/CN=${keys.appId}`,
    issuer: { pem: class1.pem, privateKey: class1Keys.privateKey },
  });
  const alipayCert = issueCertificate(keys.alipay, {
    subject: "/C=CN/O=Alipay (sandbox)/OU=Alipay/CN=Alipay RSA2048 (sandbox)",
    issuer: { pem: class2.pem, privateKey: class2Keys.privateKey },
  });
  return {
    appCert: appCert.pem + class1.pem,
    alipayCert: alipayCert.pem + class2.pem,
    alipayRootCert: root.pem + ecRoot.pem,
    root: rootCa,
  };
}
