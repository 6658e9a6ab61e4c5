// WeChat Pay's platform certificates of an account in certificate mode: those configured
// (platformCertificates), and those fetched from GET /v3/certificates when an answer or a
// notification names a Wechatpay-Serial not among them. A fetch happens at most once a minute per
// account in each isolate (Worker) or process (Node): the certificates live in memory, beside the
// account object the service built, and a new isolate starts again from the configured ones.
//
// What a fetched certificate is trusted for: each arrives AES-256-GCM-encrypted with the APIv3
// key, which only WeChat Pay and the merchant hold, and the tag is checked; and the answer must be
// signed (Wechatpay-Signature) by a platform certificate, one known already or one in the answer
// itself (then the signature proves only that the answer is whole; the trust is the APIv3 key's).
// Fetched certificates are not chained to WeChat Pay's root CA, which delayq is not given; each is
// used only while valid (its notBefore..notAfter, give or take the 5 minutes allowed clocks).

import type { WechatPayAccount } from "./accounts";
import { aesGcmDecrypt, type CryptoKey, importKeyCached } from "./crypto";
import { bytesToBase64, certificates, normalizeSerial } from "./keys";
import {
  ANSWER_CLOCK_SKEW_MS,
  clip,
  type Fetched,
  PaymentsError,
  parseJson,
  stringField,
} from "./provider";
import { validAt, type X509Certificate } from "./x509";

/** The least time between two fetches of an account's certificates, ms. */
export const CERTIFICATE_FETCH_INTERVAL_MS = 60_000;

/** How the caller fetches and checks GET /v3/certificates (signed and verified like any call). */
export type CertificateDownload = {
  fetch(): Promise<Fetched>;
  /** Why the answer is not to be trusted, given the keys it may be signed with; undefined if it is. */
  verify(
    headers: Headers,
    body: string,
    keyOf: (serial: string) => CryptoKey | undefined,
  ): Promise<string | undefined>;
};

type PlatformCertificate = { cert: X509Certificate; key: CryptoKey };

type Store = {
  /** By normalised serial: the configured ones, then those fetched. */
  certificates: Map<string, PlatformCertificate>;
  seeded: Promise<void>;
  /** When the last fetch began (the clock of the call that asked for it), unix ms. */
  lastFetchAt?: number;
  /** The fetch under way, which every call that meets an unknown serial meanwhile awaits. */
  fetching?: Promise<void>;
  /** Why the last fetch brought nothing, for the reason of an answer it could not help. */
  lastProblem?: string;
};

const stores = new WeakMap<WechatPayAccount, Store>();

async function entry(cert: X509Certificate): Promise<PlatformCertificate> {
  return { cert, key: await importKeyCached("public", bytesToBase64(cert.spki)) };
}

function storeOf(account: WechatPayAccount): Store {
  let store = stores.get(account);
  if (!store) {
    const certificatesBySerial = new Map<string, PlatformCertificate>();
    const seeded = (async () => {
      for (const text of account.platformCertificates ?? []) {
        for (const cert of certificates(text)) {
          certificatesBySerial.set(cert.serial, await entry(cert));
        }
      }
    })();
    store = { certificates: certificatesBySerial, seeded };
    stores.set(account, store);
  }
  return store;
}

/** Whether an account may fetch certificates (it is in certificate mode), for the poll budget. */
export function fetchesCertificates(account: WechatPayAccount): boolean {
  return account.platformCertificates !== undefined;
}

/**
 * The key of the platform certificate `serial` names, or why there is none: unknown (after one
 * fetch of the account's certificates, if none was made in the last minute), or not valid at
 * `now` (unix ms). In public-key mode alone nothing is fetched.
 */
