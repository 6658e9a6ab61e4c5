// Test helpers for push topics: real HTTP receivers on 127.0.0.1, and the app with a dispatcher
// over the test's own Redis prefix, on the real clock (deliveries wait for real due times).
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Attempt } from "../../src/dispatch/delivery";
import { createDispatcher, type Dispatcher, type DrainReport } from "../../src/dispatch/dispatcher";
import type { QStash } from "../../src/dispatch/qstash";
import { CLAIM_AHEAD_MS } from "../../src/domain/push";
import type { Logger } from "../../src/log";
import { DelayQueue } from "../../src/queue";
import { keys } from "../../src/redis/keys";
import { createScriptRunner, type RedisClient } from "../../src/redis/runner";
import { createRun, notices, type Run, type Work } from "../../src/run";
import { type TestApp, testApp } from "./app";
import { TEST_PARTITIONS, testRedis } from "./redis";

/** One request a receiver got. */
export type Received = {
  at: number;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Its place on its connection: 1 for a connection's first request, 2 when reused once… */
  onConnection: number;
};

/**
 * How a receiver answers a request: status, body, headers (after `delayMs`, a slow receiver); or
 * "hang" / "reset".
 */
export type Answer =
  | { status: number; body?: string; headers?: Record<string, string>; delayMs?: number }
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
      const send = () => {
        res.writeHead(answer.status, answer.headers ?? {});
        res.end(answer.body ?? "");
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
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
  /** A fresh run, as an entry point makes one per invocation (`subrequests`: the app's). */
  newRun(subrequests?: number): Run;
  /**
   * A run of its own draining push work, as a tick does (by default every push topic's jobs due
   * before the next tick): answers once they are delivered and their follow-ups done.
   */
  push(options?: {
    topic?: string;
    horizon?: number;
    run?: Run;
    notices?: boolean;
  }): Promise<DrainReport>;
  /**
   * A run of its own sending up to `most` failure notices; answers how many went out. Its clock
   * runs `aheadMs` ahead (a later invocation), and its dispatcher is `dispatcher` if given.
   */
  notices(most?: number, options?: { aheadMs?: number; dispatcher?: Dispatcher }): Promise<number>;
  /** A run whose clock runs `aheadMs` ahead of the real one. */
  runAt(aheadMs: number, subrequests?: number): Run;
  /** Another dispatcher on the app's script runner and log (another process's, say). */
  otherDispatcher(options: { maxOpenNotices?: number }): Dispatcher;
  /** Settles a delivery as a QStash callback does, in a run of its own (its follow-ups awaited). */
  settle(id: string, receipt: string, attempt: Attempt): Promise<boolean>;
  /** Waits for the background work of every request so far (prompt deliveries, follow-ups). */
  settled(): Promise<void>;
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
    /** Each run's subrequests (DQ_SUBREQUESTS). @default 1000 */
    subrequests?: number;
    batch?: number;
    /** Notice requests the process keeps open at once. @default 200 */
    maxOpenNotices?: number;
    /** How long each run may start new work, ms. @default 120000 */
    runLifetimeMs?: number;
    /** Wraps the dispatcher's Redis (to inject faults into its calls alone). */
    dispatcherRedis?: (redis: RedisClient) => RedisClient;
  } = {},
): PushApp {
  const redis = testRedis({ automaticDeserialization: false });
  const prefix = redis.prefix.slice(0, -1);
  const logs: Record<string, unknown>[] = [];
  const log: Logger = (entry) => logs.push(entry);
  const scripts = createScriptRunner(redis.redis, prefix, 3_600_000, TEST_PARTITIONS);
  const dispatcher = createDispatcher({
    scripts: options.dispatcherRedis
      ? createScriptRunner(options.dispatcherRedis(redis.redis), prefix, 3_600_000, TEST_PARTITIONS)
      : scripts,
    qstash: options.qstash,
    publicUrl: options.publicUrl,
    log,
    subrequests: options.subrequests,
    batch: options.batch,
    maxOpenNotices: options.maxOpenNotices,
  });
  const queue = new DelayQueue({
    redis: redis.redis,
    scripts,
    prefix,
    rawBodies: true,
    pollIntervalMs: 200,
    cancelDelivery: (messageId) => dispatcher.cancel(messageId),
  });
  const subrequests = options.subrequests ?? 1000;
  const lifetimeMs = options.runLifetimeMs ?? 120_000;
  const newRun = (limit = subrequests) => createRun({ subrequests: limit, lifetimeMs, log });
  const runAt = (aheadMs: number, limit = subrequests) =>
    createRun({ clock: () => Date.now() + aheadMs, subrequests: limit, lifetimeMs: 120_000, log });
  const requests: Run[] = [];
  const clock = { now: Date.now(), advance: () => Date.now(), set: () => Date.now() };
  const app = testApp({
    test: { ...redis, queue, clock, keys: keys(prefix) },
    log,
    push: {
      dispatcher,
      publicUrl: options.publicUrl,
      qstashReady: dispatcher.qstash !== undefined,
      log,
    },
    newRun: () => {
      const run = newRun();
      requests.push(run);
      return run;
    },
  });
  return {
    ...app,
    dispatcher,
    logs,
    newRun,
    push({ topic, horizon, run = newRun(), notices: withNotices } = {}) {
      const now = run.clock();
      const work: Work[] = [{ kind: "claim", topic, horizon: horizon ?? now + CLAIM_AHEAD_MS }];
      if (withNotices) work.push({ kind: "notices" });
      return dispatcher.drain(run, work);
    },
    async notices(most, { aheadMs = 0, dispatcher: by = dispatcher } = {}) {
      return (await by.drain(runAt(aheadMs), [notices(most)])).notices;
    },
    runAt,
    otherDispatcher: (other) => createDispatcher({ scripts, log, ...other }),
    async settle(id, receipt, attempt) {
      const run = newRun();
      const { settled, work } = await dispatcher.settle(run, { id, receipt, attempt });
      await dispatcher.drain(run, work);
      return settled;
    },
    async settled() {
      while (requests.length > 0) await Promise.all(requests.splice(0).map((run) => run.settled()));
    },
  };
}
