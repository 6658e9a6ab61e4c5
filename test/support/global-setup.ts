// vitest globalSetup: one redis-server and one Upstash-REST bridge for the whole run, and a
// webhook receiver that code inside workerd can deliver to and read back.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { TestProject } from "vitest/node";
import { startBridge } from "../../dev/bridge";
import { findRedisServer, RedisNotInstalledError, startRedisServer } from "../../dev/redis-server";
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
    /**
     * The same recorder on its own port, with receiverUrl's /__received, answering only a
     * connection's first request: it drops the connection when another comes on it (as a receiver
     * closing an idle connection just then), and every request to /drop.
     */
    closingReceiverUrl: string;
    /**
     * The node-cluster project's (cluster-setup.ts): REDIS_CLUSTER_NODES of its local cluster,
     * which the bridge and redisPort front.
     */
    clusterNodes: string;
  }
}

/**
 * Records every request; answers 204, or what GET /__received asks for. The closing server records
 * into the same list, each request with its place on its connection and whether it was dropped.
 */
export async function startRecorder(): Promise<{
  url: string;
  closingUrl: string;
  close(): Promise<void>;
}> {
  const received: {
    id: string;
    at: number;
    headers: Record<string, unknown>;
    body: string;
    onConnection: number;
    dropped: boolean;
  }[] = [];
  const requestsOn = new WeakMap<Socket, number>();
  const handler = (closing: boolean) => (req: IncomingMessage, res: ServerResponse) => {
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
      const onConnection = (requestsOn.get(req.socket) ?? 0) + 1;
      requestsOn.set(req.socket, onConnection);
      const dropped = closing && (onConnection > 1 || url.pathname === "/drop");
      received.push({
        id: String(req.headers["delayq-id"] ?? ""),
        at: Date.now(),
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
        onConnection,
        dropped,
      });
      if (dropped) {
        req.socket.destroy();
        return;
      }
      res.writeHead(204);
      res.end();
    });
  };
  const servers = [createServer(handler(false)), createServer(handler(true))];
  const urls = await Promise.all(
    servers.map(async (server) => {
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    }),
  );
  return {
    url: urls[0] as string,
    closingUrl: urls[1] as string,
    close: async () => {
      await Promise.all(
        servers.map(
          (server) =>
            new Promise<void>((resolve) => {
              server.closeAllConnections();
              server.close(() => resolve());
            }),
        ),
      );
    },
  };
}

/** Stops the run with one line when there is no redis-server to start. */
export function requireRedisServer(): void {
  try {
    findRedisServer();
  } catch (error) {
    if (!(error instanceof RedisNotInstalledError)) throw error;
    // One line instead of this setup's stack, and none from every test file after it.
    console.error(
      "npm test needs redis-server: sudo apt-get install -y redis-server (macOS: brew install " +
        "redis), or set REDIS_SERVER_BIN to a redis-server binary",
    );
    process.exit(1);
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  requireRedisServer();
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
  project.provide("closingReceiverUrl", recorder.closingUrl);
  return async () => {
    await recorder.close();
    await bridge.close();
    await redis.stop();
  };
}
