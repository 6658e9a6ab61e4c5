// Reading and stopping payment watches: one by its order, or a page of them (the dashboard), as
// far as the caller's access lets it see them.
import { DelayqError } from "../domain/errors";
import type { Payment, ProviderName } from "../domain/payments";
import { type Access, accountAllows, scopeAllows } from "../domain/scope";
import { notFound, paymentOf, watchIdOf } from "./watch-records";
import type { PaymentsOptions } from "./watch-types";

type Reads = Pick<PaymentsOptions, "scripts" | "clock">;

/**
 * Whether a caller with `access` sees a watch: its account is one the caller may watch and it
 * notifies only topics the caller may act on (a watch of two tenants' topics is the operator's).
 */
export function visible(
  payment: Pick<Payment, "provider" | "account" | "notify">,
  access: Access,
): boolean {
  return (
    accountAllows(access.accounts, payment.provider, payment.account) &&
    payment.notify.every((topic) => scopeAllows(access.scope, topic))
  );
}

/**
 * Watches newest first, a page at a time (the dashboard's panel): only those `access` sees, so
 * a page may hold fewer than `limit`; `cursor` goes on.
 */
export async function listWatches(
  options: Reads,
  page: { cursor?: string; limit: number } & Access,
): Promise<{ watches: Payment[]; cursor?: string }> {
  const { cursor = "" } = page;
  if (cursor !== "" && !/^\d{1,16}\|[a-z2-7]{26}$/.test(cursor)) {
    throw new DelayqError(
      "invalid_request",
      "cursor: not one this listing gave; start again from the first page",
    );
  }
  const clock = options.clock ?? Date.now;
  const listed = await options.scripts.run("watchList", clock(), [cursor, page.limit]);
  const watches = listed.watches.map(paymentOf).filter((payment) => visible(payment, page));
  return listed.cursor ? { watches, cursor: listed.cursor } : { watches };
}

/** A watch `access` sees (one it does not see is not found, as one that does not exist). */
export async function getWatch(
  options: Reads,
  order: { provider: ProviderName; account: string; outTradeNo: string },
  access: Access,
): Promise<Payment> {
  const { provider, account, outTradeNo } = order;
  const clock = options.clock ?? Date.now;
  // An account not its own is not even read: its watches are none of this caller's business.
  const stored =
    accountAllows(access.accounts, provider, account) &&
    (await options.scripts.run("watchRead", clock(), [
      await watchIdOf(provider, account, outTradeNo),
    ]));
  const payment = stored ? paymentOf(stored) : undefined;
  if (!payment || !visible(payment, access)) throw notFound(provider, account, outTradeNo);
  return payment;
}

/** Stops a watch `access` sees; it reads `stopped` while it is retained. */
export async function stopWatch(
  options: Reads,
  order: { provider: ProviderName; account: string; outTradeNo: string },
  access: Access,
): Promise<void> {
  await getWatch(options, order, access);
  const clock = options.clock ?? Date.now;
  const { provider, account, outTradeNo } = order;
  await options.scripts.run("watchStop", clock(), [await watchIdOf(provider, account, outTradeNo)]);
}
