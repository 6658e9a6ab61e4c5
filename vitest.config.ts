// Three projects: the Node suites, the engine suites over the TCP driver, and the suites that run
// inside workerd (vitest.workers.config.ts).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          include: ["test/**/*.test.ts"],
          exclude: ["test/workers/**", "test/reliability/**", "node_modules/**"],
          globalSetup: ["test/support/global-setup.ts"],
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
      "./vitest.workers.config.ts",
    ],
  },
});
