// A run's claims: takes due push jobs, as many as the invocation's budget pays for at their worst
// cost, and sorts them by how they go out (directly, through QStash, or to an internal handler).

import { randomHex } from "../domain/bytes";
import type { PushConfig } from "../domain/push";
import { splitRecord } from "../redis/record";
import type { ReplyOf } from "../redis/runner";
import type { Budget } from "../run/budget";
import { type Parcel, sendTime } from "./delivery";
import type { ClaimedJob, DispatchDeps, JobHandler } from "./deps";

/**
 * Subrequests a direct job may cost: the look before it is sent, the POST, the settle. Jobs due
 * at the same moment share one look (src/dispatch/direct.ts), so a claim's jobs cost 2 each and
 * one look per due time among them.
 */
export const DIRECT_COST = 3;
/** Claims one run makes while jobs are left and the budget pays (each claims up to `batch`). */
const MAX_CLAIM_ROUNDS = 16;
/**
 * Jobs the first claim of a run asks for; each claim after a full one asks for twice as many (up
 * to `batch`). A claim takes the worst cost of every job it asks for until it knows what it got,
 * so runs sharing a budget at once (an outcome pushed to several topics) would otherwise starve
 * each other: the first to claim would hold nearly all of it.
 */
const FIRST_CLAIM = 16;

export type Claimed = {
  claimed: number;
  direct: Parcel[];
  viaQStash: Parcel[];
  internal: { job: ClaimedJob; handler: JobHandler }[];
  /**
   * Whether the run's own limits (its budget, or the rounds' limit, which a shrinking budget
   * reaches) stopped claiming with jobs possibly left: another invocation would go on.
   */
  more: boolean;
  /** The subrequests the claimed jobs may still cost (taken from the budget). */
  cost: number;
  /**
   * Topics with flow control whose jobs the claims held back (or that have jobs due later within
   * the horizon), and when a claim may take more of each (unix ms).
   */
  held: Map<string, number>;
};

export type ClaimArgs = {
  now: number;
  /** Jobs due by then are claimed. */
  horizon: number;
  /** Only this topic's (a request that wrote a job due soon); else every push topic's. */
  topic?: string;
  /**
   * A run asked for by a hand-off (src/dispatch/hand-off.ts): the jobs its first claim takes off
   * the hand-offs' promise, so that the next run stopped by its budget asks for no more than
   * what is left needs.
   */
  consume?: number;
  /** ... and the wave it was asked for, whose promise it takes them off. */
  wave?: number;
};

/** The kind of one of delayq's own push topics, from its push url (`internal:<kind>`). */
export function internalKind(url: string): string {
  return url.startsWith("internal:") ? url.slice("internal:".length) : "";
}

/** The most one claimed job may cost: a direct delivery's, or a handler's if more. */
export function worstJobCost(handlers: DispatchDeps["handlers"]): number {
  return Math.max(DIRECT_COST, ...Object.values(handlers).map((handler) => handler.subrequests));
}

/**
 * What the claimed jobs will cost: direct ones their POST and settle, and a look per due time
 * they share; internal ones their handler's; QStash ones a request per 100 and once.
 */
function cost(claimed: Claimed): number {
  const q = claimed.viaQStash.length;
  const looks = new Set(claimed.direct.map(sendTime)).size;
  return (
    (DIRECT_COST - 1) * claimed.direct.length +
    looks +
    claimed.internal.reduce((sum, { handler }) => sum + handler.subrequests, 0) +
    Math.ceil(q / 100) +
    (q > 0 ? 1 : 0)
  );
}

/**
 * Claims jobs due by `horizon` (of every push topic, or of `topic`). Each claim first takes its
 * own subrequest and the worst cost of as many jobs as it asks for, then gives back what the jobs
 * it got do not need (QStash jobs cost one request per 100); while a claim was full and the budget
 * still pays for more, another follows, asking for twice as many (from FIRST_CLAIM up to batch).
 * Nothing is claimed that the budget cannot pay for: it stays due for the next run.
 */
export async function claimDue(
  deps: DispatchDeps,
  budget: Budget,
  args: ClaimArgs,
): Promise<Claimed> {
  const out: Claimed = {
    claimed: 0,
    direct: [],
    viaQStash: [],
    internal: [],
    more: false,
    cost: 0,
    held: new Map(),
  };
  const worst = worstJobCost(deps.handlers);
  for (let round = 0, size = FIRST_CLAIM; round < MAX_CLAIM_ROUNDS; round++, size *= 2) {
    const most = Math.min(deps.batch, size, Math.floor((budget.left() - 1) / worst));
    if (most <= 0 || !budget.take(1 + most * worst)) {
      out.more = true;
      break;
    }
    const before = { claimed: out.claimed, cost: cost(out) };
    let reply: ReplyOf<"claim">;
    try {
      reply = await deps.scripts.run("claim", args.now, [
        args.horizon,
        most,
        100,
        randomHex(6),
        args.topic ?? "",
        round === 0 ? (args.consume ?? 0) : 0,
        args.wave ?? "",
      ]);
    } catch (error) {
      budget.giveBack(most * worst); // the claim itself was made (or may have been)
      throw error;
    }
    classify(deps, reply, out);
    budget.giveBack(most * worst - (cost(out) - before.cost));
    out.more = out.claimed - before.claimed >= most;
    if (!out.more) break;
  }
  out.cost = cost(out);
  return out;
}

function classify(deps: DispatchDeps, reply: ReplyOf<"claim">, out: Claimed): void {
  for (const { topic, at } of reply.held) {
    out.held.set(topic, Math.min(out.held.get(topic) ?? at, at));
  }
  for (const group of reply) {
    const push = (JSON.parse(group.config) as { push?: PushConfig }).push;
    for (const [i, raw] of group.records.entries()) {
      const { meta, body } = splitRecord(raw);
      out.claimed += 1;
      if (!push) continue; // un-pushed since: its lease brings it back to the pulled topic
      const handler = (push.via as string) === "internal" && deps.handlers[internalKind(push.url)];
      const sendAt = group.sendAt?.[i];
      const parcel: Parcel =
        sendAt === undefined ? { meta, body, push } : { meta, body, push, at: sendAt };
      if (handler) out.internal.push({ job: { meta, body }, handler });
      else if (
        push.via === "qstash" &&
        deps.qstash &&
        deps.route(meta.topic, push.url).refused === undefined
      ) {
        out.viaQStash.push(parcel);
      } else {
        if (push.via === "qstash" && !deps.qstash) deps.warnNoQStash();
        out.direct.push(parcel);
      }
    }
  }
}
