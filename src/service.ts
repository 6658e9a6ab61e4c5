// Wires the service from its environment: config, Redis client, queue, scheduler, app. Used by
// both entry points, so the Worker and Node run the same thing.
import { type Config, parseConfig } from "./config";
import { DelayqError } from "./domain/errors";
import { createApp } from "./http/app";
import { parseTokens } from "./http/auth";
import { jsonLogger, type Logger } from "./log";
import { DelayQueue } from "./queue";
import { REDIS_CLIENT_OPTIONS, type RedisClient } from "./redis/runner";
import { createScheduler, drainStep, type Scheduler } from "./scheduler";

/** What an entry point needs to build its runtime's Redis client. */
export type RedisSettings = {
  url: string;
  token: string;
  options: typeof REDIS_CLIENT_OPTIONS & {
    retry: { retries: number };
    /** A fresh signal per HTTP request: the request (with its retry) ends at DQ_REDIS_TIMEOUT_MS. */
    signal: () => AbortSignal;
  };
};

export type Service = {
  config: Config;
  queue: DelayQueue;
  app: ReturnType<typeof createApp>;
  scheduler: Scheduler;
  log: Logger;
};

/**
 * Builds the service. `makeRedis` constructs the client for the runtime (`@upstash/redis` on
 * Node, `@upstash/redis/cloudflare` in Workers); the rest is the same everywhere. Throws an
 * `internal_error` naming the variable when the environment is incomplete or invalid.
 */
export function buildService(
  env: Record<string, unknown>,
  makeRedis: (settings: RedisSettings) => RedisClient,
  options: { config?: Config; log?: Logger } = {},
): Service {
  const config = options.config ?? parseConfig(env);
  const log = options.log ?? jsonLogger;
  const redis = misconfiguredIfThrows(() =>
    makeRedis({
      url: config.UPSTASH_REDIS_REST_URL,
      token: config.UPSTASH_REDIS_REST_TOKEN,
      // One retry on a network error: an API caller would rather get a fast 503 than wait ~4 s.
      options: {
        ...REDIS_CLIENT_OPTIONS,
        retry: { retries: 1 },
        signal: () => AbortSignal.timeout(config.DQ_REDIS_TIMEOUT_MS),
      },
    }),
  );
  const queue = new DelayQueue({
    redis,
    prefix: config.DQ_PREFIX,
    retention: config.DQ_RETENTION_SECONDS,
    defaults: { ttr: config.DQ_DEFAULT_TTR, maxAttempts: config.DQ_DEFAULT_MAX_ATTEMPTS },
    maxBodyBytes: config.DQ_MAX_BODY_BYTES,
    pollIntervalMs: config.DQ_POLL_INTERVAL_MS,
    // The API answers job bodies as the text they were sent as.
    rawBodies: true,
  });
  const app = createApp({
    queue,
    tokens: parseTokens(config.DQ_TOKENS),
    maxRequestBytes: config.DQ_MAX_REQUEST_BYTES,
    log,
  });
  const scheduler = createScheduler({
    steps: [drainStep(queue)],
    budgetMs: config.DQ_TICK_BUDGET_MS,
    log,
  });
  return { config, queue, app, scheduler, log };
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
