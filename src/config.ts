// The service's configuration, read once from the environment (Worker bindings or process.env).
import { z } from "zod";
import { PRIVATE_PUSH_SETTINGS } from "./domain/destinations";
import { DelayqError } from "./domain/errors";
import { DEFAULT_MAX_WATCHES_PER_TOKEN } from "./domain/payments";
import { DEFAULT_MAX_REQUEST_BYTES } from "./http/body";
import { DEFAULT_METRICS_MAX_TOPICS } from "./metrics/collect";
import {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_RETENTION_SECONDS,
  DEFAULT_TTR_SECONDS,
} from "./queue/options";
import { MAX_PARTITIONS } from "./redis/partitions";
import { parseClusterNodes, redisUrlProblem, restUrlProblem } from "./redis/urls";

/** A whole-number setting; an empty value (a compose file's `NAME=`) is no value: the default. */
const whole = (name: string, min: number, max: number, fallback: number) =>
  z.preprocess(
    (value) => (typeof value === "string" && value.trim() === "" ? undefined : value),
    z.coerce
      .number({ message: `${name} must be a number` })
      .int(`${name} must be a whole number`)
      .min(min, `${name} must be at least ${min}`)
      .max(max, `${name} must be at most ${max}`)
      .default(fallback),
  );

const restUrl = (onNode: boolean) =>
  z
    .string({
      message: "UPSTASH_REDIS_REST_URL is not set: give the REST URL of the Upstash database",
    })
    .superRefine((value, ctx) => {
      const problem = restUrlProblem(value, onNode);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });

const restToken = z
  .string({ message: "UPSTASH_REDIS_REST_TOKEN is not set: give the database's REST token" })
  .min(1, "UPSTASH_REDIS_REST_TOKEN is empty");

