// Wires the service from its environment: config, Redis client, script runner, payments,
// dispatcher, queue, app, scheduler, and the runs the entry points make per invocation. Used by
// both entry points, so the Worker and Node run the same thing.

import { parseConfig, type ServiceConfig } from "./config";
import type { Post } from "./dispatch/delivery";
import { createDispatcher, type Dispatcher } from "./dispatch/dispatcher";
import { createQStash, type QStash } from "./dispatch/qstash";
import { destinationPolicy } from "./domain/destinations";
import { DelayqError } from "./domain/errors";
import { CLAIM_AHEAD_MS } from "./domain/push";
import { createApp } from "./http/app";
import { parseTokens } from "./http/auth";
import { jsonLogger, type Logger, messageOf } from "./log";
import { type Counters, countedStep, createCounters } from "./metrics/counters";
import { checkAccounts, parseAlipayAccounts, parseWechatPayAccounts } from "./payments/accounts";
import { createRefunds, type Refunds } from "./payments/refunds";
import { createPayments, type Payments } from "./payments/watches";
import { DelayQueue } from "./queue";
import {
  createScriptRunner,
  REDIS_CLIENT_OPTIONS,
  type RedisClient,
  type ScriptRunner,
} from "./redis/runner";
import type { ClusterNode } from "./redis/urls";
import { createRun, type Run } from "./run/run";
import { createScheduler, drainStep, type Scheduler, type SchedulerStep } from "./scheduler";
import { pushStep } from "./scheduler/push";
import { createSchedules, type Schedules } from "./schedules/schedules";
import { schedulesStep } from "./schedules/step";

/** What an entry point needs to build its runtime's Redis client (Upstash over REST). */
export type RedisSettings = {
  url: string;
  token: string;
  /** DQ_REDIS_TIMEOUT_MS: what `options.signal` gives each request, for a client without signals. */
  timeoutMs: number;
  options: typeof REDIS_CLIENT_OPTIONS & {
    retry: { retries: number };
    /** A fresh signal per HTTP request: the request (with its retry) ends at DQ_REDIS_TIMEOUT_MS. */
    signal: () => AbortSignal;
  };
};

/** What Node's entry point needs to open a TCP connection to Redis (REDIS_URL). */
export type TcpRedisSettings = {
  /** REDIS_URL: redis:// or rediss://, already checked. */
  url: string;
  /** DQ_REDIS_TIMEOUT_MS: each command's time limit. */
  commandTimeoutMs: number;
  log: Logger;
};

/** What Node's entry point needs to connect to a Redis Cluster (REDIS_CLUSTER_NODES). */
export type ClusterRedisSettings = {
  /** REDIS_CLUSTER_NODES, parsed: the seed nodes. */
  nodes: ClusterNode[];
  /** REDIS_PASSWORD, when set. */
  password: string | undefined;
  /** DQ_REDIS_TIMEOUT_MS: each command's time limit. */
  commandTimeoutMs: number;
  log: Logger;
};

export type Service = {
  config: ServiceConfig;
  queue: DelayQueue;
  app: ReturnType<typeof createApp>;
  scheduler: Scheduler;
  log: Logger;
  /** The process's counters: /metrics shows them; push delivery and polling count into them. */
  counters: Counters;
  /** Payment watches (start, read, stop, list, notifications, and the poller). */
  payments: Payments;
  /** Refund watches (the same, for refunds; their polls in __refunds). */
  refunds: Refunds;
  /** Push delivery, payment polls and failure notices, drained within a run. */
  dispatcher: Dispatcher;
  /** Makes the run of each invocation (the entry points do, and hand it down). */
  runs: Runs;
  /**
   * Settles once the checks that take WebCrypto are done (a certificate-mode account's chain):
   * rejects with the internal_error a bad configuration gets. The entry points await it before
   * serving anything, so such an account is refused at start-up like any other bad value.
   */
  ready: Promise<void>;
  /**
   * Checks that Redis holds the deployment's keys in as many partitions as DQ_CLUSTER_PARTITIONS
   * says (marking them at a first start with more than one): rejects with the line to stop on
   * when not. Node awaits it before serving; a Redis that cannot answer yet is not a refusal.
   */
  layoutChecked(): Promise<void>;
};

