// The benchmark workloads (A lifecycle, B lateness, C idle cost), each on a fresh redis-server.
import { startRedisServer } from "../../dev/redis-server";
import {
  CommandCounter,
  type CommandStats,
  commandDelta,
  log,
  MonitorCounter,
  mulberry32,
  type Percentiles,
  percentiles,
  startProgress,
} from "./measure";
import type { JobBody, NewJob, SystemAdapter, SystemSession } from "./types";

export type BenchOptions = {
  /** A: jobs in the timed run (no MONITOR). */
  jobs: number;
  /** A: jobs in the separate run with MONITOR attached, which counts requests. */
  monitorJobs: number;
  /** A and B: jobs in hand at once. */
  concurrency: number;
  /** Jobs per `add` call. */
  batchSize: number;
  /** B: jobs, with delays spread uniformly over [0, latenessSpanMs). */
  latenessJobs: number;
  latenessSpanMs: number;
  /** C: length of the idle window; the count is scaled to a minute. */
  idleMs: number;
  /**
   * B: time consumers run before the first job is added, so they are past their start-up. Keep
   * it off rsmq-worker's back-off steps (polls at 0, 1 and 6 s after start): jobs added just
   * before a poll and just after one see very different lateness.
   */
  settleMs: number;
  /**
   * C: time consumers run before the window opens, so it sees the steady state: rsmq-worker
   * reaches its 10 s polls 6 s after the last job, and start-up checks are left out.
   */
  idleSettleMs: number;
  /** A: longest wait for the consume phase; B waits this long past the last due time. */
  timeoutMs: number;
};

export const DEFAULT_OPTIONS: BenchOptions = {
  jobs: 20_000,
  monitorJobs: 2_000,
  concurrency: 8,
  batchSize: 100,
  latenessJobs: 2_000,
  latenessSpanMs: 10_000,
  idleMs: 15_000,
  settleMs: 2_000,
  idleSettleMs: 10_000,
  timeoutMs: 300_000,
};

export const QUICK_OPTIONS: BenchOptions = {
  ...DEFAULT_OPTIONS,
  jobs: 2_000,
  monitorJobs: 200,
  latenessJobs: 300,
  latenessSpanMs: 3_000,
  idleMs: 10_000,
  idleSettleMs: 7_000,
  timeoutMs: 60_000,
};

/** About 100 bytes of JSON, the same for every system. */
export function makeBody(order: number): JobBody {
  return { order, note: "x".repeat(80) };
}

export type LifecycleResult = {
  jobs: number;
  /** Every Redis command over add + consume, inside Lua included, per job. */
  cmdsPerJob: number;
  addJobsPerSec: number;
  consumeJobsPerSec: number;
  wholeJobsPerSec: number;
  duplicates: number;
  byCommand: CommandStats;
};

export type RequestsResult = {
  jobs: number;
  /** From the adapter's `requests()` when it has one, else commands clients sent (MONITOR). */
  requestsPerJob: number;
  source: "monitor" | "adapter";
  /** MONITOR: commands clients sent to Redis, and commands run inside Lua, per job. */
  clientCmdsPerJob: number;
  luaCmdsPerJob: number;
  /** INFO commandstats over the same run; should equal client + lua. */
  cmdsPerJob: number;
  clientByCommand: CommandStats;
};

export type LatenessResult = Percentiles & {
  jobs: number;
  spanMs: number;
  /** Jobs delivered before their due time. */
  early: number;
  /** Jobs never delivered before the harness gave up. */
  missing: number;
  duplicates: number;
};

export type IdleResult = {
  windowMs: number;
  cmdsPerMinute: number;
  requestsPerMinute: number;
  requestsSource: "monitor" | "adapter";
  byCommand: CommandStats;
};