/** The variables of every runtime, after the Redis ones. */
const common = {
  DQ_TOKENS: z
    .string({
      message: "DQ_TOKENS is not set: give the API's bearer tokens, e.g. DQ_TOKENS=s3cret",
    })
    .min(1, "DQ_TOKENS is empty"),
  DQ_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, "DQ_PREFIX must be 1-64 characters of A-Z a-z 0-9 _ . : -")
    .default("dq"),
  DQ_RETENTION_SECONDS: whole("DQ_RETENTION_SECONDS", 1, 30 * 86400, DEFAULT_RETENTION_SECONDS),
  DQ_DEFAULT_TTR: whole("DQ_DEFAULT_TTR", 1, 86400, DEFAULT_TTR_SECONDS),
  DQ_DEFAULT_MAX_ATTEMPTS: whole("DQ_DEFAULT_MAX_ATTEMPTS", 1, 1000, DEFAULT_MAX_ATTEMPTS),
  DQ_MAX_BODY_BYTES: whole("DQ_MAX_BODY_BYTES", 1, 8 * 1024 * 1024, DEFAULT_MAX_BODY_BYTES),
  DQ_MAX_REQUEST_BYTES: whole(
    "DQ_MAX_REQUEST_BYTES",
    1024,
    100 * 1024 * 1024,
    DEFAULT_MAX_REQUEST_BYTES,
  ),
  DQ_POLL_INTERVAL_MS: whole("DQ_POLL_INTERVAL_MS", 50, 20_000, DEFAULT_POLL_INTERVAL_MS),
  DQ_TICK_BUDGET_MS: whole("DQ_TICK_BUDGET_MS", 100, 14 * 60_000, 20_000),
  // How long a dashboard session lasts, seconds (src/http/pages/session.ts): 12 h by default.
  DQ_DASHBOARD_SESSION_S: whole("DQ_DASHBOARD_SESSION_S", 1, 30 * 86400, 12 * 3600),
  // The most topics one /metrics scrape reads.
  DQ_METRICS_MAX_TOPICS: whole("DQ_METRICS_MAX_TOPICS", 1, 100_000, DEFAULT_METRICS_MAX_TOPICS),
  // Each Redis call is short (a long-poll waits in delayq, between short calls), so one limit
  // fits all; without it a frozen Redis holds every request forever.
  DQ_REDIS_TIMEOUT_MS: whole("DQ_REDIS_TIMEOUT_MS", 100, 120_000, 5000),
  // Push topics (DESIGN §3). QStash settings are needed only by topics that push via QStash.
  DQ_PUBLIC_URL: optionalUrl(
    "DQ_PUBLIC_URL",
    "the service's own public URL, e.g. https://delayq.example.workers.dev (QStash calls it back)",
  ),
  QSTASH_URL: optionalUrl("QSTASH_URL", "QStash's URL, e.g. https://qstash.upstash.io"),
  QSTASH_TOKEN: z.string().min(1, "QSTASH_TOKEN is empty").optional(),
  QSTASH_CURRENT_SIGNING_KEY: z.string().min(1, "QSTASH_CURRENT_SIGNING_KEY is empty").optional(),
  QSTASH_NEXT_SIGNING_KEY: z.string().min(1, "QSTASH_NEXT_SIGNING_KEY is empty").optional(),
  // Each call to QStash (a batch publish, a cancel), its retry included: a delete answers only
  // after its cancel, so a QStash that hangs must not hold it (src/dispatch/qstash.ts).
  DQ_QSTASH_TIMEOUT_MS: whole("DQ_QSTASH_TIMEOUT_MS", 100, 120_000, 5000),
  // Payment accounts (DESIGN §4): JSON objects keyed by account name, parsed by
  // src/payments/accounts.ts (which names the variable and account in its errors).
  DQ_ALIPAY_ACCOUNTS: z.string().optional(),
  DQ_WECHATPAY_ACCOUNTS: z.string().optional(),
  DQ_SUBREQUESTS: whole("DQ_SUBREQUESTS", 10, 100_000, 1000),
  DQ_MIN_POLL_MS: whole("DQ_MIN_POLL_MS", 0, 3_600_000, 1000),
  // The most watches (payments and refunds) polling at once that one token's requests started
  // (0: tokens may start none).
  DQ_MAX_WATCHES_PER_TOKEN: whole(
    "DQ_MAX_WATCHES_PER_TOKEN",
    0,
    100_000_000,
    DEFAULT_MAX_WATCHES_PER_TOKEN,
  ),
  // Which push topics may deliver to private addresses (src/domain/destinations.ts).
  DQ_PRIVATE_PUSH: z.preprocess(
    (value) => (typeof value === "string" && value.trim() === "" ? undefined : value),
    z
      .enum(PRIVATE_PUSH_SETTINGS, {
        message:
          "DQ_PRIVATE_PUSH must be admin (only topics no topic-limited token reaches may push to " +
          "private addresses; the default), allow (every topic) or refuse (none)",
      })
      .default("admin"),
  ),
};

/** An optional http(s) URL setting; the message says what it is for. */
function optionalUrl(name: string, what: string) {
  return z
    .string()
    .regex(/^https?:\/\/[^\s/]+/, `${name} must be ${what}`)
    .optional();
}

/**
 * Every environment variable the Worker reads, with its default. Redis is Upstash over REST:
 * Workers cannot open a TCP connection to Redis, so REDIS_URL is a Node-only setting.
 */
export const EnvSchema = z.object({
  UPSTASH_REDIS_REST_URL: restUrl(false),
  UPSTASH_REDIS_REST_TOKEN: restToken,
  ...common,
});

export type Config = z.output<typeof EnvSchema>;

/** An empty value (`NAME=` in a compose file) means unset, as for a shell. */
const unsetWhenEmpty = (value: unknown) => (value === "" ? undefined : value);

/**
 * On Node (functions/node.ts): Redis is a Redis Cluster (REDIS_CLUSTER_NODES, REDIS_PASSWORD),
 * REDIS_URL (TCP: any Redis 7+ or Valkey, managed ones included) or Upstash over REST
 * (UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN, as on the Worker), the first one set in
 * that order. Also where to listen and how often to tick.
 */
