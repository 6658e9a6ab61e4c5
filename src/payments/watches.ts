// Payment watches (DESIGN §4): start, read, stop; the poller that queries the provider on the
// watch's schedule; and the one transition to an outcome that polls and notifications share.
import { backoffStepMs } from "../domain/backoff";
import { DelayqError, parseInput } from "../domain/errors";
import {
  DEFAULT_SCHEDULE,
  DEFAULT_WATCH_MS,
  type OutcomeEvent,
  type Payment,
  type ProviderName,
  WatchInput,
} from "../domain/payments";
import { RawJson } from "../domain/raw-json";
import type { Backoff } from "../domain/schemas";
import { scopeAllows, type TopicScope } from "../domain/scope";
import { type Logger, messageOf } from "../log";
import {
  PAYMENTS_TOPIC_CONFIG,
  type WatchRecord,
  watchPolled,
  watchRead,
  watchStart,
  watchStop,
} from "../redis/lua/scripts/payments";
import type { RecordMeta } from "../redis/record";
import type { ScriptRunner } from "../redis/runner";
import type { AlipayAccount, WechatPayAccount } from "./accounts";
import { alipayProvider } from "./alipay";
import type { Provider, ProviderAnswer, ProviderOptions } from "./provider";
import { wechatPayProvider } from "./wechatpay";

/** WeChat Pay's ORDER_NOT_EXIST is taken as "not yet" for this long after the watch starts. */
const NOT_FOUND_GRACE_MS = 5 * 60_000;
/** Past its deadline a watch whose close keeps failing transiently gives up after this. */
const CLOSE_GIVE_UP_MS = 10 * 60_000;

export type PaymentsOptions = {
  scripts: ScriptRunner;
  clock: () => number;
  alipay: ReadonlyMap<string, AlipayAccount>;
  wechatpay: ReadonlyMap<string, WechatPayAccount>;
  /** How providers are called (a fetch of tests, a timeout). */
  providerOptions?: ProviderOptions;
  /** Defaults of outcome jobs in topics that set none. */
  defaults: { ttrMs: number; maxAttempts: number };
  log: Logger;
  /** Counts polls: `delayq_polls_total{provider,outcome}`. */
  count?: (provider: string, outcome: string) => void;
  /**
   * Called with the notify topics after an outcome, to deliver push topics at once. The work it
   * answers is awaited by a poll (which runs inside an invocation's waitUntil already) and handed
   * to a notification's `defer` (the request's waitUntil), so a Worker does not cut it off.
   */
  onOutcome?: (topics: readonly string[]) => Promise<unknown>;
  /**
   * Claims and runs the polls due within the next seconds (the dispatcher, for __payments):
   * called after a watch starts and after a poll that did not end it, so that a poll due before
   * the next tick still comes on time.
   */
  pollSoon?: () => Promise<unknown>;
};

