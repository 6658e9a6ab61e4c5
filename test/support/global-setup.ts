// vitest globalSetup: one redis-server and one Upstash-REST bridge for the whole run.
import type { TestProject } from "vitest/node";
import { startBridge } from "../../dev/bridge";
import { startRedisServer } from "../../dev/redis-server";

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
