// Recurring schedules through the real app and the real scheduler (drain, schedules step) on the
// shared bridge, with a clock the test moves: fires made once, due at their times, never early;
// only the latest missed fire after an outage; paused schedules make nothing; scopes; bad input.
import { describe, expect, it } from "vitest";
import { createScriptRunner } from "../../src/redis/runner";
import { createScheduler, drainStep } from "../../src/scheduler";
import { createSchedules } from "../../src/schedules/schedules";
import { schedulesStep } from "../../src/schedules/step";
import { SHOP_A, testApp, testRun } from "../support/app";
import { TEST_PARTITIONS } from "../support/redis";

/** Two instances of the service (apps and schedulers) on one keyspace, one clock. */
function twoInstances() {
  const first = testApp();
  const prefix = first.prefix.slice(0, -1);
  const made: Record<string, number> = {};
  const build = () => {
    const schedules = createSchedules({
      scripts: createScriptRunner(first.redis, prefix, 3_600_000, TEST_PARTITIONS),
      defaults: { ttrMs: 60_000, maxAttempts: 10 },
      count: (name, n) => {
        made[name] = (made[name] ?? 0) + n;
      },
    });
    const scheduler = createScheduler({
      steps: [drainStep(first.queue), schedulesStep(schedules)],
    });
    return { schedules, scheduler };
  };
  const a = build();
  const b = build();
  const app = testApp({ test: first, schedules: a.schedules });
  const tick = async (which: "a" | "b" = "a") => {
    const instance = which === "a" ? a : b;
    return instance.scheduler.tick(
      testRun({ startedAt: first.clock.now, clock: () => first.clock.now }),
    );
  };
  return { ...app, tick, made };
}

/** Ids of a topic's jobs in a state, by the API. */
async function ids(call: ReturnType<typeof testApp>["call"], topic: string, state: string) {
  const res = await call("GET", `/v1/topics/${topic}/jobs?state=${state}&limit=1000`);
  return (res.json.jobs as { id: string }[]).map((job) => job.id).sort();
}

const MINUTE = 60_000;

