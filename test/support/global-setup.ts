// vitest globalSetup: one redis-server and one Upstash-REST bridge for the whole run, and a
// webhook receiver that code inside workerd can deliver to and read back.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
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
    /** POST anything to it; GET /__received?id=<delayq-id> answers what arrived for that id. */
    receiverUrl: string;
  }
}

/** Records every request; answers 204, or what GET /__received asks for. */
async function startRecorder(): Promise<{ url: string; close(): Promise<void> }> {
  const received: { id: string; at: number; headers: Record<string, unknown>; body: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://recorder");
      if (req.method === "GET" && url.pathname === "/__received") {
        const id = url.searchParams.get("id");
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(received.filter((r) => r.id === id)));
        return;
      }
      const id = String(req.headers["delayq-id"] ?? "");
      received.push({
        id,
        at: Date.now(),
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
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
  const recorder = await startRecorder();
  project.provide("receiverUrl", recorder.url);
  return async () => {
    await recorder.close();
    await bridge.close();
    await redis.stop();
  };
}
