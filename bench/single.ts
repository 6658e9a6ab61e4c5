// The single-job shape (issue 12): `add` one job per request, `pop` one (or ten) at a time,
// `finish` each — through HTTP (functions/node.ts) and through the library, over REST (the bridge
// in its own process) and over TCP (REDIS_URL, connectRedis); the herd (8 consumers long-polling
// one job at a time while jobs fall due); an idle long-polling consumer and an empty pop; and
// ouqiang/delay-queue on the same shape when OUQIANG_DELAY_QUEUE_BIN names a built binary.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "@upstash/redis";
import { freePort, startRedisServer } from "../dev/redis-server";
import { type ServiceProcess, startService } from "../dev/service-process";
import { createClient } from "../src/client";
import { DelayQueue, REDIS_CLIENT_OPTIONS } from "../src/index";
import type { RedisClient } from "../src/redis/runner";
import { connectRedis, type TcpRedis } from "../src/redis/tcp";
import {
  CommandCounter,
  type CommandStats,
  commandDelta,
  Latencies,
  log,
  mulberry32,
  type Percentiles,
  percentiles,
  startProgress,
} from "./lib/measure";
import { type BridgeProcess, processCpuMs, startBridgeProcess } from "./lib/processes";
import type { JobBody } from "./lib/types";
import { makeBody } from "./lib/workloads";
import { ouqiangApi, ouqiangBinary, startOuqiang } from "./peers/ouqiang";

export type SingleOptions = {
  /** Jobs per single-job run. */
  jobs: number;
  /** Producers adding one job per request at once, and consumers popping at once. */
  concurrency: number;
  /** Lifecycles run before measuring (scripts loaded, connections open, JIT warm). */
  warmup: number;
  /** Herd: jobs falling due over `herdSpanMs` while the consumers long-poll. */
  herdJobs: number;
  herdSpanMs: number;
  /** Herd: how long the consumers long-poll before the jobs are added. */
  herdSettleMs: number;
  /** Herd: through what (quick runs leave the library out, to stay quick). */
  herdVia: readonly Via[];
  /** Idle: the counting window, and the time the consumer runs before it opens. */
  idleMs: number;
  idleSettleMs: number;
  /** Empty pops (wait 0) counted to get one empty pop's cost. */
  emptyPops: number;
  /** ouqiang's ttr, s: the lease's bucket entry is swept this long after a pop. */
  ouqiangTtr: number;
  timeoutMs: number;
};

export const SINGLE_DEFAULTS: SingleOptions = {
  jobs: 5_000,
  concurrency: 8,
  warmup: 200,
  herdJobs: 1_000,
  herdSpanMs: 10_000,
  herdSettleMs: 3_000,
  herdVia: ["http", "library"],
  idleMs: 60_000,
  idleSettleMs: 5_000,
  emptyPops: 50,
  ouqiangTtr: 3,
  timeoutMs: 180_000,
};

export const SINGLE_QUICK: SingleOptions = {
  ...SINGLE_DEFAULTS,
  jobs: 300,
  warmup: 20,
  herdJobs: 200,
  herdSpanMs: 3_000,
  herdSettleMs: 1_500,
  herdVia: ["http"],
  idleMs: 10_000,
  idleSettleMs: 2_000,
  emptyPops: 20,
  timeoutMs: 60_000,
};

const API_TOKEN = "bench-api";
const SERVICE_REDIS_TOKEN = "bench-service";
const LIBRARY_REDIS_TOKEN = "bench-library";
const PREFIX = "bench";
/** A consumer's long-poll, s: the most the API allows. */
const WAIT = 20;

export type Driver = "rest" | "tcp";
export type Via = "http" | "library";

type Popped = { id: string; receipt?: string; body: unknown };

