// Recurring schedules, black-box: `npm run dev` (the worker in wrangler dev) and a second service
// instance (functions/node.ts on the same bridge and keyspace, ticking every second) driven over
// HTTP only, while this suite also fires the worker's scheduled handler now and then: several
// ticks and two instances at once. Each fire is a job `{name}@{ms}`, made once, never handed out
// before its time, in a pull topic and a push topic; a deleted schedule makes no more.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Receiver, type Stack, sleep, startTwoInstances, type TwoInstances } from "./support";

let two: TwoInstances;
let stack: Stack;
let rx: Receiver;

beforeAll(async () => {
  two = await startTwoInstances("schedules", 3000);
  ({ stack, rx } = two);
}, 180_000);

afterAll(() => two?.stop(), 60_000);

/** Calls the second instance's API. */
const other = (method: string, path: string, body?: unknown) => two.other(method, path, body);

const fireOf = (id: string) => Number(id.slice(id.lastIndexOf("@") + 1));

describe("schedules under npm run dev, two instances ticking", () => {
  // The pull and the push case watch their own schedules, topics and receiver path for 24 s and
  // 20 s of real time: they run side by side (the deletion case waits for both).
  it.concurrent("a pull topic gets each fire once, at or after its time, none missing", async ({
    expect,
  }) => {
    const put = await stack.api("PUT", "/v1/schedules/bb-pull", {
      cron: "*/2 * * * * *",
      timezone: "Asia/Shanghai",
      topic: "bb-sched",
      body: { kind: "pull" },
    });
    expect(put.status).toBe(200);
    const popped: { id: string; at: number; body: unknown }[] = [];
    const until = Date.now() + 24_000;
    let turn = 0;
    while (Date.now() < until) {
      // Both instances pop, alternately, long-polling up to 2 s.
      const reply =
        turn++ % 2 === 0
          ? await stack.api("POST", "/v1/topics/bb-sched/pop", { count: 20, wait: 2 })
          : await other("POST", "/v1/topics/bb-sched/pop", { count: 20, wait: 2 });
      const at = Date.now();
      for (const job of reply.json.jobs as { id: string; receipt: string; body: unknown }[]) {
        popped.push({ id: job.id, at, body: job.body });
        await stack.api("POST", `/v1/jobs/${job.id}/finish`, { receipt: job.receipt });
      }
    }
    expect(popped.length).toBeGreaterThanOrEqual(8);
    const ids = popped.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { id, at, body } of popped) {
      expect(id).toMatch(/^bb-pull@\d+$/);
      expect(fireOf(id) % 2000).toBe(0);
      // Never handed out before its time (the stack runs on this machine's clock).
      expect(at).toBeGreaterThanOrEqual(fireOf(id));
      expect(body).toEqual({ kind: "pull" });
    }
    // None missing between the first and the last.
    const fires = ids.map(fireOf).sort((a, b) => a - b);
    const first = fires[0] as number;
    expect(fires).toEqual(fires.map((_, i) => first + i * 2000));
    const got = await other("GET", "/v1/schedules/bb-pull");
    expect(got.json.schedule).toMatchObject({ name: "bb-pull", timezone: "Asia/Shanghai" });
    expect(got.json.schedule.lastRunAt).toBeGreaterThanOrEqual(fires[fires.length - 1] as number);
    expect(got.json.schedule.nextRunAt).toBeGreaterThan(got.json.schedule.lastRunAt);
  }, 60_000);

  it.concurrent("a push topic gets each fire delivered once, never early", async ({ expect }) => {
    const url = rx.url("/sched-hook");
    const configured = await stack.api("PUT", "/v1/topics/bb-push", { push: { url } });
    expect(configured.status).toBe(200);
    const put = await other("PUT", "/v1/schedules/bb-push", {
      cron: "*/3 * * * * *",
      topic: "bb-push",
      body: { kind: "push" },
    });
    expect(put.status).toBe(200);
    await sleep(20_000);
    const hits = rx.hits("/sched-hook");
    expect(hits.length).toBeGreaterThanOrEqual(4);
    const ids = hits.map((hit) => String(hit.headers["delayq-id"]));
    expect(new Set(ids).size).toBe(ids.length);
    for (const hit of hits) {
      const id = String(hit.headers["delayq-id"]);
      expect(id).toMatch(/^bb-push@\d+$/);
      expect(hit.at).toBeGreaterThanOrEqual(fireOf(id));
      expect(JSON.parse(hit.raw)).toMatchObject({
        id,
        topic: "bb-push",
        dueAt: fireOf(id),
        body: { kind: "push" },
      });
    }
  }, 60_000);

  it("deleted, a schedule makes no more fires; metrics count the ones it made", async () => {
    const metrics = await stack.api("GET", "/metrics");
    expect(metrics.text).toMatch(/delayq_schedule_fires_total\{schedule="bb-pull"\} [1-9]/);
    expect((await stack.api("DELETE", "/v1/schedules/bb-pull")).status).toBe(200);
    expect((await other("DELETE", "/v1/schedules/bb-push")).status).toBe(200);
    const delayed = await stack.api("GET", "/v1/topics/bb-sched/jobs?state=delayed");
    expect(delayed.json.jobs).toEqual([]);
    const before = await stack.api("GET", "/v1/topics/bb-sched");
    await sleep(6000);
    const after = await stack.api("GET", "/v1/topics/bb-sched");
    expect(after.json.counts).toEqual(before.json.counts);
    expect((await stack.api("GET", "/v1/schedules/bb-pull")).status).toBe(404);
  }, 30_000);
});
