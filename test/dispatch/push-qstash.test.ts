// Push delivery through QStash: the real @upstash/qstash Client publishing to the local stand-in,
// deliveries and callbacks verified with the real Receiver, the app served over HTTP so that the
// stand-in can call it back.
import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Receiver } from "@upstash/qstash";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startFaultProxy } from "../../dev/fault-proxy";
import type { QStashStandIn } from "../../dev/qstash";
import { createQStash } from "../../src/dispatch/qstash";
import { tick } from "../../src/index";
import {
  type Receiver as HookReceiver,
  type PushApp,
  startReceiver,
  testPushApp,
} from "../support/push";
import { type QStashHarness, startQStashHarness } from "../support/qstash-app";

const SECRET = "qstash-test-secret-01";
let harness: QStashHarness;
let qstash: QStashStandIn;
let publicUrl: string;

beforeAll(async () => {
  harness = await startQStashHarness();
  ({ qstash, publicUrl } = harness);
});

afterAll(async () => {
  await harness?.close();
});

async function setup(
  limits: { subrequests?: number; batch?: number; qstashUrl?: string; timeoutMs?: number } = {},
): Promise<PushApp & { receiver: HookReceiver }> {
  const { qstashUrl, timeoutMs, ...rest } = limits;
  const client = harness.client({ url: qstashUrl, timeoutMs });
  const app = testPushApp({ qstash: client, publicUrl, ...rest });
  harness.serve(app);
  const receiver = await startReceiver();
  const put = await app.call("PUT", "/v1/topics/q", {
    body: {
      push: {
        url: `${receiver.url}/hook`,
        via: "qstash",
        secret: SECRET,
        headers: { "X-Shop": "7" },
      },
      backoff: [30],
    },
  });
  expect(put.status).toBe(200);
  return { ...app, receiver };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 8000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `work`'s value; throws if it has not come back within `ms` (it is left running). */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not come back within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function stateOf(app: PushApp, id: string, state: string) {
  return until(`${id} ${state}`, async () => {
    const { job } = (await app.call("GET", `/v1/jobs/${id}`)).json;
    return job.state === state ? job : undefined;
  });
}

