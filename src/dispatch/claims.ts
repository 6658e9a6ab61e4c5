// A run's claims: takes due push jobs, as many as the invocation's budget pays for at their worst
// cost, and sorts them by how they go out (directly, through QStash, or to an internal handler).

import { randomHex } from "../domain/bytes";
import type { PushConfig } from "../domain/push";
import type { Logger } from "../log";
import { claim } from "../redis/lua/scripts/push";
import { type RecordMeta, splitRecord } from "../redis/record";
import type { ScriptRunner } from "../redis/runner";
import type { Budget } from "./budget";
import type { Parcel } from "./delivery";

/** Subrequests a direct job may cost: the look before it is sent, the POST, the settle. */
export const DIRECT_COST = 3;
/** Claims one run makes while jobs are left and the budget pays (each claims up to `batch`). */
const MAX_CLAIM_ROUNDS = 10;
/**
 * Jobs the first claim of a run asks for; each claim after a full one asks for twice as many (up
 * to `batch`). A claim takes the worst cost of every job it asks for until it knows what it got,
 * so runs sharing a budget at once (an outcome pushed to several topics) would otherwise starve
 * each other: the first to claim would hold nearly all of it.
 */
const FIRST_CLAIM = 16;

/** One of delayq's own push topics' handler, by its push url (`internal:<name>`). */
export type InternalHandler = {
  /** The most subrequests one job costs (taken from the budget when it is claimed). */
  subrequests: number;
  /**
   * Runs one job, which it settles itself, spending any further work (a run it starts) from
   * `budget`; answers the subrequests the job itself made (the rest of its cost is given back).
   */
  run(meta: RecordMeta, body: string, budget: Budget): Promise<number>;
};

export type Claimed = {
  claimed: number;
  direct: Parcel[];
  viaQStash: Parcel[];
  internal: { meta: RecordMeta; body: string; handler: InternalHandler }[];
  /** Whether the budget (or the rounds' limit) stopped claiming with jobs possibly left. */
  more: boolean;
};

export type ClaimOptions = {
  scripts: ScriptRunner;
  budget: Budget;
  batch: number;
  internal?: Record<string, InternalHandler>;
  /** Whether QStash (and the public URL for its callbacks) is configured. */
  qstash: boolean;
  /**
   * Whether a topic's deliveries to `url` are refused (DQ_PRIVATE_PUSH). Such a QStash job is
   * not published (QStash, or whatever QSTASH_URL names, would deliver it): it goes the direct
   * way, which fails the attempt as refused without sending anything.
   */
  refused?: (topic: string, url: string) => boolean;
  log: Logger;
  /** Called once per process when a topic wants QStash and it is not configured. */
  warnNoQStash: () => void;
};

/** What the claimed jobs will cost: direct and internal ones each, QStash ones per 100 and once. */
function cost(claimed: Claimed): number {
  const q = claimed.viaQStash.length;
  return (
    DIRECT_COST * claimed.direct.length +
    claimed.internal.reduce((sum, job) => sum + job.handler.subrequests, 0) +
    Math.ceil(q / 100) +
    (q > 0 ? 1 : 0)
  );
}

/**
 * Claims jobs due by `horizon` (of every push topic, or of `topic`). Each claim first takes its
 * own subrequest and the worst cost of as many jobs as it asks for, then gives back what the jobs
 * it got do not need (QStash jobs cost one request per 100); while a claim was full and the budget
 * still pays for more, another follows, asking for twice as many (from FIRST_CLAIM up to batch). Nothing is claimed that the budget cannot pay for: it
 * stays due for the next run.
 */
export async function claimDue(
  options: ClaimOptions,
  args: { now: number; horizon: number; topic?: string },
): Promise<Claimed> {
  const { budget } = options;
  const out: Claimed = { claimed: 0, direct: [], viaQStash: [], internal: [], more: false };
  const worst = Math.max(
    DIRECT_COST,
    ...Object.values(options.internal ?? {}).map((handler) => handler.subrequests),
  );
  for (let round = 0, size = FIRST_CLAIM; round < MAX_CLAIM_ROUNDS; round++, size *= 2) {
    const most = Math.min(options.batch, size, Math.floor((budget.left() - 1) / worst));
    if (most <= 0 || !budget.take(1 + most * worst)) {
      out.more = true;
      break;
    }
    const before = { claimed: out.claimed, cost: cost(out) };
    let groups: Awaited<ReturnType<typeof claim.parse>>;
    try {
      groups = await options.scripts.run(claim, args.now, [
        args.horizon,
        most,
        100,
        randomHex(6),
        args.topic ?? "",
      ]);
    } catch (error) {
      budget.giveBack(most * worst); // the claim itself was made (or may have been)
      throw error;
    }
    classify(options, groups, out);
    budget.giveBack(most * worst - (cost(out) - before.cost));
    out.more = out.claimed - before.claimed >= most;
    if (!out.more) break;
  }
  return out;
}

function classify(
  options: ClaimOptions,
  groups: Awaited<ReturnType<typeof claim.parse>>,
  out: Claimed,
): void {
  for (const group of groups) {
    const push = (JSON.parse(group.config) as { push?: PushConfig }).push;
    for (const raw of group.records) {
      const { meta, body } = splitRecord(raw);
      out.claimed += 1;
      if (!push) continue; // un-pushed since: its lease brings it back to the pulled topic
      const handler = (push.via as string) === "internal" && options.internal?.[push.url];
      if (handler) out.internal.push({ meta, body, handler });
      else if (
        push.via === "qstash" &&
        options.qstash &&
        !options.refused?.(meta.topic, push.url)
      ) {
        out.viaQStash.push({ meta, body, push });
      } else {
        if (push.via === "qstash" && !options.qstash) options.warnNoQStash();
        out.direct.push({ meta, body, push });
      }
    }
  }
}