/** What the shape needs, whatever carries it. */
type Api = {
  add(topic: string, body: JobBody): Promise<void>;
  addBatch(topic: string, jobs: readonly { body: JobBody; runAt: number }[]): Promise<void>;
  pop(topic: string, count: number, wait: number, signal?: AbortSignal): Promise<Popped[]>;
  finish(id: string, receipt?: string): Promise<void>;
};

/** One redis-server with delayq on it: the service (HTTP) and the library, both on `driver`. */
export type Stack = {
  driver: Driver;
  counter: CommandCounter;
  apis: Record<Via, Api>;
  service: ServiceProcess;
  /** REST requests one side has sent to the bridge so far; undefined over TCP. */
  requests(via: Via): Promise<number | undefined>;
  close(): Promise<void>;
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `serviceEnv`: more variables for the service process (e.g. NODE_OPTIONS for a profile). */
export async function openStack(
  driver: Driver,
  serviceEnv: Record<string, string> = {},
): Promise<Stack> {
  const server = await startRedisServer();
  const closers: (() => Promise<void> | void)[] = [() => server.stop()];
  const close = async () => {
    for (const closer of closers.reverse()) await closer();
  };
  try {
    const counter = await CommandCounter.open(server.port);
    closers.push(() => counter.close());
    let bridge: BridgeProcess | undefined;
    let redis: RedisClient;
    let vars: Record<string, string>;
    if (driver === "rest") {
      bridge = await startBridgeProcess(server.port, [SERVICE_REDIS_TOKEN, LIBRARY_REDIS_TOKEN]);
      const started = bridge;
      closers.push(() => started.close());
      redis = new Redis({ url: bridge.url, token: LIBRARY_REDIS_TOKEN, ...REDIS_CLIENT_OPTIONS });
      vars = { UPSTASH_REDIS_REST_URL: bridge.url, UPSTASH_REDIS_REST_TOKEN: SERVICE_REDIS_TOKEN };
    } else {
      const url = `redis://127.0.0.1:${server.port}`;
      const tcp: TcpRedis = connectRedis(url);
      closers.push(() => tcp.quit());
      redis = tcp;
      vars = { REDIS_URL: url };
    }
    const stateDir = mkdtempSync(join(tmpdir(), "delayq-bench-"));
    closers.push(() => rmSync(stateDir, { recursive: true, force: true }));
    const service = await startService({
      mode: "node",
      port: await freePort(),
      stateDir,
      stdio: "ignore",
      vars: {
        ...vars,
        DQ_TOKENS: API_TOKEN,
        DQ_PREFIX: PREFIX,
        // No cron here: pop promotes due jobs itself, and a tick would only add noise.
        DQ_TICK_INTERVAL_MS: String(3_600_000),
        ...serviceEnv,
      },
    });
    closers.push(() => service.stop());
    const client = createClient({ baseUrl: service.url, token: API_TOKEN });
    const queue = new DelayQueue({ redis, prefix: PREFIX });
    const apis: Record<Via, Api> = {
      http: {
        add: async (topic, body) => void (await client.add({ topic, body })),
        addBatch: async (topic, jobs) =>
          void (await client.addBatch(jobs.map((job) => ({ topic, ...job })))),
        pop: (topic, count, wait, signal) => client.pop(topic, { count, wait, signal }),
        finish: (id, receipt) => client.finish(id, { receipt }),
      },
      library: {
        add: async (topic, body) => void (await queue.add({ topic, body })),
        addBatch: async (topic, jobs) =>
          void (await queue.addBatch(jobs.map((job) => ({ topic, ...job })))),
        pop: (topic, count, wait, signal) => queue.pop(topic, { count, wait }, signal),
        finish: (id, receipt) => queue.finish(id, { receipt }),
      },
    };
    const tokens: Record<Via, string> = { http: SERVICE_REDIS_TOKEN, library: LIBRARY_REDIS_TOKEN };
    return {
      driver,
      counter,
      apis,
      service,
      requests: async (via) =>
        bridge ? (await bridge.stats(tokens[via])).requests.total : undefined,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Adds, pops and finishes `n` jobs one at a time on a topic of its own. */
async function warmUp(api: Api, topic: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await api.add(topic, makeBody(i));
    for (const job of await api.pop(topic, 1, 0)) await api.finish(job.id, job.receipt);
  }
}

export type SingleRun = {
  system: string;
  via: Via | "ouqiang";
  driver: Driver | "tcp";
  popCount: number;
  jobs: number;
  /** Every Redis command (inside Lua included) over adding and consuming, per job. */
  cmdsPerJob: number;
  /** REST requests to the bridge per job (REST only). */
  restRequestsPerJob: number | null;
  addPerSec: number;
  consumePerSec: number;
  /** Jobs / (add time + consume time). */
  lifecyclesPerSec: number;
  /** Requests the API served: adds, pops (empty and aborted long-polls included), finishes. */
  apiRequests: number;
  /** The server process's CPU over the run ÷ API requests (HTTP and ouqiang only). */
  serviceCpuMsPerRequest: number | null;
  serviceCpuMsPerJob: number | null;
  /** Client round trips by route, ms. */
  latencyMs: Record<string, Percentiles>;
  duplicates: number;
  byCommand: CommandStats;
  /** ouqiang: time between the last push and every job being ready (its minimum delay is 1 s). */
  readyWaitMs?: number;
};

/**
 * The single-job shape: `concurrency` producers each add one job per request until `jobs` are
 * in, then `concurrency` consumers pop `count` (wait 20 s) and finish each job one by one.
 */
export async function singleRun(
  stack: Stack,
  via: Via,
  count: number,
  options: SingleOptions,
): Promise<SingleRun> {
  const n = options.jobs;
  const system = `delayq ${via === "http" ? "HTTP" : "library"} ${stack.driver.toUpperCase()}`;
  const label = `${system} pop ${count}`;
  const topic = `single-${via}-${count}`;
  const api = stack.apis[via];
  await warmUp(api, `warm-${topic}`, options.warmup);
  const latencies = new Latencies();
  const before = await stack.counter.snapshot();
  const requestsBefore = await stack.requests(via);
  const cpuBefore = via === "http" ? processCpuMs(stack.service.child.pid ?? 0) : 0;
  let added = 0;
  let finished = 0;
  let pops = 0;
  const stopProgress = startProgress(label, () => `added ${added}/${n}, finished ${finished}/${n}`);
  const seen = new Uint8Array(n);
  let duplicates = 0;
  const t0 = performance.now();
  let t1 = t0;
  let t2 = t0;
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        for (let i = next++; i < n; i = next++) {
          await latencies.time("add", () => api.add(topic, makeBody(i)));
          added++;
        }
      }),
    );
    t1 = performance.now();
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), options.timeoutMs);
    const consumer = async () => {
      while (!stop.signal.aborted) {
        let jobs: Popped[];
        const started = performance.now();
        pops++;
        try {
          jobs = await api.pop(topic, count, WAIT, stop.signal);
        } catch (error) {
          if (stop.signal.aborted) return;
          throw error;
        }
        latencies.record("pop", performance.now() - started);
        for (const job of jobs) {
          const order = (job.body as JobBody).order;
          if (seen[order]) duplicates++;
          seen[order] = 1;
          await latencies.time("finish", () => api.finish(job.id, job.receipt));
          if (++finished === n) {
            t2 = performance.now();
            stop.abort();
          }
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: options.concurrency }, consumer));
    } finally {
      clearTimeout(timer);
    }
    if (finished < n) throw new Error(`only ${finished} of ${n} jobs finished in time`);
  } finally {
    stopProgress();
  }
  // Long-polls cut short by the abort end on the server within a poll interval (1 s).
  await sleep(1_500);
  const delta = commandDelta(before, await stack.counter.snapshot());
  const requestsAfter = await stack.requests(via);
  const cpuMs = via === "http" ? processCpuMs(stack.service.child.pid ?? 0) - cpuBefore : null;
  const apiRequests = added + pops + finished;
  return {
    system,
    via,
    driver: stack.driver,
    popCount: count,
    jobs: n,
    cmdsPerJob: delta.total / n,
    restRequestsPerJob:
      requestsBefore !== undefined && requestsAfter !== undefined
        ? (requestsAfter - requestsBefore) / n
        : null,
    addPerSec: (n * 1000) / (t1 - t0),
    consumePerSec: (n * 1000) / (t2 - t1),
    lifecyclesPerSec: (n * 1000) / (t2 - t0),
    apiRequests,
    serviceCpuMsPerRequest: cpuMs === null ? null : cpuMs / apiRequests,
    serviceCpuMsPerJob: cpuMs === null ? null : cpuMs / n,
    latencyMs: latencies.summary(),
    duplicates,
    byCommand: delta.byCommand,
  };
}

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
async function herdRun(stack: Stack, via: Via, options: SingleOptions): Promise<HerdRun> {
  const n = options.herdJobs;
  const system = `delayq ${via === "http" ? "HTTP" : "library"} ${stack.driver.toUpperCase()}`;
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
      let jobs: Popped[];
      try {
        jobs = await api.pop(topic, 1, WAIT, stop.signal);
      } catch (error) {
        if (stop.signal.aborted) return;
        throw error;
      }
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
  let before: Awaited<ReturnType<CommandCounter["snapshot"]>>;
  let requestsBefore: number | undefined;
  const dueAt = new Float64Array(n);
  const stopProgress = startProgress(`${system} herd`, () => `delivered ${distinct}/${n}`);
  try {
    await sleep(options.herdSettleMs);
    before = await stack.counter.snapshot();
    requestsBefore = await stack.requests(via);
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
  const delta = commandDelta(before, await stack.counter.snapshot());
  const requestsAfter = await stack.requests(via);
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
    restRequestsPerJob:
      requestsBefore !== undefined && requestsAfter !== undefined
        ? (requestsAfter - requestsBefore) / n
        : null,
    lateness: percentiles(lateness),
    early: lateness.filter((ms) => ms < 0).length,
    missing: n - distinct,
    duplicates,
    byCommand: delta.byCommand,
  };
}

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
  const system = `delayq ${via === "http" ? "HTTP" : "library"} ${stack.driver.toUpperCase()}`;
  const api = stack.apis[via];
  const topic = `idle-${via}`;
  const stop = new AbortController();
  const loop = (async () => {
    while (!stop.signal.aborted) {
      try {
        await api.pop(topic, 1, WAIT, stop.signal);
      } catch (error) {
        if (stop.signal.aborted) return;
        throw error;
      }
    }
  })();
  let delta: ReturnType<typeof commandDelta>;
  let requests: number | null = null;
  try {
    await sleep(options.idleSettleMs);
    const before = await stack.counter.snapshot();
    const requestsBefore = await stack.requests(via);
    await sleep(options.idleMs);
    delta = commandDelta(before, await stack.counter.snapshot());
    const requestsAfter = await stack.requests(via);
    if (requestsBefore !== undefined && requestsAfter !== undefined) {
      requests = requestsAfter - requestsBefore;
    }
  } finally {
    stop.abort();
  }
  await loop;
  await sleep(1_500);
  const beforePops = await stack.counter.snapshot();
  const popRequestsBefore = await stack.requests(via);
  for (let i = 0; i < options.emptyPops; i++) await api.pop(`empty-${via}`, 1, 0);
  const pops = commandDelta(beforePops, await stack.counter.snapshot());
  const popRequestsAfter = await stack.requests(via);
  const perMinute = 60_000 / options.idleMs;
  return {
    system,
    windowMs: options.idleMs,
    cmdsPerMinute: delta.total * perMinute,
    restRequestsPerMinute: requests === null ? null : requests * perMinute,
    byCommand: delta.byCommand,
    emptyPopCmds: pops.total / options.emptyPops,
    emptyPopRestRequests:
      popRequestsBefore !== undefined && popRequestsAfter !== undefined
        ? (popRequestsAfter - popRequestsBefore) / options.emptyPops
        : null,
  };
}

