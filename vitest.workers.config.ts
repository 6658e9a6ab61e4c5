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
          // QStash settings, so that the callback route is served; callbacks in the tests are
          // signed by the tests themselves with these keys.
          QSTASH_URL: "http://127.0.0.1:9",
          QSTASH_TOKEN: "workerd-qstash-token",
          QSTASH_CURRENT_SIGNING_KEY: "sig_workerd_current_key",
          QSTASH_NEXT_SIGNING_KEY: "sig_workerd_next_key",
          DQ_PUBLIC_URL: "http://delayq.test",
          RECEIVER_URL: inject("receiverUrl"),
          CLOSING_RECEIVER_URL: inject("closingReceiverUrl"),
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
