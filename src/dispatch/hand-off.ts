// Hand-offs: when a run's subrequest budget stops its claims with push jobs left, fresh
// invocations are asked for through QStash (each message a new invocation with a budget of its
// own), timed a little before the earliest job left, as many as the jobs left need. On Workers
// an invocation's subrequests are a hard limit; this is how a burst past one budget is still
// delivered on time (docs/push.md: "Bursts past one invocation").
import { DIRECT_WINDOW_MS } from "../domain/push";
import type { ScriptRunner } from "../redis/runner";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import type { QStash } from "./qstash";

/** How long before the earliest job left a fresh run is asked to come, ms. */
export const HAND_OFF_LEAD_MS = 5_000;
/** Most runs one hand-off asks for (one QStash batch request). */
const MAX_RUNS = 100;
/** Continuations of held-back topics are asked for at multiples of this, ms (deduplicated). */
const CONTINUE_BUCKET_MS = 5_000;
/** How long the runs asked for are counted as coming (then forgotten: the next tick goes on). */
const PROMISE_MS = 60_000;

export type HandOff = {
  /** Subrequests one ask costs: the handOff script and the publish. */
  readonly cost: number;
  /**
   * Asks for fresh runs for what `run` left of `scope` (jobs of `topic`, or of every push topic,
   * due by `horizon`), each to take as many jobs as its budget pays for at `jobCost` subrequests
   * a job (as the stopped run's claims found them; the worst cost when unknown); answers how
   * many it asked for. Takes its cost from the run's budget.
   */
  ask(run: Run, scope: { topic?: string; horizon: number; jobCost?: number }): Promise<number>;
  /**
   * Asks for one fresh run at `at` to claim `topic` again: a topic with flow control still held
   * jobs back when `run` ended. Asks of any runs for the same topic and the same few seconds are
   * one (QStash's deduplication), so runs ending together start one run, not one each. Takes one
   * subrequest; answers whether it asked.
   */
  continueAt(run: Run, topic: string, at: number): Promise<boolean>;
  /** The work of a run a hand-off asked for: claim what is due within its reach. */
  work(request: { topic?: string; share?: number }, now: number): Work;
};

export type HandOffOptions = {
  scripts: ScriptRunner;
  qstash: QStash;
  /** The service's public URL: QStash calls POST /v1/qstash/continue there. */
  publicUrl: string;
  /** Subrequests one invocation may make (DQ_SUBREQUESTS). */
  subrequests: number;
  /** The most one claimed job may cost (claims.ts: worstJobCost). */
  worstJobCost: number;
};

/**
 * Jobs a fresh run takes at `jobCost` subrequests each: its budget, less what a request keeps
 * for itself, its hand-off's reserve and its claims' own calls.
 */
export function runShare(subrequests: number, jobCost: number): number {
  return Math.max(1, Math.floor((subrequests - 10) / jobCost));
}

export function qstashHandOff(options: HandOffOptions): HandOff {
  const { scripts, qstash, publicUrl, subrequests, worstJobCost } = options;
  const reach = DIRECT_WINDOW_MS - HAND_OFF_LEAD_MS;
  return {
    cost: 2,
    async ask(run, { topic, horizon, jobCost = worstJobCost }) {
      if (!run.budget.take(2)) return 0;
      const now = run.clock();
      const share = runShare(subrequests, Math.min(Math.max(jobCost, 1), worstJobCost));
      const { runs, firstDue } = await scripts.run("handOff", now, [
        horizon,
        share,
        MAX_RUNS,
        topic ?? "",
        PROMISE_MS,
        reach,
      ]);
      if (runs === 0) {
        run.budget.giveBack(1);
        return 0;
      }
      const at = firstDue === undefined ? now : Math.max(now, firstDue - HAND_OFF_LEAD_MS);
      const notBefore = at > now ? at : undefined;
      await qstash.publishRuns({ publicUrl, runs, topic, share, notBefore });
      run.log({ level: "info", event: "hand_off", topic, runs, share, at });
      return runs;
    },
    async continueAt(run, topic, at) {
      if (!run.budget.take(1)) return false;
      const bucket = Math.floor(at / CONTINUE_BUCKET_MS);
      await qstash.publishRuns({
        publicUrl,
        runs: 1,
        topic,
        share: 0,
        notBefore: at,
        deduplicationId: `flow-${bucket}-${toHex(topic)}`,
      });
      run.log({ level: "info", event: "flow_continue", topic, at });
      return true;
    },
    work: ({ topic, share }, now) => ({
      kind: "claim",
      ...(topic === undefined ? {} : { topic }),
      horizon: now + DIRECT_WINDOW_MS,
      consume: share ?? runShare(subrequests, worstJobCost),
    }),
  };
}

/** A topic name as a deduplication id may carry it (QStash takes letters, digits, -, _ and .). */
function toHex(text: string): string {
  return Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}
