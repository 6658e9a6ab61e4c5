// Starting a refund watch (DESIGN §4, "Refund watches"): the caller's access checked as a payment
// watch's, the watch's spec built from its input and stored with its first poll in one script;
// idempotent by (provider, account, outRefundNo).
import type { z } from "zod";
import { backoffStepMs } from "../domain/backoff";
import { DelayqError, parseInput } from "../domain/errors";
import { MIN_POLL_MS, scheduleProblem } from "../domain/payments";
import {
  DEFAULT_REFUND_SCHEDULE,
  DEFAULT_REFUND_WATCH_MS,
  type Refund,
  RefundInput,
} from "../domain/refunds";
import { type Access, scopeAllows } from "../domain/scope";
import { REFUNDS_TOPIC, REFUNDS_TOPIC_CONFIG } from "../redis/replies";
import type { Run } from "../run/run";
import { soon, type Work } from "../run/work";
import { refundOf, refundWatchIdOf } from "./refund-records";
import type { RefundSpec } from "./refund-types";
import { refundProviderOf } from "./watch-accounts";
import { checkAccess, metadataText } from "./watch-start";
import type { PaymentsOptions } from "./watch-types";

type Watch = z.output<typeof RefundInput>;

export type RefundStarted = {
  created: boolean;
  refund: Refund;
  /** The polls due within seconds, claimed by the request that started the watch. */
  work: Work[];
};

/**
 * Starts watching a refund; idempotent by (provider, account, outRefundNo). The caller's access
 * must allow the account and every notify topic. A refund watched already for another
 * outTradeNo, or for topics the caller may not see, is 409 refund_exists.
 */
export async function startRefund(
  options: PaymentsOptions,
  run: Run,
  input: unknown,
  access: Access,
): Promise<RefundStarted> {
  const watch = parseInput(RefundInput, input, "refund watch");
  checkAccess(watch, access, "refunds");
  refundProviderOf(options, watch.provider, watch.account, access.accounts); // unknown_account
  const now = run.clock();
  const spec = specOf(options, watch, now);
  const metadata = metadataText(watch.metadata);
  const firstDue = Math.min(now + backoffStepMs(spec.schedule, 1), spec.deadline);
  const watchId = await refundWatchIdOf(spec.provider, spec.account, spec.outRefundNo);
  const { created, watch: stored } = await options.scripts.run("watchStart", now, [
    watchId,
    JSON.stringify(spec),
    spec.deadline,
    firstDue,
    JSON.stringify(spec.schedule),
    JSON.stringify(spec.notify),
    metadata,
    REFUNDS_TOPIC_CONFIG,
    REFUNDS_TOPIC,
    "refunds",
  ]);
  const refund = refundOf(stored);
  if (!created) checkSame(spec, refund, access);
  return { created, refund, work: created ? [soon(REFUNDS_TOPIC, now)] : [] };
}

/**
 * A refund watched already is answered as it is, unless it notifies topics this caller may not
 * see (said without showing it, as payment_exists does), or names another order: Alipay's
 * out_request_no is unique within its trade only, and a watch of one trade's refund must not
 * stand for another's.
 */
function checkSame(spec: RefundSpec, refund: Refund, access: Access): void {
  const name = `${spec.provider} refund ${spec.outRefundNo} of account ${spec.account}`;
  if (!refund.notify.every((topic) => scopeAllows(access.scope, topic))) {
    throw new DelayqError(
      "refund_exists",
      `${name} is watched already, for topics this token may not act on`,
    );
  }
  const other = refund.outTradeNo;
  if (spec.outTradeNo !== undefined && other !== undefined && other !== spec.outTradeNo) {
    throw new DelayqError(
      "refund_exists",
      `${name} is watched already for order ${other}, not ${spec.outTradeNo}: give each ` +
        "refund a number of its own in the account",
    );
  }
}

/** The stored spec of a new refund watch: its schedule and deadline checked. */
function specOf(options: PaymentsOptions, watch: Watch, now: number): RefundSpec {
  const deadline = watch.deadline ?? now + DEFAULT_REFUND_WATCH_MS;
  if (deadline <= now) {
    throw new DelayqError("invalid_request", "deadline: must be in the future");
  }
  const schedule = watch.schedule ?? DEFAULT_REFUND_SCHEDULE;
  const problem = scheduleProblem(schedule, options.minPollMs ?? MIN_POLL_MS);
  if (problem) throw new DelayqError("invalid_request", problem);
  return {
    kind: "refund",
    provider: watch.provider,
    account: watch.account,
    outRefundNo: watch.outRefundNo,
    ...(watch.outTradeNo !== undefined ? { outTradeNo: watch.outTradeNo } : {}),
    schedule,
    deadline,
    notify: watch.notify,
    createdAt: now,
  };
}
