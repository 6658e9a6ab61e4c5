// A redis-server and bridge of their own, with command counts (tests of costs, benchmarks).
import { Redis } from "@upstash/redis";
import { scriptTexts } from "../src/redis/lua/scripts";
import { REDIS_CLIENT_OPTIONS } from "../src/redis/runner";
import { type Bridge, startBridge } from "./bridge";
import { type RedisServer, type RedisServerOptions, startRedisServer } from "./redis-server";
import { type Reply, RespConnection } from "./resp";

export type CountedStack = {
  server: RedisServer;
  bridge: Bridge;
  /** A client of the bridge with the options the entry points use. */
  client(options?: { autoPipelining?: boolean }): Redis;
  /** Commands redis-server has executed so far, by name (INFO commandstats), INFO excluded. */
  commandStats(): Promise<Record<string, number>>;
  /** Total commands executed so far, INFO excluded. */
  commands(): Promise<number>;
  /** Runs one command on redis-server directly (not through the bridge), e.g. DEBUG DIGEST. */
  raw(...args: string[]): Promise<Reply>;
  /** Loads every delayq script (SCRIPT LOAD), so that no NOSCRIPT fallback is counted later. */
  loadScripts(): Promise<void>;
  stop(): Promise<void>;
};

export async function startCountedStack(options: RedisServerOptions = {}): Promise<CountedStack> {
  const server = await startRedisServer(options);
  const token = "private";
  const bridge = await startBridge({ redisPort: server.port, tokens: token });
  const admin = await RespConnection.open(server.port);
  const commandStats = async () => {
    const reply: Reply = await admin.call("INFO", "commandstats");
    const text = reply.type === "bulk" ? String(reply.value) : "";
    const stats: Record<string, number> = {};
    for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      const [, name, calls] = match;
      if (name && name !== "info") stats[name] = Number(calls);
    }
    return stats;
  };
  return {
    server,
    bridge,
    client: (options = {}) =>
      new Redis({
        url: bridge.url,
        token,
        enableAutoPipelining: options.autoPipelining ?? true,
        ...REDIS_CLIENT_OPTIONS,
      }),
    commandStats,
    raw: (...args) => admin.call(...args),
    loadScripts: async () => {
      for (const text of Object.values(scriptTexts())) await admin.call("SCRIPT", "LOAD", text);
    },
    commands: async () => Object.values(await commandStats()).reduce((a, b) => a + b, 0),
    stop: async () => {
      admin.close();
      await bridge.close();
      await server.stop();
    },
  };
}
