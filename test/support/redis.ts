// Test helpers: a real Redis client for the queue, isolated per test: @upstash/redis against the
// shared bridge, or, with DELAYQ_TEST_DRIVER=tcp (the node-tcp project), the TCP driver (ioredis)
// against the run's redis-server behind it, or with DELAYQ_TEST_DRIVER=cluster (the node-cluster
// project), the cluster driver (ioredis's Cluster) against the run's local Redis Cluster.
import { Redis } from "@upstash/redis";
import { afterAll, inject } from "vitest";
import type { BridgeCounters } from "../../dev/bridge";
import { type ClusterRedis, connectCluster } from "../../src/redis/cluster";
import { connectRedis, type TcpRedis } from "../../src/redis/tcp";

/** Which driver the queue's client uses in this run: `rest` (default), `tcp` or `cluster`. */
export const TEST_DRIVER: "rest" | "tcp" | "cluster" =
  process.env.DELAYQ_TEST_DRIVER === "tcp"
    ? "tcp"
    : process.env.DELAYQ_TEST_DRIVER === "cluster"
      ? "cluster"
      : "rest";

/**
 * Partitions of the queues the helpers build (testQueue, testApp, testPushApp, and the runners
 * suites build beside them): on the cluster, as many as a deployment there has by default
 * (DQ_CLUSTER_PARTITIONS), so that topics spread over its masters; else one keyspace. A test that
 * reads its keys under the prefix asks for `partitions: 1`.
 */
export const TEST_PARTITIONS = TEST_DRIVER === "cluster" ? 16 : 1;

export type TestRedis = {
  /**
   * The client to give a DelayQueue. Under `tcp`, the queue's calls (`createScript`, `get`: every
   * method of the TCP driver) go over TCP, and the other @upstash/redis methods, which only tests
   * call to look at or bend the keyspace, go to the same server through the bridge.
   */
  redis: Redis;
  /** A key prefix no other test uses. */
  prefix: string;
  /** The bearer token this client presents; the bridge counts its requests separately. */
  token: string;
  /**
   * Counters of this client's requests: as the bridge saw them (`rest`), or the commands the
   * TCP client sent (`tcp`: one command is one request; its handshake and QUIT not counted).
   */
  stats(): Promise<BridgeCounters>;
};

/** The TCP and cluster connections opened by this test file, closed after it. */
const connections = new Set<TcpRedis | ClusterRedis>();
afterAll(async () => {
  await Promise.all([...connections].map((connection) => connection.quit()));
  connections.clear();
});

/**
 * A client of the shared bridge with its own token label and key prefix, so that tests never see
 * each other's keys and can read exactly their own request counts.
 */
export function testRedis(
  options: { autoPipelining?: boolean; automaticDeserialization?: boolean } = {},
): TestRedis {
  const url = inject("bridgeUrl");
  const label = crypto.randomUUID().slice(0, 8);
  const token = `${inject("bridgeToken")}:${label}`;
  const redis = new Redis({
    url,
    token,
    enableAutoPipelining: options.autoPipelining ?? true,
    automaticDeserialization: options.automaticDeserialization ?? true,
    enableTelemetry: false,
  });
  const prefix = `t${label}:`;
  if (TEST_DRIVER !== "rest") return overTcp(redis, prefix, token);
  return { redis, prefix, token, stats: () => bridgeStats(url, token) };
}

/**
 * Commands of the connection itself (its handshake, its end; a Cluster's `CLUSTER INFO` ready
 * check and `CLUSTER SLOTS`), which no REST request carries.
 */
const HOUSEKEEPING = new Set(["info", "client", "select", "auth", "hello", "quit", "cluster"]);

function overTcp(rest: Redis, prefix: string, token: string): TestRedis {
  const tcp =
    TEST_DRIVER === "cluster"
      ? connectCluster(inject("clusterNodes"), { commandTimeoutMs: 10_000 })
      : connectRedis(`redis://127.0.0.1:${inject("redisPort")}`, { commandTimeoutMs: 10_000 });
  connections.add(tcp);
  // A command queued while connecting passes here again when the queue is flushed: count it once.
  const seen = new WeakSet<object>();
  let sent = 0;
  // A Cluster's sendCommand has the same first argument; it sends a redirected command again.
  const client = tcp.ioredis as TcpRedis["ioredis"];
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command, ...more) => {
    if (!seen.has(command) && !HOUSEKEEPING.has(command.name.toLowerCase())) sent += 1;
    seen.add(command);
    return send(command, ...more);
  };
  const {
    ioredis: _ioredis,
    quit: _quit,
    ready: _ready,
    ...driver
  } = tcp as TcpRedis & { ready?: unknown };
  const redis = Object.create(rest) as Redis;
  for (const [name, method] of Object.entries(driver)) {
    Object.defineProperty(redis, name, { value: method, enumerable: true });
  }
  return {
    redis,
    prefix,
    token,
    stats: async () => ({
      requests: { single: sent, pipeline: 0, multiExec: 0, total: sent },
      commands: sent,
    }),
  };
}

export async function bridgeStats(url: string, token: string): Promise<BridgeCounters> {
  const res = await fetch(`${url}/__bridge/stats`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (!res.ok) throw new Error(`bridge stats: HTTP ${res.status}`);
  return (await res.json()) as BridgeCounters;
}
