// Payment watches (DESIGN §4): start, read, stop; the poller the dispatcher runs polls with; and
// the provider's notifications, which settle a watch through the same transition as a poll.
// What a start, a poll or a notification leads to (polls due soon, an outcome's pushes) is
// returned as work for the run that made it (src/dispatch/loop.ts drains it).
import type { JobHandler } from "../dispatch/dispatcher";
import type { Payment, ProviderName } from "../domain/payments";
import type { Access } from "../domain/scope";
import type { Run } from "../run/run";
import { paymentPoller } from "./poller";
import type { ProviderAnswer } from "./provider";
import { type Concluded, concludeByNotification } from "./watch-conclude";
import { getWatch, listWatches, stopWatch } from "./watch-reads";
import { type Started, startWatch } from "./watch-start";
import type { PaymentsOptions } from "./watch-types";

export type { Started } from "./watch-start";
export type { PaymentsOptions } from "./watch-types";

/** An order at a provider: what a watch is known by. */
export type Order = { provider: ProviderName; account: string; outTradeNo: string };

export class Payments {
  /** The dispatcher's handler of __payments' jobs (push url `internal:payments`). */
  readonly poller: JobHandler;

  constructor(private readonly options: PaymentsOptions) {
    this.poller = paymentPoller(options);
  }

  /** Starts watching an order (see startWatch); `work`: its polls due within seconds. */
  start(run: Run, input: unknown, access: Access): Promise<Started> {
    return startWatch(this.options, run, input, access);
  }

  /** Watches newest first, a page at a time, as far as `access` sees them. */
  list(page: { cursor?: string; limit: number } & Access) {
    return listWatches(this.options, page);
  }

  get(order: Order, access: Access): Promise<Payment> {
    return getWatch(this.options, order, access);
  }

  stop(order: Order, access: Access): Promise<void> {
    return stopWatch(this.options, order, access);
  }

  /**
   * A provider's verified notification about an order: settles its watch (an order nobody
   * watches is ignored), or tells a late payment of an ended one. `applied`: it changed the
   * watch; `how`: "late", or "duplicate" for a `notifyId` the watch took before; `work`: the
   * outcome's pushes.
   */
  notified(
    run: Run,
    order: Order,
    answer: ProviderAnswer & { kind: "trade" },
    notifyId?: string,
  ): Promise<Concluded> {
    return concludeByNotification(this.options, run, order, answer, notifyId);
  }
}

export function createPayments(options: PaymentsOptions): Payments {
  return new Payments(options);
}
