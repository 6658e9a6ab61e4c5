// Every answer carries a request id (x-request-id; requestId in an error's body), and no answer
// tells where delayq's own infrastructure is: a Redis that does not answer is "Redis is
// unavailable; see the logs for request <id>", and the log line with that id says why.
import { Redis } from "@upstash/redis";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../dev/redis-server";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
import { DelayQueue, REDIS_CLIENT_OPTIONS } from "../../src/index";
import type { LogEntry } from "../../src/log";
import { connectRedis, type TcpRedis } from "../../src/redis/tcp";
import { testApp } from "../support/app";

const connections: TcpRedis[] = [];
afterAll(async () => {
  for (const connection of connections) connection.ioredis.disconnect();
});

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("x-request-id", () => {
  it("is on every answer, and an error's body carries the same id", async () => {
    const { call } = testApp();
    const answers = [
      await call("POST", "/v1/jobs", { body: { topic: "t" } }),
      await call("GET", "/v1/jobs/nope"),
      await call("GET", "/v1/topics", { token: null }),
      await call("GET", "/v1/topics", { token: "wrong" }),
      await call("POST", "/v1/jobs", { body: "{" }),
      await call("GET", "/no/such/route"),
      await call("GET", "/health"),
      await call("GET", "/openapi.json"),
      await call("POST", "/v1/command", { body: { command: "get", id: "nope" } }),
      await call("POST", "/compat/ouqiang/wrong-token/push", { body: {} }),
    ];
    const ids = answers.map((answer) => answer.headers.get("x-request-id"));
    for (const id of ids) expect(id).toMatch(ID);
    expect(new Set(ids).size).toBe(answers.length);
    for (const answer of answers.filter((a) => a.status >= 400 && a.json?.error?.code)) {
      expect(answer.json.error.requestId).toBe(answer.headers.get("x-request-id"));
    }
    expect(answers.filter((a) => a.json?.error?.requestId).length).toBe(5);
  });

  it("keeps a sane incoming id (a proxy's, the caller's), and replaces any other", async () => {
    const { call } = testApp();
    const sent = async (id: string) => {
      const res = await call("GET", "/v1/jobs/nope", { headers: { "x-request-id": id } });
      return [res.headers.get("x-request-id"), res.json.error.requestId];
    };
    const sane = `req_1.A-${"z".repeat(56)}`; // 64 characters
    expect(await sent(sane)).toEqual([sane, sane]);
    for (const insane of [`${sane}z`, "a b", "<script>", "id\u00e9", ""]) {
      const [header, body] = await sent(insane);
      expect(header).toMatch(ID);
      expect(body).toBe(header);
    }
  });
});

/** An app on a Redis nobody answers for; its log lines kept. */
function appOn(redis: ConstructorParameters<typeof DelayQueue>[0]["redis"]) {
  const logs: LogEntry[] = [];
  const app = createApp({
    queue: new DelayQueue({ redis }),
    tokens: parseTokens("admin,tenant:shop.*"),
    log: (entry) => logs.push(entry),
  });
  const call = (method: string, path: string, body?: unknown, token = "tenant") =>
    app.request(path, {
      method,
      headers: { authorization: `Bearer ${token}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  return { call, logs };
}

const ADDRESS = /127\.0\.0\.1|localhost|ECONNREFUSED|:\d{2,5}\b|redis:\/\/|https?:\/\//;

describe.each([
  [
    "over TCP (REDIS_URL)",
    async () => {
      const connection = connectRedis(`redis://127.0.0.1:${await freePort()}`, {
        commandTimeoutMs: 2000,
      });
      connections.push(connection);
      return connection;
    },
  ],
  [
    "over REST (Upstash)",
    async () =>
      new Redis({
        url: `http://127.0.0.1:${await freePort()}`,
        token: "rest-token",
        ...REDIS_CLIENT_OPTIONS,
        retry: { retries: 0 },
      }),
  ],
])("Redis down %s", (_, redis) => {
  it("answers 503 pointing at the log line, which alone names the address", async () => {
    const { call, logs } = appOn(await redis());
    for (const [method, path, body] of [
      ["POST", "/v1/jobs", { topic: "shop.a" }],
      ["GET", "/v1/jobs/x"],
      ["GET", "/v1/topics"],
    ] as const) {
      const res = await call(method, path, body);
      expect(res.status).toBe(503);
      const text = await res.text();
      expect(text).not.toMatch(ADDRESS);
      const { error } = JSON.parse(text);
      const requestId = res.headers.get("x-request-id");
      expect(error).toEqual({
        code: "redis_unavailable",
        message: `Redis is unavailable; see the logs for request ${requestId}`,
        requestId,
      });
      const line = logs.find((entry) => entry.requestId === requestId);
      expect(line).toMatchObject({ level: "error", code: "redis_unavailable" });
      expect(String(line?.detail)).toMatch(/127\.0\.0\.1:\d+|ECONNREFUSED|fetch failed/);
      expect(JSON.stringify(line)).not.toMatch(/rest-token|tenant/);
    }
  });

  it("the command protocol, ouqiang's and /health tell no address either", async () => {
    const { call, logs } = appOn(await redis());
    const answers = [
      await call("POST", "/v1/command", { command: "get", id: "x" }),
      await call("POST", "/v1/command", [{ command: "pop", topic: "shop.a" }]),
      await call("POST", "/compat/ouqiang/tenant/pop", { topic: "shop.a" }),
      await call("GET", "/health"),
    ];
    for (const res of answers) {
      const text = await res.text();
      expect(text).not.toMatch(ADDRESS);
      const requestId = res.headers.get("x-request-id") as string;
      expect(text).toContain(`see the logs for request ${requestId}`);
      const line = logs.find((entry) => entry.requestId === requestId);
      expect(String(line?.detail)).toMatch(/127\.0\.0\.1:\d+|ECONNREFUSED|fetch failed/);
    }
  });
});

describe("the dashboard with Redis down", () => {
  it("answers its 503 page pointing at the log line, naming no address", async () => {
    const connection = connectRedis(`redis://127.0.0.1:${await freePort()}`, {
      commandTimeoutMs: 2000,
    });
    connections.push(connection);
    const logs: LogEntry[] = [];
    const app = createApp({
      queue: new DelayQueue({ redis: connection }),
      tokens: parseTokens("admin"),
      log: (entry) => logs.push(entry),
    });
    const res = await app.request("/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: "admin" }),
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "sec-fetch-site": "same-origin",
      },
    });
    expect(res.status).toBe(503);
    const html = await res.text();
    const requestId = res.headers.get("x-request-id");
    expect(html).toContain(`see the logs for request ${requestId}`);
    expect(html).not.toMatch(ADDRESS);
    const line = logs.find((entry) => entry.requestId === requestId);
    expect(String(line?.detail)).toMatch(/ECONNREFUSED 127\.0\.0\.1:\d+/);
  });
});
