// REDIS_CLUSTER_NODES: Node's configuration takes a Redis Cluster's seed nodes (and wins over
// REDIS_URL and Upstash), refuses a wrong value or an unreachable cluster with one line that
// never shows the password, `npm start` serves the API on a local three-master cluster, and a
// master killed mid-run makes its slot's calls 503 redis_unavailable until it is restarted from
// its AOF, with nothing lost; all with one keyspace (DQ_CLUSTER_PARTITIONS=1). The same under
// load, with topics on every master, is partitions.test.ts's.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type RedisCluster, startRedisCluster } from "../../dev/redis-cluster";
import { freePort } from "../../dev/redis-server";
import { RespConnection } from "../../dev/resp";
import { NodeEnvSchema, parseConfig } from "../../src/config";
import { DelayQueue, DelayqError } from "../../src/index";
import { type ClusterRedis, connectCluster } from "../../src/redis/cluster";
import { parseClusterNodes } from "../../src/redis/urls";
import {
  apiCaller,
  keysOn,
  librariesOn,
  npmStart,
  prefixOn,
  type Started,
} from "../support/cluster";
import { spawnNodeEntry } from "../support/service";

const PASSWORD = "Pw-cl-5e4d3c2b";

function failure(env: Record<string, unknown>): DelayqError {
  try {
    parseConfig(env, NodeEnvSchema);
  } catch (error) {
    if (error instanceof DelayqError) return error;
    throw error;
  }
  throw new Error("parseConfig accepted the environment");
}

describe("REDIS_CLUSTER_NODES in the configuration", () => {
  it("takes seed nodes, IPv6 in brackets, and wins over REDIS_URL and Upstash", () => {
    const config = parseConfig(
      {
        DQ_TOKENS: "a",
        REDIS_CLUSTER_NODES: " 10.0.0.1:7000, [::1]:7001,redis-2.internal:6379 ",
        REDIS_PASSWORD: PASSWORD,
        REDIS_URL: "redis://127.0.0.1:6379",
        UPSTASH_REDIS_REST_URL: "https://x.upstash.io",
        UPSTASH_REDIS_REST_TOKEN: "t",
      },
      NodeEnvSchema,
    );
    expect(config.REDIS_CLUSTER_NODES).toEqual([
      { host: "10.0.0.1", port: 7000 },
      { host: "::1", port: 7001 },
      { host: "redis-2.internal", port: 6379 },
    ]);
    expect(config.REDIS_PASSWORD).toBe(PASSWORD);
    // Alone, it is enough; empty, it is unset.
    expect(
      parseConfig({ DQ_TOKENS: "a", REDIS_CLUSTER_NODES: "h:1" }, NodeEnvSchema)
        .REDIS_CLUSTER_NODES,
    ).toEqual([{ host: "h", port: 1 }]);
    expect(failure({ DQ_TOKENS: "a", REDIS_CLUSTER_NODES: "" }).message).toMatch(
      /Redis is not configured: set REDIS_CLUSTER_NODES/,
    );
  });

  it.each([
    [" , ", /REDIS_CLUSTER_NODES is empty/],
    ["10.0.0.1", /entry 1 is not host:port/],
    ["10.0.0.1:7000,,10.0.0.2:7000", /entry 2 is empty/],
    ["10.0.0.1:7000,10.0.0.2:0", /entry 2 has a port out of range/],
    ["10.0.0.1:99999", /entry 1 has a port out of range/],
    [`redis://:${PASSWORD}@10.0.0.1:7000`, /entry 1 is a URL: give host:port alone/],
    [`default:${PASSWORD}@10.0.0.1:7000`, /entry 1 is not host:port/],
    ["10.0.0.1:port", /entry 1 is not host:port/],
  ])("refuses %j, naming the variable and the entry, never the value", (value, why) => {
    const message = failure({ DQ_TOKENS: "a", REDIS_CLUSTER_NODES: value }).message;
    expect(message).toMatch(/^delayq is misconfigured: REDIS_CLUSTER_NODES/);
    expect(message).toMatch(why);
    expect(message).not.toContain(PASSWORD);
    expect(message).not.toContain("10.0.0.1");
    // The parser says the same to a library caller.
    expect(parseClusterNodes(value)).toEqual(expect.stringMatching(why));
  });
});