describe("PUT /v1/schedules/{name}", () => {
  it("makes each fire once, as a job {name}@{ms} due at the fire time, with several ticks and instances", async () => {
    const { call, clock, tick } = twoInstances();
    // 1_800_000_000_000 is 2027-01-15T08:00:00Z: a whole minute.
    const start = clock.now;
    const put = await call("PUT", "/v1/schedules/every-minute", {
      body: { cron: "* * * * *", topic: "reports", body: { report: 1 } },
    });
    expect(put.status).toBe(200);
    expect(put.json.schedule).toMatchObject({
      name: "every-minute",
      cron: "* * * * *",
      timezone: "UTC",
      topic: "reports",
      body: { report: 1 },
      paused: false,
      nextRunAt: start + MINUTE,
      createdAt: start,
    });
    expect(put.json.schedule.lastRunAt).toBeUndefined();
    // The fire due in a minute exists already, waiting.
    expect(await ids(call, "reports", "delayed")).toEqual([`every-minute@${start + MINUTE}`]);
    const seen = new Set<string>();
    for (let step = 1; step <= 10; step++) {
      clock.set(start + step * 30_000 - 1);
      await Promise.all([tick("a"), tick("b"), tick("a")]);
      // Nothing ever ready before its time.
      const popped = await call("POST", "/v1/topics/reports/pop", { body: { count: 100 } });
      for (const job of popped.json.jobs as { id: string; dueAt: number }[]) {
        expect(job.dueAt).toBeLessThanOrEqual(clock.now);
        expect(seen.has(job.id)).toBe(false);
        seen.add(job.id);
        await call("POST", `/v1/jobs/${job.id}/finish`, { body: {} });
      }
    }
    clock.set(start + 5 * MINUTE);
    const last = await call("POST", "/v1/topics/reports/pop", { body: { count: 100 } });
    for (const job of last.json.jobs as { id: string }[]) seen.add(job.id);
    expect([...seen].sort()).toEqual(
      [1, 2, 3, 4, 5].map((n) => `every-minute@${start + n * MINUTE}`).sort(),
    );
    const got = await call("GET", "/v1/schedules/every-minute");
    expect(got.json.schedule.lastRunAt).toBe(start + 5 * MINUTE);
    expect(got.json.schedule.nextRunAt).toBe(start + 6 * MINUTE);
  });

  it("makes a seconds cron's fires ahead, each at its second, none twice", async () => {
    const { call, clock, tick, made } = twoInstances();
    const start = clock.now;
    await call("PUT", "/v1/schedules/ten-s", {
      body: { cron: "*/10 * * * * *", topic: "fast" },
    });
    // Made 80 s ahead: 8 fires.
    expect(made["ten-s"]).toBe(8);
    clock.set(start + 60_000);
    await Promise.all([tick("a"), tick("b")]);
    clock.set(start + 120_000);
    await Promise.all([tick("b"), tick("a")]);
    const all = [
      ...(await ids(call, "fast", "ready")),
      ...(await ids(call, "fast", "delayed")),
    ].sort();
    const expected = Array.from({ length: 20 }, (_, i) => `ten-s@${start + (i + 1) * 10_000}`);
    expect(all).toEqual(expected.sort());
    expect(made["ten-s"]).toBe(20);
  });

  it("reads fields in the time zone, DST as cron does", async () => {
    const { call, clock } = twoInstances();
    // 2027-03-14 is the spring-forward day in New York: 02:30 does not exist, fires at 03:00 EDT.
    clock.set(Date.parse("2027-03-13T12:00:00Z"));
    const put = await call("PUT", "/v1/schedules/ny", {
      body: { cron: "30 2 * * *", timezone: "America/New_York", topic: "ny", paused: true },
    });
    expect(put.json.schedule).toMatchObject({ timezone: "America/New_York", nextRunAt: null });
    clock.set(Date.parse("2027-03-14T06:59:00Z"));
    const resumed = await call("PUT", "/v1/schedules/ny", {
      body: { cron: "30 2 * * *", timezone: "America/New_York", topic: "ny" },
    });
    expect(resumed.json.schedule.nextRunAt).toBe(Date.parse("2027-03-14T07:00:00Z"));
    const shanghai = await call("PUT", "/v1/schedules/sh", {
      body: { cron: "0 8 * * *", timezone: "Asia/Shanghai", topic: "sh" },
    });
    expect(shanghai.json.schedule.nextRunAt).toBe(Date.parse("2027-03-15T00:00:00Z"));
  });

  it("after an outage makes only the latest fire missed", async () => {
    const { call, clock, tick } = twoInstances();
    const start = clock.now;
    await call("PUT", "/v1/schedules/m", { body: { cron: "* * * * *", topic: "out" } });
    // No tick for an hour and a half.
    clock.set(start + 90 * MINUTE + 5_000);
    await Promise.all([tick("a"), tick("b")]);
    const made = [...(await ids(call, "out", "ready")), ...(await ids(call, "out", "delayed"))];
    // The one made at the put, the latest missed (1:30), and the next one ahead.
    expect(made.sort()).toEqual(
      [`m@${start + MINUTE}`, `m@${start + 90 * MINUTE}`, `m@${start + 91 * MINUTE}`].sort(),
    );
  });

  it("a paused schedule makes nothing, and its fires made ahead are taken back", async () => {
    const { call, clock, tick } = twoInstances();
    const start = clock.now;
    await call("PUT", "/v1/schedules/p", { body: { cron: "*/10 * * * * *", topic: "paused" } });
    expect((await ids(call, "paused", "delayed")).length).toBe(8);
    const paused = await call("PUT", "/v1/schedules/p", {
      body: { cron: "*/10 * * * * *", topic: "paused", paused: true },
    });
    expect(paused.json.schedule).toMatchObject({ paused: true, nextRunAt: null });
    expect(await ids(call, "paused", "delayed")).toEqual([]);
    for (let m = 1; m <= 3; m++) {
      clock.set(start + m * MINUTE);
      await tick();
    }
    expect(await ids(call, "paused", "ready")).toEqual([]);
    expect(await ids(call, "paused", "delayed")).toEqual([]);
  });

  it("putting it again unchanged changes nothing; changed, it starts anew", async () => {
    const { call, clock } = twoInstances();
    const start = clock.now;
    const spec = { cron: "*/30 * * * * *", topic: "again", body: { v: 1 } };
    const first = await call("PUT", "/v1/schedules/r", { body: spec });
    clock.advance(1000);
    const second = await call("PUT", "/v1/schedules/r", { body: spec });
    expect(second.json.schedule).toEqual(first.json.schedule);
    expect(await ids(call, "again", "delayed")).toEqual(
      [30_000, 60_000].map((n) => `r@${start + n}`),
    );
    await call("PUT", "/v1/schedules/r", { body: { ...spec, cron: "*/20 * * * * *" } });
    expect(await ids(call, "again", "delayed")).toEqual(
      [20_000, 40_000, 60_000, 80_000].map((n) => `r@${start + n}`).sort(),
    );
    const job = await call("GET", `/v1/jobs/r@${start + 60_000}`);
    expect(job.json.job).toMatchObject({ topic: "again", body: { v: 1 }, dueAt: start + 60_000 });
  });

  it("refuses an invalid cron, time zone or name with 400 invalid_request naming it", async () => {
    const { call } = twoInstances();
    const cases: [string, unknown, RegExp][] = [
      ["/v1/schedules/x", { cron: "* * *", topic: "t" }, /cron/],
      ["/v1/schedules/x", { cron: "61 * * * *", topic: "t" }, /cron/],
      ["/v1/schedules/x", { cron: "* * * * * * *", topic: "t" }, /cron/],
      ["/v1/schedules/x", { cron: "* * * * *", timezone: "Mars/Olympus", topic: "t" }, /timezone/],
      ["/v1/schedules/bad%20name", { cron: "* * * * *", topic: "t" }, /name/],
      ["/v1/schedules/__own", { cron: "* * * * *", topic: "t" }, /name/],
      ["/v1/schedules/x", { cron: "* * * * *" }, /topic/],
    ];
    for (const [path, body, field] of cases) {
      const res = await call("PUT", path, { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.message).toMatch(field);
    }
  });
});

describe("GET, DELETE and scopes", () => {
  it("lists, reads and deletes; a deleted schedule's fires made ahead are taken back", async () => {
    const { call } = twoInstances();
    await call("PUT", "/v1/schedules/b", { body: { cron: "0 * * * *", topic: "x" } });
    await call("PUT", "/v1/schedules/a", { body: { cron: "*/15 * * * * *", topic: "x" } });
    const list = await call("GET", "/v1/schedules");
    expect(list.json.schedules.map((s: { name: string }) => s.name)).toEqual(["a", "b"]);
    const page = await call("GET", "/v1/schedules?limit=1");
    expect(page.json).toMatchObject({ cursor: "a", hasMore: true });
    const rest = await call("GET", "/v1/schedules?cursor=a");
    expect(rest.json.schedules.map((s: { name: string }) => s.name)).toEqual(["b"]);
    expect(rest.json).toMatchObject({ hasMore: false });
    expect(rest.json.cursor).toBeUndefined();
    // The topics' list's other name is taken too; both at once is a 400.
    const after = await call("GET", "/v1/schedules?after=a");
    expect(after.json.schedules.map((s: { name: string }) => s.name)).toEqual(["b"]);
    expect((await call("GET", "/v1/schedules?after=a&cursor=a")).status).toBe(400);
    expect((await ids(call, "x", "delayed")).length).toBe(5);
    expect(await call("DELETE", "/v1/schedules/a")).toMatchObject({
      status: 200,
      json: { deleted: true },
    });
    expect(await ids(call, "x", "delayed")).toEqual([]);
    const gone = await call("GET", "/v1/schedules/a");
    expect(gone).toMatchObject({ status: 404, json: { error: { code: "schedule_not_found" } } });
    expect((await call("DELETE", "/v1/schedules/a")).status).toBe(404);
  });

  it("a topic-limited token manages the schedules of its topics only", async () => {
    const { call } = twoInstances();
    await call("PUT", "/v1/schedules/theirs", { body: { cron: "0 * * * *", topic: "other" } });
    const forbidden = await call("PUT", "/v1/schedules/mine", {
      body: { cron: "0 * * * *", topic: "other" },
      token: SHOP_A,
    });
    expect(forbidden).toMatchObject({ status: 403, json: { error: { code: "forbidden" } } });
    const over = await call("PUT", "/v1/schedules/theirs", {
      body: { cron: "0 * * * *", topic: "shop-a.reports" },
      token: SHOP_A,
    });
    expect(over.status).toBe(403);
    const mine = await call("PUT", "/v1/schedules/mine", {
      body: { cron: "0 * * * *", topic: "shop-a.reports" },
      token: SHOP_A,
    });
    expect(mine.status).toBe(200);
    const list = await call("GET", "/v1/schedules", { token: SHOP_A });
    expect(list.json.schedules.map((s: { name: string }) => s.name)).toEqual(["mine"]);
    expect((await call("GET", "/v1/schedules/theirs", { token: SHOP_A })).status).toBe(404);
    expect((await call("DELETE", "/v1/schedules/theirs", { token: SHOP_A })).status).toBe(404);
    expect((await call("GET", "/v1/schedules/theirs")).status).toBe(200);
  });
});
