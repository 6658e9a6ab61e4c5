// The cluster driver: delayq's RedisClient over ioredis's Cluster, for a Redis Cluster (Valkey
// cluster, ElastiCache or MemoryDB in cluster mode, redis-server --cluster-enabled yes) named by
// REDIS_CLUSTER_NODES. Every key of a deployment shares one hash tag (keys.ts), so each script
// runs on the master of that slot; docs/cluster.md has the layout planned beyond it.
import { Cluster } from "ioredis";
import { DelayqError } from "../domain/errors";
import type { RedisClient } from "./runner";
import {
  type ConnectRedisOptions,
  driverOver,
  type IoredisLike,
  ownFunctions,
  tcpError,
} from "./tcp";
import { type ClusterNode, parseClusterNodes } from "./urls";

export type ConnectClusterOptions = ConnectRedisOptions & {
  /** The cluster's password (REDIS_PASSWORD), the same on every node. @default none */
  password?: string;
};

/** A connection made by {@link connectCluster}: the driver, plus its ioredis Cluster. */
export type ClusterRedis = RedisClient & {
  /** The ioredis Cluster, e.g. to reach its nodes. */
  readonly ioredis: Cluster;
  /**
   * Resolves once the cluster is reachable (its slots known); rejects with an `internal_error`
   * naming REDIS_CLUSTER_NODES, never the password, when no seed node answered within the
   * command time limit. The entry point awaits it before serving anything.
   */
  ready(): Promise<void>;
  /**
   * Closes every connection once the commands already sent have their replies, or after the
   * command time limit when nodes do not answer.
   */
  quit(): Promise<void>;
};

/**
 * Connects to a Redis Cluster through `nodes` (REDIS_CLUSTER_NODES's value, or nodes parsed).
 * Each operation is one FCALL routed by its key to the master of the slot; the function library
 * is loaded on every master when a call finds it missing, so a master added, restarted empty or
 * promoted later gets it at its first call. Commands never wait longer than `commandTimeoutMs`;
 * while the master of a slot is down its calls fail with `redis_unavailable`.
 *
 * @example
 * const redis = connectCluster("10.0.0.1:6379,10.0.0.2:6379", { password: process.env.REDIS_PASSWORD });
 * await redis.ready();
 * const queue = new DelayQueue({ redis, prefix: "dq" });
 */
