// X.509 certificates for the providers' certificate modes, read with @peculiar/asn1-x509 (the
// parsing layer of @peculiar/x509, without its DI container and Reflect polyfill) and checked with
// WebCrypto: serial, issuer and subject, validity, subjectPublicKeyInfo, and whether one
// certificate's signature is another's. Errors never quote the certificate.

import { AsnConvert } from "@peculiar/asn1-schema";
import { Certificate } from "@peculiar/asn1-x509";
import { toHex } from "../domain/bytes";
import { PAYMENTS_ERROR_CODE, PaymentsError } from "./provider";

/** One attribute of a distinguished name: its type (an OID) and its value's content bytes. */
export type NameAttribute = { type: string; value: Uint8Array };

/** What delayq reads from a certificate. */
export type X509Certificate = {
  der: Uint8Array;
  /** Upper-case hex without sign-padding zeros (WeChat Pay's Wechatpay-Serial). */
  serial: string;
  /** The same serial in decimal (Alipay's SNs). */
  serialDecimal: string;
  /** The issuer's and subject's DER, re-encoded alike so that they compare byte for byte. */
  issuer: Uint8Array;
  subject: Uint8Array;
  /** The issuer's attributes in certificate order (RDN by RDN). */
  issuerAttributes: NameAttribute[];
  /** Validity, unix ms. */
  notBefore: number;
  notAfter: number;
  /** The subjectPublicKeyInfo's DER, for WebCrypto's importKey("spki"). */
  spki: Uint8Array;
  /** The public key's algorithm OID (1.2.840.113549.1.1.1 for RSA). */
  keyAlgorithm: string;
  /** The signature algorithm OID, e.g. 1.2.840.113549.1.1.11 (sha256WithRSAEncryption). */
  signatureAlgorithm: string;
  /** The signed bytes (tbsCertificate exactly as received) and the signature over them. */
  tbs: Uint8Array;
  signature: Uint8Array;
};

export const RSA_ENCRYPTION = "1.2.840.113549.1.1.1";

/** The signature algorithms WebCrypto can check (RSASSA-PKCS1-v1_5), by OID. */
const RSA_SIGNATURES: Readonly<Record<string, string>> = {
  "1.2.840.113549.1.1.5": "SHA-1",
  "1.2.840.113549.1.1.11": "SHA-256",
  "1.2.840.113549.1.1.12": "SHA-384",
  "1.2.840.113549.1.1.13": "SHA-512",
};

/** Whether a signature algorithm OID is one of RSA's (the SDKs' test for the root bundle). */
export function isRsaSignature(oid: string): boolean {
  return oid.startsWith("1.2.840.113549.1.1.");
}

const bytes = (buffer: ArrayBuffer | ArrayBufferView): Uint8Array =>
  buffer instanceof ArrayBuffer
    ? new Uint8Array(buffer)
    : new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength).slice();

/** The header and content lengths of the DER element at the start of `der`. */
function lengths(der: Uint8Array): { header: number; content: number } {
  const first = der[1] ?? 0;
  if (!(first & 0x80)) return { header: 2, content: first };
  let length = 0;
  for (let i = 0; i < (first & 0x7f); i++) length = length * 256 + (der[2 + i] ?? 0);
  return { header: 2 + (first & 0x7f), content: length };
}

/** The content of one DER element (its value without tag and length). */
function content(der: Uint8Array): Uint8Array {
  return der.subarray(lengths(der).header);
}

/** A positive DER INTEGER's bytes → upper-case hex without leading zeros, and decimal. */
function serialOf(integer: Uint8Array): { hex: string; decimal: string } {
  const hex = toHex(integer)
    .toUpperCase()
    .replace(/^0+(?=.)/, "");
  return { hex, decimal: BigInt(`0x${hex}`).toString(10) };
}

function parse(der: Uint8Array): Certificate {
  const { header, content } = lengths(der);
  // One certificate, nothing after it (the parser would ignore trailing bytes).
  if (der[0] === 0x30 && header + content === der.length) {
    try {
      const cert = AsnConvert.parse(der, Certificate);
      if (cert.tbsCertificateRaw) return cert;
    } catch {
      // reported below
    }
  }
  throw new PaymentsError(PAYMENTS_ERROR_CODE.invalidKey, "not an X.509 certificate");
}

/** A DER certificate's fields. Throws PaymentsError (invalidKey) when it is not one. */
export function parseCertificate(der: Uint8Array): X509Certificate {
  const cert = parse(der);
  const tbs = cert.tbsCertificate;
  const serial = serialOf(bytes(tbs.serialNumber));
  const issuerAttributes = [...tbs.issuer].flatMap((rdn) =>
    [...rdn].map((attribute) => ({
      type: attribute.type,
      value: content(bytes(AsnConvert.serialize(attribute.value))).slice(),
    })),
  );
  return {
    der,
    serial: serial.hex,
    serialDecimal: serial.decimal,
    issuer: bytes(AsnConvert.serialize(tbs.issuer)),
    subject: bytes(AsnConvert.serialize(tbs.subject)),
    issuerAttributes,
    notBefore: tbs.validity.notBefore.getTime().getTime(),
    notAfter: tbs.validity.notAfter.getTime().getTime(),
    spki: bytes(AsnConvert.serialize(tbs.subjectPublicKeyInfo)),
    keyAlgorithm: tbs.subjectPublicKeyInfo.algorithm.algorithm,
    signatureAlgorithm: cert.signatureAlgorithm.algorithm,
    tbs: bytes(cert.tbsCertificateRaw as ArrayBuffer),
    signature: bytes(cert.signatureValue),
  };
}

/**
 * Whether `at` (unix ms) falls within the certificate's validity, widened by `skewMs` at both
 * ends for a clock that is not the issuer's (a certificate issued a moment ago is valid).
 */
export function validAt(cert: X509Certificate, at: number, skewMs = 0): boolean {
  return cert.notBefore - skewMs <= at && at <= cert.notAfter + skewMs;
}

/**
 * Whether `issuer` issued `cert`: the issuer's subject is the certificate's issuer, and the
 * issuer's RSA key verifies the certificate's RSASSA-PKCS1-v1_5 signature (WebCrypto). Other
 * algorithms answer false.
 */
export async function issuedBy(cert: X509Certificate, issuer: X509Certificate): Promise<boolean> {
  const hash = RSA_SIGNATURES[cert.signatureAlgorithm];
  if (!hash || issuer.keyAlgorithm !== RSA_ENCRYPTION) return false;
  if (toHex(cert.issuer) !== toHex(issuer.subject)) return false;
  try {
    const algorithm = { name: "RSASSA-PKCS1-v1_5", hash };
    const key = await crypto.subtle.importKey("spki", issuer.spki, algorithm, false, ["verify"]);
    return await crypto.subtle.verify(algorithm, key, cert.signature, cert.tbs);
  } catch {
    return false;
  }
}
