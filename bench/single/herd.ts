// The herd: consumers long-polling one job at a time on delayq while jobs fall due over a span;
// how late each job arrives and what the waiting costs in Redis commands.
import {
  type CommandStats,
  mulberry32,
  type Percentiles,
  percentiles,
  startProgress,
} from "../lib/measure";
import type { JobBody } from "../lib/types";
import { makeBody } from "../lib/workloads";
import { type Counted, longPoll, type SingleOptions, type Stack, sleep, type Via } from "./stack";

export type HerdRun = {
  system: string;
  jobs: number;
  spanMs: number;
  consumers: number;
  /** Every Redis command from the first add to the last finish (the consumers' waiting too). */
  cmdsPerJob: number;
  restRequestsPerJob: number | null;
  /** received − due, ms. */
  lateness: Percentiles;
  early: number;
  missing: number;
  duplicates: number;
  byCommand: CommandStats;
};

/**
 * The herd: `concurrency` consumers long-poll one job at a time (count 1, wait 20 s); then jobs
 * due uniformly over the next `herdSpanMs` (from 1 s after the adds start) are added in batches.
 */
export async function herdRun(stack: Stack, via: Via, options: SingleOptions): Promise<HerdRun> {
  const n = options.herdJobs;
  const system = stack.name(via);
  const topic = `herd-${via}`;
  const api = stack.apis[via];
  const receivedAt = new Float64Array(n);
  const seen = new Uint8Array(n);
  let distinct = 0;
  let duplicates = 0;
  let allIn: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    allIn = resolve;
  });
  const stop = new AbortController();
  const consumer = async () => {
    while (!stop.signal.aborted) {
      const jobs = await longPoll(api, topic, 1, stop.signal);
      if (!jobs) return;
      for (const job of jobs) {
        const order = (job.body as JobBody).order;
        if (seen[order]) duplicates++;
        else {
          seen[order] = 1;
          receivedAt[order] = Date.now();
          if (++distinct === n) allIn();
        }
        await api.finish(job.id, job.receipt);
      }
    }
  };
  const loops = Array.from({ length: options.concurrency }, consumer);
  let counted: () => Promise<Counted>;
  const dueAt = new Float64Array(n);
  const stopProgress = startProgress(`${system} herd`, () => `delivered ${distinct}/${n}`);
  try {
    await sleep(options.herdSettleMs);
    counted = await stack.count(via);
    const random = mulberry32(7);
    const start = Date.now() + 1_000;
    for (let i = 0; i < n; i++) dueAt[i] = Math.round(start + random() * options.herdSpanMs);
    for (let i = 0; i < n; i += 100) {
      const batch = [];
      for (let j = i; j < Math.min(n, i + 100); j++) {
        batch.push({ body: makeBody(j), runAt: dueAt[j] ?? 0 });
      }
      await api.addBatch(topic, batch);
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      done,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, options.herdSpanMs + 1_000 + options.timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  } finally {
    stopProgress();
    stop.abort();
    await Promise.allSettled(loops);
  }
  await Promise.all(loops);
  await sleep(1_500);
  const { delta, requests } = await counted();
  const lateness: number[] = [];
  for (let i = 0; i < n; i++) {
    if (seen[i]) lateness.push((receivedAt[i] ?? 0) - (dueAt[i] ?? 0));
  }
  return {
    system,
    jobs: n,
    spanMs: options.herdSpanMs,
    consumers: options.concurrency,
    cmdsPerJob: delta.total / n,
    restRequestsPerJob: requests === null ? null : requests / n,
    lateness: percentiles(lateness),
    early: lateness.filter((ms) => ms < 0).length,
    missing: n - distinct,
    duplicates,
    byCommand: delta.byCommand,
  };
}
