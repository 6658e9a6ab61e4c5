// Two projects: the Node suites, and the suites that run inside workerd (vitest.workers.config.ts).
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
      "./vitest.workers.config.ts",
    ],
  },
});
