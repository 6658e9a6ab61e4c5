// Redis Cluster (issue 38): what spreading topics over a cluster's masters costs and gives, on a
// local three-master cluster beside one redis-server, in the same run. Three layouts:
//   (a) one redis-server, one keyspace (N = 1), the TCP driver (append-only file on, everysec, as
//       on the cluster's masters);
//   (b) the cluster, N = 1: every key under `{prefix}`, so on one master;
//   (c) the cluster, N = 16 partitions (DQ_CLUSTER_PARTITIONS's default with REDIS_CLUSTER_NODES).
// 1. Commands per job (INFO commandstats deltas summed over the masters, commands run inside
//    functions included): a job's life one call at a time (add, pop, finish by id; and add then
//    finishAndPop), in batches of 100 (addBatch, pop 100, finishMany), and the tick's upkeep.
// 2. The busiest master's share of the commands with 24 topics used evenly.
// 3. Jobs/s: 8 workers, each living jobs (add, pop, finish) round robin over 3 of the 24 topics,
//    for `seconds` per run, the layouts in alternating order, `rounds` runs each; with each
//    master's commands and main-thread CPU, for the ceiling N masters give on paper.
// `npx tsx bench/cluster.ts [--seconds 10] [--rounds 3] [--out FILE]`, or `npm run bench -- --only
// cluster`. About 2 minutes with the defaults.
import { spawnSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type RedisCluster, slotRanges, startRedisCluster } from "../dev/redis-cluster";
import { type RedisServer, startRedisServer } from "../dev/redis-server";
import { RespConnection } from "../dev/resp";
import { DelayQueue, type Job, tick } from "../src/index";
import { connectCluster } from "../src/redis/cluster";
import { partitions, slotOf } from "../src/redis/partitions";
import type { RedisClient } from "../src/redis/runner";
import { connectRedis } from "../src/redis/tcp";
import { log, median } from "./lib/measure";
import { redisVersion, writeJson } from "./lib/report";

export type ClusterBenchOptions = {
  /** Length of each jobs/s run. */
  seconds: number;
  /** Jobs/s runs per layout. */
  rounds: number;
  /** Concurrent workers in a jobs/s run. */
  workers: number;
  /** Partitions of layout (c). */
  partitions: number;
  /** Length of the one-worker run of each layout. */
  loneSeconds: number;
};

export const CLUSTER_DEFAULTS: ClusterBenchOptions = {
  seconds: 10,
  rounds: 3,
  workers: 8,
  partitions: 16,
  loneSeconds: 4,
};
export const CLUSTER_QUICK: ClusterBenchOptions = {
  ...CLUSTER_DEFAULTS,
  seconds: 3,
  rounds: 2,
  loneSeconds: 2,
};

/** Topics "used evenly" in parts 2 and 3: names of a pattern, as a deployment may number them. */
const TOPICS = Array.from({ length: 24 }, (_, i) => `t${i}`);
/** 24 names of another kind: where topics land depends on their names (part 2 has both). */
const WORDS = [
  "orders",
  "emails",
  "sms",
  "invoices",
  "refunds",
  "webhooks",
  "reminders",
  "reports",
  "exports",
  "imports",
  "thumbnails",
  "payouts",
  "notifications",
  "cleanup",
  "billing",
  "shipping",
  "returns",
  "reviews",
  "signups",
  "trials",
  "renewals",
  "audits",
  "backups",
  "digests",
];

/**
 * Commands a driver sends for itself, not for delayq's scripts: ioredis's ready check (INFO), the
 * cluster client's slot refreshes (CLUSTER SLOTS), our own INFO. Left out of every count.
 */
const HOUSEKEEPING = /^(info|cluster|client|command|hello|ping|select)(\||$)/;

type Layout = {
  key: "a" | "b" | "c";
  label: string;
  redis: RedisClient;
  partitions: number;
  /** Admin connections to the layout's servers (one, or every master). */
  nodes: RespConnection[];
};

/** One server's counters at a moment. */
type NodeSnapshot = { commands: number; byName: Record<string, number>; cpu: number };

