// Four projects: the Node suites, the engine suites over the TCP driver, a subset on a local Redis
// Cluster, and the suites that run inside workerd (vitest.workers.config.ts).
import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Two files at once even on two cores, where vitest's default (cores - 1) runs them one at a
    // time: the suites mostly wait (on timers, long-polls, child processes), so a second file
    // uses the time. On CI's 2 cores the Node and workerd suites took 374 s instead of 626 s,
    // every test passing (three files at once: 336 s, for more contention).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        test: {
          name: "node",
          include: ["test/**/*.test.ts"],
          exclude: ["test/workers/**", "test/reliability/**", "node_modules/**"],
          // tools-setup says which suites skip for want of a tool (none under CI).
          globalSetup: ["test/support/tools-setup.ts", "test/support/global-setup.ts"],
          testTimeout: 20_000,
          hookTimeout: 20_000,
        },
      },
      {
        test: {
          // The engine suites again, the queue's client being the TCP driver (ioredis on the run's
          // redis-server) instead of REST. cost.test.ts builds its own REST stack: not rerun.
          name: "node-tcp",
          include: ["test/engine/**/*.test.ts"],
          exclude: ["test/engine/cost.test.ts", "node_modules/**"],
          env: { DELAYQ_TEST_DRIVER: "tcp" },
          globalSetup: ["test/support/global-setup.ts"],
          testTimeout: 20_000,
          hookTimeout: 20_000,
        },
      },
      {
        test: {
          // The engine suites and service-level suites on a local Redis Cluster of three masters
          // (test/support/cluster-setup.ts) through the cluster driver (REDIS_CLUSTER_NODES's),
          // their queues of 16 partitions (TEST_PARTITIONS; the suites that read their keys pin
          // one). cost.test.ts counts one redis-server's commands: not rerun. Left out: push-direct
          // and push-qstash (they read and write a topic's keys under home's prefix), budget (it
          // counts the bridge's requests and wraps EVALSHA scripts, which the cluster driver's
          // functions bypass), hand-off (58 s), push-flow (its QStash case: a wave run asked by the
          // PUT claims before the slower partitioned add has written the jobs, and the add's own
          // run finds the wave asked already); the other payment suites pass, left out for time
          // (their outcomes take the outbox path watch and refunds take).
          name: "node-cluster",
          include: [
            "test/engine/**/*.test.ts",
            "test/http/jobs.test.ts",
            "test/http/reschedule.test.ts",
            "test/http/schedules.test.ts",
            "test/http/topics.test.ts",
            "test/dispatch/notices-partitions.test.ts",
            "test/dispatch/push-reschedule.test.ts",
            "test/ops/dashboard-schedules.test.ts",
            "test/payments/notifications.test.ts",
            "test/payments/outbox-read.test.ts",
            "test/payments/refunds.test.ts",
            "test/payments/watch.test.ts",
          ],
          exclude: ["test/engine/cost.test.ts", "node_modules/**"],
          env: { DELAYQ_TEST_DRIVER: "cluster" },
          globalSetup: ["test/support/cluster-setup.ts"],
          testTimeout: 20_000,
          hookTimeout: 20_000,
        },
      },
      "./vitest.workers.config.ts",
    ],
  },
});
