// NodeRestRedis (node:http instead of fetch) against @upstash/redis's own client: the same
// replies and request counts from the bridge, the same requests on the wire, the same failures.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "@upstash/redis";
import { afterEach, describe, expect, inject, it } from "vitest";
import { NodeRestRedis } from "../../src/redis/rest-node";
import { REDIS_CLIENT_OPTIONS, redisError } from "../../src/redis/runner";
import { bridgeStats } from "../support/redis";

const TIMEOUT_MS = 2_000;

/** Both clients on the shared bridge, each with its own token (counted apart) and options. */
function pair(options: { automaticDeserialization?: boolean } = {}) {
  const url = inject("bridgeUrl");
  const label = crypto.randomUUID().slice(0, 8);
  const tokens = {
    fetch: `${inject("bridgeToken")}:f${label}`,
    node: `${inject("bridgeToken")}:n${label}`,
  };
  const config = { url, ...REDIS_CLIENT_OPTIONS, ...options, retry: { retries: 1 } };
  return {
    prefix: `rn${label}:`,
    fetch: new Redis({
      ...config,
      token: tokens.fetch,
      signal: () => AbortSignal.timeout(TIMEOUT_MS),
    }),
    node: new NodeRestRedis({ ...config, token: tokens.node, timeoutMs: TIMEOUT_MS }),
    stats: (which: "fetch" | "node") => bridgeStats(url, tokens[which]),
  };
}

/** Runs `work` on a client and returns its outcome, error or value, for comparison. */
async function outcome(work: () => Promise<unknown>) {
  try {
    return { value: await work() };
  } catch (error) {
    return { error: { name: (error as Error).name, message: (error as Error).message } };
  }
}

describe("NodeRestRedis against the bridge", () => {
  it("answers what @upstash/redis answers, with the same requests", async () => {
    for (const automaticDeserialization of [false, true]) {
      const { prefix, fetch, node, stats } = pair({ automaticDeserialization });
      expect((await stats("node")).requests.total).toBe(0);
      const values = ["plain", "ünï 😀 中文", "OK", "42", '{"a":[1,2]}', "", "x".repeat(70_000)];
      const script =
        "redis.call('SET', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), 7, false, {ARGV[1], 3}}";
      const run = async (redis: Redis, prefix: string) => {
        const results: unknown[] = [];
        for (const [i, value] of values.entries()) {
          results.push(await redis.set(`${prefix}k${i}`, value));
          results.push(await redis.get(`${prefix}k${i}`));
          results.push(await redis.hset(`${prefix}h`, { [`f${i}`]: value }));
          results.push(await redis.hget(`${prefix}h`, `f${i}`));
          // Each client's own script text, so each loads it once (EVALSHA, NOSCRIPT, EVAL).
          const own = redis.createScript(`${script} -- ${prefix}`);
          results.push(await own.exec([`${prefix}s${i}`], [value]));
        }
        results.push(await redis.get(`${prefix}missing`));
        // Concurrent commands share one request (auto-pipelining).
        results.push(await Promise.all(values.map((_, i) => redis.get(`${prefix}k${i}`))));
        results.push(await outcome(() => redis.eval("return redis.call('NOPE')", [], [])));
        results.push(await outcome(() => redis.incr(`${prefix}k0`)));
        return results;
      };
      const viaFetch = await run(fetch, `${prefix}f:`);
      const viaNode = await run(node, `${prefix}n:`);
      expect(viaNode).toEqual(viaFetch);
      expect(viaNode).toContain("ünï 😀 中文");
      expect((await stats("node")).requests).toEqual((await stats("fetch")).requests);
    }
  });

  it("sends the commands of one turn of the event loop in one /pipeline request (turnPipelining)", async () => {
    const url = inject("bridgeUrl");
    const label = crypto.randomUUID().slice(0, 8);
    const config = { url, ...REDIS_CLIENT_OPTIONS, enableAutoPipelining: false, timeoutMs: 2000 };
    const token = (which: string) => `${inject("bridgeToken")}:${which}${label}`;
    const grouped = new NodeRestRedis({ ...config, token: token("g"), turnPipelining: true });
    const alone = new NodeRestRedis({ ...config, token: token("a") });
    const prefix = `rt${label}:`;
    await alone.set(`${prefix}text`, "not a number");
    const script = "redis.call('SET', KEYS[1], ARGV[1]); return ARGV[1] .. '!'";
    // Commands issued in one turn: scripts, a script Redis does not know, an error, a miss.
    const burst = (redis: NodeRestRedis, who: string) =>
      Promise.all([
        ...Array.from({ length: 3 }, (_, i) =>
          outcome(() => redis.eval(script, [`${prefix}${who}${i}`], [`v${i}`])),
        ),
        outcome(() => redis.evalsha("0".repeat(40), [], [])),
        outcome(() => redis.get(`${prefix}text`)),
        outcome(() => redis.incr(`${prefix}text`)),
        outcome(() => redis.get(`${prefix}missing`)),
      ]);
    const viaAlone = await burst(alone, "a");
    const before = await bridgeStats(url, token("g"));
    const viaGrouped = await burst(grouped, "g");
    // The same answers, each command's error its own and worded as when sent alone.
    expect(viaGrouped).toEqual(viaAlone);
    expect(viaGrouped[0]).toEqual({ value: "v0!" });
    expect(viaGrouped[3]?.error?.message).toMatch(/^NOSCRIPT/);
    expect(viaGrouped[5]?.error?.message).toMatch(/not an integer.*command was: \["incr"/);
    const after = await bridgeStats(url, token("g"));
    expect(after.requests.pipeline - before.requests.pipeline).toBe(1);
    expect(after.requests.single - before.requests.single).toBe(0);
    expect(after.commands - before.commands).toBe(7);
    // Those alone went as seven requests; a command of a later turn goes alone.
    expect((await bridgeStats(url, token("a"))).requests.single).toBe(8);
    expect(await grouped.get(`${prefix}g0`)).toBe("v0");
    const later = await bridgeStats(url, token("g"));
    expect(later.requests.single - after.requests.single).toBe(1);
    expect(later.requests.pipeline - after.requests.pipeline).toBe(0);
  });

  it("fails a wrong token as @upstash/redis does", async () => {
    const url = inject("bridgeUrl");
    const fetch = new Redis({ url, token: "wrong", ...REDIS_CLIENT_OPTIONS });
    const node = new NodeRestRedis({
      url,
      token: "wrong",
      ...REDIS_CLIENT_OPTIONS,
      timeoutMs: 1000,
    });
    const viaFetch = await outcome(() => fetch.get("k"));
    expect(viaFetch.error?.name).toBe("UpstashError");
    expect(await outcome(() => node.get("k"))).toEqual(viaFetch);
  });
});

/** A stand-in REST server: each request is recorded and answered by `answer`. */
const servers: ReturnType<typeof createServer>[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
});