async function snapshot(node: RespConnection): Promise<NodeSnapshot> {
  const reply = await node.call("INFO", "commandstats", "cpu");
  const text = reply.type === "bulk" ? String(reply.value) : "";
  const byName: Record<string, number> = {};
  let commands = 0;
  for (const [, name, calls] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (!name || HOUSEKEEPING.test(name)) continue;
    byName[name] = Number(calls);
    commands += Number(calls);
  }
  // The main thread runs the commands (and the server's cron): its CPU, not the I/O threads'.
  const cpuOf = (field: string) =>
    Number(new RegExp(`^${field}:([\\d.]+)`, "m").exec(text)?.[1] ?? Number.NaN);
  const cpu = cpuOf("used_cpu_user_main_thread") + cpuOf("used_cpu_sys_main_thread");
  return { commands, byName, cpu };
}

type Delta = {
  /** Commands each server ran (one entry per master on the cluster). */
  perNode: number[];
  total: number;
  /** Commands by name, summed over the servers. */
  byName: Record<string, number>;
  /** Main-thread CPU seconds each server used. */
  cpu: number[];
};

async function measure(layout: Layout, work: () => Promise<unknown>): Promise<Delta> {
  const before = await Promise.all(layout.nodes.map(snapshot));
  await work();
  const after = await Promise.all(layout.nodes.map(snapshot));
  return deltaOf(before, after);
}

function deltaOf(before: NodeSnapshot[], after: NodeSnapshot[]): Delta {
  const perNode = after.map((a, i) => a.commands - (before[i] as NodeSnapshot).commands);
  const byName: Record<string, number> = {};
  after.forEach((a, i) => {
    for (const [name, calls] of Object.entries(a.byName)) {
      const d = calls - ((before[i] as NodeSnapshot).byName[name] ?? 0);
      if (d !== 0) byName[name] = (byName[name] ?? 0) + d;
    }
  });
  return {
    perNode,
    total: perNode.reduce((a, b) => a + b, 0),
    byName,
    cpu: after.map((a, i) => a.cpu - (before[i] as NodeSnapshot).cpu),
  };
}

const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/**
 * The prefix of parts 2 and 3: DQ_PREFIX's default. Where partitions (and so topics) land on the
 * masters follows from the prefix: these measure what a deployment with the default gets, each on
 * emptied servers.
 */
const DEPLOYED_PREFIX = "dq";

/** Empties the layout's servers (outside any measurement): a queue of DEPLOYED_PREFIX again. */
async function flush(layout: Layout): Promise<void> {
  for (const node of layout.nodes) await node.call("FLUSHALL");
}

let prefixes = 0;
/** Each queue's prefix: its partitions' masters follow from it. */
const prefixOf = new WeakMap<DelayQueue, string>();
/** A fresh keyspace (or N) for each measurement: nothing left from the one before. */
function queueOf(layout: Layout, named?: string): DelayQueue {
  prefixes += 1;
  const prefix = named ?? `b${layout.key}${prefixes}`;
  const queue = new DelayQueue({ redis: layout.redis, prefix, partitions: layout.partitions });
  prefixOf.set(queue, prefix);
  return queue;
}

/** Scripts (functions) loaded on every master the layout uses, connections open. */
async function warmUp(layout: Layout): Promise<void> {
  const queue = queueOf(layout);
  for (const topic of TOPICS) {
    await queue.add({ topic, id: `warm-${topic}` });
    const [job] = await queue.pop(topic);
    if (job) await queue.finish(job.id, { receipt: job.receipt });
  }
  await tick(queue);
}

type CountRow = { name: string; jobs: number; commands: number; perJob: number; byName: object };

/**
 * A queue whose topics have each seen a job's whole life, and whose index upkeep is done: the
 * counts that follow are of topics in use, without the costs of a topic's first write.
 */
async function usedQueue(
  layout: Layout,
  topics: readonly string[] = TOPICS,
  prefix?: string,
): Promise<DelayQueue> {
  const queue = queueOf(layout, prefix);
  for (const topic of topics) {
    await queue.add({ topic, id: `first-${topic}` });
    const [job] = await queue.pop(topic);
    if (job) await queue.finish(job.id, { receipt: job.receipt });
  }
  await tick(queue);
  return queue;
}

