// The payment poller: the dispatcher's handler for delayq's own topic __payments. One poll
// queries the provider (closing the order first when its deadline has come and it asked to) and
// applies the verified answer; only verified answers decide, anything else is retried soon.
import type { ClaimedJob, Handled, JobHandler } from "../dispatch/dispatcher";
import { DelayqError } from "../domain/errors";
import { messageOf } from "../log";
import { watchIdOfJob } from "../redis/keys";
import type { Run } from "../run/run";
import { countingFetches } from "./provider";
import { providerOf } from "./watch-accounts";
import { conclude } from "./watch-conclude";
import { atDeadline, judge } from "./watch-conclusions";
import { type Conclusion, type PaymentsOptions, POLL_SUBREQUESTS, type Spec } from "./watch-types";
import { fetchesCertificates } from "./wechatpay-certificates";

/** The handler the dispatcher runs each claimed poll job with (push url `internal:payments`). */
export function paymentPoller(options: PaymentsOptions): JobHandler {
  // WeChat Pay's certificate mode may download the certificates once in a poll.
  const download = [...options.wechatpay.values()].some(fetchesCertificates) ? 1 : 0;
  return {
    subrequests: POLL_SUBREQUESTS + download,
    run: (job, run) => poll(options, job, run),
  };
}

/**
 * One poll of a claimed poll job. Answers the subrequests it made (at most POLL_SUBREQUESTS: the
 * watch's read, a close, a query, the transition; one more for a WeChat certificate download) and
 * the work that follows (an outcome's pushes, the next polls due soon), which its run pays for.
 */
async function poll(options: PaymentsOptions, job: ClaimedJob, run: Run): Promise<Handled> {
  const spec = JSON.parse(job.body) as Spec;
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
      event: "payment_poll",
      provider: spec.provider,
      account: spec.account,
      result: conclusion.kind === "outcome" ? conclusion.state : "transient",
      tradeState: conclusion.tradeState.slice(0, 200),
    });
  }
  const { work } = await conclude(options, run, {
    watchId,
    spec,
    receipt: job.meta.receipt ?? "",
    source: "poll",
    conclusion,
    polls: job.meta.attempts,
  });
  return { used: 2 + calls, work };
}

/** Asks the provider (a query, or at the deadline a close and a query); never throws. */
async function ask(
  options: PaymentsOptions,
  spec: Spec,
  clock: () => number,
): Promise<{ conclusion: Conclusion; calls: number }> {
  // The provider calls, counted as they are made (a failed one and a certificate download too).
  const counted = countingFetches(options.providerOptions);
  try {
    const api = providerOf(
      { ...options, providerOptions: counted.options },
      spec.provider,
      spec.account,
    );
    const atEnd = clock() >= spec.deadline;
    const conclusion = atEnd
      ? await atDeadline(spec, api, clock)
      : judge(spec, await api.query(spec.outTradeNo), clock);
    return { conclusion, calls: counted.made() };
  } catch (error) {
    const calls = counted.made();
    if (error instanceof DelayqError && error.code === "unknown_account") {
      return { conclusion: { kind: "outcome", state: "failed", tradeState: error.message }, calls };
    }
    const tradeState = `poll failed: ${messageOf(error)}`;
    return { conclusion: { kind: "transient", tradeState }, calls };
  }
}
