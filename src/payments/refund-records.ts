// A refund watch's id, and the API's Refund from a stored watch.
import type { Refund } from "../domain/refunds";
import type { WatchRecord } from "../redis/replies";
import type { RefundSpec } from "./refund-types";
import { specOf, viewOf, watchIdOf } from "./watch-records";

/**
 * A refund watch's id: 26 base32 characters of SHA-256 over ("refund", provider, account,
 * out_refund_no), so that it never is a payment watch's (whose hash starts with the provider).
 */
export function refundWatchIdOf(
  provider: string,
  account: string,
  outRefundNo: string,
): Promise<string> {
  return watchIdOf(`refund\n${provider}`, account, outRefundNo);
}

/** The API's Refund from a stored watch. */
export function refundOf(stored: WatchRecord): Refund {
  const spec = specOf<RefundSpec>(stored);
  return viewOf<Refund>(
    stored,
    { outRefundNo: spec.outRefundNo },
    spec.outTradeNo !== undefined ? { outTradeNo: spec.outTradeNo } : {},
    (text) => {
      // Stored as every watch's last answer is ({tradeState, at}); a refund's word is its status.
      const { tradeState, at } = JSON.parse(text) as { tradeState: string; at: number };
      return { status: tradeState, at };
    },
  );
}