/** Part 1: commands per job, each shape on a queue of its own. */
async function countCommands(layout: Layout): Promise<CountRow[]> {
  const rows: CountRow[] = [];
  const row = (name: string, jobs: number, delta: Delta) => {
    rows.push({
      name,
      jobs,
      commands: delta.total,
      perJob: round(delta.total / jobs, 3),
      byName: delta.byName,
    });
  };

  // One at a time: 48 jobs, 2 in each of the 24 topics; adds, then pops, then finishes by id.
  const one = await usedQueue(layout);
  const jobs = Array.from({ length: 48 }, (_, i) => ({
    topic: TOPICS[i % TOPICS.length] as string,
    id: `one-${i}`,
  }));
  row(
    "add",
    48,
    await measure(layout, async () => {
      for (const job of jobs) await one.add(job);
    }),
  );
  const held: Job[] = [];
  row(
    "pop (1)",
    48,
    await measure(layout, async () => {
      for (const job of jobs) held.push(...(await one.pop(job.topic)));
    }),
  );
  if (held.length !== 48) throw new Error(`popped ${held.length} of 48 jobs`);
  row(
    "finish (by id)",
    48,
    await measure(layout, async () => {
      for (const job of held) await one.finish(job.id, { receipt: job.receipt });
    }),
  );
  row("tick after those 48 ended (index upkeep)", 48, await measure(layout, () => tick(one)));
  row("tick (idle)", 1, await measure(layout, () => tick(one)));

  // The finishAndPop shape: each pop finishes the job before it. 4 jobs in each of the 24
  // topics; counted: the calls that finish one and take one (3 a topic), not a topic's first pop
  // or its last (which finishes one and finds none).
  const chain = await usedQueue(layout);
  const chained = Array.from({ length: 96 }, (_, i) => ({
    topic: TOPICS[i % TOPICS.length] as string,
    id: `chain-${i}`,
  }));
  for (const job of chained) await chain.add(job);
  const previous = new Map<string, Job>();
  for (const topic of TOPICS) {
    const [job] = await chain.pop(topic);
    if (job) previous.set(topic, job);
  }
  let steady = 0;
  const steadyDelta = await measure(layout, async () => {
    for (let k = 0; k < 3; k++) {
      for (const topic of TOPICS) {
        const prev = previous.get(topic) as Job;
        const { jobs: next, finished } = await chain.finishAndPop(topic, [prev]);
        if (!finished[0] || !("finished" in finished[0]) || next.length !== 1) {
          throw new Error(`finishAndPop in ${topic}: ${JSON.stringify(finished)}`);
        }
        previous.set(topic, next[0] as Job);
        steady += 1;
      }
    }
  });
  row("finishAndPop (finish 1, pop 1)", steady, steadyDelta);
  for (const [topic, job] of previous) await chain.finishAndPop(topic, [job]);
  row("tick after those 96 ended (index upkeep)", 96, await measure(layout, () => tick(chain)));

  // Batches of 100: 4 topics, each 100 jobs added in one call, popped in one, finished in one.
  const batchTopics = TOPICS.slice(0, 4);
  const batch = await usedQueue(layout, batchTopics);
  const items = (topic: string) =>
    Array.from({ length: 100 }, (_, i) => ({ topic, id: `${topic}-b${i}`, body: { i } }));
  row(
    "addBatch (100, one topic)",
    400,
    await measure(layout, async () => {
      for (const topic of batchTopics) await batch.addBatch(items(topic));
    }),
  );
  const popped: Job[][] = [];
  row(
    "pop (100)",
    400,
    await measure(layout, async () => {
      for (const topic of batchTopics) popped.push(await batch.pop(topic, { count: 100 }));
    }),
  );
  if (popped.flat().length !== 400) throw new Error(`popped ${popped.flat().length} of 400`);
  row(
    "finishMany (100)",
    400,
    await measure(layout, async () => {
      for (const list of popped) await batch.finishMany(list);
    }),
  );
  row("tick after those 400 ended (index upkeep)", 400, await measure(layout, () => tick(batch)));
  // One batch whose jobs go to all 24 topics: one add call per partition written.
  const spread = await usedQueue(layout);
  row(
    "addBatch (100 over 24 topics)",
    100,
    await measure(layout, () =>
      spread.addBatch(
        Array.from({ length: 100 }, (_, i) => ({
          topic: TOPICS[i % TOPICS.length] as string,
          id: `spread-${i}`,
        })),
      ),
    ),
  );
  return rows;
}

type ShareRow = {
  name: string;
  topics: string;
  jobs: number;
  perNode: number[];
  busiestShare: number;
  /** Where this queue's topics live: how many on each master. */
  topicsPerMaster: number[];
};

/**
 * Part 2: per-master commands with 24 topics used evenly, for both sets of names: one job's life
 * at a time round robin, then 100 a topic in batches; each followed by the tick that does the
 * index upkeep of the jobs that ended.
 */
