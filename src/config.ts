// The service's configuration, read once from the environment (Worker bindings or process.env).
import { z } from "zod";
import { DelayqError } from "./domain/errors";

const whole = (name: string, min: number, max: number, fallback: number) =>
  z.coerce
    .number({ message: `${name} must be a number` })
    .int(`${name} must be a whole number`)
    .min(min, `${name} must be at least ${min}`)
    .max(max, `${name} must be at most ${max}`)
    .default(fallback);

/** Every environment variable delayq reads, with its default. */
export const EnvSchema = z.object({
  UPSTASH_REDIS_REST_URL: z
    .string({
      message: "UPSTASH_REDIS_REST_URL is not set: give the REST URL of the Upstash database",
    })
    .superRefine((value, ctx) => {
      const problem = restUrlProblem(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    }),
  UPSTASH_REDIS_REST_TOKEN: z
    .string({ message: "UPSTASH_REDIS_REST_TOKEN is not set: give the database's REST token" })
    .min(1, "UPSTASH_REDIS_REST_TOKEN is empty"),
  DQ_TOKENS: z
    .string({
      message: "DQ_TOKENS is not set: give the API's bearer tokens, e.g. DQ_TOKENS=s3cret",
    })
    .min(1, "DQ_TOKENS is empty"),
  DQ_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, "DQ_PREFIX must be 1-64 characters of A-Z a-z 0-9 _ . : -")
    .default("dq"),
  DQ_RETENTION_SECONDS: whole("DQ_RETENTION_SECONDS", 1, 30 * 86400, 3600),
  DQ_DEFAULT_TTR: whole("DQ_DEFAULT_TTR", 1, 86400, 60),
  DQ_DEFAULT_MAX_ATTEMPTS: whole("DQ_DEFAULT_MAX_ATTEMPTS", 1, 1000, 10),
  DQ_MAX_BODY_BYTES: whole("DQ_MAX_BODY_BYTES", 1, 8 * 1024 * 1024, 256 * 1024),
  DQ_MAX_REQUEST_BYTES: whole("DQ_MAX_REQUEST_BYTES", 1024, 100 * 1024 * 1024, 10 * 1024 * 1024),
  DQ_POLL_INTERVAL_MS: whole("DQ_POLL_INTERVAL_MS", 50, 20_000, 1000),
  DQ_TICK_BUDGET_MS: whole("DQ_TICK_BUDGET_MS", 100, 14 * 60_000, 20_000),
  // Each Redis call is short (a long-poll waits in delayq, between short calls), so one limit
  // fits all; without it a frozen Redis holds every request forever.
  DQ_REDIS_TIMEOUT_MS: whole("DQ_REDIS_TIMEOUT_MS", 100, 120_000, 5000),
});

export type Config = z.output<typeof EnvSchema>;

/** On Node (functions/node.ts) also where to listen and how often to tick. */
export const NodeEnvSchema = EnvSchema.extend({
  PORT: whole("PORT", 1, 65_535, 8787),
  HOST: z.string().min(1, "HOST is empty").default("127.0.0.1"),
  DQ_TICK_INTERVAL_MS: whole("DQ_TICK_INTERVAL_MS", 100, 3_600_000, 60_000),
});

export type NodeConfig = z.output<typeof NodeEnvSchema>;

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
): Config {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => issue.message);
  return fail(`delayq is misconfigured: ${problems.join("; ")}`);
}

/**
 * Why a value is not an Upstash REST URL, or undefined when it is one. Upstash's console shows
 * the database's TCP URL (rediss://) next to the REST URL, and the first is easy to paste here.
 * The value itself is never quoted: a TCP URL carries the password.
 */
export function restUrlProblem(value: string): string | undefined {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value.trim())?.[1]?.toLowerCase();
  if (scheme === "redis" || scheme === "rediss") {
    return (
      `UPSTASH_REDIS_REST_URL is a Redis TCP URL (${scheme}://...), but delayq talks to Upstash ` +
      "over REST: give the database's REST URL, https://<name>.upstash.io (the console's REST " +
      "API section, next to UPSTASH_REDIS_REST_TOKEN)"
    );
  }
  if (value !== value.trim()) {
    return "UPSTASH_REDIS_REST_URL has spaces or a line break around it: remove them";
  }
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  // The same shape @upstash/redis insists on, so that its constructor never throws at start.
  if (!url || !/^https?:$/.test(url.protocol) || !/^https?:\/\/[^\s#$./?].\S*$/.test(value)) {
    return "UPSTASH_REDIS_REST_URL must be a URL such as https://<name>.upstash.io (the database's REST URL)";
  }
  return undefined;
}

function fail(message: string): never {
  throw new DelayqError("internal_error", message);
}
