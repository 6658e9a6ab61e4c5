// Push flow control (`rate`, `parallelism`): real receivers, real Redis, the real clock. Each test
// counts what the receiver saw (how many at once, how many within a second, in what order); none
// asserts a duration beyond what the limits themselves force.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type PushApp, type Receiver, startReceiver, testPushApp } from "../support/push";
import { type QStashHarness, startQStashHarness } from "../support/qstash-app";

const SECRET = "test-secret-0123456789";
let receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

async function setup(push: Record<string, unknown>, topic = "f") {
  const receiver = await startReceiver();
  receivers.push(receiver);
  const app = testPushApp();
  const put = await app.call("PUT", `/v1/topics/${topic}`, {
    body: { push: { url: `${receiver.url}/hook`, secret: SECRET, ...push }, ttr: 30 },
  });
  expect(put.status).toBe(200);
  return { ...app, receiver };
}

/** Adds `n` jobs due within the next few ms, in due order (`j00` first), in one batch. */
async function addDue(app: PushApp, n: number, topic = "f") {
  const now = Date.now();
  const jobs = Array.from({ length: n }, (_, i) => ({
    topic,
    id: `j${String(i).padStart(2, "0")}`,
    runAt: now + 50 + i,
    body: i,
  }));
  const res = await app.call("POST", "/v1/jobs/batch", { body: { jobs } });
  expect(res.status).toBe(200);
  return jobs;
}

type Arrival = { id: string; at: number; dueAt: number };

function arrivals(receiver: Receiver): Arrival[] {
  return receiver.received.map((r) => {
    const body = JSON.parse(r.body) as { id: string; dueAt: number };
    return { id: body.id, at: r.at, dueAt: body.dueAt };
  });
}

/** The most arrivals within any window of `ms` (a window starts at an arrival). */
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

describe("push flow control", () => {
  it("parallelism 2: a slow receiver never has more than 2 deliveries unanswered, all delivered once, in due order", async () => {
    const app = await setup({ parallelism: 2 });
    let open = 0;
    let most = 0;
    app.receiver.answer(() => {
      open += 1;
      most = Math.max(most, open);
      setTimeout(() => {
        open -= 1;
      }, 300);
      return { status: 204, delayMs: 300 };
    });
    const jobs = await addDue(app, 8);
    await app.receiver.waitFor(8, 20_000);
    await app.settled();
    const got = arrivals(app.receiver);
    expect(most).toBe(2);
    expect(got.map((a) => a.id).sort()).toEqual(jobs.map((j) => j.id));
    // In due order: two sent together may arrive either way round, no more.
    for (const [place, a] of got.entries()) {
      expect(Math.abs(Number(a.id.slice(1)) - place), a.id).toBeLessThan(2);
    }
    for (const a of got) expect(a.at).toBeGreaterThanOrEqual(a.dueAt);
    for (const job of jobs) {
      const res = await app.call("GET", `/v1/jobs/${job.id}`);
      expect((res.json as { job: { state: string } }).job.state).toBe("finished");
    }
  });

  it("rate 5: 12 due jobs go out at most 5 within any second, in due order, none early", async () => {
    const app = await setup({ rate: 5 });
    const jobs = await addDue(app, 12);
    await app.receiver.waitFor(12, 20_000);
    await app.settled();
    const got = arrivals(app.receiver);
    expect(got.map((a) => a.id)).toEqual(jobs.map((j) => j.id));
    for (const a of got) expect(a.at).toBeGreaterThanOrEqual(a.dueAt);
    expect(
      mostWithin(
        got.map((a) => a.at),
        1000,
      ),
    ).toBeLessThanOrEqual(5);
    // 12 at 5 a second cannot all arrive within two seconds.
    const times = got.map((a) => a.at);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(2000);
    expect(app.receiver.received).toHaveLength(12);
  });

  it("shows held-back jobs in the topic's stats: how many, and the earliest due time among them", async () => {
    const app = await setup({ parallelism: 1 });
    app.receiver.answer(() => "hang");
    const jobs = await addDue(app, 3);
    await app.receiver.waitFor(1);
    const res = await app.call("GET", "/v1/topics/f");
    const stats = res.json as {
      counts: { reserved: number };
      heldBack: number;
      heldBackSince?: number;
      oldestDueAt?: number;
    };
    expect(stats.counts.reserved).toBe(1);
    expect(stats.heldBack).toBe(2);
    expect(stats.heldBackSince).toBe(jobs[1]?.runAt);
    expect(stats.oldestDueAt).toBe(jobs[1]?.runAt);
    const metrics = await app.call("GET", "/metrics");
    const text = String(metrics.json);
    expect(text).toMatch(/^delayq_push_held_back\{topic="f"\} 2$/m);
    expect(text).toMatch(/^delayq_push_held_back_age_seconds\{topic="f"\} \d/m);
    expect(app.receiver.received).toHaveLength(1);
  });

  it("refuses rate and parallelism outside 1-1000 with 400 invalid_request naming the field", async () => {
    const app = testPushApp();
    for (const [field, value] of [
      ["rate", 0],
      ["rate", 1001],
      ["rate", 2.5],
      ["parallelism", 0],
      ["parallelism", 1001],
      ["parallelism", "5"],
    ] as const) {
      const res = await app.call("PUT", "/v1/topics/bad", {
        body: { push: { url: "http://127.0.0.1:9/hook", [field]: value } },
      });
      expect(res.status, `${field}: ${value}`).toBe(400);
      const { error } = res.json as { error: { code: string; message: string } };
      expect(error.code).toBe("invalid_request");
      expect(error.message).toContain(field);
    }
    const ok = await app.call("PUT", "/v1/topics/ok", {
      body: { push: { url: "http://127.0.0.1:9/hook", rate: 1000, parallelism: 1 } },
    });
    expect(ok.status).toBe(200);
    const config = ok.json as { config: { push: { rate: number; parallelism: number } } };
    expect(config.config.push).toMatchObject({ rate: 1000, parallelism: 1 });
  });
});