async function shares(layout: Layout): Promise<ShareRow[]> {
  const out: ShareRow[] = [];
  for (const [label, topics] of [
    ["t0 … t23", TOPICS],
    ["24 words", WORDS],
  ] as const) {
    const row = (name: string, queue: DelayQueue, jobs: number, delta: Delta) => {
      out.push({
        name,
        topics: label,
        jobs,
        perNode: delta.perNode,
        busiestShare: round(Math.max(...delta.perNode) / delta.total, 3),
        topicsPerMaster: placement(
          prefixOf.get(queue) as string,
          layout.partitions,
          layout.nodes.length,
          topics,
        ).topicsPerMaster,
      });
    };
    await flush(layout);
    const one = await usedQueue(layout, topics, DEPLOYED_PREFIX);
    row(
      "one at a time: 240 lives round robin (add, pop, finish by id)",
      one,
      240,
      await measure(layout, async () => {
        for (let i = 0; i < 240; i++) {
          const topic = topics[i % topics.length] as string;
          await one.add({ topic, id: `s-${i}` });
          const [job] = await one.pop(topic);
          if (!job) throw new Error(`nothing popped from ${topic}`);
          await one.finish(job.id, { receipt: job.receipt });
        }
        await tick(one);
      }),
    );
    await flush(layout);
    const batch = await usedQueue(layout, topics, DEPLOYED_PREFIX);
    row(
      "batches: 100 in each topic (addBatch, pop 100, finishMany)",
      batch,
      2400,
      await measure(layout, async () => {
        for (const topic of topics) {
          await batch.addBatch(
            Array.from({ length: 100 }, (_, i) => ({ topic, id: `${topic}-s${i}` })),
          );
          await batch.finishMany(await batch.pop(topic, { count: 100 }));
        }
        await tick(batch);
      }),
    );
  }
  return out;
}

type RateRun = {
  layout: string;
  workers: number;
  lives: number;
  seconds: number;
  livesPerSec: number;
  perNode: number[];
  /** Main-thread CPU seconds each server used during the run. */
  cpu: number[];
  /** CPU seconds the benchmark's own process (client, driver, delayq) used per wall second. */
  clientCpu: number;
  emptyPops: number;
  topicsPerMaster: number[];
  /** The machine's 1-minute load average at the run's end (other work shares the cores). */
  load: number;
};

