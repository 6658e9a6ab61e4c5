// Refund watches (DESIGN §4, "Refund watches"): what is a refund watch's own (REFUND_WATCH: its
// input, spec, id, view, provider question and outcome), and Refunds, the service's face of
// them: start, read, stop, list, the poller the dispatcher runs their polls with
// (internal:refunds), and WeChat Pay's refund notifications. They share the payment watches'
// storage (a watch hash, its poll job, the one transition script), their options and the code
// every watch runs (watch-service.ts).
import type { z } from "zod";
import { DelayqError } from "../domain/errors";
import type { ProviderName } from "../domain/payments";
import {
  DEFAULT_REFUND_SCHEDULE,
  DEFAULT_REFUND_WATCH_MS,
  type Refund,
  RefundInput,
} from "../domain/refunds";
import type { Access } from "../domain/scope";
import { REFUNDS_TOPIC, REFUNDS_TOPIC_CONFIG } from "../redis/replies";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import { askRefund, judgeRefund, refundOutcomePrefix } from "./refund-conclusions";
import type { RefundAnswer } from "./refund-provider";
import { refundOf, refundWatchIdOf } from "./refund-records";
import { REFUND_POLL_SUBREQUESTS, type RefundEnded, type RefundSpec } from "./refund-types";
import type { WatchKind } from "./watch-kind";
import { Watches } from "./watch-service";
import { timesOf } from "./watch-start";
import type { PaymentsOptions } from "./watch-types";

/** A refund at a provider: what a refund watch is known by. */
export type RefundKey = { provider: ProviderName; account: string; outRefundNo: string };

type Watch = z.output<typeof RefundInput>;

export type RefundStarted = {
  created: boolean;
  refund: Refund;
  /** The polls due within seconds, claimed by the request that started the watch. */
  work: Work[];
};

/** The stored spec of a new refund watch: its schedule and deadline checked. */
function specOf(options: Pick<PaymentsOptions, "minPollMs">, watch: Watch, now: number) {
  const { schedule, deadline } = timesOf(options, watch, now, {
    schedule: DEFAULT_REFUND_SCHEDULE,
    watchMs: DEFAULT_REFUND_WATCH_MS,
  });
  const spec: RefundSpec = {
    kind: "refund",
    provider: watch.provider,
    account: watch.account,
    outRefundNo: watch.outRefundNo,
    ...(watch.outTradeNo !== undefined ? { outTradeNo: watch.outTradeNo } : {}),
    schedule,
    deadline,
    notify: watch.notify,
    createdAt: now,
  };
  return spec;
}

/**
 * A refund watched already for another order than the one asked for is refund_exists: Alipay's
 * out_request_no is unique within its trade only, and a watch of one trade's refund must not
 * stand for another's.
 */
function checkSame(spec: RefundSpec, existing: Refund): void {
  const other = existing.outTradeNo;
  if (spec.outTradeNo !== undefined && other !== undefined && other !== spec.outTradeNo) {
    throw new DelayqError(
      "refund_exists",
      `${spec.provider} refund ${spec.outRefundNo} of account ${spec.account} is watched ` +
        `already for order ${other}, not ${spec.outTradeNo}: give each refund a number of its ` +
        "own in the account",
    );
  }
}

type RefundTypes = {
  spec: RefundSpec;
  key: RefundKey;
  input: Watch;
  view: Refund;
  ended: RefundEnded;
  answer: RefundAnswer & { kind: "refund" };
};

/** What is a refund watch's own, for the code every watch shares. */
export const REFUND_WATCH: WatchKind<RefundTypes> = {
  name: "refund",
  thing: "refund",
  topic: REFUNDS_TOPIC,
  topicConfig: REFUNDS_TOPIC_CONFIG,
  index: "refunds",
  input: RefundInput,
  specOf,
  checkSame,
  keyOf: ({ provider, account, outRefundNo }) => ({ provider, account, outRefundNo }),
  numberOf: (refund) => refund.outRefundNo,
  idOf: (refund) => refundWatchIdOf(refund.provider, refund.account, refund.outRefundNo),
  viewOf: refundOf,
  wordField: "status",
  pollSubrequests: REFUND_POLL_SUBREQUESTS,
  ask: askRefund,
  // The account is gone from the configuration: nothing more can be learnt, as at the deadline
  // (a refund watch has no failed state).
  unknownAccount: (message) => ({ kind: "outcome", state: "expired", word: message }),
  judge: judgeRefund,
  outcomePrefix: refundOutcomePrefix,
};

export class Refunds extends Watches<RefundTypes> {
  constructor(options: PaymentsOptions) {
    super(REFUND_WATCH, options);
  }

  /**
   * Starts watching a refund (see startWatch); `work`: its polls due within seconds. One watched
   * already for another outTradeNo, or for topics the caller may not see, is 409 refund_exists.
   */
  async start(run: Run, input: unknown, access: Access): Promise<RefundStarted> {
    const { created, watch, work } = await this.startWatch(run, input, access);
    return { created, refund: watch, work };
  }

  /** Refund watches newest first, a page at a time, as far as `access` sees them. */
  async list(page: { cursor?: string; limit: number } & Access) {
    const { watches, ...rest } = await this.listWatches(page);
    return { refunds: watches, ...rest };
  }
}

export function createRefunds(options: PaymentsOptions): Refunds {
  return new Refunds(options);
}
