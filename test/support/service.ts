// Test helpers: the service as a real process (functions/node.ts) on the shared bridge, for suites
// that drive it over HTTP from outside (the Python and PHP clients, black-box checks).
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { Redis } from "@upstash/redis";
import { afterAll, inject } from "vitest";
import { freePort } from "../../dev/redis-server";
import { type ServiceProcess, startService } from "../../dev/service-process";
import { NodeEnvSchema, parseConfig } from "../../src/config";
import type { Logger } from "../../src/log";
import { type ClusterRedis, connectCluster } from "../../src/redis/cluster";
import { buildService, type ClusterRedisSettings, type Service } from "../../src/service";
import { TEST_DRIVER } from "./redis";

export type TestService = {
  /** e.g. http://127.0.0.1:40123 */
  url: string;
  /** A bearer token with every topic. */
  token: string;
  /** A bearer token limited to topics matching `shop.*`. */
  scopedToken: string;
  /** The key prefix the service writes under (its own, so tests never see each other's keys). */
  prefix: string;
  stop(): Promise<void>;
};

/**
 * Starts functions/node.ts on a free port against the run's bridge, with its own key prefix.
 * `vars` adds or overrides the service's environment (DQ_*, QSTASH_*, ...).
 */
export async function startTestService(
  options: { vars?: Record<string, string>; stdio?: "inherit" | "ignore" } = {},
): Promise<TestService> {
  const label = crypto.randomUUID().slice(0, 8);
  const token = `svc-admin-${label}`;
  const scopedToken = `svc-shop-${label}`;
  const prefix = `svc${label}`;
  const port = await freePort();
  const service: ServiceProcess = await startService({
    mode: "node",
    port,
    stateDir: `/tmp/delayq-test-service-${label}`,
    stdio: options.stdio ?? "ignore",
    vars: {
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: `${inject("bridgeToken")}:${label}`,
      DQ_TOKENS: `${token},${scopedToken}:shop.*`,
      DQ_PREFIX: prefix,
      DQ_POLL_INTERVAL_MS: "200",
      ...options.vars,
    },
  });
  return { url: service.url, token, scopedToken, prefix, stop: service.stop };
}

/** functions/node.ts as a bare process: its output so far, and its exit code once it exits. */
export type NodeEntry = {
  child: ChildProcess;
  /** Its stdout and stderr so far, as one text. */
  output(): string;
  exited: Promise<number | null>;
};

/** Spawns functions/node.ts with `env` and PATH alone (no other variable of the test's). */
export function spawnNodeEntry(env: Record<string, string | undefined>): NodeEntry {
  const child = spawn(process.execPath, ["--import", "tsx", "functions/node.ts"], {
    cwd: join(import.meta.dirname, "..", ".."),
    env: { PATH: process.env.PATH, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { child, output: () => output, exited };
}

/**
 * The service as buildService wires it, in this process, on the run's bridge with a key prefix
 * of its own (`<name><label>`): `vars` are its DQ_* settings, `log` its logger (none by
 * default). Also answers a client of the same Redis user (to look at its keys) and the prefix.
 * In the node-cluster project the service reaches the run's cluster as functions/node.ts does
 * with REDIS_CLUSTER_NODES (the cluster driver); the client to look at keys still goes through
 * the bridge, which follows the cluster's redirections.
 */
export function bridgeService(
  name: string,
  vars: Record<string, string>,
  log: Logger = () => {},
): { service: Service; redis: Redis; prefix: string } {
  const label = crypto.randomUUID().slice(0, 8);
  const url = inject("bridgeUrl");
  const token = `${inject("bridgeToken")}:${label}`;
  const prefix = `${name}${label}`;
  const env = {
    UPSTASH_REDIS_REST_URL: url,
    UPSTASH_REDIS_REST_TOKEN: token,
    DQ_PREFIX: prefix,
    ...vars,
  };
  const onCluster = TEST_DRIVER === "cluster";
  const service = buildService(
    env,
    (settings) => new Redis({ url: settings.url, token: settings.token, ...settings.options }),
    {
      log,
      ...(onCluster && {
        config: parseConfig({ ...env, REDIS_CLUSTER_NODES: inject("clusterNodes") }, NodeEnvSchema),
        makeClusterRedis: (settings: ClusterRedisSettings) => {
          const cluster = connectCluster(settings.nodes, {
            commandTimeoutMs: settings.commandTimeoutMs,
          });
          clusters.add(cluster);
          return cluster;
        },
      }),
    },
  );
  return { service, redis: new Redis({ url, token }), prefix };
}

/** The cluster connections bridgeService opened in this test file, closed after it. */
const clusters = new Set<ClusterRedis>();
afterAll(async () => {
  await Promise.all([...clusters].map((cluster) => cluster.quit()));
  clusters.clear();
});