/** The runs of one service: one per request, one per tick, each with DQ_SUBREQUESTS. */
export type Runs = {
  /** A request's: `waitUntil` is its platform's (a Worker's ctx.waitUntil; none on Node). */
  request(options: {
    path: string;
    /** The request's id (http/request-id.ts), on its log lines. */
    requestId?: string;
    waitUntil?: (work: Promise<unknown>) => void;
  }): Run;
  /** A tick's: `startedAt` is the cron's scheduledTime. */
  tick(options: { startedAt?: number; waitUntil?: (work: Promise<unknown>) => void }): Run;
};

/** What buildService may be given besides the environment and the REST client's maker. */
export type BuildOptions = {
  config?: ServiceConfig;
  log?: Logger;
  makeTcpRedis?: (settings: TcpRedisSettings) => RedisClient;
  /** On Node, a config with REDIS_CLUSTER_NODES uses it (`connectCluster`, src/redis/cluster.ts). */
  makeClusterRedis?: (settings: ClusterRedisSettings) => RedisClient;
  /**
   * The fetch for deliveries restricted to public addresses (DQ_PRIVATE_PUSH), which checks
   * what names resolve to (Node: publicFetch). @default none: URLs are checked as written
   */
  publicFetch?: Post;
};

/**
 * Builds the service. `makeRedis` constructs the REST client for the runtime (`@upstash/redis` on
 * Node, `@upstash/redis/cloudflare` in Workers); on Node a config with REDIS_URL (NodeEnvSchema)
 * uses `makeTcpRedis` instead (`connectRedis` from src/redis/tcp.ts, which Workers cannot load),
 * and one with REDIS_CLUSTER_NODES `makeClusterRedis` (`connectCluster`, src/redis/cluster.ts).
 * The rest is the same everywhere: one script runner, then payments (whose poller the dispatcher
 * runs), the dispatcher, the queue, the app and the scheduler, each given what it needs. Throws
 * an `internal_error` naming the variable when the environment is incomplete or invalid.
 */
export function buildService(
  env: Record<string, unknown>,
  makeRedis: (settings: RedisSettings) => RedisClient,
  options: BuildOptions = {},
): Service {
  const config = options.config ?? parseConfig(env);
  const log = options.log ?? jsonLogger;
  const tokens = parseTokens(config.DQ_TOKENS);
  const destinations = destinationPolicy(config.DQ_PRIVATE_PUSH, tokens.limitedScopes);
  const redis = redisOf(config, makeRedis, options, log);
  const scripts = createScriptRunner(
    redis,
    config.DQ_PREFIX,
    config.DQ_RETENTION_SECONDS * 1000,
    partitionCount(config),
  );
  const counters = createCounters();
  const accounts = accountsOf(config, env);
  const ready = accountsChecked(accounts);
  const { payments, refunds } = watchesOf(config, scripts, accounts, counters);
  const dispatcher = createDispatcher({
    scripts,
    log,
    qstash: qstashOf(config),
    publicUrl: config.DQ_PUBLIC_URL,
    count: (topic, outcome) =>
      counters.inc("delayq_deliveries_total", {
        topic,
        outcome: outcome === "fail" ? "failed" : outcome,
      }),
    handlers: { payments: payments.poller, refunds: refunds.poller },
    subrequests: config.DQ_SUBREQUESTS,
    destinations: { policy: destinations, fetch: options.publicFetch },
    ...("DQ_TICK_INTERVAL_MS" in config ? { tickIntervalMs: config.DQ_TICK_INTERVAL_MS } : {}),
  });
  const queue = new DelayQueue({
    redis,
    scripts,
    prefix: config.DQ_PREFIX,
    // A push job published to QStash is cancelled there before its delete is answered.
    cancelDelivery: (messageId) => dispatcher.cancel(messageId),
    retention: config.DQ_RETENTION_SECONDS,
    defaults: { ttr: config.DQ_DEFAULT_TTR, maxAttempts: config.DQ_DEFAULT_MAX_ATTEMPTS },
    maxBodyBytes: config.DQ_MAX_BODY_BYTES,
    pollIntervalMs: config.DQ_POLL_INTERVAL_MS,
    // The API answers job bodies as the text they were sent as.
    rawBodies: true,
  });
  const runs = runsOf(config.DQ_SUBREQUESTS, log);
  const schedules = schedulesOf(config, scripts, counters, queue.onRedisClock);
  const app = createApp({
    queue,
    tokens,
    destinations,
    maxRequestBytes: config.DQ_MAX_REQUEST_BYTES,
    log,
    counters,
    metricsMaxTopics: config.DQ_METRICS_MAX_TOPICS,
    dashboardSessionSeconds: config.DQ_DASHBOARD_SESSION_S,
    paymentWatches: { list: (page) => payments.list(page) },
    refundWatches: { list: (page) => refunds.list(page) },
    payments: {
      payments,
      refunds,
      dispatcher,
      alipayAccounts: accounts.alipay,
      wechatpayAccounts: accounts.wechatpay,
      log,
    },
    push: {
      dispatcher,
      publicUrl: config.DQ_PUBLIC_URL,
      qstashReady: dispatcher.qstash !== undefined,
      log,
    },
    schedules,
    newRun: (request) => runs.request(request),
  });
  const scheduler = createScheduler({
    steps: tickSteps(queue, schedules, dispatcher, counters),
    budgetMs: config.DQ_TICK_BUDGET_MS,
    log,
  });
  return {
    config,
    queue,
    app,
    scheduler,
    log,
    counters,
    payments,
    refunds,
    dispatcher,
    runs,
    ready,
    layoutChecked: () => layoutChecked(scripts, partitionCount(config), config.DQ_PREFIX, log),
  };
}

