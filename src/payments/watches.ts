// Payment watches (DESIGN §4): start, read, stop; the poller that queries the provider on the
// watch's schedule; and the one transition to an outcome that polls and notifications share.
import type { Budget } from "../dispatch/budget";
import { backoffStepMs } from "../domain/backoff";
import { DelayqError, parseInput } from "../domain/errors";
import {
  DEFAULT_SCHEDULE,
  DEFAULT_WATCH_MS,
  MAX_METADATA_BYTES,
  MIN_POLL_MS,
  type Payment,
  type ProviderName,
  shortestStep,
  WatchInput,
} from "../domain/payments";
import { RawJson } from "../domain/raw-json";
import { type Access, type AccountScope, accountAllows, scopeAllows } from "../domain/scope";
import { messageOf } from "../log";
import {
  PAYMENTS_TOPIC_CONFIG,
  watchList,
  watchPolled,
  watchRead,
  watchStart,
  watchStop,
} from "../redis/lua/scripts/payments";
import type { RecordMeta } from "../redis/record";
import { alipayProvider } from "./alipay";
import type { Provider, ProviderAnswer } from "./provider";
import { atDeadline, judge, outcomePrefix } from "./watch-conclusions";
import { notFound, paymentOf, watchIdOf } from "./watch-records";
import type { Conclusion, PaymentsOptions, Spec } from "./watch-types";
import { wechatPayProvider } from "./wechatpay";

export type { PaymentsOptions } from "./watch-types";

export type Payments = ReturnType<typeof createPayments>;

