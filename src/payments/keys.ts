// RSA key and certificate text → the DER WebCrypto imports (PKCS#8, SPKI), by a small DER walk.
// Accepts PEM or bare base64, PKCS#8 or PKCS#1 private keys, SPKI or PKCS#1 public keys, and X.509
// certificates (read by x509.ts, with @peculiar/asn1-x509). Errors never quote the key.

import { sameBytes } from "../domain/bytes";
import { PAYMENTS_ERROR_CODE, PaymentsError } from "./provider";
import { parseCertificate, type X509Certificate } from "./x509";

const SEQUENCE = 0x30;
const INTEGER = 0x02;
const BIT_STRING = 0x03;
const OCTET_STRING = 0x04;
const NULL = 0x05;
const OID = 0x06;

/** The AlgorithmIdentifier of rsaEncryption (1.2.840.113549.1.1.1) with NULL parameters. */
// biome-ignore format: DER bytes read best in one row
const RSA_ALGORITHM = Uint8Array.from([
  SEQUENCE, 0x0d, OID, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, NULL, 0x00,
]);
const RSA_OID = RSA_ALGORITHM.subarray(4, 13);

/** A certificate with an RSA key: its subjectPublicKeyInfo, serial (upper-case hex), and the rest. */
export type CertificateInfo = X509Certificate;

function fail(message: string): never {
  throw new PaymentsError(PAYMENTS_ERROR_CODE.invalidKey, message);
}

type Tlv = { tag: number; start: number; contentStart: number; end: number };

/** One DER element at `offset`, bounded by `limit`. Definite lengths only (DER). */
function readTlv(bytes: Uint8Array, offset: number, limit = bytes.length): Tlv {
  if (offset + 2 > limit) fail("truncated DER");
  const tag = bytes[offset] as number;
  let length = bytes[offset + 1] as number;
  let contentStart = offset + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4 || contentStart + count > limit) fail("bad DER length");
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + (bytes[contentStart + i] as number);
    contentStart += count;
  }
  const end = contentStart + length;
  if (end > limit) fail("truncated DER");
  return { tag, start: offset, contentStart, end };
}

/** The elements directly inside a constructed element. */
function children(bytes: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  let at = parent.contentStart;
  while (at < parent.end) {
    const child = readTlv(bytes, at, parent.end);
    out.push(child);
    at = child.end;
  }
  return out;
}

function top(bytes: Uint8Array): Tlv {
  const outer = readTlv(bytes, 0);
  if (outer.tag !== SEQUENCE || outer.end !== bytes.length) fail("not a DER SEQUENCE");
  return outer;
}

function encodeLength(length: number): number[] {
  if (length < 0x80) return [length];
  const out: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) out.unshift(n % 256);
  return [0x80 | out.length, ...out];
}