async function layoutChecked(
  scripts: ScriptRunner,
  count: number,
  prefix: string,
  log: Logger,
): Promise<void> {
  let stored: number;
  try {
    stored = await scripts.run("layoutMark", undefined, [count]);
  } catch (error) {
    // One keyspace (the default on one Redis) starts whatever Redis says: its calls report it.
    if (count > 1) log({ level: "warn", event: "layout_unchecked", message: messageOf(error) });
    return;
  }
  if (stored === count) return;
  const why =
    stored === 1
      ? `DQ_CLUSTER_PARTITIONS is ${count}, but Redis holds DQ_PREFIX "${prefix}" in one keyspace (written with 1): set DQ_CLUSTER_PARTITIONS=1, or move its keys first with \`npm run migrate-cluster\` (docs/cluster.md)`
      : `DQ_CLUSTER_PARTITIONS is ${count}, but Redis holds DQ_PREFIX "${prefix}" spread over ${stored} partitions: set DQ_CLUSTER_PARTITIONS=${stored} (it is fixed for a deployment's life)`;
  throw new DelayqError("internal_error", `delayq is misconfigured: ${why}`);
}

/** Each tick: drain the buckets, make the schedules' fires, claim push jobs and send notices. */
function tickSteps(
  queue: DelayQueue,
  schedules: Schedules,
  dispatcher: Dispatcher,
  counters: Counters,
): SchedulerStep[] {
  const steps = [drainStep(queue), schedulesStep(schedules), pushStep(dispatcher)];
  return steps.map((step) => countedStep(step as SchedulerStep, counters));
}

/**
 * Recurring schedules; their fires counted by schedule, at most DQ_METRICS_MAX_TOPICS names (the
 * rest under schedule="~other"), so that /metrics stays bounded however many there are.
 */
function schedulesOf(
  config: ServiceConfig,
  scripts: ScriptRunner,
  counters: Counters,
  redisClock: boolean,
): Schedules {
  const named = new Set<string>();
  return createSchedules({
    scripts,
    redisClock,
    defaults: { ttrMs: config.DQ_DEFAULT_TTR * 1000, maxAttempts: config.DQ_DEFAULT_MAX_ATTEMPTS },
    count(schedule, made) {
      if (!named.has(schedule) && named.size < config.DQ_METRICS_MAX_TOPICS) named.add(schedule);
      const label = named.has(schedule) ? schedule : "~other";
      counters.inc("delayq_schedule_fires_total", { schedule: label }, made);
    },
  });
}

