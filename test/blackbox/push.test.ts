// Issue 10's black-box suite: push topics of `npm run dev` (the worker in wrangler dev, QStash
// through the stand-in) driven from outside over HTTP, delivering to receivers of our own; every
// delayq-signature checked with node:crypto, every Upstash-Signature with the real Receiver.
//
// The stack's own cron is kept quiet (DQ_DEV_TICK_MS = 1 h) and this suite fires the scheduled
// handler itself (wrangler dev's /__scheduled, as the stack's cron does) at the moments it
// chooses. That keeps the suite under a minute while exercising each path a once-a-minute cron
// would take: direct jobs due within 25 s (QStash: 65 s) are delivered (published) by the request
// that added them, and retried ones by the invocation that settled them, with no tick at all;
// jobs further out are claimed by the tick before their due time (what the real cron does for
// delays of 60 s and more; here direct ones due 25-27 s out, and QStash ones added while their
// topic was still pulled) and delivered at it; a direct job due 25-60 s after its add with no
// tick in between is delivered on time by a run its add asked QStash for (its wave's).
import { loadavg } from "node:os";
import { Receiver as QStashReceiver } from "@upstash/qstash";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkDelayqSignature,
  eventually,
  type Hit,
  lagProbe,
  type Receiver,
  type Stack,
  sleep,
  startReceiver,
  startStack,
  summary,
} from "./support";

let stack: Stack;
let rx: Receiver;
let qstash: QStashReceiver;
const suiteStarted = Date.now();

/** Direct deliveries of jobs due within this long of their add come from the add itself. */
const DIRECT_WINDOW_S = 25;
/** Jobs timed per mode on the request's own path. */
const TIMED_PER_MODE = 100;
/** The budget: never early, p99 lateness at most this (ms). */
const LATENESS_BUDGET_MS = 1000;
/**
 * QStash's own delivery latency after the whole second it was asked for, allowed on top of the
 * budget in qstash mode (QStash has a granularity of one second; see the timing test).
 */
const QSTASH_LATENCY_ALLOWANCE_MS = 500;
/** A stall of this process's own timers beyond which timing is reported, not judged (ms). */
const OVERLOADED_LAG_MS = 250;
const SECRET = "bb-secret-0123456789abcdef";

type Mode = "direct" | "qstash";
const MODES: Mode[] = ["direct", "qstash"];

beforeAll(async () => {
  rx = await startReceiver();
  stack = await startStack({ DQ_DEV_TICK_MS: "3600000" });
  qstash = new QStashReceiver({
    currentSigningKey: stack.info.qstashCurrentSigningKey,
    nextSigningKey: stack.info.qstashNextSigningKey,
  });
}, 150_000);

afterAll(async () => {
  const restarted = await stack?.restarted();
  if (restarted) console.warn(`the worker restarted during the suite (isolate ${restarted})`);
  await stack?.stop();
  await rx?.close();
  const up = stack ? `, the stack up in ${(stack.startMs / 1000).toFixed(1)} s` : "";
  console.log(`push suite: ${((Date.now() - suiteStarted) / 1000).toFixed(1)} s in all${up}`);
}, 60_000);

/** PUTs a push topic, answering the stored config; the PUT must succeed. */
async function pushTopic(topic: string, push: Record<string, unknown>, extra = {}) {
  const res = await stack.api("PUT", `/v1/topics/${topic}`, { ...extra, push });
  expect(res.status, res.text).toBe(200);
  return res.json.config as { push: Record<string, unknown> };
}

async function add(job: Record<string, unknown>) {
  const res = await stack.api("POST", "/v1/jobs", job);
  expect(res.status, res.text).toBe(201);
  return res.json.job as { id: string; dueAt: number; state: string };
}

async function getJob(id: string) {
  const res = await stack.api("GET", `/v1/jobs/${id}`);
  expect(res.status, res.text).toBe(200);
  return res.json.job as Record<string, any>;
}

/** Why a job was not delivered, as far as one can tell from outside: its record, and the stack's errors. */
async function undelivered(id: string) {
  const job = await stack.api("GET", `/v1/jobs/${id}`);
  const errors = stack
    .output()
    .split("\n")
    .filter((line) => /error|warn|restart/i.test(line))
    .slice(-20);
  const restarted = await stack.restarted();
  return [
    `${id}: not delivered; now ${Date.now()}; its record: ${job.text}`,
    `the worker restarted: ${restarted ?? "no"}`,
    ...errors,
  ].join("\n");
}

/** Polls a job until its state is one of `states`. */
function jobIn(id: string, states: string[], timeoutMs = 8000) {
  return eventually(
    () => getJob(id),
    (job) => states.includes(job.state),
    timeoutMs,
  );
}

