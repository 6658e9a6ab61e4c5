// Runs the Lua scripts through @upstash/redis (EVALSHA, EVAL on NOSCRIPT) with the common args, or
// as Redis Functions (FCALL) with a client that has them.
import { DelayqError } from "../domain/errors";
import { type Keys, keys } from "./keys";
import type { Script } from "./lua/script";
import { SCRIPTS, type ScriptName, scriptText, TIMED } from "./lua/scripts";
import { type FunctionLibrary, functionLibrary } from "./lua/scripts/functions";
import { type Partitions, partitions } from "./partitions";
import { router } from "./routing";

/**
 * The narrow part of a Redis client delayq needs: scripts (`exec`: EVALSHA, EVAL on NOSCRIPT) and
 * GET. Any `@upstash/redis` `Redis` has it; so does `tcpRedis` (src/redis/tcp.ts) over ioredis.
 * Replies as RESP2 gives them: bulk strings as strings, integers as numbers, arrays, null.
 */
export type RedisClient = {
  createScript(script: string): { exec(keys: string[], args: string[]): Promise<unknown> };
  /** A string: a job's record, a topic's change counter (a long-polling pop watches it). */
  get(key: string): Promise<unknown>;
  /**
   * Redis Functions, for a client that can use them (the TCP driver on one server): the scripts
   * then run as one function library, whose helpers Redis defines once instead of on every call.
   * `call` rejects with {@link MissingFunction} when Redis does not have the function (the runner
   * loads the library, then calls again), and with {@link FunctionsRefused} when Redis will not
   * load or run functions (the runner goes back to scripts for good).
   */
  delayqFunctions?: {
    load(library: string): Promise<unknown>;
    call(name: string, keys: string[], args: string[]): Promise<unknown>;
  };
};

/** Redis has no such function (never loaded, flushed, or another version's). */
export class MissingFunction extends Error {
  override name = "MissingFunction";
}

/** Redis will not load or run functions here (too old, or the user may not). */
export class FunctionsRefused extends Error {
  override name = "FunctionsRefused";
}

/**
 * Options for `new Redis(...)` that delayq's entry points use. delayq reads every reply itself;
 * it also works with a client that deserializes (records are never valid JSON as a whole).
 */
export const REDIS_CLIENT_OPTIONS = {
  automaticDeserialization: false,
  enableTelemetry: false,
} as const;

/** What the script `N` answers, parsed (its file documents it). */
export type ReplyOf<N extends ScriptName> = (typeof SCRIPTS)[N] extends Script<infer R> ? R : never;

/**
 * The one way delayq runs its scripts: the queue, the dispatcher and payment watches share one
 * runner per service, and name the script they run, so that nothing outside src/redis reaches
 * into the Lua.
 */
export type ScriptRunner = {
  /**
   * Runs script `name` (EVALSHA, EVAL on NOSCRIPT; or FCALL) and parses its reply. `now`: the
   * time the script compares and writes, unix ms; undefined for Redis's own clock (TIME), the
   * one clock of every caller (a clock of their own is for tests).
   */
  run<N extends ScriptName>(
    name: N,
    now: number | undefined,
    args: readonly (string | number)[],
  ): Promise<ReplyOf<N>>;
  /**
   * `run`, answering also the time the script ran at: `now` when given, else Redis's clock as
   * the script read it (Date.now() for a script that reads no clock). For callers that date what
   * they answer (a job's state) by the clock its change was made at.
   */
  runTimed<N extends ScriptName>(
    name: N,
    now: number | undefined,
    args: readonly (string | number)[],
  ): Promise<{ reply: ReplyOf<N>; now: number }>;
  /** The keys of a topic's keyspace (its partition's): a long-polling pop watches its counter. */
  topicKeys(topic: string): Keys;
};

/**
 * Runs one script in one partition (partition 0 on a deployment of one keyspace): what the
 * router (routing.ts) composes the calls of a partitioned deployment from.
 */
export type PartitionCall = <N extends ScriptName>(
  partition: number,
  name: N,
  now: number | undefined,
  args: readonly (string | number)[],
) => Promise<{ reply: ReplyOf<N>; now: number }>;

/**
 * The runner of a deployment. `partitionCount` (DQ_CLUSTER_PARTITIONS, redis/partitions.ts): 1
 * for one keyspace, the layout of one Redis; more spreads the topics over that many keyspaces,
 * and every call is routed to its partitions (routing.ts).
 */