/** Payment and refund watches: the same scripts, accounts and defaults; polls counted apart. */
function watchesOf(
  config: ServiceConfig,
  scripts: ScriptRunner,
  accounts: ReturnType<typeof accountsOf>,
  counters: Counters,
): { payments: Payments; refunds: Refunds } {
  const watching = {
    scripts,
    alipay: accounts.alipay,
    wechatpay: accounts.wechatpay,
    defaults: { ttrMs: config.DQ_DEFAULT_TTR * 1000, maxAttempts: config.DQ_DEFAULT_MAX_ATTEMPTS },
    minPollMs: config.DQ_MIN_POLL_MS,
    maxWatchesPerToken: config.DQ_MAX_WATCHES_PER_TOKEN,
  };
  return {
    payments: createPayments({
      ...watching,
      count: (provider, outcome) => counters.inc("delayq_polls_total", { provider, outcome }),
    }),
    refunds: createRefunds({
      ...watching,
      count: (provider, outcome) =>
        counters.inc("delayq_refund_polls_total", { provider, outcome }),
    }),
  };
}

/**
 * The most subrequests a request makes itself before the work it hands to the background (a
 * write, a settle, a watch's read and transition), kept out of that work's budget.
 */
const REQUEST_OWN_SUBREQUESTS = 3;
/** How long a request's run may start new work: a Worker's waitUntil ends 30 s after the answer. */
const REQUEST_RUN_MS = 30_000;
/**
 * How long a tick's run may start new work: it claims what falls due before the next tick, and
 * follows up on those deliveries (a cron invocation may run 15 minutes).
 */
const TICK_RUN_MS = CLAIM_AHEAD_MS + 60_000;

function runsOf(subrequests: number, log: Logger): Runs {
  return {
    request({ path, requestId, waitUntil }) {
      const run = createRun({
        subrequests,
        lifetimeMs: REQUEST_RUN_MS,
        log,
        waitUntil,
        label: requestId === undefined ? { path } : { path, requestId },
      });
      run.budget.take(REQUEST_OWN_SUBREQUESTS);
      return run;
    },
    tick: ({ startedAt, waitUntil }) =>
      createRun({
        startedAt,
        tick: true,
        subrequests,
        lifetimeMs: TICK_RUN_MS,
        log,
        waitUntil,
        label: { run: "tick" },
      }),
  };
}

/** The Redis client: Upstash over REST, or (Node) a Redis Cluster, or TCP (REDIS_URL). */
function redisOf(
  config: ServiceConfig,
  makeRedis: (settings: RedisSettings) => RedisClient,
  { makeTcpRedis, makeClusterRedis }: BuildOptions,
  log: Logger,
): RedisClient {
  const clusterNodes = "REDIS_CLUSTER_NODES" in config ? config.REDIS_CLUSTER_NODES : undefined;
  if (clusterNodes !== undefined) {
    if (!makeClusterRedis) {
      throw new DelayqError(
        "internal_error",
        "delayq is misconfigured: REDIS_CLUSTER_NODES is set, but this runtime reaches Redis " +
          "over REST only: run functions/node.ts, or set UPSTASH_REDIS_REST_URL and " +
          "UPSTASH_REDIS_REST_TOKEN",
      );
    }
    return makeClusterRedis({
      nodes: clusterNodes,
      password: "REDIS_PASSWORD" in config ? config.REDIS_PASSWORD : undefined,
      commandTimeoutMs: config.DQ_REDIS_TIMEOUT_MS,
      log,
    });
  }
  const tcpUrl = "REDIS_URL" in config ? config.REDIS_URL : undefined;
  if (tcpUrl !== undefined) {
    return tcpRedisOf(makeTcpRedis, {
      url: tcpUrl,
      commandTimeoutMs: config.DQ_REDIS_TIMEOUT_MS,
      log,
    });
  }
  return misconfiguredIfThrows(() =>
    makeRedis({
      ...restSettings(config),
      timeoutMs: config.DQ_REDIS_TIMEOUT_MS,
      // One retry on a network error: an API caller would rather get a fast 503 than wait.
      options: {
        ...REDIS_CLIENT_OPTIONS,
        retry: { retries: 1 },
        signal: () => AbortSignal.timeout(config.DQ_REDIS_TIMEOUT_MS),
      },
    }),
  );
}

/**
 * The payment accounts; a bad value stops the service with a message naming the variable. `env`
 * holds the variables their key and certificate fields may name ({"env": "NAME"}).
 */