export type SingleResult = {
  runs: SingleRun[];
  herd: HerdRun[];
  /** ouqiang's run, or why it was skipped. */
  ouqiang: SingleRun | { skipped: string } | { error: string };
  errors: Record<string, string>;
  options: SingleOptions;
};

const message = (error: unknown) =>
  error instanceof Error ? error.message.split("\n")[0] || error.name : String(error);

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
        name("library", "pop 1"),
        () => singleRun(stack, "library", 1, options),
        result.runs,
      );
      for (const via of options.herdVia) {
        await attempt(name(via, "herd"), () => herdRun(stack, via, options), result.herd);
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

/** ouqiang/delay-queue on the single-job shape: push (delay 1 s) one at a time, pop, finish. */
async function runOuqiangSingle(options: SingleOptions): Promise<SingleRun | { skipped: string }> {
  const found = ouqiangBinary();
  if ("skipped" in found) {
    log(found.skipped);
    return found;
  }
  log("ouqiang/delay-queue single-job shape: start");
  const n = options.jobs;
  const topic = "single";
  const server = await startRedisServer();
  const counter = await CommandCounter.open(server.port);
  const ouqiang = await startOuqiang(found.bin, server.port).catch(async (error: unknown) => {
    counter.close();
    await server.stop();
    throw error;
  });
  try {
    const api = ouqiangApi(ouqiang.url);
    const ready = async (count: number, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const reply = await counter.command("LLEN", `dq_queue_${topic}`);
        if (reply.type === "integer" && reply.value >= count) return;
        if (Date.now() > deadline) throw new Error(`ouqiang: ${count} jobs not ready in time`);
        await sleep(20);
      }
    };
    const push = (i: number, t: string) =>
      api.push({
        topic: t,
        id: `${t}-${i}`,
        delay: 1,
        ttr: options.ouqiangTtr,
        body: JSON.stringify(makeBody(i)),
      });
    // Warm up: connections in the pool, the timers running.
    for (let i = 0; i < Math.min(options.warmup, 50); i++) await push(i, "warm");
    await sleep(2_500);
    for (let i = 0; i < Math.min(options.warmup, 50); i++) {
      const job = await api.pop("warm");
      if (job) await api.finish(job.id);
    }
    await sleep((options.ouqiangTtr + 2) * 1000);

    const latencies = new Latencies();
    const before = await counter.snapshot();
    const cpuBefore = processCpuMs(ouqiang.pid);
    let added = 0;
    let finished = 0;
    let pops = 0;
    const stopProgress = startProgress(
      "ouqiang/delay-queue",
      () => `pushed ${added}/${n}, finished ${finished}/${n}`,
    );
    const seen = new Uint8Array(n);
    let duplicates = 0;
    const t0 = performance.now();
    let t1 = t0;
    let tReady = t0;
    let t2 = t0;
    try {
      let next = 0;
      await Promise.all(
        Array.from({ length: options.concurrency }, async () => {
          for (let i = next++; i < n; i = next++) {
            await latencies.time("add", () => push(i, topic));
            added++;
          }
        }),
      );
      t1 = performance.now();
      await ready(n, 30_000);
      tReady = performance.now();
      const stop = new AbortController();
      const timer = setTimeout(() => stop.abort(), options.timeoutMs);
      const consumer = async () => {
        while (!stop.signal.aborted) {
          let job: { id: string; body: string } | null;
          const started = performance.now();
          pops++;
          try {
            job = await api.pop(topic, stop.signal);
          } catch (error) {
            if (stop.signal.aborted) return;
            throw error;
          }
          latencies.record("pop", performance.now() - started);
          if (!job) continue;
          const order = (JSON.parse(job.body) as JobBody).order;
          if (seen[order]) duplicates++;
          seen[order] = 1;
          const id = job.id;
          await latencies.time("finish", () => api.finish(id));
          if (++finished === n) {
            t2 = performance.now();
            stop.abort();
          }
        }
      };
      try {
        await Promise.all(Array.from({ length: options.concurrency }, consumer));
      } finally {
        clearTimeout(timer);
      }
      if (finished < n) throw new Error(`only ${finished} of ${n} jobs finished in time`);
    } finally {
      stopProgress();
    }
    const cpuMs = processCpuMs(ouqiang.pid) - cpuBefore;
    // Its lease entries stay in a bucket until the timer finds them, ttr after the pop: wait,
    // so that their removal is counted as part of the jobs' cost.
    await sleep((options.ouqiangTtr + 2) * 1000);
    const delta = commandDelta(before, await counter.snapshot());
    const apiRequests = added + pops + finished;
    const consumeMs = t2 - tReady;
    log("ouqiang/delay-queue single-job shape: done");
    return {
      system: "ouqiang/delay-queue",
      via: "ouqiang",
      driver: "tcp",
      popCount: 1,
      jobs: n,
      cmdsPerJob: delta.total / n,
      restRequestsPerJob: null,
      addPerSec: (n * 1000) / (t1 - t0),
      consumePerSec: (n * 1000) / consumeMs,
      lifecyclesPerSec: (n * 1000) / (t1 - t0 + consumeMs),
      apiRequests,
      serviceCpuMsPerRequest: cpuMs / apiRequests,
      serviceCpuMsPerJob: cpuMs / n,
      latencyMs: latencies.summary(),
      duplicates,
      byCommand: delta.byCommand,
      readyWaitMs: tReady - t1,
    };
  } finally {
    await ouqiang.close();
    counter.close();
    await server.stop();
  }
}

