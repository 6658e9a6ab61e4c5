// Shapes shared by the payment watch files: the service's options, a watch's spec, a conclusion.

import type { ScriptRunner } from "../redis/runner";
import type { AlipayAccount, WechatPayAccount } from "./accounts";
import type { Amount, ProviderAnswer, ProviderOptions } from "./provider";
import type { WatchConclusion, WatchSpec } from "./watch-kind";

export type PaymentsOptions = {
  /** The service's one script runner. */
  scripts: ScriptRunner;
  /** The clock of reads (a watch, the listing). Starts, polls and notifications use their run's. */
  clock?: () => number;
  alipay: ReadonlyMap<string, AlipayAccount>;
  wechatpay: ReadonlyMap<string, WechatPayAccount>;
  /** How providers are called (a fetch of tests, a timeout). */
  providerOptions?: ProviderOptions;
  /** The shortest wait between polls a schedule may ask for, ms. @default MIN_POLL_MS (1 s) */
  minPollMs?: number;
  /**
   * The most watches (payments and refunds together) polling at once that one token's requests
   * started (DQ_MAX_WATCHES_PER_TOKEN). @default DEFAULT_MAX_WATCHES_PER_TOKEN (100,000)
   */
  maxWatchesPerToken?: number;
  /** Defaults of outcome jobs in topics that set none. */
  defaults: { ttrMs: number; maxAttempts: number };
  /** Counts polls: `delayq_polls_total{provider,outcome}`. */
  count?: (provider: string, outcome: string) => void;
};

/**
 * The most subrequests one poll makes: reading the watch, closing the order (at its deadline, when
 * asked to), querying it, and the transition. What it leads to (the next claim, outcome pushes)
 * takes its own share of the budget.
 */
export const POLL_SUBREQUESTS = 4;

/** The stored spec of a watch (also its poll job's body). */
export type Spec = WatchSpec & {
  outTradeNo: string;
  closeOnDeadline: boolean;
  /** What the order must be paid (currency defaulted); absent: any amount is taken. */
  amount?: Amount;
};

/**
 * The states a payment watch ends in with an outcome. mismatch: a verified paid answer whose
 * amount is not the watch's `amount`.
 */
export type PaymentEnded = "paid" | "closed" | "failed" | "expired" | "mismatch";

/** What a poll or a notification concluded; `word`: the trade state, or the error. */
export type Conclusion = WatchConclusion<PaymentEnded, ProviderAnswer & { kind: "trade" }>;
