// delayq on Node: the same app as the Worker, served by @hono/node-server, with its own ticker.
import { serve } from "@hono/node-server";
import { Redis } from "@upstash/redis";
import { DelayqError } from "../src/index";
import { buildService } from "../src/service";

let service: ReturnType<typeof buildService>;
try {
  service = buildService(
    process.env,
    (settings) => new Redis({ url: settings.url, token: settings.token, ...settings.options }),
  );
} catch (error) {
  console.error(error instanceof DelayqError ? error.message : error);
  process.exit(1);
}

const { app, queue, config, tick } = service;
const port = Number(process.env.PORT ?? 8787);
const tickEveryMs = Number(process.env.DQ_TICK_INTERVAL_MS ?? 60_000);

const server = serve({ fetch: app.fetch, port, hostname: process.env.HOST ?? "127.0.0.1" }, () => {
  console.log(`delayq listening on http://${process.env.HOST ?? "127.0.0.1"}:${port}`);
});

// The scheduler: the cron's work, every minute like the Worker's trigger (DQ_TICK_INTERVAL_MS).
let ticking: Promise<unknown> = Promise.resolve();
const ticker = setInterval(() => {
  ticking = tick(queue, { budgetMs: config.DQ_TICK_BUDGET_MS })
    .then((result) => {
      if (result.promoted || result.expired) {
        console.log(JSON.stringify({ level: "info", event: "tick", ...result }));
      }
    })
    .catch((error: unknown) => {
      const message = error instanceof Error ? error.message : String(error);
      console.error(JSON.stringify({ level: "error", event: "tick", message }));
    });
}, tickEveryMs);

function shutdown() {
  clearInterval(ticker);
  server.close();
  void ticking.finally(() => process.exit(0));
}
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