export const NodeEnvSchema = z
  .object({
    // Seed nodes, parsed: [{host, port}, ...].
    REDIS_CLUSTER_NODES: z.preprocess(
      unsetWhenEmpty,
      z
        .string()
        .transform((value, ctx) => {
          const nodes = parseClusterNodes(value);
          if (typeof nodes !== "string") return nodes;
          ctx.addIssue({ code: "custom", message: nodes });
          return z.NEVER;
        })
        .optional(),
    ),
    REDIS_PASSWORD: z.preprocess(unsetWhenEmpty, z.string().optional()),
    REDIS_URL: z.preprocess(
      unsetWhenEmpty,
      z
        .string()
        .superRefine((value, ctx) => {
          const problem = redisUrlProblem(value);
          if (problem) ctx.addIssue({ code: "custom", message: problem });
        })
        .optional(),
    ),
    UPSTASH_REDIS_REST_URL: restUrl(true).optional(),
    UPSTASH_REDIS_REST_TOKEN: restToken.optional(),
    ...common,
    PORT: whole("PORT", 1, 65_535, 8787),
    HOST: z.string().min(1, "HOST is empty").default("127.0.0.1"),
    DQ_TICK_INTERVAL_MS: whole("DQ_TICK_INTERVAL_MS", 100, 3_600_000, 60_000),
    // How many keyspaces the topics are spread over (redis/partitions.ts); 0: 16 on a Redis
    // Cluster, else 1 (one keyspace, the layout of one Redis).
    DQ_CLUSTER_PARTITIONS: whole("DQ_CLUSTER_PARTITIONS", 0, MAX_PARTITIONS, 0),
    // Node has no subrequest limit: a tick is held only to this bound unless one is set.
    DQ_SUBREQUESTS: whole("DQ_SUBREQUESTS", 10, 100_000, 100_000),
  })
  // Checked even when other variables failed, so that one start names every problem.
  .refine(
    (env) =>
      env.REDIS_CLUSTER_NODES !== undefined ||
      env.REDIS_URL !== undefined ||
      env.UPSTASH_REDIS_REST_URL !== undefined,
    {
      message: `Redis is not configured: set REDIS_CLUSTER_NODES (host:port,host:port,...) for a Redis Cluster, REDIS_URL (redis://[user:password@]host:port[/db], or rediss:// for TLS) to use any Redis 7+ or Valkey over TCP, or UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN for Upstash over REST`,
      path: ["REDIS_URL"],
      when: () => true,
    },
  )
  .refine(
    (env) =>
      env.REDIS_CLUSTER_NODES !== undefined ||
      env.REDIS_URL !== undefined ||
      env.UPSTASH_REDIS_REST_URL === undefined ||
      env.UPSTASH_REDIS_REST_TOKEN !== undefined,
    {
      message: "UPSTASH_REDIS_REST_TOKEN is not set: give the database's REST token",
      path: ["UPSTASH_REDIS_REST_TOKEN"],
      when: () => true,
    },
  );

export type NodeConfig = z.output<typeof NodeEnvSchema>;

/** What buildService reads: the Worker's config, or Node's (REST or REDIS_URL). */
export type ServiceConfig = Config | NodeConfig;

/**
 * Parses the environment. A missing or invalid variable is an `internal_error` whose message
 * names it and says what to set; values (tokens) never appear in messages.
 */
export function parseConfig(env: Record<string, unknown>): Config;
export function parseConfig<S extends typeof EnvSchema | typeof NodeEnvSchema>(
  env: Record<string, unknown>,
  schema: S,
): z.output<S>;
export function parseConfig(
  env: Record<string, unknown>,
  schema: typeof EnvSchema | typeof NodeEnvSchema = EnvSchema,
): ServiceConfig {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => issue.message);
  return fail(`delayq is misconfigured: ${problems.join("; ")}`);
}

function fail(message: string): never {
  throw new DelayqError("internal_error", message);
}
