// A frozen Redis (redis-server stopped with SIGSTOP) must not hang the service: /health and the API
// answer 503 within DQ_REDIS_TIMEOUT_MS, and the service recovers by itself after SIGCONT.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Bridge, startBridge } from "../../dev/bridge";
import { freePort, type RedisServer, startRedisServer } from "../../dev/redis-server";
import { type ServiceProcess, startService } from "../../dev/service-process";

const TIMEOUT_MS = 500;
const TOKEN = "frozen-admin";

// A private redis-server and bridge: freezing the run's shared one would stall other suites.
let redis: RedisServer;
let bridge: Bridge;
let service: ServiceProcess;

beforeAll(async () => {
  redis = await startRedisServer();
  const bridgeToken = `frozen-${crypto.randomUUID()}`;
  bridge = await startBridge({ redisPort: redis.port, tokens: bridgeToken });
  service = await startService({
    mode: "node",
    port: await freePort(),
    stateDir: `/tmp/delayq-frozen-${crypto.randomUUID().slice(0, 8)}`,
    stdio: "ignore",
    vars: {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridgeToken,
      DQ_TOKENS: TOKEN,
      DQ_REDIS_TIMEOUT_MS: String(TIMEOUT_MS),
      DQ_POLL_INTERVAL_MS: "100",
    },
  });
}, 60_000);

afterAll(async () => {
  redis?.process.kill("SIGCONT");
  await service?.stop();
  await bridge?.close();
  await redis?.stop();
});

/** A request with a client-side limit far above the service's, so a hang fails the test. */
async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: any; headers: Headers; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${service.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const json = await res.json();
  return { status: res.status, json, headers: res.headers, ms: Date.now() - started };
}

describe("a frozen redis-server behind the bridge", () => {
  it("gets 503s within the time limit, and the service recovers on its own", async () => {
    // Warm up: the scripts are loaded, so a write sent during the freeze runs once it thaws.
    expect((await call("POST", "/v1/jobs", { topic: "f", id: "before" })).status).toBe(201);

    redis.process.kill("SIGSTOP");
    try {
      const health = await call("GET", "/health");
      expect(health.status).toBe(503);
      expect(health.json).toMatchObject({ status: "degraded", redis: "unreachable" });
      expect(health.ms).toBeLessThan(TIMEOUT_MS + 2500);

      const add = await call("POST", "/v1/jobs", { topic: "f", id: "lost" });
      expect(add.status).toBe(503);
      expect(add.json.error.code).toBe("redis_unavailable");
      expect(add.json.error.message).toMatch(/DQ_REDIS_TIMEOUT_MS/);
      expect(add.headers.get("retry-after")).toBe("1");
      expect(add.ms).toBeLessThan(TIMEOUT_MS + 2500);

      const get = await call("GET", "/v1/jobs/before");
      expect(get.status).toBe(503);
      expect(get.json.error.code).toBe("redis_unavailable");

      // A long-poll's Redis calls are short too: the pop fails fast instead of waiting 2 s + hang.
      const pop = await call("POST", "/v1/topics/empty/pop", { wait: 2 });
      expect(pop.status).toBe(503);
      expect(pop.json.error.code).toBe("redis_unavailable");
    } finally {
      redis.process.kill("SIGCONT");
    }

    // Recovery without a restart.
    const deadline = Date.now() + 10_000;
    let health = await call("GET", "/health");
    while (health.status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      health = await call("GET", "/health");
    }
    expect(health.json).toEqual({ status: "ok", redis: "ok" });
    expect((await call("POST", "/v1/jobs", { topic: "f", id: "after" })).status).toBe(201);

    // The add whose answer was lost ran once Redis thawed; retrying it with its id is safe.
    const retry = await call("POST", "/v1/jobs", { topic: "f", id: "lost" });
    expect(retry.status).toBe(200);
    expect(retry.json.created).toBe(false);
    const popped = await call("POST", "/v1/topics/f/pop", { count: 10 });
    expect(popped.json.jobs.map((j: { id: string }) => j.id).sort()).toEqual([
      "after",
      "before",
      "lost",
    ]);
  }, 40_000);
});
