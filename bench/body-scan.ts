// CPU of keeping job bodies as sent, medians of five rounds. On the way in
// (src/http/raw-bodies.ts): the request's JSON parsed alone, and parsed then scanned for the
// bodies' text, for one add and a batch of 100; and the nesting check every body gets before it
// is parsed (src/http/body.ts). On the way out (src/domain/raw-json.ts): an answer
// of 1 and of 100 jobs written with their bodies' text, against JSON.stringify of the same jobs
// with parsed bodies. `npx tsx bench/body-scan.ts`
import { RawJson, stringifyJson } from "../src/domain/raw-json";
import { MAX_JSON_DEPTH, nestsDeeper } from "../src/http/body";
import { keepRawBodies } from "../src/http/raw-bodies";
import { perCall } from "./lib/measure";
import { makeBody } from "./lib/workloads";

const adds = Array.from({ length: 1000 }, (_, i) =>
  JSON.stringify({ topic: "orders", id: crypto.randomUUID(), body: makeBody(i), delay: 5 }),
);
const batch = JSON.stringify({
  jobs: Array.from({ length: 100 }, (_, i) => ({
    topic: "orders",
    id: `job-${i}`,
    body: makeBody(i),
  })),
});

/** Jobs as a pop or a listing answers them; `raw`: the body as its text. */
const jobs = (raw: boolean) =>
  Array.from({ length: 100 }, (_, i) => ({
    id: crypto.randomUUID(),
    topic: "orders",
    state: "reserved",
    body: raw ? new RawJson(JSON.stringify(makeBody(i))) : makeBody(i),
    dueAt: 1_795_811_701_747 + i,
    ttr: 60,
    attempts: 1,
    maxAttempts: 10,
    createdAt: 1_795_811_701_747,
    receipt: "1-1795811701747-1795811701747-3f9a2c",
  }));
const [rawJobs, parsedJobs] = [jobs(true), jobs(false)];

const add = (i: number) => adds[i % adds.length] ?? "";
const rows: [string, number][] = [
  ["one add, JSON.parse", perCall((i) => JSON.parse(add(i)), 100_000)],
  [
    "one add, JSON.parse + keepRawBodies",
    perCall((i) => keepRawBodies("/v1/jobs", add(i), JSON.parse(add(i))), 100_000),
  ],
  ["one add, nesting check", perCall((i) => nestsDeeper(add(i), MAX_JSON_DEPTH), 100_000)],
  ["batch of 100, nesting check", perCall(() => nestsDeeper(batch, MAX_JSON_DEPTH), 2_000)],
  ["batch of 100, JSON.parse", perCall(() => JSON.parse(batch), 2_000)],
  [
    "batch of 100, JSON.parse + keepRawBodies",
    perCall(() => keepRawBodies("/v1/jobs/batch", batch, JSON.parse(batch)), 2_000),
  ],
  [
    "an answer of 1 job, JSON.stringify",
    perCall((i) => JSON.stringify({ jobs: [parsedJobs[i % 100]] }), 100_000),
  ],
  [
    "an answer of 1 job, stringifyJson",
    perCall((i) => stringifyJson({ jobs: [rawJobs[i % 100]] }), 100_000),
  ],
  [
    "an answer of 100 jobs, JSON.stringify",
    perCall(() => JSON.stringify({ jobs: parsedJobs }), 2_000),
  ],
  ["an answer of 100 jobs, stringifyJson", perCall(() => stringifyJson({ jobs: rawJobs }), 2_000)],
];
for (const [what, us] of rows) console.log(`${what}: ${us.toFixed(2)} µs`);
