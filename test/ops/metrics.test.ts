// GET /metrics through the real app and a real Redis: auth, the counts compared with the API's,
// scoped tokens, the per-scrape cap and its Redis requests, and the process counters.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config";
import { DelayqError } from "../../src/domain/errors";
import { countedStep, createCounters } from "../../src/metrics/counters";
import { createScheduler, drainStep } from "../../src/scheduler";
import { ADMIN, SHOP_A, type TestApp, testApp, testRun } from "../support/app";
import { parseMetrics } from "./prometheus-lint";

async function scrape(t: TestApp, token: string | null = ADMIN) {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const res = await t.app.request("/metrics", { headers });
  return { res, text: await res.text() };
}

/** Every topic the API lists, by paging GET /v1/topics. */
async function apiTopics(t: TestApp, token = ADMIN) {
  const all: { topic: string; counts: Record<string, number>; config: { paused?: boolean } }[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await t.call("GET", `/v1/topics?limit=100${after ? `&after=${after}` : ""}`, {
      token,
    });
    expect(page.status).toBe(200);
    all.push(...page.json.topics);
    if (!page.json.cursor) return all;
    after = page.json.cursor;
  }
}

describe("GET /metrics", () => {
  it("needs a bearer token: none or a wrong one is 401 with the API's error body", async () => {
    const t = testApp();
    const none = await scrape(t, null);
    expect(none.res.status).toBe(401);
    expect(JSON.parse(none.text).error.code).toBe("unauthorized");
    expect(none.res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const wrong = await scrape(t, `${ADMIN}x`);
    expect(wrong.res.status).toBe(401);
    expect(wrong.text).not.toContain("delayq_jobs");
    const ok = await scrape(t);
    expect(ok.res.status).toBe(200);
    expect(ok.res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  });

  it("reports the same counts per topic and state as the API, and the oldest due age", async () => {
    const t = testApp();
    const add = (body: object) => t.call("POST", "/v1/jobs", { body });
    for (let i = 0; i < 4; i++) await add({ topic: "m.orders", id: `r${i}`, body: i });
    for (let i = 0; i < 2; i++) await add({ topic: "m.orders", id: `d${i}`, delay: 60 });
    await add({ topic: "m.mail", id: "far", delay: 3600 });
    await add({ topic: "m.mail", id: "x1", body: "<b>" });
    const popped = await t.call("POST", "/v1/topics/m.orders/pop", { body: { count: 2 } });
    expect(popped.json.jobs).toHaveLength(2);
    await t.call("POST", `/v1/jobs/${popped.json.jobs[0].id}/bury`, { body: {} });
    await t.call("PUT", "/v1/topics/m.mail", { body: { paused: true } });
    t.clock.advance(5_000);

    const metrics = parseMetrics((await scrape(t)).text);
    const topics = await apiTopics(t);
    expect(topics.map((x) => x.topic).sort()).toEqual(["m.mail", "m.orders"]);
    for (const stats of topics) {
      for (const state of ["delayed", "ready", "reserved", "dead"]) {
        expect(metrics.value("delayq_jobs", { topic: stats.topic, state }), stats.topic).toBe(
          stats.counts[state],
        );
      }
      expect(metrics.value("delayq_topic_paused", { topic: stats.topic })).toBe(
        stats.config.paused ? 1 : 0,
      );
    }
    expect(metrics.value("delayq_jobs", { topic: "m.orders", state: "ready" })).toBe(2);
    expect(metrics.value("delayq_jobs", { topic: "m.orders", state: "dead" })).toBe(1);
    // Ready jobs were due when added, 5 s ago by the queue's clock.
    expect(metrics.value("delayq_oldest_due_age_seconds", { topic: "m.orders" })).toBe(5);
    expect(metrics.value("delayq_topics")).toBe(2);
    expect(metrics.value("delayq_metrics_topics_truncated")).toBe(0);
    expect(metrics.family("delayq_jobs")?.type).toBe("GAUGE");
  });

  it("shows a token limited to some topics only those topics and their counters", async () => {
    const counters = createCounters();
    const t = testApp({ counters });
    await t.call("POST", "/v1/jobs", { body: { topic: "shop-a.orders" } });
    await t.call("POST", "/v1/jobs", { body: { topic: "shop-b.orders" } });
    counters.inc("delayq_deliveries_total", { topic: "shop-a.orders", outcome: "done" });
    counters.inc("delayq_deliveries_total", { topic: "shop-b.orders", outcome: "done" });
    const scoped = parseMetrics((await scrape(t, SHOP_A)).text);
    expect(scoped.value("delayq_jobs", { topic: "shop-a.orders", state: "ready" })).toBe(1);
    expect(scoped.value("delayq_jobs", { topic: "shop-b.orders", state: "ready" })).toBe(undefined);
    expect(
      scoped.value("delayq_deliveries_total", { topic: "shop-a.orders", outcome: "done" }),
    ).toBe(1);
    expect(
      scoped.value("delayq_deliveries_total", { topic: "shop-b.orders", outcome: "done" }),
    ).toBe(undefined);
    const admin = parseMetrics((await scrape(t)).text);
    expect(admin.value("delayq_jobs", { topic: "shop-b.orders", state: "ready" })).toBe(1);
  });

  it("reads at most DQ_METRICS_MAX_TOPICS topics, one Redis request per 100, and says so", async () => {
    const t = testApp({ metricsMaxTopics: 150 });
    const jobs = Array.from({ length: 250 }, (_, i) => ({
      topic: `cap.${String(i).padStart(3, "0")}`,
    }));
    expect((await t.call("POST", "/v1/jobs/batch", { body: { jobs } })).status).toBe(200);
    await scrape(t); // loads the scripts, so the next scrape is counted without NOSCRIPT retries
    const before = (await t.stats()).requests.total;
    const capped = parseMetrics((await scrape(t)).text);
    const requests = (await t.stats()).requests.total - before;
    expect(capped.value("delayq_topics")).toBe(150);
    expect(capped.value("delayq_metrics_topics_truncated")).toBe(1);
    expect(capped.value("delayq_metrics_redis_requests")).toBe(2);
    expect(requests).toBe(2);
    expect(capped.value("delayq_jobs", { topic: "cap.149", state: "ready" })).toBe(1);
    expect(capped.value("delayq_jobs", { topic: "cap.150", state: "ready" })).toBe(undefined);

    const all = testApp({ metricsMaxTopics: 1000 });
    await all.call("POST", "/v1/jobs/batch", { body: { jobs } });
    await scrape(all);
    const start = (await all.stats()).requests.total;
    const full = parseMetrics((await scrape(all)).text);
    expect((await all.stats()).requests.total - start).toBe(3);
    expect(full.value("delayq_topics")).toBe(250);
    expect(full.value("delayq_metrics_topics_truncated")).toBe(0);
  });

  it("counts the scheduler's slices and work when the app and the scheduler share counters", async () => {
    const counters = createCounters();
    const t = testApp({ counters });
    await t.call("POST", "/v1/jobs", { body: { topic: "tick.t", delay: 1 } });
    t.clock.advance(1_000);
    const scheduler = createScheduler({ steps: [countedStep(drainStep(t.queue), counters)] });
    await scheduler.tick(testRun({ startedAt: t.clock.now }));
    await scheduler.tick(testRun({ startedAt: t.clock.now }));
    const metrics = parseMetrics((await scrape(t)).text);
    expect(metrics.value("delayq_tick_slices_total", { step: "drain" })).toBe(2);
    expect(metrics.value("delayq_tick_work_total", { step: "drain", kind: "promoted" })).toBe(1);
    expect(metrics.value("delayq_process_start_time_seconds")).toBe(
      Math.floor(counters.startedAt / 1000),
    );
    // A tenant's token: the process's own series tell of every tenant's work, so it sees none.
    counters.inc("delayq_polls_total", { provider: "alipay", outcome: "paid" });
    const tenant = parseMetrics((await scrape(t, SHOP_A)).text);
    expect(tenant.value("delayq_tick_slices_total", { step: "drain" })).toBe(undefined);
    expect(tenant.value("delayq_tick_work_total", { step: "drain", kind: "promoted" })).toBe(
      undefined,
    );
    expect(tenant.value("delayq_polls_total", { provider: "alipay", outcome: "paid" })).toBe(
      undefined,
    );
    // Nor how many pages of topics the scrape read: that counts others' topics too.
    expect(tenant.value("delayq_metrics_redis_requests")).toBe(undefined);
    expect(metrics.value("delayq_metrics_redis_requests")).toBe(1);
    expect(tenant.value("delayq_process_start_time_seconds")).toBe(
      Math.floor(counters.startedAt / 1000),
    );
  });
});

describe("DQ_METRICS_MAX_TOPICS", () => {
  it("defaults to 1000, takes 1-100000, and names itself when wrong, with the other settings", () => {
    const env = { UPSTASH_REDIS_REST_URL: "https://x.upstash.io", UPSTASH_REDIS_REST_TOKEN: "t" };
    const max = (value?: string) =>
      parseConfig({ ...env, DQ_TOKENS: "admin", DQ_METRICS_MAX_TOPICS: value })
        .DQ_METRICS_MAX_TOPICS;
    expect(max()).toBe(1000);
    expect(max("")).toBe(1000);
    expect(max("250")).toBe(250);
    for (const [bad, why] of [
      ["0", "at least 1"],
      ["100001", "at most 100000"],
      ["1.5", "a whole number"],
      ["lots", "a number"],
    ] as const) {
      expect(() => max(bad), bad).toThrow(DelayqError);
      expect(() => max(bad), bad).toThrow(`DQ_METRICS_MAX_TOPICS must be ${why}`);
    }
    // Named in the same message as another setting's mistake: one start tells every problem.
    expect(() => parseConfig({ ...env, DQ_METRICS_MAX_TOPICS: "0" })).toThrow(
      /DQ_TOKENS.*DQ_METRICS_MAX_TOPICS must be at least 1|DQ_METRICS_MAX_TOPICS must be at least 1.*DQ_TOKENS/,
    );
  });
});
