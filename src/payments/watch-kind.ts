// What a kind of watch (a payment's, a refund's) brings to the code both kinds share: its start
// (watch-start.ts), reads (watch-reads.ts), poller (poller.ts) and one transition
// (watch-conclude.ts) run the same steps for either, asking the kind only for what is its own:
// what it is known by, its spec and API view, its provider question, what an answer means.
import type { z } from "zod";
import type { ProviderName } from "../domain/payments";
import type { Backoff } from "../domain/schemas";
import type { WatchIndex, WatchRecord } from "../redis/replies";
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

/** What a watch is known by: its provider, its account and the kind's own number. */
export type WatchKey = { provider: ProviderName; account: string };

/** What the API shows of every watch, whatever its kind. */
export type WatchView = {
  provider: ProviderName;
  account: string;
  state: string;
  notify: string[];
  nextPollAt?: number;
  lastAnswer?: unknown;
  outcome?: unknown;
  firstOutcome?: unknown;
};

/** What every watch's start input holds. */
export type WatchInputBase = {
  provider: ProviderName;
  account: string;
  notify: string[];
  schedule?: Backoff | undefined;
  deadline?: number | undefined;
  metadata?: unknown;
};

/** The types a kind of watch is made of. */
export type KindTypes = {
  spec: WatchSpec;
  /** What a watch of the kind is known by (an order, a refund). */
  key: WatchKey;
  /** Its start's input, parsed. */
  input: WatchInputBase;
  /** The API's view of it (Payment, Refund). */
  view: WatchView;
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
  /**
   * "payment" or "refund": its log events are `<name>_poll` and `<name>_outcome`, its errors
   * `<name>_not_found` and `<name>_exists`.
   */
  name: "payment" | "refund";
  /** What it watches, in messages: "order", "refund". */
  thing: "order" | "refund";
  /** delayq's own push topic of its polls (__payments, __refunds), and that topic's config. */
  topic: string;
  topicConfig: string;
  /** The listing its watches are kept in (keys.ts: watches, refunds). */
  index: WatchIndex;
  /** Its start's input (the request body's schema). */
  input: z.ZodType<T["input"]>;
  /** A new watch's spec from its input, its schedule and deadline checked. */
  specOf(options: Pick<PaymentsOptions, "minPollMs">, input: T["input"], now: number): T["spec"];
  /**
   * Throws when a watch found already (`existing`) may not stand for the one asked for
   * (`spec`), beyond what every kind checks (that the caller sees it).
   */
  checkSame?(spec: T["spec"], existing: T["view"]): void;
  /** What a watch is known by, from its spec; its own number in that (outTradeNo, outRefundNo). */
  keyOf(spec: T["spec"]): T["key"];
  numberOf(key: T["key"]): string;
  /** A watch's id (its hash's, its poll job's). */
  idOf(key: T["key"]): Promise<string>;
  /** The API's view of a stored watch. */
  viewOf(stored: WatchRecord): T["view"];
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
