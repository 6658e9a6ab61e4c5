// The reliability suite (npm run test:reliability): fault injection with a history checker, and
// fuzzing of the HTTP API. The fault suite loads the machine and uses the real clock: it runs
// alone (a group of its own, one file at a time). The fuzzers each start their own redis-server
// and run on a fixed clock: they run two files at once, in a group before it.
import { defineConfig } from "vitest/config";

const FAULTS = "test/reliability/faults.test.ts";

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 300_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: "reliability",
          include: [FAULTS],
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "reliability-fuzz",
          include: ["test/reliability/**/*.test.ts"],
          exclude: [FAULTS, "node_modules/**"],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
    ],
  },
});
