// Issue 37's black-box suite for push flow control: `rate` and `parallelism` on push topics of
// `npm run dev` (the worker in wrangler dev, QStash through the stand-in), driven from outside
// over HTTP, delivering to receivers of our own. The stack's cron is kept quiet (DQ_DEV_TICK_MS =
// 1 h): every delivery here comes from the invocation that added the jobs and the follow-up
// claims its loop makes as room frees. Assertions are counts from the receiver's own clock (how
// many unanswered at once, how many within any second, the order), never a duration a slow
// machine could stretch past.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkDelayqSignature,
  eventually,
  type Hit,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
} from "./support";

let stack: Stack;
let rx: Receiver;
const SECRET = "bb-flow-secret-0123456789";

beforeAll(async () => {
  rx = await startReceiver();
  stack = await startStack({ DQ_DEV_TICK_MS: "3600000" });
}, 150_000);

afterAll(async () => {
  await stack?.stop();
  await rx?.close();
}, 60_000);

async function pushTopic(topic: string, push: Record<string, unknown>) {
  const res = await stack.api("PUT", `/v1/topics/${topic}`, { push: { secret: SECRET, ...push } });
  expect(res.status, res.text).toBe(200);
  return res.json.config as { push: Record<string, unknown> };
}

/** Adds `n` jobs of `topic` due 1 s from now, a millisecond apart (in due order), in one batch. */
async function addDue(topic: string, n: number) {
  const at = Date.now() + 1000;
  const jobs = Array.from({ length: n }, (_, i) => ({
    topic,
    id: `${topic}-${String(i).padStart(2, "0")}`,
    runAt: at + i,
    body: { n: i },
  }));
  const res = await stack.api("POST", "/v1/jobs/batch", { jobs });
  expect(res.status, res.text).toBe(200);
  return jobs;
}

type Arrival = { id: string; at: number; dueAt: number };

function arrivals(hits: Hit[]): Arrival[] {
  return hits.map((hit) => {
    checkDelayqSignature(SECRET, hit.headers["delayq-signature"], hit.raw);
    const body = JSON.parse(hit.raw) as { id: string; dueAt: number };
    return { id: body.id, at: hit.at, dueAt: body.dueAt };
  });
}

/** Each job once, none before its due time, in due order (two sent together either way round). */
function expectDelivered(got: Arrival[], jobs: { id: string }[], together: number) {
  expect(got.map((a) => a.id).sort()).toEqual(jobs.map((j) => j.id));
  for (const a of got) expect(a.at, a.id).toBeGreaterThanOrEqual(a.dueAt);
  const place = new Map(jobs.map((job, i) => [job.id, i]));
  for (const [i, a] of got.entries()) {
    expect(Math.abs((place.get(a.id) ?? -99) - i), `${a.id} arrived ${i}th`).toBeLessThan(together);
  }
}

/** The most arrivals within any window of `ms` that starts at an arrival. */
function mostWithin(times: number[], ms: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && (sorted[j + 1] as number) - (sorted[i] as number) < ms) j++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

/**
 * The most requests a receiver that answers each `holdMs` after it arrived held unanswered at
 * once: a request is unanswered from its arrival until its answer leaves.
 */
function mostUnanswered(times: number[], holdMs: number): number {
  return Math.max(...times.map((t) => times.filter((u) => u <= t && t < u + holdMs).length));
}

async function jobStates(ids: string[]) {
  const states: string[] = [];
  for (const id of ids) {
    const res = await stack.api("GET", `/v1/jobs/${id}`);
    states.push(res.json.job?.state);
  }
  return states;
}

