// Hand-offs: a run its subrequest budget stops with push jobs left asks QStash for fresh
// invocations, which take the rest from budgets of their own. The real @upstash/qstash Client
// publishes to the local stand-in, which calls the app (served over HTTP) back at
// /v1/qstash/continue, verified with the real Receiver; real receivers, real Redis.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRun } from "../../src/run/run";
import { soon } from "../../src/run/work";
import { type PushApp, type Receiver, startReceiver, testPushApp } from "../support/push";
import { type QStashHarness, startQStashHarness } from "../support/qstash-app";

/** Each run's subrequests: at 3 a direct job (a look each), 16 jobs a run. */
const SUBREQUESTS = 60;
const PER_RUN = Math.floor((SUBREQUESTS - 10) / 3);

let harness: QStashHarness;
let receiver: Receiver;

beforeAll(async () => {
  harness = await startQStashHarness();
  receiver = await startReceiver();
});

afterAll(async () => {
  await harness?.close();
  await receiver?.close();
});

/** The app with hand-offs (QStash, its public URL, DQ_SUBREQUESTS), and a push topic. */
async function setup(
  topic: string,
  limits: { subrequests?: number; batch?: number; runLifetimeMs?: number } = {},
): Promise<PushApp> {
  const app = testPushApp({
    qstash: harness.client(),
    publicUrl: harness.publicUrl,
    subrequests: limits.subrequests ?? SUBREQUESTS,
    batch: limits.batch,
    runLifetimeMs: limits.runLifetimeMs,
  });
  harness.serve(app);
  const put = await app.call("PUT", `/v1/topics/${topic}`, {
    body: { push: { url: `${receiver.url}/${topic}` } },
  });
  expect(put.status).toBe(200);
  return app;
}

/** `jobs` jobs of `topic` due at `due`, added through the library (no request's own delivery). */
async function addDue(app: PushApp, topic: string, jobs: number, due: number) {
  await app.queue.addBatch(
    Array.from({ length: jobs }, (_, n) => ({ topic, id: `${topic}-${n}`, runAt: due })),
  );
}

/** The hand-off messages QStash delivered to the app since `since` (ms), for `topic` if given. */
const continuations = (since: number, topic?: string) =>
  harness.qstash
    .deliveries()
    .filter((d) => d.destination.endsWith("/v1/qstash/continue") && d.at >= since)
    .filter((d) => {
      if (topic === undefined) return true;
      const asked = (JSON.parse(d.body) as { topic: string | null }).topic;
      return asked === null || asked === topic;
    });