/** A delivery's shape, signature (ours, and QStash's when it came through QStash) and headers. */
async function checkDelivery(hit: Hit, mode: Mode, secret: string, url: string) {
  expect(hit.method).toBe("POST");
  expect(hit.headers["content-type"]).toMatch(/^application\/json/);
  const t = checkDelayqSignature(secret, hit.headers["delayq-signature"], hit.raw);
  const delivery = JSON.parse(hit.raw);
  expect(Object.keys(delivery)).toEqual(["id", "topic", "body", "attempt", "dueAt"]);
  expect(hit.headers["delayq-id"]).toBe(delivery.id);
  expect(hit.headers["delayq-topic"]).toBe(delivery.topic);
  expect(hit.headers["delayq-attempt"]).toBe(String(delivery.attempt));
  // Signed when sent (direct) or when published (QStash: before the due time, never after).
  expect(t).toBeLessThanOrEqual(Math.ceil(hit.at / 1000));
  expect(t).toBeGreaterThan(Math.floor(hit.at / 1000) - 70);
  if (mode === "direct") {
    expect(hit.headers["upstash-signature"]).toBeUndefined();
    expect(t).toBeGreaterThanOrEqual(Math.floor(hit.at / 1000) - 2);
  } else {
    const signature = String(hit.headers["upstash-signature"]);
    expect(await qstash.verify({ signature, body: hit.raw, url })).toBe(true);
    // The same token for another destination, or another body, does not verify.
    await expect(
      qstash.verify({ signature, body: hit.raw, url: `${url}-elsewhere` }),
    ).rejects.toThrow();
    await expect(qstash.verify({ signature, body: `${hit.raw} `, url })).rejects.toThrow();
    expect(hit.headers["upstash-message-id"]).toMatch(/\S/);
  }
  return delivery as { id: string; topic: string; body: unknown; attempt: number; dueAt: number };
}

// ---------------------------------------------------------------------------------------------
// Timing: the runs are scheduled first, the other tests run while they fall due, and the last
// test collects them.

/** A timed job; for the retried ones `dueAt` is their first attempt's, `delay` their retry's. */
type TimedJob = {
  id: string;
  mode: Mode;
  path: string;
  dueAt: number;
  delay: number;
  list: "request" | "tick" | "retry" | "gap";
};
const timed: Record<"request" | "tick" | "retry" | "gap", TimedJob[]> = {
  request: [],
  tick: [],
  retry: [],
  gap: [],
};
/** Lateness of the gap jobs (delivered by a run asked for through QStash), ms. */
const gapLateness: number[] = [];
/** When the suite fired the scheduled handler (it has no cron of its own here). */
const ticks: number[] = [];
/** When each job of the notice tests died (its endedAt). */
const diedAt = new Map<string, number>();

async function tick() {
  ticks.push(Date.now());
  await stack.tick();
}
let timingStarted = 0;
let probe: ReturnType<typeof lagProbe> | undefined;

/** Delays (s) spread over [from, to] with a fraction of a second each, so due times fall anywhere in a second. */
function spread(n: number, from: number, to: number): number[] {
  return Array.from({ length: n }, (_, i) => {
    const base = from + ((to - from) * i) / Math.max(1, n - 1);
    return Math.round((base + (((i * 7919) % 1000) / 1000) * 0.9) * 1000) / 1000;
  }).map((d) => Math.min(d, to));
}

