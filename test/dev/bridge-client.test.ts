// The acceptance test of the bridge: the real @upstash/redis client, default options, against it.
import { errors } from "@upstash/redis";
import { describe, expect, inject, it } from "vitest";
import { testRedis } from "../support/redis";

describe("strings", () => {
  it("round-trips unicode, and nil is null", async () => {
    const { redis, prefix } = testRedis();
    const value = "héllo wörld — 你好 — 😀👍🏽 — \u0000 nul";
    expect(await redis.set(`${prefix}s`, value)).toBe("OK");
    expect(await redis.get(`${prefix}s`)).toBe(value);
    expect(await redis.get(`${prefix}missing`)).toBeNull();
    expect(await redis.strlen(`${prefix}s`)).toBe(Buffer.byteLength(value, "utf8"));
  });

  it("round-trips a 1 MB multi-byte value intact", async () => {
    const { redis, prefix } = testRedis();
    // 3- and 4-byte characters, so request and response chunks split them mid-character.
    const value = "é€😀中".repeat(100_000);
    expect(Buffer.byteLength(value)).toBeGreaterThan(1_000_000);
    await redis.set(`${prefix}big`, value);
    const back = await redis.get<string>(`${prefix}big`);
    expect(back?.length).toBe(value.length);
    expect(back === value).toBe(true);
  });

  it("returns JSON values the client deserializes, and strings that look like numbers", async () => {
    const { redis, prefix } = testRedis();
    await redis.set(`${prefix}obj`, { a: [1, "two", null], b: { c: true } });
    expect(await redis.get(`${prefix}obj`)).toEqual({ a: [1, "two", null], b: { c: true } });
    await redis.set(`${prefix}n`, "123");
    // automaticDeserialization (on by default) JSON-parses every string it reads.
    expect(await redis.get(`${prefix}n`)).toBe(123);
  });

  it("answers PING with a status other than OK, base64-encoded and decoded back", async () => {
    const { redis } = testRedis();
    expect(await redis.ping()).toBe("PONG");
    expect(await redis.echo("ok?")).toBe("ok?");
  });
});

describe("integers", () => {
  it("keeps integers as numbers", async () => {
    const { redis, prefix } = testRedis();
    expect(await redis.incr(`${prefix}i`)).toBe(1);
    expect(await redis.incrby(`${prefix}i`, 41)).toBe(42);
    expect(await redis.decrby(`${prefix}i`, 50)).toBe(-8);
    expect(await redis.incrbyfloat(`${prefix}f`, 1.5)).toBe(1.5);
    expect(await redis.exists(`${prefix}i`, `${prefix}nope`)).toBe(1);
  });

  it("surfaces a wrong-type error as an UpstashError", async () => {
    const { redis, prefix } = testRedis();
    await redis.set(`${prefix}word`, "abc");
    await expect(redis.incr(`${prefix}word`)).rejects.toThrow(/not an integer/);
  });
});

describe("hashes", () => {
  it("writes and reads fields, and an empty hash is null", async () => {
    const { redis, prefix } = testRedis();
    expect(await redis.hset(`${prefix}h`, { name: "ünï", n: 7, obj: { x: 1 } })).toBe(3);
    expect(await redis.hgetall(`${prefix}h`)).toEqual({ name: "ünï", n: 7, obj: { x: 1 } });
    expect(await redis.hget(`${prefix}h`, "name")).toBe("ünï");
    expect(await redis.hmget(`${prefix}h`, "n", "absent")).toEqual({ n: 7, absent: null });
    expect(await redis.hgetall(`${prefix}empty`)).toBeNull();
    expect(await redis.hincrby(`${prefix}h`, "n", 3)).toBe(10);
  });
});

describe("sorted sets", () => {
  it("ranges with scores, and by score with a limit", async () => {
    const { redis, prefix } = testRedis();
    const key = `${prefix}z`;
    await redis.zadd(
      key,
      { score: 1, member: "a" },
      { score: 2.5, member: "b" },
      { score: 3, member: "c" },
      { score: 4, member: "d" },
    );
    expect(await redis.zrange(key, 0, -1, { withScores: true })).toEqual([
      "a",
      1,
      "b",
      2.5,
      "c",
      3,
      "d",
      4,
    ]);
    expect(await redis.zrange(key, 2, 4, { byScore: true, offset: 1, count: 1 })).toEqual(["c"]);
    expect(await redis.zrange(key, "-inf", "+inf", { byScore: true, offset: 0, count: 2 })).toEqual(
      ["a", "b"],
    );
    expect(await redis.zscore(key, "b")).toBe(2.5);
    expect(await redis.zscore(key, "zz")).toBeNull();
    expect(await redis.zcard(key)).toBe(4);
  });
});

