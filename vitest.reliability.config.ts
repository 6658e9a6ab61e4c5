// The reliability suite (npm run test:reliability): fault injection with a history checker, and
// fuzzing of the HTTP API. Files run one at a time: they load the machine and use the real clock.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    name: "reliability",
    include: ["test/reliability/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 60_000,
  },
});