/** Part 3: one jobs/s run: `workers` workers living jobs for `seconds`. */
async function rate(
  layout: Layout,
  options: ClusterBenchOptions,
  run: number,
  workers = options.workers,
  seconds = options.seconds,
): Promise<RateRun> {
  await flush(layout);
  const queue = await usedQueue(layout, TOPICS, DEPLOYED_PREFIX);
  const deadline = performance.now() + seconds * 1000;
  let lives = 0;
  let emptyPops = 0;
  const before = await Promise.all(layout.nodes.map(snapshot));
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      // Worker w of 8 uses topics w, w + 8, w + 16 in turn: the 24 evenly, none shared at once.
      for (let i = 0; performance.now() < deadline; i++) {
        const topic = TOPICS[(w + workers * i) % TOPICS.length] as string;
        await queue.add({ topic, id: `r${run}-${w}-${i}` });
        const [job] = await queue.pop(topic);
        if (!job) {
          emptyPops += 1;
          continue;
        }
        await queue.finish(job.id, { receipt: job.receipt });
        lives += 1;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const delta = deltaOf(before, await Promise.all(layout.nodes.map(snapshot)));
  return {
    layout: layout.key,
    workers,
    lives,
    seconds: round(elapsed, 2),
    livesPerSec: Math.round(lives / elapsed),
    perNode: delta.perNode,
    cpu: delta.cpu.map((c) => round(c, 3)),
    clientCpu: round((cpu.user + cpu.system) / 1e6 / elapsed, 3),
    emptyPops,
    load: round(loadavg()[0] ?? 0, 1),
    topicsPerMaster: placement(
      prefixOf.get(queue) as string,
      layout.partitions,
      layout.nodes.length,
      TOPICS,
    ).topicsPerMaster,
  };
}

/** Which master holds each of a layout's partitions, and each of the 24 topics. */
function placement(prefix: string, count: number, masters: number, topics: readonly string[]) {
  const layout = partitions(prefix, count);
  const ranges = slotRanges(masters);
  const masterOf = (slot: number) => ranges.findIndex(([from, to]) => slot >= from && slot <= to);
  const partitionMasters = layout.prefixes.map((p) => masterOf(slotOf(p)));
  const topicsPerMaster = new Array(masters).fill(0);
  const topicsPerPartition = new Array(count).fill(0);
  for (const topic of topics) {
    const k = layout.ofTopic(topic);
    topicsPerPartition[k] += 1;
    topicsPerMaster[partitionMasters[k] as number] += 1;
  }
  const partitionsPerMaster = new Array(masters).fill(0);
  for (const m of partitionMasters) partitionsPerMaster[m] += 1;
  return { partitionMasters, partitionsPerMaster, topicsPerMaster, topicsPerPartition };
}

/**
 * How many of 24 topics the busiest master holds, over 500 prefixes (each puts the partitions on
 * the masters its own way), for both sets of names; beside the same for topics placed on
 * partitions uniformly at random (a hash with no pattern), as a yardstick.
 */
function placementOverPrefixes(count: number, masters: number) {
  const spread = (values: number[]) => {
    values.sort((x, y) => x - y);
    const at = (q: number) => values[Math.min(values.length - 1, Math.floor(q * values.length))];
    return { min: values[0], median: at(0.5), p90: at(0.9), max: values[values.length - 1] };
  };
  const busiest = (topics: readonly string[]) => {
    const out: number[] = [];
    for (let p = 0; p < 500; p++) {
      out.push(Math.max(...placement(`p${p}`, count, masters, topics).topicsPerMaster));
    }
    return spread(out);
  };
  let seed = 38;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const uniform: number[] = [];
  for (let p = 0; p < 500; p++) {
    const partitionMasters = placement(`p${p}`, count, masters, []).partitionMasters;
    const perMaster = new Array(masters).fill(0);
    for (let t = 0; t < 24; t++) {
      perMaster[partitionMasters[Math.floor(random() * count)] as number] += 1;
    }
    uniform.push(Math.max(...perMaster));
  }
  const dq = (topics: readonly string[]) =>
    placement(DEPLOYED_PREFIX, count, masters, topics).topicsPerMaster;
  return {
    prefix: { dq: { t: dq(TOPICS), words: dq(WORDS) } },
    busiestOf24: { t: busiest(TOPICS), words: busiest(WORDS), uniform: spread(uniform) },
  };
}

export async function runCluster(options: ClusterBenchOptions) {
  const started = Date.now();
  const loadAtStart = loadavg();
  let server: RedisServer | undefined;
  let cluster: RedisCluster | undefined;
  const closers: (() => unknown)[] = [];
  try {
    // With an append-only file, as the cluster's masters have (dev/redis-cluster.ts): the same
    // writes to disk on both sides.
    server = await startRedisServer({ appendOnly: true });
    cluster = await startRedisCluster();
    const tcp = connectRedis(`redis://127.0.0.1:${server.port}`, { commandTimeoutMs: 10_000 });
    closers.push(() => tcp.quit());
    const clusterRedis = connectCluster(cluster.seeds, { commandTimeoutMs: 10_000 });
    closers.push(() => clusterRedis.quit());
    await clusterRedis.ready();
    const admin = async (port: number) => {
      const connection = await RespConnection.open(port);
      closers.push(() => connection.close());
      return connection;
    };
    const masters = await Promise.all(cluster.nodes.map((node) => admin(node.port)));
    const single = await admin(server.port);
    const layouts: Layout[] = [
      {
        key: "a",
        label: "one redis-server, N = 1",
        redis: tcp,
        partitions: 1,
        nodes: [single],
      },
      { key: "b", label: "cluster, N = 1", redis: clusterRedis, partitions: 1, nodes: masters },
      {
        key: "c",
        label: `cluster, N = ${options.partitions}`,
        redis: clusterRedis,
        partitions: options.partitions,
        nodes: masters,
      },
    ];
    for (const layout of layouts) await warmUp(layout);

    log("cluster: commands per job");
    const counts: Record<string, CountRow[]> = {};
    for (const layout of layouts) counts[layout.key] = await countCommands(layout);

    log("cluster: the busiest master's share, 24 topics");
    const shared: Record<string, ShareRow[]> = {};
    for (const layout of layouts.slice(1)) shared[layout.key] = await shares(layout);

    // Idle: what the servers' own crons (and the cluster's gossip) cost, to set against the runs.
    const idleSeconds = 2;
    const all = [single, ...masters];
    const idleBefore = await Promise.all(all.map(snapshot));
    await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
    const idle = deltaOf(idleBefore, await Promise.all(all.map(snapshot)));
    const idleCpuPerSec = idle.cpu.map((c) => round(c / idleSeconds, 4));

    log(
      `cluster: jobs/s, ${options.rounds} rounds of ${layouts.length} layouts, ${options.seconds} s each`,
    );
    const runs: RateRun[] = [];
    for (let r = 0; r < options.rounds; r++) {
      // Alternating, and each round starting at the next layout: no layout always goes first.
      for (let j = 0; j < layouts.length; j++) {
        const layout = layouts[(r + j) % layouts.length] as Layout;
        const result = await rate(layout, options, runs.length);
        log(
          `  ${layout.label}: ${result.livesPerSec} lives/s, client CPU ${result.clientCpu}, ` +
            `per master ${result.perNode.join(" / ")}, load ${result.load}`,
        );
        runs.push(result);
      }
    }
    log("cluster: one worker a layout (no commands share a read), CPU per life");
    const lone: RateRun[] = [];
    for (const layout of layouts) {
      lone.push(await rate(layout, options, runs.length + lone.length, 1, options.loneSeconds));
    }
    return {
      settings: options,
      counts,
      shares: shared,
      idleCpuPerSec: { server: idleCpuPerSec[0], masters: idleCpuPerSec.slice(1) },
      runs,
      lone,
      placementOverPrefixes: placementOverPrefixes(options.partitions, masters.length),
      summary: summarize(layouts, counts, shared, runs, lone, idleCpuPerSec),
      runSeconds: Math.round((Date.now() - started) / 1000),
      machine: {
        cpu: cpus()[0]?.model ?? "unknown",
        cores: cpus().length,
        node: process.version,
        redis: redisVersion(),
        date: new Date().toISOString(),
        commit: spawnSync("git", ["rev-parse", "--short", "HEAD"], {
          encoding: "utf8",
          cwd: fileURLToPath(new URL("..", import.meta.url)),
        }).stdout.trim(),
        loadAverage: { atStart: loadAtStart, atEnd: loadavg() },
      },
    };
  } finally {
    for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => {});
    await cluster?.stop();
    await server?.stop();
  }
}