describe("push via QStash", () => {
  it("publishes at the due second, verifiably signed twice, and the callback finishes the job", async () => {
    const app = await setup();
    const body = '{"amount":"12.30","tx":4200001234567890123}';
    const res = await app.app.request("/v1/jobs", {
      method: "POST",
      headers: { authorization: "Bearer admin-token", "content-type": "application/json" },
      body: `{"topic":"q","id":"m1","delay":1.2,"body":${body}}`,
    });
    const { job } = (await res.json()) as { job: { dueAt: number } };
    await app.settled();
    expect((await app.queue.get("m1")).state).toBe("reserved");
    const [got] = await app.receiver.waitFor(1);
    // notBefore is the due second rounded up: never early.
    expect(got?.at).toBeGreaterThanOrEqual(job.dueAt);
    expect(got?.at).toBeLessThan(Math.ceil(job.dueAt / 1000) * 1000 + 1000);
    expect(got?.body).toBe(
      `{"id":"m1","topic":"q","body":${body},"attempt":1,"dueAt":${job.dueAt}}`,
    );
    // QStash's signature, checked by the real Receiver against the raw body and the URL.
    const receiver = new Receiver({
      currentSigningKey: qstash.currentSigningKey,
      nextSigningKey: qstash.nextSigningKey,
    });
    expect(
      await receiver.verify({
        signature: String(got?.headers["upstash-signature"]),
        body: got?.body as string,
        url: `${app.receiver.url}/hook`,
      }),
    ).toBe(true);
    // delayq's own headers arrive as sent (Upstash-Forward-*), its signature by node:crypto.
    expect(got?.headers).toMatchObject({ "delayq-id": "m1", "delayq-topic": "q", "x-shop": "7" });
    const [, t, v1] =
      /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(got?.headers["delayq-signature"])) ?? [];
    expect(v1).toBe(createHmac("sha256", SECRET).update(`${t}.${got?.body}`).digest("hex"));
    const finished = await stateOf(app, "m1", "finished");
    expect(finished.lastDelivery.status).toBe(204);
  });

  it("settles a failed delivery through the failure callback, Retry-After honoured", async () => {
    const app = await setup();
    app.receiver.answer(() => ({ status: 503, headers: { "retry-after": "300" } }));
    const started = Date.now();
    await app.call("POST", "/v1/jobs", { body: { topic: "q", id: "f1" } });
    await app.settled();
    const waiting = await stateOf(app, "f1", "delayed");
    expect(waiting.lastDelivery).toMatchObject({ status: 503 });
    expect(waiting.dueAt - started).toBeGreaterThanOrEqual(299_000);
    expect(waiting.dueAt - Date.now()).toBeLessThanOrEqual(300_000);
    // QStash was asked not to retry: delayq's backoff decides.
    expect(app.receiver.received).toHaveLength(1);
  });

  it('releases on {"status":"retry"} and buries on {"status":"bury"}', async () => {
    const app = await setup();
    app.receiver.answer((r) => ({
      status: 200,
      body: r.headers["delayq-id"] === "r1" ? '{"status":"retry","delay":90}' : '{"status":"bury"}',
    }));
    await app.call("POST", "/v1/jobs/batch", {
      body: {
        jobs: [
          { topic: "q", id: "r1" },
          { topic: "q", id: "b1" },
        ],
      },
    });
    await app.settled();
    const released = await stateOf(app, "r1", "delayed");
    expect(released.dueAt - Date.now()).toBeGreaterThan(80_000);
    expect((await stateOf(app, "b1", "dead")).deadReason).toBe("buried");
  });

  it("publishes a job its receiver gave back due soon again after the callback, not at the next tick", async () => {
    const app = await setup();
    let calls = 0;
    app.receiver.answer(() =>
      ++calls === 1 ? { status: 200, body: '{"status":"retry","delay":1}' } : { status: 204 },
    );
    await app.call("POST", "/v1/jobs", { body: { topic: "q", id: "again" } });
    const done = await stateOf(app, "again", "finished");
    expect(done.attempts).toBe(2);
    expect(app.receiver.received).toHaveLength(2);
    expect(JSON.parse(app.receiver.received[1]?.body as string)).toMatchObject({ attempt: 2 });
  });

  it("cancels the QStash message when the job is deleted before it is due", async () => {
    const app = await setup();
    await app.call("POST", "/v1/jobs", { body: { topic: "q", id: "d1", delay: 1.5 } });
    await app.settled();
    const messageId = await until("published", async () => {
      const deliveries = qstash.deliveries();
      return deliveries.length >= 0 ? findMessage(app, "d1") : undefined;
    });
    const deleted = await app.call("DELETE", "/v1/jobs/d1");
    expect(deleted.status).toBe(200);
    expect(qstash.message(messageId)?.state).toBe("cancelled");
    await new Promise((r) => setTimeout(r, 2500));
    expect(app.receiver.received).toHaveLength(0);
  });

  it("answers 503 qstash_unavailable when the cancel fails, and a repeated delete cancels", async () => {
    const proxy = await startFaultProxy(qstash.url);
    try {
      const app = await setup({ qstashUrl: proxy.url });
      await app.call("POST", "/v1/jobs", { body: { topic: "q", id: "d2", delay: 2 } });
      await app.settled();
      const messageId = await until("published", async () => findMessage(app, "d2"));
      proxy.faults.error5xx = 1;
      const refused = await app.call("DELETE", "/v1/jobs/d2");
      expect(refused.status).toBe(503);
      expect(refused.json.error.code).toBe("qstash_unavailable");
      expect(refused.json.error.message).toMatch(/^The job is deleted, but QStash did not confirm/);
      expect(qstash.message(messageId)?.state).toBe("pending");
      proxy.faults.error5xx = 0;
      const again = await app.call("DELETE", "/v1/jobs/d2");
      expect(again.status).toBe(200);
      expect(qstash.message(messageId)?.state).toBe("cancelled");
      await new Promise((r) => setTimeout(r, 2500));
      expect(app.receiver.received).toHaveLength(0);
    } finally {
      await proxy.close();
    }
  });

  it("answers 503 qstash_unavailable within the time limit when QStash hangs, and a repeated delete cancels", async () => {
    const limitMs = 1000;
    const app = await setup({ timeoutMs: limitMs });
    await app.call("POST", "/v1/jobs", { body: { topic: "q", id: "h1", delay: 5, body: [1] } });
    await app.settled();
    const messageId = await until("published", async () => findMessage(app, "h1"));
    const before = (await app.call("GET", "/v1/jobs/h1")).json.job;
    qstash.hang(true);
    let refused: Awaited<ReturnType<typeof app.call>>;
    try {
      refused = await within(limitMs + 3000, "the delete", app.call("DELETE", "/v1/jobs/h1"));
    } finally {
      qstash.hang(false);
    }
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe("qstash_unavailable");
    // Why is in the log line of the answer's request id; the answer names no QStash address.
    const { requestId } = refused.json.error;
    expect(refused.json.error.message).toBe(
      `The job is deleted, but QStash did not confirm cancelling its delivery: retry the delete, which cancels it again; see the logs for request ${requestId}`,
    );
    expect(app.logs).toContainEqual(
      expect.objectContaining({
        code: "qstash_unavailable",
        requestId,
        detail: expect.stringMatching(
          /^QStash did not answer within 1000 ms to cancelling message msg_\w+$/,
        ),
      }),
    );
    // Nothing lost: the record, its body and its message id are kept (for the repeated delete),
    // and QStash still holds the message.
    const after = (await app.call("GET", "/v1/jobs/h1")).json.job;
    expect(after).toMatchObject({ state: "deleted", body: before.body, attempts: before.attempts });
    expect(await findMessage(app, "h1")).toBe(messageId);
    expect(qstash.message(messageId)?.state).toBe("pending");
    const again = await app.call("DELETE", "/v1/jobs/h1");
    expect(again.status).toBe(200);
    expect(qstash.message(messageId)?.state).toBe("cancelled");
    await new Promise((r) => setTimeout(r, before.dueAt + 1000 - Date.now()));
    expect(app.receiver.received).toHaveLength(0);
  });

  it("ends a run within the time limit when QStash hangs on a publish; the lease brings the job back", async () => {
    const limitMs = 1000;
    const app = await setup({ timeoutMs: limitMs });
    await app.queue.add({ topic: "q", id: "p1", delay: 1, ttr: 1, backoff: 0 });
    qstash.hang(true);
    let run: Awaited<ReturnType<typeof app.push>>;
    try {
      run = await within(limitMs + 3000, "the run", app.push());
    } finally {
      qstash.hang(false);
    }
    expect(run).toMatchObject({ claimed: 1, published: 0 });
    const failed = app.logs.find((entry) => entry.event === "qstash_publish_failed");
    expect(failed?.message).toBe("QStash did not answer within 1000 ms to POST /v2/batch");
    expect((await app.queue.get("p1")).state).toBe("reserved");
    // Its lease runs out (due + ttr), a tick takes it back (a failed attempt, no backoff), and
    // the next run publishes it.
    await until("the job back", async () => {
      await tick(app.queue);
      return (await app.queue.get("p1")).state === "ready" ? true : undefined;
    });
    expect(await app.push()).toMatchObject({ published: 1 });
    const [got] = await app.receiver.waitFor(1);
    expect(got?.headers["delayq-attempt"]).toBe("2");
    await stateOf(app, "p1", "finished");
  });

  it("cancels quietly a message QStash no longer holds, and says why a cancel was refused", async () => {
    const settings = {
      url: qstash.url,
      token: qstash.token,
      currentSigningKey: qstash.currentSigningKey,
      nextSigningKey: qstash.nextSigningKey,
    };
    const logged = vi.spyOn(console, "error");
    try {
      // Delivered, failed or cancelled already (QStash answers 404): nothing to stop, no log.
      await expect(createQStash(settings).cancel("msg_gone")).resolves.toBeUndefined();
      expect(logged).not.toHaveBeenCalled();
      await expect(
        createQStash({ ...settings, token: "not-the-token" }).cancel("msg_gone"),
      ).rejects.toThrow(/HTTP 401 to cancelling message msg_gone/);
    } finally {
      logged.mockRestore();
    }
  });

  it("calls QStash again once when the connection fails, and no more", async () => {
    // A server that cuts the first `cuts` requests' connections, then answers as QStash does.
    let requests = 0;
    let cuts = 1;
    const flaky = createServer((req, res) => {
      requests += 1;
      if (requests <= cuts) {
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end('{"cancelled":1}');
    });
    await new Promise<void>((resolve) => flaky.listen(0, "127.0.0.1", resolve));
    try {
      const client = createQStash({
        url: `http://127.0.0.1:${(flaky.address() as AddressInfo).port}`,
        token: qstash.token,
        currentSigningKey: qstash.currentSigningKey,
        nextSigningKey: qstash.nextSigningKey,
      });
      await expect(client.cancel("msg_1")).resolves.toBeUndefined();
      expect(requests).toBe(2);
      requests = 0;
      cuts = 3;
      await expect(client.cancel("msg_2")).rejects.toThrow(/fetch failed/);
      expect(requests).toBe(2);
    } finally {
      flaky.closeAllConnections();
      await new Promise((resolve) => flaky.close(resolve));
    }
  });

  it("settles once when the callback comes twice, and refuses a forged callback", async () => {
    const app = await setup();
    await app.call("POST", "/v1/jobs", { body: { topic: "q", id: "c1" } });
    await app.settled();
    await stateOf(app, "c1", "finished");
    const callback = await until("the callback", async () =>
      qstash.deliveries().find((d) => d.kind === "callback" && d.destination.includes("id=c1")),
    );
    const replay = await app.app.request(
      new URL(callback.destination).pathname + new URL(callback.destination).search,
      {
        method: "POST",
        headers: callback.headers,
        body: callback.body,
      },
    );
    expect(await replay.json()).toEqual({ settled: false });
    const forged = await app.app.request(
      new URL(callback.destination).pathname + new URL(callback.destination).search,
      {
        method: "POST",
        headers: { ...callback.headers, "upstash-signature": "x.y.z" },
        body: callback.body,
      },
    );
    expect(forged.status).toBe(401);
    const tampered = await app.app.request(
      new URL(callback.destination).pathname + new URL(callback.destination).search,
      {
        method: "POST",
        headers: callback.headers,
        body: callback.body.replace('"status":204', '"status":500'),
      },
    );
    expect(tampered.status).toBe(401);
    expect((await app.queue.get("c1")).state).toBe("finished");
  });

  it("publishes in batches: 250 jobs due within a minute take 3 requests to QStash", async () => {
    const app = await setup();
    const now = Date.now();
    await app.queue.addBatch(
      Array.from({ length: 250 }, (_, n) => ({ topic: "q", id: `b${n}`, runAt: now + 30_000 + n })),
    );
    // The SDK sends with the global fetch: count its requests to /v2/batch.
    const spy = vi.spyOn(globalThis, "fetch");
    let batches: number;
    try {
      const run = await app.push();
      expect(run).toMatchObject({ claimed: 250, published: 250 });
      batches = spy.mock.calls.filter(([input]) => String(input).includes("/v2/batch")).length;
    } finally {
      spy.mockRestore();
    }
    expect(batches).toBe(3);
    // Clean up: nothing of this test reaches the receiver (delete cancels each message).
    for (let n = 0; n < 250; n++) await app.queue.delete(`b${n}`);
  });
});

