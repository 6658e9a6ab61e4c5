// Shapes shared by the refund watch files: a refund watch's spec, and what a query concluded.
import type { ProviderName } from "../domain/payments";
import type { RefundState } from "../domain/refunds";
import type { Backoff } from "../domain/schemas";
import type { RefundAnswer } from "./refund-provider";

/**
 * The most subrequests one refund poll makes: reading the watch, the query, and the transition.
 * What it leads to (the next claim, outcome pushes) takes its own share of the budget.
 */
export const REFUND_POLL_SUBREQUESTS = 3;

/** The stored spec of a refund watch (also its poll job's body). */
export type RefundSpec = {
  kind: "refund";
  provider: ProviderName;
  account: string;
  outRefundNo: string;
  /** The refunded order, as given (Alipay: always). */
  outTradeNo?: string;
  schedule: Backoff;
  deadline: number;
  notify: string[];
  createdAt: number;
};

/** The states a refund watch ends in with an outcome. */
export type RefundEnded = Exclude<RefundState, "polling" | "stopped">;

/** What a refund poll or notification concluded. */
export type RefundConclusion =
  | { kind: "pending" | "transient"; status: string }
  | {
      kind: "outcome";
      state: RefundEnded;
      status: string;
      answer?: RefundAnswer & { kind: "refund" };
    };