/** Per job life in jobs/s runs: commands, and the CPU of the client and of the masters. */
function lifeCosts(run: RateRun, idle: readonly number[]) {
  const busiest = run.perNode.indexOf(Math.max(...run.perNode));
  // Each server's CPU in the run, its idle cron's (and the cluster's gossip) taken off.
  const busy = run.cpu.map((c, i) => Math.max(0, c - (idle[i] ?? 0) * run.seconds));
  const total = run.perNode.reduce((a, b) => a + b, 0);
  const busiestCpu = busy[busiest] ?? 0;
  const us = (cpuSeconds: number) => (cpuSeconds / run.lives) * 1e6;
  return {
    commands: total / run.lives,
    busiestShare: (run.perNode[busiest] ?? 0) / total,
    busiestCommandsPerSec: (run.perNode[busiest] ?? 0) / run.seconds,
    busiestCpuUse: busiestCpu / run.seconds,
    busiestCpuPerLifeUs: us(busiestCpu),
    serversCpuPerLifeUs: us(busy.reduce((a, b) => a + b, 0)),
    clientCpuPerLifeUs: us(run.clientCpu * run.seconds),
    busiestCommandsPerCpuSec: (run.perNode[busiest] ?? 0) / busiestCpu,
  };
}

type LifeCosts = ReturnType<typeof lifeCosts>;

/** Medians over a layout's runs of each cost, and the ceiling its busiest master sets. */
function costsOf(runs: readonly RateRun[], idle: readonly number[]) {
  const costs = runs.map((run) => lifeCosts(run, idle));
  const med = (pick: (c: LifeCosts) => number) => median(costs.map(pick));
  const busiestCpuPerLifeUs = med((c) => c.busiestCpuPerLifeUs);
  return {
    commandsPerLife: round(
      med((c) => c.commands),
      2,
    ),
    busiestShare: round(
      med((c) => c.busiestShare),
      3,
    ),
    busiestCommandsPerSec: Math.round(med((c) => c.busiestCommandsPerSec)),
    busiestCpuUse: round(
      med((c) => c.busiestCpuUse),
      2,
    ),
    busiestCpuPerLifeUs: round(busiestCpuPerLifeUs, 1),
    serversCpuPerLifeUs: round(
      med((c) => c.serversCpuPerLifeUs),
      1,
    ),
    clientCpuPerLifeUs: round(
      med((c) => c.clientCpuPerLifeUs),
      1,
    ),
    busiestCommandsPerCpuSec: Math.round(med((c) => c.busiestCommandsPerCpuSec)),
    // A core for each master and clients that keep up: the busiest master saturates first.
    ceilingLivesPerSec: Math.round(1e6 / busiestCpuPerLifeUs),
  };
}

