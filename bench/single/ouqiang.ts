// ouqiang/delay-queue on the single-job shape and idle, each on a redis-server of its own, when
// OUQIANG_DELAY_QUEUE_BIN names a built binary (bench/peers/ouqiang.ts drives its HTTP API).
import { startRedisServer } from "../../dev/redis-server";
import { CommandCounter, type CommandStats, commandDelta, log } from "../lib/measure";
import { processCpuMs } from "../lib/processes";
import type { JobBody } from "../lib/types";
import { makeBody } from "../lib/workloads";
import { type OuqiangServer, ouqiangApi, ouqiangBinary, startOuqiang } from "../peers/ouqiang";
import { cpuMsSince, type ShapeApi, type SingleRun, timeShape } from "./shape";

type OuqiangJob = { id: string; body: string };

import { type SingleOptions, sleep } from "./stack";

/** A redis-server, its command counter and ouqiang's server on it. */
type OuqiangStack = {
  counter: CommandCounter;
  redisPid: number;
  server: OuqiangServer;
  api: ReturnType<typeof ouqiangApi>;
  close(): Promise<void>;
};

async function openOuqiang(bin: string): Promise<OuqiangStack> {
  const redis = await startRedisServer();
  const counter = await CommandCounter.open(redis.port);
  const server = await startOuqiang(bin, redis.port).catch(async (error: unknown) => {
    counter.close();
    await redis.stop();
    throw error;
  });
  return {
    counter,
    redisPid: redis.process.pid ?? 0,
    server,
    api: ouqiangApi(server.url),
    async close() {
      await server.close();
      counter.close();
      await redis.stop();
    },
  };
}

/** ouqiang/delay-queue on the single-job shape: push (delay 1 s) one at a time, pop, finish. */
export async function runOuqiangSingle(
  options: SingleOptions,
): Promise<SingleRun | { skipped: string }> {
  const found = ouqiangBinary();
  if ("skipped" in found) {
    log(found.skipped);
    return found;
  }
  log("ouqiang/delay-queue single-job shape: start");
  const n = options.jobs;
  const topic = "single";
  const { counter, redisPid, server, api, close } = await openOuqiang(found.bin);
  try {
    const ready = async (t: string, count: number, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const reply = await counter.command("LLEN", `dq_queue_${t}`);
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
    /** The shape's calls on topic `t`, whose pops start once `jobs` are ready there. */
    const shapeOn = (t: string, jobs: number): ShapeApi<OuqiangJob> => ({
      add: (i) => push(i, t),
      pop: async (signal) => {
        const job = await api.pop(t, signal);
        return job ? [job] : [];
      },
      order: (job) => (JSON.parse(job.body) as JobBody).order,
      finish: (job) => api.finish(job.id),
      beforePops: () => ready(t, jobs, 30_000),
    });
    // Warm up as delayq does (bench/single/shape.ts): the same shape, untimed, on a topic of its
    // own, so that connections are pooled and the benchmark's own HTTP client is as warm as it is
    // for delayq.
    if (options.warmup > 0) {
      await timeShape("ouqiang/delay-queue warm-up", "pushed", shapeOn("warm", options.warmup), {
        ...options,
        jobs: options.warmup,
      });
      // Its warm-up leases sit in a bucket until ttr after their pops: let them go first.
      await sleep((options.ouqiangTtr + 2) * 1000);
    }

    const before = await counter.snapshot();
    const cpuBefore = processCpuMs(server.pid);
    const redisCpuBefore = processCpuMs(redisPid);
    const clientCpuBefore = process.cpuUsage();
    const run = await timeShape("ouqiang/delay-queue", "pushed", shapeOn(topic, n), options);
    const cpuMs = processCpuMs(server.pid) - cpuBefore;
    const redisCpuMs = processCpuMs(redisPid) - redisCpuBefore;
    const clientCpuMs = cpuMsSince(clientCpuBefore);
    // Its lease entries stay in a bucket until the timer finds them, ttr after the pop: wait,
    // so that their removal is counted as part of the jobs' cost.
    await sleep((options.ouqiangTtr + 2) * 1000);
    const delta = commandDelta(before, await counter.snapshot());
    const apiRequests = run.added + run.pops + run.finishCalls;
    const consumeMs = run.t2 - run.tReady;
    log("ouqiang/delay-queue single-job shape: done");
    return {
      system: "ouqiang/delay-queue",
      via: "ouqiang",
      driver: "tcp",
      popCount: 1,
      finishMany: false,
      jobs: n,
      cmdsPerJob: delta.total / n,
      restRequestsPerJob: null,
      addPerSec: (n * 1000) / (run.t1 - run.t0),
      consumePerSec: (n * 1000) / consumeMs,
      lifecyclesPerSec: (n * 1000) / (run.t1 - run.t0 + consumeMs),
      apiRequests,
      serviceCpuMsPerRequest: cpuMs / apiRequests,
      serviceCpuMsPerJob: cpuMs / n,
      redisCpuMsPerJob: redisCpuMs / n,
      clientCpuMsPerJob: clientCpuMs / n,
      latencyMs: run.latencies.summary(),
      duplicates: run.duplicates,
      byCommand: delta.byCommand,
      readyWaitMs: run.tReady - run.t1,
    };
  } finally {
    await close();
  }
}

export type OuqiangIdle = { cmdsPerMinute: number; byCommand: CommandStats };

/** One consumer blocked in /pop on an empty topic: its commands over the idle window. */
export async function ouqiangIdle(
  bin: string,
  options: Pick<SingleOptions, "idleMs" | "idleSettleMs">,
): Promise<OuqiangIdle> {
  const { counter, api, close } = await openOuqiang(bin);
  const stop = new AbortController();
  const loop = (async () => {
    while (!stop.signal.aborted) await api.pop("idle", stop.signal).catch(() => null);
  })();
  try {
    await sleep(options.idleSettleMs);
    const before = await counter.snapshot();
    await sleep(options.idleMs);
    const delta = commandDelta(before, await counter.snapshot());
    return { cmdsPerMinute: (delta.total * 60_000) / options.idleMs, byCommand: delta.byCommand };
  } finally {
    stop.abort();
    await loop;
    await close();
  }
}
