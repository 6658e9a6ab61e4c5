// Payment watches (DESIGN §4): what is a payment watch's own (PAYMENT_WATCH: its input, spec,
// id, view, provider question and outcome), and Payments, the service's face of them: start,
// read, stop, list, the poller the dispatcher runs polls with, and the provider's notifications
// (watch-service.ts: what they share with refund watches).
import type { z } from "zod";
import {
  DEFAULT_CURRENCY,
  DEFAULT_SCHEDULE,
  DEFAULT_WATCH_MS,
  type Payment,
  type ProviderName,
  WatchInput,
} from "../domain/payments";
import type { Access } from "../domain/scope";
import { PAYMENTS_TOPIC, PAYMENTS_TOPIC_CONFIG } from "../redis/replies";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import type { ProviderAnswer } from "./provider";
import { askPayment, judge, outcomePrefix } from "./watch-conclusions";
import type { WatchKind } from "./watch-kind";
import { paymentOf, watchIdOf } from "./watch-records";
import { Watches } from "./watch-service";
import { timesOf } from "./watch-start";
import {
  type PaymentEnded,
  type PaymentsOptions,
  POLL_SUBREQUESTS,
  type Spec,
} from "./watch-types";

export type { PaymentsOptions } from "./watch-types";

/** An order at a provider: what a watch is known by. */
export type Order = { provider: ProviderName; account: string; outTradeNo: string };

type Watch = z.output<typeof WatchInput>;

export type Started = {
  created: boolean;
  payment: Payment;
  /** The polls due within seconds, claimed by the request that started the watch. */
  work: Work[];
};

/** The stored spec of a new payment watch: its schedule and deadline checked. */
function specOf(options: Pick<PaymentsOptions, "minPollMs">, watch: Watch, now: number): Spec {
  const { schedule, deadline } = timesOf(options, watch, now, {
    schedule: DEFAULT_SCHEDULE[watch.provider],
    watchMs: DEFAULT_WATCH_MS,
  });
  return {
    provider: watch.provider,
    account: watch.account,
    outTradeNo: watch.outTradeNo,
    schedule,
    deadline,
    closeOnDeadline: watch.closeOnDeadline ?? false,
    notify: watch.notify,
    createdAt: now,
    ...(watch.amount
      ? {
          amount: {
            total: watch.amount.total,
            currency: watch.amount.currency ?? DEFAULT_CURRENCY,
          },
        }
      : {}),
  };
}

type PaymentTypes = {
  spec: Spec;
  key: Order;
  input: Watch;
  view: Payment;
  ended: PaymentEnded;
  answer: ProviderAnswer & { kind: "trade" };
};

/** What is a payment watch's own, for the code every watch shares. */
export const PAYMENT_WATCH: WatchKind<PaymentTypes> = {
  name: "payment",
  thing: "order",
  topic: PAYMENTS_TOPIC,
  topicConfig: PAYMENTS_TOPIC_CONFIG,
  index: "watches",
  input: WatchInput,
  specOf,
  keyOf: ({ provider, account, outTradeNo }) => ({ provider, account, outTradeNo }),
  numberOf: (order) => order.outTradeNo,
  idOf: (order) => watchIdOf(order.provider, order.account, order.outTradeNo),
  viewOf: paymentOf,
  wordField: "tradeState",
  pollSubrequests: POLL_SUBREQUESTS,
  ask: askPayment,
  unknownAccount: (message) => ({ kind: "outcome", state: "failed", word: message }),
  judge,
  outcomePrefix,
};

export class Payments extends Watches<PaymentTypes> {
  constructor(options: PaymentsOptions) {
    super(PAYMENT_WATCH, options);
  }

  /** Starts watching an order (see startWatch); `work`: its polls due within seconds. */
  async start(run: Run, input: unknown, access: Access): Promise<Started> {
    const { created, watch, work } = await this.startWatch(run, input, access);
    return { created, payment: watch, work };
  }

  /** Watches newest first, a page at a time, as far as `access` sees them. */
  list(page: { cursor?: string; limit: number } & Access) {
    return this.listWatches(page);
  }
}

export function createPayments(options: PaymentsOptions): Payments {
  return new Payments(options);
}
