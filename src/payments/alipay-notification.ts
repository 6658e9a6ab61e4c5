// The check of Alipay's asynchronous notifications (the form it POSTs), signed with RSA2.

import type { AlipayAccount } from "./accounts";
import { tradeAnswer } from "./alipay-answers";
import { alipaySignContent, loadKeys } from "./alipay-signing";
import { verifyRsaSha256 } from "./crypto";
import { clip, type NotificationResult } from "./provider";

/**
 * Checks an Alipay asynchronous notification (the form it POSTs) with the account's Alipay public
 * key: every field but `sign` and `sign_type`, sorted, `k=v` joined by `&`. Like the official SDK
 * it also accepts the older content that keeps `sign_type`. On success the trade's answer.
 */
export async function verifyAlipayNotification(
  account: AlipayAccount,
  form: URLSearchParams | Record<string, string>,
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
  if (!sign) return { ok: false, reason: "no sign field" };
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
  if (!verified) return { ok: false, reason: "signature does not verify" };
  if (fields.app_id !== undefined && fields.app_id !== account.appId) {
    return { ok: false, reason: "app_id is not this account's" };
  }
  const outTradeNo = fields.out_trade_no;
  if (!outTradeNo) return { ok: false, reason: "no out_trade_no" };
  const answer = tradeAnswer(fields, "gmt_payment");
  if (answer.kind !== "trade")
    return { ok: false, reason: answer.kind === "transient" ? answer.reason : "unreadable" };
  return { ok: true, outTradeNo, answer };
}
