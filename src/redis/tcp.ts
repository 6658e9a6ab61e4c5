// The TCP driver: delayq's RedisClient over ioredis (RESP), for any Redis 7+ or Valkey (REDIS_URL).
import { createHash } from "node:crypto";
import type { Socket } from "node:net";
import { Redis } from "ioredis";
import { DelayqError } from "../domain/errors";
import {
  FunctionsRefused,
  MissingFunction,
  type RedisClient,
  redisError,
  unavailable,
} from "./runner";
import { redisUrlProblem } from "./urls";

/** The ioredis calls the driver makes; a `Redis` and a `Cluster` of ioredis both have them. */
export type IoredisLike = Pick<Redis, "evalsha" | "eval" | "get">;

export type ConnectRedisOptions = {
  /**
   * How long one command may take, ms (DQ_REDIS_TIMEOUT_MS), counted from when it is issued,
   * so also while the connection is down. Every delayq command is short: a long-poll waits in
   * delayq, between short commands.
   * @default 5000
   */
  commandTimeoutMs?: number;
  /**
   * Hears the connection's errors (refused, reset, TLS, credentials) as they happen; commands
   * fail on their own with `redis_unavailable`. Messages never carry the URL or its password.
   * @default errors are dropped (ioredis would print each one to the console)
   */
  onError?: (message: string) => void;
};

/** A connection made by {@link connectRedis}: the driver, plus its ioredis client to close. */
export type TcpRedis = RedisClient & {
  /** The ioredis client, e.g. to inspect keys or to wait for `ready`. */
  readonly ioredis: Redis;
  /** Closes the connection once the commands already sent have their replies. */
  quit(): Promise<void>;
};

/**
 * Opens a connection to `url` (`redis://[[user]:password@]host[:port][/db]`, or `rediss://` for
 * TLS) for a `DelayQueue`. Commands never wait longer than `commandTimeoutMs`; while Redis is
 * down each one fails with `redis_unavailable` (after one reconnection attempt, or at the time
 * limit), never queued for ever. Throws `internal_error` for a URL of the wrong shape.
 *
 * @example
 * const redis = connectRedis(process.env.REDIS_URL);
 * const queue = new DelayQueue({ redis, prefix: "dq" });
 */
