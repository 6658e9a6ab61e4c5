// vitest globalSetup: one redis-server and one Upstash-REST bridge for the whole run.
import type { TestProject } from "vitest/node";
import { startBridge } from "../../dev/bridge";
import { startRedisServer } from "../../dev/redis-server";
import { RespConnection } from "../../dev/resp";
import { scriptTexts } from "../../src/redis/lua/scripts";

declare module "vitest" {
  // biome-ignore lint/style/useConsistentTypeDefinitions: module augmentation needs an interface
  export interface ProvidedContext {
    bridgeUrl: string;
    bridgeToken: string;
    redisPort: number;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedisServer();
  // delayq's scripts are in Redis's cache from the start, as in any deployment after its first
  // minute: tests that count requests then never count a first use's NOSCRIPT and EVAL, whatever
  // order the files run in (cost.test.ts does the same on its own server).
  const admin = await RespConnection.open(redis.port);
  for (const text of Object.values(scriptTexts())) await admin.call("SCRIPT", "LOAD", text);
  admin.close();
  const token = `test-${crypto.randomUUID()}`;
  const bridge = await startBridge({
    redisPort: redis.port,
    tokens: token,
    allowTokenLabels: true,
  });
  project.provide("bridgeUrl", bridge.url);
  project.provide("bridgeToken", token);
  project.provide("redisPort", redis.port);
  return async () => {
    await bridge.close();
    await redis.stop();
  };
}
