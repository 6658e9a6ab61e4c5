// Runs the Lua scripts through @upstash/redis (EVALSHA, EVAL on NOSCRIPT) with the common args.
import type { Redis } from "@upstash/redis";
import { DelayqError } from "../domain/errors";
import { keys } from "./keys";
import { LUA_LIB } from "./lua/lib";
import * as lua from "./lua/scripts";

const SOURCES = {
  add: lua.ADD,
  pop: lua.POP,
  finish: lua.FINISH,
  touch: lua.TOUCH,
  release: lua.RELEASE,
  bury: lua.BURY,
  delete: lua.DELETE,
  kick: lua.KICK,
  deleteDead: lua.DELETE_DEAD,
  list: lua.LIST,
  topicStats: lua.TOPIC_STATS,
  listTopics: lua.LIST_TOPICS,
  configure: lua.CONFIGURE,
  tick: lua.TICK,
} as const;

export type ScriptName = keyof typeof SOURCES;

/** The full text of each script, as sent to Redis: the shared library, then the script. */
export const SCRIPTS: Record<ScriptName, string> = Object.fromEntries(
  Object.entries(SOURCES).map(([name, body]) => [name, `${LUA_LIB}\n${body}`]),
) as Record<ScriptName, string>;

/** The narrow part of the client delayq needs; any `@upstash/redis` `Redis` has it. */
export type RedisClient = Pick<Redis, "createScript" | "get">;

/**
 * Options for `new Redis(...)` that delayq's entry points use. delayq reads every reply itself;
 * it also works with a client that deserializes (records are never valid JSON as a whole).
 */
export const REDIS_CLIENT_OPTIONS = {
  automaticDeserialization: false,
  enableTelemetry: false,
} as const;

export type ScriptRunner = {
  run(name: ScriptName, now: number, args: readonly (string | number)[]): Promise<unknown>;
};

export function createScriptRunner(
  redis: RedisClient,
  prefix: string,
  retentionMs: number,
): ScriptRunner {
  const k = keys(prefix);
  const scripts = Object.fromEntries(
    Object.entries(SCRIPTS).map(([name, text]) => [name, redis.createScript<unknown>(text)]),
  ) as Record<ScriptName, ReturnType<RedisClient["createScript"]>>;
  return {
    async run(name, now, args) {
      const argv = [k.base, String(now), String(retentionMs), ...args.map(String)];
      try {
        return await scripts[name].exec([k.schedule], argv);
      } catch (error) {
        throw redisError(error);
      }
    },
  };
}

/**
 * Classifies a failure of a Redis call. A Lua error is a bug of ours (internal_error); anything
 * else (network, HTTP 5xx, quota, credentials) means Redis cannot serve us now (redis_unavailable).
 * Messages are cut before the client's "command was: ...", which would quote job bodies.
 */
export function redisError(error: unknown): DelayqError {
  if (error instanceof DelayqError) return error;
  const raw = error instanceof Error ? error.message : String(error);
  const message = raw.split(", command was:")[0] ?? raw;
  if (/script|user_script/i.test(message)) {
    return new DelayqError("internal_error", `A delayq script failed in Redis: ${message}`, {
      cause: error,
    });
  }
  if (/unauthorized|WRONGPASS|NOAUTH/i.test(message)) {
    return new DelayqError(
      "redis_unavailable",
      "Redis refused delayq's credentials: check UPSTASH_REDIS_REST_TOKEN",
      { cause: error },
    );
  }
  return new DelayqError("redis_unavailable", `Redis is unavailable: ${message}`, {
    cause: error,
  });
}
