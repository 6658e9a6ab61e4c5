// The single-job shape's options and its stack: one redis-server with delayq's service (HTTP,
// functions/node.ts) and the library on it, over REST (the bridge in its own process) or TCP.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "@upstash/redis";
import { freePort, startRedisServer } from "../../dev/redis-server";
import { type ServiceProcess, startService } from "../../dev/service-process";
import { createClient } from "../../src/client";
import { nodeFetch } from "../../src/client/node";
import { DelayQueue, REDIS_CLIENT_OPTIONS } from "../../src/index";
import type { RedisClient } from "../../src/redis/runner";
import { connectRedis, type TcpRedis } from "../../src/redis/tcp";
import { CommandCounter, type CommandDelta, commandDelta } from "../lib/measure";
import { type BridgeProcess, startBridgeProcess } from "../lib/processes";
import type { JobBody } from "../lib/types";

export type SingleOptions = {
  /** Jobs per single-job run. */
  jobs: number;
  /** Producers adding one job per request at once, and consumers popping at once. */
  concurrency: number;
  /**
   * Lifecycles run before each measured run, in its own shape and untimed (scripts loaded,
   * connections open, V8's optimizing compiler done with the hot paths).
   */
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
  /**
   * Alternating pairs of runs, ouqiang's and delayq's HTTP TCP (pop 1; pop 1 with finishAndPop;
   * pop 10 with finishMany), each pair in the other order from the last (the shared machine's
   * speed drifts over a run); 0: none.
   */
  pairs: number;
  /** ouqiang's ttr, s: the lease's bucket entry is swept this long after a pop. */
  ouqiangTtr: number;
  timeoutMs: number;
};

export const SINGLE_DEFAULTS: SingleOptions = {
  jobs: 5_000,
  concurrency: 8,
  warmup: 3_000,
  herdJobs: 1_000,
  herdSpanMs: 10_000,
  herdSettleMs: 3_000,
  herdVia: ["http", "library"],
  idleMs: 60_000,
  idleSettleMs: 5_000,
  emptyPops: 50,
  pairs: 5,
  ouqiangTtr: 3,
  timeoutMs: 180_000,
};

export const SINGLE_QUICK: SingleOptions = {
  ...SINGLE_DEFAULTS,
  jobs: 300,
  warmup: 100,
  herdJobs: 200,
  herdSpanMs: 3_000,
  herdSettleMs: 1_500,
  herdVia: ["http"],
  idleMs: 10_000,
  idleSettleMs: 2_000,
  emptyPops: 20,
  pairs: 1,
  timeoutMs: 60_000,
};

/** The service's API token (DQ_TOKENS). */
export const API_TOKEN = "bench-api";
const SERVICE_REDIS_TOKEN = "bench-service";
const LIBRARY_REDIS_TOKEN = "bench-library";
const PREFIX = "bench";
/** A consumer's long-poll, s: the most the API allows. */
export const WAIT = 20;

export type Driver = "rest" | "tcp";
export type Via = "http" | "library";

export type Popped = { id: string; receipt?: string; body: unknown };

/** What the shape needs, whatever carries it. */
export type Api = {
  add(topic: string, body: JobBody): Promise<void>;
  addBatch(topic: string, jobs: readonly { body: JobBody; runAt: number }[]): Promise<void>;
  pop(topic: string, count: number, wait: number, signal?: AbortSignal): Promise<Popped[]>;
  finish(id: string, receipt?: string): Promise<void>;
  /** Finishes what one pop gave in one call (POST /v1/jobs/finish); throws if any is refused. */
  finishMany(jobs: readonly Popped[]): Promise<void>;
  /** Finishes `held` and pops, in one call; throws if a finish is refused. */
  finishAndPop(
    topic: string,
    held: readonly Popped[],
    count: number,
    wait: number,
    signal?: AbortSignal,
  ): Promise<Popped[]>;
};

/** The jobs popped, once every finish of the call finished. */
function poppedAfter(answer: {
  jobs: Popped[];
  finished: readonly ({ finished: true } | { error: { message: string } })[];
}): Popped[] {
  allFinished(answer.finished);
  return answer.jobs;
}

