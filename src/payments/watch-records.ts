// A watch's id, the API's view of a stored watch (what every kind shows, and a Payment), and the
// not-found error of a watch a caller may not see or that does not exist.
import { DelayqError } from "../domain/errors";
import type { Payment } from "../domain/payments";
import { RawJson } from "../domain/raw-json";
import type { WatchRecord } from "../redis/replies";
import type { WatchKey, WatchSpec, WatchView } from "./watch-kind";
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

/**
 * payment_not_found or refund_not_found: no watch of the kind `name` for `key` (`number`: the
 * kind's own, outTradeNo or outRefundNo), or one the caller may not see.
 */
export function notFound(name: "payment" | "refund", key: WatchKey, number: string): DelayqError {
  return new DelayqError(
    `${name}_not_found`,
    `No ${name} watch for ${key.provider}/${key.account}/${number} (ended watches are forgotten ` +
      "after the retention window), or its notify topics are not ones this token may act on",
  );
}

/** A stored watch's spec. */
export function specOf<S extends WatchSpec>(stored: WatchRecord): S {
  return JSON.parse(stored.fields.spec ?? "{}") as S;
}

/**
 * The API's view of a stored watch, every kind's fields in the order they answer in: the kind's
 * own `key` fields after account, its `extra` ones after metadata; `lastAnswerOf` reads the
 * stored last answer ({tradeState, at}) as the kind shows it. Metadata and outcomes as their
 * stored JSON text.
 */
export function viewOf<V extends WatchView>(
  stored: WatchRecord,
  key: Partial<V>,
  extra: Partial<V>,
  lastAnswerOf: (text: string) => V["lastAnswer"],
): V {
  const { fields } = stored;
  const spec = specOf<WatchSpec>(stored);
  const view: WatchView & Record<string, unknown> = {
    provider: spec.provider,
    account: spec.account,
    ...key,
    state: fields.state ?? "polling",
    polls: Number(fields.polls ?? 0),
    createdAt: Number(fields.createdAt ?? spec.createdAt),
    deadline: spec.deadline,
    notify: spec.notify,
    metadata: new RawJson(fields.metadata ?? "null"),
    ...extra,
  };
  if (view.state === "polling" && stored.nextPollAt !== undefined) {
    view.nextPollAt = stored.nextPollAt;
  }
  if (fields.lastAnswer) view.lastAnswer = lastAnswerOf(fields.lastAnswer);
  if (fields.outcome) view.outcome = new RawJson(fields.outcome);
  if (fields.firstOutcome) view.firstOutcome = new RawJson(fields.firstOutcome);
  return view as V;
}

/** The API's Payment from a stored watch. */
export function paymentOf(stored: WatchRecord): Payment {
  const spec = specOf<Spec>(stored);
  return viewOf<Payment>(
    stored,
    { outTradeNo: spec.outTradeNo },
    spec.amount ? { amount: spec.amount } : {},
    (text) => JSON.parse(text),
  );
}
