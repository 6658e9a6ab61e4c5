// One subrequest budget per invocation, for push topics: a run and the follow-up runs its
// deliveries start (receivers giving jobs back due soon) spend from one budget. Real receivers,
// real Redis through the bridge; every fetch counted by the invocation that made it.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type FetchCounter, installFetchCounter, tallyTotal } from "../../bench/lib/subrequests";
import type { RedisClient } from "../../src/redis/runner";
import { createBudget, soon } from "../../src/run";
import { type Receiver, startReceiver, testPushApp } from "../support/push";
import { bridgeStats } from "../support/redis";

const BUDGET = 20;
const JOBS = 4;

let receiver: Receiver;
let fetches: FetchCounter;

beforeAll(async () => {
  receiver = await startReceiver();
  const receiverOrigin = new URL(receiver.url).origin;
  const bridgeOrigin = new URL(inject("bridgeUrl")).origin;
  fetches = installFetchCounter((url) => {
    if (url.origin === bridgeOrigin) return url.pathname.startsWith("/__") ? undefined : "redis";
    return url.origin === receiverOrigin ? "delivery" : undefined;
  });
});

afterAll(async () => {
  fetches?.uninstall();
  await receiver?.close();
});

describe("a push run and its follow-ups", () => {
  it("share the invocation's budget; what it cannot pay for is delivered by the next one, never early", async () => {
    const app = testPushApp({ subrequests: BUDGET });
    const put = await app.call("PUT", "/v1/topics/p", {
      body: { push: { url: `${receiver.url}/hook` }, ttr: 30, maxAttempts: 100 },
    });
    expect(put.status).toBe(200);
    // Every answer gives the job back due in 50 ms: each delivery starts a follow-up run.
    receiver.answer(() => ({ status: 200, body: '{"status":"retry","delay":0.05}' }));
    const dueAt = Date.now() + 300;
    await app.queue.addBatch(
      Array.from({ length: JOBS }, (_, n) => ({ topic: "p", id: `b${n}`, runAt: dueAt })),
    );
    const redisBefore = (await bridgeStats(inject("bridgeUrl"), app.token)).requests.total;
    const tally = fetches.tally("tick");
    const report = await fetches.run(tally, () => app.push({ run: app.newRun(BUDGET) }));
    // Every claim of the run counts: the jobs, then those given back claimed again.
    expect(report.claimed).toBeGreaterThan(JOBS);
    const first = receiver.received.length;
    // The follow-ups ran in this invocation (more deliveries than jobs), and stopped at the budget
    // before their own limit of 5 in a chain (which would make 24).
    expect(first).toBeGreaterThan(JOBS);
    expect(first).toBeLessThan(JOBS * 6);
    expect(tallyTotal(tally), JSON.stringify(tally.counts)).toBeLessThanOrEqual(BUDGET);
    expect(tally.counts.delivery).toBe(first);
    // The bridge saw as many Redis requests as were counted for the invocation.
    const bridgeSaw =
      (await bridgeStats(inject("bridgeUrl"), app.token)).requests.total - redisBefore;
    expect(bridgeSaw).toBe(tally.counts.redis);

    // The next invocations (the next ticks) take the jobs left waiting: each is finished.
    receiver.answer(() => ({ status: 204 }));
    const giveUp = Date.now() + 10_000;
    for (;;) {
      const states = await Promise.all(
        Array.from({ length: JOBS }, async (_, n) => {
          const got = await app.call("GET", `/v1/jobs/b${n}`);
          return got.json.job.state as string;
        }),
      );
      if (states.every((state) => state === "finished")) break;
      expect(Date.now(), `jobs: ${states.join(", ")}`).toBeLessThan(giveUp);
      const next = fetches.tally("next tick");
      await fetches.run(next, () => app.push({ run: app.newRun(BUDGET) }));
      expect(tallyTotal(next)).toBeLessThanOrEqual(BUDGET);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(receiver.received.length).toBeGreaterThan(first);
    // Never early: each delivery at or after the due time its body names.
    for (const got of receiver.received) {
      const { dueAt: due } = JSON.parse(got.body) as { dueAt: number };
      expect(got.at).toBeGreaterThanOrEqual(due);
    }
  }, 30_000);
});

describe("a budget", () => {
  it("lets claims that share it at once each claim their jobs (an outcome pushed to several topics)", async () => {
    receiver.answer(() => ({ status: 204 }));
    const app = testPushApp();
    const topics = ["fan-1", "fan-2", "fan-3"];
    for (const topic of topics) {
      await app.call("PUT", `/v1/topics/${topic}`, {
        body: { push: { url: `${receiver.url}/f` } },
      });
    }
    // Added through the library (no request's own delivery): only the runs below deliver them.
    for (const topic of topics) await app.queue.add({ topic, id: `${topic}-job` });
    const run = app.newRun(1000);
    const report = await app.dispatcher.drain(
      run,
      topics.map((topic) => soon(topic, Date.now())),
    );
    // Before: the first claim held the worst cost of a full batch (nearly all of the budget)
    // while it was answered, and the others found nothing left to claim with.
    expect(report).toMatchObject({ claimed: 3, delivered: 3 });
    const fanned = receiver.received.filter((r) => r.path === "/f");
    expect(new Set(fanned.map((r) => r.headers["delayq-id"]))).toEqual(
      new Set(topics.map((topic) => `${topic}-job`)),
    );
    expect(run.budget.taken()).toBeLessThanOrEqual(1000);
  });

  it("takes only what is left, gives back no more than was taken", () => {
    const budget = createBudget(10);
    expect(budget.take(7)).toBe(true);
    expect(budget.take(4)).toBe(false);
    expect(budget.left()).toBe(3);
    expect(budget.takeUpTo(5)).toBe(3);
    expect(budget.take(1)).toBe(false);
    budget.giveBack(2);
    expect(budget.taken()).toBe(8);
    budget.giveBack(50);
    expect(budget.left()).toBe(10);
  });
});

describe("claims for work due soon", () => {
  it("join the claim that follows while one is answered, per run and topic", async () => {
    // The claim script's calls are held until the test lets them answer.
    let claims = 0;
    const answers: (() => void)[] = [];
    const held = (redis: RedisClient): RedisClient => ({
      ...redis,
      createScript(script) {
        const inner = redis.createScript(script);
        if (!script.includes("claim: reserves push jobs")) return inner;
        return {
          async exec(keys, args) {
            claims += 1;
            await new Promise<void>((resolve) => answers.push(resolve));
            return inner.exec(keys, args);
          },
        };
      },
    });
    const app = testPushApp({ dispatcherRedis: held });
    const one = app.newRun();
    const other = app.newRun();
    const now = Date.now();
    const first = app.dispatcher.drain(one, [soon("t", now)]);
    for (let i = 0; i < 3; i++) void app.dispatcher.drain(one, [soon("t", now)]);
    const apart = app.dispatcher.drain(other, [soon("t", now)]);
    await new Promise((r) => setTimeout(r, 50));
    // One claim under way for each run; the three asks made meanwhile wait for one more.
    expect(claims).toBe(2);
    for (const answer of answers.splice(0)) answer();
    await new Promise((r) => setTimeout(r, 100));
    expect(claims).toBe(3);
    for (const answer of answers.splice(0)) answer();
    await Promise.all([first, apart]);
    expect(claims).toBe(3);
  });
});