/** The headline numbers: per-job costs, busiest shares, median jobs/s, and the ceiling on paper. */
function summarize(
  layouts: readonly Layout[],
  counts: Record<string, CountRow[]>,
  shared: Record<string, ShareRow[]>,
  runs: readonly RateRun[],
  lone: readonly RateRun[],
  idleCpuPerSec: readonly number[],
) {
  const per = (key: string, name: string) =>
    counts[key]?.find((row) => row.name === name)?.perJob ?? Number.NaN;
  /** A tick's commands per job ended beyond an idle tick's: the index entries' upkeep. */
  const upkeep = (key: string, name: string) => {
    const row = counts[key]?.find((each) => each.name === name);
    const idle = counts[key]?.find((each) => each.name === "tick (idle)")?.commands ?? Number.NaN;
    return row ? round((row.commands - idle) / row.jobs, 3) : Number.NaN;
  };
  const rows = layouts.map((layout) => {
    const { key } = layout;
    const mine = runs.filter((run) => run.layout === key);
    const rates = mine.map((run) => run.livesPerSec);
    const idle = key === "a" ? [idleCpuPerSec[0] ?? 0] : idleCpuPerSec.slice(1);
    return {
      layout: key,
      label: layout.label,
      commandsPerJob: {
        oneAtATime: round(per(key, "add") + per(key, "pop (1)") + per(key, "finish (by id)"), 2),
        finishAndPop: round(per(key, "add") + per(key, "finishAndPop (finish 1, pop 1)"), 2),
        batches: round(
          per(key, "addBatch (100, one topic)") +
            per(key, "pop (100)") +
            per(key, "finishMany (100)"),
          2,
        ),
        // The tick's commands per job ended, an idle tick's taken off (each job's index entry).
        upkeepOneAtATime: upkeep(key, "tick after those 48 ended (index upkeep)"),
        upkeepFinishAndPop: upkeep(key, "tick after those 96 ended (index upkeep)"),
        upkeepBatches: upkeep(key, "tick after those 400 ended (index upkeep)"),
        idleTick: per(key, "tick (idle)"),
      },
      busiestShare:
        key === "a"
          ? 1
          : Object.fromEntries(
              (shared[key] ?? []).map((row) => [`${row.name}, ${row.topics}`, row.busiestShare]),
            ),
      livesPerSec: {
        runs: rates,
        median: median(rates),
        min: Math.min(...rates),
        max: Math.max(...rates),
      },
      clientCpuMedian: median(mine.map((run) => run.clientCpu)),
      jobsPerSecRuns: costsOf(mine, idle),
      oneWorker: costsOf(
        lone.filter((run) => run.layout === key),
        idle,
      ),
    };
  });
  // The same ceiling counted in commands: one core serves what one redis-server served per CPU
  // second in (a), every command alike; a layout's busiest master carries its share of a life's.
  const capacity = rows[0]?.jobsPerSecRuns.busiestCommandsPerCpuSec ?? Number.NaN;
  return rows.map((row) => ({
    ...row,
    jobsPerSecRuns: {
      ...row.jobsPerSecRuns,
      ceilingByCommands: Math.round(
        capacity / (row.jobsPerSecRuns.commandsPerLife * row.jobsPerSecRuns.busiestShare),
      ),
    },
  }));
}

