// The Worker entry inside workerd: fetch and scheduled, against the bridge to a real redis-server.
import {
  createExecutionContext,
  createScheduledController,
  env,
  waitOnExecutionContext,
} from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import worker from "../../functions/worker";

type Env = Record<string, unknown>;

const SECRET = "AbC123secretpw";

/** The JSON lines written to console.error from now on (the Worker's log), until restore(). */
function errorsLogged() {
  const lines: Record<string, unknown>[] = [];
  const spy = vi.spyOn(console, "error").mockImplementation((line: unknown) => {
    try {
      lines.push(JSON.parse(String(line)));
    } catch {
      lines.push({ text: String(line) });
    }
  });
  return { lines: () => lines, restore: () => spy.mockRestore() };
}

/** The bindings with a key prefix of the test's own, so tests never see each other's keys. */
function isolated(overrides: Env = {}): Env {
  return { ...env, DQ_PREFIX: `w${crypto.randomUUID().slice(0, 8)}`, ...overrides };
}

async function call(
  bindings: Env,
  method: string,
  path: string,
  body?: unknown,
  token: string | null = "worker-admin",
): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`http://delayq.test${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
    bindings,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, json: await res.json() };
}

describe("fetch", () => {
  it("serves /health without a token, and reaches Redis", async () => {
    expect(await call(isolated(), "GET", "/health", undefined, null)).toEqual({
      status: 200,
      json: { status: "ok", redis: "ok" },
    });
  });

  it("runs a job's life: add, pop with a receipt, finish", async () => {
    const bindings = isolated();
    const added = await call(bindings, "POST", "/v1/jobs", {
      topic: "t",
      id: "w1",
      body: { n: 1 },
    });
    expect(added.status).toBe(201);
    const popped = await call(bindings, "POST", "/v1/topics/t/pop", { count: 5 });
    expect(popped.json.jobs).toHaveLength(1);
    const { receipt } = popped.json.jobs[0];
    const finished = await call(bindings, "POST", "/v1/jobs/w1/finish", { receipt });
    expect(finished).toEqual({ status: 200, json: { finished: true } });
    expect((await call(bindings, "GET", "/v1/jobs/w1")).json.job.state).toBe("finished");
  });

  it("opens a dashboard session, shows its pages and ends it at sign-out, inside workerd", async () => {
    const bindings = isolated();
    type Init = { method?: string; headers?: Record<string, string>; body?: URLSearchParams };
    const send = async (path: string, init: Init = {}) => {
      const ctx = createExecutionContext();
      const res = await worker.fetch(
        new Request(`https://delayq.test${path}`, { redirect: "manual", ...init }),
        bindings,
        ctx,
      );
      await waitOnExecutionContext(ctx);
      return { status: res.status, headers: res.headers, text: await res.text() };
    };
    const form = "application/x-www-form-urlencoded";
    const login = await send("/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: "worker-admin" }),
      headers: { "content-type": form },
    });
    expect(login.status).toBe(303);
    const header = login.headers.get("set-cookie") ?? "";
    expect(header).toMatch(/^delayq_dashboard=[A-Za-z0-9_-]{43}; Max-Age=43200;/);
    expect(header).toContain("Secure");
    const cookie = header.split(";")[0] as string;
    const page = await send("/dashboard", { headers: { cookie } });
    expect(page.status).toBe(200);
    const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(page.text)?.[1] as string;
    const out = await send("/dashboard/logout", {
      method: "POST",
      body: new URLSearchParams({ csrf }),
      headers: { cookie, "content-type": form },
    });
    expect(out.status).toBe(303);
    const after = await send("/dashboard", { headers: { cookie } });
    expect(after.status).toBe(303);
    expect(after.headers.get("location")).toBe("/dashboard/login");
  });

  it("refuses a missing token and a token scoped to other topics", async () => {
    const bindings = isolated();
    expect((await call(bindings, "GET", "/v1/topics", undefined, null)).status).toBe(401);
    const other = await call(bindings, "POST", "/v1/jobs", { topic: "t" }, "worker-shop");
    expect(other.status).toBe(403);
    const own = await call(bindings, "POST", "/v1/jobs", { topic: "shop.a" }, "worker-shop");
    expect(own.status).toBe(201);
  });

  it("long-polls inside workerd: a job added during the wait is returned", async () => {
    const bindings = isolated({ DQ_POLL_INTERVAL_MS: "100" });
    const waiting = call(bindings, "POST", "/v1/topics/lp/pop", { wait: 5 });
    await new Promise((r) => setTimeout(r, 200));
    await call(bindings, "POST", "/v1/jobs", { topic: "lp", id: "late" });
    const { json } = await waiting;
    expect(json.jobs.map((j: { id: string }) => j.id)).toEqual(["late"]);
  });

  it("answers 500 misconfigured when the environment is incomplete; the log names the variable", async () => {
    const logged = errorsLogged();
    try {
      const res = await call({ DQ_TOKENS: "x" }, "GET", "/health", undefined, null);
      expect(res.status).toBe(500);
      expect(res.json.error.code).toBe("misconfigured");
      expect(logged.lines()).toContainEqual(
        expect.objectContaining({
          code: "misconfigured",
          requestId: res.json.error.requestId,
          message: expect.stringMatching(/UPSTASH_REDIS_REST_URL is not set/),
        }),
      );
    } finally {
      logged.restore();
    }
  });

  it.each([
    [
      "a Redis TCP URL",
      { UPSTASH_REDIS_REST_URL: `rediss://default:${SECRET}@pleased-cat-12345.upstash.io:6379` },
      /UPSTASH_REDIS_REST_URL is a Redis TCP URL \(rediss:\/\/...\)/,
    ],
    [
      "a DQ_TOKENS entry with a malformed scope",
      { DQ_TOKENS: `worker-admin,tenant:shop.*|${SECRET} x` },
      /^delayq is misconfigured: DQ_TOKENS: entry 2: pattern 2 .* is not a valid topic pattern/,
    ],
  ])(
    "answers every route 500 misconfigured for %s, without its text; the log line names the variable",
    async (_, overrides, named) => {
      const bindings = isolated(overrides);
      const logged = errorsLogged();
      try {
        for (const [method, path] of [
          ["GET", "/health"],
          ["POST", "/v1/jobs"],
          ["GET", "/dashboard"],
          ["POST", "/v1/notify/alipay/shop"],
        ] as const) {
          const ctx = createExecutionContext();
          const res = await worker.fetch(
            new Request(`http://delayq.test${path}`, {
              method,
              headers: { authorization: "Bearer worker-admin", "x-request-id": `probe-${method}` },
            }),
            bindings,
            ctx,
          );
          await waitOnExecutionContext(ctx);
          expect(res.status).toBe(500);
          expect(res.headers.get("content-type")).toMatch(/^application\/json/);
          expect(res.headers.get("x-request-id")).toBe(`probe-${method}`);
          const text = await res.text();
          expect(text).not.toContain(SECRET);
          expect(JSON.parse(text)).toEqual({
            error: {
              code: "misconfigured",
              message: `delayq is misconfigured: the service cannot start; see the logs for request probe-${method}`,
              requestId: `probe-${method}`,
            },
          });
          const line = logged.lines().find((entry) => entry.requestId === `probe-${method}`);
          expect(line?.message).toMatch(named);
          expect(JSON.stringify(line)).not.toContain(SECRET);
        }
      } finally {
        logged.restore();
      }
    },
  );
});

