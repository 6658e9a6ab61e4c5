// A watch's id, and the API's Payment (or payment_not_found) from a stored watch.

import { DelayqError } from "../domain/errors";
import type { Payment } from "../domain/payments";
import { RawJson } from "../domain/raw-json";
import type { WatchRecord } from "../redis/replies";
import type { Spec } from "./watch-types";

/** A watch's id: 26 base32 characters of SHA-256 over (provider, account, out_trade_no). */
export async function watchIdOf(
  name: string,
  account: string,
  outTradeNo: string,
): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest(
      "SHA-256",
      new TextEncoder().encode(`${name}\n${account}\n${outTradeNo}`),
    ),
  );
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of digest) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 26) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

export function notFound(name: string, account: string, outTradeNo: string): DelayqError {
  return new DelayqError(
    "payment_not_found",
    `No payment watch for ${name}/${account}/${outTradeNo} (ended watches are forgotten after ` +
      "the retention window), or its notify topics are not ones this token may act on",
  );
}

/** The API's Payment from a stored watch; metadata and outcome as their stored JSON text. */
export function paymentOf(stored: WatchRecord): Payment {
  const { fields } = stored;
  const spec = JSON.parse(fields.spec ?? "{}") as Spec;
  const payment: Payment = {
    provider: spec.provider,
    account: spec.account,
    outTradeNo: spec.outTradeNo,
    state: (fields.state ?? "polling") as Payment["state"],
    polls: Number(fields.polls ?? 0),
    createdAt: Number(fields.createdAt ?? spec.createdAt),
    deadline: spec.deadline,
    notify: spec.notify,
    metadata: new RawJson(fields.metadata ?? "null"),
  };
  if (spec.amount) payment.amount = spec.amount;
  if (payment.state === "polling" && stored.nextPollAt !== undefined) {
    payment.nextPollAt = stored.nextPollAt;
  }
  if (fields.lastAnswer) payment.lastAnswer = JSON.parse(fields.lastAnswer);
  if (fields.outcome) payment.outcome = new RawJson(fields.outcome);
  if (fields.firstOutcome) payment.firstOutcome = new RawJson(fields.firstOutcome);
  return payment;
}
