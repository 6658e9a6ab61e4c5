// Alipay RSA2 signing shared by both APIs and notifications: keys, signing string, Beijing time.

import type { AlipayAccount } from "./accounts";
import { type CryptoKey, importKeyCached } from "./crypto";
import { PaymentsError } from "./provider";

export type Keys = { privateKey: CryptoKey; alipayPublicKey: CryptoKey };

export async function loadKeys(account: AlipayAccount): Promise<Keys | { reason: string }> {
  try {
    return {
      privateKey: await importKeyCached("private", account.privateKey),
      alipayPublicKey: await importKeyCached("public", account.alipayPublicKey),
    };
  } catch (error) {
    const message = error instanceof PaymentsError ? error.message : "bad key";
    return { reason: `account "${account.name}": ${message}` };
  }
}

const pad = (n: number) => String(n).padStart(2, "0");

/** `yyyy-MM-dd HH:mm:ss` in Beijing time (UTC+8, no DST) for unix ms, whatever the host's zone. */
export function beijingTimestamp(ms: number): string {
  const d = new Date(ms + 8 * 3_600_000);
  return (
    `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`
  );
}

/** Unix ms of a Beijing `yyyy-MM-dd HH:mm:ss`, or undefined. */
export function parseBeijingTime(text: unknown): number | undefined {
  if (typeof text !== "string") return undefined;
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return Date.UTC(y, mo - 1, d, h, mi, s) - 8 * 3_600_000;
}

/** The signing string: every non-empty param except `sign`, sorted by key, `k=v` joined by `&`. */
export function alipaySignContent(
  params: Record<string, string>,
  omit: string[] = ["sign"],
): string {
  return Object.keys(params)
    .filter((key) => !omit.includes(key) && params[key] !== undefined && params[key] !== "")
    .sort()
    .map((key) => `${key}=${params[key]}`)
    .join("&");
}