describe("scheduled", () => {
  it("takes back expired leases with the cron's scheduledTime as now", async () => {
    const bindings = isolated();
    await call(bindings, "POST", "/v1/jobs", { topic: "t", id: "lease", ttr: 1 });
    const popped = await call(bindings, "POST", "/v1/topics/t/pop");
    const until = popped.json.jobs[0].reservedUntil as number;

    const early = createScheduledController({ scheduledTime: until - 1, cron: "* * * * *" });
    await worker.scheduled(early, bindings, createExecutionContext());
    expect((await call(bindings, "GET", "/v1/jobs/lease")).json.job.state).toBe("reserved");

    const due = createScheduledController({ scheduledTime: until, cron: "* * * * *" });
    await worker.scheduled(due, bindings, createExecutionContext());
    // Back in the queue, due at the tick's time (ready once the real clock reaches it).
    const job = (await call(bindings, "GET", "/v1/jobs/lease")).json.job;
    expect(job).toMatchObject({ attempts: 1, dueAt: until });
    expect(job.state).not.toBe("reserved");
    expect(job.reservedUntil).toBeUndefined();
  });

  it("fails loudly when misconfigured", async () => {
    const controller = createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" });
    await expect(
      worker.scheduled(controller, { DQ_TOKENS: "x" }, createExecutionContext()),
    ).rejects.toThrow(/UPSTASH_REDIS_REST_TOKEN is not set/);
  });
});
