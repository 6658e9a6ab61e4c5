// Topics spread over a Redis Cluster's masters (DQ_CLUSTER_PARTITIONS, 16 by default with
// REDIS_CLUSTER_NODES): `npm start` on a local three-master cluster puts 24 topics' keys on
// every master, an id stays one job's across partitions, reads by id find it wherever its topic
// lives, listings merge the partitions, and a master down takes only its own topics with it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisCluster, slotRanges, startRedisCluster } from "../../dev/redis-cluster";
import { freePort } from "../../dev/redis-server";
import { RespConnection } from "../../dev/resp";
import { DelayQueue } from "../../src/index";
import { connectCluster } from "../../src/redis/cluster";
import { djb2, partitions, slotOf } from "../../src/redis/partitions";
import {
  apiCaller,
  keysMatching,
  loadThroughKill,
  npmStart,
  type Started,
} from "../support/cluster";
import { spawnNodeEntry } from "../support/service";

describe("partitions", () => {
  it("put the N tags' slots in N equal ranges from home's, so masters of equal ranges share them", () => {
    const layout = partitions("dq", 16);
    expect(layout.prefixes[0]).toBe("dq");
    const home = slotOf("dq");
    layout.prefixes.forEach((prefix, k) => {
      const offset = (slotOf(prefix) - home + 16384) % 16384;
      expect(offset).toBeGreaterThanOrEqual(Math.floor((k * 16384) / 16));
      expect(offset).toBeLessThan(Math.floor(((k + 1) * 16384) / 16));
    });
    // One partition is the keyspace of one Redis: every topic and id home's.
    const one = partitions("dq", 1);
    expect([one.ofTopic("orders"), one.ofId("x")]).toEqual([0, 0]);
    expect(() => partitions("dq", 0)).toThrow(/from 1 to 256/);
  });

  it("computes CRC16 and djb2 as Redis and the scripts do (known values)", () => {
    // CLUSTER KEYSLOT answers these (Redis's own test values); djb2 as lua/lib/index.ts idHash.
    expect(slotOf("foo")).toBe(12182);
    expect(slotOf("123456789")).toBe(12739);
    expect(djb2("")).toBe(5381);
    expect(djb2("a")).toBe((5381 * 33 + 97) % 2 ** 32);
    // delayq's own topics and a watch's job ids are home's.
    const layout = partitions("dq", 16);
    expect(layout.ofTopic("__payments")).toBe(0);
    expect(layout.ofId("pay:abc")).toBe(0);
  });
});