describe("lists", () => {
  it("pushes, pops and ranges", async () => {
    const { redis, prefix } = testRedis();
    const key = `${prefix}l`;
    expect(await redis.rpush(key, "a", "b", "c")).toBe(3);
    expect(await redis.lpush(key, "z")).toBe(4);
    expect(await redis.lrange(key, 0, -1)).toEqual(["z", "a", "b", "c"]);
    expect(await redis.lpop(key)).toBe("z");
    expect(await redis.lpop(key, 2)).toEqual(["a", "b"]);
    expect(await redis.llen(key)).toBe(1);
    expect(await redis.lpop(`${prefix}none`)).toBeNull();
  });
});

describe("Lua", () => {
  it("returns nested tables with strings, integers and nils", async () => {
    const { redis, prefix } = testRedis();
    const result = await redis.eval(
      "return {1, 'two', {3, {'four', KEYS[1]}}, ARGV[1]}",
      [`${prefix}k`],
      ["ärg"],
    );
    expect(result).toEqual([1, "two", [3, ["four", `${prefix}k`]], "ärg"]);
  });

  it("raises script errors as UpstashError with Redis's text", async () => {
    const { redis } = testRedis();
    await expect(redis.eval("return redis.error_reply('MY_CODE broken')", [], [])).rejects.toThrow(
      /MY_CODE broken/,
    );
    await expect(redis.eval("return nosuchfunction()", [], [])).rejects.toBeInstanceOf(
      errors.UpstashError,
    );
  });

  it("falls back from EVALSHA to EVAL when the script is not loaded (NOSCRIPT)", async () => {
    const { redis, prefix, stats } = testRedis();
    // A script body no other test uses, so Redis has never seen its SHA.
    const script = redis.createScript<string>(
      `return 'fresh-${crypto.randomUUID()}:' .. ARGV[1] .. ':' .. KEYS[1]`,
    );
    const first = await script.exec([`${prefix}k`], ["x"]);
    expect(first).toMatch(/^fresh-.*:x:t/);
    // First call: EVALSHA refused with NOSCRIPT, then EVAL. Second call: EVALSHA only.
    expect((await stats()).commands).toBe(2);
    expect(await script.exec([`${prefix}k`], ["y"])).toMatch(/:y:/);
    expect((await stats()).commands).toBe(3);
  });
});

describe("pipelines and transactions", () => {
  it("returns per-entry errors in a pipeline and keeps the other results", async () => {
    const { redis, prefix } = testRedis();
    await redis.set(`${prefix}word`, "abc");
    const pipe = redis.pipeline();
    pipe.set(`${prefix}a`, 1);
    pipe.incr(`${prefix}word`);
    pipe.get(`${prefix}a`);
    const results = await pipe.exec({ keepErrors: true });
    expect(results[0]).toEqual({ error: undefined, result: "OK" });
    expect(results[1]?.error).toMatch(/not an integer/);
    expect(results[2]).toEqual({ error: undefined, result: 1 });

    const failing = redis.pipeline();
    failing.incr(`${prefix}word`);
    await expect(failing.exec()).rejects.toThrow(/Command 1 \[ incr \] failed/);
  });

  it("runs multi-exec as one transaction", async () => {
    const { redis, prefix } = testRedis();
    const tx = redis.multi();
    tx.set(`${prefix}x`, "1");
    tx.incr(`${prefix}x`);
    tx.hset(`${prefix}h`, { f: "v" });
    tx.hgetall(`${prefix}h`);
    expect(await tx.exec()).toEqual(["OK", 2, 1, { f: "v" }]);
  });

  it("discards a transaction with a queueing error and writes nothing", async () => {
    const { redis, prefix } = testRedis();
    const res = await fetch(`${inject("bridgeUrl")}/multi-exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${inject("bridgeToken")}` },
      body: JSON.stringify([
        ["set", `${prefix}never`, "1"],
        ["get", "too", "many", "args"],
      ]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/^EXECABORT/);
    expect(await redis.exists(`${prefix}never`)).toBe(0);
  });

  it("serves an auto-pipelined burst of hundreds of concurrent commands in a few requests", async () => {
    const { redis, prefix, stats } = testRedis();
    const n = 600;
    const writes = await Promise.all(
      Array.from({ length: n }, (_, i) => redis.set(`${prefix}k${i}`, `v${i}-ü`)),
    );
    expect(writes.every((w) => w === "OK")).toBe(true);
    const reads = await Promise.all(
      Array.from({ length: n }, (_, i) => redis.get(`${prefix}k${i}`)),
    );
    expect(reads).toEqual(Array.from({ length: n }, (_, i) => `v${i}-ü`));
    const counters = await stats();
    expect(counters.commands).toBe(2 * n);
    expect(counters.requests.pipeline).toBeLessThanOrEqual(4);
  });
});