function table(result: Awaited<ReturnType<typeof runCluster>>): string {
  const lines: string[] = [];
  const [a, b, c] = result.summary;
  const cell = (value: number | string | undefined) => (value === undefined ? "-" : String(value));
  lines.push("| commands per job | " + result.summary.map((s) => s.label).join(" | ") + " |");
  lines.push("|---|---:|---:|---:|");
  const names = (result.counts.a ?? []).map((row) => row.name);
  for (const name of names) {
    const cells = ["a", "b", "c"].map((key) =>
      cell(result.counts[key]?.find((row) => row.name === name)?.perJob),
    );
    lines.push(`| ${name} | ${cells.join(" | ")} |`);
  }
  for (const [label, pick] of [
    ["life one at a time (add, pop, finish)", (s: typeof a) => s?.commandsPerJob.oneAtATime],
    ["life with finishAndPop", (s: typeof a) => s?.commandsPerJob.finishAndPop],
    ["life in batches of 100", (s: typeof a) => s?.commandsPerJob.batches],
    [
      "tick's upkeep per job ended (one at a time; finishAndPop; batches), idle tick off",
      (s: typeof a) =>
        s &&
        `${s.commandsPerJob.upkeepOneAtATime}; ${s.commandsPerJob.upkeepFinishAndPop}; ` +
          `${s.commandsPerJob.upkeepBatches}`,
    ],
  ] as const) {
    lines.push(`| **${label}** | ${[a, b, c].map((s) => cell(pick(s))).join(" | ")} |`);
  }
  lines.push("");
  lines.push(
    "| busiest master's share (commands; topics per master) | topics | cluster, N = 1 | cluster, N = 16 |",
  );
  lines.push("|---|---|---:|---:|");
  for (const row of result.shares.b ?? []) {
    const other = result.shares.c?.find((r) => r.name === row.name && r.topics === row.topics);
    const show = (r: ShareRow | undefined) =>
      r ? `${r.busiestShare} (${r.perNode.join(" / ")}; ${r.topicsPerMaster.join("/")})` : "-";
    lines.push(`| ${row.name} | ${row.topics} | ${show(row)} | ${show(other)} |`);
  }
  lines.push("");
  lines.push(
    "| jobs/s, 8 workers | lives/s median (min–max) | client CPU | cmds/life | busiest share | busiest cmds/s | CPU µs/life: client; masters; busiest | ceiling lives/s (busiest's CPU; commands) |",
  );
  lines.push("|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const s of result.summary) {
    const r = s.jobsPerSecRuns;
    lines.push(
      `| ${s.label} | ${s.livesPerSec.median} (${s.livesPerSec.min}–${s.livesPerSec.max}) | ` +
        `${s.clientCpuMedian} | ${r.commandsPerLife} | ${r.busiestShare} | ` +
        `${r.busiestCommandsPerSec} | ${r.clientCpuPerLifeUs}; ${r.serversCpuPerLifeUs}; ` +
        `${r.busiestCpuPerLifeUs} | ${r.ceilingLivesPerSec}; ${r.ceilingByCommands} |`,
    );
  }
  lines.push("");
  lines.push(
    "| one worker | CPU µs/life: client; masters; busiest | ceiling lives/s (busiest's CPU) |",
  );
  lines.push("|---|---:|---:|");
  for (const s of result.summary) {
    const r = s.oneWorker;
    lines.push(
      `| ${s.label} | ${r.clientCpuPerLifeUs}; ${r.serversCpuPerLifeUs}; ` +
        `${r.busiestCpuPerLifeUs} | ${r.ceilingLivesPerSec} |`,
    );
  }
  const place = result.placementOverPrefixes;
  lines.push("");
  lines.push(
    `Topics per master with prefix "dq": t0 … t23 ${place.prefix.dq.t.join("/")}, ` +
      `24 words ${place.prefix.dq.words.join("/")}. The busiest master's topics of 24 over 500 ` +
      `prefixes (min / median / p90 / max): t0 … t23 ${Object.values(place.busiestOf24.t).join(" / ")}; ` +
      `24 words ${Object.values(place.busiestOf24.words).join(" / ")}; ` +
      `placed at random ${Object.values(place.busiestOf24.uniform).join(" / ")}.`,
  );
  return lines.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string" },
      rounds: { type: "string" },
      quick: { type: "boolean", default: false },
      out: { type: "string" },
    },
  });
  const options = { ...(values.quick ? CLUSTER_QUICK : CLUSTER_DEFAULTS) };
  if (values.seconds !== undefined) options.seconds = Number(values.seconds);
  if (values.rounds !== undefined) options.rounds = Number(values.rounds);
  const result = await runCluster(options);
  const out =
    values.out ??
    fileURLToPath(
      new URL(`./results/cluster-${new Date().toISOString().slice(0, 10)}.json`, import.meta.url),
    );
  writeJson(out, result);
  console.log(table(result));
  log(`done in ${result.runSeconds} s; wrote ${out}`);
}
