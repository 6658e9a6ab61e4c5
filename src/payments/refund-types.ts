// Shapes shared by the refund watch files: a refund watch's spec, and what a query concluded.
import type { RefundState } from "../domain/refunds";
import type { RefundAnswer } from "./refund-provider";
import type { WatchConclusion, WatchSpec } from "./watch-kind";

/**
 * The most subrequests one refund poll makes: reading the watch, the query, and the transition.
 * What it leads to (the next claim, outcome pushes) takes its own share of the budget.
 */
export const REFUND_POLL_SUBREQUESTS = 3;

/** The stored spec of a refund watch (also its poll job's body). */
export type RefundSpec = WatchSpec & {
  kind: "refund";
  outRefundNo: string;
  /** The refunded order, as given (Alipay: always). */
  outTradeNo?: string;
};

/** The states a refund watch ends in with an outcome. */
export type RefundEnded = Exclude<RefundState, "polling" | "stopped">;

/** What a refund poll or notification concluded; `word`: the refund status, or the error. */
export type RefundConclusion = WatchConclusion<RefundEnded, RefundAnswer & { kind: "refund" }>;