async function waitFor(what: string, done: () => boolean, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Waits for every job of `topic` to arrive, then checks each came once (a moment later still
 * once), never before `due`; answers the deliveries.
 */
async function deliveredOnce(topic: string, jobs: number, due: number) {
  const hits = () => receiver.received.filter((r) => r.path === `/${topic}`);
  await waitFor("every job", () => hits().length >= jobs);
  await new Promise((r) => setTimeout(r, 300));
  const all = hits();
  expect(all).toHaveLength(jobs);
  expect(new Set(all.map((r) => r.headers["delayq-id"])).size).toBe(jobs);
  for (const delivery of all) expect(delivery.at).toBeGreaterThanOrEqual(due);
  return all;
}

describe("a run stopped by its budget", () => {
  it("hands the rest to fresh runs through QStash: every job delivered once, at its due time, none early", async () => {
    const topic = `burst-${crypto.randomUUID().slice(0, 6)}`;
    const app = await setup(topic);
    const jobs = 100;
    const due = Date.now() + 2500;
    const started = Date.now();
    await addDue(app, topic, jobs, due);
    const tick = app.newRun(SUBREQUESTS);
    const report = await app.push({ run: tick });
    // The tick took what its budget pays for: jobs due together share the look before sending,
    // so each costs its POST and its settle, about 2 subrequests, not 3.
    expect(report.claimed).toBeGreaterThan(SUBREQUESTS / 3);
    expect(report.claimed).toBeLessThanOrEqual(SUBREQUESTS / 2);
    expect(tick.budget.taken()).toBeLessThanOrEqual(SUBREQUESTS);
    const all = await deliveredOnce(topic, jobs, due);
    expect(Math.max(...all.map((r) => r.at)) - due).toBeLessThan(5000);
    // Each fresh run came as a QStash message, signed and verified (the route answers 202),
    // asked to take a share priced as the tick's claims found these jobs; as many runs as the
    // rest needs at that share, not one per job.
    const runs = continuations(started);
    expect(runs).toHaveLength(report.handedOff);
    expect(runs.every((run) => run.status === 202)).toBe(true);
    const share = (JSON.parse(runs[0]?.body ?? "{}") as { share?: number }).share ?? 0;
    expect(share).toBeGreaterThan(PER_RUN);
    expect(report.handedOff).toBe(Math.ceil((jobs - report.claimed) / share));
    for (let n = 0; n < jobs; n++) {
      expect((await app.queue.get(`${topic}-${n}`)).state).toBe("finished");
    }
    // What the runs asked for is taken off as they come: nothing is promised any more.
    const promised = (await app.redis.hgetall<Record<string, string>>(app.keys.handOffWaves)) ?? {};
    for (const jobs of Object.values(promised)) expect(Number(jobs)).toBeLessThanOrEqual(0);
  });

  it("asks for runs wave by wave across the claim's horizon, each coming before its wave", async () => {
    // Two groups due 22 s apart: the second lies past the 20 s a run asked for the first one
    // reaches, so it has runs of its own wave, asked for by the same hand-off; no tick comes.
    const topic = `waves-${crypto.randomUUID().slice(0, 6)}`;
    const app = await setup(topic);
    const jobs = 60;
    const first = Date.now() + 2500;
    const second = first + 22_000;
    const started = Date.now();
    await addDue(app, `${topic}`, jobs, first);
    await app.queue.addBatch(
      Array.from({ length: jobs }, (_, n) => ({ topic, id: `${topic}-late-${n}`, runAt: second })),
    );
    const tick = app.newRun(SUBREQUESTS);
    const report = await app.push({ run: tick });
    expect(report.more).toBe(true);
    const hits = () => receiver.received.filter((r) => r.path === `/${topic}`);
    await waitFor("every job", () => hits().length >= 2 * jobs, 45_000);
    await new Promise((r) => setTimeout(r, 300));
    const all = hits();
    expect(new Set(all.map((r) => r.headers["delayq-id"])).size).toBe(2 * jobs);
    expect(all).toHaveLength(2 * jobs);
    const late = all.filter((r) => r.headers["delayq-id"]?.includes("-late-"));
    expect(late).toHaveLength(jobs);
    // Never early; and the second group by its wave's runs, not a tick (none comes here).
    for (const delivery of all) {
      const due = delivery.headers["delayq-id"]?.includes("-late-") ? second : first;
      expect(delivery.at).toBeGreaterThanOrEqual(due);
    }
    // Runs of two waves (20 s each), each run coming no sooner than 5 s before its wave began
    // (QStash's notBefore is in whole seconds, rounded down), from one ask.
    const runs = continuations(started, topic);
    const waves = new Set(runs.map((run) => (JSON.parse(run.body) as { wave?: number }).wave));
    expect(waves.size).toBeGreaterThanOrEqual(2);
    for (const run of runs) {
      const wave = (JSON.parse(run.body) as { wave: number }).wave;
      expect(run.at).toBeGreaterThanOrEqual(wave * 20_000 - 6000);
    }
    const firstAsk = app.logs.find((line) => line.event === "hand_off");
    expect(firstAsk?.waves).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it("asks no more runs than the jobs left need when two runs are stopped at once", async () => {
    const topic = `twice-${crypto.randomUUID().slice(0, 6)}`;
    const app = await setup(topic);
    const jobs = 80;
    const due = Date.now() + 6000;
    const started = Date.now();
    await addDue(app, topic, jobs, due);
    const [one, two] = await Promise.all([
      app.push({ run: app.newRun(SUBREQUESTS) }),
      app.push({ run: app.newRun(SUBREQUESTS) }),
    ]);
    const claimed = (one?.claimed ?? 0) + (two?.claimed ?? 0);
    const asked = (one?.handedOff ?? 0) + (two?.handedOff ?? 0);
    await deliveredOnce(topic, jobs, due);
    // The second to ask counts the runs the first asked for (push:handoffs): together no more
    // than the jobs left need at the share each run was asked to take.
    const shares = continuations(started).map(
      (run) => (JSON.parse(run.body) as { share: number }).share,
    );
    expect(shares).toHaveLength(asked);
    expect(asked).toBeGreaterThan(0);
    expect(asked).toBeLessThanOrEqual(Math.ceil((jobs - claimed) / Math.min(...shares)));
    // Timed a little before the jobs were due (5 s), not at once.
    for (const run of continuations(started)) expect(run.at).toBeGreaterThanOrEqual(due - 6000);
  });

  it("asks again when a later claim of its own is stopped, for the jobs written since", async () => {
    // A run of 150 subrequests (asks up to 4 times): its first claim stops at its budget with
    // jobs left and asks; jobs written after that ask (as polls write polls) and claimed by the
    // same run are stopped too, and only a second ask brings runs for them (no tick comes).
    const topic = `again-${crypto.randomUUID().slice(0, 6)}`;
    const app = await setup(topic, { subrequests: 150 });
    const first = Date.now() + 2500;
    await addDue(app, topic, 100, first);
    const run = app.newRun(150);
    const drained = app.push({ run, topic });
    const hits = () => receiver.received.filter((r) => r.path === `/${topic}`);
    // The first ask's runs have come and taken what there was: the jobs below are new to all.
    await waitFor("the first jobs", () => hits().length >= 100);
    const second = Date.now() + 6000;
    await app.queue.addBatch(
      Array.from({ length: 40 }, (_, n) => ({ topic, id: `${topic}-more-${n}`, runAt: second })),
    );
    const again = await app.dispatcher.drain(run, [
      { kind: "claim", topic, horizon: Date.now() + 25_000 },
    ]);
    expect(again.more).toBe(true);
    await drained;
    await waitFor("every job", () => hits().length >= 140, 30_000);
    const ids = new Set(hits().map((r) => r.headers["delayq-id"]));
    expect(ids.size).toBe(140);
    for (let n = 0; n < 40; n++) expect(ids.has(`${topic}-more-${n}`)).toBe(true);
    const asks = app.logs.filter((line) => line.event === "hand_off" && line.topic === topic);
    expect(asks.length).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it("hands off too when its claims' limit stops it before its budget does", async () => {
    // Claims of at most 10 and 16 of them: 160 jobs, far below what 1,000 subrequests pay for.
    const topic = `rounds-${crypto.randomUUID().slice(0, 6)}`;
    const app = await setup(topic, { subrequests: 1000, batch: 10 });
    const jobs = 300;
    const due = Date.now() + 2500;
    await addDue(app, topic, jobs, due);
    const tick = app.newRun(1000);
    const report = await app.push({ run: tick });
    expect(report).toMatchObject({ claimed: 160, more: true });
    expect(report.handedOff).toBeGreaterThan(0);
    expect(tick.budget.taken()).toBeLessThan(500);
    await deliveredOnce(topic, jobs, due);
  });

  it("leaves the rest for the next tick when QStash is not configured", async () => {
    const topic = `alone-${crypto.randomUUID().slice(0, 6)}`;
    const app = testPushApp({ subrequests: SUBREQUESTS });
    await app.call("PUT", `/v1/topics/${topic}`, {
      body: { push: { url: `${receiver.url}/${topic}` } },
    });
    await addDue(app, topic, 40, Date.now());
    const report = await app.push({ run: app.newRun(SUBREQUESTS) });
    expect(report).toMatchObject({ handedOff: 0, more: true });
    expect(report.claimed).toBeLessThan(40);
    const next = await app.push({ run: app.newRun(SUBREQUESTS) });
    expect(report.claimed + next.claimed).toBeLessThanOrEqual(40);
    expect(next.claimed).toBeGreaterThan(0);
  });
});

describe("a job due before the next tick that the run cannot wait for", () => {
  it("has one fresh run asked for its wave, however many requests add such jobs", async () => {
    // Request runs of 8 s: a direct job due in 9 s is past what a request waits for (until 5 s
    // before its end), and the next tick may come a minute later. Before, it waited for that tick.
    const topic = `cover-${crypto.randomUUID().slice(0, 6)}`;
    const app = await setup(topic, { runLifetimeMs: 8000 });
    const due = Date.now() + 9000;
    const started = Date.now();
    for (let n = 0; n < 3; n++) {
      const added = await app.call("POST", "/v1/jobs", {
        body: { topic, id: `${topic}-${n}`, body: { n }, runAt: due + n * 100 },
      });
      expect(added.status).toBe(201);
    }
    await app.settled();
    const all = await deliveredOnce(topic, 3, due);
    for (const delivery of all) expect(delivery.at - due).toBeLessThan(3000);
    // One run for the three, asked for once: the process remembers the waves it asked for (and
    // QStash's deduplication id, one per topic and wave, drops another process's repeats).
    const runs = continuations(started, topic).filter((run) => run.body.includes(topic));
    expect(runs).toHaveLength(1);
    expect(runs[0]?.status).toBe(202);
    const asked = app.logs.filter((line) => line.event === "wave_asked" && line.topic === topic);
    expect(asked).toHaveLength(1);
  });

  it("asks for nothing when the next tick will claim it in time", async () => {
    const topic = `far-${crypto.randomUUID().slice(0, 6)}`;
    const app = await setup(topic, { runLifetimeMs: 8000 });
    const started = Date.now();
    const added = await app.call("POST", "/v1/jobs", {
      body: { topic, id: `${topic}-0`, body: {}, runAt: Date.now() + 90_000 },
    });
    expect(added.status).toBe(201);
    await app.settled();
    const asked = app.logs.filter((line) => line.event === "wave_asked" && line.topic === topic);
    expect(asked, JSON.stringify(asked)).toHaveLength(0);
    const runs = continuations(started, topic).filter((run) => run.body.includes(topic));
    expect(runs).toHaveLength(0);
  });
});

describe("a follow-up naming its due time", () => {
  it("is claimed by a tick's run when due before the next tick, by no run when due after it", async () => {
    // No QStash: what the runs decide themselves. A minute's cron, a tick that just began.
    const topic = `follow-${crypto.randomUUID().slice(0, 6)}`;
    const app = testPushApp();
    await app.call("PUT", `/v1/topics/${topic}`, {
      body: { push: { url: `${receiver.url}/${topic}` } },
    });
    const now = Date.now();
    const soonish = now + 35_000;
    const afterNextTick = now + 80_000;
    await app.queue.add({ topic, id: `${topic}-soon`, runAt: soonish });
    await app.queue.add({ topic, id: `${topic}-late`, runAt: afterNextTick });
    const run = (tick: boolean) =>
      createRun({ tick, subrequests: 1000, lifetimeMs: tick ? 125_000 : 30_000, log: () => {} });
    const state = async (id: string) => (await app.queue.get(`${topic}-${id}`)).state;
    // A job due after the next tick (60 s + 5 s of lateness from the tick's start): left to it.
    const late = await app.dispatcher.drain(run(true), [soon(topic, now, afterNextTick)]);
    expect(late.claimed).toBe(0);
    // A request's run waits 25 s at most: a job due in 35 s is not its own.
    const request = await app.dispatcher.drain(run(false), [soon(topic, now, soonish)]);
    expect(request.claimed).toBe(0);
    expect(await state("soon")).toBe("delayed");
    // A tick's run waits for it: the next tick would claim it only after it is due.
    void app.dispatcher.drain(run(true), [soon(topic, now, soonish)]);
    const deadline = Date.now() + 5000;
    while ((await state("soon")) !== "reserved" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await state("soon")).toBe("reserved");
    expect(await state("late")).toBe("delayed");
    // Not to be sent after the test: a deleted job is dropped at its due time.
    await app.queue.delete(`${topic}-soon`);
  });
});

describe("POST /v1/qstash/continue", () => {
  it("refuses a call QStash did not sign, and a body that is not a hand-off's", async () => {
    const app = await setup(`refuse-${crypto.randomUUID().slice(0, 6)}`);
    const unsigned = await app.app.request("/v1/qstash/continue", {
      method: "POST",
      body: '{"topic":null}',
    });
    expect(unsigned.status).toBe(401);
    expect(((await unsigned.json()) as { error: { code: string } }).error.code).toBe(
      "unauthorized",
    );
    // Through QStash, so that it is signed for the route's URL, but with a body of its own.
    const started = Date.now();
    await harness.client().publishRuns({
      publicUrl: harness.publicUrl,
      waves: [{ runs: 1 }],
      topic: "x",
    });
    await waitFor("the hand-off", () => continuations(started).length >= 1);
    expect(continuations(started)[0]?.status).toBe(202);
    const { Client } = await import("@upstash/qstash");
    const { qstash, publicUrl } = harness;
    const raw = new Client({ baseUrl: qstash.url, token: qstash.token, devMode: false });
    const sent = Date.now();
    await raw.publish({ url: `${publicUrl}/v1/qstash/continue`, body: '{"topic":7}', retries: 0 });
    await waitFor("the bad hand-off", () => continuations(sent).length >= 1);
    expect(continuations(sent)[0]?.status).toBe(400);
    // A wave that is not a whole number of 20 s waves is refused the same way.
    const badWave = Date.now();
    await raw.publish({
      url: `${publicUrl}/v1/qstash/continue`,
      body: '{"topic":null,"wave":-1.5}',
      retries: 0,
    });
    await waitFor("the bad wave", () => continuations(badWave).length >= 1);
    expect(continuations(badWave)[0]?.status).toBe(400);
  });
});
