// delayq's own service (buildService, as functions/node.ts builds it) inside the harness, with its
// cron driven from there: a counted redis-server, the bridge in its own process, the stand-ins a
// workload needs started beside it (QStash, a receiver, the WeChat Pay sandbox), and the service.
import { Redis } from "@upstash/redis";
import { startRedisServer } from "../../dev/redis-server";
import { NodeEnvSchema, parseConfig } from "../../src/config";
import type { LogEntry } from "../../src/log";
import type { RedisClient } from "../../src/redis/runner";
import type { TickReport } from "../../src/scheduler";
import { buildService, type Service } from "../../src/service";
import { CommandCounter } from "./measure";
import { type BridgeProcess, startBridgeProcess } from "./processes";
import type { FetchCounter, Tally } from "./subrequests";

const API_TOKEN = "bench-api";
const REDIS_TOKEN = "bench-service";
/** The Workers limit the dispatcher is held to (DQ_SUBREQUESTS' default). */
export const SUBREQUEST_BUDGET = 1000;
/** DQ_TICK_BUDGET_MS' default. */
export const TICK_BUDGET_MS = 20_000;

export type Closer = () => Promise<void> | void;

export type ServiceStackSetup<Peers> = {
  /** Counts the service's fetches; installed by the caller, who classifies them. */
  fetches: FetchCounter;
  /**
   * Starts what the service talks to besides Redis, beside the bridge; `onClose` takes what
   * closes each part. `service` answers once the service is built (for callbacks to it).
   */
  peers(onClose: (closer: Closer) => void, service: () => Service): Promise<Peers>;
  /** The service's variables besides Redis, its token, prefix and budgets. */
  env(peers: Peers): Record<string, string>;
  /** Sees every entry the service logs (warnings and errors are kept in `logs` as well). */
  onLog?(entry: LogEntry): void;
  /** Wraps the Redis client the service gets (to read its replies); none by default. */
  wrapRedis?(redis: Redis): RedisClient;
};

/** What a tick took: tick() itself (deferred work left running), then with its deferred work. */
export type TickRun = { report: TickReport; tickMs: number; invocationMs: number };

export type ServiceStack<Peers> = {
  counter: CommandCounter;
  bridge: BridgeProcess;
  peers: Peers;
  service: Service;
  /** The service's warnings and errors, each with the label of the invocation it came from. */
  logs: Record<string, unknown>[];
  /** REST requests the service has sent to Redis so far. */
  redisRequests(): Promise<number>;
  /** One API request (bearer token, JSON body) as one invocation counted in `tally`. */
  request(tally: Tally, method: string, path: string, body: unknown): Promise<Response>;
  /** One cron tick as one invocation counted in `tally`, settled once its deferred work is. */
  tick(tally: Tally): Promise<TickRun>;
  close(): Promise<void>;
};

/** Starts the parts (the bridge and the peers side by side) and builds the service on them. */
export async function openServiceStack<Peers>(
  setup: ServiceStackSetup<Peers>,
): Promise<ServiceStack<Peers>> {
  const { fetches } = setup;
  const closers: Closer[] = [];
  const onClose = (closer: Closer) => void closers.push(closer);
  const close = async () => {
    for (const closer of closers.reverse()) await closer();
  };
  try {
    const server = await startRedisServer();
    onClose(() => server.stop());
    const counter = await CommandCounter.open(server.port);
    onClose(() => counter.close());
    let built: Service | undefined;
    const service = () => {
      if (!built) throw new Error("the service is not built yet");
      return built;
    };
    // Each part's closer is taken as it starts, so that a failure of the other closes it too.
    const [bridgeStart, peersStart] = await Promise.allSettled([
      startBridgeProcess(server.port, [REDIS_TOKEN]).then((bridge) => {
        onClose(() => bridge.close());
        return bridge;
      }),
      setup.peers(onClose, service),
    ]);
    if (bridgeStart.status === "rejected") throw bridgeStart.reason;
    if (peersStart.status === "rejected") throw peersStart.reason;
    const bridge = bridgeStart.value;
    const peers = peersStart.value;

    const logs: Record<string, unknown>[] = [];
    const log = (entry: LogEntry) => {
      setup.onLog?.(entry);
      if (entry.level !== "info") logs.push({ ...entry, invocation: fetches.current()?.label });
    };
    const env = {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: REDIS_TOKEN,
      DQ_TOKENS: API_TOKEN,
      DQ_PREFIX: "bench",
      DQ_SUBREQUESTS: String(SUBREQUEST_BUDGET),
      DQ_TICK_BUDGET_MS: String(TICK_BUDGET_MS),
      ...setup.env(peers),
    };
    const wrap = setup.wrapRedis ?? ((redis: Redis) => redis);
    built = buildService(
      env,
      (settings) =>
        wrap(new Redis({ url: settings.url, token: settings.token, ...settings.options })),
      { config: parseConfig(env, NodeEnvSchema), log },
    );
    const app = built.app;
    const { scheduler, runs } = built;
    return {
      counter,
      bridge,
      peers,
      service: built,
      logs,
      redisRequests: async () => (await bridge.stats(REDIS_TOKEN)).requests.total,
      request: async (tally, method, path, body) =>
        await fetches.run(tally, () =>
          app.fetch(
            new Request(`http://bench${path}`, {
              method,
              headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
              body: JSON.stringify(body),
            }),
          ),
        ),
      async tick(tally) {
        const started = performance.now();
        const run = runs.tick({});
        const report = await fetches.run(tally, () => scheduler.tick(run));
        const tickMs = performance.now() - started;
        await run.settled();
        return { report, tickMs, invocationMs: performance.now() - started };
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
