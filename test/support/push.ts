// Test helpers for push topics: real HTTP receivers on 127.0.0.1, and the app with a dispatcher
// over the test's own Redis prefix, on the real clock (deliveries wait for real due times).
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { createDispatcher, type Dispatcher } from "../../src/dispatch/dispatcher";
import type { QStash } from "../../src/dispatch/qstash";
import type { Logger } from "../../src/log";
import { DelayQueue } from "../../src/queue";
import { keys } from "../../src/redis/keys";
import type { RedisClient } from "../../src/redis/runner";
import { type TestApp, testApp } from "./app";
import { testRedis } from "./redis";

/** One request a receiver got. */
export type Received = {
  at: number;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Its place on its connection: 1 for a connection's first request, 2 when reused once… */
  onConnection: number;
};

/** How a receiver answers a request: status, body, headers; or "hang" / "reset". */
export type Answer =
  | { status: number; body?: string; headers?: Record<string, string> }
  | "hang"
  | "reset";

export type Receiver = {
  url: string;
  received: Received[];
  /** Sets how the next requests are answered (default 204). */
  answer(fn: (request: Received) => Answer): void;
  /** Resolves once `n` requests arrived (or rejects after `ms`). */
  waitFor(n: number, ms?: number): Promise<Received[]>;
  close(): Promise<void>;
};

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let respond: (request: Received) => Answer = () => ({ status: 204 });
  const sockets = new Set<Socket>();
  const requestsOn = new WeakMap<Socket, number>();
  const hanging = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const onConnection = (requestsOn.get(req.socket) ?? 0) + 1;
      requestsOn.set(req.socket, onConnection);
      const request: Received = {
        at: Date.now(),
        path: req.url ?? "/",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        onConnection,
      };
      received.push(request);
      const answer = respond(request);
      if (answer === "hang") {
        hanging.add(res);
        return;
      }
      if (answer === "reset") {
        req.socket.destroy();
        return;
      }
      res.writeHead(answer.status, answer.headers ?? {});
      res.end(answer.body ?? "");
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    answer(fn) {
      respond = fn;
    },
    async waitFor(n, ms = 10_000) {
      const deadline = Date.now() + ms;
      while (received.length < n) {
        if (Date.now() > deadline) {
          throw new Error(`the receiver got ${received.length} of ${n} requests in ${ms} ms`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      return received.slice(0, n);
    },
    async close() {
      for (const res of hanging) res.destroy();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type PushApp = TestApp & {
  dispatcher: Dispatcher;
  /** Work the app started in the background (prompt deliveries): await it to settle. */
  background: Promise<unknown>[];
  /** Everything logged by the dispatcher and the app. */
  logs: Record<string, unknown>[];
};

/**
 * The app with push delivery on the test's own prefix and the real clock. `qstash` and
 * `publicUrl` enable `via: "qstash"`.
 */
export function testPushApp(
  options: {
    qstash?: QStash;
    publicUrl?: string;
    subrequests?: number;
    batch?: number;
    /** Wraps the dispatcher's Redis (to inject faults into its calls alone). */
    dispatcherRedis?: (redis: RedisClient) => RedisClient;
  } = {},
): PushApp {
  const redis = testRedis({ automaticDeserialization: false });
  const prefix = redis.prefix.slice(0, -1);
  const logs: Record<string, unknown>[] = [];
  const log: Logger = (entry) => logs.push(entry);
  const dispatcher = createDispatcher({
    redis: options.dispatcherRedis ? options.dispatcherRedis(redis.redis) : redis.redis,
    prefix,
    retentionMs: 3_600_000,
    qstash: options.qstash,
    publicUrl: options.publicUrl,
    log,
    subrequests: options.subrequests,
    batch: options.batch,
  });
  const queue = new DelayQueue({
    redis: redis.redis,
    prefix,
    rawBodies: true,
    pollIntervalMs: 200,
    cancelDelivery: (messageId) => dispatcher.cancel(messageId),
  });
  const clock = { now: Date.now(), advance: () => Date.now(), set: () => Date.now() };
  const background: Promise<unknown>[] = [];
  const app = testApp({
    test: { ...redis, queue, clock, keys: keys(prefix) },
    log,
    push: {
      dispatcher,
      publicUrl: options.publicUrl,
      qstashReady: options.qstash !== undefined && options.publicUrl !== undefined,
      background: (_c, work) => background.push(work),
      log,
    },
  });
  return { ...app, dispatcher, background, logs };
}
