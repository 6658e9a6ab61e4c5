// The check of Alipay's asynchronous notifications (the form it POSTs), signed with RSA2.

import { ENDED_WATCH_KEEP_MS } from "../domain/payments";
import type { AlipayAccount } from "./accounts";
import { tradeAnswer } from "./alipay-answers";
import { alipaySignContent, loadKeys, parseBeijingTime } from "./alipay-signing";
import { verifyRsaSha256 } from "./crypto";
import { ANSWER_CLOCK_SKEW_MS, clip, type NotificationResult } from "./provider";

/**
 * How old a verified notification may be, by its notify_time: Alipay resends one that was not
 * answered `success` 7 times over about 24.4 hours (4 min, 10 min, 10 min, 1 h, 2 h, 6 h, 15 h),
 * and a resend of a verified notification is a fact about the trade that must not be lost; past
 * that window it can only be a replay. It is also as long as an ended watch remembers the
 * notify_ids it took (ENDED_WATCH_KEEP_MS): nothing accepted is older than what is remembered.
 */
export const ALIPAY_NOTIFY_MAX_AGE_MS = ENDED_WATCH_KEEP_MS;

/**
 * Checks an Alipay asynchronous notification (the form it POSTs) with the account's Alipay public
 * key: every field but `sign` and `sign_type`, sorted, `k=v` joined by `&`. Like the official SDK
 * it also accepts the older content that keeps `sign_type`. Then its freshness against `now`
 * (unix ms): notify_time (Beijing time) neither more than ANSWER_CLOCK_SKEW_MS (5 min) ahead nor
 * more than ALIPAY_NOTIFY_MAX_AGE_MS old. On success the trade's answer and the notify_id.
 */
export async function verifyAlipayNotification(
  account: AlipayAccount,
  form: URLSearchParams | Record<string, string>,
  now: number,
): Promise<NotificationResult> {
  const fields: Record<string, string> = {};
  const entries = form instanceof URLSearchParams ? [...form.entries()] : Object.entries(form);
  for (const [key, value] of entries) {
    if (typeof value !== "string")
      return { ok: false, reason: `field ${clip(key, 40)} is not text` };
    if (Object.hasOwn(fields, key))
      return { ok: false, reason: `field ${clip(key, 40)} appears twice` };
    fields[key] = value;
  }
  const sign = fields.sign;
  if (!sign) return { ok: false, reason: "unverified: no sign field" };
  if (fields.sign_type !== undefined && fields.sign_type !== "RSA2") {
    return { ok: false, reason: "sign_type is not RSA2" };
  }
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, reason: keys.reason };
  const candidates = [alipaySignContent(fields, ["sign", "sign_type"])];
  if (fields.sign_type !== undefined) candidates.push(alipaySignContent(fields, ["sign"]));
  let verified = false;
  for (const content of candidates) {
    if (await verifyRsaSha256(keys.alipayPublicKey, content, sign)) {
      verified = true;
      break;
    }
  }
  if (!verified) return { ok: false, reason: "unverified: signature does not verify" };
  if (fields.app_id !== undefined && fields.app_id !== account.appId) {
    return { ok: false, reason: "app_id is not this account's" };
  }
  const stale = staleness(fields.notify_time, now);
  if (stale) return { ok: false, reason: stale };
  const outTradeNo = fields.out_trade_no;
  if (!outTradeNo) return { ok: false, reason: "no out_trade_no" };
  const answer = tradeAnswer(fields, "gmt_payment");
  if (answer.kind !== "trade")
    return { ok: false, reason: answer.kind === "transient" ? answer.reason : "unreadable" };
  const notifyId = fields.notify_id;
  return { ok: true, outTradeNo, answer, ...(notifyId ? { notifyId } : {}) };
}

/** Why a verified notification's notify_time is not to be taken, or undefined when it is. */
function staleness(notifyTime: string | undefined, now: number): string | undefined {
  const at = parseBeijingTime(notifyTime);
  if (at === undefined) return "stale: no readable notify_time";
  if (at - now > ANSWER_CLOCK_SKEW_MS) {
    return `stale: notify_time ${Math.round((at - now) / 1000)} s ahead of our clock (more than ${ANSWER_CLOCK_SKEW_MS / 1000} s)`;
  }
  if (now - at > ALIPAY_NOTIFY_MAX_AGE_MS) {
    const hours = Math.floor((now - at) / 360_000) / 10;
    return `stale: notify_time ${hours} h old (Alipay's resends end within ${ALIPAY_NOTIFY_MAX_AGE_MS / 3600_000} h)`;
  }
  return undefined;
}
