// The one transition of a watch to what a poll or a notification concluded, shared by both, and
// the work that follows: an outcome's pushes to its notify topics, the next poll due soon.
import type { ProviderName } from "../domain/payments";
import { PAYMENTS_TOPIC } from "../redis/replies";
import type { Run } from "../run/run";
import { soon, type Work } from "../run/work";
import type { ProviderAnswer } from "./provider";
import { judge, outcomePrefix } from "./watch-conclusions";
import { watchIdOf } from "./watch-records";
import type { Conclusion, PaymentsOptions, Spec } from "./watch-types";

/** A conclusion applied (or not: the watch had moved on) and the work that follows. */
export type Concluded = { applied: boolean; work: Work[] };

/** What a conclusion comes to: who concluded it, for which poll (or "" for a notification). */
export type Concluding = {
  watchId: string;
  spec: Spec;
  /** The poll job's receipt; "" for a notification, which needs none. */
  receipt: string;
  source: "poll" | "notify";
  conclusion: Conclusion;
  polls: number;
};

/**
 * Applies a conclusion through the watch's one transition. An outcome is added to each notify
 * topic by the same script, exactly once; its pushes then go out from this run. A poll that did
 * not end the watch leads to the polls due soon.
 */
export async function conclude(
  options: PaymentsOptions,
  run: Run,
  c: Concluding,
): Promise<Concluded> {
  const { conclusion, spec } = c;
  const outcome = conclusion.kind === "outcome";
  const result = await options.scripts.run("watchPolled", run.clock(), [
    c.watchId,
    c.receipt,
    conclusion.kind,
    conclusion.tradeState,
    outcome ? conclusion.state : "",
    outcome ? outcomePrefix(spec, c.source, c.polls, conclusion) : "",
    options.defaults.ttrMs,
    options.defaults.maxAttempts,
  ]);
  if (!result.applied) return { applied: false, work: [] };
  const now = run.clock();
  if (!outcome) return { applied: true, work: [soon(PAYMENTS_TOPIC, now)] };
  run.log({
    level: "info",
    event: "payment_outcome",
    provider: spec.provider,
    account: spec.account,
    state: conclusion.state,
    tradeState: conclusion.tradeState,
    source: c.source,
  });
  return { applied: true, work: [...new Set(spec.notify)].map((topic) => soon(topic, now)) };
}

/**
 * A provider's verified notification about an order settles its watch through the same
 * transition as a poll; an order nobody watches (or a watch already ended) is ignored.
 */
export async function concludeByNotification(
  options: PaymentsOptions,
  run: Run,
  order: { provider: ProviderName; account: string; outTradeNo: string },
  answer: ProviderAnswer & { kind: "trade" },
): Promise<Concluded> {
  const watchId = await watchIdOf(order.provider, order.account, order.outTradeNo);
  const stored = await options.scripts.run("watchRead", run.clock(), [watchId]);
  if (stored?.fields.state !== "polling") return { applied: false, work: [] };
  const spec = JSON.parse(stored.fields.spec ?? "{}") as Spec;
  const conclusion = judge(spec, answer, run.clock);
  if (conclusion.kind !== "outcome") return { applied: false, work: [] };
  const polls = Number(stored.fields.polls ?? 0);
  return conclude(options, run, {
    watchId,
    spec,
    receipt: "",
    source: "notify",
    conclusion,
    polls,
  });
}
