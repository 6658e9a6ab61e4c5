// A delivery over a connection the receiver closed: Node's fetches keep idle connections and
// reuse them, so a receiver (or load balancer) that closes idle ones meets the next delivery with
// a closed connection. Such a delivery is sent again at once, before any attempt is counted; other
// failures are not, and a connection lost twice is one failed attempt. Real receivers, real Redis.
import { createServer } from "node:net";
import { Agent, fetch as undiciFetch } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { deliverDirect, type Parcel, type Post, sendNotice } from "../../src/dispatch/delivery";
import { PushConfig } from "../../src/domain/push";
import type { RecordMeta } from "../../src/redis/record";
import { type PushApp, type Receiver, startReceiver, testPushApp } from "../support/push";

const SECRET = "test-secret-0123456789";
let receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

async function receiver() {
  const started = await startReceiver();
  receivers.push(started);
  return started;
}

/** Answers a connection's first request, and drops the connection when another comes on it. */
function closeOnReuse(rx: Receiver) {
  rx.answer((request) => (request.onConnection > 1 ? "reset" : { status: 204 }));
}

const settled = (app: PushApp) => app.settled();

/** A push topic to `url`; a failed attempt waits a minute (no second attempt within the test). */
async function pushApp(url: string) {
  const app = testPushApp();
  const put = await app.call("PUT", "/v1/topics/c", {
    body: { push: { url, secret: SECRET }, backoff: [60] },
  });
  expect(put.status).toBe(200);
  return app;
}

const META: RecordMeta = {
  state: "reserved",
  id: "j1",
  topic: "c",
  due: 0,
  createdAt: 0,
  ttr: 30,
  attempts: 1,
  maxAttempts: 5,
};

function parcel(url: string, timeout = 5): Parcel {
  return { meta: META, body: "1", push: PushConfig.parse({ url, secret: SECRET, timeout }) };
}

/** A moment for the fetch to put the connection back in its pool, idle. */
const idle = () => new Promise((r) => setTimeout(r, 20));

/** A fetch that counts its calls. */
function counted(post: Post = fetch) {
  const calls: RequestInit[] = [];
  const wrapped: Post = (url, init) => {
    calls.push(init);
    return post(url, init);
  };
  return { post: wrapped, calls };
}

