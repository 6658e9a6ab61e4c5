// Hand-offs: when a run's subrequest budget stops its claims with push jobs left, fresh
// invocations are asked for through QStash (each message a new invocation with a budget of its
// own), wave by wave across the stopped claim's horizon: each wave's runs come a little before
// the wave begins and take the jobs due in it, as many runs as those jobs need. And a job due
// soon that neither the run nor the next tick would claim in time (a run's window ends before
// it, the tick may come after it) has a run asked for its wave. On Workers an invocation's
// subrequests are a hard limit; this is how a load past one budget is still delivered on time
// (docs/push.md: "Bursts past one invocation").
import { DIRECT_WINDOW_MS } from "../domain/push";
import type { ScriptRunner } from "../redis/runner";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import type { QStash } from "./qstash";

/** How long before its wave begins a fresh run is asked to come, ms. */
export const HAND_OFF_LEAD_MS = 5_000;
/**
 * A wave's length, ms: a run that comes HAND_OFF_LEAD_MS before its wave claims what is due within
 * its window (DIRECT_WINDOW_MS), the whole wave.
 */
export const HAND_OFF_WAVE_MS = DIRECT_WINDOW_MS - HAND_OFF_LEAD_MS;
/** Most runs one hand-off asks for (one QStash batch request). */
const MAX_RUNS = 100;
/** Continuations of held-back topics are asked for at multiples of this, ms (deduplicated). */
const CONTINUE_BUCKET_MS = 5_000;
/** How long the runs asked for are counted as coming after their wave begins (then forgotten). */
const PROMISE_MS = 60_000;

export type HandOff = {
  /** Subrequests one ask costs: the handOff script and the publish. */
  readonly cost: number;
  /**
   * Asks for fresh runs for what `run` left of `scope` (jobs of `topic`, or of every push topic,
   * due by `horizon`), wave by wave, each to take as many jobs as its budget pays for at
   * `jobCost` subrequests a job (as the stopped run's claims found them; the worst cost when
   * unknown); answers how many it asked for. Takes its cost from the run's budget.
   */
  ask(run: Run, scope: { topic?: string; horizon: number; jobCost?: number }): Promise<number>;
  /**
   * Asks for one fresh run for the wave of `due`, to claim `topic`'s jobs due in it: a job `run`
   * cannot claim itself (its window ends first) and the next tick may not claim in time. Asks of
   * any runs for the same topic and wave are one (QStash's deduplication), and this process asks
   * once. Takes one subrequest when it asks; answers whether it asked, had asked already, or had
   * no budget left to ask.
   */
  cover(run: Run, topic: string, due: number): Promise<"asked" | "already" | "no-budget">;
  /**
   * Asks for one fresh run at `at` to claim `topic` again: a topic with flow control still held
   * jobs back when `run` ended. Asks of any runs for the same topic and the same few seconds are
   * one (QStash's deduplication), so runs ending together start one run, not one each. Takes one
   * subrequest; answers whether it asked.
   */
  continueAt(run: Run, topic: string, at: number): Promise<boolean>;
  /** The work of a run a hand-off asked for: claim what is due within its reach. */
  work(request: { topic?: string; share?: number; wave?: number }, now: number): Work;
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
  /** The waves this process asked a run for and that have not ended, by topic. */
  const covered = new Map<string, Set<number>>();
  return {
    cost: 2,
    async ask(run, { topic, horizon, jobCost = worstJobCost }) {
      if (!run.budget.take(2)) return 0;
      const now = run.clock();
      const share = runShare(subrequests, Math.min(Math.max(jobCost, 1), worstJobCost));
      const waves = await scripts.run("handOff", now, [
        horizon,
        share,
        MAX_RUNS,
        topic ?? "",
        PROMISE_MS,
        HAND_OFF_WAVE_MS,
      ]);
      if (waves.length === 0) {
        run.budget.giveBack(1);
        return 0;
      }
      await qstash.publishRuns({
        publicUrl,
        topic,
        share,
        waves: waves.map(({ wave, runs }) => ({ wave, runs, notBefore: waveStart(wave, now) })),
      });
      const runs = waves.reduce((sum, wave) => sum + wave.runs, 0);
      run.log({ level: "info", event: "hand_off", topic, runs, share, waves: waves.length });
      return runs;
    },
    async cover(run, topic, due) {
      const wave = Math.floor(due / HAND_OFF_WAVE_MS);
      const now = run.clock();
      const waves = covered.get(topic) ?? new Set<number>();
      if (waves.has(wave)) return "already";
      if (!run.budget.take(1)) return "no-budget";
      // Waves ended are forgotten: a topic keeps the few still ahead.
      for (const old of waves) if ((old + 1) * HAND_OFF_WAVE_MS < now) waves.delete(old);
      waves.add(wave);
      covered.set(topic, waves);
      try {
        await qstash.publishRuns({
          publicUrl,
          topic,
          share: 0,
          waves: [{ wave, runs: 1, notBefore: waveStart(wave, now) }],
          deduplicationId: `wave-${wave}-${toHex(topic)}`,
        });
      } catch (error) {
        waves.delete(wave); // not asked: the next job of the wave asks again
        throw error;
      }
      run.log({ level: "info", event: "wave_asked", topic, due });
      return "asked";
    },
    async continueAt(run, topic, at) {
      if (!run.budget.take(1)) return false;
      const bucket = Math.floor(at / CONTINUE_BUCKET_MS);
      await qstash.publishRuns({
        publicUrl,
        topic,
        share: 0,
        waves: [{ runs: 1, notBefore: at }],
        deduplicationId: `flow-${bucket}-${toHex(topic)}`,
      });
      run.log({ level: "info", event: "flow_continue", topic, at });
      return true;
    },
    work: ({ topic, share, wave }, now) => ({
      kind: "claim",
      ...(topic === undefined ? {} : { topic }),
      horizon: now + DIRECT_WINDOW_MS,
      consume: share ?? runShare(subrequests, worstJobCost),
      ...(wave === undefined ? {} : { wave }),
    }),
  };
}

/** When a run asked for wave `wave` comes: a little before the wave begins, or now. */
function waveStart(wave: number, now: number): number | undefined {
  const at = wave * HAND_OFF_WAVE_MS - HAND_OFF_LEAD_MS;
  return at > now ? at : undefined;
}

/** A topic name as a deduplication id may carry it (QStash takes letters, digits, -, _ and .). */
function toHex(text: string): string {
  return Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}
