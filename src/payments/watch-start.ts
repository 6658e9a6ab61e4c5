// Starting a payment watch (DESIGN §4): the caller's access checked, the watch's spec built from
// its input and stored with its first poll in one script; idempotent by the order.

import type { z } from "zod";
import { backoffStepMs } from "../domain/backoff";
import { DelayqError, parseInput } from "../domain/errors";
import {
  DEFAULT_CURRENCY,
  DEFAULT_SCHEDULE,
  DEFAULT_WATCH_MS,
  MAX_METADATA_BYTES,
  MIN_POLL_MS,
  type Payment,
  scheduleProblem,
  WatchInput,
} from "../domain/payments";
import { RawJson } from "../domain/raw-json";
import { type Access, accountAllows, scopeAllows } from "../domain/scope";
import { PAYMENTS_TOPIC, PAYMENTS_TOPIC_CONFIG } from "../redis/replies";
import type { Run } from "../run/run";
import { soon, type Work } from "../run/work";
import { providerOf } from "./watch-accounts";
import { paymentOf, watchIdOf } from "./watch-records";
import type { PaymentsOptions, Spec } from "./watch-types";

type Watch = z.output<typeof WatchInput>;

export type Started = {
  created: boolean;
  payment: Payment;
  /** The polls due within seconds, claimed by the request that started the watch. */
  work: Work[];
};

/**
 * Starts watching an order; idempotent by (provider, account, outTradeNo). The caller's access
 * must allow the account and every notify topic.
 */
export async function startWatch(
  options: PaymentsOptions,
  run: Run,
  input: unknown,
  access: Access,
): Promise<Started> {
  const watch = parseInput(WatchInput, input, "payment watch");
  checkAccess(watch, access);
  providerOf(options, watch.provider, watch.account, access.accounts); // unknown_account first
  const now = run.clock();
  const spec = specOf(options, watch, now);
  const metadata = metadataText(watch.metadata);
  const firstDue = Math.min(now + backoffStepMs(spec.schedule, 1), spec.deadline);
  const watchId = await watchIdOf(spec.provider, spec.account, spec.outTradeNo);
  const { created, watch: stored } = await options.scripts.run("watchStart", now, [
    watchId,
    JSON.stringify(spec),
    spec.deadline,
    firstDue,
    JSON.stringify(spec.schedule),
    JSON.stringify(spec.notify),
    metadata,
    PAYMENTS_TOPIC_CONFIG,
    PAYMENTS_TOPIC,
    "watches",
  ]);
  const payment = paymentOf(stored);
  // The order was watched already, for topics this token may not see: say only that, as an
  // add of an id another topic uses does (the watch, its topics and metadata stay hidden).
  if (!created && !payment.notify.every((topic) => scopeAllows(access.scope, topic))) {
    throw new DelayqError(
      "payment_exists",
      `${spec.provider} order ${spec.outTradeNo} of account ${spec.account} is watched ` +
        "already, for topics this token may not act on",
    );
  }
  return { created, payment, work: created ? [soon(PAYMENTS_TOPIC, now)] : [] };
}

/**
 * Before the account is looked up, so that a token learns nothing of accounts not its own: the
 * account and every notify topic must be the caller's. `what`: what is watched ("orders",
 * "refunds").
 */
export function checkAccess(
  watch: Pick<Watch, "provider" | "account" | "notify">,
  { scope, accounts }: Access,
  what = "orders",
): void {
  if (!accountAllows(accounts, watch.provider, watch.account)) {
    throw new DelayqError(
      "forbidden",
      `This token may not watch ${what} of ${watch.provider} account "${watch.account}" ` +
        `(its DQ_TOKENS entry would need the pattern ${watch.provider}/${watch.account})`,
    );
  }
  for (const topic of watch.notify) {
    if (!scopeAllows(scope, topic)) {
      throw new DelayqError("forbidden", `This token may not act on topic "${topic}"`);
    }
  }
}

/** The stored spec of a new watch: its schedule and deadline checked. */
function specOf(options: PaymentsOptions, watch: Watch, now: number): Spec {
  const deadline = watch.deadline ?? now + DEFAULT_WATCH_MS;
  if (deadline <= now) {
    throw new DelayqError("invalid_request", "deadline: must be in the future");
  }
  const schedule = watch.schedule ?? DEFAULT_SCHEDULE[watch.provider];
  const problem = scheduleProblem(schedule, options.minPollMs ?? MIN_POLL_MS);
  if (problem) throw new DelayqError("invalid_request", problem);
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

/** The metadata as its JSON text, within MAX_METADATA_BYTES. */
export function metadataText(metadata: Watch["metadata"]): string {
  const text = metadata instanceof RawJson ? metadata.text : JSON.stringify(metadata ?? null);
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > MAX_METADATA_BYTES) {
    throw new DelayqError(
      "payload_too_large",
      `metadata is ${bytes} bytes of JSON; the limit is ${MAX_METADATA_BYTES} (it ` +
        "rides in every outcome job: keep an id there and the rest in your own store)",
    );
  }
  return text;
}
