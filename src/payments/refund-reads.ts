// Reading and stopping refund watches: one by its refund, or a page of them (the dashboard), as
// far as the caller's access lets it see them (the payment watches' rule: watch-reads.ts).
import { DelayqError } from "../domain/errors";
import type { ProviderName } from "../domain/payments";
import type { Refund } from "../domain/refunds";
import { type Access, accountAllows } from "../domain/scope";
import { refundNotFound, refundOf, refundWatchIdOf } from "./refund-records";
import { visible } from "./watch-reads";
import type { PaymentsOptions } from "./watch-types";

type Reads = Pick<PaymentsOptions, "scripts" | "clock">;

/** A refund at a provider: what a refund watch is known by. */
export type RefundKey = { provider: ProviderName; account: string; outRefundNo: string };

/** A refund watch `access` sees (one it does not see is not found, as one that does not exist). */
export async function getRefund(options: Reads, key: RefundKey, access: Access): Promise<Refund> {
  const { provider, account, outRefundNo } = key;
  const clock = options.clock ?? Date.now;
  // An account not its own is not even read: its refunds are none of this caller's business.
  const stored =
    accountAllows(access.accounts, provider, account) &&
    (await options.scripts.run("watchRead", clock(), [
      await refundWatchIdOf(provider, account, outRefundNo),
    ]));
  const refund = stored ? refundOf(stored) : undefined;
  if (!refund || !visible(refund, access)) throw refundNotFound(provider, account, outRefundNo);
  return refund;
}

/** Stops a refund watch `access` sees; it reads `stopped` while it is retained. */
export async function stopRefund(options: Reads, key: RefundKey, access: Access): Promise<void> {
  await getRefund(options, key, access);
  const clock = options.clock ?? Date.now;
  const { provider, account, outRefundNo } = key;
  const watchId = await refundWatchIdOf(provider, account, outRefundNo);
  await options.scripts.run("watchStop", clock(), [watchId]);
}

/**
 * Refund watches newest first, a page at a time (the dashboard's payments panel): only those
 * `access` sees, so a page may hold fewer than `limit`; `cursor` goes on.
 */
export async function listRefunds(
  options: Reads,
  page: { cursor?: string; limit: number } & Access,
): Promise<{ refunds: Refund[]; cursor?: string }> {
  const { cursor = "" } = page;
  if (cursor !== "" && !/^\d{1,16}\|[a-z2-7]{26}$/.test(cursor)) {
    throw new DelayqError(
      "invalid_request",
      "cursor: not one this listing gave; start again from the first page",
    );
  }
  const clock = options.clock ?? Date.now;
  const listed = await options.scripts.run("watchList", clock(), [cursor, page.limit, "refunds"]);
  const refunds = listed.watches.map(refundOf).filter((refund) => visible(refund, page));
  return listed.cursor ? { refunds, cursor: listed.cursor } : { refunds };
}
