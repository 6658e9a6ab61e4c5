// REDIS_URL: Node's configuration takes it instead of the REST variables, refuses a wrong one
// without quoting it, and functions/node.ts serves the API over it, TLS (rediss://) included.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, type RedisServer, startRedisServer } from "../../dev/redis-server";
import { RespConnection } from "../../dev/resp";
import { type ServiceProcess, startService } from "../../dev/service-process";
import { EnvSchema, NodeEnvSchema, parseConfig } from "../../src/config";
import { DelayQueue, DelayqError } from "../../src/index";
import { keys } from "../../src/redis/keys";
import { connectRedis } from "../../src/redis/tcp";
import { expectError } from "../support/expect";
import { spawnNodeEntry } from "../support/service";
import { makeTestCerts } from "../support/tls";

const PASSWORD = "Pw-9f8e7d6c";
const REST = { UPSTASH_REDIS_REST_URL: "https://x.upstash.io", UPSTASH_REDIS_REST_TOKEN: "t" };

function failure(env: Record<string, unknown>, schema = NodeEnvSchema): DelayqError {
  try {
    parseConfig(env, schema);
  } catch (error) {
    if (error instanceof DelayqError) return error;
    throw error;
  }
  throw new Error("parseConfig accepted the environment");
}

describe("REDIS_URL in the configuration", () => {
  it("on Node stands in for the REST variables, and wins when both are set", () => {
    const url = `rediss://default:${PASSWORD}@db.example.com:6380/2`;
    const tcp = parseConfig({ DQ_TOKENS: "a", REDIS_URL: url }, NodeEnvSchema);
    expect(tcp.REDIS_URL).toBe(url);
    expect(tcp.UPSTASH_REDIS_REST_URL).toBeUndefined();
    const both = parseConfig({ DQ_TOKENS: "a", REDIS_URL: url, ...REST }, NodeEnvSchema);
    expect(both.REDIS_URL).toBe(url);
    const rest = parseConfig({ DQ_TOKENS: "a", ...REST }, NodeEnvSchema);
    expect(rest.REDIS_URL).toBeUndefined();
    expect(rest.UPSTASH_REDIS_REST_URL).toBe(REST.UPSTASH_REDIS_REST_URL);
    // An empty value (a compose file's `REDIS_URL=`) is no value.
    expect(parseConfig({ DQ_TOKENS: "a", REDIS_URL: "", ...REST }, NodeEnvSchema).REDIS_URL).toBe(
      undefined,
    );
  });

  it("names the three ways to reach Redis when none is set, beside the other problems", () => {
    const message = failure({}).message;
    expect(message).toMatch(/DQ_TOKENS is not set/);
    expect(message).toMatch(
      /Redis is not configured: set REDIS_CLUSTER_NODES \(host:port,.*\) for a Redis Cluster, REDIS_URL \(redis:\/\/.*\) to use any Redis 7\+ or Valkey over TCP, or UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN/,
    );
    expect(failure({ DQ_TOKENS: "a", REDIS_URL: "" }).message).toMatch(/Redis is not configured/);
    expect(
      failure({ DQ_TOKENS: "a", UPSTASH_REDIS_REST_URL: REST.UPSTASH_REDIS_REST_URL }).message,
    ).toMatch(/UPSTASH_REDIS_REST_TOKEN is not set/);
  });

  it.each([
    [
      `https://default:${PASSWORD}@x.upstash.io`,
      /REDIS_URL is an HTTP URL.*UPSTASH_REDIS_REST_URL/,
    ],
    [`db.example.com:6379`, /REDIS_URL must look like redis:\/\/\[\[user\]:password@\]host/],
    [`memcached://db.example.com`, /REDIS_URL must look like redis:\/\//],
    [`redis://:${PASSWORD}@db.example.com/queue`, /REDIS_URL's path must be a database number/],
    [`redis://:${PASSWORD}@db.example.com:99999`, /REDIS_URL is not a valid URL.*percent-encode/],
    [`redis://`, /REDIS_URL has no host/],
    [` redis://:${PASSWORD}@h`, /REDIS_URL has spaces or a line break/],
  ])("refuses %s with a message that never quotes it", (url, message) => {
    const error = failure({ DQ_TOKENS: "a", REDIS_URL: url, ...REST });
    expect(error.code).toBe("internal_error");
    expect(error.message).toMatch(/^delayq is misconfigured: /);
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain(PASSWORD);
  });

  it("points a TCP URL pasted as the REST URL to REDIS_URL on Node only", () => {
    const env = { ...REST, DQ_TOKENS: "a", UPSTASH_REDIS_REST_URL: `rediss://:${PASSWORD}@h:6379` };
    expect(failure(env).message).toMatch(/on Node, a TCP URL goes in REDIS_URL instead/);
    const onWorker = failure(env, EnvSchema as unknown as typeof NodeEnvSchema).message;
    expect(onWorker).toMatch(/UPSTASH_REDIS_REST_URL is a Redis TCP URL/);
    expect(onWorker).not.toMatch(/REDIS_URL instead/);
  });

  it("is not the Worker's: it still needs the REST variables", () => {
    const onWorker = () => parseConfig({ DQ_TOKENS: "a", REDIS_URL: "redis://h:6379" });
    expect(onWorker).toThrow(/UPSTASH_REDIS_REST_URL is not set/);
  });
});

describe("functions/node.ts with REDIS_URL", () => {
  it("exits 1 with one line for a bad REDIS_URL, without a stack trace or the password", async () => {
    const entry = spawnNodeEntry({
      DQ_TOKENS: "a",
      REDIS_URL: `https://default:${PASSWORD}@x.upstash.io`,
      PORT: "1",
    });
    expect(await entry.exited).toBe(1);
    const output = entry.output();
    expect(output.trim()).toMatch(/^delayq is misconfigured: REDIS_URL is an HTTP URL/);
    expect(output.trim().split("\n")).toHaveLength(1);
    expect(output).not.toContain(PASSWORD);
  });
});

describe("a database number in REDIS_URL", () => {
  let server: RedisServer;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedisServer({ databases: 16 });
    admin = new Redis({ port: server.port, lazyConnect: true });
    await admin.connect();
    await admin.call("ACL", "SETUSER", "noselect", "on", ">pw", "~*", "+@all", "-select");
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  /** Keys per database number, of those that hold any. */
  async function keyspace(): Promise<Record<string, number>> {
    const info = (await admin.info("keyspace")).split("\n");
    return Object.fromEntries(
      info.flatMap((line) => {
        const match = /^db(\d+):keys=(\d+)/.exec(line);
        return match ? [[match[1], Number(match[2])]] : [];
      }),
    );
  }

  it("writes to that database", async () => {
    const redis = connectRedis(`redis://127.0.0.1:${server.port}/3`);
    try {
      await new DelayQueue({ redis, prefix: "db3" }).add({ topic: "t", id: "in-3" });
      expect(Object.keys(await keyspace())).toEqual(["3"]);
    } finally {
      await redis.quit();
      await admin.flushall();
    }
  });

  it.each([
    ["a database the server lacks", "/99", "", /database 99 .*DB index is out of range/],
    ["a user who may not SELECT", "/3", "noselect:pw@", /database 3 .*NOPERM.*\+select/],
  ])("fails on %s rather than writing to database 0", async (_what, db, user, message) => {
    const errors: string[] = [];
    const redis = connectRedis(`redis://${user}127.0.0.1:${server.port}${db}`, {
      commandTimeoutMs: 1000,
      onError: (error) => errors.push(error),
    });
    try {
      const queue = new DelayQueue({ redis, prefix: "nodb" });
      // The answer names no server; the log's detail says what went wrong.
      await expectError(
        queue.add({ topic: "t", id: "lost" }),
        "redis_unavailable",
        /^Redis is unavailable/,
        message,
      );
      expect(await keyspace()).toEqual({});
      expect(errors.join("\n")).toMatch(message);
    } finally {
      await redis.quit();
    }
  });
});

describe("functions/node.ts on a Redis that goes away", () => {
  it("answers 503 while it is down, logs the outage once and its end once, and recovers", async () => {
    let redis = await startRedisServer();
    const port = await freePort();
    const { child, output, exited } = spawnNodeEntry({
      REDIS_URL: `redis://127.0.0.1:${redis.port}`,
      DQ_TOKENS: "node-admin",
      DQ_PREFIX: `down${crypto.randomUUID().slice(0, 8)}`,
      DQ_REDIS_TIMEOUT_MS: "1000",
      PORT: String(port),
    });
    const lines = () =>
      output()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as { event?: string; redis?: string; message?: string });
    const health = () =>
      fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(5000) }).then(
        (res) => res.status,
        () => 0,
      );
    try {
      await expect.poll(health, { timeout: 30_000, interval: 100 }).toBe(200);
      expect(lines()[0]).toMatchObject({ event: "listening", redis: "tcp" });
      const add = await fetch(`http://127.0.0.1:${port}/v1/jobs`, {
        method: "POST",
        headers: { authorization: "Bearer node-admin", "content-type": "application/json" },
        body: JSON.stringify({ topic: "t", id: "a", body: "é" }),
      });
      expect(add.status).toBe(201);
      await redis.stop();
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        expect(await health()).toBe(503);
        expect(Date.now() - started).toBeLessThan(2500);
      }
      redis = await startRedisServer({ port: redis.port });
      await expect.poll(health, { timeout: 10_000, interval: 100 }).toBe(200);
      const events = lines().map((line) => line.event);
      expect(events.filter((event) => event === "redis_connection_error")).toHaveLength(1);
      expect(events.filter((event) => event === "redis_connection_restored")).toHaveLength(1);
      expect(output()).not.toMatch(/\n\s+at /);
    } finally {
      child.kill("SIGTERM");
      await exited;
      await redis.stop();
    }
  }, 60_000);
});

