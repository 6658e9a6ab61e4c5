// The single-job shape (issue 12), timed the same way for every system: producers add one job per
// request, then consumers pop and finish each job one by one; delayq's run of it over a stack.
import { type CommandStats, Latencies, type Percentiles, startProgress } from "../lib/measure";
import { processCpuMs } from "../lib/processes";
import type { JobBody } from "../lib/types";
import { makeBody } from "../lib/workloads";
import {
  type Driver,
  type Popped,
  type SingleOptions,
  type Stack,
  sleep,
  type Via,
  WAIT,
} from "./stack";

export type SingleRun = {
  system: string;
  via: Via | "ouqiang";
  driver: Driver | "tcp";
  popCount: number;
  /** Whether each pop's jobs were finished in one request (finishMany) rather than one by one. */
  finishMany: boolean;
  /** Whether each pop's jobs were finished by the next pop (finishAndPop). */
  finishNext?: boolean;
  jobs: number;
  /** Every Redis command (inside Lua included) over adding and consuming, per job. */
  cmdsPerJob: number;
  /** REST requests to the bridge per job (REST only). */
  restRequestsPerJob: number | null;
  addPerSec: number;
  consumePerSec: number;
  /** Jobs / (add time + consume time). */
  lifecyclesPerSec: number;
  /**
   * Requests the API served: adds, pops (empty and aborted long-polls included), finishes (one
   * per pop's jobs with finishMany).
   */
  apiRequests: number;
  /** The server process's CPU over the run ÷ API requests (HTTP and ouqiang only). */
  serviceCpuMsPerRequest: number | null;
  serviceCpuMsPerJob: number | null;
  /** redis-server's CPU time over the run ÷ jobs (its scripts and commands, for every system). */
  redisCpuMsPerJob: number;
  /**
   * The benchmark process's own CPU time over the run ÷ jobs: the consumers and producer (the
   * typed client over HTTP; the library itself when `via` is library). All share 2 cores.
   */
  clientCpuMsPerJob: number;
  /** Client round trips by route, ms. */
  latencyMs: Record<string, Percentiles>;
  duplicates: number;
  byCommand: CommandStats;
  /** ouqiang: time between the last push and every job being ready (its minimum delay is 1 s). */
  readyWaitMs?: number;
};

/** One system's side of the shape: what adds job `i`, pops, reads a job's order and finishes it. */
export type ShapeApi<Job> = {
  add(i: number): Promise<void>;
  /** One pop (a long-poll), cut short by `signal`; what it got, perhaps nothing. */
  pop(signal: AbortSignal): Promise<readonly Job[]>;
  order(job: Job): number;
  finish(job: Job): Promise<void>;
  /** When given, a pop's jobs are finished by one call of this instead of `finish` each. */
  finishAll?(jobs: readonly Job[]): Promise<void>;
  /**
   * When given, used instead of `pop` and `finish`: finishes `held` (what the last call gave)
   * and pops, in one call; what it got, perhaps nothing.
   */
  finishAndPop?(held: readonly Job[], signal: AbortSignal): Promise<readonly Job[]>;
  /** Between the last add and the first pop (ouqiang: until every job is ready). */
  beforePops?(): Promise<void>;
};

/** What a timed run of the shape saw; t0 first add, t1 last add, tReady pops start, t2 last finish. */
export type ShapeTimes = {
  latencies: Latencies;
  added: number;
  pops: number;
  finished: number;
  /** Finish calls made: one per job, or one per pop's jobs with `finishAll`. */
  finishCalls: number;
  duplicates: number;
  t0: number;
  t1: number;
  tReady: number;
  t2: number;
};

/**
 * The single-job shape, timed: `concurrency` producers each add one job per request until `jobs`
 * are in, then `concurrency` consumers pop and finish each job one by one until all are finished
 * (or `timeoutMs` ran out: an error). `added` names the adds in the progress line.
 */
export async function timeShape<Job>(
  label: string,
  added: string,
  api: ShapeApi<Job>,
  options: Pick<SingleOptions, "jobs" | "concurrency" | "timeoutMs">,
): Promise<ShapeTimes> {
  const n = options.jobs;
  const latencies = new Latencies();
  const times = {
    latencies,
    added: 0,
    pops: 0,
    finished: 0,
    finishCalls: 0,
    duplicates: 0,
    t0: 0,
    t1: 0,
  };
  const stopProgress = startProgress(
    label,
    () => `${added} ${times.added}/${n}, finished ${times.finished}/${n}`,
  );
  const seen = new Uint8Array(n);
  const t0 = performance.now();
  let t1 = t0;
  let tReady = t0;
  let t2 = t0;
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        for (let i = next++; i < n; i = next++) {
          await latencies.time("add", () => api.add(i));
          times.added++;
        }
      }),
    );
    t1 = performance.now();
    tReady = t1;
    if (api.beforePops) {
      await api.beforePops();
      tReady = performance.now();
    }
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), options.timeoutMs);
    const consumer = async () => {
      let held: readonly Job[] = [];
      while (!stop.signal.aborted) {
        let jobs: readonly Job[];
        const started = performance.now();
        times.pops++;
        try {
          jobs = api.finishAndPop
            ? await api.finishAndPop(held, stop.signal)
            : await api.pop(stop.signal);
        } catch (error) {
          if (stop.signal.aborted) return;
          throw error;
        }
        latencies.record("pop", performance.now() - started);
        for (const job of jobs) {
          const order = api.order(job);
          if (seen[order]) times.duplicates++;
          seen[order] = 1;
        }
        const finished = (count: number) => {
          times.finished += count;
          if (times.finished === n) {
            t2 = performance.now();
            stop.abort();
          }
        };
        if (api.finishAndPop) {
          // The call that gave these finished the last ones.
          const done = held.length;
          held = jobs;
          if (done > 0) finished(done);
          continue;
        }
        const { finishAll } = api;
        if (finishAll && jobs.length > 0) {
          times.finishCalls++;
          await latencies.time("finish", () => finishAll(jobs));
          finished(jobs.length);
          continue;
        }
        for (const job of jobs) {
          times.finishCalls++;
          await latencies.time("finish", () => api.finish(job));
          finished(1);
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: options.concurrency }, consumer));
    } finally {
      clearTimeout(timer);
    }
    if (times.finished < n) throw new Error(`only ${times.finished} of ${n} jobs finished in time`);
  } finally {
    stopProgress();
  }
  return { ...times, t0, t1, tReady, t2 };
}

