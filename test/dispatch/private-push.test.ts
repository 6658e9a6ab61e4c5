// DQ_PRIVATE_PUSH through functions/node.ts on the run's bridge: a tenant's token (one limited to
// `shop.*`) cannot point a push topic at this machine or the private network, not as written
// (400 at config time) and not through a name that resolves there (refused when connecting);
// the operator's own topics can. Receivers are real HTTP servers on 127.0.0.1.
import { lookup } from "node:dns/promises";
import { hostname } from "node:os";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startQStash } from "../../dev/qstash";
import { publicFetch, publicLookup } from "../../src/dispatch/public-fetch";
import { nonPublicKind } from "../../src/domain/destinations";
import { type Receiver, startReceiver } from "../support/push";
import { spawnNodeEntry, startTestService, type TestService } from "../support/service";

/** Whether this machine's name resolves to non-public addresses only (it does on most). */
const privateHostname = await lookup(hostname(), { all: true }).then(
  (addresses) => addresses.length > 0 && addresses.every((a) => nonPublicKind(a.address)),
  () => false,
);

let rx: Receiver;
const services: TestService[] = [];

beforeAll(async () => {
  rx = await startReceiver();
});

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
  await rx?.close();
});

async function service(vars: Record<string, string> = {}) {
  const started = await startTestService({ vars: { DQ_TICK_INTERVAL_MS: "300", ...vars } });
  services.push(started);
  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${started.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as any };
  };
  return { ...started, call };
}

type Service = Awaited<ReturnType<typeof service>>;