describe("the subrequest budget", () => {
  it("claims QStash jobs past a third of the budget: they cost a request per 100, not 3 each", async () => {
    // 100 subrequests and claims of at most 10: a run of direct jobs stops at about 40 (2 or 3
    // requests each). QStash jobs go on, claim after claim, up to 16 claims (160 jobs, a publish
    // per 100).
    const app = await setup({ subrequests: 100, batch: 10 });
    const now = Date.now();
    await app.queue.addBatch(
      Array.from({ length: 250 }, (_, n) => ({ topic: "q", id: `s${n}`, runAt: now + 30_000 + n })),
    );
    const spy = vi.spyOn(globalThis, "fetch");
    let publishes: number;
    let first: Awaited<ReturnType<typeof app.push>>;
    try {
      first = await app.push();
      publishes = spy.mock.calls.filter(([input]) => String(input).includes("/v2/batch")).length;
    } finally {
      spy.mockRestore();
    }
    // Two publishes (100 and 60), and the hand-off's ask for a fresh run for the rest.
    expect(first).toMatchObject({ claimed: 160, published: 160, more: true, handedOff: 1 });
    expect(publishes).toBe(3);
    // The rest at the next run, which finds nothing more.
    const second = await app.push();
    expect(second).toMatchObject({ claimed: 90, published: 90, more: false });
    for (let n = 0; n < 250; n++) await app.queue.delete(`s${n}`);
  });
});

/** The QStash message id recorded on a job (via the record's meta, read through the queue). */
async function findMessage(app: PushApp, id: string): Promise<string | undefined> {
  const raw = (await app.redis.get(`${app.keys.base}j:${id}`)) as string | null;
  const meta = raw?.split("\n")[0]?.split("|");
  const messageId = meta?.find((field) => field.startsWith("msg_"));
  return messageId || undefined;
}
