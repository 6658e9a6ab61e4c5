// Recurring schedules inside workerd: croner reads crons and IANA zones there (Intl), the PUT
// makes the fires ahead, and the scheduled handler makes the next ones, each once.
import {
  createExecutionContext,
  createScheduledController,
  env,
  waitOnExecutionContext,
} from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../functions/worker";

type Env = Record<string, unknown>;

function isolated(): Env {
  return { ...env, DQ_PREFIX: `ws${crypto.randomUUID().slice(0, 8)}` };
}

async function call(bindings: Env, method: string, path: string, body?: unknown) {
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`http://delayq.test${path}`, {
      method,
      headers: { authorization: "Bearer worker-admin", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
    bindings,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, json: (await res.json()) as any };
}

async function jobIds(bindings: Env, topic: string): Promise<string[]> {
  const ids: string[] = [];
  for (const state of ["delayed", "ready"]) {
    const page = await call(bindings, "GET", `/v1/topics/${topic}/jobs?state=${state}&limit=1000`);
    ids.push(...(page.json.jobs as { id: string }[]).map((job) => job.id));
  }
  return ids.sort();
}

describe("schedules in workerd", () => {
  it("reads a cron in an IANA time zone, DST included", async () => {
    const bindings = isolated();
    const put = await call(bindings, "PUT", "/v1/schedules/ny", {
      cron: "30 2 14 3 *",
      timezone: "America/New_York",
      topic: "ny",
    });
    expect(put.status).toBe(200);
    // 02:30 on 14 March does not exist in New York in 2027 (clocks go 02:00 → 03:00 EDT): cron
    // fires at 03:00 EDT, 07:00 UTC. Years before 2027 (when this runs) say the same of theirs.
    const next = new Date(put.json.schedule.nextRunAt as number);
    expect(next.getUTCHours() === 7 || next.getUTCHours() === 6).toBe(true);
    if (next.getUTCFullYear() === 2027) expect(next.toISOString()).toBe("2027-03-14T07:00:00.000Z");
    const bad = await call(bindings, "PUT", "/v1/schedules/x", {
      cron: "* * * * *",
      timezone: "Asia/Atlantis",
      topic: "t",
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/timezone/);
  });

  it("makes the fires ahead at the put and the next ones at the tick, each once", async () => {
    const bindings = isolated();
    const put = await call(bindings, "PUT", "/v1/schedules/secs", {
      cron: "* * * * * *",
      timezone: "Asia/Shanghai",
      topic: "secs",
      body: { n: 1 },
    });
    expect(put.status).toBe(200);
    const made = await jobIds(bindings, "secs");
    expect(made.length).toBe(80);
    // The scripts run on Redis's clock: 2 s on, the next fire's turn to be made has come. Two
    // ticks at once make the next ones, each once.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await Promise.all(
      [0, 1].map(() =>
        worker.scheduled(
          createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }),
          bindings,
          createExecutionContext(),
        ),
      ),
    );
    const after = await jobIds(bindings, "secs");
    expect(new Set(after).size).toBe(after.length);
    expect(after.length).toBeGreaterThan(made.length);
    const times = after.map((id) => Number(id.split("@")[1])).sort((a, b) => a - b);
    const gaps = times.slice(1).map((time, i) => time - (times[i] as number));
    expect(new Set(gaps)).toEqual(new Set([1000]));
    const got = await call(bindings, "GET", "/v1/schedules/secs");
    expect(got.json.schedule).toMatchObject({ name: "secs", timezone: "Asia/Shanghai" });
  });
});