export async function platformCertificateKey(
  account: WechatPayAccount,
  serial: string,
  now: number,
  download: CertificateDownload,
): Promise<CryptoKey | { reason: string }> {
  const store = storeOf(account);
  await store.seeded;
  const wanted = normalizeSerial(serial);
  if (!store.certificates.has(wanted) && fetchesCertificates(account)) {
    await refresh(account, store, now, download);
  }
  const found = store.certificates.get(wanted);
  if (!found) {
    const why = store.lastProblem
      ? `; the last fetch of /v3/certificates: ${store.lastProblem}`
      : "";
    return { reason: `unknown Wechatpay-Serial ${clip(serial, 64)}${why}` };
  }
  if (!validAt(found.cert, now, ANSWER_CLOCK_SKEW_MS)) {
    const until = new Date(found.cert.notAfter).toISOString();
    return {
      reason: `platform certificate ${found.cert.serial} is not valid now (until ${until})`,
    };
  }
  return found.key;
}

function refresh(
  account: WechatPayAccount,
  store: Store,
  now: number,
  download: CertificateDownload,
): Promise<void> {
  if (store.fetching !== undefined) return store.fetching;
  const last = store.lastFetchAt;
  // A clock that went back counts as a minute gone.
  if (last !== undefined && now >= last && now - last < CERTIFICATE_FETCH_INTERVAL_MS) {
    return Promise.resolve();
  }
  store.lastFetchAt = now;
  const fetching = fetchInto(account, store, download).finally(() => {
    store.fetching = undefined;
  });
  store.fetching = fetching;
  return fetching;
}

/** One fetch: the answer's certificates, decrypted and checked, join the store; else a reason. */
async function fetchInto(
  account: WechatPayAccount,
  store: Store,
  download: CertificateDownload,
): Promise<void> {
  const fetched = await download.fetch();
  if (!fetched.ok) {
    store.lastProblem = fetched.reason;
    return;
  }
  if (fetched.status !== 200) {
    store.lastProblem = `HTTP ${fetched.status}`;
    return;
  }
  const got = await decryptAll(account, fetched.text);
  if ("reason" in got) {
    store.lastProblem = got.reason;
    return;
  }
  const keyOf = (serial: string) => {
    const wanted = normalizeSerial(serial);
    return (got.certificates.get(wanted) ?? store.certificates.get(wanted))?.key;
  };
  const problem = await download.verify(fetched.headers, fetched.text, keyOf);
  if (problem) {
    store.lastProblem = problem;
    return;
  }
  store.lastProblem = undefined;
  for (const [serial, certificate] of got.certificates) store.certificates.set(serial, certificate);
}

/**
 * The certificates of a /v3/certificates answer: each `encrypt_certificate` decrypted with the
 * APIv3 key (AES-256-GCM), read, and its serial the entry's serial_no.
 */
async function decryptAll(
  account: WechatPayAccount,
  text: string,
): Promise<{ certificates: Map<string, PlatformCertificate> } | { reason: string }> {
  const data = (parseJson(text) as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) return { reason: "answer without a data list" };
  const out = new Map<string, PlatformCertificate>();
  for (const item of data) {
    const serialNo = stringField(item, "serial_no");
    const encrypted = (item as { encrypt_certificate?: unknown }).encrypt_certificate;
    const ciphertext = stringField(encrypted, "ciphertext");
    const nonce = stringField(encrypted, "nonce");
    if (!serialNo || !ciphertext || !nonce) return { reason: "an entry without its certificate" };
    if (stringField(encrypted, "algorithm") !== "AEAD_AES_256_GCM") {
      return { reason: "a certificate not encrypted with AEAD_AES_256_GCM" };
    }
    try {
      const aad = stringField(encrypted, "associated_data") ?? "";
      const pem = await aesGcmDecrypt(account.apiV3Key, nonce, aad, ciphertext);
      const [cert] = certificates(pem);
      if (!cert || cert.serial !== normalizeSerial(serialNo)) {
        return { reason: `certificate ${clip(serialNo, 64)} is not the one its entry names` };
      }
      out.set(cert.serial, await entry(cert));
    } catch (error) {
      const message = error instanceof PaymentsError ? error.message : "unreadable";
      return { reason: `certificate ${clip(serialNo, 64)}: ${message}` };
    }
  }
  return { certificates: out };
}