/**
 * How a consumer finishes what a pop gave: each job in a request of its own, all of them in one
 * (finishMany), or in the next pop (finishAndPop).
 */
export type FinishMode = "each" | "many" | "next";

/**
 * delayq on the single-job shape over `via`: pop `count` (wait 20 s) and finish as `finish`
 * says. With "next", a consumer holding jobs pops without waiting, so that the finish's answer
 * is not held up by a long-poll; one holding none waits 20 s. Each run has a topic of its own
 * and its own command count (INFO commandstats deltas).
 */
export async function singleRun(
  stack: Stack,
  via: Via,
  count: number,
  options: SingleOptions,
  finish: FinishMode = "each",
): Promise<SingleRun> {
  const n = options.jobs;
  const system = stack.name(via);
  const finishMany = finish === "many";
  const finishNext = finish === "next";
  const suffix = { each: "", many: "-many", next: "-next" }[finish];
  const topic = `single-${via}-${count}${suffix}`;
  const api = stack.apis[via];
  /** The shape's calls on topic `t`. */
  const shapeOn = (t: string): ShapeApi<Popped> => ({
    add: (i) => api.add(t, makeBody(i)),
    pop: (signal) => api.pop(t, count, WAIT, signal),
    order: (job) => (job.body as JobBody).order,
    finish: (job) => api.finish(job.id, job.receipt),
    ...(finishMany ? { finishAll: (jobs: readonly Popped[]) => api.finishMany(jobs) } : {}),
    ...(finishNext
      ? {
          finishAndPop: (held: readonly Popped[], signal: AbortSignal) =>
            api.finishAndPop(t, held, count, held.length > 0 ? 0 : WAIT, signal),
        }
      : {}),
  });
  const label = `${system} pop ${count}${{ each: "", many: " finishMany", next: " finishAndPop" }[finish]}`;
  // Warm up with the run's own shape, untimed, on a topic of its own: a fresh Node process serves
  // its first few thousand requests at about twice the CPU of its steady state, while V8 compiles
  // its hot paths (bench/cpu.ts's first repetition), and the peer, compiled ahead of time, has no
  // such phase. Commands and CPU are counted from the end of it.
  if (options.warmup > 0) {
    await timeShape(`${label} warm-up`, "added", shapeOn(`warm-${topic}`), {
      ...options,
      jobs: options.warmup,
    });
    // Its long-polls, cut short, end on the server within a poll interval (1 s): not counted.
    await sleep(1_500);
  }
  const counting = await stack.count(via);
  const cpuBefore = via === "http" ? processCpuMs(stack.service.child.pid ?? 0) : 0;
  const redisCpuBefore = processCpuMs(stack.redisPid);
  const clientCpuBefore = process.cpuUsage();
  const run = await timeShape(label, "added", shapeOn(topic), options);
  // Long-polls cut short by the abort end on the server within a poll interval (1 s).
  await sleep(1_500);
  const { delta, requests } = await counting();
  const cpuMs = via === "http" ? processCpuMs(stack.service.child.pid ?? 0) - cpuBefore : null;
  const redisCpuMs = processCpuMs(stack.redisPid) - redisCpuBefore;
  const clientCpuMs = cpuMsSince(clientCpuBefore);
  const apiRequests = run.added + run.pops + run.finishCalls;
  return {
    system,
    via,
    driver: stack.driver,
    popCount: count,
    finishMany,
    finishNext,
    jobs: n,
    cmdsPerJob: delta.total / n,
    restRequestsPerJob: requests === null ? null : requests / n,
    addPerSec: (n * 1000) / (run.t1 - run.t0),
    consumePerSec: (n * 1000) / (run.t2 - run.t1),
    lifecyclesPerSec: (n * 1000) / (run.t2 - run.t0),
    apiRequests,
    serviceCpuMsPerRequest: cpuMs === null ? null : cpuMs / apiRequests,
    serviceCpuMsPerJob: cpuMs === null ? null : cpuMs / n,
    redisCpuMsPerJob: redisCpuMs / n,
    clientCpuMsPerJob: clientCpuMs / n,
    latencyMs: run.latencies.summary(),
    duplicates: run.duplicates,
    byCommand: delta.byCommand,
  };
}

/** This process's CPU time since `before` (process.cpuUsage), ms. */
export function cpuMsSince(before: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}
