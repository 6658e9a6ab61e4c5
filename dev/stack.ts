// `npm run dev`: the whole local stack — redis-server, the Upstash-REST bridge, and the worker in
// `wrangler dev` (or `--node`: functions/node.ts) with a local cron — until Ctrl-C.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startBridge } from "./bridge";
import { freePort, RedisNotInstalledError, startRedisServer } from "./redis-server";

const root = join(import.meta.dirname, "..");
/** Where the stack keeps its Redis data and stack.json; DQ_DEV_DIR moves it (the e2e test does). */
const stateDir = process.env.DQ_DEV_DIR ?? join(root, ".dev");
const DEV_TOKEN = "dev-token";

type Part = { name: string; stop(): Promise<void> };

/** Starts a child in its own process group, so that stopping it stops its children too. */
function start(command: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(command, args, { cwd: root, env, detached: true, stdio: "inherit" });
  const kill = () => {
    try {
      if (child.pid) process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
  process.once("exit", kill);
  return child;
}

function stopGroup(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) return resolve();
    const pid = child.pid;
    const timer = setTimeout(() => {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, 5000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    try {
      process.kill(-pid, "SIGTERM");
    } catch {
      resolve();
    }
  });
}

async function waitForHealth(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the service exited (code ${child.exitCode})`);
    try {
      const res = await fetch(`${url}/health`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the service did not answer ${url}/health within ${timeoutMs / 1000} s`);
}

async function main(): Promise<void> {
  const useNode = process.argv.includes("--node");
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
    const apiUrl = `http://127.0.0.1:${apiPort}`;

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
    const workerEnv: Record<string, string> = {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridgeToken,
      DQ_TOKENS: apiTokens,
    };
    for (const [name, value] of Object.entries(process.env)) {
      if (name.startsWith("DQ_") && value !== undefined) workerEnv[name] = value;
    }
    const envFile = join(stateDir, "worker.env");
    writeFileSync(
      envFile,
      Object.entries(workerEnv)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join("\n"),
      { mode: 0o600 },
    );

    const env = {
      ...process.env,
      ...workerEnv,
      PORT: String(apiPort),
      WRANGLER_SEND_METRICS: "false",
    };
    const service = useNode
      ? start(process.execPath, ["--import", "tsx", "functions/node.ts"], env)
      : start(
          join(root, "node_modules", ".bin", "wrangler"),
          [
            "dev",
            "-c",
            "wrangler.toml",
            "--env-file",
            envFile,
            "--ip",
            "127.0.0.1",
            "--port",
            String(apiPort),
            "--test-scheduled",
            // A free devtools port, so that two stacks (say, the e2e test's and yours) can run.
            "--inspector-port",
            String(await freePort()),
            "--persist-to",
            join(stateDir, "wrangler"),
            "--show-interactive-dev-session=false",
            "--log-level",
            "warn",
          ],
          env,
        );
    running.push({
      name: useNode ? "node service" : "wrangler dev",
      stop: () => stopGroup(service),
    });
    service.once("exit", (code) => {
      if (!stopping) {
        console.error(`the service exited (code ${code}); stopping the stack`);
        void stopAll(1);
      }
    });
    await waitForHealth(apiUrl, service, 90_000);

    // Locally crons never fire by themselves: trigger the scheduled handler once a minute.
    const tickEveryMs = Number(process.env.DQ_DEV_TICK_MS ?? 60_000);
    if (!useNode) {
      const ticker = setInterval(() => {
        fetch(`${apiUrl}/__scheduled?cron=*+*+*+*+*`).catch((error: unknown) => {
          console.error(`local cron: ${String(error)}`);
        });
      }, tickEveryMs);
      running.push({ name: "local cron", stop: async () => clearInterval(ticker) });
    }

    const stack = { apiUrl, apiToken, bridgeUrl: bridge.url, bridgeToken, redisPort: redis.port };
    writeFileSync(join(stateDir, "stack.json"), `${JSON.stringify(stack, null, 2)}\n`);
    console.log(
      [
        "",
        `delayq API     ${apiUrl}   (bearer token: ${apiToken}; docs at ${apiUrl}/docs)`,
        `  runs in      ${useNode ? "Node (functions/node.ts)" : "wrangler dev (workerd), cron every minute"}`,
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