describe("push flow control (npm run dev)", () => {
  it("parallelism 2: a slow receiver never holds more than 2 unanswered; all 8 delivered once, in due order, none early", async () => {
    const hold = 400;
    rx.on("/par", { status: 200, holdMs: hold });
    const config = await pushTopic("bb-par", { url: rx.url("/par"), parallelism: 2 });
    expect(config.push.parallelism).toBe(2);
    const jobs = await addDue("bb-par", 8);
    const hits = await rx.waitFor("/par", 8, 30_000);
    const got = arrivals(hits);
    expectDelivered(got, jobs, 2);
    expect(
      mostUnanswered(
        got.map((a) => a.at),
        hold,
      ),
    ).toBeLessThanOrEqual(2);
    const states = await eventually(
      () => jobStates(jobs.map((j) => j.id)),
      (s) => s.every((state) => state === "finished"),
      10_000,
    );
    expect(states.every((state) => state === "finished")).toBe(true);
    expect(rx.hits("/par")).toHaveLength(8);
  }, 60_000);

  it("rate 5: 20 due jobs arrive at most 5 within any second, spread over 4 s and more, in due order, none early", async () => {
    await pushTopic("bb-rate", { url: rx.url("/rate"), rate: 5 });
    const jobs = await addDue("bb-rate", 20);
    const hits = await rx.waitFor("/rate", 20, 30_000);
    const got = arrivals(hits);
    expectDelivered(got, jobs, 2);
    const times = got.map((a) => a.at);
    expect(mostWithin(times, 1000)).toBeLessThanOrEqual(5);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(3800);
    expect(rx.hits("/rate")).toHaveLength(20);
  }, 60_000);

  it("shows the held-back jobs in the topic's stats and in /metrics while the parallelism is full", async () => {
    rx.on("/held", { status: 200, holdMs: 4000 });
    await pushTopic("bb-held", { url: rx.url("/held"), parallelism: 1 });
    const jobs = await addDue("bb-held", 3);
    await rx.waitFor("/held", 1, 20_000);
    const stats = await stack.api("GET", "/v1/topics/bb-held");
    expect(stats.status).toBe(200);
    expect(stats.json.counts.reserved).toBe(1);
    expect(stats.json.heldBack).toBe(2);
    expect(stats.json.heldBackSince).toBe(jobs[1]?.runAt);
    expect(stats.json.oldestDueAt).toBe(jobs[1]?.runAt);
    const metrics = await stack.api("GET", "/metrics");
    expect(metrics.text).toMatch(/^delayq_push_held_back\{topic="bb-held"\} 2$/m);
    expect(metrics.text).toMatch(/^delayq_push_held_back_age_seconds\{topic="bb-held"\} [\d.]+$/m);
    const hits = await rx.waitFor("/held", 3, 30_000);
    expectDelivered(arrivals(hits), jobs, 1);
    const after = await eventually(
      () => stack.api("GET", "/v1/topics/bb-held"),
      (res) => res.json.heldBack === 0,
      10_000,
    );
    expect(after.json.heldBack).toBe(0);
    expect(after.json.heldBackSince).toBeUndefined();
  }, 60_000);

  it("via QStash, parallelism 1: the stand-in never delivers a second job before the first was answered", async () => {
    const hold = 300;
    rx.on("/qpar", { status: 200, holdMs: hold });
    await pushTopic("bb-qpar", { url: rx.url("/qpar"), via: "qstash", parallelism: 1 });
    const jobs = await addDue("bb-qpar", 3);
    const hits = await rx.waitFor("/qpar", 3, 40_000);
    const got = arrivals(hits);
    expectDelivered(got, jobs, 1);
    expect(
      mostUnanswered(
        got.map((a) => a.at),
        hold,
      ),
    ).toBe(1);
    expect(rx.hits("/qpar")).toHaveLength(3);
  }, 60_000);

  it("refuses rate and parallelism outside 1-1000: 400 invalid_request naming the field", async () => {
    for (const [field, value] of [
      ["rate", 0],
      ["rate", 1001],
      ["parallelism", 0],
      ["parallelism", 1001],
      ["parallelism", 1.5],
    ] as const) {
      const res = await stack.api("PUT", "/v1/topics/bb-bad", {
        push: { url: rx.url("/bad"), [field]: value },
      });
      expect(res.status, `${field} ${value}`).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.message).toContain(field);
    }
    const topic = await stack.api("GET", "/v1/topics/bb-bad");
    expect(topic.json.config?.push).toBeUndefined();
  });
});