describe("push topics from outside: timing runs (scheduled now, collected last)", () => {
  it("schedules direct and QStash jobs at spread delays, and jobs only a tick can deliver", async () => {
    timingStarted = Date.now();
    probe = lagProbe();
    for (const mode of MODES) {
      await pushTopic(`timing-${mode}`, {
        url: rx.url(`/timing-${mode}`),
        via: mode,
        secret: SECRET,
      });
      // Retried by their receivers on the first attempt, to come again 3-20 s later.
      await pushTopic(`timing-retry-${mode}`, {
        url: rx.url(`/timing-retry-${mode}`),
        via: mode,
        secret: SECRET,
      });
      rx.on(`/timing-retry-${mode}`, (hit) => {
        const { attempt, body } = JSON.parse(hit.raw);
        return attempt === 1 ? { body: { status: "retry", delay: body.delay } } : { status: 204 };
      });
    }
    await pushTopic("timing-tick-direct", { url: rx.url("/timing-tick-direct"), secret: SECRET });
    await pushTopic("timing-gap", { url: rx.url("/timing-gap"), secret: SECRET });

    type Planned = { list: TimedJob["list"]; topic: string; mode: Mode; id: string; delay: number };
    const planned: Planned[] = [];
    const plan = (list: TimedJob["list"], topic: string, mode: Mode, delays: number[]) => {
      delays.forEach((delay, i) => {
        planned.push({ list, topic, mode, id: `${topic}-${i}`, delay });
      });
    };
    // Within the direct window: delivered by the request that adds them; QStash: published by
    // it. Enough samples that p99 is not just the slowest one.
    plan("request", "timing-direct", "direct", spread(TIMED_PER_MODE, 0, DIRECT_WINDOW_S - 1));
    plan("request", "timing-qstash", "qstash", spread(TIMED_PER_MODE, 0, 26));
    // Only a tick before their due time can deliver these: direct ones beyond the direct window;
    // QStash ones (whose window is 65 s) added while their topic still was a pull topic.
    plan("tick", "timing-tick-direct", "direct", spread(5, DIRECT_WINDOW_S + 0.3, 27));
    plan("tick", "timing-tick-qstash", "qstash", spread(8, 5, 20));
    plan("retry", "timing-retry-direct", "direct", spread(6, 3, 20));
    plan("retry", "timing-retry-qstash", "qstash", spread(6, 3, 20));
    // Added in batches (each a request that writes jobs due soon), every batch a mix of delays;
    // the retried ones are due at once and carry the delay their receiver asks for.
    const batches: Planned[][] = Array.from({ length: 12 }, () => []);
    planned.forEach((job, i) => {
      batches[i % batches.length]?.push(job);
    });
    await Promise.all(
      batches.map(async (batch) => {
        const res = await stack.api("POST", "/v1/jobs/batch", {
          jobs: batch.map(({ list, topic, id, delay }) =>
            list === "retry"
              ? { topic, id, body: { id, delay } }
              : { topic, id, delay, body: { id, delay } },
          ),
        });
        expect(res.status, res.text).toBe(200);
        batch.forEach((job, i) => {
          const answer = res.json.results[i];
          expect(answer?.created, JSON.stringify(answer)).toBe(true);
          timed[job.list].push({
            id: job.id,
            mode: job.mode,
            path: `/${job.topic}`,
            dueAt: answer.job.dueAt,
            delay: job.delay,
            list: job.list,
          });
        });
      }),
    );
    await pushTopic("timing-tick-qstash", {
      url: rx.url("/timing-tick-qstash"),
      via: "qstash",
      secret: SECRET,
    });
    // The cron fires once, before any of those is due: it claims (direct) or publishes (QStash)
    // everything due within its horizon, and delivers each at its due time.
    await tick();
    // Added after that tick, due 25-26 s out: no tick comes before they are due.
    for (const [i, d] of [25.4, 26].entries()) {
      const job = await add({ topic: "timing-gap", id: `timing-gap-${i}`, delay: d, body: i });
      timed.gap.push({
        id: job.id,
        mode: "direct",
        path: "/timing-gap",
        dueAt: job.dueAt,
        delay: d,
        list: "gap",
      });
    }
    expect(timed.request).toHaveLength(2 * TIMED_PER_MODE);
  });
});