async function jobWhen(s: Service, id: string, done: (job: any) => boolean, ms = 8000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const { json } = await s.call(s.token, "GET", `/v1/jobs/${id}`);
    if (done(json.job) || Date.now() > deadline) return json.job;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("DQ_PRIVATE_PUSH=admin (the default)", () => {
  let s: Service;
  beforeAll(async () => {
    s = await service();
  });

  it("refuses a private URL on a topic a limited token reaches, whoever sets it", async () => {
    const url = `${rx.url}/shop`;
    const scoped = await s.call(s.scopedToken, "PUT", "/v1/topics/shop.orders", { push: { url } });
    expect(scoped.status).toBe(400);
    expect(scoped.json.error.code).toBe("invalid_request");
    expect(scoped.json.error.message).toMatch(
      /^push\.url: 127\.0\.0\.1 is a loopback address; this topic can be reached by a topic-limited token.*DQ_PRIVATE_PUSH=allow/,
    );
    // The admin token too: the tenant could read and use what it points at.
    const admin = await s.call(s.token, "PUT", "/v1/topics/shop.orders", {
      push: { url: "http://169.254.169.254/latest/meta-data/" },
    });
    expect(admin.status).toBe(400);
    expect(admin.json.error.message).toContain("link-local (cloud metadata)");
    const failureUrl = await s.call(s.scopedToken, "PATCH", "/v1/topics/shop.orders", {
      push: { url: "https://hooks.example.com/x", failureUrl: "http://[::ffff:10.0.0.5]/dead" },
    });
    expect(failureUrl.status).toBe(400);
    expect(failureUrl.json.error.message).toMatch(
      /^push\.failureUrl: \[::ffff:a00:5\] is a private/,
    );
    // Nothing was stored: the topic is still pulled.
    const stats = await s.call(s.token, "GET", "/v1/topics/shop.orders");
    expect(stats.json.config?.push).toBeUndefined();
    // A public URL is fine.
    const ok = await s.call(s.scopedToken, "PUT", "/v1/topics/shop.public", {
      push: { url: "https://hooks.example.com/delayq" },
    });
    expect(ok.status).toBe(200);
  });

  it("lets the operator's own topics (no limited token reaches them) push to this machine", async () => {
    const path = "/internal";
    const put = await s.call(s.token, "PUT", "/v1/topics/internal.jobs", {
      push: { url: `${rx.url}${path}` },
    });
    expect(put.status).toBe(200);
    await s.call(s.token, "POST", "/v1/jobs", { topic: "internal.jobs", id: "own-1", body: {} });
    const job = await jobWhen(s, "own-1", (j) => j.state === "finished");
    expect(job.state).toBe("finished");
    expect(rx.received.filter((r) => r.path === path)).toHaveLength(1);
  });

  it.skipIf(!privateHostname)(
    "refuses a name that resolves to a private address when it connects, sending nothing",
    async () => {
      const path = "/by-name";
      const url = `http://${hostname()}:${new URL(rx.url).port}${path}`;
      const put = await s.call(s.scopedToken, "PUT", "/v1/topics/shop.byname", {
        push: { url },
        maxAttempts: 1,
      });
      expect(put.status, JSON.stringify(put.json)).toBe(200);
      await s.call(s.scopedToken, "POST", "/v1/jobs", { topic: "shop.byname", id: "name-1" });
      const job = await jobWhen(s, "name-1", (j) => j.lastDelivery !== undefined);
      expect(job.state).toBe("dead");
      expect(job.lastDelivery.status).toBe(0);
      expect(job.lastDelivery.error).toMatch(
        new RegExp(`${hostname()} resolves to an? [a-z -]+ address`),
      );
      expect(rx.received.filter((r) => r.path === path)).toEqual([]);
    },
  );
});

describe("a config stored before the policy applied", () => {
  it("is refused when its delivery and failure notice would go out, and the notice dropped", async () => {
    // QStash (the stand-in) would deliver anywhere: a refused job must not be published to it.
    const qstash = await startQStash({ retryDelayMs: () => 50 });
    const viaQStash = {
      QSTASH_URL: qstash.url,
      QSTASH_TOKEN: qstash.token,
      QSTASH_CURRENT_SIGNING_KEY: qstash.currentSigningKey,
      QSTASH_NEXT_SIGNING_KEY: qstash.nextSigningKey,
      DQ_PUBLIC_URL: "http://127.0.0.1:9",
    };
    // Stored by a service that allows private URLs; delivered by one that does not (same keys).
    const open = await service({
      DQ_PRIVATE_PUSH: "allow",
      DQ_TICK_INTERVAL_MS: "3600000",
      ...viaQStash,
    });
    const put = await open.call(open.scopedToken, "PUT", "/v1/topics/shop.legacy", {
      push: { url: `${rx.url}/legacy`, failureUrl: `${rx.url}/legacy-dead` },
      maxAttempts: 1,
    });
    expect(put.status).toBe(200);
    const putQStash = await open.call(open.scopedToken, "PUT", "/v1/topics/shop.legacy-qs", {
      push: { url: `${rx.url}/legacy-qstash`, via: "qstash" },
      maxAttempts: 1,
    });
    expect(putQStash.status).toBe(200);
    await open.stop();
    const strict = await service({
      DQ_PREFIX: open.prefix,
      DQ_TOKENS: `${open.token},${open.scopedToken}:shop.*`,
      ...viaQStash,
    });
    const addedQStash = await strict.call(open.token, "POST", "/v1/jobs", {
      topic: "shop.legacy-qs",
      id: "legacy-qs-1",
    });
    expect(addedQStash.status).toBe(201);
    const qsJob = await jobWhen(
      { ...strict, token: open.token },
      "legacy-qs-1",
      (j) => j.state === "dead",
    );
    expect(qsJob.lastDelivery?.error).toMatch(/^refused: 127\.0\.0\.1 is a loopback address; /);
    expect(qsJob.state).toBe("dead");
    await qstash.close();
    const added = await strict.call(open.token, "POST", "/v1/jobs", {
      topic: "shop.legacy",
      id: "legacy-1",
    });
    expect(added.status).toBe(201);
    const job = await jobWhen(
      { ...strict, token: open.token },
      "legacy-1",
      (j) => j.state === "dead",
    );
    expect(job.state).toBe("dead");
    expect(job.lastDelivery.error).toMatch(/^refused: 127\.0\.0\.1 is a loopback address; /);
    // The tick sends notices every 300 ms: the refused one is taken off the queue, not retried.
    const redis = new Redis({
      url: inject("bridgeUrl"),
      token: inject("bridgeToken"),
      enableAutoPipelining: false,
    });
    const deadline = Date.now() + 5000;
    const waiting = `{${open.prefix}}:t:shop.legacy:notices`;
    while ((await redis.llen(waiting)) > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await redis.llen(waiting)).toBe(0);
    expect(await redis.llen(`${waiting}:retry`)).toBe(0);
    expect(rx.received.filter((r) => r.path.startsWith("/legacy"))).toEqual([]);
  });
});

describe("DQ_PRIVATE_PUSH=allow and =refuse", () => {
  it("allow: a limited token's topic may push to this machine", async () => {
    const s = await service({ DQ_PRIVATE_PUSH: "allow" });
    const put = await s.call(s.scopedToken, "PUT", "/v1/topics/shop.trusted", {
      push: { url: `${rx.url}/trusted` },
    });
    expect(put.status).toBe(200);
    await s.call(s.scopedToken, "POST", "/v1/jobs", { topic: "shop.trusted", id: "trusted-1" });
    expect((await jobWhen(s, "trusted-1", (j) => j.state === "finished")).state).toBe("finished");
  });

  it("refuse: not even the operator's own topics", async () => {
    const s = await service({ DQ_PRIVATE_PUSH: "refuse" });
    const put = await s.call(s.token, "PUT", "/v1/topics/internal.jobs", {
      push: { url: `${rx.url}/internal` },
    });
    expect(put.status).toBe(400);
    expect(put.json.error.message).toContain("(DQ_PRIVATE_PUSH=refuse)");
  });

  it("another value stops the service with a message naming the three", async () => {
    const entry = spawnNodeEntry({
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
      DQ_TOKENS: "t",
      DQ_PRIVATE_PUSH: "yes",
      PORT: "0",
    });
    expect(await entry.exited).toBe(1);
    expect(entry.output()).toContain("DQ_PRIVATE_PUSH must be admin");
    expect(entry.output()).not.toMatch(/\n\s+at /);
  });
});

describe("publicFetch", () => {
  it("refuses before connecting when any address of a name is private", async () => {
    const before = rx.received.length;
    const post = publicFetch({
      resolve: (_host, _options, callback) =>
        callback(null, [
          { address: "93.184.216.34", family: 4 },
          { address: "127.0.0.1", family: 4 },
        ]),
    });
    const port = new URL(rx.url).port;
    const error = await post(`http://receiver.test:${port}/x`, { method: "POST", body: "{}" }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect((error?.cause as Error | undefined)?.message).toBe(
      "receiver.test resolves to a loopback address, and this topic pushes to public addresses only (DQ_PRIVATE_PUSH)",
    );
    expect(rx.received.length).toBe(before);
  });

  it("hands the connection every address, or the first, as it was asked", () => {
    const lookup = publicLookup((_host, _options, callback) =>
      callback(null, [
        { address: "93.184.216.34", family: 4 },
        { address: "2606:2800:220:1::1", family: 6 },
      ]),
    );
    const calls: unknown[][] = [];
    lookup("example.com", { all: true }, (...args) => calls.push(args));
    lookup("example.com", {}, (...args) => calls.push(args));
    expect(calls).toEqual([
      [
        null,
        [
          { address: "93.184.216.34", family: 4 },
          { address: "2606:2800:220:1::1", family: 6 },
        ],
      ],
      [null, "93.184.216.34", 4],
    ]);
    const failed: unknown[][] = [];
    publicLookup((_host, _options, callback) =>
      callback(
        Object.assign(new Error("getaddrinfo ENOTFOUND nowhere.test"), { code: "ENOTFOUND" }),
        [],
      ),
    )("nowhere.test", {}, (...args) => failed.push(args));
    expect((failed[0]?.[0] as NodeJS.ErrnoException | undefined)?.code).toBe("ENOTFOUND");
  });
});
