// npm run migrate-cluster: a deployment written with one keyspace (partitions: 1) moved to four
// partitions, on the shared test redis-server. Jobs in every state of ten topics are found
// afterwards by a queue of four partitions as they were, the home keyspace keeps nothing of the
// moved topics, a run stopped midway is finished by the next, and a run after the move (the
// command itself) says there is nothing to do.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type RedisCluster, startRedisCluster } from "../../dev/redis-cluster";
import { freePort } from "../../dev/redis-server";
import { DelayQueue, type Job } from "../../src/index";
import { connectCluster } from "../../src/redis/cluster";
import { keys } from "../../src/redis/keys";
import { type MigrateSummary, migrateCluster } from "../../src/redis/migrate-cluster";
import { partitions } from "../../src/redis/partitions";
import { createScriptRunner } from "../../src/redis/runner";
import { keysMatching, masterOf, npmStart, type Started } from "../support/cluster";
import { testQueue } from "../support/queue";

const root = join(import.meta.dirname, "..", "..");
const N = 4;

/** `npm run migrate-cluster` with this env: its exit code and output. */
function runCommand(env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", "migrate-cluster"], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk));
    child.once("exit", (code) => resolve({ code: code ?? -1, output }));
  });
}

/** Every key name under a hash tag, by SCAN. */
async function keysOf(redis: Redis, tag: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", `{${tag}}:*`, "COUNT", 1000);
    cursor = next;
    out.push(...found);
  } while (cursor !== "0");
  return out;
}

