// Alipay's public-key-certificate mode: the certificates' SNs (computed once, at start-up), the
// fields requests carry, the check of the SN an answer names, and whether alipayCert chains to a
// root of alipayRootCert. The SN is the official alipay-sdk's (antcertutil.ts: getCertSN): MD5
// hex of the issuer's name as that SDK writes it, followed by the serial in decimal.

import { bytesToBase64, certificateBundle, certificates } from "./keys";
import { md5Hex } from "./md5";
import { ANSWER_CLOCK_SKEW_MS, PAYMENTS_ERROR_CODE, PaymentsError } from "./provider";
import { isRsaSignature, issuedBy, validAt, type X509Certificate } from "./x509";

/** What an account in certificate mode keeps: the SNs, and the certificates of the chain check. */
export type AlipayCertificates = {
  /** The app certificate's SN: requests' app_cert_sn. */
  appCertSn: string;
  /** The root bundle's RSA certificates' SNs, `_`-joined: requests' alipay_root_cert_sn. */
  alipayRootCertSn: string;
  /** alipayCert's SN, which answers must name (alipay_cert_sn, or v3's alipay-sn header). */
  alipayCertSn: string;
  /** alipayCert's own certificate (the first of its text): its key verifies answers. */
  alipayCert: X509Certificate;
  /** The other certificates of alipayCert's text (intermediates), then the root bundle. */
  intermediates: X509Certificate[];
  roots: X509Certificate[];
};

/** The fields of the certificate mode in DQ_ALIPAY_ACCOUNTS. */
export const ALIPAY_CERTIFICATE_FIELDS = ["appCert", "alipayCert", "alipayRootCert"] as const;

/** The short names alipay-sdk's X.509 reader (@fidm/x509) gives; any other type has none. */
const SHORT_NAMES: Readonly<Record<string, string>> = {
  "2.5.4.3": "CN",
  "2.5.4.6": "C",
  "2.5.4.7": "L",
  "2.5.4.8": "ST",
  "2.5.4.10": "O",
  "2.5.4.11": "OU",
  "1.2.840.113549.1.9.1": "E",
};

const utf8 = new TextDecoder();

/**
 * The issuer's name as alipay-sdk writes it: the attributes last to first, `short=value` joined
 * by `,`, each value its bytes read as UTF-8, no escaping (reduceRight in antcertutil.ts).
 */
export function sdkIssuerName(cert: X509Certificate): string {
  return cert.issuerAttributes
    .map((attribute) => `${SHORT_NAMES[attribute.type] ?? ""}=${utf8.decode(attribute.value)}`)
    .reverse()
    .join(",");
}

/** A certificate's Alipay SN: MD5 hex of the SDK's issuer name and the decimal serial. */
export function alipayCertSn(cert: X509Certificate): string {
  return md5Hex(sdkIssuerName(cert) + cert.serialDecimal);
}

/** The SNs of the bundle's RSA-signed certificates, `_`-joined (as alipay-sdk's getRootCertSN). */
export function alipayRootCertSn(bundle: X509Certificate[]): string {
  return bundle
    .filter((cert) => isRsaSignature(cert.signatureAlgorithm))
    .map(alipayCertSn)
    .join("_");
}

function refuse(message: string): never {
  throw new PaymentsError(PAYMENTS_ERROR_CODE.invalidKey, message);
}

/** The certificates of an alipayRootCert text; refused when none is RSA-signed (no SN to send). */
export function alipayRootBundle(text: string): X509Certificate[] {
  const roots = certificateBundle(text);
  if (alipayRootCertSn(roots) === "") refuse("holds no RSA-signed certificate");
  return roots;
}

/** Reads one field's certificates, naming the field when they do not parse. */
function read<T>(field: string, parse: (text: string) => T, text: string): T {
  try {
    return parse(text);
  } catch (error) {
    refuse(`"${field}" ${error instanceof PaymentsError ? error.message : "does not parse"}`);
  }
}

/**
 * The certificate mode of an account from its three PEM texts (parsed, SNs computed). Throws
 * PaymentsError naming the field, never quoting it. The chain is checked apart (chainProblem):
 * that takes WebCrypto, which is asynchronous.
 */
