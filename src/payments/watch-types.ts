// Shapes shared by the payment watch files: the service's options, a watch's spec, a conclusion.

import type { Budget } from "../dispatch/budget";
import type { ProviderName } from "../domain/payments";
import type { Backoff } from "../domain/schemas";
import type { Logger } from "../log";
import type { ScriptRunner } from "../redis/runner";
import type { AlipayAccount, WechatPayAccount } from "./accounts";
import type { ProviderAnswer, ProviderOptions } from "./provider";

export type PaymentsOptions = {
  scripts: ScriptRunner;
  clock: () => number;
  alipay: ReadonlyMap<string, AlipayAccount>;
  wechatpay: ReadonlyMap<string, WechatPayAccount>;
  /** How providers are called (a fetch of tests, a timeout). */
  providerOptions?: ProviderOptions;
  /** The shortest wait between polls a schedule may ask for, ms. @default MIN_POLL_MS (1 s) */
  minPollMs?: number;
  /** Defaults of outcome jobs in topics that set none. */
  defaults: { ttrMs: number; maxAttempts: number };
  log: Logger;
  /** Counts polls: `delayq_polls_total{provider,outcome}`. */
  count?: (provider: string, outcome: string) => void;
  /**
   * Called with the notify topics after an outcome, to deliver push topics at once. The work it
   * answers is awaited by a poll (which runs inside an invocation's waitUntil already) and handed
   * to a notification's `defer` (the request's waitUntil), so a Worker does not cut it off. It
   * spends from `budget`, the invocation's (a fresh one when the caller has none).
   */
  onOutcome?: (topics: readonly string[], budget?: Budget) => Promise<unknown>;
  /**
   * Claims and runs the polls due within the next seconds (the dispatcher, for __payments):
   * called after a watch starts and after a poll that did not end it, so that a poll due before
   * the next tick still comes on time. A poll passes the budget of the run that handed it over,
   * so the polls it leads to are paid from the same invocation's subrequests.
   */
  pollSoon?: (budget?: Budget) => Promise<unknown>;
};

/**
 * The most subrequests one poll makes: reading the watch, closing the order (at its deadline, when
 * asked to), querying it, and the transition. What it leads to (the next claim, outcome pushes)
 * takes its own share of the budget.
 */
export const POLL_SUBREQUESTS = 4;

/** The stored spec of a watch (also its poll job's body). */
export type Spec = {
  provider: ProviderName;
  account: string;
  outTradeNo: string;
  schedule: Backoff;
  deadline: number;
  closeOnDeadline: boolean;
  notify: string[];
  createdAt: number;
};

/** What a poll or a notification concluded. */
export type Conclusion =
  | { kind: "pending" | "transient"; tradeState: string }
  | {
      kind: "outcome";
      state: "paid" | "closed" | "failed" | "expired";
      tradeState: string;
      answer?: ProviderAnswer & { kind: "trade" };
    };