describe("npm start on a Redis Cluster, topics spread over its masters", () => {
  let cluster: RedisCluster;
  let service: Started;
  let url: string;
  const token = "spread-admin-token";
  const prefix = `sp${crypto.randomUUID().slice(0, 6)}`;
  const layout = partitions(prefix, 16);
  const topics = Array.from({ length: 24 }, (_, i) => `topic-${i}`);
  beforeAll(async () => {
    cluster = await startRedisCluster();
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    service = await npmStart({
      REDIS_CLUSTER_NODES: cluster.seeds,
      DQ_TOKENS: token,
      DQ_PREFIX: prefix,
      DQ_REDIS_TIMEOUT_MS: "1000",
      DQ_TICK_INTERVAL_MS: "500",
      DQ_RETENTION_SECONDS: "3600",
      PORT: String(port),
    });
  }, 40_000);
  afterAll(async () => {
    await service?.stop();
    await cluster?.stop();
  }, 20_000);

  const call = apiCaller(() => url, token);
  /** The master (its index) that holds a topic's keys. */
  const masterOfTopic = (topic: string) => {
    const slot = slotOf(layout.prefixes[layout.ofTopic(topic)] as string);
    return slotRanges(3).findIndex(([from, to]) => slot >= from && slot <= to);
  };

  it("puts 24 topics' keys on every master, each topic's where its partition's tag says", async () => {
    for (const topic of topics) {
      const added = await call("POST", "/v1/jobs", { topic, id: `job-${topic}`, body: topic });
      expect(added.status).toBe(201);
    }
    const perMaster = await Promise.all(
      cluster.nodes.map((node) => keysMatching(node.port, `{${prefix}*`)),
    );
    const withKeys = perMaster.filter((keys) => keys.length > 0).length;
    expect(withKeys).toBeGreaterThanOrEqual(2);
    for (const topic of topics) {
      const holder = perMaster[masterOfTopic(topic)] as string[];
      expect(holder.filter((key) => key.endsWith(`t:${topic}:ready`))).toHaveLength(1);
    }
    // The topics land on every master: 24 topics over 16 partitions over 3 masters.
    expect(new Set(topics.map(masterOfTopic)).size).toBe(3);
  });

  it("keeps an id one job's across partitions: another topic's add is refused, reads find it", async () => {
    // Two topics in different partitions.
    const [a, b] = topics.filter(
      (t, i, all) => all.findIndex((u) => layout.ofTopic(u) === layout.ofTopic(t)) === i,
    );
    const id = "shared-id-1";
    expect((await call("POST", "/v1/jobs", { topic: a, id, body: 1 })).status).toBe(201);
    const again = await call("POST", "/v1/jobs", { topic: b, id, body: 2 });
    expect(again).toMatchObject({ status: 409, body: { error: { code: "job_exists" } } });
    // The same add again is a duplicate of its own job, not a new one.
    const same = await call("POST", "/v1/jobs", { topic: a, id, body: 1 });
    expect(same).toMatchObject({ status: 200, body: { created: false } });
    expect((await call("GET", `/v1/jobs/${id}`)).body).toMatchObject({ job: { topic: a } });
    // Nothing of it went to b.
    expect(
      (await call("POST", `/v1/topics/${b}/pop`, { count: 100 })).body.jobs.map((j: any) => j.id),
    ).not.toContain(id);
  });

  it("finishes, touches and deletes by id wherever the job's topic lives; a pop finishes another topic's job", async () => {
    const byPartition = new Map<number, string>();
    for (const t of topics)
      if (!byPartition.has(layout.ofTopic(t))) byPartition.set(layout.ofTopic(t), t);
    const [x, y] = [...byPartition.values()] as [string, string];
    for (const [topic, id] of [
      [x, "fx-1"],
      [y, "fy-1"],
      [y, "fy-2"],
    ] as const) {
      expect((await call("POST", "/v1/jobs", { topic, id, body: id })).status).toBe(201);
    }
    const [held] = (await call("POST", `/v1/topics/${x}/pop`, { count: 100 })).body.jobs.filter(
      (j: any) => j.id === "fx-1",
    );
    expect((await call("POST", "/v1/jobs/fx-1/touch", { receipt: held.receipt })).status).toBe(200);
    // Popping y finishes x's job on the way (finishAndPop).
    const popped = await call("POST", `/v1/topics/${y}/pop`, {
      count: 1,
      finish: [{ id: "fx-1", receipt: held.receipt }],
    });
    expect(popped.status).toBe(200);
    expect(popped.body.finished ?? popped.body.jobs).toBeDefined();
    expect((await call("GET", "/v1/jobs/fx-1")).body).toMatchObject({ job: { state: "finished" } });
    const [next] = popped.body.jobs;
    expect(
      (await call("POST", `/v1/jobs/${next.id}/finish`, { receipt: next.receipt })).body,
    ).toEqual({
      finished: true,
    });
    const other = next.id === "fy-1" ? "fy-2" : "fy-1";
    expect((await call("DELETE", `/v1/jobs/${other}`)).status).toBe(200);
    expect((await call("GET", `/v1/jobs/${other}`)).body).toMatchObject({
      job: { state: "deleted" },
    });
    expect((await call("GET", "/v1/jobs/never-added")).status).toBe(404);
  });

  it("gives an ended job's index entry its record's expiry within a tick", async () => {
    // An id whose partition is not its topic's has an index entry in its own.
    const topic = topics[0] as string;
    let id = "";
    for (let i = 0; id === ""; i++)
      if (layout.ofId(`ix-${i}`) !== layout.ofTopic(topic)) id = `ix-${i}`;
    expect((await call("POST", "/v1/jobs", { topic, id, body: 1 })).status).toBe(201);
    const entry = `{${layout.prefixes[layout.ofId(id)]}}:i:${id}`;
    const ttl = async () => {
      for (const node of cluster.nodes) {
        const connection = await RespConnection.open(node.port);
        const reply = await connection.call("PTTL", entry);
        connection.close();
        if (reply.type === "integer" && reply.value !== -2) return reply.value;
      }
      return -2;
    };
    expect(await ttl()).toBe(-1); // there, without an expiry while the job lives
    expect((await call("DELETE", `/v1/jobs/${id}`)).status).toBe(200);
    let left = -1;
    for (let i = 0; i < 40 && left === -1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      left = await ttl();
    }
    expect(left).toBeGreaterThan(3_000_000);
    expect(left).toBeLessThanOrEqual(3_600_000);
  });

  it("lists every partition's topics merged by name, page by page", async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const query =
        cursor === undefined ? "?limit=5" : `?limit=5&cursor=${encodeURIComponent(cursor)}`;
      const res = await call("GET", `/v1/topics${query}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.topics.map((t: any) => t.topic ?? t.name));
      if (!res.body.hasMore) break;
      cursor = res.body.cursor;
    }
    expect(seen).toEqual([...topics].sort());
  });

  it("refuses to start with another partition count than the keys were written with, in one line", async () => {
    const start = async (env: Record<string, string>) => {
      const entry = spawnNodeEntry({
        REDIS_CLUSTER_NODES: cluster.seeds,
        DQ_TOKENS: token,
        PORT: String(await freePort()),
        ...env,
      });
      expect(await entry.exited).toBe(1);
      return entry.output().trim().split("\n");
    };
    // This deployment was marked with 16 at its first start.
    expect(await start({ DQ_PREFIX: prefix, DQ_CLUSTER_PARTITIONS: "1" })).toEqual([
      `delayq is misconfigured: DQ_CLUSTER_PARTITIONS is 1, but Redis holds DQ_PREFIX "${prefix}" spread over 16 partitions: set DQ_CLUSTER_PARTITIONS=16 (it is fixed for a deployment's life)`,
    ]);
    // A deployment written with one keyspace, started with 16.
    const old = `${prefix}old`;
    const driver = connectCluster(cluster.seeds, { commandTimeoutMs: 2000 });
    await new DelayQueue({ redis: driver, prefix: old }).add({ topic: "t", body: 1 });
    await driver.quit();
    const [line, ...more] = await start({ DQ_PREFIX: old });
    expect(more).toEqual([]);
    expect(line).toMatch(
      new RegExp(
        `^delayq is misconfigured: DQ_CLUSTER_PARTITIONS is 16, but Redis holds DQ_PREFIX "${old}" in one keyspace`,
      ),
    );
  }, 30_000);

  it("keeps every acknowledged job of topics on every master through a master's death under load", async () => {
    const spread = [0, 1, 2].flatMap((m) =>
      topics.filter((t) => masterOfTopic(t) === m).slice(0, 2),
    );
    expect(spread).toHaveLength(6);
    await loadThroughKill(call, cluster, 0, spread);
  }, 40_000);

  // Last: it kills a master.
  it("answers 503 for the topics of a master that is down, serves the others, and loses nothing", async () => {
    const down = 2;
    const onDown = topics.filter((t) => masterOfTopic(t) === down);
    const onOthers = topics.filter((t) => masterOfTopic(t) !== down);
    expect(onDown.length).toBeGreaterThan(0);
    const idsFor = (topic: string) => [1, 2, 3].map((n) => `k-${topic}-${n}`);
    for (const topic of [onDown[0], onOthers[0]] as string[]) {
      for (const id of idsFor(topic)) {
        expect((await call("POST", "/v1/jobs", { topic, id, body: id })).status).toBe(201);
      }
    }
    await cluster.kill(down);
    const [deadTopic, liveTopic] = [onDown[0], onOthers[0]] as [string, string];
    const refused = await call("POST", "/v1/jobs", {
      topic: deadTopic,
      id: `k-${deadTopic}-4`,
      body: 4,
    });
    expect(refused).toMatchObject({ status: 503, body: { error: { code: "redis_unavailable" } } });
    // A topic of another master: added, popped, finished meanwhile.
    const live = await call("POST", `/v1/topics/${liveTopic}/pop`, { count: 100 });
    expect(live.status).toBe(200);
    const livePopped = live.body.jobs.filter((j: any) => j.id.startsWith("k-"));
    expect(livePopped.map((j: any) => j.id).sort()).toEqual(idsFor(liveTopic));
    for (const job of livePopped) {
      // An id whose index lives on the master that is down cannot be looked up: 503 too.
      const res = await call("POST", `/v1/jobs/${job.id}/finish`, { receipt: job.receipt });
      expect([200, 503]).toContain(res.status);
    }
    // The tick's work across partitions goes on without the master that is down.
    const driver = connectCluster(cluster.seeds, { commandTimeoutMs: 1000 });
    const queue = new DelayQueue({ redis: driver, prefix, partitions: 16 });
    expect(await queue.tickSlice()).toMatchObject({ promoted: expect.any(Number) });
    await driver.quit();
    await cluster.restart(down);
    let popped: any;
    for (let i = 0; i < 50; i++) {
      popped = await call("POST", `/v1/topics/${deadTopic}/pop`, { count: 100 });
      if (popped.status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(popped.status).toBe(200);
    expect(
      popped.body.jobs
        .map((j: any) => j.id)
        .filter((id: string) => id.startsWith("k-"))
        .sort(),
    ).toEqual(idsFor(deadTopic));
  }, 40_000);
});
