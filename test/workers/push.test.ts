// Push delivery inside workerd: a request's waitUntil and the cron's scheduled handler deliver to a
// real receiver (in Node), and the QStash callback route verifies signatures with the real Receiver.
import {
  createExecutionContext,
  createScheduledController,
  env,
  SELF,
  waitOnExecutionContext,
} from "cloudflare:test";
import { Redis } from "@upstash/redis/cloudflare";
import { describe, expect, it } from "vitest";
import worker from "../../functions/worker";
import { DelayQueue } from "../../src/index";
import { call } from "./support";

const receiver = String((env as Record<string, unknown>).RECEIVER_URL);

async function received(
  id: string,
  ms = 5000,
): Promise<{ at: number; headers: Record<string, string>; body: string }[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = (await (await fetch(`${receiver}/__received?id=${id}`)).json()) as never[];
    if (got.length > 0 || Date.now() > deadline) return got;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const uid = () => crypto.randomUUID().slice(0, 8);

describe("push inside workerd", () => {
  it("a request delivers a job it added that is due within seconds (waitUntil)", async () => {
    const topic = `wp-${uid()}`;
    const put = await call("PUT", `/v1/topics/${topic}`, {
      push: { url: `${receiver}/hook`, secret: "workerd-secret-0123" },
    });
    expect(put.status).toBe(200);
    const id = `${topic}-a`;
    const added = await call("POST", "/v1/jobs", { topic, id, delay: 0.3, body: { n: 1 } });
    const [got] = await received(id);
    expect(got?.at).toBeGreaterThanOrEqual(added.json.job.dueAt);
    expect(JSON.parse(got?.body ?? "{}")).toMatchObject({ id, topic, body: { n: 1 }, attempt: 1 });
    expect(got?.headers["delayq-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
  });

  it("a topic switched to push delivers the jobs that waited at once, from the PUT's waitUntil", async () => {
    const topic = `wq-${uid()}`;
    const id = `${topic}-w`;
    await call("POST", "/v1/jobs", { topic, id, body: "x" });
    await call("PUT", `/v1/topics/${topic}`, { push: { url: `${receiver}/hook` } });
    const [got] = await received(id);
    expect(got?.headers["delayq-id"]).toBe(id);
  });

  it("the cron's scheduled handler claims and delivers due push jobs", async () => {
    const topic = `ws-${uid()}`;
    const id = `${topic}-b`;
    // Added while pulled, then the topic becomes pushed through the library, not a request (whose
    // own waitUntil would deliver it): only a tick does.
    await call("POST", "/v1/jobs", { topic, id, body: "x" });
    const vars = env as Record<string, string>;
    const queue = new DelayQueue({
      redis: new Redis({ url: vars.UPSTASH_REDIS_REST_URL, token: vars.UPSTASH_REDIS_REST_TOKEN }),
      prefix: vars.DQ_PREFIX ?? "dq",
    });
    await queue.configure(topic, { push: { url: `${receiver}/hook` } });
    expect(await received(id, 300)).toEqual([]);
    const ctx = createExecutionContext();
    await worker.scheduled(
      createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }),
      env as Record<string, unknown>,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    const [got] = await received(id);
    expect(got?.headers["delayq-id"]).toBe(id);
    expect((await call("GET", `/v1/jobs/${id}`)).json.job.state).toBe("finished");
  });

  it("the QStash callback route settles with a valid signature and refuses a forged one", async () => {
    const callback = "http://delayq.test/v1/qstash/callback?id=nobody&receipt=r.0";
    const body = JSON.stringify({ status: 200, body: "", header: {} });
    const good = await jwt("sig_workerd_current_key", callback, body);
    const res = await SELF.fetch(callback, {
      method: "POST",
      headers: { "upstash-signature": good },
      body,
    });
    expect(res.status).toBe(200);
    // No such reservation: taken, nothing settled.
    expect(await res.json()).toEqual({ settled: false });
    const forged = await jwt("sig_someone_else", callback, body);
    const refused = await SELF.fetch(callback, {
      method: "POST",
      headers: { "upstash-signature": forged },
      body,
    });
    expect(refused.status).toBe(401);
  });
});

/** A QStash-shaped JWT (HS256, the body's SHA-256 as a padded base64url claim), made here. */
async function jwt(secret: string, url: string, body: string): Promise<string> {
  const b64url = (bytes: Uint8Array) =>
    btoa(String.fromCharCode(...bytes))
      .replace(/\+/g, "-")
      .replace(/\//g, "_");
  const text = (value: unknown) =>
    b64url(new TextEncoder().encode(JSON.stringify(value))).replace(/=+$/, "");
  const now = Math.floor(Date.now() / 1000);
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)),
  );
  const header = text({ alg: "HS256", typ: "JWT" });
  const claims = text({
    iss: "Upstash",
    sub: url,
    iat: now,
    nbf: now,
    exp: now + 300,
    jti: `jwt_${now}`,
    body: b64url(digest),
  });
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${header}.${claims}`)),
  );
  return `${header}.${claims}.${b64url(mac).replace(/=+$/, "")}`;
}
