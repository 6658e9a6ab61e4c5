// Tests that run inside workerd (the Workers runtime) through @cloudflare/vitest-pool-workers.
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [
    cloudflareTest(({ inject }) => ({
      main: "./functions/worker.ts",
      remoteBindings: false,
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        bindings: {
          UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
          UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
          DQ_TOKENS: "worker-admin,worker-shop:shop.*",
        },
      },
    })),
  ],
  test: {
    name: "workerd",
    include: ["test/workers/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
  },
});