describe("push topics from outside: config", () => {
  it("shows a generated secret once, then masked; never echoes a caller's secret", async () => {
    const url = rx.url("/cfg");
    const first = await stack.api("PUT", "/v1/topics/cfg-generated", { push: { url } });
    expect(first.status).toBe(200);
    const secret = first.json.config.push.secret as string;
    expect(secret.length).toBeGreaterThanOrEqual(16);
    expect(first.json.config.push).toMatchObject({ url, via: "direct", timeout: 15 });
    const read = await stack.api("GET", "/v1/topics/cfg-generated");
    expect(read.status).toBe(200);
    expect(read.json.config.push.secret).toBe(`…${secret.slice(-4)}`);
    expect(read.text).not.toContain(secret);
    // A PUT without a secret keeps the stored one: deliveries still verify with it.
    const again = await stack.api("PUT", "/v1/topics/cfg-generated", { push: { url, timeout: 5 } });
    expect(again.json.config.push.secret).toBe(`…${secret.slice(-4)}`);
    await add({ topic: "cfg-generated", id: "cfg-kept-secret", body: 1 });
    const [hit] = await rx.waitFor("/cfg", 1, 5000);
    expect(hit).toBeDefined();
    checkDelayqSignature(secret, hit?.headers["delayq-signature"], hit?.raw ?? "");

    const given = await stack.api("PUT", "/v1/topics/cfg-given", {
      push: { url, secret: SECRET, via: "qstash" },
    });
    expect(given.status).toBe(200);
    expect(given.json.config.push).toMatchObject({ via: "qstash", secret: `…${SECRET.slice(-4)}` });
    expect(given.text).not.toContain(SECRET);
    const listed = await stack.api("GET", "/v1/topics/cfg-given");
    expect(listed.text).not.toContain(SECRET);
  });

  it("refuses bad push configs with invalid_request naming the field, and keeps the old one", async () => {
    const url = rx.url("/cfg-bad");
    await pushTopic("cfg-bad", { url, secret: SECRET, timeout: 7 });
    const before = (await stack.api("GET", "/v1/topics/cfg-bad")).json.config;
    const bad: [string, unknown][] = [
      ["url", { url: "ftp://shop.example/hook" }],
      ["url", { url: "hooks/delayq" }],
      ["url", {}],
      ["via", { url, via: "pigeon" }],
      ["secret", { url, secret: "short" }],
      ["timeout", { url, timeout: 0 }],
      ["timeout", { url, timeout: 61 }],
      ["timeout", { url, timeout: 2.5 }],
      ["timeout", { url, timeout: "15" }],
      ["failureUrl", { url, failureUrl: "mailto:ops@shop.example" }],
      [
        "headers",
        {
          url,
          headers: Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-H${i}`, "v"])),
        },
      ],
      ["headers", { url, headers: { "Content-Type": "text/plain" } }],
      ["headers", { url, headers: { "delayq-id": "forged" } }],
      ["headers", { url, headers: { "Upstash-Forward-X": "x" } }],
      ["headers", { url, headers: { "X-Bad": "two\r\nlines" } }],
      ["headers", { url, headers: { "bad name": "v" } }],
      ["retries", { url, retries: 3 }],
      ["push", "https://shop.example/hook"],
    ];
    for (const [field, push] of bad) {
      const res = await stack.api("PUT", "/v1/topics/cfg-bad", { push });
      expect(res.status, `${JSON.stringify(push)}: ${res.text}`).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.message, JSON.stringify(push)).toContain(field);
      expect(res.text).not.toMatch(/\n\s+at |\.ts:\d+/);
    }
    const malformed = await stack.api("PUT", "/v1/topics/cfg-bad", '{"push": {"url": ');
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.code).toBe("invalid_request");
    expect((await stack.api("GET", "/v1/topics/cfg-bad")).json.config).toEqual(before);
  });

  it("refuses pop on a push topic (409 push_topic), in the command protocol too; push: null pulls again", async () => {
    await pushTopic("cfg-pull", { url: rx.url("/cfg-pull"), secret: SECRET });
    const pop = await stack.api("POST", "/v1/topics/cfg-pull/pop", {});
    expect(pop.status).toBe(409);
    expect(pop.json.error.code).toBe("push_topic");
    const command = await stack.api("POST", "/v1/command", { command: "pop", topic: "cfg-pull" });
    expect(command.json).toMatchObject({ success: false });
    expect(command.json.error).toMatch(/^push_topic/);
    const unpushed = await stack.api("PUT", "/v1/topics/cfg-pull", { push: null });
    expect(unpushed.status).toBe(200);
    expect(unpushed.json.config.push).toBeUndefined();
    await add({ topic: "cfg-pull", id: "pulled-again", body: "p" });
    const popped = await stack.api("POST", "/v1/topics/cfg-pull/pop", {});
    expect(popped.status).toBe(200);
    expect(popped.json.jobs.map((j: { id: string }) => j.id)).toEqual(["pulled-again"]);
    await sleep(300);
    expect(rx.hits("/cfg-pull")).toHaveLength(0);
  });
});

describe("push topics from outside: deliveries and settlement (no cron)", () => {
  it("delivers the documented shape, signed with the topic's secret, with its headers, in both modes", async () => {
    for (const mode of MODES) {
      const path = `/shape-${mode}`;
      const url = rx.url(path);
      await pushTopic(`shape-${mode}`, {
        url,
        via: mode,
        secret: SECRET,
        headers: { "X-Api-Key": "k_live_123", "X-Tenant": "shop-7" },
      });
      // A body JSON.stringify would re-write (spacing, a big number, unicode): sent as stored.
      const rawBody = '{"order" : 4200001234567890123, "note":"wörld \\u00e9/"}';
      const res = await stack.api(
        "POST",
        "/v1/jobs",
        `{"topic":"shape-${mode}","id":"shape-${mode}","body":${rawBody}}`,
      );
      expect(res.status, res.text).toBe(201);
      const [hit] = await rx.waitFor(path, 1, 5000);
      expect(hit, `no ${mode} delivery`).toBeDefined();
      if (!hit) return;
      const delivery = await checkDelivery(hit, mode, SECRET, url);
      expect(hit.raw).toContain(`"body":${rawBody}`);
      expect(delivery).toMatchObject({ id: `shape-${mode}`, topic: `shape-${mode}`, attempt: 1 });
      expect(delivery.dueAt).toBe(res.json.job.dueAt);
      expect(hit.at).toBeGreaterThanOrEqual(delivery.dueAt);
      expect(hit.headers["x-api-key"]).toBe("k_live_123");
      expect(hit.headers["x-tenant"]).toBe("shop-7");
      // A signature made with another secret would not pass our check.
      expect(() =>
        checkDelayqSignature(`${SECRET}x`, hit.headers["delayq-signature"], hit.raw),
      ).toThrow(/does not verify/);
      const done = await jobIn(`shape-${mode}`, ["finished"]);
      expect(done.state).toBe("finished");
      expect(rx.hits(path)).toHaveLength(1);
    }
  });

  it("settles by the receiver's answer: done, retry, bury, failures, Retry-After, timeouts", async () => {
    type Case = {
      name: string;
      answer: {
        status?: number;
        body?: string | object;
        headers?: Record<string, string>;
        holdMs?: number;
      };
      state: string;
      /** The retry's wait (ms) from the attempt, for jobs given back. */
      waitMs?: number;
      lastStatus: number;
      deadReason?: string;
      /** The topic's push timeout, s (the default, 15, unless set). */
      timeout?: number;
    };
    const cases: Case[] = [
      { name: "empty200", answer: {}, state: "finished", lastStatus: 200 },
      { name: "done", answer: { body: { status: "done" } }, state: "finished", lastStatus: 200 },
      {
        name: "text202",
        answer: { status: 202, body: "ok thanks" },
        state: "finished",
        lastStatus: 202,
      },
      {
        name: "retry",
        answer: { body: { status: "retry", delay: 200 } },
        state: "delayed",
        waitMs: 200_000,
        lastStatus: 200,
      },
      {
        name: "retrybackoff",
        answer: { body: { status: "retry" } },
        state: "delayed",
        waitMs: 300_000,
        lastStatus: 200,
      },
      {
        name: "bury",
        answer: { body: { status: "bury" } },
        state: "dead",
        lastStatus: 200,
        deadReason: "buried",
      },
      {
        name: "e500",
        answer: { status: 500, body: "boom" },
        state: "delayed",
        waitMs: 300_000,
        lastStatus: 500,
      },
      {
        name: "retryafter",
        answer: { status: 503, headers: { "retry-after": "240" } },
        state: "delayed",
        waitMs: 240_000,
        lastStatus: 503,
      },
      {
        // Held past the topic's 2 s timeout (the only case with a short one: a stall of the
        // machine longer than the timeout would fail the others' deliveries as timeouts too).
        name: "timeout",
        answer: { holdMs: 6000 },
        timeout: 2,
        state: "delayed",
        waitMs: 300_000,
        lastStatus: 0,
      },
    ];
    const runs = MODES.flatMap((mode) => cases.map((c) => ({ mode, c })));
    await Promise.all(
      runs.map(async ({ mode, c }) => {
        const topic = `settle-${mode}-${c.name}`;
        rx.on(`/${topic}`, c.answer);
        await pushTopic(
          topic,
          { url: rx.url(`/${topic}`), via: mode, secret: SECRET, timeout: c.timeout ?? 15 },
          { backoff: [300] },
        );
        await add({ topic, id: topic, body: { case: c.name } });
      }),
    );
    for (const { mode, c } of runs) {
      const topic = `settle-${mode}-${c.name}`;
      const [hit] = await rx.waitFor(`/${topic}`, 1, 6000);
      if (!hit) console.error(await undelivered(topic));
      expect(hit, `${topic}: not delivered`).toBeDefined();
      if (!hit) continue;
      await checkDelivery(hit, mode, SECRET, rx.url(`/${topic}`));
      const job = await eventually(
        () => getJob(topic),
        (j) => j.lastDelivery !== undefined,
        8000,
      );
      expect(job.state, `${topic}: ${JSON.stringify(job)}`).toBe(c.state);
      expect(job.attempts, topic).toBe(1);
      expect(job.lastDelivery?.status, topic).toBe(c.lastStatus);
      if (c.deadReason) expect(job.deadReason, topic).toBe(c.deadReason);
      if (c.waitMs !== undefined) {
        // Given back to wait: from the attempt (plus the timeout's 2 s when there was none).
        expect(job.dueAt - hit.at, topic).toBeGreaterThanOrEqual(c.waitMs - 100);
        expect(job.dueAt - hit.at, topic).toBeLessThanOrEqual(c.waitMs + 3000);
      }
      expect(rx.hits(`/${topic}`), topic).toHaveLength(1);
    }
  }, 30_000);

  /**
   * Adds two jobs due in 4 s; deletes one at once, the other once the add has claimed it (GET
   * reads reserved: waiting for its due time in the add's waitUntil, or published to QStash).
   * Neither may arrive.
   */
  async function deleteBeforeDue(mode: Mode) {
    const topic = `deleted-${mode}`;
    await pushTopic(topic, { url: rx.url(`/${topic}`), via: mode, secret: SECRET });
    const jobs = await Promise.all([
      add({ topic, id: `del-now-${mode}`, delay: 4 }),
      add({ topic, id: `del-later-${mode}`, delay: 4 }),
    ]);
    const now = await stack.api("DELETE", `/v1/jobs/del-now-${mode}`);
    expect(now.json).toEqual({ deleted: true });
    await eventually(
      () => getJob(`del-later-${mode}`),
      (job) => job.state === "reserved",
      2000,
      50,
    );
    await sleep(300); // QStash: the message id is recorded by now, so the delete cancels it
    const later = await stack.api("DELETE", `/v1/jobs/del-later-${mode}`);
    expect(later.json).toEqual({ deleted: true });
    const lastDue = Math.max(...jobs.map((j) => j.dueAt));
    await sleep(Math.max(0, lastDue + 2000 - Date.now()));
    expect((await getJob(`del-later-${mode}`)).state).toBe("deleted");
    expect(
      rx.hits(`/${topic}`).map((h) => JSON.parse(h.raw).id),
      `${mode}: deliveries after the delete was acknowledged`,
    ).toEqual([]);
  }

  it("never delivers a job deleted before its due time, even once claimed (QStash: its message is cancelled)", async () => {
    await Promise.all(MODES.map((mode) => deleteBeforeDue(mode)));
  });

  it("kills jobs by their attempts, a bury or their deadline (each failureUrl is told from the run the job died in, below)", async () => {
    for (const mode of MODES) {
      const topic = `notice-${mode}`;
      rx.on(`/${topic}`, (hit) => {
        const id = JSON.parse(hit.raw).id as string;
        return id.includes("bury") ? { body: { status: "bury" } } : { status: 500 };
      });
      await pushTopic(
        topic,
        {
          url: rx.url(`/${topic}`),
          via: mode,
          secret: SECRET,
          failureUrl: rx.url(`/failed-${mode}`),
          headers: { "X-Api-Key": "k_notice" },
        },
        { backoff: [300] },
      );
      await add({ topic, id: `n-attempts-${mode}`, maxAttempts: 1, body: { why: "attempts" } });
      await add({ topic, id: `n-bury-${mode}`, body: { why: "bury" } });
      await add({
        topic,
        id: `n-deadline-${mode}`,
        deadline: Date.now() + 3000,
        body: { why: "deadline" },
      });
    }
    for (const mode of MODES) {
      for (const [kind, reason] of [
        ["attempts", "attempts"],
        ["bury", "buried"],
        ["deadline", "deadline"],
      ]) {
        const job = await jobIn(`n-${kind}-${mode}`, ["dead"]);
        expect(job.state, `n-${kind}-${mode}`).toBe("dead");
        expect(job.deadReason).toBe(reason);
        diedAt.set(job.id, job.endedAt);
      }
    }
  });

  // DESIGN §3 Timing: "when added or retried with a due time before the next tick, by that
  // request itself". (Until c738d78 a retried job waited for the next cron tick.)
  it("brings a retried job back at its retry time without waiting for the cron, again and again", async () => {
    for (const mode of MODES) {
      await pushTopic(`soon-retry-${mode}`, {
        url: rx.url(`/soon-retry-${mode}`),
        via: mode,
        secret: SECRET,
      });
      // Three retries a second apart, then done.
      rx.on(`/soon-retry-${mode}`, (_hit, n) =>
        n < 3 ? { body: { status: "retry", delay: 1 } } : {},
      );
      await add({ topic: `soon-retry-${mode}`, id: `soon-retry-${mode}` });
    }
    // Waiting is not what is judged: each attempt's lateness is, below. Four attempts within
    // their bounds may take 9 s via QStash (1.5 s late at most, then 1 s + 1.5 s per retry), and
    // CI once saw 3 in 9 s: the wait is longer than that.
    const results = await Promise.all(
      MODES.map(async (mode) => ({
        mode,
        hits: await rx.waitFor(`/soon-retry-${mode}`, 4, 12_000),
      })),
    );
    for (const { mode, hits } of results) {
      expect(hits.length, `${mode}: ${hits.length} attempts came`).toBe(4);
      hits.forEach((hit, i) => {
        const delivery = JSON.parse(hit.raw);
        expect(delivery.attempt, mode).toBe(i + 1);
        expect(hit.at, `${mode} attempt ${i + 1}: early`).toBeGreaterThanOrEqual(delivery.dueAt);
        expect(hit.at - delivery.dueAt, `${mode} attempt ${i + 1}`).toBeLessThanOrEqual(
          LATENESS_BUDGET_MS + (mode === "qstash" ? QSTASH_LATENCY_ALLOWANCE_MS : 0),
        );
        const before = hits[i - 1];
        if (before) expect(delivery.dueAt - before.at, mode).toBeGreaterThanOrEqual(1000 - 50);
      });
      expect((await jobIn(`soon-retry-${mode}`, ["finished"])).state).toBe("finished");
    }
  });
});

describe("push topics from outside: with the cron", () => {
  it("a direct job due 25-60 s after its add, with no tick before its due time, is delivered on time by a run asked for through QStash", async () => {
    const lastDue = Math.max(...timed.gap.map((j) => j.dueAt));
    // No tick: the add's own run could not wait that long, so it asked QStash for a run for the
    // jobs' 20 s wave (POST /v1/qstash/continue, 5 s before the wave), which delivers them.
    const hits = await rx.waitFor("/timing-gap", timed.gap.length, lastDue + 5000 - Date.now());
    expect(hits).toHaveLength(timed.gap.length);
    for (const hit of hits) {
      checkDelayqSignature(SECRET, hit.headers["delayq-signature"], hit.raw);
      const job = timed.gap.find((j) => j.id === hit.headers["delayq-id"]);
      expect(job).toBeDefined();
      gapLateness.push(hit.at - (job?.dueAt ?? 0));
      expect(hit.at).toBeGreaterThanOrEqual(job?.dueAt ?? 0);
      expect(hit.at - (job?.dueAt ?? 0)).toBeLessThanOrEqual(2 * LATENESS_BUDGET_MS);
    }
  });

  it("sends each failure notice once, from the run the job died in (no tick), signed like deliveries, with the documented shape", async () => {
    for (const mode of MODES) {
      const path = `/failed-${mode}`;
      const hits = await rx.waitFor(path, 3, 8000);
      expect(hits, mode).toHaveLength(3);
      const notices = hits.map((hit) => {
        // Told by the invocation in which the job died (a delivery's, a QStash callback's),
        // within seconds: no tick has run since these jobs were added.
        const died = diedAt.get(JSON.parse(hit.raw).id) ?? Number.NaN;
        expect(
          hit.at - died,
          `${mode}: the notice came ${hit.at - died} ms after the death`,
        ).toBeLessThan(5000);
        const ticked = ticks.filter((at) => at >= died && at <= hit.at);
        expect(ticked, `${mode}: a tick ran between the death and its notice`).toEqual([]);
        expect(hit.method).toBe("POST");
        expect(hit.headers["content-type"]).toMatch(/^application\/json/);
        checkDelayqSignature(SECRET, hit.headers["delayq-signature"], hit.raw);
        expect(hit.headers["x-api-key"]).toBe("k_notice");
        const notice = JSON.parse(hit.raw);
        expect(Object.keys(notice)).toEqual([
          "id",
          "topic",
          "body",
          "attempts",
          "reason",
          "lastStatus",
        ]);
        expect(hit.headers["delayq-id"]).toBe(notice.id);
        expect(hit.headers["delayq-topic"]).toBe(`notice-${mode}`);
        return notice;
      });
      const byId = Object.fromEntries(notices.map((n) => [n.id, n]));
      expect(byId[`n-attempts-${mode}`]).toEqual({
        id: `n-attempts-${mode}`,
        topic: `notice-${mode}`,
        body: { why: "attempts" },
        attempts: 1,
        reason: "attempts",
        lastStatus: 500,
      });
      expect(byId[`n-bury-${mode}`]).toMatchObject({
        reason: "buried",
        lastStatus: 200,
        attempts: 1,
      });
      expect(byId[`n-deadline-${mode}`]).toMatchObject({
        reason: "deadline",
        lastStatus: 500,
        attempts: 1,
      });
    }
    await tick();
    await sleep(1000);
    for (const mode of MODES) expect(rx.hits(`/failed-${mode}`), mode).toHaveLength(3);
  });

  it("meets the timing budgets: never early; p99 lateness within 1 s (QStash: plus its own latency)", async () => {
    const all = [...timed.request, ...timed.tick, ...timed.retry];
    const lastDue = Math.max(
      ...all.map((j) => j.dueAt + (j.list === "retry" ? j.delay * 1000 : 0)),
    );
    await sleep(Math.max(0, lastDue + 2500 - Date.now()));
    const restarted = await stack.restarted();
    if (restarted) {
      // Deliveries waiting in the old isolate died with it (they come back when their lease
      // runs out, at a later tick): what is left says nothing about the budgets. Still, nothing
      // that did arrive came early.
      console.warn(`timing budgets not judged: the worker restarted (isolate ${restarted})`);
      for (const job of all) {
        for (const hit of rx.hits(job.path).filter((h) => JSON.parse(h.raw).id === job.id)) {
          expect(hit.at, job.id).toBeGreaterThanOrEqual(JSON.parse(hit.raw).dueAt);
        }
      }
      return;
    }
    const lateness: Record<string, number[]> = {};
    /** QStash mode: time from the whole second QStash was asked for to the arrival. */
    const afterSecond: number[] = [];
    const record = (key: string, value: number) => {
      lateness[key] ??= [];
      lateness[key].push(value);
    };
    for (const [set, jobs] of Object.entries(timed)) {
      for (const job of jobs) {
        const hits = rx.hits(job.path).filter((h) => JSON.parse(h.raw).id === job.id);
        const seen = JSON.stringify(hits.map((h) => [h.at, h.raw]));
        const state = async () => (await stack.api("GET", `/v1/jobs/${job.id}`)).text;
        // Exactly once (the retried ones: once more for their retry).
        const expected = set === "retry" ? 2 : 1;
        if (hits.length !== expected) {
          expect.fail(
            `${job.id} (${set}) came ${hits.length} times: ${seen}; now ${await state()}`,
          );
        }
        const hit = hits.at(-1) as Hit;
        const delivery = JSON.parse(hit.raw);
        if (set === "retry") {
          // Due the delay its receiver asked for after the first attempt was answered.
          const first = hits[0] as Hit;
          expect(delivery.attempt, seen).toBe(2);
          expect(delivery.dueAt - first.at, seen).toBeGreaterThanOrEqual(job.delay * 1000 - 50);
          expect(delivery.dueAt - first.at, seen).toBeLessThanOrEqual(job.delay * 1000 + 1500);
        } else {
          expect(delivery.dueAt, `${job.id}: ${seen}`).toBe(job.dueAt);
        }
        record(`${set}/${job.mode}`, hit.at - delivery.dueAt);
        if (job.mode === "qstash")
          afterSecond.push(hit.at - Math.ceil(delivery.dueAt / 1000) * 1000);
      }
    }
    const lag = probe?.stop() ?? { maxMs: 0, p99Ms: 0, samples: 0 };
    const load = loadavg()[0]?.toFixed(1);
    const lines = [
      `push lateness, ms (arrival at the receiver - dueAt), over ${(
        (Date.now() - timingStarted) / 1000
      ).toFixed(1)} s`,
      ...Object.entries(lateness).map(([key, values]) => {
        const s = summary(values);
        return `  ${key.padEnd(24)} n=${s.n} min ${s.min} p50 ${s.p50} p99 ${s.p99} max ${s.max}`;
      }),
      (() => {
        const s = summary(afterSecond);
        return `  ${"qstash after its second".padEnd(24)} n=${s.n} min ${s.min} p50 ${s.p50} p99 ${s.p99} max ${s.max}`;
      })(),
      `  gap (a run asked for through QStash): lateness ${gapLateness.join(", ")} ms`,
      `  this process's timer lag p99 ${lag.p99Ms} ms, max ${lag.maxMs} ms; load ${load}`,
    ];
    console.log(lines.join("\n"));
    for (const mode of MODES) {
      const finished = await getJob(`timing-${mode}-0`);
      expect(finished.state).toBe("finished");
    }
    // Never early, whatever the machine is doing.
    for (const [key, values] of Object.entries(lateness)) {
      expect(Math.min(...values), `${key}: early`).toBeGreaterThanOrEqual(0);
    }
    if (lag.maxMs > OVERLOADED_LAG_MS) {
      // Our own timers were that late: arrival times say as much about the machine as about
      // delayq, so the budgets are reported above, not judged.
      console.warn(
        `timing budgets not asserted: this process stalled for ${lag.maxMs} ms (load ${load})`,
      );
      return;
    }
    for (const [key, values] of Object.entries(lateness)) {
      if (key.startsWith("gap/")) continue; // asserted against the tick above
      // QStash delivers at whole seconds: delayq asks for the due second rounded up, which alone
      // makes a job up to 999 ms late; QStash's own latency after that second comes on top (the
      // stand-in's 25 ms scheduler, and this machine's load).
      const budget = key.endsWith("/qstash")
        ? LATENESS_BUDGET_MS + QSTASH_LATENCY_ALLOWANCE_MS
        : LATENESS_BUDGET_MS;
      expect(summary(values).p99, `${key}: p99`).toBeLessThanOrEqual(budget);
    }
    // Published before the due second, so QStash could deliver within it: none comes a whole
    // second after it.
    expect(summary(afterSecond).p99).toBeLessThanOrEqual(QSTASH_LATENCY_ALLOWANCE_MS);
  }, 40_000);
});
