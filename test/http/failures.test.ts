// When things go wrong: Redis unreachable (503 + Retry-After), unknown routes, misconfiguration.
import { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
import { DelayQueue, REDIS_CLIENT_OPTIONS } from "../../src/index";
import { buildService } from "../../src/service";
import { testApp } from "../support/app";

/** The real app, with a queue whose Redis is not there (nothing listens on port 1). */
function appWithoutRedis() {
  const redis = new Redis({
    url: "http://127.0.0.1:1",
    token: "x",
    retry: { retries: 0 },
    ...REDIS_CLIENT_OPTIONS,
  });
  const logs: unknown[] = [];
  const app = createApp({
    queue: new DelayQueue({ redis }),
    tokens: parseTokens("t"),
    log: (entry) => logs.push(entry),
  });
  const call = (method: string, path: string, body?: unknown) =>
    app.request(path, {
      method,
      headers: { authorization: "Bearer t" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  return { call, logs };
}

describe("Redis unreachable", () => {
  it("answers 503 redis_unavailable with Retry-After on every kind of route", async () => {
    const { call } = appWithoutRedis();
    for (const [method, path, body] of [
      ["POST", "/v1/jobs", { topic: "t" }],
      ["POST", "/v1/jobs/batch", { jobs: [{ topic: "t" }] }],
      ["GET", "/v1/jobs/x"],
      ["POST", "/v1/jobs/x/finish"],
      ["POST", "/v1/topics/t/pop", { wait: 1 }],
      ["GET", "/v1/topics"],
    ] as const) {
      const res = await call(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      const json = (await res.json()) as { error: { code: string; message: string } };
      expect(json.error.code).toBe("redis_unavailable");
      expect(json.error.message).not.toMatch(/command was/);
    }
  });

  it("answers 503 from /health and from a lone command", async () => {
    const { call, logs } = appWithoutRedis();
    const health = await call("GET", "/health");
    expect(health.status).toBe(503);
    const answered = await health.json();
    expect(answered).toMatchObject({ status: "degraded", redis: "unreachable" });
    // No token is needed for /health: where Redis is stays in the log.
    expect(JSON.stringify(answered)).not.toMatch(/127\.0\.0\.1|:1\b|ECONNREFUSED/);
    expect(logs).toContainEqual(
      expect.objectContaining({
        event: "health_degraded",
        message: expect.stringMatching(/^Redis is unavailable/),
      }),
    );
    const command = await call("POST", "/v1/command", { command: "get", id: "x" });
    expect(command.status).toBe(503);
    expect(await command.json()).toMatchObject({
      success: false,
      error: expect.stringMatching(/^redis_unavailable/),
    });
    const several = await call("POST", "/v1/command", [
      { command: "get", id: "x" },
      { command: "pop", topic: "t" },
    ]);
    expect(several.status).toBe(503);
    expect(several.headers.get("retry-after")).toBe("1");
  });
});

describe("unknown routes", () => {
  it("answers JSON 404 not_found, even under /v1 with a token", async () => {
    const { call } = testApp();
    for (const path of ["/", "/v2/jobs", "/v1/jobs/x/explode", "/v1/topics/t/pop/more"]) {
      const res = await call("POST", path);
      expect(res.status, path).toBe(404);
      expect(res.json.error).toEqual({
        code: "not_found",
        message: expect.stringContaining("/openapi.json"),
        requestId: res.headers.get("x-request-id"),
      });
    }
  });
});

describe("configuration", () => {
  it("names each missing or invalid variable and never echoes a value", () => {
    expect(() => parseConfig({})).toThrow(
      /UPSTASH_REDIS_REST_URL is not set.*UPSTASH_REDIS_REST_TOKEN is not set.*DQ_TOKENS is not set/,
    );
    const bad = {
      UPSTASH_REDIS_REST_URL: "not a url",
      UPSTASH_REDIS_REST_TOKEN: "tok-s3cret",
      DQ_TOKENS: "a",
      DQ_DEFAULT_TTR: "soon",
      DQ_PREFIX: "has space",
    };
    let message = "";
    try {
      parseConfig(bad);
    } catch (error) {
      message = String(error);
    }
    expect(message).toMatch(/UPSTASH_REDIS_REST_URL must be a URL/);
    expect(message).toMatch(/DQ_DEFAULT_TTR must be a number/);
    expect(message).toMatch(/DQ_PREFIX must be/);
    expect(message).not.toMatch(/s3cret/);
  });

  it("applies the defaults and reads numbers given as strings", () => {
    const config = parseConfig({
      UPSTASH_REDIS_REST_URL: "https://x.upstash.io",
      UPSTASH_REDIS_REST_TOKEN: "t",
      DQ_TOKENS: "a",
      DQ_DEFAULT_TTR: "30",
    });
    expect(config).toMatchObject({
      DQ_PREFIX: "dq",
      DQ_DEFAULT_TTR: 30,
      DQ_DEFAULT_MAX_ATTEMPTS: 10,
      DQ_RETENTION_SECONDS: 3600,
      DQ_MAX_BODY_BYTES: 262144,
    });
  });

  it("builds the whole service from an environment", async () => {
    const service = buildService(
      {
        UPSTASH_REDIS_REST_URL: "http://127.0.0.1:1",
        UPSTASH_REDIS_REST_TOKEN: "t",
        DQ_TOKENS: "k",
      },
      (settings) => new Redis({ url: settings.url, token: settings.token, ...settings.options }),
    );
    const res = await service.app.request("/v1/topics", { headers: { authorization: "Bearer k" } });
    expect(res.status).toBe(503);
  });
});