describe("functions/node.ts refuses to start", () => {
  it("with one line for a bad REDIS_CLUSTER_NODES, without the password", async () => {
    const entry = spawnNodeEntry({
      DQ_TOKENS: "a",
      REDIS_CLUSTER_NODES: `redis://default:${PASSWORD}@127.0.0.1:7000`,
      REDIS_PASSWORD: PASSWORD,
      PORT: String(await freePort()),
    });
    expect(await entry.exited).toBe(1);
    const output = entry.output().trim();
    expect(output.split("\n")).toEqual([
      "delayq is misconfigured: REDIS_CLUSTER_NODES: entry 1 is a URL: give host:port alone (a password goes in REDIS_PASSWORD)",
    ]);
  });

  it("with one line naming REDIS_CLUSTER_NODES when no seed node answers, without the password", async () => {
    const [a, b] = [await freePort(), await freePort()];
    const started = Date.now();
    const entry = spawnNodeEntry({
      DQ_TOKENS: "a",
      REDIS_CLUSTER_NODES: `127.0.0.1:${a},127.0.0.1:${b}`,
      REDIS_PASSWORD: PASSWORD,
      DQ_REDIS_TIMEOUT_MS: "500",
      PORT: String(await freePort()),
    });
    expect(await entry.exited).toBe(1);
    const lines = entry.output().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^delayq is misconfigured: REDIS_CLUSTER_NODES names no reachable Redis Cluster node \(tried 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+ for 500 ms/,
    );
    expect(entry.output()).not.toContain(PASSWORD);
    // It gave up at the time limit rather than retrying for ever (tsx's start included).
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});

describe("npm start with REDIS_CLUSTER_NODES", () => {
  let cluster: RedisCluster;
  let service: Started;
  let other: ClusterRedis;
  let prefix: string;
  let url: string;
  const token = "cluster-admin-token";
  beforeAll(async () => {
    cluster = await startRedisCluster();
    prefix = await prefixOn(cluster, 1);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    service = await npmStart({
      REDIS_CLUSTER_NODES: cluster.seeds,
      // Set, and unreachable: the cluster wins.
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      DQ_TOKENS: token,
      DQ_PREFIX: prefix,
      // One keyspace: every key on the master of {prefix}'s slot (partitions.test.ts spreads).
      DQ_CLUSTER_PARTITIONS: "1",
      DQ_REDIS_TIMEOUT_MS: "1000",
      PORT: String(port),
    });
    other = connectCluster(cluster.seeds, { commandTimeoutMs: 1000 });
  }, 40_000);
  afterAll(async () => {
    await service?.stop();
    await other?.quit();
    await cluster?.stop();
  }, 20_000);

  const call = apiCaller(() => url, token);

  it("serves the API, its keys on the master of its slot alone", async () => {
    expect(service.output()).toMatch(/"event":"listening".*"redis":"cluster"/);
    const added = await call("POST", "/v1/jobs", { topic: "mail", id: "m1", body: { n: 1 } });
    expect(added).toMatchObject({ status: 201, body: { created: true } });
    const popped = await call("POST", "/v1/topics/mail/pop", {});
    const [job] = popped.body.jobs as { id: string; receipt: string }[];
    expect(job?.id).toBe("m1");
    expect((await call("POST", "/v1/jobs/m1/finish", { receipt: job?.receipt })).body).toEqual({
      finished: true,
    });
    expect((await call("GET", "/v1/jobs/m1")).body).toMatchObject({ job: { state: "finished" } });
    const counts = await Promise.all(cluster.nodes.map((node) => keysOn(node.port)));
    expect(counts[1]).toBeGreaterThan(0);
    expect([counts[0], counts[2]]).toEqual([0, 0]);
    // The function library went to every master, though one of them serves the calls.
    const libraries = await Promise.all(cluster.nodes.map((node) => librariesOn(node.port)));
    expect(libraries.map((names) => names.filter((n) => n.startsWith("delayq_")).length)).toEqual([
      1, 1, 1,
    ]);
  });

  it("loads the library again on a master that lost it, at the next call", async () => {
    const port = cluster.nodes[1]?.port as number;
    expect(await librariesOn(port, true)).toEqual([]);
    const added = await call("POST", "/v1/jobs", { topic: "mail", id: "m2", body: 2 });
    expect(added.status).toBe(201);
    expect((await librariesOn(port)).filter((n) => n.startsWith("delayq_"))).toHaveLength(1);
  });

  it("answers 503 redis_unavailable while its master is down, and loses nothing", async () => {
    const ids = ["k1", "k2", "k3", "k4", "k5"];
    for (const id of ids) {
      expect((await call("POST", "/v1/jobs", { topic: "kill", id, body: id })).status).toBe(201);
    }
    // A deployment on another master, through the same driver.
    const elsewhere = new DelayQueue({ redis: other, prefix: await prefixOn(cluster, 1, true) });
    await cluster.kill(1);

    const add = await call("POST", "/v1/jobs", { topic: "kill", id: "k6", body: "k6" });
    expect(add).toMatchObject({ status: 503, body: { error: { code: "redis_unavailable" } } });
    const get = await call("GET", "/v1/jobs/k1");
    expect(get).toMatchObject({ status: 503, body: { error: { code: "redis_unavailable" } } });
    expect(JSON.stringify(get.body)).not.toMatch(/127\.0\.0\.1|MOVED/);
    // The other masters' slots keep working meanwhile.
    await elsewhere.add({ topic: "other", id: "o1", body: 1 });
    expect((await elsewhere.pop("other")).map((j) => j.id)).toEqual(["o1"]);

    await cluster.restart(1);
    // Back within a few of the driver's reconnection attempts.
    let status = 0;
    for (let i = 0; i < 50 && status !== 201; i++) {
      status = (await call("POST", "/v1/jobs", { topic: "kill", id: "k6", body: "k6" })).status;
      if (status !== 201) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(status).toBe(201);
    const popped = await call("POST", "/v1/topics/kill/pop", { count: 100 });
    const got = (popped.body.jobs as { id: string }[]).map((j) => j.id).sort();
    expect(got).toEqual([...ids, "k6"]);
  }, 40_000);

  // Last: it leaves the cluster asking for a password.
  it("stops with one line when the cluster refuses REDIS_PASSWORD or asks for one, never quoting it", async () => {
    for (const node of cluster.nodes) {
      const admin = await RespConnection.open(node.port);
      await admin.call("CONFIG", "SET", "requirepass", PASSWORD);
      admin.close();
    }
    const start = async (password: string | undefined) => {
      const entry = spawnNodeEntry({
        DQ_TOKENS: "a",
        REDIS_CLUSTER_NODES: cluster.seeds,
        ...(password === undefined ? {} : { REDIS_PASSWORD: password }),
        DQ_REDIS_TIMEOUT_MS: "1000",
        PORT: String(await freePort()),
      });
      expect(await entry.exited).toBe(1);
      return entry.output().trim().split("\n");
    };
    const wrong = await start(`${PASSWORD}-not`);
    expect(wrong).toHaveLength(1);
    expect(wrong[0]).toMatch(
      /^delayq is misconfigured: the Redis Cluster of REDIS_CLUSTER_NODES refused REDIS_PASSWORD \(127\.0\.0\.1:\d+: WRONGPASS/,
    );
    expect(wrong[0]).not.toContain(PASSWORD);
    const none = await start(undefined);
    expect(none).toHaveLength(1);
    expect(none[0]).toMatch(/asks for a password \(.*NOAUTH.*\): set REDIS_PASSWORD$/);
    // With the password, the cluster driver works.
    const right = connectCluster(cluster.seeds, { password: PASSWORD, commandTimeoutMs: 1000 });
    await right.ready();
    const queue = new DelayQueue({ redis: right, prefix: "withpw" });
    await queue.add({ topic: "t", id: "p1", body: 1 });
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["p1"]);
    await right.quit();
  }, 30_000);

  it("answers 503 at once while every master is down, and stops promptly on SIGTERM", async () => {
    const port = await freePort();
    const entry = spawnNodeEntry({
      DQ_TOKENS: token,
      REDIS_CLUSTER_NODES: cluster.seeds,
      // The test before this one left the cluster asking for it.
      REDIS_PASSWORD: PASSWORD,
      DQ_PREFIX: prefix,
      DQ_CLUSTER_PARTITIONS: "1",
      DQ_REDIS_TIMEOUT_MS: "5000",
      PORT: String(port),
    });
    onTestFinished(() => {
      if (entry.child.exitCode === null) entry.child.kill("SIGKILL");
    });
    while (!entry.output().includes('"event":"listening"')) {
      expect(entry.child.exitCode).toBeNull();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (const index of cluster.nodes.keys()) await cluster.kill(index);
    const get = (path: string) =>
      fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${token}` } });
    // The first call finds the nodes gone; the next ones, the cluster being looked for again:
    // each answers 503 well before DQ_REDIS_TIMEOUT_MS, none waits in a queue.
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const res = await get("/v1/jobs/m1");
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        "redis_unavailable",
      );
      if (i > 0) expect(Date.now() - started).toBeLessThan(4000);
    }
    const stopping = Date.now();
    entry.child.kill("SIGTERM");
    expect(await entry.exited).toBe(0);
    expect(Date.now() - stopping).toBeLessThan(8000);
  }, 30_000);
});