function accountsOf(config: ServiceConfig, env: Readonly<Record<string, unknown>>) {
  try {
    return {
      alipay: parseAlipayAccounts(config.DQ_ALIPAY_ACCOUNTS, env),
      wechatpay: parseWechatPayAccounts(config.DQ_WECHATPAY_ACCOUNTS, env),
    };
  } catch (error) {
    throw new DelayqError("internal_error", `delayq is misconfigured: ${messageOf(error)}`);
  }
}

/** checkAccounts, its refusal said as accountsOf says one. */
function accountsChecked(accounts: ReturnType<typeof accountsOf>): Promise<void> {
  const checked = checkAccounts(accounts).catch((error: unknown) => {
    throw new DelayqError("internal_error", `delayq is misconfigured: ${messageOf(error)}`);
  });
  // Handled here so that a service nobody awaits (a test's, a script's) is no unhandled rejection;
  // awaiting `checked` still rejects.
  checked.catch(() => {});
  return checked;
}

/** QStash, when its four settings are all set (topics may then push via QStash). */
function qstashOf(config: ServiceConfig): QStash | undefined {
  const {
    QSTASH_URL: url,
    QSTASH_TOKEN: token,
    QSTASH_CURRENT_SIGNING_KEY: currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: nextSigningKey,
    DQ_QSTASH_TIMEOUT_MS: timeoutMs,
  } = config;
  if (!url || !token || !currentSigningKey || !nextSigningKey) return undefined;
  return createQStash({ url, token, currentSigningKey, nextSigningKey, timeoutMs });
}

/** The REST URL and token; NodeEnvSchema only lets them be missing when REDIS_URL is set. */
function restSettings(config: ServiceConfig): { url: string; token: string } {
  const { UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: token } = config;
  if (url === undefined || token === undefined) {
    throw new DelayqError(
      "internal_error",
      "delayq is misconfigured: set REDIS_URL, or UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN",
    );
  }
  return { url, token };
}

/** The TCP client, where the runtime can make one (Node); the Worker cannot. */
function tcpRedisOf(
  make: ((settings: TcpRedisSettings) => RedisClient) | undefined,
  settings: TcpRedisSettings,
): RedisClient {
  if (!make) {
    throw new DelayqError(
      "internal_error",
      "delayq is misconfigured: REDIS_URL is set, but this runtime reaches Redis over REST only " +
        "(a Cloudflare Worker cannot open TCP to Redis): set UPSTASH_REDIS_REST_URL and " +
        "UPSTASH_REDIS_REST_TOKEN, or run functions/node.ts",
    );
  }
  try {
    return make(settings);
  } catch (error) {
    if (error instanceof DelayqError) throw error;
    const name = error instanceof Error ? error.name : "an error";
    throw new DelayqError(
      "internal_error",
      `delayq is misconfigured: the Redis client refused its settings (${name}): check REDIS_URL`,
      { cause: error },
    );
  }
}

/**
 * The client's constructor checks its settings too; its error would end the process with a stack
 * trace (Node) or a text/plain 500 (Worker). It also quotes the URL, which may carry a password,
 * so only its name is kept.
 */
function misconfiguredIfThrows<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    const name = error instanceof Error ? error.name : "an error";
    throw new DelayqError(
      "internal_error",
      `delayq is misconfigured: the Upstash client refused its settings (${name}): check ` +
        "UPSTASH_REDIS_REST_URL (the database's REST URL, https://<name>.upstash.io) and " +
        "UPSTASH_REDIS_REST_TOKEN",
      { cause: error },
    );
  }
}

/**
 * DQ_CLUSTER_PARTITIONS (Node only): 0, its default, is 16 on a Redis Cluster and 1 (one
 * keyspace) on one Redis; the Worker always has one.
 */
export function partitionCount(config: ServiceConfig): number {
  if (!("DQ_CLUSTER_PARTITIONS" in config)) return 1;
  if (config.DQ_CLUSTER_PARTITIONS > 0) return config.DQ_CLUSTER_PARTITIONS;
  return config.REDIS_CLUSTER_NODES ? DEFAULT_CLUSTER_PARTITIONS : 1;
}

/** Partitions of a deployment on a Redis Cluster unless DQ_CLUSTER_PARTITIONS says otherwise. */
export const DEFAULT_CLUSTER_PARTITIONS = 16;