export type IdleResult = {
  runs: IdleRun[];
  /** ouqiang with one consumer blocked in /pop on an empty topic, per minute. */
  ouqiang: { cmdsPerMinute: number; byCommand: CommandStats } | { skipped: string };
  errors: Record<string, string>;
};

/**
 * Idle cost on fresh stacks: one HTTP consumer over REST and one over TCP (and ouqiang's), side
 * by side. Counts do not depend on CPU, so this may run beside another workload.
 */
export async function runIdleSingle(options: SingleOptions): Promise<IdleResult> {
  const result: IdleResult = { runs: [], ouqiang: { skipped: "not run" }, errors: {} };
  const delayq = (["rest", "tcp"] as const).map(async (driver) => {
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
  const peer = (async () => {
    const found = ouqiangBinary();
    if ("skipped" in found) {
      result.ouqiang = found;
      return;
    }
    const server = await startRedisServer();
    const counter = await CommandCounter.open(server.port);
    try {
      const ouqiang = await startOuqiang(found.bin, server.port);
      const stop = new AbortController();
      const api = ouqiangApi(ouqiang.url);
      const loop = (async () => {
        while (!stop.signal.aborted) await api.pop("idle", stop.signal).catch(() => null);
      })();
      try {
        await sleep(options.idleSettleMs);
        const before = await counter.snapshot();
        await sleep(options.idleMs);
        const delta = commandDelta(before, await counter.snapshot());
        result.ouqiang = {
          cmdsPerMinute: (delta.total * 60_000) / options.idleMs,
          byCommand: delta.byCommand,
        };
      } finally {
        stop.abort();
        await loop;
        await ouqiang.close();
      }
    } catch (error) {
      result.errors["idle ouqiang"] = message(error);
    } finally {
      counter.close();
      await server.stop();
    }
  })();
  await Promise.all([...delayq, peer]);
  result.runs.sort((a, b) => a.system.localeCompare(b.system));
  return result;
}
