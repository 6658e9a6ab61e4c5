// Refund watches (DESIGN §4, "Refund watches"): start, read, stop, list; the poller the
// dispatcher runs their polls with (internal:refunds); and WeChat Pay's refund notifications,
// which settle a refund watch through the same transition as a poll. They share the payment
// watches' storage (a watch hash, its poll job, the one transition script) and their options.
import type { JobHandler } from "../dispatch/dispatcher";
import type { ProviderName } from "../domain/payments";
import type { Refund } from "../domain/refunds";
import type { Access } from "../domain/scope";
import { REFUNDS_TOPIC } from "../redis/replies";
import type { Run } from "../run/run";
import { watchPoller } from "./poller";
import { askRefund, judgeRefund, refundOutcomePrefix } from "./refund-conclusions";
import type { RefundAnswer } from "./refund-provider";
import { getRefund, listRefunds, type RefundKey, stopRefund } from "./refund-reads";
import { refundWatchIdOf } from "./refund-records";
import { type RefundStarted, startRefund } from "./refund-start";
import { REFUND_POLL_SUBREQUESTS, type RefundEnded, type RefundSpec } from "./refund-types";
import { type Concluded, concludeByNotification } from "./watch-conclude";
import type { WatchKind } from "./watch-kind";
import type { PaymentsOptions } from "./watch-types";

export type { RefundKey } from "./refund-reads";
export type { RefundStarted } from "./refund-start";

/** What is a refund watch's own, for the code every watch shares. */
export const REFUND_WATCH: WatchKind<{
  spec: RefundSpec;
  ended: RefundEnded;
  answer: RefundAnswer & { kind: "refund" };
}> = {
  name: "refund",
  topic: REFUNDS_TOPIC,
  wordField: "status",
  pollSubrequests: REFUND_POLL_SUBREQUESTS,
  ask: askRefund,
  // The account is gone from the configuration: nothing more can be learnt, as at the deadline
  // (a refund watch has no failed state).
  unknownAccount: (message) => ({ kind: "outcome", state: "expired", word: message }),
  judge: judgeRefund,
  outcomePrefix: refundOutcomePrefix,
};

export class Refunds {
  /** The dispatcher's handler of __refunds' jobs (push url `internal:refunds`). */
  readonly poller: JobHandler;

  constructor(private readonly options: PaymentsOptions) {
    this.poller = watchPoller(REFUND_WATCH, options);
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
  async notified(
    run: Run,
    refund: { provider: ProviderName; account: string; outRefundNo: string },
    answer: RefundAnswer & { kind: "refund" },
    notifyId?: string,
  ): Promise<Concluded> {
    const watchId = await refundWatchIdOf(refund.provider, refund.account, refund.outRefundNo);
    return concludeByNotification(REFUND_WATCH, this.options, run, watchId, answer, notifyId);
  }
}

export function createRefunds(options: PaymentsOptions): Refunds {
  return new Refunds(options);
}
