// `npm run dev`: the whole local stack — redis-server, the Upstash-REST bridge, and the worker in
// `wrangler dev` (or `--node`: functions/node.ts) with a local cron — until Ctrl-C.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startBridge } from "./bridge";
import { RedisNotInstalledError, startRedisServer } from "./redis-server";
import { startService } from "./service-process";

const root = join(import.meta.dirname, "..");
/** Where the stack keeps its Redis data and stack.json; DQ_DEV_DIR moves it (the e2e test does). */
const stateDir = process.env.DQ_DEV_DIR ?? join(root, ".dev");
const DEV_TOKEN = "dev-token";

type Part = { name: string; stop(): Promise<void> };

async function main(): Promise<void> {
  const mode = process.argv.includes("--node") ? "node" : "wrangler";
  const running: Part[] = [];
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    for (const part of running.reverse()) {
      await part.stop().catch((error: unknown) => {
        console.error(`could not stop ${part.name}: ${String(error)}`);
      });
    }
    process.exit(code);
  };
  process.on("SIGINT", () => void stopAll(0));
  process.on("SIGTERM", () => void stopAll(0));

  try {
    const apiPort = Number(process.env.PORT ?? 8787);
    const apiTokens = process.env.DQ_TOKENS ?? DEV_TOKEN;
    const apiToken = (apiTokens.split(",")[0] ?? "").split(":")[0]?.trim() || DEV_TOKEN;

    mkdirSync(stateDir, { recursive: true });
    const redis = await startRedisServer({ dir: join(stateDir, "redis"), appendOnly: true });
    running.push({ name: "redis-server", stop: redis.stop });

    const bridgeToken = `bridge-${crypto.randomUUID()}`;
    const bridge = await startBridge({
      redisPort: redis.port,
      tokens: bridgeToken,
      port: Number(process.env.BRIDGE_PORT ?? 0),
    });
    running.push({ name: "bridge", stop: bridge.close });

    // The worker's environment: the bridge as its Upstash database, plus any DQ_* settings.
    const vars: Record<string, string> = {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridgeToken,
      DQ_TOKENS: apiTokens,
    };
    for (const [name, value] of Object.entries(process.env)) {
      if (name.startsWith("DQ_") && name !== "DQ_DEV_DIR" && value !== undefined)
        vars[name] = value;
    }
    const service = await startService({ mode, port: apiPort, vars, stateDir });
    running.push({ name: `service (${mode})`, stop: service.stop });
    service.child.once("exit", (code) => {
      if (!stopping) {
        console.error(`the service exited (code ${code}); stopping the stack`);
        void stopAll(1);
      }
    });

    // Locally crons never fire by themselves: trigger the scheduled handler once a minute.
    // (functions/node.ts runs its own ticker.)
    if (mode === "wrangler") {
      const ticker = setInterval(
        () => {
          fetch(`${service.url}/__scheduled?cron=*+*+*+*+*`).catch((error: unknown) => {
            console.error(`local cron: ${String(error)}`);
          });
        },
        Number(process.env.DQ_DEV_TICK_MS ?? 60_000),
      );
      running.push({ name: "local cron", stop: async () => clearInterval(ticker) });
    }

    const stack = {
      apiUrl: service.url,
      apiToken,
      bridgeUrl: bridge.url,
      bridgeToken,
      redisPort: redis.port,
    };
    writeFileSync(join(stateDir, "stack.json"), `${JSON.stringify(stack, null, 2)}\n`);
    console.log(
      [
        "",
        `delayq API     ${service.url}   (bearer token: ${apiToken}; docs at ${service.url}/docs)`,
        `  runs in      ${mode === "node" ? "Node (functions/node.ts)" : "wrangler dev (workerd), cron every minute"}`,
        `Upstash bridge ${bridge.url}   (token in stack.json)`,
        `redis-server   127.0.0.1:${redis.port}   (data in ${join(stateDir, "redis")}, append-only)`,
        `wrote ${join(stateDir, "stack.json")}; Ctrl-C stops everything`,
        "",
      ].join("\n"),
    );
  } catch (error) {
    console.error(
      error instanceof RedisNotInstalledError
        ? error.message
        : `npm run dev failed: ${error instanceof Error ? error.message : String(error)}`,
    );
    await stopAll(1);
  }
}

void main();