type Seen = { method?: string; url?: string; headers: IncomingMessage["headers"]; body: string };

async function standIn(answer: (n: number, res: ServerResponse, req: IncomingMessage) => void) {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      answer(seen.length, res, req);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/base`;
  const clients = {
    fetch: new Redis({
      url,
      token: "tok",
      ...REDIS_CLIENT_OPTIONS,
      retry: { retries: 1 },
      signal: () => AbortSignal.timeout(300),
    }),
    node: new NodeRestRedis({
      url,
      token: "tok",
      ...REDIS_CLIENT_OPTIONS,
      retry: { retries: 1 },
      timeoutMs: 300,
    }),
  };
  return { seen, clients, url };
}

/** A reply to one command, auto-pipelined (the clients' default) or not. */
const reply = (res: ServerResponse, req: IncomingMessage, result: unknown, token: string) => {
  res.writeHead(200, { "content-type": "application/json", "upstash-sync-token": token });
  res.end(JSON.stringify(req.url?.endsWith("/pipeline") ? [{ result }] : { result }));
};

describe("NodeRestRedis on the wire", () => {
  it("sends what @upstash/redis sends, sync token included", async () => {
    const requests: Record<string, Seen[]> = {};
    for (const which of ["fetch", "node"] as const) {
      const { seen, clients } = await standIn((n, res, req) =>
        reply(res, req, Buffer.from(`v${n}`).toString("base64"), `sync-${n}`),
      );
      expect(await clients[which].get("a")).toBe("v1");
      expect(await clients[which].hget("h", "f")).toBe("v2");
      requests[which] = seen;
    }
    const pick = (seen: Seen[] = []) =>
      seen.map(({ method, url, headers, body }) => ({
        method,
        url,
        body,
        headers: Object.fromEntries(
          ["authorization", "content-type", "upstash-encoding", "upstash-sync-token"].map((h) => [
            h,
            headers[h],
          ]),
        ),
      }));
    expect(pick(requests.node)).toEqual(pick(requests.fetch));
    expect(pick(requests.node)[1]?.headers["upstash-sync-token"]).toBe("sync-1");
    expect(pick(requests.node)[0]?.url).toBe("/base/pipeline");
  });

  it("retries once after a network error, as @upstash/redis does", async () => {
    for (const which of ["fetch", "node"] as const) {
      const { seen, clients } = await standIn((n, res, req) => {
        if (n === 1) req.socket.destroy();
        else reply(res, req, Buffer.from("ok").toString("base64"), "");
      });
      expect(await clients[which].get("a")).toBe("ok");
      expect(seen).toHaveLength(2);
    }
  });

  it("fails at the time limit with a TimeoutError and no retry", async () => {
    for (const which of ["fetch", "node"] as const) {
      const { seen, clients } = await standIn(() => {});
      const started = Date.now();
      const result = await outcome(() => clients[which].get("a"));
      expect(result.error?.name).toBe("TimeoutError");
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(seen).toHaveLength(1);
    }
  });

  it("fails a refused connection after its retry, at once and as redis_unavailable", async () => {
    // A port that was just listening and is closed now: nothing accepts there.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const node = new NodeRestRedis({
      url: `http://127.0.0.1:${port}`,
      token: "tok",
      ...REDIS_CLIENT_OPTIONS,
      retry: { retries: 1 },
      timeoutMs: 5_000,
    });
    const started = Date.now();
    const result = await outcome(() => node.get("a"));
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(result.error?.name).not.toBe("TimeoutError");
    const classified = redisError(await node.get("a").catch((error: unknown) => error));
    expect(classified.code).toBe("redis_unavailable");
    // The answer names no address; the log's detail does.
    expect(classified.message).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
    expect(classified.detail).toMatch(/ECONNREFUSED/);
  });

  it("does not retry when the answer is cut short after its head", async () => {
    const outcomes = [];
    for (const which of ["fetch", "node"] as const) {
      const { seen, clients } = await standIn((_, res) => {
        res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
        res.write('{"result":');
        setTimeout(() => res.socket?.destroy(), 20);
      });
      const result = await outcome(() => clients[which].get("a"));
      outcomes.push(result.error !== undefined);
      expect(seen).toHaveLength(1);
    }
    expect(outcomes).toEqual([true, true]);
  });

  it("hands each command of a turn's pipeline its own answer, or its own error", async () => {
    const { seen, url } = await standIn((n, res) => {
      res.writeHead(n === 1 ? 401 : 200, { "content-type": "application/json" });
      // A refused request, then an answer with one reply too few.
      res.end(n === 1 ? '{"error":"WRONGPASS bad token"}' : '[{"result":"1"}]');
    });
    const grouped = new NodeRestRedis({
      url,
      token: "tok",
      ...REDIS_CLIENT_OPTIONS,
      enableAutoPipelining: false,
      turnPipelining: true,
      timeoutMs: 300,
    });
    const refused = await Promise.all([
      outcome(() => grouped.get("a")),
      outcome(() => grouped.get("b")),
    ]);
    expect(seen.map(({ url }) => url)).toEqual(["/base/pipeline"]);
    expect(seen[0]?.body).toBe('[["get","a"],["get","b"]]');
    // Each failed as it would have alone: its own command named.
    expect(refused.map((r) => r.error?.message)).toEqual([
      'WRONGPASS bad token, command was: ["get","a"]',
      'WRONGPASS bad token, command was: ["get","b"]',
    ]);
    const short = await Promise.all([
      outcome(() => grouped.get("a")),
      outcome(() => grouped.get("b")),
    ]);
    for (const answer of short) {
      expect(answer.error?.message).toBe("Redis answered a pipeline of 2 commands with 1 replies");
    }
  });

  it("reads an error answer as @upstash/redis does", async () => {
    const results = [];
    for (const which of ["fetch", "node"] as const) {
      const { clients } = await standIn((n, res) => {
        res.writeHead(n === 1 ? 400 : 500, { "content-type": "application/json" });
        res.end(n === 1 ? '{"error":"ERR bad"}' : "not json");
      });
      results.push([
        await outcome(() => clients[which].get("a")),
        await outcome(() => clients[which].get("b")),
      ]);
    }
    expect(results[1]).toEqual(results[0]);
    expect(results[0]?.[0]?.error?.message).toBe('ERR bad, command was: [["get","a"]]');
  });
});
