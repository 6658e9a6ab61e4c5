// Service CPU per job of batch adds over HTTP: `POST /v1/jobs/batch` with 100 jobs a request (the
// batch benchmark's bodies, due in 5 s), 4 senders, functions/node.ts over TCP (REDIS_URL), warmed
// first; the service process's CPU ÷ jobs, and jobs/s, per repetition and at the median.
// `npx tsx bench/batch-cpu.ts [--batches 800] [--reps 3]`
import { parseArgs } from "node:util";
import { log, median } from "./lib/measure";
import { processCpuMs } from "./lib/processes";
import { makeBody } from "./lib/workloads";
import { openStack } from "./single/stack";

const { values } = parseArgs({
  options: {
    batches: { type: "string", default: "800" },
    reps: { type: "string", default: "3" },
  },
});
const batches = Number(values.batches);
const reps = Number(values.reps);
if (!Number.isInteger(batches) || batches <= 0 || !Number.isInteger(reps) || reps <= 0) {
  throw new Error("--batches and --reps want positive integers");
}
const SIZE = 100;
const SENDERS = 4;

const stack = await openStack("tcp");
const api = stack.apis.http;
const pid = stack.service.child.pid ?? 0;

/** Adds `count` batches to `topic` from SENDERS senders; jobs/s. */
async function send(count: number, topic: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      for (let i = next++; i < count; i = next++) {
        const runAt = Date.now() + 5000;
        const jobs = Array.from({ length: SIZE }, (_, k) => ({
          body: makeBody(i * SIZE + k),
          runAt,
        }));
        await api.addBatch(topic, jobs);
      }
    }),
  );
  return (count * SIZE) / ((performance.now() - started) / 1000);
}

const perJob: number[] = [];
const rates: number[] = [];
try {
  await send(Math.min(300, batches), "batch-cpu-warm");
  for (let rep = 0; rep < reps; rep++) {
    const before = processCpuMs(pid);
    const rate = await send(batches, `batch-cpu-${rep}`);
    const us = ((processCpuMs(pid) - before) * 1000) / (batches * SIZE);
    perJob.push(us);
    rates.push(rate);
    log(`rep ${rep + 1}: ${us.toFixed(1)} µs of service CPU a job, ${rate.toFixed(0)} jobs/s`);
  }
} finally {
  await stack.close();
}
console.log(
  `batch adds of ${SIZE} over HTTP (TCP): ${median(perJob).toFixed(1)} µs of service CPU a job, ` +
    `${median(rates).toFixed(0)} jobs/s at the median of ${reps}`,
);
process.exit(0);
