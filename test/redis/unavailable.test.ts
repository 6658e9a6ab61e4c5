// Redis's "not now" replies reach callers as 503 redis_unavailable on both drivers, never as a
// 500 that blames a delayq script: a redis-server of the test's own, full (maxmemory, noeviction),
// behind a bridge of its own (REST, the Worker's only path) and over TCP. Raised inside a script,
// Redis's OOM names the script ("… script: <sha>, on @user_script:1."), which REST read as a bug.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Bridge, startBridge } from "../../dev/bridge";
import { type RedisServer, startRedisServer } from "../../dev/redis-server";
import { DelayQueue } from "../../src/index";
import { REDIS_CLIENT_OPTIONS, redisError } from "../../src/redis/runner";
import { connectRedis, type TcpRedis } from "../../src/redis/tcp";
import { expectError } from "../support/expect";
import { admin } from "../support/redis-admin";

let server: RedisServer;
let bridge: Bridge;
let tcp: TcpRedis | undefined;

beforeAll(async () => {
  server = await startRedisServer({ extraArgs: ["--maxmemory-policy", "noeviction"] });
  bridge = await startBridge({ redisPort: server.port, tokens: "full-token" });
  // Full: data, then a memory limit below what it takes.
  await admin(server.port, "SET", "ballast", "x".repeat(8 * 1024 * 1024));
  await admin(server.port, "CONFIG", "SET", "maxmemory", String(4 * 1024 * 1024));
}, 30_000);

afterAll(async () => {
  await tcp?.quit();
  await bridge?.close();
  await server?.stop();
});

describe("a Redis out of memory", () => {
  it("is redis_unavailable over REST, for a script and for a plain command", async () => {
    const redis = new Redis({
      url: bridge.url,
      token: "full-token",
      ...REDIS_CLIENT_OPTIONS,
      retry: { retries: 0 },
    });
    const queue = new DelayQueue({ redis });
    await expectError(
      queue.add({ topic: "t", id: "a" }),
      "redis_unavailable",
      /^Redis is unavailable \(OOM\)$/,
      /^OOM command not allowed when used memory > 'maxmemory'\.$/,
    );
    const plain = await redis.set("k", "v").catch((error: unknown) => redisError(error));
    expect(plain).toMatchObject({ code: "redis_unavailable" });
  });

  it("is redis_unavailable over TCP", async () => {
    tcp = connectRedis(`redis://127.0.0.1:${server.port}`, { commandTimeoutMs: 5000 });
    const queue = new DelayQueue({ redis: tcp });
    await expectError(
      queue.add({ topic: "t", id: "a" }),
      "redis_unavailable",
      /^Redis is unavailable \(OOM\)$/,
      /^OOM command not allowed when used memory > 'maxmemory'\.$/,
    );
  });

  it("still calls a script's own error a bug (500)", () => {
    const error = redisError(
      new Error("ERR user_script:12: Script attempted to access nonexistent global variable 'x'"),
    );
    expect(error.code).toBe("internal_error");
    expect(
      redisError(
        new Error(
          "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        ),
      ).code,
    ).toBe("redis_unavailable");
  });
});
