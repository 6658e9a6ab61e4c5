// Idle consumers: what one long-polling consumer on an empty topic costs per minute (delayq over
// REST and TCP, and ouqiang/delay-queue), and what one empty pop costs.
import type { CommandStats } from "../lib/measure";
import { ouqiangBinary } from "../peers/ouqiang";
import { type OuqiangIdle, ouqiangIdle } from "./ouqiang";
import {
  type Counted,
  longPoll,
  message,
  openStack,
  type SingleOptions,
  type Stack,
  sleep,
  type Via,
} from "./stack";

export type IdleRun = {
  system: string;
  windowMs: number;
  /** One consumer long-polling an empty topic (count 1, wait 20 s), per minute. */
  cmdsPerMinute: number;
  restRequestsPerMinute: number | null;
  byCommand: CommandStats;
  /** One `pop` (wait 0) on an empty topic. */
  emptyPopCmds: number | null;
  emptyPopRestRequests: number | null;
};

/** One idle long-polling consumer over the window, then `emptyPops` pops with wait 0. */
async function idleRun(stack: Stack, via: Via, options: SingleOptions): Promise<IdleRun> {
  const system = stack.name(via);
  const api = stack.apis[via];
  const topic = `idle-${via}`;
  const stop = new AbortController();
  const loop = (async () => {
    while (!stop.signal.aborted) await longPoll(api, topic, 1, stop.signal);
  })();
  let window: Counted;
  try {
    await sleep(options.idleSettleMs);
    const counted = await stack.count(via);
    await sleep(options.idleMs);
    window = await counted();
  } finally {
    stop.abort();
  }
  await loop;
  await sleep(1_500);
  const countedPops = await stack.count(via);
  for (let i = 0; i < options.emptyPops; i++) await api.pop(`empty-${via}`, 1, 0);
  const pops = await countedPops();
  const perMinute = 60_000 / options.idleMs;
  return {
    system,
    windowMs: options.idleMs,
    cmdsPerMinute: window.delta.total * perMinute,
    restRequestsPerMinute: window.requests === null ? null : window.requests * perMinute,
    byCommand: window.delta.byCommand,
    emptyPopCmds: pops.delta.total / options.emptyPops,
    emptyPopRestRequests: pops.requests === null ? null : pops.requests / options.emptyPops,
  };
}

export type IdleResult = {
  runs: IdleRun[];
  /** ouqiang with one consumer blocked in /pop on an empty topic, per minute. */
  ouqiang: OuqiangIdle | { skipped: string };
  errors: Record<string, string>;
};

/**
 * Idle cost on fresh stacks: one HTTP consumer over REST and one over TCP (and ouqiang's), side
 * by side. Counts do not depend on CPU, so this may run beside another workload.
 */
export async function runIdleSingle(options: SingleOptions): Promise<IdleResult> {
  const result: IdleResult = { runs: [], ouqiang: { skipped: "not run" }, errors: {} };
  const sides = (["rest", "tcp"] as const).map(async (driver) => {
    let stack: Stack | undefined;
    try {
      stack = await openStack(driver);
      result.runs.push(await idleRun(stack, "http", options));
    } catch (error) {
      result.errors[`idle ${driver}`] = message(error);
    } finally {
      await stack?.close();
    }
  });
  const found = ouqiangBinary();
  if ("skipped" in found) result.ouqiang = found;
  else {
    sides.push(
      ouqiangIdle(found.bin, options).then(
        (idle) => {
          result.ouqiang = idle;
        },
        (error: unknown) => {
          result.errors["idle ouqiang"] = message(error);
        },
      ),
    );
  }
  await Promise.all(sides);
  result.runs.sort((a, b) => a.system.localeCompare(b.system));
  return result;
}
