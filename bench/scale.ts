// D scale: a large backlog of delayed jobs — memory per job, add rate, the time ticks take to
// drain it once it is all due, and the longest single script call (SLOWLOG).
import { createHash } from "node:crypto";
import { Redis } from "@upstash/redis";
import { startBridge } from "../dev/bridge";
import { startRedisServer } from "../dev/redis-server";
import { type Reply, RespConnection } from "../dev/resp";
import { DelayQueue, REDIS_CLIENT_OPTIONS, tick } from "../src/index";
import { scriptTexts } from "../src/redis/lua/scripts";
import { log, startProgress } from "./lib/measure";
import { makeBody } from "./lib/workloads";

export type ScaleResult = {
  jobs: number;
  /** used_memory delta / jobs. */
  bytesPerJob: number;
  /** The same, less the job's body (its JSON text). */
  bytesPerJobBeyondBody: number;
  addJobsPerSec: number;
  /** Wall time for ticks to promote the whole backlog once due. */
  drainSeconds: number;
  drainJobsPerSec: number;
  tickSlices: number;
  /** The longest command redis-server ran (an EVALSHA counts as one), from SLOWLOG. */
  longestCallMs: number;
  /** Calls over 10 ms, by script (or command). */
  callsOver10ms: Record<string, number>;
};

const BATCH = 1000;

async function info(conn: RespConnection, field: string): Promise<number> {
  const reply = await conn.call("INFO", "memory");
  const text = reply.type === "bulk" ? String(reply.value) : "";
  return Number(new RegExp(`^${field}:(\\d+)`, "m").exec(text)?.[1] ?? Number.NaN);
}

const scriptBySha = new Map(
  Object.entries(scriptTexts()).map(([name, text]) => [
    createHash("sha1").update(text).digest("hex"),
    name,
  ]),
);

/** The longest entry of the slow log (µs), and the calls over 10 ms by script or command. */
async function slowest(
  conn: RespConnection,
): Promise<{ longestUs: number; over10ms: Record<string, number> }> {
  const reply: Reply = await conn.call("SLOWLOG", "GET", "1000000");
  let longestUs = 0;
  const over10ms: Record<string, number> = {};
  for (const entry of reply.type === "array" ? (reply.value ?? []) : []) {
    const fields = entry.type === "array" ? (entry.value ?? []) : [];
    const duration = fields[2];
    const us = duration?.type === "integer" ? duration.value : 0;
    longestUs = Math.max(longestUs, us);
    if (us <= 10_000) continue;
    const args = fields[3]?.type === "array" ? (fields[3].value ?? []) : [];
    const word = (i: number) => {
      const arg = args[i];
      return arg?.type === "bulk" ? String(arg.value) : "";
    };
    const name =
      word(0).toLowerCase() === "evalsha" ? (scriptBySha.get(word(1)) ?? "script") : word(0);
    over10ms[name] = (over10ms[name] ?? 0) + 1;
  }
  return { longestUs, over10ms };
}

export async function runScale(jobs: number): Promise<ScaleResult> {
  const server = await startRedisServer();
  const admin = await RespConnection.open(server.port);
  const bridge = await startBridge({ redisPort: server.port, tokens: "scale" });
  try {
    let now = 1_800_000_000_000;
    const queue = new DelayQueue({
      redis: new Redis({ url: bridge.url, token: "scale", ...REDIS_CLIENT_OPTIONS }),
      prefix: "scale",
      clock: () => now,
    });
    // Every command over 1 ms goes to the slow log, so its longest entry is the longest call.
    await admin.call("CONFIG", "SET", "slowlog-log-slower-than", "1000");
    await admin.call("CONFIG", "SET", "slowlog-max-len", "100000");
    await admin.call("SLOWLOG", "RESET");
    const before = await info(admin, "used_memory");

    let added = 0;
    let bodyBytes = 0;
    const stopAdd = startProgress("delayq D", () => `added ${added}/${jobs}`);
    const addStart = performance.now();
    try {
      for (let i = 0; i < jobs; i += BATCH) {
        const batch = Array.from({ length: Math.min(BATCH, jobs - i) }, (_, j) => {
          const body = makeBody(i + j);
          bodyBytes += JSON.stringify(body).length;
          // Due over the second hour from now, spread evenly: the slot lists' workload.
          return { topic: "backlog", id: `j${i + j}`, body, delay: 3600 + ((i + j) % 3600) };
        });
        await queue.addBatch(batch);
        added += batch.length;
      }
    } finally {
      stopAdd();
    }
    const addSeconds = (performance.now() - addStart) / 1000;
    const after = await info(admin, "used_memory");

    now += 7200_000; // all of it is due
    let promoted = 0;
    let slices = 0;
    const stopDrain = startProgress("delayq D", () => `promoted ${promoted}/${jobs}`);
    const drainStart = performance.now();
    try {
      for (;;) {
        const result = await tick(queue, { budgetMs: 60_000 });
        promoted += result.promoted;
        slices += result.slices;
        if (!result.more) break;
      }
    } finally {
      stopDrain();
    }
    const drainSeconds = (performance.now() - drainStart) / 1000;
    if (promoted !== jobs) throw new Error(`ticks promoted ${promoted} of ${jobs} jobs`);
    const { longestUs, over10ms } = await slowest(admin);
    const bytesPerJob = (after - before) / jobs;
    log(
      `delayq D: ${jobs} jobs, ${bytesPerJob.toFixed(0)} B/job, drained in ${drainSeconds.toFixed(1)} s`,
    );
    return {
      jobs,
      bytesPerJob,
      bytesPerJobBeyondBody: bytesPerJob - bodyBytes / jobs,
      addJobsPerSec: jobs / addSeconds,
      drainSeconds,
      drainJobsPerSec: jobs / drainSeconds,
      tickSlices: slices,
      longestCallMs: longestUs / 1000,
      callsOver10ms: over10ms,
    };
  } finally {
    admin.close();
    await bridge.close();
    await server.stop();
  }
}
