// The CPU of each step delayq's own code takes in one `POST /v1/jobs`, timed alone in a loop (warm,
// one call after another), for the add the single-job benchmark sends: `{"topic":…,"body":{"order":i}}`.
// Their sum set against what an add costs the service beyond a bare Hono handler with one FCALL
// (bench/floor.ts: 0.289 against 0.172 ms on 11-29) says whether any one step is worth cutting.
// Then the same steps for a `POST /v1/jobs/batch` of 100 jobs with the batch benchmark's bodies.
// The record decoded is one the add script wrote, read back from a redis-server.
// `npx tsx bench/add-steps.ts`
import { startRedisServer } from "../dev/redis-server";
import { parseInput } from "../src/domain/errors";
import { stringifyJson } from "../src/domain/raw-json";
import { parseTokens } from "../src/http/auth";
import { parseJsonText } from "../src/http/body";
import { keepRawBodies } from "../src/http/raw-bodies";
import { AddJob, BatchBody } from "../src/http/schemas";
import { DelayQueue } from "../src/queue";
import { addArgs, prepareAdd, prepareBatch } from "../src/queue/add-batch";
import { keys } from "../src/redis/keys";
import { decodeRecord } from "../src/redis/record";
import { connectRedis } from "../src/redis/tcp";
import { perCall } from "./lib/measure";
import { makeBody } from "./lib/workloads";

const CALLS = 100_000;
const TOPIC = "single-http-1";
const texts = Array.from({ length: 1000 }, (_, i) =>
  JSON.stringify({ topic: TOPIC, body: { order: i } }),
);
const text = (i: number) => texts[i % texts.length] as string;
const values = texts.map((t) => parseJsonText(t));
const value = (i: number) => values[i % values.length];

const server = await startRedisServer();
const redis = connectRedis(`redis://127.0.0.1:${server.port}`);
let record: string;
try {
  const queue = new DelayQueue({ redis, prefix: "steps" });
  const { job } = await queue.add({ topic: TOPIC, body: { order: 7 } });
  record = String(await redis.ioredis.get(keys("steps").job(job.id)));
} finally {
  await redis.quit();
  await server.stop();
}
const now = Date.now();
const job = decodeRecord(record, now, true);
const tokens = parseTokens("bench-api");
await tokens.identify("bench-api");

const steps: [string, (i: number) => unknown][] = [
  ["the body's nesting checked and parsed (parseJsonText)", (i) => parseJsonText(text(i))],
  [
    "the job's body kept as sent (keepRawBodies)",
    (i) => keepRawBodies("/v1/jobs", text(i), value(i)),
  ],
  ["the route's schema (AddJob)", (i) => parseInput(AddJob, value(i), "request body")],
  [
    "the bearer token, remembered (identify)",
    () => tokens.identify(/^Bearer\s+(\S+)\s*$/i.exec("Bearer bench-api")?.[1] ?? ""),
  ],
  [
    "the queue's checks and the script's fields (prepareAdd)",
    (i) => prepareAdd(value(i), now, 1 << 20, () => {}),
  ],
  ["the script's record decoded (decodeRecord)", () => decodeRecord(record, now, true)],
  ["the answer written (stringifyJson)", () => stringifyJson({ created: true, job })],
];
const batchText = JSON.stringify({
  jobs: Array.from({ length: 100 }, (_, i) => ({ topic: TOPIC, body: makeBody(i), delay: 5 })),
});
const batchValue = parseJsonText(batchText) as { jobs: unknown[] };
const prepared = prepareBatch(batchValue.jobs, now, 1 << 20, () => {}).prepared;
const DEFAULTS = ["", "", ""] as const;
const jobs = Array.from({ length: 100 }, () => ({ created: true, job }));
const batchSteps: [string, (i: number) => unknown][] = [
  ["the body's nesting checked and parsed", () => parseJsonText(batchText)],
  [
    "the jobs' bodies kept as sent",
    () => keepRawBodies("/v1/jobs/batch", batchText, parseJsonText(batchText)),
  ],
  ["the route's schema (BatchBody)", () => parseInput(BatchBody, batchValue, "request body")],
  [
    "the queue's checks and the fields (prepareBatch)",
    () => prepareBatch(batchValue.jobs, now, 1 << 20, () => {}),
  ],
  ["the script's arguments (addArgs)", () => addArgs(DEFAULTS, prepared)],
  [
    "the 100 records decoded",
    () => {
      for (let k = 0; k < 100; k++) decodeRecord(record, now, true);
    },
  ],
  ["the answer written", () => stringifyJson({ results: jobs })],
];

for (const [title, list, calls] of [
  ["One add", steps, CALLS],
  ["A batch of 100", batchSteps, CALLS / 100],
] as const) {
  console.log(title);
  let sum = 0;
  for (const [what, step] of list) {
    const us = perCall(step, calls);
    sum += us;
    console.log(`  ${what}: ${us.toFixed(2)} µs`);
  }
  console.log(`  all of them: ${sum.toFixed(1)} µs`);
}
process.exit(0);
