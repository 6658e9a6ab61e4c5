// D scale: a large backlog of delayed jobs — memory per job, add rate, the time ticks take to
// drain it once it is all due, and the longest single script call (SLOWLOG).
import { createHash } from "node:crypto";
import { Redis } from "@upstash/redis";
import { startBridge } from "../dev/bridge";
import { startRedisServer } from "../dev/redis-server";
import { type Reply, RespConnection } from "../dev/resp";
import { DelayQueue, REDIS_CLIENT_OPTIONS } from "../src/index";
import { ADD_SLICE } from "../src/queue/add-batch";
import { keys } from "../src/redis/keys";
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
  /**
   * Whether the drain's slow slices are the script or the server: the tick slices over 10 ms
   * (server time, SLOWLOG), how many of them were slices during which the ready list's hash
   * table doubled (its size crossed a power of two from 2^14 up: Redis allocates the new table
   * and starts rehashing inside that command), and the slice times apart from those.
   */
  drainSlices: Attribution;
  /** The same for the add calls (`addSlice` jobs each) and the keyspace's own hash table. */
  addCalls: Attribution;
  /** Jobs per add script call (ADD_SLICE; absent in results from before it was recorded: 250). */
  addSlice?: number;
  /**
   * Memory of a backlog due sooner: `jobs` jobs due over the next 20 minutes, spread evenly
   * (absent in results of versions up to 37f6d42). Those due within about 2 minutes wait in the
   * delay bucket, a sorted set; the others in slot lists.
   */
  soon?: { jobs: number; bytesPerJobBeyondBody: number; inBucket: number };
};

/** Calls of one kind, split by whether a hash table doubled during them. */
export type Attribution = {
  over10ms: number;
  over10msAtTableGrowth: number;
  /** Calls during which the table doubled, and the longest of them (ms). */
  atTableGrowth: number;
  longestAtTableGrowthMs: number;
  /** The other calls: median and longest server time (ms; under 1 ms counts as 1). */
  medianOtherMs: number;
  longestOtherMs: number;
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
    const args = fields[3]?.type === "array" ? (fields[3].value ?? []) : [];
    const word = (i: number) => {
      const arg = args[i];
      return arg?.type === "bulk" ? String(arg.value) : "";
    };
    // The benchmark's own reads of the slow log (thousands of entries) are not delayq's calls.
    if (word(0).toLowerCase() === "slowlog") continue;
    longestUs = Math.max(longestUs, us);
    if (us <= 10_000) continue;
    const name =
      word(0).toLowerCase() === "evalsha" ? (scriptBySha.get(word(1)) ?? "script") : word(0);
    over10ms[name] = (over10ms[name] ?? 0) + 1;
  }
  return { longestUs, over10ms };
}

function integer(reply: Reply): number {
  return reply.type === "integer" ? reply.value : Number.NaN;
}

function merge(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out = { ...a };
  for (const [name, count] of Object.entries(b)) out[name] = (out[name] ?? 0) + count;
  return out;
}

/**
 * The slow log's durations (µs), oldest first; the benchmark's own SLOWLOG commands (a RESET of
 * many entries takes over 10 ms, and it logs itself) are NaN: they count for the pairing with
 * steps, and as no call.
 */
async function slowLog(conn: RespConnection): Promise<number[]> {
  const reply: Reply = await conn.call("SLOWLOG", "GET", "1000000");
  const entries = reply.type === "array" ? (reply.value ?? []) : [];
  return entries
    .map((entry) => {
      const fields = entry.type === "array" ? (entry.value ?? []) : [];
      const id = fields[0]?.type === "integer" ? fields[0].value : 0;
      const us = fields[2]?.type === "integer" ? fields[2].value : 0;
      const args = fields[3]?.type === "array" ? (fields[3].value ?? []) : [];
      const command = args[0]?.type === "bulk" ? String(args[0].value).toLowerCase() : "";
      return { id, us: command === "slowlog" ? Number.NaN : us };
    })
    .sort((x, y) => x.id - y.id)
    .map((entry) => entry.us);
}

/** Whether the ready list's hash table doubled during a slice: its size crossed 2^k, k >= 14. */
function doubled(before: number, after: number): boolean {
  for (let k = 14; 2 ** k <= after; k++) if (before < 2 ** k) return true;
  return false;
}

/** A step (a tick slice, an add batch): a table's size before and after, its slow-log entries. */
type Sized = { before: number; after: number; logged: number };

/**
 * Pairs each step with its slow-log entries (calls under 1 ms have none) and splits the calls
 * by whether the table doubled during their step.
 */
function attribute(steps: Sized[], durationsUs: number[]): Attribution {
  let next = 0;
  const growth: number[] = [];
  const other: number[] = [];
  for (const step of steps) {
    const calls = step.logged > 0 ? durationsUs.slice(next, next + step.logged) : [1000];
    next += step.logged;
    for (const us of calls) {
      if (!Number.isNaN(us)) (doubled(step.before, step.after) ? growth : other).push(us / 1000);
    }
  }
  other.sort((a, b) => a - b);
  const over = (list: number[]) => list.filter((ms) => ms > 10).length;
  return {
    over10ms: over(growth) + over(other),
    over10msAtTableGrowth: over(growth),
    atTableGrowth: growth.length,
    longestAtTableGrowthMs: Math.max(0, ...growth),
    medianOtherMs: other[Math.floor(other.length / 2)] ?? 0,
    longestOtherMs: other[other.length - 1] ?? 0,
  };
}