function tlv(tag: number, ...parts: Uint8Array[]): Uint8Array {
  const length = parts.reduce((sum, part) => sum + part.length, 0);
  const header = [tag, ...encodeLength(length)];
  const out = new Uint8Array(header.length + length);
  out.set(header, 0);
  let at = header.length;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function isRsaAlgorithm(bytes: Uint8Array, algorithm: Tlv): boolean {
  if (algorithm.tag !== SEQUENCE) return false;
  const oid = children(bytes, algorithm)[0];
  return (
    oid !== undefined &&
    oid.tag === OID &&
    sameBytes(bytes.subarray(oid.contentStart, oid.end), RSA_OID)
  );
}

/** Standard base64 (whitespace and escaped newlines ignored) → bytes. */
export function base64ToBytes(text: string): Uint8Array {
  const clean = text.replace(/\\[rn]|\s/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) fail("not base64");
  const binary = atob(clean);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** A PEM block: its label and DER. */
export type PemBlock = { label: string; der: Uint8Array };

/** Every PEM block in `text`, in order; empty when the text holds none. */
export function pemBlocks(text: string): PemBlock[] {
  // Secrets pasted through JSON or shell often carry "\n" as two characters: treat them as breaks.
  const normal = text.replace(/\\r\\n|\\n|\\r/g, "\n");
  const out: PemBlock[] = [];
  const pattern = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;
  for (const match of normal.matchAll(pattern)) {
    const label = match[1] ?? "";
    const body = match[2] ?? "";
    if (/Proc-Type:|DEK-Info:/.test(body)) fail("encrypted PEM keys are not supported");
    out.push({ label, der: base64ToBytes(body) });
  }
  if (out.length === 0 && normal.includes("-----BEGIN")) fail("malformed PEM");
  return out;
}

/** The one block of a text, or the bare base64 as a block without a label. */
function single(text: string): { label: string | undefined; der: Uint8Array } {
  const blocks = pemBlocks(text);
  if (blocks.length > 1) fail("expected one PEM block, found several");
  const block = blocks[0];
  if (block) return block;
  if (text.trim() === "") fail("empty key");
  return { label: undefined, der: base64ToBytes(text) };
}

/** PKCS#1 RSAPrivateKey → PKCS#8 PrivateKeyInfo. */
export function wrapPkcs1PrivateKey(pkcs1: Uint8Array): Uint8Array {
  return tlv(SEQUENCE, Uint8Array.from([INTEGER, 1, 0]), RSA_ALGORITHM, tlv(OCTET_STRING, pkcs1));
}

/** PKCS#1 RSAPublicKey → SubjectPublicKeyInfo. */
export function wrapPkcs1PublicKey(pkcs1: Uint8Array): Uint8Array {
  return tlv(SEQUENCE, RSA_ALGORITHM, tlv(BIT_STRING, Uint8Array.of(0), pkcs1));
}

function checkPkcs1Private(der: Uint8Array): void {
  const parts = children(der, top(der));
  // version, n, e, d, p, q, dp, dq, qinv
  if (parts.length < 9 || parts.some((part) => part.tag !== INTEGER)) {
    fail("not a PKCS#1 RSA private key");
  }
}

function checkPkcs8(der: Uint8Array): void {
  const [version, algorithm, key] = children(der, top(der));
  if (version?.tag !== INTEGER || !algorithm || key?.tag !== OCTET_STRING) {
    fail("not a PKCS#8 private key");
  }
  if (!isRsaAlgorithm(der, algorithm)) fail("not an RSA private key");
}

function checkPkcs1Public(der: Uint8Array): void {
  const parts = children(der, top(der));
  if (parts.length !== 2 || parts.some((part) => part.tag !== INTEGER)) {
    fail("not a PKCS#1 RSA public key");
  }
}

function checkSpki(der: Uint8Array): void {
  const [algorithm, key, extra] = children(der, top(der));
  if (!algorithm || key?.tag !== BIT_STRING || extra) fail("not a public key (SPKI)");
  if (!isRsaAlgorithm(der, algorithm)) fail("not an RSA public key");
}

/** Any RSA private key text → PKCS#8 DER. */
export function privateKeyToPkcs8(text: string): Uint8Array {
  const { label, der } = single(text);
  if (label === "PRIVATE KEY") {
    checkPkcs8(der);
    return der;
  }
  if (label === "RSA PRIVATE KEY") {
    checkPkcs1Private(der);
    return wrapPkcs1PrivateKey(der);
  }
  if (label !== undefined) fail(`expected a private key, found a PEM "${label}" block`);
  // Bare base64: PKCS#8 opens with INTEGER version then the AlgorithmIdentifier SEQUENCE; PKCS#1
  // opens with INTEGER version then INTEGER modulus.
  const second = children(der, top(der))[1];
  if (second?.tag === SEQUENCE) {
    checkPkcs8(der);
    return der;
  }
  checkPkcs1Private(der);
  return wrapPkcs1PrivateKey(der);
}

/** A DER X.509 certificate with an RSA key (its subjectPublicKeyInfo, serial, issuer, dates). */
export function certificateInfo(der: Uint8Array): CertificateInfo {
  const cert = parseCertificate(der);
  checkSpki(cert.spki);
  return cert;
}

/** A serial in one spelling: upper-case hex without leading zeros, so "00ab" and "AB" are equal. */
export function normalizeSerial(serial: string): string {
  return serial.toUpperCase().replace(/^0+(?=.)/, "");
}

/** The DER of every certificate in a text (PEM blocks, or one bare base64 DER). */
function certificateDers(text: string): Uint8Array[] {
  const blocks = pemBlocks(text);
  if (blocks.length === 0) {
    if (text.trim() === "") fail("empty certificate");
    return [base64ToBytes(text)];
  }
  return blocks.map((block) => {
    if (block.label !== "CERTIFICATE")
      fail(`expected a certificate, found a PEM "${block.label}" block`);
    return block.der;
  });
}

/** Every certificate in a text (PEM blocks, or one bare base64 DER); each must hold an RSA key. */
export function certificates(text: string): CertificateInfo[] {
  return certificateDers(text).map(certificateInfo);
}

/** Every certificate in a bundle (Alipay's root certificates), whatever its key's algorithm. */
export function certificateBundle(text: string): X509Certificate[] {
  return certificateDers(text).map(parseCertificate);
}

/** Any RSA public key text (SPKI, PKCS#1 RSA PUBLIC KEY, or an X.509 certificate) → SPKI DER. */
export function publicKeyToSpki(text: string): Uint8Array {
  const { label, der } = single(text);
  if (label === "PUBLIC KEY") {
    checkSpki(der);
    return der;
  }
  if (label === "RSA PUBLIC KEY") {
    checkPkcs1Public(der);
    return wrapPkcs1PublicKey(der);
  }
  if (label === "CERTIFICATE") return certificateInfo(der).spki;
  if (label !== undefined) fail(`expected a public key, found a PEM "${label}" block`);
  // Bare base64: SPKI is SEQUENCE{AlgorithmIdentifier, BIT STRING}; a certificate is
  // SEQUENCE{tbsCertificate, AlgorithmIdentifier, BIT STRING}; PKCS#1 is SEQUENCE{INTEGER, INTEGER}.
  const [first, second] = children(der, top(der));
  if (first?.tag === INTEGER) {
    checkPkcs1Public(der);
    return wrapPkcs1PublicKey(der);
  }
  if (second?.tag === SEQUENCE) return certificateInfo(der).spki;
  checkSpki(der);
  return der;
}
