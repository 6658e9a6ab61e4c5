// What a /metrics scrape and a dashboard page view cost Redis, counted by redis-server itself
// (INFO commandstats, commands inside scripts included) and at the bridge (REST requests).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CountedStack, startCountedStack } from "../../dev/counted-stack";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
import { DelayQueue } from "../../src/index";
import { testClock } from "../support/queue";

let stack: CountedStack;
beforeAll(async () => {
  stack = await startCountedStack();
});
afterAll(async () => {
  await stack?.stop();
});

/** Commands and requests spent by `work`. */
async function cost(work: () => Promise<unknown>) {
  const commandsBefore = await stack.commands();
  const requestsBefore = stack.bridge.stats().requests.total;
  await work();
  return {
    commands: (await stack.commands()) - commandsBefore,
    requests: stack.bridge.stats().requests.total - requestsBefore,
  };
}

function appOn(prefix: string) {
  const clock = testClock();
  const queue = new DelayQueue({
    redis: stack.client(),
    prefix,
    clock: () => clock.now,
    rawBodies: true,
  });
  const app = createApp({ queue, tokens: parseTokens("ops-token"), log: () => {} });
  return { queue, app, clock };
}

async function ok(res: Response | Promise<Response>) {
  const r = await res;
  expect(r.status).toBe(200);
  return r.text();
}

describe("Redis cost of the operator's routes", () => {
  it("a scrape of 1,000 topics is 10 REST requests and 8 commands per topic", async () => {
    const { queue, app } = appOn("cost-metrics");
    for (let b = 0; b < 10; b++) {
      await queue.addBatch(
        Array.from({ length: 100 }, (_, i) => ({ topic: `t${b}.${i}`, delay: (i % 3) * 30 })),
      );
    }
    await stack.loadScripts();
    const scrape = () =>
      ok(app.request("/metrics", { headers: { authorization: "Bearer ops-token" } }));
    const spent = await cost(scrape);
    expect(spent.requests).toBe(10);
    // Per page: EVALSHA, ZRANGE BYLEX, then per topic (topicStats): MGET of its fields (whose
    // timing says it has no slot lists: no look at them), GET slotted, 4 ZCARDs, one ZRANGE for
    // the oldest due (its jobs are all ready or all delayed, none due: no ZCOUNT), HMGET.
    expect(spent.commands).toBe(10 * (2 + 8 * 100));
    console.log(
      `[ops cost] /metrics, 1,000 topics: ${spent.requests} requests, ${spent.commands} commands`,
    );
  });

  it("a dashboard page view costs its session's read and one REST request (two for a topic's page), whatever the sizes", async () => {
    const { queue, app } = appOn("cost-pages");
    for (let b = 0; b < 10; b++) {
      await queue.addBatch(Array.from({ length: 100 }, (_, i) => ({ topic: `p${b}.${i}` })));
    }
    for (let b = 0; b < 5; b++) {
      await queue.addBatch(
        Array.from({ length: 1000 }, (_, i) => ({ topic: "big", id: `b${b}.${i}`, body: i })),
      );
    }
    await queue.addBatch(Array.from({ length: 60 }, (_, i) => ({ topic: "small", id: `s${i}` })));
    await stack.loadScripts();
    const signIn = await app.request("/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: "ops-token" }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0] as string;
    const view = (path: string) => cost(() => ok(app.request(path, { headers: { cookie } })));

    // Each view reads its session first: one request (EVALSHA, GET), before the page's own.
    const overview = await view("/dashboard");
    expect(overview.requests).toBe(1 + 1);
    // EVALSHA, ZRANGE BYLEX, and 8 per topic (all its jobs ready: see the scrape above).
    expect(overview.commands).toBe(2 + 2 + 8 * 50);

    const big = await view("/dashboard/topics/big?state=ready");
    const small = await view("/dashboard/topics/small?state=ready");
    expect(big.requests).toBe(2 + 1);
    // 50 jobs listed either way: 5,000 jobs in the topic cost no more than 60.
    expect(big.commands).toBe(small.commands);
    // The topic's stats (EVALSHA + 8), then the list (EVALSHA, its upkeep and range, a GET a job).
    expect(big.commands).toBeLessThanOrEqual(2 + 1 + 8 + (1 + 3 + 50));

    // The get script: EVALSHA, GET and, the job waiting, ZSCORE (a pop's reservation is its
    // lease entry alone).
    const job = await view("/dashboard/jobs/b0.1");
    expect(job).toEqual({ requests: 1 + 1, commands: 2 + 3 });
    console.log(
      `[ops cost] dashboard: topics page (50) ${overview.commands} commands; topic page (50 jobs) ` +
        `${big.commands} commands in ${big.requests} requests; job page ${job.commands} command`,
    );
  });
});
