// The single-job shape (issue 12), run by bench/run.ts: `add` one job per request, `pop` one (or
// ten) at a time, `finish` each — through HTTP (functions/node.ts) and through the library, over
// REST (the bridge in its own process) and over TCP (REDIS_URL, connectRedis); the herd (8
// consumers long-polling one job at a time while jobs fall due); an idle long-polling consumer and
// an empty pop; and ouqiang/delay-queue on the same shape when OUQIANG_DELAY_QUEUE_BIN names a
// built binary. The parts live in bench/single/.
import { log } from "./lib/measure";
import { ouqiangBinary } from "./peers/ouqiang";
import { type HerdRun, herdRun } from "./single/herd";
import { runOuqiangSingle } from "./single/ouqiang";
import { type SingleRun, singleRun } from "./single/shape";
import { message, openStack, type SingleOptions, type Stack, type Via } from "./single/stack";

export type { HerdRun } from "./single/herd";
export { type IdleResult, type IdleRun, runIdleSingle } from "./single/idle";
export type { SingleRun } from "./single/shape";
export {
  type Driver,
  SINGLE_DEFAULTS,
  SINGLE_QUICK,
  type SingleOptions,
  type Via,
} from "./single/stack";

/**
 * Lifecycles/s of one alternating pair, `first` run first: delayq's HTTP TCP pop 1 and ouqiang's,
 * and (runs since 2026-11-27 evening) delayq's pop 1 with finishAndPop, then (since e83049f) pop 10
 * with finishMany, run right after delayq's pop 1.
 */
export type PairRun = {
  first: "delayq" | "ouqiang";
  delayq: number;
  ouqiang: number;
  delayqNext?: number;
  delayqTen?: number;
  /**
   * The two phases of delayq's pop 1 run and ouqiang's (runs since 2026-11-29), jobs/s: adding
   * all, then popping and finishing all (ouqiang's from the time its jobs were ready).
   */
  phases?: {
    delayq: { add: number; consume: number };
    ouqiang: { add: number; consume: number };
  };
};

export type SingleResult = {
  runs: SingleRun[];
  /** Alternating pairs (options.pairs), run after everything else on the TCP stack. */
  pairs?: PairRun[];
  herd: HerdRun[];
  /** ouqiang's run, or why it was skipped. */
  ouqiang: SingleRun | { skipped: string } | { error: string };
  errors: Record<string, string>;
  options: SingleOptions;
};

/**
 * For each driver, one redis-server, its bridge (REST) and one service: the single-job shape
 * over HTTP with pop 1 and pop 10, over the library with pop 1, then the herd over both. Each
 * run has a topic of its own and its own command count (INFO commandstats deltas). Then
 * ouqiang/delay-queue on a redis-server of its own.
 */
export async function runSingle(options: SingleOptions): Promise<SingleResult> {
  const result: SingleResult = {
    runs: [],
    herd: [],
    ouqiang: { skipped: "not run" },
    errors: {},
    options,
  };
  for (const driver of ["rest", "tcp"] as const) {
    log(`single-job shape over ${driver.toUpperCase()}: starting the stack`);
    let stack: Stack;
    try {
      stack = await openStack(driver);
    } catch (error) {
      result.errors[`stack ${driver}`] = message(error);
      log(`single-job shape over ${driver}: ${message(error)}`);
      continue;
    }
    try {
      const attempt = async <T>(name: string, run: () => Promise<T>, into: T[]) => {
        log(`${name}: start`);
        const started = Date.now();
        try {
          into.push(await run());
          log(`${name}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
        } catch (error) {
          result.errors[name] = message(error);
          log(`${name}: failed: ${message(error)}`);
        }
      };
      const name = (via: Via, what: string) => `delayq ${via} ${driver} ${what}`;
      await attempt(name("http", "pop 1"), () => singleRun(stack, "http", 1, options), result.runs);
      await attempt(
        name("http", "pop 10"),
        () => singleRun(stack, "http", 10, options),
        result.runs,
      );
      await attempt(
        name("http", "pop 10 finishMany"),
        () => singleRun(stack, "http", 10, options, "many"),
        result.runs,
      );
      for (const count of [1, 10]) {
        await attempt(
          name("http", `pop ${count} finishAndPop`),
          () => singleRun(stack, "http", count, options, "next"),
          result.runs,
        );
      }
      await attempt(
        name("library", "pop 1"),
        () => singleRun(stack, "library", 1, options),
        result.runs,
      );
      for (const via of options.herdVia) {
        await attempt(name(via, "herd"), () => herdRun(stack, via, options), result.herd);
      }
      if (driver === "tcp" && options.pairs > 0 && !("skipped" in ouqiangBinary())) {
        const open = stack;
        const pairs: PairRun[][] = [];
        await attempt("alternating pairs", () => runPairs(open, options), pairs);
        result.pairs = pairs[0];
      }
    } finally {
      await stack.close();
    }
  }
  result.ouqiang = await runOuqiangSingle(options).catch((error: unknown) => ({
    error: message(error),
  }));
  return result;
}

/**
 * delayq's HTTP TCP pop 1 (finished one by one, then by the next pop) and ouqiang's run,
 * `options.pairs` times, each pair in the other order from the last (ABBA): the shared machine's
 * speed drifts over minutes, and one ratio from two runs minutes apart measures the drift as
 * much as the systems.
 */
async function runPairs(stack: Stack, options: SingleOptions): Promise<PairRun[]> {
  const pairs: PairRun[] = [];
  const ran = (run: SingleRun | { skipped: string }) => {
    if ("skipped" in run) throw new Error(run.skipped);
    return run;
  };
  const rate = (run: SingleRun | { skipped: string }) => ran(run).lifecyclesPerSec;
  const phases = (run: SingleRun) => ({ add: run.addPerSec, consume: run.consumePerSec });
  for (let i = 0; i < options.pairs; i++) {
    const first = i % 2 === 0 ? "ouqiang" : "delayq";
    log(`alternating pair ${i + 1} of ${options.pairs}: ${first} first`);
    const delayq = async () => ({
      one: await singleRun(stack, "http", 1, options),
      delayqNext: await singleRun(stack, "http", 1, options, "next").then(rate),
      delayqTen: await singleRun(stack, "http", 10, options, "many").then(rate),
    });
    const ouqiang = () => runOuqiangSingle(options).then(ran);
    let o: SingleRun;
    let d: Awaited<ReturnType<typeof delayq>>;
    if (first === "ouqiang") {
      o = await ouqiang();
      d = await delayq();
    } else {
      d = await delayq();
      o = await ouqiang();
    }
    pairs.push({
      first,
      delayq: d.one.lifecyclesPerSec,
      ouqiang: o.lifecyclesPerSec,
      delayqNext: d.delayqNext,
      delayqTen: d.delayqTen,
      phases: { delayq: phases(d.one), ouqiang: phases(o) },
    });
  }
  return pairs;
}