/** Throws unless every item of a batch finish finished. */
function allFinished(results: readonly ({ finished: true } | { error: { message: string } })[]) {
  for (const result of results) if ("error" in result) throw new Error(result.error.message);
}

/** What one side cost between two points: every Redis command, and its REST requests. */
export type Counted = {
  delta: CommandDelta;
  /** REST requests the side sent to the bridge; null over TCP (no bridge). */
  requests: number | null;
};

/** One redis-server with delayq on it: the service (HTTP) and the library, both on `driver`. */
export type Stack = {
  driver: Driver;
  counter: CommandCounter;
  apis: Record<Via, Api>;
  service: ServiceProcess;
  /** redis-server's pid, to read its CPU time. */
  redisPid: number;
  /** "delayq HTTP REST", "delayq library TCP", ...: the `system` of a run's result. */
  name(via: Via): string;
  /** Starts counting (commands, then `via`'s REST requests); call the result to read the costs. */
  count(via: Via): Promise<() => Promise<Counted>>;
  close(): Promise<void>;
};

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const message = (error: unknown) =>
  error instanceof Error ? error.message.split("\n")[0] || error.name : String(error);

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
    // nodeFetch, as ouqiang's requests (bench/peers/ouqiang.ts): with Node's global fetch the
    // benchmark's own thread, at ~0.5 ms of CPU a request, set the pace for both systems.
    const client = createClient({ baseUrl: service.url, token: API_TOKEN, fetch: nodeFetch() });
    const queue = new DelayQueue({ redis, prefix: PREFIX });
    const apis: Record<Via, Api> = {
      http: {
        add: async (topic, body) => void (await client.add({ topic, body })),
        addBatch: async (topic, jobs) =>
          void (await client.addBatch(jobs.map((job) => ({ topic, ...job })))),
        pop: (topic, count, wait, signal) => client.pop(topic, { count, wait, signal }),
        finish: (id, receipt) => client.finish(id, { receipt }),
        finishMany: async (jobs) => allFinished(await client.finishMany(jobs)),
        finishAndPop: async (topic, held, count, wait, signal) =>
          poppedAfter(await client.finishAndPop(topic, held, { count, wait, signal })),
      },
      library: {
        add: async (topic, body) => void (await queue.add({ topic, body })),
        addBatch: async (topic, jobs) =>
          void (await queue.addBatch(jobs.map((job) => ({ topic, ...job })))),
        pop: (topic, count, wait, signal) => queue.pop(topic, { count, wait }, signal),
        finish: (id, receipt) => queue.finish(id, { receipt }),
        finishMany: async (jobs) => allFinished(await queue.finishMany(jobs)),
        finishAndPop: async (topic, held, count, wait, signal) =>
          poppedAfter(await queue.finishAndPop(topic, held, { count, wait }, signal)),
      },
    };
    const tokens: Record<Via, string> = { http: SERVICE_REDIS_TOKEN, library: LIBRARY_REDIS_TOKEN };
    const requests = async (via: Via) =>
      bridge ? (await bridge.stats(tokens[via])).requests.total : undefined;
    return {
      driver,
      counter,
      apis,
      service,
      redisPid: server.process.pid ?? 0,
      name: (via) => `delayq ${via === "http" ? "HTTP" : "library"} ${driver.toUpperCase()}`,
      async count(via) {
        const before = await counter.snapshot();
        const requestsBefore = await requests(via);
        return async () => {
          const delta = commandDelta(before, await counter.snapshot());
          const requestsAfter = await requests(via);
          return {
            delta,
            requests:
              requestsBefore !== undefined && requestsAfter !== undefined
                ? requestsAfter - requestsBefore
                : null,
          };
        };
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Long-polls `topic` (wait 20 s) for up to `count` jobs; null once `signal` has stopped it. */
export async function longPoll(
  api: Api,
  topic: string,
  count: number,
  signal: AbortSignal,
): Promise<Popped[] | null> {
  try {
    return await api.pop(topic, count, WAIT, signal);
  } catch (error) {
    if (signal.aborted) return null;
    throw error;
  }
}
