// Refund watches (DESIGN §4, "Refund watches"): start, read, stop, list; the poller the
// dispatcher runs their polls with (internal:refunds); and WeChat Pay's refund notifications,
// which settle a refund watch through the same transition as a poll. They share the payment
// watches' storage (a watch hash, its poll job, the one transition script) and their options.
import type { JobHandler } from "../dispatch/dispatcher";
import type { ProviderName } from "../domain/payments";
import type { Refund } from "../domain/refunds";
import type { Access } from "../domain/scope";
import type { Run } from "../run/run";
import { concludeRefundByNotification } from "./refund-conclude";
import { refundPoller } from "./refund-poller";
import type { RefundAnswer } from "./refund-provider";
import { getRefund, listRefunds, type RefundKey, stopRefund } from "./refund-reads";
import { type RefundStarted, startRefund } from "./refund-start";
import type { Concluded } from "./watch-conclude";
import type { PaymentsOptions } from "./watch-types";

export type { RefundKey } from "./refund-reads";
export type { RefundStarted } from "./refund-start";

export class Refunds {
  /** The dispatcher's handler of __refunds' jobs (push url `internal:refunds`). */
  readonly poller: JobHandler;

  constructor(private readonly options: PaymentsOptions) {
    this.poller = refundPoller(options);
  }

  /** Starts watching a refund (see startRefund); `work`: its polls due within seconds. */
  start(run: Run, input: unknown, access: Access): Promise<RefundStarted> {
    return startRefund(this.options, run, input, access);
  }

  get(key: RefundKey, access: Access): Promise<Refund> {
    return getRefund(this.options, key, access);
  }

  stop(key: RefundKey, access: Access): Promise<void> {
    return stopRefund(this.options, key, access);
  }

  /** Refund watches newest first, a page at a time, as far as `access` sees them. */
  list(page: { cursor?: string; limit: number } & Access) {
    return listRefunds(this.options, page);
  }

  /**
   * A provider's verified refund notification: settles its watch (a refund nobody watches is
   * ignored), or tells a late success of an ended one. As Payments.notified.
   */
  notified(
    run: Run,
    refund: { provider: ProviderName; account: string; outRefundNo: string },
    answer: RefundAnswer & { kind: "refund" },
    notifyId?: string,
  ): Promise<Concluded> {
    return concludeRefundByNotification(this.options, run, refund, answer, notifyId);
  }
}

export function createRefunds(options: PaymentsOptions): Refunds {
  return new Refunds(options);
}
