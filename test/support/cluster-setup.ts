// vitest globalSetup of the node-cluster project: a local Redis Cluster of three masters
// (dev/redis-cluster.ts) instead of one redis-server, a bridge in front of it that follows the
// cluster's redirections (tests look at their keys through it), and the webhook recorder.
import type { TestProject } from "vitest/node";
import { startBridge } from "../../dev/bridge";
import { startRedisCluster } from "../../dev/redis-cluster";
import { RespConnection } from "../../dev/resp";
import { functionLibrary } from "../../src/redis/lua/scripts/functions";
import { requireRedisServer, startRecorder } from "./global-setup";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  requireRedisServer();
  const cluster = await startRedisCluster();
  const seed = cluster.nodes[0]?.port as number;
  // delayq's function library is on every master from the start, as in a deployment after its
  // first call: tests that count commands never count a first call's load.
  for (const node of cluster.nodes) {
    const admin = await RespConnection.open(node.port);
    await admin.call("FUNCTION", "LOAD", "REPLACE", functionLibrary().text);
    admin.close();
  }
  const token = `test-${crypto.randomUUID()}`;
  const bridge = await startBridge({
    redisPort: seed,
    tokens: token,
    allowTokenLabels: true,
    cluster: true,
  });
  project.provide("bridgeUrl", bridge.url);
  project.provide("bridgeToken", token);
  project.provide("redisPort", seed);
  project.provide("clusterNodes", cluster.seeds);
  const recorder = await startRecorder();
  project.provide("receiverUrl", recorder.url);
  project.provide("closingReceiverUrl", recorder.closingUrl);
  return async () => {
    await recorder.close();
    await bridge.close();
    await cluster.stop();
  };
}
