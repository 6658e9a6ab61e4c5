// Micro-benchmark of the two Redis drivers under the library: job lifecycles (add, pop, finish)
// per second over REST (@upstash/redis, through the Upstash-REST bridge in its own process) and
// over TCP (ioredis, REDIS_URL), on one fresh redis-server. `npx tsx bench/drivers.ts [--n 5000]`
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Redis } from "@upstash/redis";
import { startBridge } from "../dev/bridge";
import { startRedisServer } from "../dev/redis-server";
import { DelayQueue } from "../src/index";
import { REDIS_CLIENT_OPTIONS, type RedisClient } from "../src/redis/runner";
import { connectRedis } from "../src/redis/tcp";

const TOKEN = "bench-drivers";
const CONSUMERS = 8;

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "5000" },
    // Internal: run only the bridge, in this child process, and print its URL.
    "bridge-for": { type: "string" },
  },
});

if (values["bridge-for"] !== undefined) {
  const bridge = await startBridge({ redisPort: Number(values["bridge-for"]), tokens: TOKEN });
  console.log(bridge.url);
  process.on("SIGTERM", () => void bridge.close().finally(() => process.exit(0)));
} else {
  await main(Number(values.n));
}

async function main(jobs: number): Promise<void> {
  const redis = await startRedisServer();
  const { url: bridgeUrl, child } = await bridgeProcess(redis.port);
  const rows: string[][] = [];
  try {
    for (const count of [1, 10]) {
      const rest = new Redis({ url: bridgeUrl, token: TOKEN, ...REDIS_CLIENT_OPTIONS });
      rows.push(["REST", String(count), ...(await lifecycles(rest, jobs, count))]);
      const tcp = connectRedis(`redis://127.0.0.1:${redis.port}`);
      rows.push(["TCP", String(count), ...(await lifecycles(tcp, jobs, count))]);
      await tcp.quit();
    }
  } finally {
    child.kill("SIGTERM");
    await redis.stop();
  }
  console.log(
    `\n${jobs} jobs per run, ${CONSUMERS} consumers, one redis-server, Node ${process.version}`,
  );
  console.log("| driver | pop count | add/s (batches of 100) | pop+finish/s | lifecycles/s |");
  console.log("|---|---|---|---|---|");
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
}

/** Adds `jobs` in batches of 100, then 8 consumers pop `count` at a time and finish each. */
async function lifecycles(redis: RedisClient, jobs: number, count: number): Promise<string[]> {
  const prefix = `bench${crypto.randomUUID().slice(0, 8)}`;
  const queue = new DelayQueue({ redis, prefix });
  // Warm up: scripts loaded, connections open.
  await queue.add({ topic: "warm", id: "warm" });
  await queue.pop("warm");

  const addStart = performance.now();
  for (let b = 0; b < jobs; b += 100) {
    const size = Math.min(100, jobs - b);
    await queue.addBatch(
      Array.from({ length: size }, (_, i) => ({ topic: "t", id: `j${b + i}`, body: { n: b + i } })),
    );
  }
  const addMs = performance.now() - addStart;

  let finished = 0;
  const consumeStart = performance.now();
  await Promise.all(
    Array.from({ length: CONSUMERS }, async () => {
      for (;;) {
        const popped = await queue.pop("t", { count });
        if (popped.length === 0) return;
        for (const job of popped) await queue.finish(job.id, { receipt: job.receipt });
        finished += popped.length;
      }
    }),
  );
  const consumeMs = performance.now() - consumeStart;
  if (finished !== jobs) throw new Error(`finished ${finished} of ${jobs} jobs`);
  const rate = (n: number, ms: number) => String(Math.round((n * 1000) / ms));
  return [rate(jobs, addMs), rate(jobs, consumeMs), rate(jobs, addMs + consumeMs)];
}

/** The bridge in a child process, as Upstash is another machine: it does not share our CPU. */
function bridgeProcess(redisPort: number): Promise<{ url: string; child: ChildProcess }> {
  const self = fileURLToPath(import.meta.url);
  const child = spawn(
    process.execPath,
    ["--import", "tsx", self, "--bridge-for", String(redisPort)],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the bridge exited (code ${code})`)));
    child.stdout?.once("data", (chunk: Buffer) => resolve({ url: chunk.toString().trim(), child }));
  });
}
