// The redis-server launcher: private port and data dir, AOF on request, clean stop, clear errors.
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RedisNotInstalledError, startRedisServer } from "../../dev/redis-server";
import { RespConnection } from "../../dev/resp";

const alive = (pid: number | undefined) => {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("startRedisServer", () => {
  const saved = process.env.REDIS_SERVER_BIN;
  afterEach(() => {
    if (saved === undefined) delete process.env.REDIS_SERVER_BIN;
    else process.env.REDIS_SERVER_BIN = saved;
  });

  it("starts on a free port, answers, and leaves no process or temp dir after stop", async () => {
    const server = await startRedisServer();
    const conn = await RespConnection.open(server.port);
    expect((await conn.call("PING")).type).toBe("status");
    const aof = await conn.call("CONFIG", "GET", "appendonly");
    expect(
      aof.type === "array" && aof.value?.[1]?.type === "bulk" && String(aof.value[1].value),
    ).toBe("no");
    conn.close();
    const pid = server.process.pid;
    await server.stop();
    expect(alive(pid)).toBe(false);
    expect(existsSync(server.dir)).toBe(false);
    await expect(RespConnection.open(server.port)).rejects.toThrow();
  });

  it("writes an append-only file in the given data dir when asked, and keeps the dir", async () => {
    const dir = mkdtempSync(join(tmpdir(), "delayq-aof-test-"));
    try {
      const server = await startRedisServer({ dir, appendOnly: true, appendFsync: "always" });
      const conn = await RespConnection.open(server.port);
      await conn.call("SET", "durable", "yes");
      conn.close();
      await server.stop();
      expect(readdirSync(dir).some((name) => name.startsWith("appendonly"))).toBe(true);

      const again = await startRedisServer({ dir, appendOnly: true });
      const reader = await RespConnection.open(again.port);
      const value = await reader.call("GET", "durable");
      reader.close();
      await again.stop();
      expect(value.type === "bulk" && value.value?.toString()).toBe("yes");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("resolves once the append-only file is loaded, so the first command is served", async () => {
    // INFO is answered while the file loads, a GET is not (LOADING): CI met that once, with a
    // file of one key. 300,000 keys take Redis long enough to load that a start which stops at
    // INFO meets it every time.
    const dir = mkdtempSync(join(tmpdir(), "delayq-aof-load-"));
    try {
      const server = await startRedisServer({ dir, appendOnly: true });
      const conn = await RespConnection.open(server.port);
      await conn.call(
        "EVAL",
        "for i = 1, 300000 do redis.call('SET', 'k' .. i, i) end return 1",
        "0",
      );
      await conn.call("SET", "last", "loaded");
      conn.close();
      await server.stop();

      const again = await startRedisServer({ dir, appendOnly: true });
      const reader = await RespConnection.open(again.port);
      const value = await reader.call("GET", "last");
      reader.close();
      await again.stop();
      expect(value).toEqual({ type: "bulk", value: Buffer.from("loaded") });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it("fails at once with install instructions when redis-server is missing", async () => {
    process.env.REDIS_SERVER_BIN = "/nonexistent/redis-server";
    const attempt = startRedisServer();
    await expect(attempt).rejects.toBeInstanceOf(RedisNotInstalledError);
    await expect(attempt).rejects.toThrow(
      /apt-get install -y redis-server[\s\S]*brew install redis/,
    );
  });

  it("explains a failed start instead of hanging", async () => {
    const first = await startRedisServer();
    try {
      await expect(startRedisServer({ port: first.port, startTimeoutMs: 3000 })).rejects.toThrow(
        /redis-server exited at start|did not answer/,
      );
    } finally {
      await first.stop();
    }
  });
});