/** The stored spec of a watch (also its poll job's body). */
type Spec = {
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
type Conclusion =
  | { kind: "pending" | "transient"; tradeState: string }
  | {
      kind: "outcome";
      state: "paid" | "closed" | "failed" | "expired";
      tradeState: string;
      answer?: ProviderAnswer & { kind: "trade" };
    };

export type Payments = ReturnType<typeof createPayments>;

export function createPayments(options: PaymentsOptions) {
  const { scripts, clock, log } = options;

  function provider(name: ProviderName, account: string): Provider {
    if (name === "alipay") {
      const found = options.alipay.get(account);
      if (found) return alipayProvider(found, options.providerOptions);
    } else {
      const found = options.wechatpay.get(account);
      if (found) return wechatPayProvider(found, options.providerOptions);
    }
    throw unknownAccount(name, account);
  }

  function unknownAccount(name: ProviderName, account: string): DelayqError {
    const variable = name === "alipay" ? "DQ_ALIPAY_ACCOUNTS" : "DQ_WECHATPAY_ACCOUNTS";
    const known = [...(name === "alipay" ? options.alipay : options.wechatpay).keys()];
    return new DelayqError(
      "unknown_account",
      `No ${name} account "${account}": the accounts are the keys of ${variable} (${
        known.length > 0 ? known.map((k) => `"${k}"`).join(", ") : "none is set"
      })`,
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
      if (options.onOutcome) defer(options.onOutcome(spec.notify));
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
  ): Promise<boolean> {
    const watchId = await watchIdOf(name, account, outTradeNo);
    const stored = await scripts.run(watchRead, clock(), [watchId]);
    if (stored?.fields.state !== "polling") return false;
    const spec = JSON.parse(stored.fields.spec ?? "{}") as Spec;
    const conclusion = judge(spec, answer);
    if (conclusion.kind !== "outcome") return false;
    const polls = Number(stored.fields.polls ?? 0);
    return conclude(watchId, spec, "", "notify", conclusion, polls, defer);
  }

  /** Queries once more after a close: the order may have been paid meanwhile. */
  async function atDeadline(spec: Spec, api: Provider): Promise<Conclusion> {
    if (spec.closeOnDeadline) {
      const closed = await api.close(spec.outTradeNo);
      if (closed.kind === "transient") {
        if (clock() < spec.deadline + CLOSE_GIVE_UP_MS) {
          return { kind: "transient", tradeState: `close: ${closed.reason}` };
        }
      } else if (closed.kind === "config") {
        return { kind: "outcome", state: "failed", tradeState: `close: ${closed.reason}` };
      }
    }
    const last = await api.query(spec.outTradeNo);
    if (last.kind === "trade" && (last.outcome === "paid" || last.outcome === "failed")) {
      return { kind: "outcome", state: last.outcome, tradeState: last.tradeState, answer: last };
    }
    if (last.kind === "transient" && clock() < spec.deadline + CLOSE_GIVE_UP_MS) {
      return { kind: "transient", tradeState: last.reason };
    }
    const tradeState =
      last.kind === "trade" || last.kind === "notFound" ? last.tradeState : "expired";
    return {
      kind: "outcome",
      state: "expired",
      tradeState,
      ...(last.kind === "trade" ? { answer: last } : {}),
    };
  }

  /** What a verified answer means for the watch (DESIGN §4, reference/payments.md). */
  function judge(spec: Spec, answer: ProviderAnswer): Conclusion {
    switch (answer.kind) {
      case "trade":
        if (answer.outcome === "pending") return { kind: "pending", tradeState: answer.tradeState };
        return { kind: "outcome", state: answer.outcome, tradeState: answer.tradeState, answer };
      case "transient":
        return { kind: "transient", tradeState: answer.reason };
      case "config":
        return { kind: "outcome", state: "failed", tradeState: answer.reason };
      case "notFound":
        if (clock() - spec.createdAt < NOT_FOUND_GRACE_MS) {
          return { kind: "pending", tradeState: answer.tradeState };
        }
        return { kind: "outcome", state: "failed", tradeState: answer.tradeState };
    }
  }

  return {
    /** Starts watching an order; idempotent by (provider, account, outTradeNo). */
    async start(
      input: unknown,
      scope: TopicScope,
    ): Promise<{ created: boolean; payment: Payment }> {
      const watch = parseInput(WatchInput, input, "payment watch");
      for (const topic of watch.notify) {
        if (!scopeAllows(scope, topic)) {
          throw new DelayqError("forbidden", `This token may not act on topic "${topic}"`);
        }
      }
      provider(watch.provider, watch.account); // unknown_account before anything is stored
      const now = clock();
      const deadline = watch.deadline ?? now + DEFAULT_WATCH_MS;
      if (deadline <= now) {
        throw new DelayqError("invalid_request", "deadline: must be in the future");
      }
      const schedule = watch.schedule ?? DEFAULT_SCHEDULE[watch.provider];
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
      return { created, payment: paymentOf(stored) };
    },

    async get(name: ProviderName, account: string, outTradeNo: string, scope: TopicScope) {
      const stored = await scripts.run(watchRead, clock(), [
        await watchIdOf(name, account, outTradeNo),
      ]);
      const payment = stored && paymentOf(stored);
      if (!payment?.notify.every((topic) => scopeAllows(scope, topic))) {
        throw notFound(name, account, outTradeNo);
      }
      return payment;
    },

    async stop(name: ProviderName, account: string, outTradeNo: string, scope: TopicScope) {
      await this.get(name, account, outTradeNo, scope);
      await scripts.run(watchStop, clock(), [await watchIdOf(name, account, outTradeNo)]);
    },

    /**
     * One poll, for a claimed poll job (the dispatcher's internal handler for __payments):
     * queries the provider (closing the order first when its deadline has come and it asked to)
     * and applies the verified answer. Only verified answers decide; anything else is retried.
     */
    async poll(meta: RecordMeta, body: string): Promise<void> {
      const spec = JSON.parse(body) as Spec;
      const watchId = meta.id.slice("pay:".length);
      const receipt = meta.receipt ?? "";
      // Stopped (or settled by a notification) since this poll was claimed: ask no more.
      const current = await scripts.run(watchRead, clock(), [watchId]);
      if (current?.fields.state !== "polling") return;
      let conclusion: Conclusion;
      try {
        const api = provider(spec.provider, spec.account);
        conclusion =
          clock() >= spec.deadline
            ? await atDeadline(spec, api)
            : judge(spec, await api.query(spec.outTradeNo));
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
      );
      await Promise.all(outcomes);
      if (applied && conclusion.kind !== "outcome") await options.pollSoon?.();
    },

    /**
     * A provider's verified notification about an order: settles its watch through the same
     * transition as a poll (an order nobody watches is ignored). True when it changed the watch.
     * `defer` takes the outcome's deliveries to push topics (the request's waitUntil); without it
     * they are awaited before this answers.
     */
    async notified(
      name: ProviderName,
      account: string,
      outTradeNo: string,
      answer: ProviderAnswer & { kind: "trade" },
      defer?: (work: Promise<unknown>) => void,
    ): Promise<boolean> {
      const outcomes: Promise<unknown>[] = [];
      const changed = await settleByNotification(name, account, outTradeNo, answer, (work) =>
        defer ? defer(work) : outcomes.push(work),
      );
      await Promise.all(outcomes);
      return changed;
    },

    provider,
    /** Runs the polls due within seconds (see PaymentsOptions.pollSoon). */
    pollSoon: async () => {
      await options.pollSoon?.();
    },
  };
}

/** A watch's id: 26 base32 characters of SHA-256 over (provider, account, out_trade_no). */
export async function watchIdOf(
  name: string,
  account: string,
  outTradeNo: string,
): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest(
      "SHA-256",
      new TextEncoder().encode(`${name}\n${account}\n${outTradeNo}`),
    ),
  );
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of digest) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 26) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