describe("a delivery over a connection the receiver closed", () => {
  it("is sent again at once on another connection: two deliveries in a row both succeed at their first attempt", async () => {
    const rx = await receiver();
    closeOnReuse(rx);
    const app = await pushApp(`${rx.url}/hook`);
    for (const id of ["a", "b"]) {
      await app.call("POST", "/v1/jobs", { body: { topic: "c", id, body: 1 } });
      await settled(app);
      const { job } = (await app.call("GET", `/v1/jobs/${id}`)).json;
      expect(job).toMatchObject({ state: "finished", attempts: 1, lastDelivery: { status: 204 } });
    }
    // b went out on a's connection, which the receiver dropped, then on a new one.
    expect(rx.received.map((r) => [r.headers["delayq-id"], r.onConnection])).toEqual([
      ["a", 1],
      ["b", 2],
      ["b", 1],
    ]);
    expect(rx.received[2]?.headers["delayq-attempt"]).toBe("1");
    expect(rx.received[2]?.body).toBe(rx.received[1]?.body);
    expect(app.logs.filter((entry) => entry.event === "push_failed")).toEqual([]);
  });

  it("is sent again by undici's own fetch too (the one DQ_PRIVATE_PUSH's checked deliveries use)", async () => {
    const rx = await receiver();
    closeOnReuse(rx);
    const dispatcher = new Agent();
    const post: Post = (url, init) =>
      undiciFetch(url, { ...(init as object), dispatcher }) as unknown as Promise<Response>;
    try {
      for (let i = 0; i < 2; i++) {
        const attempt = await deliverDirect(parcel(`${rx.url}/hook`), {
          fetch: post,
          now: Date.now,
        });
        expect(attempt).toEqual({ settlement: { outcome: "done" }, status: 204 });
        await idle();
      }
      expect(rx.received.map((r) => r.onConnection)).toEqual([1, 2, 1]);
    } finally {
      await dispatcher.close();
    }
  });

  it("a failure notice is sent again the same way", async () => {
    const rx = await receiver();
    closeOnReuse(rx);
    const push = PushConfig.parse({ url: `${rx.url}/hook`, secret: SECRET });
    const dead: RecordMeta = { ...META, state: "dead", deadReason: "attempts" };
    for (let i = 0; i < 2; i++) {
      expect(await sendNotice(`${rx.url}/dead`, push, dead, "1", { now: Date.now })).toBe(true);
      await idle();
    }
    expect(rx.received.map((r) => r.onConnection)).toEqual([1, 2, 1]);
  });

  it("a connection dropped on the retry too is one failed attempt: two requests, never more", async () => {
    const rx = await receiver();
    // Every request is dropped once read, each on a fresh connection: a receiver that crashes.
    rx.answer(() => "reset");
    const app = await pushApp(`${rx.url}/hook`);
    await app.call("POST", "/v1/jobs", { body: { topic: "c", id: "x", body: 1 } });
    await settled(app);
    const { job } = (await app.call("GET", "/v1/jobs/x")).json;
    expect(job).toMatchObject({ state: "delayed", attempts: 1, lastDelivery: { status: 0 } });
    expect(job.lastDelivery.error).toMatch(
      /^could not reach the receiver: fetch failed \(other side closed\), also on an immediate retry$/,
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(rx.received.map((r) => r.onConnection)).toEqual([1, 1]);
    expect(app.logs.filter((entry) => entry.event === "push_failed")).toHaveLength(1);
  });

  it("is not sent again for a timeout, a refused connection or an HTTP error", async () => {
    const rx = await receiver();
    rx.answer((request) => (request.path === "/hang" ? "hang" : { status: 500 }));
    const hang = counted();
    const slow = await deliverDirect(parcel(`${rx.url}/hang`, 1), {
      fetch: hang.post,
      now: Date.now,
    });
    expect(slow).toMatchObject({ status: 0, error: "no answer within 1 s" });
    expect(hang.calls).toHaveLength(1);

    const failing = counted();
    const error = await deliverDirect(parcel(`${rx.url}/e500`), {
      fetch: failing.post,
      now: Date.now,
    });
    expect(error).toMatchObject({ status: 500, error: "HTTP 500" });
    expect(failing.calls).toHaveLength(1);
    expect(rx.received.map((r) => r.path)).toEqual(["/hang", "/e500"]);

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as { port: number };
    await new Promise((resolve) => closed.close(resolve));
    const refused = counted();
    const nobody = await deliverDirect(parcel(`http://127.0.0.1:${port}/hook`), {
      fetch: refused.post,
      now: Date.now,
    });
    expect(nobody.error).toMatch(/ECONNREFUSED/);
    expect(refused.calls).toHaveLength(1);
  });

  // The shapes measured from each runtime's fetch (workerd 1.20260426, Node 20's undici 6.24 and
  // undici 7.24): only a connection lost before an answer is tried again.
  const lost = (message: string, cause?: object) =>
    Object.assign(new TypeError(message), { cause });
  const coded = (code: string, message: string) => Object.assign(new Error(message), { code });
  const again = (what: string, error: Error) => ({ what, error, requests: 2 });
  const once = (what: string, error: Error) => ({ what, error, requests: 1 });
  it.each([
    again(
      "workerd: Network connection lost.",
      Object.assign(new Error("Network connection lost."), { retryable: true, remote: true }),
    ),
    again(
      "undici: other side closed",
      lost(
        "fetch failed",
        Object.assign(coded("UND_ERR_SOCKET", "other side closed"), { name: "SocketError" }),
      ),
    ),
    again("undici: closed", lost("fetch failed", coded("UND_ERR_SOCKET", "closed"))),
    again("undici: read ECONNRESET", lost("fetch failed", coded("ECONNRESET", "read ECONNRESET"))),
    again("node:http: socket hang up", coded("ECONNRESET", "socket hang up")),
    again("EPIPE", lost("fetch failed", coded("EPIPE", "write EPIPE"))),
    once(
      "undici: ECONNREFUSED",
      lost("fetch failed", coded("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1")),
    ),
    once(
      "undici: ENOTFOUND",
      lost("fetch failed", coded("ENOTFOUND", "getaddrinfo ENOTFOUND x.invalid")),
    ),
    once("undici: bad response", lost("fetch failed", coded("UND_ERR_SOCKET", "bad response"))),
    once(
      "undici: connect timeout",
      lost("fetch failed", coded("UND_ERR_CONNECT_TIMEOUT", "Connect Timeout Error")),
    ),
    once("workerd: DNS failure", new Error("internal error; reference = 19aro4pe4vnvb5b8surq0sfs")),
  ])("$what: $requests request(s)", async ({ error, requests }) => {
    const calls: RequestInit[] = [];
    const post: Post = async (_url, init) => {
      calls.push(init);
      throw error;
    };
    const attempt = await deliverDirect(parcel("http://receiver.test/hook"), {
      fetch: post,
      now: Date.now,
    });
    expect(attempt).toMatchObject({ settlement: { outcome: "fail" }, status: 0 });
    expect(calls).toHaveLength(requests);
  });

  it("the retry keeps the attempt's deadline, and is not made when mayRetry says no", async () => {
    const calls: RequestInit[] = [];
    const post: Post = (_url, init) => {
      calls.push(init);
      const signal = init.signal as AbortSignal;
      // The first is lost after 600 ms; the retry is never answered.
      return new Promise((_resolve, reject) => {
        if (calls.length === 1)
          setTimeout(() => reject(new Error("Network connection lost.")), 600);
        signal.addEventListener("abort", () => reject(signal.reason));
      });
    };
    const started = Date.now();
    const attempt = await deliverDirect(parcel("http://receiver.test/hook", 1), {
      fetch: post,
      now: Date.now,
    });
    expect(attempt.error).toBe("no answer within 1 s");
    expect(calls).toHaveLength(2);
    expect(calls[1]?.signal).toBe(calls[0]?.signal);
    expect(Date.now() - started).toBeLessThan(1400);

    calls.length = 0;
    const refusedRetry = await deliverDirect(parcel("http://receiver.test/hook", 1), {
      fetch: post,
      now: Date.now,
      mayRetry: () => false,
    });
    expect(refusedRetry.error).toBe("could not reach the receiver: Network connection lost.");
    expect(calls).toHaveLength(1);
  });
});
