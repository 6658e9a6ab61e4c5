// The poller of every watch kind: the dispatcher's handler for delayq's own topics __payments
// and __refunds, one per kind. One poll reads the watch, asks the provider what the kind asks
// (a payment's query, or at its deadline a close and a query; a refund's query) and applies the
// verified answer; only verified answers decide, anything else is retried soon.
import type { ClaimedJob, Handled, JobHandler } from "../dispatch/dispatcher";
import { DelayqError, withoutAddresses } from "../domain/errors";
import { messageOf } from "../log";
import { watchIdOfJob } from "../redis/keys";
import type { Run } from "../run/run";
import { countingFetches } from "./provider";
import { conclude } from "./watch-conclude";
import type { ConclusionOf, KindTypes, WatchKind } from "./watch-kind";
import type { PaymentsOptions } from "./watch-types";
import { fetchesCertificates } from "./wechatpay-certificates";

/**
 * The handler the dispatcher runs each claimed poll job of `kind` with (push url
 * `internal:payments`, `internal:refunds`).
 */
export function watchPoller<T extends KindTypes>(
  kind: WatchKind<T>,
  options: PaymentsOptions,
): JobHandler {
  // WeChat Pay's certificate mode may download the certificates once in a poll.
  const download = [...options.wechatpay.values()].some(fetchesCertificates) ? 1 : 0;
  return {
    subrequests: kind.pollSubrequests + download,
    run: (job, run) => poll(kind, options, job, run),
  };
}

/**
 * One poll of a claimed poll job. Answers the subrequests it made (at most the kind's
 * pollSubrequests: the watch's read, a payment's close, the query, the transition; one more for
 * a WeChat certificate download) and the work that follows (an outcome's pushes, the next polls
 * due soon), which its run pays for.
 */
async function poll<T extends KindTypes>(
  kind: WatchKind<T>,
  options: PaymentsOptions,
  job: ClaimedJob,
  run: Run,
): Promise<Handled> {
  const spec = JSON.parse(job.body) as T["spec"];
  const watchId = watchIdOfJob(job.meta.id);
  // Stopped (or settled by a notification) since this poll was claimed: ask no more.
  const current = await options.scripts.run("watchRead", run.clock(), [watchId]);
  if (current?.fields.state !== "polling") return { used: 1, work: [] };
  const { conclusion, calls } = await ask(kind, options, spec, run.clock);
  options.count?.(
    spec.provider,
    conclusion.kind === "outcome" ? conclusion.state : conclusion.kind,
  );
  if (conclusion.kind !== "pending") {
    run.log({
      level: conclusion.kind === "transient" ? "warn" : "info",
      event: `${kind.name}_poll`,
      provider: spec.provider,
      account: spec.account,
      result: conclusion.kind === "outcome" ? conclusion.state : "transient",
      [kind.wordField]: conclusion.word.slice(0, 200),
    });
  }
  const { work } = await conclude(kind, options, run, {
    watchId,
    spec,
    receipt: job.meta.receipt ?? "",
    source: "poll",
    conclusion,
    polls: job.meta.attempts,
  });
  return { used: 2 + calls, work };
}

/** Asks the provider what the kind asks; never throws. */
async function ask<T extends KindTypes>(
  kind: WatchKind<T>,
  options: PaymentsOptions,
  spec: T["spec"],
  clock: () => number,
): Promise<{ conclusion: ConclusionOf<T>; calls: number }> {
  // The provider calls, counted as they are made (a failed one and a certificate download too).
  const counted = countingFetches(options.providerOptions);
  try {
    const accounts = { ...options, providerOptions: counted.options };
    return { conclusion: await kind.ask(accounts, spec, clock), calls: counted.made() };
  } catch (error) {
    const calls = counted.made();
    if (error instanceof DelayqError && error.code === "unknown_account") {
      return { conclusion: kind.unknownAccount(error.message), calls };
    }
    // Shown in the watch: what went wrong, without the addresses a network error may name.
    const word = `poll failed: ${withoutAddresses(messageOf(error))}`;
    return { conclusion: { kind: "transient", word }, calls };
  }
}
