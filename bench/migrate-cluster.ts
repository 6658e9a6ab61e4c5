// How long `npm run migrate-cluster` takes: JOBS jobs over TOPICS topics written with one keyspace
// on a redis-server of its own (half ready, a third due in a day: slot lists, the rest finished,
// kept with their expiry), then moved to 16 partitions on the same server, timed; the commands
// Redis ran for it (INFO commandstats) said per record.
// `npx tsx bench/migrate-cluster.ts [jobs] [topics]`
import { startRedisServer } from "../dev/redis-server";
import { DelayQueue } from "../src/queue";
import { migrateCluster } from "../src/redis/migrate-cluster";
import { connectRedis } from "../src/redis/tcp";

const JOBS = Number(process.argv[2] ?? 100_000);
const TOPICS = Number(process.argv[3] ?? 20);
const server = await startRedisServer();
const redis = connectRedis(`redis://127.0.0.1:${server.port}`);
const commands = async () => {
  const text = String(await redis.ioredis.info("commandstats"));
  return [...text.matchAll(/calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
};
try {
  const queue = new DelayQueue({ redis, prefix: "mig" });
  const perTopic = Math.floor(JOBS / TOPICS);
  for (let t = 0; t < TOPICS; t++) {
    const topic = `topic-${t}`;
    for (let i = 0; i < perTopic; i += 100) {
      const n = Math.min(100, perTopic - i);
      await queue.addBatch(
        Array.from({ length: n }, (_, j) => {
          const k = i + j;
          const delay = k % 6 < 3 ? 0 : k % 6 < 5 ? 86_400 : 0;
          return { topic, id: `${topic}.${k}`, delay, body: { order: k, note: "x".repeat(40) } };
        }),
      );
    }
    // A sixth finished: popped and finished (kept for the retention, in no index).
    for (let left = Math.floor(perTopic / 6); left > 0; ) {
      const popped = await queue.pop(topic, { count: Math.min(100, left) });
      await queue.finishMany(popped);
      left -= popped.length;
    }
  }
  const keys = Number(await redis.ioredis.dbsize());
  const before = await commands();
  const started = performance.now();
  const summary = await migrateCluster({ redis: redis.ioredis, prefix: "mig", partitions: 16 });
  const ms = performance.now() - started;
  const spent = (await commands()) - before;
  console.log(
    JSON.stringify({
      jobs: JOBS,
      topicsWritten: TOPICS,
      keysBefore: keys,
      ...summary,
      ms: Math.round(ms),
      recordsPerSecond: Math.round((summary.records / ms) * 1000),
      commandsPerRecord: Number((spent / Math.max(1, summary.records)).toFixed(2)),
    }),
  );
} finally {
  await redis.quit();
  await server.stop();
}
