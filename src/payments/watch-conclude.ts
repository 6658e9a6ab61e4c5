// The one transition of a watch to what a poll or a notification concluded, shared by polls and
// notifications of both kinds (payments, refunds), and the work that follows: an outcome's
// pushes to its notify topics, the next poll due soon.
import type { Run } from "../run/run";
import { soon, type Work } from "../run/work";
import type { ConclusionOf, KindTypes, WatchKind, WatchSpec } from "./watch-kind";
import type { PaymentsOptions } from "./watch-types";

/**
 * A conclusion applied (or not: the watch had moved on) and the work that follows. `how`: "late"
 * for a late payment told, "duplicate" for a notification the watch had taken already.
 */
export type Concluded = { applied: boolean; how: "" | "late" | "duplicate"; work: Work[] };

const NOTHING: Concluded = { applied: false, how: "", work: [] };

/** A notification id the watch can remember (Alipay's notify_id, WeChat Pay's event id). */
export const NOTIFY_ID = /^[\w.:-]{1,128}$/;

/** One application of a watch's one transition (watchPolled), a payment's or a refund's. */
type Transition = {
  watchId: string;
  /** The poll job's receipt; "" for a notification, which needs none. */
  receipt: string;
  kind: "pending" | "transient" | "outcome";
  /** The answer's word (trade state, refund status) or the error: the watch's lastAnswer. */
  word: string;
  /** The outcome's state, for an outcome. */
  state: string;
  /** The outcome job's body up to its metadata, for an outcome. */
  prefix: string;
  /** A notification's own id, to take it once. */
  notifyId?: string;
};

/** Runs a watch's transition: the one script polls and notifications of both kinds share. */
function transition(
  options: Pick<PaymentsOptions, "scripts" | "defaults">,
  run: Run,
  t: Transition,
) {
  return options.scripts.run("watchPolled", run.clock(), [
    t.watchId,
    t.receipt,
    t.kind,
    t.word,
    t.state,
    t.prefix,
    options.defaults.ttrMs,
    options.defaults.maxAttempts,
    t.notifyId ?? "",
  ]);
}

/** What a conclusion comes to: who concluded it, for which poll (or "" for a notification). */
export type Concluding<T extends KindTypes> = {
  watchId: string;
  spec: T["spec"];
  /** The poll job's receipt; "" for a notification, which needs none. */
  receipt: string;
  source: "poll" | "notify";
  conclusion: ConclusionOf<T>;
  polls: number;
  /** A notification's own id (Alipay's notify_id, WeChat Pay's event id), to take it once. */
  notifyId?: string;
};

/**
 * Applies a conclusion through the watch's one transition. An outcome is added to each notify
 * topic by the same script, exactly once; its pushes then go out from this run. A poll that did
 * not end the watch leads to the polls due soon. A verified payment (a refund's success) of a
 * watch that had ended otherwise or was stopped is told once more, late.
 */
export async function conclude<T extends KindTypes>(
  kind: WatchKind<T>,
  options: PaymentsOptions,
  run: Run,
  c: Concluding<T>,
): Promise<Concluded> {
  const { conclusion, spec } = c;
  const outcome = conclusion.kind === "outcome";
  const result = await transition(options, run, {
    watchId: c.watchId,
    receipt: c.receipt,
    kind: conclusion.kind,
    word: conclusion.word,
    state: outcome ? conclusion.state : "",
    prefix: outcome ? kind.outcomePrefix(spec, c.source, c.polls, conclusion) : "",
    ...(c.notifyId !== undefined ? { notifyId: c.notifyId } : {}),
  });
  const { how } = result;
  if (!result.applied) return { ...NOTHING, how };
  const now = run.clock();
  if (!outcome) {
    // The next poll is claimed here when this run can wait for it; one due before the next tick
    // that it cannot has a fresh run asked for its wave; one due later is a tick's (a claim now
    // would find nothing of it: about 14 Redis commands and a subrequest saved per poll).
    const next = result.nextPollAt;
    return { applied: true, how, work: [soon(kind.topic, now, next)] };
  }
  run.log({
    level: "info",
    event: `${kind.name}_outcome`,
    provider: spec.provider,
    account: spec.account,
    state: conclusion.state,
    [kind.wordField]: conclusion.word,
    source: c.source,
    ...(how === "late" ? { late: true } : {}),
  });
  return { applied: true, how, work: [...new Set(spec.notify)].map((topic) => soon(topic, now)) };
}

/**
 * A provider's verified notification about what a watch watches (an order, a refund) settles
 * the watch `watchId` through the same transition as a poll (a late payment of an ended watch
 * included); one nobody watches, and a notification that says nothing final, are ignored.
 * `notifyId`: the notification's own id.
 */
export async function concludeByNotification<T extends KindTypes>(
  kind: WatchKind<T>,
  options: PaymentsOptions,
  run: Run,
  watchId: string,
  answer: T["answer"],
  notifyId?: string,
): Promise<Concluded> {
  const stored = await options.scripts.run("watchRead", run.clock(), [watchId]);
  if (!stored) return NOTHING;
  const spec = JSON.parse(stored.fields.spec ?? "{}") as T["spec"];
  const conclusion = kind.judge(spec, answer, run.clock);
  if (conclusion.kind !== "outcome") return NOTHING;
  const polls = Number(stored.fields.polls ?? 0);
  return conclude(kind, options, run, {
    watchId,
    spec,
    receipt: "",
    source: "notify",
    conclusion,
    polls,
    // Kept in the watch space-separated: an id of other characters is not remembered.
    ...(notifyId && NOTIFY_ID.test(notifyId) ? { notifyId } : {}),
  });
}

/**
 * The outcome job's body up to its metadata, every kind's: its event, provider and account, the
 * kind's own fields (`own`, each `"name":value`), source and polls. The script appends the stored
 * metadata and "}".
 */
export function outcomeText(
  event: string,
  spec: WatchSpec,
  own: string[],
  source: "poll" | "notify",
  polls: number,
): string {
  const parts: string[] = [
    `"event":${JSON.stringify(event)}`,
    `"provider":${JSON.stringify(spec.provider)}`,
    `"account":${JSON.stringify(spec.account)}`,
    ...own,
    `"source":${JSON.stringify(source)}`,
    `"polls":${polls}`,
  ];
  return `{${parts.join(",")},"metadata":`;
}