export function createScriptRunner(
  redis: RedisClient,
  prefix: string,
  retentionMs: number,
  partitionCount = 1,
): ScriptRunner & { layout: Partitions } {
  const layout = partitions(prefix, partitionCount);
  const spaces = layout.prefixes.map((each, k) => ({
    keys: keys(each),
    retention: layout.count === 1 ? String(retentionMs) : `${retentionMs} ${k} ${layout.count}`,
  }));
  const loaded = Object.fromEntries(
    Object.entries(SCRIPTS).map(([name, script]) => [name, redis.createScript(scriptText(script))]),
  ) as Record<ScriptName, ReturnType<RedisClient["createScript"]>>;
  // Named for delayq: @upstash/redis's Redis has a `functions` of its own, another API.
  let functions = redis.delayqFunctions;
  const library = functions && functionLibrary();
  /** The library's load in flight: calls that find no function wait for the same one. */
  let loading: Promise<unknown> | undefined;
  const viaFunction = async (
    fns: NonNullable<RedisClient["delayqFunctions"]>,
    lib: FunctionLibrary,
    name: ScriptName,
    route: string,
    argv: string[],
  ): Promise<unknown> => {
    const fn = lib.functionName(name);
    try {
      return await fns.call(fn, [route], argv);
    } catch (error) {
      if (!(error instanceof MissingFunction)) throw error;
    }
    // Nothing ran: load the library (REPLACE, so a load that raced another is harmless), again.
    loading ??= fns.load(lib.text).finally(() => {
      loading = undefined;
    });
    await loading;
    return fns.call(fn, [route], argv);
  };
  const call = async (name: ScriptName, route: string, argv: string[]): Promise<unknown> => {
    let reply: unknown;
    let ran = false;
    try {
      if (functions && library) {
        try {
          reply = await viaFunction(functions, library, name, route, argv);
          ran = true;
        } catch (error) {
          if (!(error instanceof FunctionsRefused)) throw error;
          // Refused before anything ran: scripts from now on.
          functions = undefined;
        }
      }
      if (!ran) reply = await (loaded[name] as (typeof loaded)[ScriptName]).exec([route], argv);
    } catch (error) {
      throw redisError(error);
    }
    return reply;
  };
  const callIn: PartitionCall = async (partition, name, now, args) => {
    const space = spaces[partition];
    if (!space) throw new Error(`No partition ${partition} of ${layout.count}`);
    const argv = [space.keys.base, now === undefined ? "" : String(now), space.retention];
    for (const arg of args) argv.push(String(arg));
    let reply = await call(name, space.keys.schedule, argv);
    let at = now ?? Date.now();
    if (now === undefined && TIMED.has(name)) {
      // On Redis's clock a timed script answers {NOW, reply} (lua/scripts/index.ts: timed).
      const [serverNow, inner] = Array.isArray(reply) ? reply : [];
      at = Number(serverNow);
      reply = inner;
    }
    return { reply: SCRIPTS[name].parse(reply) as ReplyOf<typeof name>, now: at };
  };
  const runTimed: ScriptRunner["runTimed"] =
    layout.count === 1 ? (name, now, args) => callIn(0, name, now, args) : router(layout, callIn);
  return {
    layout,
    runTimed,
    async run(name, now, args) {
      return (await runTimed(name, now, args)).reply;
    },
    topicKeys: (topic) => (spaces[layout.ofTopic(topic)] ?? (spaces[0] as (typeof spaces)[0])).keys,
  };
}

/**
 * Redis's own error codes that mean "not now" (a replica after failover, a restart loading its
 * data, a slow script, memory full, a cluster resharding): 503, worth a retry.
 */
const UNAVAILABLE =
  /^(READONLY|LOADING|BUSY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|OOM|MISCONF|NOREPLICAS|MOVED|ASK)\b/;

/**
 * Classifies a failure of a Redis call. A Lua error is a bug of ours (internal_error); anything
 * else (Redis's "not now" replies, network, HTTP 5xx, quota, credentials) means Redis cannot
 * serve us now (redis_unavailable).
 * Messages are cut before the client's "command was: ...", which would quote job bodies. What
 * Redis or the network said (which may name its host, port or URL) is the error's `detail`, for
 * the log: the caller is told that Redis is unavailable, and Redis's reply code when it has one.
 */
export function redisError(error: unknown): DelayqError {
  if (error instanceof DelayqError) return error;
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
    return new DelayqError(
      "redis_unavailable",
      "Redis did not answer within DQ_REDIS_TIMEOUT_MS. A write may still have been applied: " +
        "retry it with the same job id, which makes the retry safe",
      { cause: error, detail: error.message },
    );
  }
  const raw = error instanceof Error ? error.message : String(error);
  const message = raw.split(", command was:")[0] ?? raw;
  // Redis's "not now" replies (@upstash/redis puts "Command failed: " before them); raised inside
  // a script they end in "script: <sha>", and BUSY speaks of a script too: not a bug of ours.
  const reply = message.replace(/^Command failed: /, "").split(" script: ")[0] ?? message;
  const word = UNAVAILABLE.exec(reply)?.[1];
  if (word) {
    // MOVED and ASK name another server's address: the code word alone is told.
    return unavailable(`Redis is unavailable (${word})`, reply, error);
  }
  if (/script/i.test(message)) {
    return new DelayqError("internal_error", "A delayq script failed in Redis", {
      cause: error,
      detail: message,
    });
  }
  if (/unauthorized|WRONGPASS|NOAUTH/i.test(message)) {
    return unavailable(
      "Redis refused delayq's credentials",
      `check UPSTASH_REDIS_REST_TOKEN: ${message}`,
      error,
    );
  }
  return unavailable("Redis is unavailable", withCauses(message, error), error);
}

/** `message` and the messages of its error's causes ("fetch failed (connect ECONNREFUSED …)"). */
function withCauses(message: string, error: unknown): string {
  const causes: string[] = [];
  let cause = error instanceof Error ? error.cause : undefined;
  while (cause instanceof Error && causes.length < 3) {
    causes.push(cause.message);
    cause = cause.cause;
  }
  return causes.length > 0 ? `${message} (${causes.join(": ")})` : message;
}

/** A redis_unavailable telling the caller `message`, and the log `detail` (addresses and all). */
export function unavailable(message: string, detail: string, cause: unknown): DelayqError {
  return new DelayqError("redis_unavailable", message, { cause, detail });
}