describe("npm run migrate-cluster", () => {
  const one = testQueue({ partitions: 1, retention: 3600 });
  const prefix = one.prefix.slice(0, -1);
  const layout = partitions(prefix, N);
  const home = keys(prefix);
  const clock = one.clock;
  /** The test's clock when the jobs are written (the pops and far jobs move it on later). */
  const t0 = clock.now;
  let redis: Redis;
  /** Ten topics, at least one in each partition (home's too), and a push topic. */
  const topics: string[] = [];
  const pushTopic = "hooks";
  const expected = new Map<string, Job>();
  const ready = new Map<string, string[]>();
  const dead = new Map<string, string[]>();
  /**
   * A moved topic with failure notices queued the earlier versions' way: of the first three
   * topics (each is among those written), one not in home.
   */
  const noticed = ["topic-0", "topic-1", "topic-2"].find((t) => layout.ofTopic(t) !== 0) as string;
  const ids = (jobs: readonly { id: string }[]) => jobs.map((job) => job.id).sort();

  beforeAll(async () => {
    redis = new Redis(inject("redisPort"), { lazyConnect: false });
    for (let i = 0; topics.length < 10 || !covered(); i++) {
      const topic = `topic-${i}`;
      const byPart = topics.filter((t) => layout.ofTopic(t) === layout.ofTopic(topic)).length;
      if (byPart < 3) topics.push(topic);
    }
    const { queue } = one;
    for (const topic of topics) {
      // Reserved, dead and finished first: each taken by a pop of its own.
      for (const end of ["reserved", "dead", "finished"] as const) {
        await queue.add({ topic, id: `${topic}.${end}`, body: { end } });
        const [job] = await queue.pop(topic);
        expect(job?.id).toBe(`${topic}.${end}`);
        if (end === "dead") await queue.bury(job?.id as string, { receipt: job?.receipt });
        if (end === "finished") await queue.finish(job?.id as string, { receipt: job?.receipt });
      }
      await queue.add({ topic, id: `${topic}.deleted`, body: 1 });
      await queue.delete(`${topic}.deleted`);
      for (const n of [1, 2]) await queue.add({ topic, id: `${topic}.ready${n}`, body: n });
      await queue.add({ topic, id: `${topic}.near`, delay: 60, body: "near" });
      // Over 2 minutes ahead: a slot list, not the delayed zset.
      await queue.add({ topic, id: `${topic}.far`, delay: 3600, body: "far" });
      await queue.add({ topic, id: `${topic}.farther`, delay: 7200, body: "far" });
      ready.set(topic, [`${topic}.ready1`, `${topic}.ready2`]);
      dead.set(topic, [`${topic}.dead`]);
    }
    await queue.configure(pushTopic, { push: { url: "https://hooks.example/in" } });
    await queue.add({ topic: pushTopic, id: "hook-1", delay: 600, body: "push" });
    for (const id of allIds()) expected.set(id, await queue.get(id));
    // Failure notices as an earlier version queued them, in one list for every topic.
    await redis.rpush(home.legacyNotices, `${clock.now}|${noticed}.dead`, "no-such-job");
    await redis.rpush(
      home.legacyNoticeRetries,
      `${clock.now + 60_000}|${clock.now}|${noticed}.dead`,
    );
    expect(await redis.exists(`${home.slots(topics[0] as string)}`)).toBe(1);
  }, 60_000);
  afterAll(async () => {
    redis?.disconnect();
  });

  function covered(): boolean {
    const seen = new Set(topics.map((t) => layout.ofTopic(t)));
    return seen.size === N;
  }
  function allIds(): string[] {
    const suffixes = ["reserved", "dead", "finished", "deleted", "ready1", "ready2", "near", "far"];
    return [...topics.flatMap((t) => [...suffixes, "farther"].map((s) => `${t}.${s}`)), "hook-1"];
  }
  /** The partitions a start with four finds the keys in (service.ts: layoutChecked). */
  const layoutFound = () =>
    createScriptRunner(one.redis, prefix, 3600_000, N).run("layoutMark", undefined, [N]);
  const four = () =>
    new DelayQueue({
      redis: one.redis,
      prefix,
      clock: () => clock.now,
      partitions: N,
      retention: 3600,
    });

  it("leaves the jobs out of reach of four partitions before it runs", async () => {
    const moved = allIds().filter((id) => layout.ofTopic(expected.get(id)?.topic ?? "") !== 0);
    expect(moved.length).toBeGreaterThan(20);
    const queue = four();
    await expect(queue.get(moved[0] as string)).rejects.toMatchObject({ code: "job_not_found" });
    // And a service with four would stop at its start, asking for this command.
    expect(await layoutFound()).toBe(1);
  });

  it("moves a run stopped midway, then finishes it on the next run", async () => {
    let topicsDone = 0;
    const stopped = migrateCluster({
      redis,
      prefix,
      partitions: N,
      page: 2,
      log: (entry) => {
        if (entry.event === "migrate_topic" && ++topicsDone === 2) throw new Error("stopped");
      },
    });
    await expect(stopped).rejects.toThrow("stopped");
    const lines: Record<string, unknown>[] = [];
    const summary = await migrateCluster({
      redis,
      prefix,
      partitions: N,
      page: 3,
      log: (entry) => lines.push(entry),
    });
    const moving = [...topics, pushTopic].filter((t) => layout.ofTopic(t) !== 0);
    // The second run moves what the first left: the topics it had not reached, and the records
    // and memberships of all.
    expect(summary).toMatchObject({ outcome: "done", topics: moving.length });
    expect(summary.records).toBeGreaterThan(0);
    const done = lines.find((line) => line.event === "migrate_done") as MigrateSummary | undefined;
    expect(done).toMatchObject({ records: summary.records, keys: summary.keys });
    expect(JSON.stringify(lines)).not.toMatch(/"near"|"far"|"end"/);
    expect(await redis.get(home.layout)).toBe(String(N));
    expect(await layoutFound()).toBe(N);
  }, 60_000);

  it("finds every job as it was, by id, with four partitions", async () => {
    const queue = four();
    for (const [id, job] of expected) expect(await queue.get(id)).toEqual(job);
  });

  it("keeps nothing of a moved topic in home", async () => {
    const left = await keysOf(redis, prefix);
    for (const topic of [...topics, pushTopic].filter((t) => layout.ofTopic(t) !== 0)) {
      expect(left.filter((key) => key.includes(`:t:${topic}:`))).toEqual([]);
      expect(left.filter((key) => key.startsWith(`${home.job(topic)}.`))).toEqual([]);
      for (const set of ["topics", "schedule", "pushTopics", "claims"] as const) {
        expect(await redis.zscore(home[set], topic)).toBeNull();
      }
    }
    // The push topic's claim and the schedule's marker are in its partition.
    expect(layout.ofTopic(pushTopic)).not.toBe(0);
    const at = keys(layout.prefixes[layout.ofTopic(pushTopic)] as string);
    expect(await redis.zscore(at.claims, pushTopic)).not.toBeNull();
    expect(await redis.zscore(at.schedule, "~push")).not.toBeNull();
    expect(await redis.zscore(home.schedule, "~push")).toBeNull();
    // The earlier versions' notices went into the topic's own lists, and came along.
    expect(layout.ofTopic(noticed)).not.toBe(0);
    const there = keys(layout.prefixes[layout.ofTopic(noticed)] as string);
    expect(await redis.lrange(there.topicNotices(noticed), 0, -1)).toEqual([
      `${t0}|${noticed}.dead`,
    ]);
    expect(await redis.lrange(there.topicNoticeRetries(noticed), 0, -1)).toEqual([
      `${t0 + 60_000}|${t0}|${noticed}.dead`,
    ]);
    expect(await redis.zscore(there.noticing, noticed)).toBe(String(t0));
    expect(await redis.zscore(there.schedule, "~notices")).toBe(String(t0));
    expect(await redis.exists(home.legacyNotices, home.legacyNoticeRetries)).toBe(0);
    // Index entries where jobs' ids are another partition's than their topics'.
    const crossed = allIds().filter(
      (id) => layout.ofId(id) !== layout.ofTopic(expected.get(id)?.topic ?? ""),
    );
    expect(crossed.length).toBeGreaterThan(0);
    for (const id of crossed) {
      const entry = await redis.get(keys(layout.prefixes[layout.ofId(id)] as string).jobIndex(id));
      expect(entry).toMatch(
        new RegExp(`^${layout.ofTopic(expected.get(id)?.topic ?? "")}\\|\\d+$`),
      );
    }
  });

  it("keeps each id one job's: another partition's topic cannot add it again", async () => {
    const queue = four();
    const topicOf = (id: string) => expected.get(id)?.topic as string;
    // One job indexed in its id's partition, one found by its record there.
    const indexed = allIds().find((id) => layout.ofId(id) !== layout.ofTopic(topicOf(id)));
    const local = allIds().find(
      (id) => layout.ofId(id) === layout.ofTopic(topicOf(id)) && layout.ofId(id) !== 0,
    );
    for (const id of [indexed, local] as string[]) {
      const other = topics.find((t) => layout.ofTopic(t) !== layout.ofTopic(topicOf(id)));
      await expect(queue.add({ topic: other as string, id, body: 0 })).rejects.toMatchObject({
        code: "job_exists",
      });
    }
  });

  it("lists the topics, their dead jobs and pops their ready ones, then their far ones", async () => {
    const queue = four();
    const listed = (await queue.topics({ limit: 100 })).topics.map((t) => t.topic);
    expect(listed).toEqual(expect.arrayContaining([...topics, pushTopic]));
    expect((await queue.topic(pushTopic)).config.push).toMatchObject({
      url: "https://hooks.example/in",
    });
    for (const topic of topics) {
      expect(ids((await queue.list(topic, { state: "dead" })).jobs)).toEqual(dead.get(topic));
      expect(ids(await queue.pop(topic, { count: 100 }))).toEqual(ready.get(topic));
    }
    // The slot lists came along: two hours on, the far jobs are handed out.
    clock.advance(7300_000);
    for (const topic of topics) {
      const popped = ids(await queue.pop(topic, { count: 100 }));
      expect(popped).toEqual(
        expect.arrayContaining([`${topic}.near`, `${topic}.far`, `${topic}.farther`]),
      );
    }
  });

  it("says there is nothing to do once moved, and refuses another count (the command)", async () => {
    const env = { REDIS_URL: `redis://127.0.0.1:${inject("redisPort")}`, DQ_PREFIX: prefix };
    const [again, other, unset] = await Promise.all([
      runCommand({ ...env, DQ_CLUSTER_PARTITIONS: String(N) }),
      runCommand({ ...env, DQ_CLUSTER_PARTITIONS: "8" }),
      runCommand(env),
    ]);
    // On one Redis the count has no default: it must be the service's.
    expect(unset.code).toBe(1);
    expect(unset.output).toMatch(/"event":"migrate_failed".*Set DQ_CLUSTER_PARTITIONS/);
    expect(again).toMatchObject({ code: 0 });
    expect(again.output).toMatch(/"event":"migrate_nothing_to_do".*in 4 partitions already/);
    expect(other.code).toBe(1);
    expect(other.output).toMatch(
      /spread over 4 partitions already, not 8.*DQ_CLUSTER_PARTITIONS=4/,
    );
  }, 60_000);
});