describe("push flow control through QStash", () => {
  let harness: QStashHarness;
  beforeAll(async () => {
    harness = await startQStashHarness();
  });
  afterAll(async () => {
    await harness?.close();
  });

  it("parallelism 1: delayq publishes the next job only once QStash reported the answer, in due order", async () => {
    const app = testPushApp({ qstash: harness.client(), publicUrl: harness.publicUrl });
    harness.serve(app);
    const receiver = await startReceiver();
    receivers.push(receiver);
    let open = 0;
    let most = 0;
    receiver.answer(() => {
      open += 1;
      most = Math.max(most, open);
      setTimeout(() => {
        open -= 1;
      }, 200);
      return { status: 204, delayMs: 200 };
    });
    const put = await app.call("PUT", "/v1/topics/f", {
      body: {
        push: { url: `${receiver.url}/hook`, via: "qstash", secret: SECRET, parallelism: 1 },
      },
    });
    expect(put.status).toBe(200);
    const jobs = await addDue(app, 3);
    await receiver.waitFor(3, 20_000);
    await app.settled();
    const got = arrivals(receiver);
    expect(most).toBe(1);
    expect(got.map((a) => a.id)).toEqual(jobs.map((j) => j.id));
    for (const a of got) expect(a.at).toBeGreaterThanOrEqual(a.dueAt);
    expect(receiver.received).toHaveLength(3);
  });

  it("a run that ends with jobs held back asks QStash for a fresh run, which goes on: none wait for a tick", async () => {
    // Every invocation may start work for 1.5 s only; rate 2 needs about 3.3 s for 7 jobs.
    const app = testPushApp({
      qstash: harness.client(),
      publicUrl: harness.publicUrl,
      subrequests: 1000,
      runLifetimeMs: 1500,
    });
    harness.serve(app);
    const receiver = await startReceiver();
    receivers.push(receiver);
    const put = await app.call("PUT", "/v1/topics/f", {
      body: { push: { url: `${receiver.url}/hook`, secret: SECRET, rate: 2 } },
    });
    expect(put.status).toBe(200);
    const jobs = await addDue(app, 7);
    await receiver.waitFor(7, 30_000);
    const got = arrivals(receiver);
    expect(got.map((a) => a.id)).toEqual(jobs.map((j) => j.id));
    for (const a of got) expect(a.at).toBeGreaterThanOrEqual(a.dueAt);
    expect(
      mostWithin(
        got.map((a) => a.at),
        1000,
      ),
    ).toBeLessThanOrEqual(2);
    expect(app.logs.some((entry) => entry.event === "flow_continue")).toBe(true);
    await app.settled();
    expect(receiver.received).toHaveLength(7);
  });
});
