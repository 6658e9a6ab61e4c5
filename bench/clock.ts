// The one clock's price: add, pop and finish of one job at a time on Redis's clock (TIME in the
// scripts) against a clock of the caller's (now as an argument), through the REST bridge to a
// local redis-server: Redis commands per operation (INFO commandstats) and latency, in
// alternating pairs of rounds, medians. `npx tsx bench/clock.ts [rounds] [jobs]`.
import { startCountedStack } from "../dev/counted-stack";
import { DelayQueue } from "../src/index";

const rounds = Number(process.argv[2] ?? 7);
const jobs = Number(process.argv[3] ?? 300);
const stack = await startCountedStack();
await stack.loadScripts();

type Op = "add" | "pop" | "finish";
type Round = Record<Op, { ms: number[]; commands: number }>;

/** One round: `jobs` jobs added, popped and finished one at a time, each operation timed. */
async function round(queue: DelayQueue, topic: string): Promise<Round> {
  const out: Round = {
    add: { ms: [], commands: 0 },
    pop: { ms: [], commands: 0 },
    finish: { ms: [], commands: 0 },
  };
  const timed = async <T>(op: Op, work: () => Promise<T>): Promise<T> => {
    const before = await stack.commands();
    const start = performance.now();
    const result = await work();
    out[op].ms.push(performance.now() - start);
    out[op].commands += (await stack.commands()) - before;
    return result;
  };
  for (let i = 0; i < jobs; i++) {
    await timed("add", () => queue.add({ topic, id: `${topic}.${i}`, body: { i } }));
    const [job] = await timed("pop", () => queue.pop(topic));
    await timed("finish", () => queue.finish(job?.id as string, { receipt: job?.receipt }));
  }
  return out;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

const onRedis = new DelayQueue({ redis: stack.client(), prefix: "bench-redis-clock" });
const onCaller = new DelayQueue({
  redis: stack.client(),
  prefix: "bench-caller-clock",
  clock: Date.now,
});
// Warm both: topics registered, scripts and connections in use.
await round(onRedis, "warm");
await round(onCaller, "warm");
const results: Record<"redis" | "caller", Round[]> = { redis: [], caller: [] };
for (let r = 0; r < rounds; r++) {
  // Alternating pairs, each side first in turn.
  const order = r % 2 === 0 ? (["redis", "caller"] as const) : (["caller", "redis"] as const);
  for (const side of order) {
    results[side].push(await round(side === "redis" ? onRedis : onCaller, `r${r}`));
  }
}
for (const op of ["add", "pop", "finish"] as const) {
  const line = (side: "redis" | "caller") => {
    const medians = results[side].map((x) => median(x[op].ms));
    const commands = results[side].reduce((sum, x) => sum + x[op].commands, 0) / (rounds * jobs);
    return `${side} clock: median ${median(medians).toFixed(3)} ms (rounds ${Math.min(...medians).toFixed(3)}-${Math.max(...medians).toFixed(3)}), ${commands.toFixed(2)} commands`;
  };
  console.log(`${op.padEnd(6)} ${line("redis")} | ${line("caller")}`);
}
await stack.stop();
