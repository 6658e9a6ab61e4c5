// What a kind of watch (a payment's, a refund's) brings to the code both kinds share: the poller
// (poller.ts) and the one transition (watch-conclude.ts) run the same steps for either, asking
// the kind only for what is its own (its provider question, what an answer means, its outcome).
import type { ProviderName } from "../domain/payments";
import type { Backoff } from "../domain/schemas";
import type { PaymentsOptions } from "./watch-types";

/** What every watch's stored spec holds (also its poll job's body), a payment's or a refund's. */
export type WatchSpec = {
  provider: ProviderName;
  account: string;
  schedule: Backoff;
  deadline: number;
  notify: string[];
  createdAt: number;
};

/**
 * What a poll or a notification concluded: nothing yet (pending), nothing to be trusted
 * (transient), or an outcome in one of the kind's ended states. `word`: the provider's own word
 * (a trade state, a refund status) or the error, kept as the watch's last answer.
 */
export type WatchConclusion<State extends string, Answer> =
  | { kind: "pending" | "transient"; word: string }
  | { kind: "outcome"; state: State; word: string; answer?: Answer };

/** The types a kind of watch is made of. */
export type KindTypes = {
  spec: WatchSpec;
  /** The states it ends in with an outcome. */
  ended: string;
  /** A verified answer an outcome carries (a trade's, a refund's). */
  answer: unknown;
};

/** A conclusion of a kind of watch. */
export type ConclusionOf<T extends KindTypes> = WatchConclusion<T["ended"], T["answer"]>;

/** The accounts a poll asks through (its provider calls counted). */
export type PollAccounts = Pick<PaymentsOptions, "alipay" | "wechatpay" | "providerOptions">;

/** What is a kind's own, for the code all watches share. */
export type WatchKind<T extends KindTypes> = {
  /** "payment" or "refund": its log events are `<name>_poll` and `<name>_outcome`. */
  name: "payment" | "refund";
  /** delayq's own push topic of its polls (__payments, __refunds). */
  topic: string;
  /** The name its provider's word goes by in logs: a payment's tradeState, a refund's status. */
  wordField: "tradeState" | "status";
  /** The most subrequests one poll makes, a certificate download aside. */
  pollSubrequests: number;
  /**
   * One poll's question to the provider: a query, or what the deadline asks for; what its answer
   * concludes. Throws unknown_account for an account gone from the configuration.
   */
  ask(accounts: PollAccounts, spec: T["spec"], clock: () => number): Promise<ConclusionOf<T>>;
  /** What a poll concludes when the watch's account is gone from the configuration. */
  unknownAccount(message: string): ConclusionOf<T>;
  /** What a verified answer (a notification's) concludes. */
  judge(spec: T["spec"], answer: T["answer"], clock: () => number): ConclusionOf<T>;
  /** The outcome job's body up to its metadata (the script appends the stored metadata and "}"). */
  outcomePrefix(
    spec: T["spec"],
    source: "poll" | "notify",
    polls: number,
    conclusion: ConclusionOf<T> & { kind: "outcome" },
  ): string;
};
