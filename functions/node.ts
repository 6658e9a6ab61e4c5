// delayq on Node: the same app as the Worker, served by @hono/node-server, with its own ticker.
// Redis is Upstash over REST, or any Redis 7+ / Valkey over TCP when REDIS_URL is set, or a Redis
// Cluster when REDIS_CLUSTER_NODES is.
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { NodeEnvSchema, parseConfig } from "../src/config";
import { publicFetch } from "../src/dispatch/public-fetch";
import { DelayqError } from "../src/domain/errors";
import { requestIdOf } from "../src/http/request-id";
import { messageOf } from "../src/log";
import { type ClusterRedis, connectCluster } from "../src/redis/cluster";
import { NodeRestRedis } from "../src/redis/rest-node";
import { connectRedis, type TcpRedis } from "../src/redis/tcp";
import { buildService, type Service } from "../src/service";

let service: Service;
let port: number;
let host: string;
let tickEveryMs: number;
/** The TCP connection when REDIS_URL is set, closed at shutdown. */
let tcp: TcpRedis | undefined;
/** The cluster's connections when REDIS_CLUSTER_NODES is set, closed at shutdown. */
let cluster: ClusterRedis | undefined;
try {
  const config = parseConfig(process.env, NodeEnvSchema);
  ({ PORT: port, HOST: host, DQ_TICK_INTERVAL_MS: tickEveryMs } = config);
  service = buildService(
    process.env,
    // undici rather than fetch: the same requests for far less CPU (src/redis/rest-node.ts). No
    // auto-pipelining: it grouped nothing at 8 concurrent callers (3.00 REST requests per
    // single-job lifecycle either way), and building a Pipeline for every command cost the
    // service ~12 % of its CPU per API request (bench/cpu.ts --driver rest). Instead the commands
    // of one turn of the event loop share a /pipeline request (turnPipelining). The Worker keeps
    // auto-pipelining: there each request is a subrequest counted against a limit.
    (settings) =>
      new NodeRestRedis({
        url: settings.url,
        token: settings.token,
        ...settings.options,
        enableAutoPipelining: false,
        turnPipelining: true,
        timeoutMs: settings.timeoutMs,
      }),
    {
      config,
      // Deliveries of topics a tenant's token reaches connect to public addresses only.
      publicFetch: publicFetch(),
      makeTcpRedis: ({ url, commandTimeoutMs, log }) => {
        // One log line per outage, not one per reconnection attempt.
        let down = false;
        tcp = connectRedis(url, {
          commandTimeoutMs,
          onError: (message) => {
            if (down) return;
            down = true;
            log({ level: "warn", event: "redis_connection_error", message });
          },
        });
        tcp.ioredis.on("ready", () => {
          if (down) log({ level: "info", event: "redis_connection_restored" });
          down = false;
        });
        return tcp;
      },
      makeClusterRedis: ({ nodes, password, commandTimeoutMs, log }) => {
        // Until the cluster is first reached, its errors are the start's: one line says them.
        let down = true;
        cluster = connectCluster(nodes, {
          commandTimeoutMs,
          password,
          onError: (message) => {
            if (down) return;
            down = true;
            log({ level: "warn", event: "redis_connection_error", message });
          },
        });
        let reached = false;
        cluster.ioredis.on("ready", () => {
          if (down && reached) log({ level: "info", event: "redis_connection_restored" });
          down = false;
          reached = true;
        });
        return cluster;
      },
    },
  );
  // A cluster none of whose seed nodes answers stops the start, naming REDIS_CLUSTER_NODES.
  await cluster?.ready();
  // The checks that take WebCrypto (a certificate-mode account's chain), before serving.
  await service.ready;
  // Keys spread over another number of partitions than configured would be out of reach.
  await service.layoutChecked();
} catch (error) {
  console.error(error instanceof DelayqError ? error.message : error);
  // The cluster's connections would keep retrying (and the process alive) while it exits.
  cluster?.ioredis.disconnect();
  process.exit(1);
}

const { app, scheduler, log, runs } = service;
// Work that outlives its invocation (deliveries waiting for their due times, a request's
// background work): shutdown waits for it. Each run logs its own failures.
const deferred = new Set<Promise<unknown>>();
const keep = (work: Promise<unknown>) => {
  deferred.add(work);
  void work.finally(() => deferred.delete(work));
};
// Each request is one run, as on Workers; the server's own bindings (the Node request, which
// lets a body of known length be read whole) stay beside it.
const fetchRun = (request: Request, bindings: object) =>
  app.fetch(request, {
    ...bindings,
    run: runs.request({
      path: new URL(request.url).pathname,
      requestId: requestIdOf(request.headers),
      waitUntil: keep,
    }),
  });
const server = serve({ fetch: fetchRun, port, hostname: host }, () => {
  const redis = cluster ? "cluster" : tcp ? "tcp" : "rest";
  log({ level: "info", event: "listening", url: `http://${host}:${port}`, redis });
});
// A port taken or a host that does not resolve: one line naming the setting, not a stack trace.
server.once("error", (error: NodeJS.ErrnoException) => {
  const where = `${host}:${port}`;
  const why =
    error.code === "EADDRINUSE"
      ? `${where} is in use by another process: set PORT (or HOST) to a free one`
      : error.code === "EADDRNOTAVAIL" || error.code === "ENOTFOUND" || error.code === "EAI_AGAIN"
        ? `HOST ${host} is not an address of this machine: set HOST (e.g. 127.0.0.1 or 0.0.0.0)`
        : `${where} cannot be listened on (${error.code ?? error.message}): check PORT and HOST`;
  console.error(`delayq is misconfigured: ${why}`);
  process.exit(1);
});

// The scheduler: the cron's work, every minute like the Worker's trigger (DQ_TICK_INTERVAL_MS).
// A tick never overlaps the previous one in this process (other processes may tick at once).
// Push deliveries wait for their due times after the tick returns; shutdown waits for them.
let ticking: Promise<unknown> = Promise.resolve();
let busy = false;
const ticker = setInterval(() => {
  if (busy) return;
  busy = true;
  // Each tick is one invocation, as on Workers: one run, with one subrequest budget.
  ticking = scheduler
    .tick(runs.tick({ waitUntil: keep }))
    .catch((error: unknown) => {
      log({ level: "error", event: "tick_failed", message: messageOf(error) });
    })
    .finally(() => {
      busy = false;
    });
}, tickEveryMs);

async function stop(): Promise<void> {
  clearInterval(ticker);
  // Waiting long-polls answer (no jobs) before the server closes, rather than being cut off.
  service.queue.stopWaiting();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // A keep-alive connection goes idle once its answer is written: close those as they come.
  const idle = setInterval(() => (server as Server).closeIdleConnections(), 50);
  try {
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 5000))]);
    clearInterval(idle);
    await ticking;
    while (deferred.size > 0) await Promise.allSettled([...deferred]);
    await tcp?.quit();
    await cluster?.quit();
  } finally {
    process.exit(0);
  }
}

function shutdown() {
  void stop();
}
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