/**
 * The batch of a backlog starting at job `from`: jobs `<prefix><n>` of `topic` (ids as short as
 * a caller's, since they are part of what is measured), each due `delayOf(n)` seconds from now,
 * and the bytes of their bodies (their JSON text).
 */
function backlogBatch(
  from: number,
  jobs: number,
  [topic, prefix]: [string, string],
  delayOf: (n: number) => number,
) {
  let bodyBytes = 0;
  const batch = Array.from({ length: Math.min(BATCH, jobs - from) }, (_, j) => {
    const n = from + j;
    const body = makeBody(n);
    bodyBytes += JSON.stringify(body).length;
    return { topic, id: `${prefix}${n}`, body, delay: delayOf(n) };
  });
  return { batch, bodyBytes };
}

/** Jobs due within 20 minutes: what they cost beyond their bodies, on an empty server. */
async function soonBacklog(
  queue: DelayQueue,
  admin: RespConnection,
  jobs: number,
): Promise<NonNullable<ScaleResult["soon"]>> {
  // The scripts are loaded (their cache is memory too) before the count starts.
  await queue.add({ topic: "warm", id: "warm", delay: 1 });
  const before = await info(admin, "used_memory");
  let bodyBytes = 0;
  for (let i = 0; i < jobs; i += BATCH) {
    const next = backlogBatch(i, jobs, ["soon", "s"], (n) => 1 + (n % 1200));
    bodyBytes += next.bodyBytes;
    await queue.addBatch(next.batch);
  }
  const after = await info(admin, "used_memory");
  const inBucket = integer(await admin.call("ZCARD", keys("scale").delayed("soon")));
  await admin.call("FLUSHALL");
  return { jobs, bytesPerJobBeyondBody: (after - before - bodyBytes) / jobs, inBucket };
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
    const soon = await soonBacklog(queue, admin, Math.min(jobs, 100_000));
    log(
      `delayq D: ${soon.jobs} jobs due within 20 min, ` +
        `${soon.bytesPerJobBeyondBody.toFixed(0)} B/job beyond the body`,
    );
    // Every command over 1 ms goes to the slow log, so its longest entry is the longest call.
    await admin.call("CONFIG", "SET", "slowlog-log-slower-than", "1000");
    await admin.call("CONFIG", "SET", "slowlog-max-len", "100000");
    await admin.call("SLOWLOG", "RESET");
    const before = await info(admin, "used_memory");

    let added = 0;
    let bodyBytes = 0;
    let addMs = 0;
    // As for the drain below: the keyspace's size and the slow log's length after each batch.
    const addLog: Sized[] = [];
    let logged = 0;
    let keyCount = integer(await admin.call("DBSIZE"));
    const stopAdd = startProgress("delayq D", () => `added ${added}/${jobs}`);
    try {
      for (let i = 0; i < jobs; i += BATCH) {
        // Due over the second hour from now, spread evenly: the slot lists' workload.
        const { batch, bodyBytes: bytes } = backlogBatch(
          i,
          jobs,
          ["backlog", "j"],
          (n) => 3600 + (n % 3600),
        );
        bodyBytes += bytes;
        const start = performance.now();
        await queue.addBatch(batch);
        addMs += performance.now() - start;
        added += batch.length;
        const size = integer(await admin.call("DBSIZE"));
        const length = integer(await admin.call("SLOWLOG", "LEN"));
        addLog.push({ before: keyCount, after: size, logged: length - logged });
        keyCount = size;
        logged = length;
      }
    } finally {
      stopAdd();
    }
    const addSeconds = addMs / 1000;
    const addDurations = await slowLog(admin);
    const { longestUs, over10ms } = await slowest(admin);
    // The slow log's entries (a copy of each logged call's arguments, thousands of them) are the
    // benchmark's instruments, not delayq's memory.
    await admin.call("SLOWLOG", "RESET");
    const after = await info(admin, "used_memory");

    now += 7200_000; // all of it is due
    // The drain runs slice by slice (as a tick does), each timed on its own; between slices the
    // admin connection reads the ready list's size and the slow log's length, which tells
    // which slice each slow-log entry belongs to. Those reads are not part of the drain's time.
    const readyKey = keys("scale").ready("backlog");
    let promoted = 0;
    let slices = 0;
    let drainMs = 0;
    const sliceLog: Sized[] = [];
    const stopDrain = startProgress("delayq D", () => `promoted ${promoted}/${jobs}`);
    try {
      let size = 0;
      let logged = 0;
      for (;;) {
        const start = performance.now();
        const result = await queue.tickSlice(now);
        drainMs += performance.now() - start;
        promoted += result.promoted;
        slices += 1;
        const after = integer(await admin.call("ZCARD", readyKey));
        const length = integer(await admin.call("SLOWLOG", "LEN"));
        sliceLog.push({ before: size, after, logged: length - logged });
        size = after;
        logged = length;
        if (!result.more) break;
      }
    } finally {
      stopDrain();
    }
    const drainSeconds = drainMs / 1000;
    if (promoted !== jobs) throw new Error(`ticks promoted ${promoted} of ${jobs} jobs`);
    const drainLog = await slowLog(admin);
    const drain = await slowest(admin);
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
      longestCallMs: Math.max(longestUs, drain.longestUs) / 1000,
      callsOver10ms: merge(over10ms, drain.over10ms),
      drainSlices: attribute(sliceLog, drainLog),
      addCalls: attribute(addLog, addDurations),
      addSlice: ADD_SLICE,
      soon,
    };
  } finally {
    admin.close();
    await bridge.close();
    await server.stop();
  }
}
