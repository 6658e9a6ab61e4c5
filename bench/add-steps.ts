// The CPU of each step delayq's own code takes in one `POST /v1/jobs`, timed alone in a loop (warm,
// one call after another), for the add the single-job benchmark sends: `{"topic":…,"body":{"order":i}}`.
// Their sum set against what an add costs the service beyond a bare Hono handler with one FCALL
// (bench/floor.ts: 0.289 against 0.172 ms on 11-29) says whether any one step is worth cutting.
// The record decoded is one the add script wrote, read back from a redis-server.
// `npx tsx bench/add-steps.ts`
import { startRedisServer } from "../dev/redis-server";
import { parseInput } from "../src/domain/errors";
import { stringifyJson } from "../src/domain/raw-json";
import { parseTokens } from "../src/http/auth";
import { parseJsonText } from "../src/http/body";
import { keepRawBodies } from "../src/http/raw-bodies";
import { AddJob } from "../src/http/schemas";
import { DelayQueue } from "../src/queue";
import { prepareAdd } from "../src/queue/add-batch";
import { keys } from "../src/redis/keys";
import { decodeRecord } from "../src/redis/record";
import { connectRedis } from "../src/redis/tcp";
import { perCall } from "./lib/measure";

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
let sum = 0;
for (const [what, step] of steps) {
  const us = perCall(step, CALLS);
  sum += us;
  console.log(`${what}: ${us.toFixed(2)} µs`);
}
console.log(`all of them: ${sum.toFixed(1)} µs an add`);
process.exit(0);