export function connectCluster(
  nodes: string | readonly ClusterNode[],
  options: ConnectClusterOptions = {},
): ClusterRedis {
  const seeds = typeof nodes === "string" ? parseClusterNodes(nodes) : [...nodes];
  if (typeof seeds === "string") {
    throw new DelayqError("internal_error", `delayq is misconfigured: ${seeds}`);
  }
  const timeoutMs = options.commandTimeoutMs ?? 5000;
  const cluster = new Cluster(seeds, {
    redisOptions: {
      // The single-node driver's settings (tcp.ts: connectRedis), for each node's connection.
      protocol: 2,
      commandTimeout: timeoutMs,
      connectTimeout: timeoutMs,
      maxRetriesPerRequest: 1,
      autoResendUnfulfilledCommands: false,
      enableAutoPipelining: false,
      ...(options.password ? { password: options.password } : {}),
    },
    // Reconnect to the cluster up to 2 s apart, as connectRedis does to its server.
    clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    slotsRefreshTimeout: timeoutMs,
    scaleReads: "master",
  });
  let lastError: string | undefined;
  /** A node's own last error (refused, WRONGPASS): more telling than the cluster's summary. */
  let nodeError: string | undefined;
  const heard = (message: string) => {
    lastError = message;
    options.onError?.(message);
  };
  // Without listeners ioredis prints every node's connection error to the console.
  cluster.on("error", (error: Error) => heard(error.message));
  cluster.on("node error", (error: Error, address?: string) => {
    nodeError = address ? `${address}: ${error.message}` : error.message;
    heard(nodeError);
  });
  cluster.on("ready", () => {
    lastError = undefined;
    nodeError = undefined;
    // Once the cluster was reached, a command issued while it is being looked for again (every
    // master down) fails at once instead of waiting in the offline queue, where the nodes'
    // time limit does not reach it and whence it would be sent, late, when the cluster is back.
    cluster.options.enableOfflineQueue = false;
  });
  // Before that (a caller that did not wait for ready()), queued commands still end by the time
  // limit: what Cluster does not bound, `limited` does.
  const limited = <T>(command: Promise<T>): Promise<T> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("Command timed out")), timeoutMs);
    });
    return Promise.race([command, late]).finally(() => clearTimeout(timer));
  };
  const bounded: IoredisLike = {
    evalsha: ((...args: Parameters<Cluster["evalsha"]>) =>
      limited(cluster.evalsha(...args))) as Cluster["evalsha"],
    eval: ((...args: Parameters<Cluster["eval"]>) =>
      limited(cluster.eval(...args))) as Cluster["eval"],
    get: ((key: string) => limited(cluster.get(key))) as Cluster["get"],
  };
  const fail = (error: unknown) => tcpError(error, lastError, "REDIS_CLUSTER_NODES");
  const nodeList = seeds.map(({ host, port }) => `${host}:${port}`).join(", ");
  return {
    ...driverOver(bounded, fail, () => {}),
    delayqFunctions: ownFunctions(
      {
        // Every master: a key's slot may be on any of them, or move to another.
        async load(library) {
          const masters = cluster.nodes("master");
          if (masters.length === 0) throw new Error("Connection is closed.");
          const loads = await Promise.allSettled(
            masters.map((node) => limited(node.call("FUNCTION", "LOAD", "REPLACE", library))),
          );
          const loaded = loads.filter((load) => load.status === "fulfilled");
          // A master that is down gets the library at its first call after it is back.
          if (loaded.length === 0) throw (loads[0] as PromiseRejectedResult).reason;
          return loaded.length;
        },
        call: (name, keys, args) =>
          limited(cluster.call("FCALL", name, keys.length, ...keys, ...args)),
      },
      fail,
      () => {},
    ),
    ioredis: cluster,
    ready() {
      if (cluster.status === "ready") return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          cluster.off("ready", onReady);
          const why = nodeError ?? lastError;
          reject(
            new DelayqError(
              "internal_error",
              `delayq is misconfigured: ${unready(why, nodeList, timeoutMs)}`,
            ),
          );
        }, timeoutMs);
        const onReady = () => {
          clearTimeout(timer);
          resolve();
        };
        cluster.once("ready", onReady);
      });
    },
    async quit() {
      // ioredis's quit waits for every node's QUIT, for ever when nodes are down (and while it
      // is still looking for the cluster): at most the command time limit, then disconnect.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, cluster.status === "ready" ? timeoutMs : 0);
      });
      try {
        await Promise.race([cluster.quit(), late]);
      } catch {
        // Closed already, or a node refused: disconnect below either way.
      } finally {
        clearTimeout(timer);
        cluster.disconnect();
      }
    },
  };
}

/** Why a cluster was not reached at start: a password asked for or refused, or no node. */
function unready(why: string | undefined, nodeList: string, timeoutMs: number): string {
  if (why !== undefined && /\bNOAUTH\b/.test(why)) {
    return `the Redis Cluster of REDIS_CLUSTER_NODES asks for a password (${why}): set REDIS_PASSWORD`;
  }
  if (why !== undefined && /\bWRONGPASS\b|AUTH.*password/i.test(why)) {
    return `the Redis Cluster of REDIS_CLUSTER_NODES refused REDIS_PASSWORD (${why}): check it`;
  }
  return (
    `REDIS_CLUSTER_NODES names no reachable Redis Cluster node (tried ${nodeList} for ` +
    `${timeoutMs} ms${why ? `: ${why}` : ""}): check the seed nodes, that they run with ` +
    "cluster-enabled yes, and REDIS_PASSWORD"
  );
}