describe("npm run migrate-cluster on a Redis Cluster, then npm start", () => {
  let cluster: RedisCluster;
  let service: Started | undefined;
  const prefix = `mc${crypto.randomUUID().slice(0, 6)}`;
  const token = "migrate-admin-token";
  const layout = partitions(prefix, 16);
  /** A topic in each of the 16 partitions: each master holds some after the move. */
  const topics: string[] = [];
  for (let i = 0; topics.length < 16; i++) {
    const topic = `orders-${i}`;
    if (!topics.some((t) => layout.ofTopic(t) === layout.ofTopic(topic))) topics.push(topic);
  }
  const before = new Map<string, Job>();
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 40_000);
  afterAll(async () => {
    await service?.stop();
    await cluster?.stop();
  }, 20_000);

  it("moves one keyspace's topics over the masters; the service started with 16 serves every job", async () => {
    const client = connectCluster(cluster.seeds, { commandTimeoutMs: 10_000 });
    await client.ready();
    const queue = new DelayQueue({ redis: client, prefix, partitions: 1, retention: 3600 });
    for (const topic of topics) {
      await queue.add({ topic, id: `${topic}.done`, body: 1 });
      const [held] = await queue.pop(topic);
      await queue.finish(held?.id as string, { receipt: held?.receipt });
      await queue.add({ topic, id: `${topic}.ready`, body: 2 });
      await queue.add({ topic, id: `${topic}.far`, delay: 3600, body: 3 });
    }
    for (const topic of topics) {
      for (const end of ["done", "ready", "far"]) {
        before.set(`${topic}.${end}`, await queue.get(`${topic}.${end}`));
      }
    }
    // One keyspace: every key on the master of home's slot.
    const home = await masterOf(cluster, prefix);
    const held = await Promise.all(cluster.nodes.map((n) => keysMatching(n.port, `{${prefix}*`)));
    expect(held.map((keys) => keys.length > 0)).toEqual(cluster.nodes.map((_, i) => i === home));
    await client.quit();

    // DQ_CLUSTER_PARTITIONS unset: 16 on a cluster, as the service's default.
    const moved = await runCommand({ REDIS_CLUSTER_NODES: cluster.seeds, DQ_PREFIX: prefix });
    expect(moved.code, moved.output).toBe(0);
    const done = JSON.parse(
      moved.output.split("\n").find((line) => line.includes("migrate_done")) as string,
    );
    const away = topics.filter((t) => layout.ofTopic(t) !== 0);
    expect(done).toMatchObject({ partitions: 16, topics: away.length, records: away.length * 3 });
    const after = await Promise.all(cluster.nodes.map((n) => keysMatching(n.port, `{${prefix}*`)));
    expect(after.every((keys) => keys.length > 0)).toBe(true);

    const port = await freePort();
    service = await npmStart({
      REDIS_CLUSTER_NODES: cluster.seeds,
      DQ_TOKENS: token,
      DQ_PREFIX: prefix,
      DQ_RETENTION_SECONDS: "3600",
      PORT: String(port),
    });
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return (await res.json()) as Record<string, any>;
    };
    for (const [id, job] of before) {
      const read = await call("GET", `/v1/jobs/${encodeURIComponent(id)}`);
      expect(read.job).toMatchObject({ id, topic: job.topic, state: job.state, body: job.body });
    }
    for (const topic of topics) {
      const popped = await call("POST", `/v1/topics/${topic}/pop`, { count: 10 });
      expect(popped.jobs.map((j: Job) => j.id)).toEqual([`${topic}.ready`]);
    }
  }, 90_000);
});