export function createPayments(options: PaymentsOptions) {
  const { scripts, clock, log } = options;

  /** `accounts`: whose names an unknown_account error may list (a limited caller's own). */
  function provider(name: ProviderName, account: string, accounts?: AccountScope): Provider {
    if (name === "alipay") {
      const found = options.alipay.get(account);
      if (found) return alipayProvider(found, options.providerOptions);
    } else {
      const found = options.wechatpay.get(account);
      if (found) return wechatPayProvider(found, options.providerOptions);
    }
    throw unknownAccount(name, account, accounts);
  }

  function unknownAccount(
    name: ProviderName,
    account: string,
    accounts: AccountScope,
  ): DelayqError {
    const variable = name === "alipay" ? "DQ_ALIPAY_ACCOUNTS" : "DQ_WECHATPAY_ACCOUNTS";
    // Others' account names are not a limited caller's business: it is told of its own only.
    const known = [...(name === "alipay" ? options.alipay : options.wechatpay).keys()].filter(
      (known) => accountAllows(accounts, name, known),
    );
    const listed =
      known.length > 0
        ? known.map((k) => `"${k}"`).join(", ")
        : accounts === undefined
          ? "none is set"
          : "none this token may watch";
    return new DelayqError(
      "unknown_account",
      `No ${name} account "${account}": the accounts are the keys of ${variable} (${listed})`,
    );
  }

  /** Applies a conclusion through the watch's one transition; true when it changed the watch. */
  async function conclude(
    watchId: string,
    spec: Spec,
    receipt: string,
    source: "poll" | "notify",
    conclusion: Conclusion,
    polls: number,
    defer: (work: Promise<unknown>) => void,
    budget?: Budget,
  ): Promise<boolean> {
    const prefix =
      conclusion.kind === "outcome" ? outcomePrefix(spec, source, polls, conclusion) : "";
    const result = await scripts.run(watchPolled, clock(), [
      watchId,
      receipt,
      conclusion.kind,
      conclusion.tradeState,
      conclusion.kind === "outcome" ? conclusion.state : "",
      prefix,
      options.defaults.ttrMs,
      options.defaults.maxAttempts,
    ]);
    if (result.applied && conclusion.kind === "outcome") {
      log({
        level: "info",
        event: "payment_outcome",
        provider: spec.provider,
        account: spec.account,
        state: conclusion.state,
        tradeState: conclusion.tradeState,
        source,
      });
      if (options.onOutcome) defer(options.onOutcome(spec.notify, budget));
    }
    return result.applied;
  }

  /** A verified notification settles its watch (see Payments.notified). */
  async function settleByNotification(
    name: ProviderName,
    account: string,
    outTradeNo: string,
    answer: ProviderAnswer & { kind: "trade" },
    defer: (work: Promise<unknown>) => void,
    budget?: Budget,
  ): Promise<boolean> {
    const watchId = await watchIdOf(name, account, outTradeNo);
    const stored = await scripts.run(watchRead, clock(), [watchId]);
    if (stored?.fields.state !== "polling") return false;
    const spec = JSON.parse(stored.fields.spec ?? "{}") as Spec;
    const conclusion = judge(spec, answer, clock);
    if (conclusion.kind !== "outcome") return false;
    const polls = Number(stored.fields.polls ?? 0);
    return conclude(watchId, spec, "", "notify", conclusion, polls, defer, budget);
  }

  /**
   * Whether a caller with `access` sees a watch: its account is one the caller may watch and it
   * notifies only topics the caller may act on (a watch of two tenants' topics is the operator's).
   */
  function visible(payment: Payment, access: Access): boolean {
    return (
      accountAllows(access.accounts, payment.provider, payment.account) &&
      payment.notify.every((topic) => scopeAllows(access.scope, topic))
    );
  }

  return {
    /**
     * Starts watching an order; idempotent by (provider, account, outTradeNo). The caller's
     * access must allow the account and every notify topic.
     */
    async start(input: unknown, access: Access): Promise<{ created: boolean; payment: Payment }> {
      const { scope, accounts } = access;
      const watch = parseInput(WatchInput, input, "payment watch");
      // Before the account is looked up, so a token learns nothing of accounts not its own.
      if (!accountAllows(accounts, watch.provider, watch.account)) {
        throw new DelayqError(
          "forbidden",
          `This token may not watch orders of ${watch.provider} account "${watch.account}" ` +
            `(its DQ_TOKENS entry would need the pattern ${watch.provider}/${watch.account})`,
        );
      }
      for (const topic of watch.notify) {
        if (!scopeAllows(scope, topic)) {
          throw new DelayqError("forbidden", `This token may not act on topic "${topic}"`);
        }
      }
      provider(watch.provider, watch.account, accounts); // unknown_account before anything is stored
      const now = clock();
      const deadline = watch.deadline ?? now + DEFAULT_WATCH_MS;
      if (deadline <= now) {
        throw new DelayqError("invalid_request", "deadline: must be in the future");
      }
      const schedule = watch.schedule ?? DEFAULT_SCHEDULE[watch.provider];
      const minPollMs = options.minPollMs ?? MIN_POLL_MS;
      if (shortestStep(schedule) * 1000 < minPollMs) {
        throw new DelayqError(
          "invalid_request",
          `schedule: every wait must be at least ${minPollMs / 1000} s (DQ_MIN_POLL_MS): ` +
            "providers rate-limit order queries",
        );
      }
      const spec: Spec = {
        provider: watch.provider,
        account: watch.account,
        outTradeNo: watch.outTradeNo,
        schedule,
        deadline,
        closeOnDeadline: watch.closeOnDeadline ?? false,
        notify: watch.notify,
        createdAt: now,
      };
      const firstDue = Math.min(now + backoffStepMs(schedule, 1), deadline);
      const metadata =
        watch.metadata instanceof RawJson
          ? watch.metadata.text
          : JSON.stringify(watch.metadata ?? null);
      const metadataBytes = new TextEncoder().encode(metadata).length;
      if (metadataBytes > MAX_METADATA_BYTES) {
        throw new DelayqError(
          "payload_too_large",
          `metadata is ${metadataBytes} bytes of JSON; the limit is ${MAX_METADATA_BYTES} (it ` +
            "rides in every outcome job: keep an id there and the rest in your own store)",
        );
      }
      const watchId = await watchIdOf(spec.provider, spec.account, spec.outTradeNo);
      const { created, watch: stored } = await scripts.run(watchStart, now, [
        watchId,
        JSON.stringify(spec),
        deadline,
        firstDue,
        JSON.stringify(schedule),
        JSON.stringify(spec.notify),
        metadata,
        PAYMENTS_TOPIC_CONFIG,
      ]);
      const payment = paymentOf(stored);
      // The order was watched already, for topics this token may not see: say only that, as an
      // add of an id another topic uses does (the watch, its topics and metadata stay hidden).
      if (!created && !payment.notify.every((topic) => scopeAllows(scope, topic))) {
        throw new DelayqError(
          "payment_exists",
          `${spec.provider} order ${spec.outTradeNo} of account ${spec.account} is watched ` +
            "already, for topics this token may not act on",
        );
      }
      return { created, payment };
    },

    /**
     * Watches newest first, a page at a time (the dashboard's panel): only those `access` sees
     * (see `visible`), so a page may hold fewer than `limit`; `cursor` goes on.
     */
    async list(
      options: { cursor?: string; limit: number } & Access,
    ): Promise<{ watches: Payment[]; cursor?: string }> {
      const { cursor = "" } = options;
      if (cursor !== "" && !/^\d{1,16}\|[a-z2-7]{26}$/.test(cursor)) {
        throw new DelayqError(
          "invalid_request",
          "cursor: not one this listing gave; start again from the first page",
        );
      }
      const page = await scripts.run(watchList, clock(), [cursor, options.limit]);
      const watches = page.watches.map(paymentOf).filter((payment) => visible(payment, options));
      return page.cursor ? { watches, cursor: page.cursor } : { watches };
    },

    /** A watch `access` sees (one it does not see is not found, as one that does not exist). */
    async get(name: ProviderName, account: string, outTradeNo: string, access: Access) {
      // An account not its own is not even read: its watches are none of this caller's business.
      const stored =
        accountAllows(access.accounts, name, account) &&
        (await scripts.run(watchRead, clock(), [await watchIdOf(name, account, outTradeNo)]));
      const payment = stored ? paymentOf(stored) : undefined;
      if (!payment || !visible(payment, access)) throw notFound(name, account, outTradeNo);
      return payment;
    },

    async stop(name: ProviderName, account: string, outTradeNo: string, access: Access) {
      await this.get(name, account, outTradeNo, access);
      await scripts.run(watchStop, clock(), [await watchIdOf(name, account, outTradeNo)]);
    },

    /**
     * One poll, for a claimed poll job (the dispatcher's internal handler for __payments):
     * queries the provider (closing the order first when its deadline has come and it asked to)
     * and applies the verified answer. Only verified answers decide; anything else is retried.
     * What it leads to (the polls due soon, the outcome's pushes) is paid from `budget`, the
     * invocation's. Answers the subrequests the poll itself made (at most POLL_SUBREQUESTS).
     */
    async poll(meta: RecordMeta, body: string, budget?: Budget): Promise<number> {
      const spec = JSON.parse(body) as Spec;
      const watchId = meta.id.slice("pay:".length);
      const receipt = meta.receipt ?? "";
      // Stopped (or settled by a notification) since this poll was claimed: ask no more.
      const current = await scripts.run(watchRead, clock(), [watchId]);
      if (current?.fields.state !== "polling") return 1;
      let conclusion: Conclusion;
      // The provider calls, counted before they are made (a failed one counts too).
      let calls = 0;
      try {
        const api = provider(spec.provider, spec.account);
        const atEnd = clock() >= spec.deadline;
        calls = atEnd && spec.closeOnDeadline ? 2 : 1;
        conclusion = atEnd
          ? await atDeadline(spec, api, clock)
          : judge(spec, await api.query(spec.outTradeNo), clock);
      } catch (error) {
        if (error instanceof DelayqError && error.code === "unknown_account") {
          conclusion = { kind: "outcome", state: "failed", tradeState: error.message };
        } else {
          conclusion = { kind: "transient", tradeState: `poll failed: ${messageOf(error)}` };
        }
      }
      options.count?.(
        spec.provider,
        conclusion.kind === "outcome" ? conclusion.state : conclusion.kind,
      );
      if (conclusion.kind === "outcome" || conclusion.kind === "transient") {
        log({
          level: conclusion.kind === "transient" ? "warn" : "info",
          event: "payment_poll",
          provider: spec.provider,
          account: spec.account,
          result: conclusion.kind === "outcome" ? conclusion.state : "transient",
          tradeState: conclusion.tradeState.slice(0, 200),
        });
      }
      const outcomes: Promise<unknown>[] = [];
      const applied = await conclude(
        watchId,
        spec,
        receipt,
        "poll",
        conclusion,
        meta.attempts,
        (w) => outcomes.push(w),
        budget,
      );
      await Promise.all(outcomes);
      if (applied && conclusion.kind !== "outcome") await options.pollSoon?.(budget);
      return 2 + calls;
    },

    /**
     * A provider's verified notification about an order: settles its watch through the same
     * transition as a poll (an order nobody watches is ignored). True when it changed the watch.
     * `defer` takes the outcome's deliveries to push topics (the request's waitUntil); without it
     * they are awaited before this answers. They spend from `budget`, the request's.
     */
    async notified(
      name: ProviderName,
      account: string,
      outTradeNo: string,
      answer: ProviderAnswer & { kind: "trade" },
      defer?: (work: Promise<unknown>) => void,
      budget?: Budget,
    ): Promise<boolean> {
      const outcomes: Promise<unknown>[] = [];
      const changed = await settleByNotification(
        name,
        account,
        outTradeNo,
        answer,
        (work) => (defer ? defer(work) : outcomes.push(work)),
        budget,
      );
      await Promise.all(outcomes);
      return changed;
    },

    provider,
    /** Runs the polls due within seconds (see PaymentsOptions.pollSoon), from `budget`. */
    pollSoon: async (budget?: Budget) => {
      await options.pollSoon?.(budget);
    },
  };
}