export function readAlipayCertificates(texts: {
  appCert: string;
  alipayCert: string;
  alipayRootCert: string;
}): AlipayCertificates {
  const [appCert] = read("appCert", certificates, texts.appCert);
  const [alipayCert, ...intermediates] = read("alipayCert", certificates, texts.alipayCert);
  const roots = read("alipayRootCert", alipayRootBundle, texts.alipayRootCert);
  if (!appCert || !alipayCert) refuse("a certificate field holds no certificate");
  return {
    appCertSn: alipayCertSn(appCert),
    alipayRootCertSn: alipayRootCertSn(roots),
    alipayCertSn: alipayCertSn(alipayCert),
    alipayCert,
    intermediates,
    roots,
  };
}

/** The SPKI of alipayCert, in the bare base64 the public-key mode takes as alipayPublicKey. */
export function alipayCertPublicKey(certs: AlipayCertificates): string {
  return bytesToBase64(certs.alipayCert.spki);
}

/** The most certificates between alipayCert and a root (Alipay's chains have one). */
const MAX_INTERMEDIATES = 4;

/**
 * Why alipayCert does not chain to a root of alipayRootCert, or undefined when it does: each
 * certificate from alipayCert up is signed (RSA, WebCrypto) by the next, taken from alipayCert's
 * own text (intermediates) until one is signed by a root. Validity dates are not judged here
 * (they are at each answer: answerCertificateProblem), so an expiry never stops the service.
 */
export async function chainProblem(certs: AlipayCertificates): Promise<string | undefined> {
  let current = certs.alipayCert;
  const unused = [...certs.intermediates];
  for (let step = 0; step <= MAX_INTERMEDIATES; step++) {
    for (const root of certs.roots) {
      if (await issuedBy(current, root)) return undefined;
    }
    let next: X509Certificate | undefined;
    for (const candidate of unused) {
      if (await issuedBy(current, candidate)) {
        next = candidate;
        break;
      }
    }
    if (!next) break;
    unused.splice(unused.indexOf(next), 1);
    current = next;
  }
  return `"alipayCert" does not chain to a certificate of "alipayRootCert" (its signature is not a root's, nor an intermediate's given after it in "alipayCert")`;
}

/** The classic gateway's parameters of certificate mode (signed like the others); none otherwise. */
export function certificateParams(certs: AlipayCertificates | undefined): Record<string, string> {
  if (!certs) return {};
  return { app_cert_sn: certs.appCertSn, alipay_root_cert_sn: certs.alipayRootCertSn };
}

/**
 * v3's certificate mode (as alipay-sdk's curl): `,app_cert_sn=…` after the app_id of the
 * authorization string, and the alipay-root-cert-sn header. Nothing in public-key mode.
 */
export function v3CertificateAuth(certs: AlipayCertificates | undefined): {
  appCertSn: string;
  headers: Record<string, string>;
} {
  if (!certs) return { appCertSn: "", headers: {} };
  return {
    appCertSn: `,app_cert_sn=${certs.appCertSn}`,
    headers: { "alipay-root-cert-sn": certs.alipayRootCertSn },
  };
}

/**
 * Why an answer is not to be trusted in certificate mode, or undefined: the SN it names (classic
 * `alipay_cert_sn`, v3 `alipay-sn`) must be alipayCert's, and `now` (unix ms) within alipayCert's
 * validity (give or take ANSWER_CLOCK_SKEW_MS, for clocks). Undefined in public-key mode.
 */
export function answerCertificateProblem(
  certs: AlipayCertificates | undefined,
  sn: string | null | undefined,
  now: number,
): string | undefined {
  if (!certs) return undefined;
  if (!sn) return "unverified: no Alipay certificate named (alipay_cert_sn, alipay-sn)";
  if (sn !== certs.alipayCertSn) {
    return `unverified: signed with Alipay certificate ${sn.slice(0, 40)}, not alipayCert's ${certs.alipayCertSn}`;
  }
  if (!validAt(certs.alipayCert, now, ANSWER_CLOCK_SKEW_MS)) {
    const end = new Date(certs.alipayCert.notAfter).toISOString();
    const start = new Date(certs.alipayCert.notBefore).toISOString();
    return `unverified: alipayCert is not valid now (valid ${start} to ${end})`;
  }
  return undefined;
}
