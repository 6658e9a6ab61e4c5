// delayq as a benchmark system, three ways: the library directly, the HTTP API served by
// functions/node.ts, and the HTTP API in wrangler dev (workerd). All reach Redis through the
// Upstash-REST bridge, which counts the requests a per-request bill would.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "@upstash/redis";
import { type Bridge, startBridge } from "../dev/bridge";
import { freePort } from "../dev/redis-server";
import { type ServiceMode, startService } from "../dev/service-process";
import { createClient } from "../src/client";
import { DelayQueue, REDIS_CLIENT_OPTIONS, tick } from "../src/index";
import type { ConsumeOptions, JobBody, NewJob, SystemAdapter, SystemSession } from "./lib/types";

const TOPIC = "bench";
const TOKEN = "bench-token";
/** Jobs one consumer pops at a time. */
const POP_COUNT = 100;
/** A consumer's long-poll, s. */
const WAIT = 20;

/** What a consumer needs, whatever carries it: the library, or HTTP with the typed client. */
type Api = {
  add(jobs: readonly NewJob[]): Promise<void>;
  pop(
    count: number,
    signal: AbortSignal,
  ): Promise<{ id: string; receipt?: string; body: unknown }[]>;
  finish(id: string, receipt?: string): Promise<void>;
};

const NOTES = [
  `Adds go in batches of 100 (one request each); each of the \`concurrency\` consumers long-polls ` +
    `(\`pop\` with count ${POP_COUNT}, wait ${WAIT} s: it sleeps until the next due time and checks ` +
    "its topic's change counter once a second), hands every popped job over at once, then " +
    "finishes them one by one.",
  "The per-minute cron tick runs too (every 60 s), as in production; pop itself promotes due jobs " +
    "and takes back expired leases, so the tick matters only for topics nobody pops.",
  "requests/job: REST requests counted at the Upstash-REST bridge (what a per-request bill counts).",
];

/** Opens a session: a bridge in front of the fresh redis-server, then `api` on top of it. */
async function session(
  redisPort: number,
  connect: (bridge: Bridge) => Promise<{ api: Api; close(): Promise<void> }>,
): Promise<SystemSession> {
  const bridge = await startBridge({ redisPort, tokens: TOKEN });
  const { api, close } = await connect(bridge);
  const cron = new DelayQueue({ redis: redisClient(bridge), prefix: TOPIC });
  return {
    add: (jobs) => api.add(jobs),
    consume: (options) => consume(api, cron, options),
    requests: async () => bridge.stats().requests.total,
    async close() {
      await close();
      await bridge.close();
    },
  };
}

function redisClient(bridge: Bridge): Redis {
  return new Redis({ url: bridge.url, token: TOKEN, ...REDIS_CLIENT_OPTIONS });
}

/** `concurrency` long-polling consumers and a cron tick every minute. */
async function consume(api: Api, cron: DelayQueue, options: ConsumeOptions) {
  const stop = new AbortController();
  const consumer = async () => {
    while (!stop.signal.aborted) {
      let jobs: Awaited<ReturnType<Api["pop"]>>;
      try {
        jobs = await api.pop(POP_COUNT, stop.signal);
      } catch (error) {
        if (stop.signal.aborted) return;
        throw error;
      }
      // Every popped job is in hand from now: the harness sees them all at once, then the
      // consumer finishes them one by one.
      await Promise.all(jobs.map((job) => options.handle(job.body as JobBody)));
      for (const job of jobs) await api.finish(job.id, job.receipt);
    }
  };
  const loops = Array.from({ length: options.concurrency }, consumer);
  const ticker = setInterval(() => void tick(cron).catch(() => undefined), 60_000);
  return {
    async stop() {
      stop.abort();
      clearInterval(ticker);
      await Promise.all(loops);
    },
  };
}

const toAdd = (jobs: readonly NewJob[]) =>
  jobs.map((job) => ({ topic: TOPIC, body: job.body, ...(job.dueAt ? { runAt: job.dueAt } : {}) }));

export const delayqLibrary: SystemAdapter = {
  name: "delayq",
  notes: ["The library (DelayQueue) in the harness's process.", ...NOTES],
  open: ({ redisPort }) =>
    session(redisPort, async (bridge) => {
      const queue = new DelayQueue({ redis: redisClient(bridge), prefix: TOPIC });
      return {
        api: {
          add: async (jobs) => void (await queue.addBatch(toAdd(jobs))),
          pop: (count, signal) => queue.pop(TOPIC, { count, wait: WAIT }, signal),
          finish: (id, receipt) => queue.finish(id, { receipt }),
        },
        close: async () => undefined,
      };
    }),
};

function httpAdapter(mode: ServiceMode): SystemAdapter {
  const where =
    mode === "node"
      ? "functions/node.ts (@hono/node-server)"
      : "the worker in wrangler dev (workerd)";
  return {
    name: mode === "node" ? "delayq-http-node" : "delayq-http-wrangler",
    notes: [`The HTTP API served by ${where}, called with the typed client.`, ...NOTES],
    open: ({ redisPort }) =>
      session(redisPort, async (bridge) => {
        const stateDir = mkdtempSync(join(tmpdir(), "delayq-bench-"));
        const service = await startService({
          mode,
          port: await freePort(),
          stateDir,
          stdio: "ignore",
          vars: {
            UPSTASH_REDIS_REST_URL: bridge.url,
            UPSTASH_REDIS_REST_TOKEN: TOKEN,
            DQ_TOKENS: TOKEN,
            DQ_PREFIX: TOPIC,
            // The bench drives the cron itself; the Node entry's own ticker stays out of the way.
            DQ_TICK_INTERVAL_MS: String(3_600_000),
          },
        });
        const client = createClient({ baseUrl: service.url, token: TOKEN });
        return {
          api: {
            add: async (jobs) => void (await client.addBatch(toAdd(jobs))),
            pop: (count, signal) => client.pop(TOPIC, { count, wait: WAIT, signal }),
            finish: (id, receipt) => client.finish(id, { receipt }),
          },
          async close() {
            await service.stop();
            rmSync(stateDir, { recursive: true, force: true });
          },
        };
      }),
  };
}

export const delayqHttpNode = httpAdapter("node");
export const delayqHttpWrangler = httpAdapter("wrangler");