function notFound(name: string, account: string, outTradeNo: string): DelayqError {
  return new DelayqError(
    "payment_not_found",
    `No payment watch for ${name}/${account}/${outTradeNo} (ended watches are forgotten after ` +
      "the retention window), or its notify topics are not ones this token may act on",
  );
}

/** The outcome job's body up to its metadata (the script appends the stored metadata and "}"). */
function outcomePrefix(
  spec: Spec,
  source: "poll" | "notify",
  polls: number,
  conclusion: Conclusion & { kind: "outcome" },
): string {
  const event: OutcomeEvent = `payment.${conclusion.state}`;
  const answer = conclusion.answer;
  const parts: string[] = [
    `"event":${JSON.stringify(event)}`,
    `"provider":${JSON.stringify(spec.provider)}`,
    `"account":${JSON.stringify(spec.account)}`,
    `"outTradeNo":${JSON.stringify(spec.outTradeNo)}`,
  ];
  if (answer?.tradeNo) parts.push(`"tradeNo":${JSON.stringify(answer.tradeNo)}`);
  parts.push(`"tradeState":${JSON.stringify(conclusion.tradeState)}`);
  if (answer?.amount) parts.push(`"amount":${JSON.stringify(answer.amount)}`);
  if (answer?.paidAt !== undefined) parts.push(`"paidAt":${answer.paidAt}`);
  parts.push(`"source":${JSON.stringify(source)}`, `"polls":${polls}`);
  return `{${parts.join(",")},"metadata":`;
}

/** The API's Payment from a stored watch; metadata and outcome as their stored JSON text. */
function paymentOf(stored: WatchRecord): Payment {
  const { fields } = stored;
  const spec = JSON.parse(fields.spec ?? "{}") as Spec;
  const payment: Payment = {
    provider: spec.provider,
    account: spec.account,
    outTradeNo: spec.outTradeNo,
    state: (fields.state ?? "polling") as Payment["state"],
    polls: Number(fields.polls ?? 0),
    createdAt: Number(fields.createdAt ?? spec.createdAt),
    deadline: spec.deadline,
    notify: spec.notify,
    metadata: new RawJson(fields.metadata ?? "null"),
  };
  if (payment.state === "polling" && stored.nextPollAt !== undefined) {
    payment.nextPollAt = stored.nextPollAt;
  }
  if (fields.lastAnswer) payment.lastAnswer = JSON.parse(fields.lastAnswer);
  if (fields.outcome) payment.outcome = new RawJson(fields.outcome);
  return payment;
}
