// The bridge's wire format, auth and failure modes, checked byte for byte with plain fetch.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type Bridge, startBridge } from "../../dev/bridge";
import { type RedisServer, startRedisServer } from "../../dev/redis-server";

const url = () => inject("bridgeUrl");
const token = () => inject("bridgeToken");
const prefix = `wire${crypto.randomUUID().slice(0, 8)}:`;

async function call(
  path: string,
  body: unknown,
  options: { token?: string | null; base64?: boolean; method?: string } = {},
): Promise<{ status: number; json: unknown }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  const bearer = options.token === undefined ? token() : options.token;
  if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
  if (options.base64 ?? true) headers["upstash-encoding"] = "base64";
  const res = await fetch(`${url()}${path}`, {
    method: options.method ?? "POST",
    headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

describe("auth", () => {
  it.each(["/", "/pipeline", "/multi-exec", "/get/x", "/__bridge/stats"])(
    "refuses a missing or wrong token on %s",
    async (path) => {
      const body = path === "/" ? ["ping"] : [["ping"]];
      for (const bearer of [null, "wrong", `${token()}x`, ""]) {
        const res = await call(path, body, { token: bearer });
        expect(res.status).toBe(401);
        expect(res.json).toEqual({ error: "Unauthorized" });
      }
    },
  );

  it("makes the real client throw on a wrong token", async () => {
    const redis = new Redis({ url: url(), token: "not-the-token", enableTelemetry: false });
    await expect(redis.get("x")).rejects.toThrow(/Unauthorized/);
    await expect(redis.zrange("x", 0, -1)).rejects.toThrow(/Unauthorized/);
  });
});

describe("reply encoding", () => {
  it("sends OK plain and every other string base64", async () => {
    expect(await call("/", ["set", `${prefix}a`, "välue"])).toEqual({
      status: 200,
      json: { result: "OK" },
    });
    expect((await call("/", ["get", `${prefix}a`])).json).toEqual({ result: b64("välue") });
    expect((await call("/", ["ping"])).json).toEqual({ result: b64("PONG") });
    expect((await call("/", ["get", `${prefix}none`])).json).toEqual({ result: null });
    expect((await call("/", ["incr", `${prefix}n`])).json).toEqual({ result: 1 });
  });

  it("sends plain strings without the encoding header", async () => {
    await call("/", ["set", `${prefix}p`, "välue"]);
    const res = await call("/", ["mget", `${prefix}p`, `${prefix}none`], { base64: false });
    expect(res.json).toEqual({ result: ["välue", null] });
  });

  it("is binary-safe: bytes that are not UTF-8 come back exactly", async () => {
    const res = await call("/", ["eval", "return string.char(0, 255, 128, 10)", "0"]);
    expect(res.json).toEqual({ result: Buffer.from([0, 255, 128, 10]).toString("base64") });
  });

  it("encodes nested arrays recursively and keeps integers and nils", async () => {
    const res = await call("/", ["eval", "return {1, 'a', {false, 'b', {2}}}", "0"]);
    // Lua false becomes a nil bulk reply.
    expect(res.json).toEqual({ result: [1, b64("a"), [null, b64("b"), [2]]] });
  });

  it("returns SCAN's [cursor, [keys]] and HGETALL as a flat array", async () => {
    await call("/", ["hset", `${prefix}h`, "f", "v"]);
    expect((await call("/", ["hgetall", `${prefix}h`])).json).toEqual({
      result: [b64("f"), b64("v")],
    });
    const scan = (await call("/", ["scan", "0", "match", `${prefix}h`, "count", "1000"])).json as {
      result: [string, string[]];
    };
    expect(Array.isArray(scan.result[1])).toBe(true);
  });
});

describe("errors", () => {
  it("answers a failing single command with 400 and Redis's text", async () => {
    const res = await call("/", ["nosuchcommand"]);
    expect(res.status).toBe(400);
    expect((res.json as { error: string }).error).toMatch(/^ERR unknown command/);
  });

  it("answers a pipeline with per-entry errors and status 200", async () => {
    const res = await call("/pipeline", [
      ["set", `${prefix}e`, "x"],
      ["incr", `${prefix}e`],
    ]);
    expect(res.status).toBe(200);
    expect(res.json).toEqual([
      { result: "OK" },
      { error: "ERR value is not an integer or out of range" },
    ]);
  });

  it("passes NOSCRIPT through unchanged", async () => {
    const res = await call("/", ["evalsha", "0".repeat(40), "0"]);
    expect(res.status).toBe(400);
    expect((res.json as { error: string }).error).toMatch(/^NOSCRIPT/);
  });

  it.each([
    ["not JSON", "{nope"],
    ["an object", { cmd: "get" }],
    ["an empty array", []],
    ["a nested argument", ["set", "k", { a: 1 }]],
  ])("rejects a command body that is %s with 400", async (_, body) => {
    const res = await call("/", body);
    expect(res.status).toBe(400);
    expect((res.json as { error: string }).error).toMatch(/^ERR failed to parse/);
  });

  it("refuses commands that would block or change the shared connection", async () => {
    for (const command of [["blpop", "x", "1"], ["select", "2"], ["multi"], ["subscribe", "c"]]) {
      const res = await call("/", command);
      expect(res.status).toBe(400);
      expect((res.json as { error: string }).error).toMatch(/not available/);
    }
    const inPipeline = await call("/pipeline", [["ping"], ["watch", "x"]]);
    expect(inPipeline.status).toBe(400);
  });

  it("refuses a body over the size limit with 413 and stores nothing", async () => {
    const res = await call("/", ["set", `${prefix}huge`, "x".repeat(10 * 1024 * 1024 + 1)]);
    expect(res.status).toBe(413);
    expect((await call("/", ["exists", `${prefix}huge`])).json).toEqual({ result: 0 });
  });
});

describe("path form", () => {
  it("runs /set/key/value and /get/key like Upstash's URL commands", async () => {
    expect((await call(`/set/${prefix}url/h%C3%A9`, undefined)).json).toEqual({ result: "OK" });
    expect((await call(`/get/${prefix}url`, undefined, { method: "GET" })).json).toEqual({
      result: b64("hé"),
    });
  });
});

describe("a bridge of its own", () => {
  let server: RedisServer;
  let bridge: Bridge;

  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startBridge({ redisPort: server.port, tokens: { one: 0, two: 1 } });
  });
  afterAll(async () => {
    await bridge.close();
    await server.stop();
  });

  it("maps each token to its own logical DB", async () => {
    const one = new Redis({ url: bridge.url, token: "one", enableTelemetry: false });
    const two = new Redis({ url: bridge.url, token: "two", enableTelemetry: false });
    await one.set("shared-name", "from one");
    expect(await two.get("shared-name")).toBeNull();
    await two.set("shared-name", "from two");
    expect(await one.get("shared-name")).toBe("from one");
    expect(bridge.stats("one").commands).toBe(2);
    expect(bridge.stats().requests.total).toBe(4);
  });

  it("answers 503 with a JSON error while redis-server is down, and recovers", async () => {
    const redis = new Redis({ url: bridge.url, token: "one", enableTelemetry: false });
    const port = server.port;
    await server.stop();
    const down = await fetch(`${bridge.url}/`, {
      method: "POST",
      headers: { authorization: "Bearer one" },
      body: JSON.stringify(["ping"]),
    });
    expect(down.status).toBe(503);
    expect(((await down.json()) as { error: string }).error).toMatch(/unavailable/);
    await expect(redis.get("x")).rejects.toThrow(/unavailable/);

    server = await startRedisServer({ port });
    expect(await redis.ping()).toBe("PONG");
  });
});
