// The payment providers' cryptography on WebCrypto alone, so one code runs in Workers and on Node:
// SHA256withRSA (RSASSA-PKCS1-v1_5) signatures in standard base64, and WeChat's AES-256-GCM.

import type { CryptoKey } from "../domain/bytes";
import { randomHex } from "../domain/bytes";
import { base64ToBytes, bytesToBase64, privateKeyToPkcs8, publicKeyToSpki } from "./keys";
import { PAYMENTS_ERROR_CODE, PaymentsError } from "./provider";

export type { CryptoKey };

const RSA = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as const;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** A private RSA key (PEM or bare base64, PKCS#8 or PKCS#1) as a signing CryptoKey. */
export async function importPrivateKey(pemOrBase64: string): Promise<CryptoKey> {
  const der = privateKeyToPkcs8(pemOrBase64);
  try {
    return await crypto.subtle.importKey("pkcs8", der, RSA, false, ["sign"]);
  } catch {
    throw new PaymentsError(
      PAYMENTS_ERROR_CODE.invalidKey,
      "the private key could not be imported as RSA",
    );
  }
}

/** A public RSA key (SPKI, PKCS#1, or an X.509 certificate; PEM or bare base64) for verifying. */
export async function importPublicKey(pemOrBase64OrCert: string): Promise<CryptoKey> {
  const der = publicKeyToSpki(pemOrBase64OrCert);
  try {
    return await crypto.subtle.importKey("spki", der, RSA, false, ["verify"]);
  } catch {
    throw new PaymentsError(
      PAYMENTS_ERROR_CODE.invalidKey,
      "the public key could not be imported as RSA",
    );
  }
}

const KEY_CACHE_LIMIT = 64;
const keyCache = new Map<string, Promise<CryptoKey>>();

/**
 * `importPrivateKey` / `importPublicKey`, remembered by key text for the life of the isolate: an
 * import costs more CPU than a signature (about 480 µs and 190 µs against 280 µs on Node), and
 * callers may rebuild account objects per request. Failed imports are not remembered.
 */
export function importKeyCached(kind: "private" | "public", text: string): Promise<CryptoKey> {
  const id = `${kind}\n${text}`;
  let key = keyCache.get(id);
  if (key !== undefined) {
    // Refresh its place, so the oldest unused key is the one evicted.
    keyCache.delete(id);
    keyCache.set(id, key);
    return key;
  }
  key = kind === "private" ? importPrivateKey(text) : importPublicKey(text);
  keyCache.set(id, key);
  key.catch(() => keyCache.delete(id));
  while (keyCache.size > KEY_CACHE_LIMIT) {
    const oldest = keyCache.keys().next().value;
    if (oldest === undefined) break;
    keyCache.delete(oldest);
  }
  return key;
}

/** SHA256withRSA over the UTF-8 bytes of `text`, in standard base64. */
export async function signRsaSha256(key: CryptoKey, text: string): Promise<string> {
  const signature = await crypto.subtle.sign(RSA, key, encoder.encode(text));
  return bytesToBase64(new Uint8Array(signature));
}

/** Whether `signatureBase64` is a SHA256withRSA signature of `text`. False for junk, never throws. */
export async function verifyRsaSha256(
  key: CryptoKey,
  text: string,
  signatureBase64: string,
): Promise<boolean> {
  let signature: Uint8Array;
  try {
    signature = base64ToBytes(signatureBase64);
  } catch {
    return false;
  }
  if (signature.length === 0) return false;
  try {
    return await crypto.subtle.verify(RSA, key, signature, encoder.encode(text));
  } catch {
    return false;
  }
}

/**
 * AES-256-GCM decryption as WeChat Pay uses it: key = the APIv3 key's 32 bytes, iv = `nonce`,
 * additional data = `associatedData`, input = base64 of ciphertext‖16-byte tag. Throws
 * PaymentsError (decryptFailed) when the key is not 32 bytes or the tag does not check.
 */
export async function aesGcmDecrypt(
  keyText: string,
  nonce: string,
  associatedData: string,
  ciphertextBase64: string,
): Promise<string> {
  const keyBytes = encoder.encode(keyText);
  if (keyBytes.length !== 32) {
    throw new PaymentsError(PAYMENTS_ERROR_CODE.decryptFailed, "the APIv3 key must be 32 bytes");
  }
  let input: Uint8Array;
  try {
    input = base64ToBytes(ciphertextBase64);
  } catch {
    throw new PaymentsError(PAYMENTS_ERROR_CODE.decryptFailed, "the ciphertext is not base64");
  }
  if (input.length < 16) {
    throw new PaymentsError(PAYMENTS_ERROR_CODE.decryptFailed, "the ciphertext is too short");
  }
  try {
    const key = await crypto.subtle.importKey("raw", keyBytes, "AES-GCM", false, ["decrypt"]);
    const plain = await crypto.subtle.decrypt(
      {
        name: "AES-GCM",
        iv: encoder.encode(nonce),
        additionalData: encoder.encode(associatedData),
        tagLength: 128,
      },
      key,
      input,
    );
    return decoder.decode(plain);
  } catch {
    throw new PaymentsError(
      PAYMENTS_ERROR_CODE.decryptFailed,
      "the resource did not decrypt (key, nonce or tag)",
    );
  }
}

/** 32 random hex characters, for request nonces. */
export function randomNonce(): string {
  return randomHex(16);
}
