// Payment watches (DESIGN §4): start, read, stop; the poller the dispatcher runs polls with; and
// the provider's notifications, which settle a watch through the same transition as a poll.
// What a start, a poll or a notification leads to (polls due soon, an outcome's pushes) is
// returned as work for the run that made it (src/dispatch/loop.ts drains it).
import type { JobHandler } from "../dispatch/dispatcher";
import type { Payment, ProviderName } from "../domain/payments";
import type { Access } from "../domain/scope";
import { PAYMENTS_TOPIC } from "../redis/replies";
import type { Run } from "../run/run";
import { watchPoller } from "./poller";
import type { ProviderAnswer } from "./provider";
import { type Concluded, concludeByNotification } from "./watch-conclude";
import { askPayment, judge, outcomePrefix } from "./watch-conclusions";
import type { WatchKind } from "./watch-kind";
import { getWatch, listWatches, stopWatch } from "./watch-reads";
import { watchIdOf } from "./watch-records";
import { type Started, startWatch } from "./watch-start";
import {
  type PaymentEnded,
  type PaymentsOptions,
  POLL_SUBREQUESTS,
  type Spec,
} from "./watch-types";

export type { Started } from "./watch-start";
export type { PaymentsOptions } from "./watch-types";

/** An order at a provider: what a watch is known by. */
export type Order = { provider: ProviderName; account: string; outTradeNo: string };

/** What is a payment watch's own, for the code every watch shares. */
export const PAYMENT_WATCH: WatchKind<{
  spec: Spec;
  ended: PaymentEnded;
  answer: ProviderAnswer & { kind: "trade" };
}> = {
  name: "payment",
  topic: PAYMENTS_TOPIC,
  wordField: "tradeState",
  pollSubrequests: POLL_SUBREQUESTS,
  ask: askPayment,
  unknownAccount: (message) => ({ kind: "outcome", state: "failed", word: message }),
  judge,
  outcomePrefix,
};

export class Payments {
  /** The dispatcher's handler of __payments' jobs (push url `internal:payments`). */
  readonly poller: JobHandler;

  constructor(private readonly options: PaymentsOptions) {
    this.poller = watchPoller(PAYMENT_WATCH, options);
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
  async notified(
    run: Run,
    order: Order,
    answer: ProviderAnswer & { kind: "trade" },
    notifyId?: string,
  ): Promise<Concluded> {
    const watchId = await watchIdOf(order.provider, order.account, order.outTradeNo);
    return concludeByNotification(PAYMENT_WATCH, this.options, run, watchId, answer, notifyId);
  }
}

export function createPayments(options: PaymentsOptions): Payments {
  return new Payments(options);
}
