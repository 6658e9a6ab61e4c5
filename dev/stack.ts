// `npm run dev`: the whole local stack (redis-server, Upstash-REST bridge, the service) in one go.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startBridge } from "./bridge";
import { RedisNotInstalledError, startRedisServer } from "./redis-server";

const root = join(import.meta.dirname, "..");
const stateDir = join(root, ".dev");
const DEV_TOKEN = "dev-token";

type Stoppable = { name: string; stop(): Promise<void> };

async function main(): Promise<void> {
  const running: Stoppable[] = [];
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

  const apiPort = Number(process.env.PORT ?? 8787);
  const apiTokens = process.env.DQ_TOKENS ?? DEV_TOKEN;
  const apiToken = (apiTokens.split(",")[0] ?? DEV_TOKEN).split(":")[0]?.trim() ?? DEV_TOKEN;

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

  const stack = {
    apiUrl: `http://127.0.0.1:${apiPort}`,
    apiToken,
    bridgeUrl: bridge.url,
    bridgeToken,
    redisPort: redis.port,
  };
  writeFileSync(join(stateDir, "stack.json"), `${JSON.stringify(stack, null, 2)}\n`);

  console.log(`redis-server   127.0.0.1:${redis.port} (data in .dev/redis, append-only)`);
  console.log(`Upstash bridge ${bridge.url} (token in .dev/stack.json)`);
  if (existsSync(join(root, "functions", "worker.ts"))) {
    console.log(`delayq API     ${stack.apiUrl} (bearer token: ${apiToken})`);
  } else {
    console.log("delayq API     not started: functions/worker.ts does not exist yet");
  }
  console.log("wrote .dev/stack.json; Ctrl-C stops everything");
}

main().catch((error: unknown) => {
  if (error instanceof RedisNotInstalledError) {
    console.error(error.message);
  } else {
    console.error(`npm run dev failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  process.exit(1);
});