export type SystemResult = {
  name: string;
  notes: readonly string[];
  lifecycle?: LifecycleResult;
  requests?: RequestsResult;
  lateness?: LatenessResult;
  idle?: IdleResult;
  /** Workload (or "close") to error message; a failed workload leaves its result out. */
  errors: Record<string, string>;
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const message = (error: unknown) =>
  error instanceof Error ? error.message.split("\n")[0] || error.name : String(error);

/** Which jobs arrived, when, and how often; resolves `done` once each has arrived once. */
class Deliveries {
  readonly receivedAt: Float64Array;
  distinct = 0;
  duplicates = 0;
  private readonly seen: Uint8Array;
  private resolve: () => void = () => {};
  readonly done = new Promise<void>((resolve) => {
    this.resolve = resolve;
  });

  constructor(readonly total: number) {
    this.seen = new Uint8Array(total);
    this.receivedAt = new Float64Array(total);
    if (total === 0) this.resolve();
  }

  record(body: JobBody): void {
    const order = body.order;
    if (this.seen[order]) {
      this.duplicates++;
      return;
    }
    this.seen[order] = 1;
    this.receivedAt[order] = Date.now();
    if (++this.distinct === this.total) this.resolve();
  }

  has(order: number): boolean {
    return this.seen[order] === 1;
  }

  /** Resolves true when every job arrived, false when `ms` passed first. */
  async wait(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    try {
      return await Promise.race([this.done.then(() => true as const), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

type Fresh = { session: SystemSession; counter: CommandCounter; port: number };

/**
 * Runs `work` against a new redis-server and a new session, then closes both whatever happens.
 * A failure to close is recorded in `errors` rather than thrown, so the measurement stands.
 */
async function onFreshServer<T>(
  adapter: SystemAdapter,
  label: string,
  errors: Record<string, string>,
  work: (fresh: Fresh) => Promise<T>,
): Promise<T> {
  const server = await startRedisServer();
  let counter: CommandCounter | undefined;
  let session: SystemSession | undefined;
  try {
    counter = await CommandCounter.open(server.port);
    session = await adapter.open({
      redisPort: server.port,
      log: (text) => log(`${adapter.name} ${label}: ${text}`),
    });
    return await work({ session, counter, port: server.port });
  } finally {
    if (session) {
      try {
        await withTimeout(session.close(), 15_000, "closing the session");
      } catch (error) {
        errors[`close (${label})`] = message(error);
        log(`${adapter.name} ${label}: close failed: ${message(error)}`);
      }
    }
    counter?.close();
    await server.stop();
  }
}

/** Adds jobs in batches of `batchSize`, one batch at a time, with progress on stderr. */
async function addAll(
  session: SystemSession,
  jobs: readonly NewJob[],
  batchSize: number,
  label: string,
): Promise<void> {
  let added = 0;
  const stop = startProgress(label, () => `added ${added}/${jobs.length}`);
  try {
    for (let i = 0; i < jobs.length; i += batchSize) {
      const batch = jobs.slice(i, i + batchSize);
      await session.add(batch);
      added += batch.length;
    }
  } finally {
    stop();
  }
}

/** Starts consumers, runs `work`, and stops them even when `work` throws. */
async function consuming<T>(
  session: SystemSession,
  concurrency: number,
  deliveries: Deliveries,
  work: () => Promise<T>,
): Promise<T> {
  const consumers = await session.consume({
    concurrency,
    handle: (body) => deliveries.record(body),
  });
  const stop = () => withTimeout(consumers.stop(), 15_000, "stopping the consumers");
  let result: T;
  try {
    result = await work();
  } catch (error) {
    // Report why the work failed, not a follow-on failure to stop.
    await stop().catch((stopError: unknown) => log(`also failed to stop: ${message(stopError)}`));
    throw error;
  }
  await stop();
  return result;
}

async function consumeAll(deliveries: Deliveries, timeoutMs: number, label: string) {
  const started = performance.now();
  const stop = startProgress(label, () => {
    const seconds = (performance.now() - started) / 1000;
    return `consumed ${deliveries.distinct}/${deliveries.total} (${Math.round(deliveries.distinct / seconds)}/s)`;
  });
  try {
    if (!(await deliveries.wait(timeoutMs))) {
      throw new Error(
        `only ${deliveries.distinct} of ${deliveries.total} jobs consumed in ${timeoutMs} ms`,
      );
    }
  } finally {
    stop();
  }
}

const bodies = (n: number): NewJob[] =>
  Array.from({ length: n }, (_, i) => ({ body: makeBody(i) }));

/** A, timed: add n jobs, then consume them all; commands from INFO commandstats. */
export async function runLifecycle(
  adapter: SystemAdapter,
  options: BenchOptions,
  errors: Record<string, string> = {},
): Promise<LifecycleResult> {
  const n = options.jobs;
  const label = `${adapter.name} A`;
  return onFreshServer(adapter, "A", errors, async ({ session, counter }) => {
    const jobs = bodies(n);
    const deliveries = new Deliveries(n);
    const before = await counter.snapshot();
    const t0 = performance.now();
    await addAll(session, jobs, options.batchSize, label);
    const t1 = performance.now();
    const t2 = await consuming(session, options.concurrency, deliveries, async () => {
      await consumeAll(deliveries, options.timeoutMs, label);
      return performance.now();
    });
    const delta = commandDelta(before, await counter.snapshot());
    return {
      jobs: n,
      cmdsPerJob: delta.total / n,
      addJobsPerSec: (n * 1000) / (t1 - t0),
      consumeJobsPerSec: (n * 1000) / (t2 - t1),
      wholeJobsPerSec: (n * 1000) / (t2 - t0),
      duplicates: deliveries.duplicates,
      byCommand: delta.byCommand,
    };
  });
}

/** A, counted: the same workload, smaller, with MONITOR attached (it costs throughput). */
export async function runRequests(
  adapter: SystemAdapter,
  options: BenchOptions,
  errors: Record<string, string> = {},
): Promise<RequestsResult> {
  const n = options.monitorJobs;
  const label = `${adapter.name} A+MONITOR`;
  return onFreshServer(adapter, "A+MONITOR", errors, async ({ session, counter, port }) => {
    const monitor = await MonitorCounter.open(port, [counter.address]);
    try {
      const jobs = bodies(n);
      const deliveries = new Deliveries(n);
      const requestsBefore = await session.requests?.();
      const before = await counter.snapshot();
      await monitor.sync(counter);
      monitor.take();
      await addAll(session, jobs, options.batchSize, label);
      await consuming(session, options.concurrency, deliveries, async () => {
        await consumeAll(deliveries, options.timeoutMs, label);
      });
      // Consumers are stopped, so nothing more is in flight when the counts are read.
      const delta = commandDelta(before, await counter.snapshot());
      await monitor.sync(counter);
      const counts = monitor.take();
      const requestsAfter = await session.requests?.();
      const fromAdapter = requestsBefore !== undefined && requestsAfter !== undefined;
      return {
        jobs: n,
        requestsPerJob: (fromAdapter ? requestsAfter - requestsBefore : counts.client) / n,
        source: fromAdapter ? "adapter" : "monitor",
        clientCmdsPerJob: counts.client / n,
        luaCmdsPerJob: counts.lua / n,
        cmdsPerJob: delta.total / n,
        clientByCommand: counts.clientByCommand,
      };
    } finally {
      monitor.close();
    }
  });
}

/** B: jobs due uniformly over the span while consumers run; lateness = received − due. */
export async function runLateness(
  adapter: SystemAdapter,
  options: BenchOptions,
  errors: Record<string, string> = {},
): Promise<LatenessResult> {
  const n = options.latenessJobs;
  const label = `${adapter.name} B`;
  return onFreshServer(adapter, "B", errors, async ({ session }) => {
    const deliveries = new Deliveries(n);
    return consuming(session, options.concurrency, deliveries, async () => {
      await sleep(options.settleMs);
      const random = mulberry32(42);
      const start = Date.now();
      const dueAt = Array.from({ length: n }, () =>
        Math.round(start + random() * options.latenessSpanMs),
      );
      const jobs = dueAt.map((due, i) => ({ body: makeBody(i), dueAt: due }));
      await addAll(session, jobs, options.batchSize, label);
      const stop = startProgress(label, () => `delivered ${deliveries.distinct}/${n}`);
      try {
        await deliveries.wait(start + options.latenessSpanMs + options.timeoutMs - Date.now());
      } finally {
        stop();
      }
      const lateness: number[] = [];
      for (let i = 0; i < n; i++) {
        if (deliveries.has(i)) lateness.push((deliveries.receivedAt[i] ?? 0) - (dueAt[i] ?? 0));
      }
      const missing = n - deliveries.distinct;
      if (missing > 0) errors.B = `${missing} of ${n} jobs not delivered in time`;
      return {
        ...percentiles(lateness),
        jobs: n,
        spanMs: options.latenessSpanMs,
        early: lateness.filter((ms) => ms < 0).length,
        missing,
        duplicates: deliveries.duplicates,
      };
    });
  });
}

/** C: consumers and timers on an empty queue; commands over the window, scaled to a minute. */
export async function runIdle(
  adapter: SystemAdapter,
  options: BenchOptions,
  errors: Record<string, string> = {},
): Promise<IdleResult> {
  const label = `${adapter.name} C`;
  return onFreshServer(adapter, "C", errors, async ({ session, counter, port }) => {
    const monitor = await MonitorCounter.open(port, [counter.address]);
    try {
      // One consumer, as one idle worker process would run.
      return await consuming(session, 1, new Deliveries(0), async () => {
        await sleep(options.idleSettleMs);
        const requestsBefore = await session.requests?.();
        const before = await counter.snapshot();
        await monitor.sync(counter);
        monitor.take();
        const started = Date.now();
        const stop = startProgress(
          label,
          () => `idle ${Math.round((Date.now() - started) / 1000)}/${options.idleMs / 1000} s`,
        );
        try {
          await sleep(options.idleMs);
        } finally {
          stop();
        }
        const delta = commandDelta(before, await counter.snapshot());
        await monitor.sync(counter);
        const counts = monitor.take();
        const requestsAfter = await session.requests?.();
        const fromAdapter = requestsBefore !== undefined && requestsAfter !== undefined;
        const perMinute = 60_000 / options.idleMs;
        return {
          windowMs: options.idleMs,
          cmdsPerMinute: delta.total * perMinute,
          requestsPerMinute:
            (fromAdapter ? requestsAfter - requestsBefore : counts.client) * perMinute,
          requestsSource: fromAdapter ? "adapter" : "monitor",
          byCommand: delta.byCommand,
        };
      });
    } finally {
      monitor.close();
    }
  });
}

/**
 * Runs A (timed), A (MONITOR) and B for each system in turn, then C for all of them at once: idle
 * consumers cost no CPU to speak of, and each has its own redis-server, so counts never mix.
 * A failing workload is recorded in its system's `errors` and does not stop the others.
 */
export async function runSystems(
  adapters: readonly SystemAdapter[],
  options: BenchOptions,
): Promise<SystemResult[]> {
  const results = adapters.map(
    (adapter): SystemResult => ({ name: adapter.name, notes: adapter.notes, errors: {} }),
  );
  const attempt = async <T>(
    adapter: SystemAdapter,
    result: SystemResult,
    workload: string,
    run: (errors: Record<string, string>) => Promise<T>,
  ): Promise<T | undefined> => {
    log(`${adapter.name} ${workload}: start`);
    const started = Date.now();
    try {
      const value = await run(result.errors);
      log(`${adapter.name} ${workload}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      return value;
    } catch (error) {
      result.errors[workload] = message(error);
      log(`${adapter.name} ${workload}: failed: ${message(error)}`);
      return undefined;
    }
  };
  for (const [i, adapter] of adapters.entries()) {
    const result = results[i] as SystemResult;
    result.lifecycle = await attempt(adapter, result, "A", (errors) =>
      runLifecycle(adapter, options, errors),
    );
    result.requests = await attempt(adapter, result, "A+MONITOR", (errors) =>
      runRequests(adapter, options, errors),
    );
    result.lateness = await attempt(adapter, result, "B", (errors) =>
      runLateness(adapter, options, errors),
    );
  }
  await Promise.all(
    adapters.map(async (adapter, i) => {
      const result = results[i] as SystemResult;
      result.idle = await attempt(adapter, result, "C", (errors) =>
        runIdle(adapter, options, errors),
      );
    }),
  );
  return results;
}