describe("functions/node.ts shutting down", () => {
  it("answers a waiting long-poll (no jobs) on SIGTERM, then exits 0", async () => {
    const redis = await startRedisServer();
    const port = await freePort();
    const { child, exited } = spawnNodeEntry({
      REDIS_URL: `redis://127.0.0.1:${redis.port}`,
      DQ_TOKENS: "node-admin",
      PORT: String(port),
    });
    try {
      const health = () =>
        fetch(`http://127.0.0.1:${port}/health`).then(
          (res) => res.status,
          () => 0,
        );
      await expect.poll(health, { timeout: 30_000, interval: 100 }).toBe(200);
      const started = Date.now();
      const pop = fetch(`http://127.0.0.1:${port}/v1/topics/idle/pop`, {
        method: "POST",
        headers: { authorization: "Bearer node-admin", "content-type": "application/json" },
        body: JSON.stringify({ wait: 20 }),
      });
      await new Promise((resolve) => setTimeout(resolve, 500));
      child.kill("SIGTERM");
      const answer = await pop;
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual({ jobs: [] });
      expect(Date.now() - started).toBeLessThan(5000);
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
      await redis.stop();
    }
  }, 60_000);
});

describe("rediss://", () => {
  let tls: TlsRedis;
  beforeAll(async () => {
    tls = await startTlsRedis();
  });
  afterAll(async () => {
    await tls?.stop();
  });

  it("is TLS for any case of the scheme, and a certificate Node cannot verify is refused", async () => {
    for (const scheme of ["rediss", "REDISS", "Rediss"]) {
      const connection = connectRedis(`${scheme}://localhost:${tls.tlsPort}`, {
        commandTimeoutMs: 3000,
      });
      try {
        // The test CA is not one Node trusts: the handshake fails on the certificate (a plain
        // connection to a TLS port would fail otherwise: reset, or no answer).
        await expectError(
          new DelayQueue({ redis: connection }).get("a"),
          "redis_unavailable",
          /^Redis is unavailable/,
          /no connection to the server of REDIS_URL \(.*certificate/,
        );
      } finally {
        await connection.quit();
      }
    }
  });

  it("serves the API over it from functions/node.ts when the CA is trusted", async () => {
    const prefix = `tls${crypto.randomUUID().slice(0, 8)}`;
    let service: ServiceProcess | undefined;
    try {
      service = await startService({
        mode: "node",
        port: await freePort(),
        stateDir: join(tls.certDir, "service"),
        stdio: "ignore",
        healthTimeoutMs: 30_000,
        vars: {
          REDIS_URL: `rediss://localhost:${tls.tlsPort}/0`,
          NODE_EXTRA_CA_CERTS: join(tls.certDir, "ca.crt"),
          DQ_TOKENS: "tls-admin",
          DQ_PREFIX: prefix,
        },
      });
      const call = async (path: string, body: unknown) => {
        const res = await fetch(`${service?.url}${path}`, {
          method: "POST",
          headers: { authorization: "Bearer tls-admin", "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        return { status: res.status, json: (await res.json()) as any };
      };
      const body = { order: "支付-42", note: "🎉" };
      expect((await call("/v1/jobs", { topic: "pay", id: "o42", body })).status).toBe(201);
      const popped = await call("/v1/topics/pay/pop", { count: 10 });
      expect(popped.status).toBe(200);
      expect(popped.json.jobs).toHaveLength(1);
      expect(popped.json.jobs[0]).toMatchObject({ id: "o42", body, state: "reserved" });
      const receipt = popped.json.jobs[0].receipt as string;
      expect((await call("/v1/jobs/o42/finish", { receipt })).json).toEqual({ finished: true });
      // The record is in the server behind the TLS port, under the service's prefix.
      const plain = await RespConnection.open(tls.port);
      const record = await plain.call("GET", keys(prefix).job("o42"));
      plain.close();
      expect(record.type === "bulk" && String(record.value)).toMatch(/"order":"支付-42"/);
    } finally {
      await service?.stop();
    }
  }, 60_000);
});

type TlsRedis = RedisServer & { tlsPort: number; certDir: string };

/** A redis-server with a TLS port too, its certificate (localhost) signed by a CA made here. */
async function startTlsRedis(): Promise<TlsRedis> {
  const certs = makeTestCerts();
  const certDir = certs.dir;
  const tlsPort = await freePort();
  const server = await startRedisServer({
    extraArgs: [
      "--tls-port",
      String(tlsPort),
      "--tls-cert-file",
      certs.cert,
      "--tls-key-file",
      certs.key,
      "--tls-ca-cert-file",
      certs.ca,
      "--tls-auth-clients",
      "no",
    ],
  });
  return {
    ...server,
    tlsPort,
    certDir,
    stop: async () => {
      await server.stop();
      rmSync(certDir, { recursive: true, force: true });
    },
  };
}
