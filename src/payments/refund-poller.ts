// The refund poller: the dispatcher's handler for delayq's own topic __refunds. One poll queries
// the provider about the refund and applies the verified answer; only verified answers decide,
// anything else is retried soon. At the deadline a refund still processing ends expired.
import type { ClaimedJob, Handled, JobHandler } from "../dispatch/dispatcher";
import { DelayqError } from "../domain/errors";
import { messageOf } from "../log";
import { watchIdOfJob } from "../redis/keys";
import type { Run } from "../run/run";
import { countingFetches } from "./provider";
import { askedOf, concludeRefund, judgeRefund, refundAtDeadline } from "./refund-conclude";
import { REFUND_POLL_SUBREQUESTS, type RefundConclusion, type RefundSpec } from "./refund-types";
import { refundProviderOf } from "./watch-accounts";
import type { PaymentsOptions } from "./watch-types";
import { fetchesCertificates } from "./wechatpay-certificates";

/** The handler the dispatcher runs each claimed refund poll with (push url `internal:refunds`). */
export function refundPoller(options: PaymentsOptions): JobHandler {
  // WeChat Pay's certificate mode may download the certificates once in a poll.
  const download = [...options.wechatpay.values()].some(fetchesCertificates) ? 1 : 0;
  return {
    subrequests: REFUND_POLL_SUBREQUESTS + download,
    run: (job, run) => pollRefund(options, job, run),
  };
}

/**
 * One poll of a claimed refund poll job. Answers the subrequests it made (the watch's read, the
 * query, the transition; one more for a WeChat certificate download) and the work that follows.
 */
async function pollRefund(options: PaymentsOptions, job: ClaimedJob, run: Run): Promise<Handled> {
  const spec = JSON.parse(job.body) as RefundSpec;
  const watchId = watchIdOfJob(job.meta.id);
  // Stopped (or settled by a notification) since this poll was claimed: ask no more.
  const current = await options.scripts.run("watchRead", run.clock(), [watchId]);
  if (current?.fields.state !== "polling") return { used: 1, work: [] };
  const { conclusion, calls } = await ask(options, spec, run.clock);
  options.count?.(
    spec.provider,
    conclusion.kind === "outcome" ? conclusion.state : conclusion.kind,
  );
  if (conclusion.kind !== "pending") {
    run.log({
      level: conclusion.kind === "transient" ? "warn" : "info",
      event: "refund_poll",
      provider: spec.provider,
      account: spec.account,
      result: conclusion.kind === "outcome" ? conclusion.state : "transient",
      status: conclusion.status.slice(0, 200),
    });
  }
  const { work } = await concludeRefund(options, run, {
    watchId,
    spec,
    receipt: job.meta.receipt ?? "",
    source: "poll",
    conclusion,
    polls: job.meta.attempts,
  });
  return { used: 2 + calls, work };
}

/** Asks the provider (a query; at the deadline the last one); never throws. */
async function ask(
  options: PaymentsOptions,
  spec: RefundSpec,
  clock: () => number,
): Promise<{ conclusion: RefundConclusion; calls: number }> {
  // The provider calls, counted as they are made (a failed one and a certificate download too).
  const counted = countingFetches(options.providerOptions);
  try {
    const accounts = { ...options, providerOptions: counted.options };
    const api = refundProviderOf(accounts, spec.provider, spec.account);
    const conclusion =
      clock() >= spec.deadline
        ? await refundAtDeadline(spec, api, clock)
        : judgeRefund(spec, await api.queryRefund(askedOf(spec)));
    return { conclusion, calls: counted.made() };
  } catch (error) {
    const calls = counted.made();
    // The account is gone from the configuration: nothing more can be learnt, as at the deadline.
    if (error instanceof DelayqError && error.code === "unknown_account") {
      return { conclusion: { kind: "outcome", state: "expired", status: error.message }, calls };
    }
    return { conclusion: { kind: "transient", status: `poll failed: ${messageOf(error)}` }, calls };
  }
}
