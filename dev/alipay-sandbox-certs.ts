// The Alipay sandbox's public-key-certificate mode: a root, two intermediates, Alipay's and the
// app's certificates (openssl, dev/payment-keys.ts), their SNs as the official alipay-sdk computes
// them (its own constructor: antcertutil.ts), and the check of the SNs a request carries.
import type { KeyObject } from "node:crypto";
import { AlipaySdk } from "alipay-sdk";
import { type AlipayCertificateFiles, alipayCertificateFiles, privateKeyPem } from "./payment-keys";

export type AlipaySandboxCertificates = {
  /** appCert, alipayCert and alipayRootCert, the PEMs a merchant downloads from Alipay. */
  files: AlipayCertificateFiles;
  /** What requests must carry (app_cert_sn, alipay_root_cert_sn) and answers name (alipay_cert_sn). */
  appCertSn: string;
  alipayRootCertSn: string;
  alipayCertSn: string;
};

/** The certificates of a sandbox app whose key is `app` and of "Alipay", whose key is `alipay`. */
export async function sandboxCertificates(keys: {
  app: KeyObject;
  alipay: KeyObject;
  appId: string;
}): Promise<AlipaySandboxCertificates> {
  const files = await alipayCertificateFiles(keys);
  // The SDK computes the SNs as it constructs; its private key is never used here.
  const sdk = new AlipaySdk({
    appId: keys.appId,
    privateKey: privateKeyPem(keys.alipay),
    keyType: "PKCS8",
    appCertContent: files.appCert,
    alipayPublicCertContent: files.alipayCert,
    alipayRootCertContent: files.alipayRootCert,
  });
  const config = sdk.config as unknown as Record<string, string | undefined>;
  const sn = (name: string) => {
    const value = config[name];
    if (!value) throw new Error(`alipay-sdk computed no ${name}`);
    return value;
  };
  return {
    files,
    appCertSn: sn("appCertSn"),
    alipayRootCertSn: sn("alipayRootCertSn"),
    alipayCertSn: sn("alipayCertSn"),
  };
}

/**
 * Why Alipay refuses a request's certificate SNs, as an error (sub_code and message), or undefined
 * when they are the app's and the root bundle's. (The sandbox's wording: Alipay's own codes for
 * these are not public; a verified isv.* answer is a configuration error either way.)
 */
export function certificateSnError(
  certs: AlipaySandboxCertificates,
  appCertSn: string | undefined,
  alipayRootCertSn: string | undefined,
): { subCode: string; message: string } | undefined {
  if (!appCertSn) return { subCode: "isv.missing-app-cert-sn", message: "缺少应用公钥证书序列号" };
  if (appCertSn !== certs.appCertSn)
    return { subCode: "isv.invalid-app-cert-sn", message: "应用公钥证书序列号不匹配" };
  if (!alipayRootCertSn)
    return { subCode: "isv.missing-alipay-root-cert-sn", message: "缺少支付宝根证书序列号" };
  if (alipayRootCertSn !== certs.alipayRootCertSn)
    return { subCode: "isv.invalid-alipay-root-cert-sn", message: "支付宝根证书序列号不匹配" };
  return undefined;
}