export function connectRedis(url: string, options: ConnectRedisOptions = {}): TcpRedis {
  const problem = redisUrlProblem(url);
  if (problem) throw new DelayqError("internal_error", `delayq is misconfigured: ${problem}`);
  const timeoutMs = options.commandTimeoutMs ?? 5000;
  // ioredis turns TLS on only for a lower-case "rediss://"; its URL parser takes any case.
  const scheme = url.slice(0, url.indexOf(":")).toLowerCase();
  const client = new Redis(`${scheme}${url.slice(scheme.length)}`, {
    // RESP2, what Upstash's REST API speaks to Redis: replies match the REST driver's exactly.
    protocol: 2,
    commandTimeout: timeoutMs,
    connectTimeout: timeoutMs,
    // Commands issued while (re)connecting wait in the offline queue, bounded by the time limit;
    // each failed reconnection attempt beyond the first fails them with redis_unavailable.
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    // A command in flight when the connection dropped may have run: fail it (the error says a
    // write may have been applied) rather than run it a second time on the new connection.
    autoResendUnfulfilledCommands: false,
    // No auto-pipelining: it builds a Pipeline for every command it holds, which cost ~13 % of
    // the service's CPU per request at 8 consumers (bench/cpu.ts, 4 runs each way) and a third
    // of the library's jobs per second (bench single: 1,745 -> 2,627). The commands of one turn
    // of the loop still leave together: writeTogether corks the socket instead.
    enableAutoPipelining: false,
  });
  // The last connection error, to say why a command found no connection.
  let lastError: string | undefined;
  const db = databaseOf(url);
  client.on("error", (error: Error) => {
    lastError = error.message;
    // ioredis reports a refused SELECT (a database the server lacks, a user without +select)
    // and carries on in database 0, where delayq would write another deployment's keys. While
    // it still sets the connection up, drop it instead: commands fail with redis_unavailable
    // until the server accepts the database.
    if (db !== 0 && client.status === "connect" && /\bselect\b|DB index/i.test(error.message)) {
      lastError = `Redis refused to select database ${db} of REDIS_URL (${error.message}): check the /db in REDIS_URL, and that the user may run SELECT (+select)`;
      client.disconnect(true);
    }
    options.onError?.(lastError);
  });
  client.on("ready", () => {
    lastError = undefined;
  });
  const together = writeTogether(client);
  return {
    ...driverOver(client, (error) => tcpError(error, lastError), together),
    // One server, ours: its scripts run as a function library (Redis 7+, Valkey).
    delayqFunctions: ownFunctions(
      {
        load: (library) => client.call("FUNCTION", "LOAD", "REPLACE", library),
        call: (name, keys, args) => client.call("FCALL", name, keys.length, ...keys, ...args),
      },
      (error) => tcpError(error, lastError),
      together,
    ),
    ioredis: client,
    async quit() {
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}

/**
 * delayq's RedisClient over an ioredis client you made and own (a `Cluster`, Sentinel, custom TLS
 * options). Give it `protocol: 2` and a `commandTimeout` as {@link connectRedis} does; delayq's keys
 * share one hash tag, so a Cluster runs each script on one node.
 */
export function tcpRedis(
  client: IoredisLike,
  connectionError: () => string | undefined = () => undefined,
): RedisClient {
  // A client you made is left as you set it up: its commands are written as ioredis writes them.
  return driverOver(
    client,
    (error) => tcpError(error, connectionError()),
    () => {},
  );
}

/**
 * Holds the socket's writes of a connection of our own until the event loop's check phase, so
 * the commands issued in one turn of the loop (the HTTP requests that arrived together, each one
 * script call) leave in one write, and Redis reads and answers them in one go. Each command
 * written alone cost a system call on both sides: at 8 consumers over HTTP (bench/cpu.ts, four
 * alternating pairs) 1.7 commands went out a write, and the service spent 0.30 ms of CPU a request
 * against 0.33 (system time 0.07 against 0.09), at 6 % more jobs a second. A command waits at
 * most until the loop's current turn ends; one issued while the connection is down waits in
 * ioredis's offline queue as before. Unlike ioredis's auto-pipelining, nothing is built per
 * command: the socket's own cork, once a turn.
 */
function writeTogether(client: Redis): () => void {
  let corked: Socket | undefined;
  return () => {
    if (corked) return;
    const socket = client.stream as Socket | undefined;
    if (client.status !== "ready" || !socket || socket.destroyed) return;
    corked = socket;
    socket.cork();
    setImmediate(() => {
      corked = undefined;
      socket.uncork();
    });
  };
}

/**
 * The driver over `client`; `fail` classifies its failures (tcpError), `beforeCommand` runs as each
 * command is issued.
 */
export function driverOver(
  client: IoredisLike,
  fail: (error: unknown) => DelayqError,
  beforeCommand: () => void,
): RedisClient {
  return {
    createScript(script) {
      const sha = createHash("sha1").update(script).digest("hex");
      return {
        // EVALSHA; EVAL (which also caches the script) only when Redis does not know it, as the
        // REST driver does, so both drivers spend the same commands.
        async exec(keys, args) {
          beforeCommand();
          try {
            return await client.evalsha(sha, keys.length, ...keys, ...args);
          } catch (error) {
            if (!isNoScript(error)) throw fail(error);
          }
          beforeCommand();
          try {
            return await client.eval(script, keys.length, ...keys, ...args);
          } catch (error) {
            throw fail(error);
          }
        },
      };
    },
    async get(key) {
      beforeCommand();
      try {
        return await client.get(key);
      } catch (error) {
        throw fail(error);
      }
    },
  };
}

/**
 * FUNCTION LOAD and FCALL over `client`'s two commands: `load` on one server, or on every master
 * of a cluster (src/redis/cluster.ts); `call` on the server of its keys. A missing function and a
 * server that will not run functions (too old, an ACL without them) are told apart from other
 * failures, so the runner can load the library or go back to scripts; a failure inside a function
 * fails as a script's does.
 */
export function ownFunctions(
  client: {
    load(library: string): Promise<unknown>;
    call(name: string, keys: string[], args: string[]): Promise<unknown>;
  },
  fail: (error: unknown) => DelayqError,
  beforeCommand: () => void,
): NonNullable<RedisClient["delayqFunctions"]> {
  const refused = (error: unknown) =>
    error instanceof Error &&
    /^(ERR unknown command|NOPERM)\b/.test(error.message) &&
    /function|fcall/i.test(error.message);
  return {
    async load(library) {
      beforeCommand();
      try {
        return await client.load(library);
      } catch (error) {
        if (refused(error)) throw new FunctionsRefused((error as Error).message);
        throw fail(error);
      }
    },
    async call(name, keys, args) {
      beforeCommand();
      try {
        return await client.call(name, keys, args);
      } catch (error) {
        if (error instanceof Error && error.message.startsWith("ERR Function not found")) {
          throw new MissingFunction(error.message);
        }
        if (refused(error)) throw new FunctionsRefused((error as Error).message);
        throw fail(error);
      }
    },
  };
}

/** The database number in a redis:// URL's path (`/3`), 0 when there is none. */
function databaseOf(url: string): number {
  const path = new URL(url).pathname.replace(/^\//, "");
  return path === "" ? 0 : Number(path);
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/**
 * Classifies an ioredis failure as `redisError` does a REST one, with TCP's causes added.
 * `connectionError` is the connection's last error, if it is down; `setting` names the variable
 * that says where Redis is (and, for a cluster, REDIS_PASSWORD its password).
 */
export function tcpError(
  error: unknown,
  connectionError?: string,
  setting: "REDIS_URL" | "REDIS_CLUSTER_NODES" = "REDIS_URL",
): DelayqError {
  if (!(error instanceof Error)) return redisError(error);
  const message = error.message.split(" script: ")[0] ?? error.message;
  const what =
    setting === "REDIS_URL" ? "the server of REDIS_URL" : "a node of REDIS_CLUSTER_NODES";
  if (
    error.name === "MaxRetriesPerRequestError" ||
    message === "Connection is closed." ||
    // A Cluster's: the node of the key's slot is down, or no node is reachable yet.
    /^(Too many Cluster redirections|None of startup nodes is available|Cluster isn't ready)/.test(
      message,
    )
  ) {
    // Why the connection is down names the server's address: the log has it, the caller not.
    return unavailable(
      "Redis is unavailable",
      `no connection to ${what} (${connectionError ?? message})`,
      error,
    );
  }
  if (message === "Command timed out") {
    // The REST driver's time limit is an AbortSignal's TimeoutError: the same message follows.
    const timeout = new Error(message, { cause: error });
    timeout.name = "TimeoutError";
    return redisError(timeout);
  }
  if (/^(WRONGPASS|NOAUTH)\b/.test(message)) {
    return unavailable(
      "Redis refused delayq's credentials",
      setting === "REDIS_URL"
        ? `check the user name and password in REDIS_URL: ${message}`
        : `check REDIS_PASSWORD: ${message}`,
      error,
    );
  }
  // A command refused inside a script (TIME for a user without +time) reads "ERR The user
  // executing the script can't run this command".
  if (/^NOPERM\b|The user executing the script can't run/.test(message)) {
    return unavailable(
      "Redis refused a command delayq needs",
      `The Redis user of ${setting === "REDIS_URL" ? "REDIS_URL" : "REDIS_PASSWORD"} may not do what delayq needs (EVALSHA, EVAL and GET on its keys, TIME, and FCALL and FUNCTION LOAD to run its scripts as functions): ${message}`,
      error,
    );
  }
  // Redis's "not now" replies, and the rest, as over REST.
  return redisError(error);
}
