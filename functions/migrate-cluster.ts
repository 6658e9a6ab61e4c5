// npm run migrate-cluster: moves a deployment's keys from one keyspace (DQ_CLUSTER_PARTITIONS=1)
// to DQ_CLUSTER_PARTITIONS partitions (src/redis/migrate-cluster.ts), with the service stopped.
// Reads REDIS_CLUSTER_NODES (+ REDIS_PASSWORD) or REDIS_URL, DQ_PREFIX, DQ_CLUSTER_PARTITIONS.
// Exits 0 when the keys are in N partitions (moved now, or before), 1 when it cannot go on.
import { DelayqError } from "../src/domain/errors";
import { jsonLogger, messageOf } from "../src/log";
import { type ClusterRedis, connectCluster } from "../src/redis/cluster";
import { keyBase } from "../src/redis/keys";
import { MigrateRefused, migrateCluster } from "../src/redis/migrate-cluster";
import { MAX_PARTITIONS } from "../src/redis/partitions";
import { connectRedis, type TcpRedis } from "../src/redis/tcp";

/** DQ_CLUSTER_PARTITIONS's default on a Redis Cluster, as the service has it. */
const CLUSTER_DEFAULT = 16;

function fail(message: string): never {
  jsonLogger({ level: "error", event: "migrate_failed", message });
  process.exit(1);
}

const env = process.env;
const nodes = env.REDIS_CLUSTER_NODES?.trim() || undefined;
const url = env.REDIS_URL?.trim() || undefined;
if (!nodes && !url) {
  fail(
    "Set REDIS_CLUSTER_NODES (host:port,host:port,...; REDIS_PASSWORD if the cluster asks for one) or REDIS_URL (redis://[user:password@]host:port[/db]) to the Redis holding the deployment: the move needs Redis over TCP (Upstash's REST API is not enough)",
  );
}
const prefix = env.DQ_PREFIX?.trim() || "dq";
try {
  keyBase(prefix);
} catch (error) {
  fail(`DQ_PREFIX: ${messageOf(error)}`);
}
const given = env.DQ_CLUSTER_PARTITIONS?.trim();
const count = given ? Number(given) : nodes ? CLUSTER_DEFAULT : Number.NaN;
if (!Number.isInteger(count) || count < 2 || count > MAX_PARTITIONS) {
  fail(
    given
      ? `DQ_CLUSTER_PARTITIONS must be a whole number from 2 to ${MAX_PARTITIONS} to move to (it is "${given}")`
      : "Set DQ_CLUSTER_PARTITIONS to the partitions to move to (2 to 256), the value the service will start with; it defaults to 16 only with REDIS_CLUSTER_NODES",
  );
}

let connection: TcpRedis | ClusterRedis;
try {
  if (nodes) {
    const cluster = connectCluster(nodes, { password: env.REDIS_PASSWORD || undefined });
    connection = cluster;
    await cluster.ready();
  } else {
    connection = connectRedis(url as string);
  }
} catch (error) {
  fail(error instanceof DelayqError ? error.message : messageOf(error));
}

let code = 0;
try {
  await migrateCluster({
    redis: connection.ioredis,
    prefix,
    partitions: count,
    log: jsonLogger,
  });
} catch (error) {
  code = 1;
  const message =
    error instanceof MigrateRefused
      ? error.message
      : `${messageOf(error)}; nothing is lost: run npm run migrate-cluster again to finish the move`;
  jsonLogger({ level: "error", event: "migrate_failed", message });
} finally {
  await connection.quit();
}
process.exit(code);
