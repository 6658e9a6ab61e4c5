// Workload P, push topics (issue 10): delayq's own service (buildService: dispatcher, scheduler,
// app) in the harness with the cron driven from here, Redis through the bridge (own process), the
// QStash stand-in and real HTTP receivers. P1: lateness by delay, direct and via QStash, with a
// once-a-minute cron; P2: cost per job when 1,000 jobs fall due in a minute; P3: 10,000 jobs due
// in the same minute, all delivered, none early, each tick within its budget.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type QStashStandIn, startQStash } from "../dev/qstash";
import type { TickReport } from "../src/scheduler";
import {
  type CommandStats,
  commandDelta,
  log,
  mulberry32,
  type Percentiles,
  percentiles,
  startProgress,
} from "./lib/measure";
import {
  openServiceStack,
  type ServiceStack,
  SUBREQUEST_BUDGET,
  TICK_BUDGET_MS,
} from "./lib/service-stack";
import { type FetchCounter, installFetchCounter, type Tally, tallyTotal } from "./lib/subrequests";

export type PushOptions = {
  /** The cron of P1 and P2 (a Worker's is once a minute). */
  tickMs: number;
  /** P1: waves of adds spread over one tick interval, jobs per wave and mode, longest delay. */
  waves: number;
  jobsPerWave: number;
  maxDelayMs: number;
  /** P2: jobs per mode falling due within one tick interval, starting after the next tick. */
  minuteJobs: number;
  /** P3: jobs (direct) due within `scaleSpanMs`, from `scaleDueFromMs` after they are added. */
  scaleJobs: number;
  scaleDueFromMs: number;
  scaleSpanMs: number;
  /** P3's cron, faster than a minute so that the carried work drains within the benchmark. */
  scaleTickMs: number;
  /** Run P3 beside P1 and P2 (quick runs), or after them. */
  parallel: boolean;
  timeoutMs: number;
};

export const PUSH_DEFAULTS: PushOptions = {
  tickMs: 60_000,
  waves: 12,
  jobsPerWave: 50,
  maxDelayMs: 120_000,
  minuteJobs: 1_000,
  scaleJobs: 10_000,
  scaleDueFromMs: 70_000,
  scaleSpanMs: 60_000,
  scaleTickMs: 10_000,
  parallel: false,
  timeoutMs: 600_000,
};

/** A smoke run: a cron every 5 s, delays and due times within the request's own window. */
export const PUSH_QUICK: PushOptions = {
  tickMs: 5_000,
  waves: 3,
  jobsPerWave: 20,
  maxDelayMs: 12_000,
  minuteJobs: 200,
  scaleJobs: 600,
  scaleDueFromMs: 26_000,
  scaleSpanMs: 4_000,
  scaleTickMs: 2_000,
  parallel: true,
  timeoutMs: 120_000,
};

export type Mode = "direct" | "qstash";

const SECRET = "bench-push-secret-0001";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Where each origin's fetches go, for every stack of the run (they share the global fetch). */
const destinations = new Map<string, string>();

type TickRecord = {
  label: string;
  /** When it ran, ms after the phase started. */
  at: number;
  /** tick() itself (drain, claim; deliveries are deferred). */
  tickMs: number;
  /** Until its deferred deliveries were settled: a Worker invocation with waitUntil. */
  invocationMs?: number;
  tally: Tally;
  report?: TickReport;
  error?: string;
};

type Job = { id: string; topic: string; due: number; delayMs: number };

/** What P's service talks to besides Redis: the QStash stand-in, the receiver, itself served. */
type PushPeers = { qstash: QStashStandIn; receiver: { url: string }; publicUrl: string };

/** One redis-server, bridge, QStash stand-in, receiver and service, all counted. */
type PushStack = ServiceStack<PushPeers> & {
  name: string;
  /** Receptions per job id (ms since the epoch). */
  arrivals: Map<string, number[]>;
  requests: Tally[];
  callbacks: { tally: Tally; count: number };
  ticks: TickRecord[];
  configure(topic: string, via: Mode): Promise<void>;
  add(jobs: readonly Job[]): Promise<void>;
  /** Ticks now and every `everyMs`; the returned stop waits for deferred deliveries. */
  startTicks(everyMs: number, phaseStart: number): () => Promise<void>;
};

/** A receiver that answers 204 to every delivery and notes when each job arrived. */
async function startReceiver(
  arrivals: Map<string, number[]>,
): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const at = Date.now();
      try {
        const { id } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id: string };
        const list = arrivals.get(id);
        if (list) list.push(at);
        else arrivals.set(id, [at]);
      } catch {
        // not a delivery; counted nowhere
      }
      res.writeHead(204);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function openPushStack(name: string, fetches: FetchCounter): Promise<PushStack> {
  const arrivals = new Map<string, number[]>();
  // The app is served so that QStash can call it back; each callback is its own invocation.
  const callbacks = { tally: fetches.tally("callbacks"), count: 0 };
  const stack = await openServiceStack<PushPeers>({
    fetches,
    async peers(onClose, service) {
      const qstash = await startQStash();
      onClose(() => qstash.close());
      const receiver = await startReceiver(arrivals);
      onClose(
        () =>
          new Promise<void>((resolve) => {
            receiver.server.closeAllConnections();
            receiver.server.close(() => resolve());
          }),
      );
      const http = serve({
        fetch: (request) => {
          callbacks.count += 1;
          return fetches.run(callbacks.tally, () =>
            service().app.fetch(request),
          ) as Promise<Response>;
        },
        port: 0,
        hostname: "127.0.0.1",
      });
      await new Promise<void>((resolve) => http.once("listening", () => resolve()));
      onClose(() => new Promise<void>((resolve) => http.close(() => resolve())) as Promise<void>);
      const publicUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      return { qstash, receiver, publicUrl };
    },
    env: ({ qstash, publicUrl }) => ({
      QSTASH_URL: qstash.url,
      QSTASH_TOKEN: qstash.token,
      QSTASH_CURRENT_SIGNING_KEY: qstash.currentSigningKey,
      QSTASH_NEXT_SIGNING_KEY: qstash.nextSigningKey,
      DQ_PUBLIC_URL: publicUrl,
    }),
  });
  const { qstash, receiver } = stack.peers;
  destinations.set(new URL(stack.bridge.url).origin, "redis");
  destinations.set(new URL(qstash.url).origin, "qstash");
  destinations.set(new URL(receiver.url).origin, "delivery");
  const requests: Tally[] = [];
  const call = async (method: string, path: string, body: unknown) => {
    const tally = fetches.tally(`request ${method} ${path}`);
    requests.push(tally);
    const res = await stack.request(tally, method, path, body);
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
    await res.body?.cancel();
  };
  const ticks: TickRecord[] = [];
  return {
    ...stack,
    name,
    arrivals,
    requests,
    callbacks,
    ticks,
    configure: (topic, via) =>
      call("PUT", `/v1/topics/${topic}`, {
        push: { url: `${receiver.url}/hook`, via, secret: SECRET },
      }),
    async add(jobs) {
      for (let i = 0; i < jobs.length; i += 1000) {
        await call("POST", "/v1/jobs/batch", {
          jobs: jobs.slice(i, i + 1000).map((job) => ({
            topic: job.topic,
            id: job.id,
            runAt: job.due,
            body: { id: job.id },
          })),
        });
      }
    },
    startTicks(everyMs, phaseStart) {
      const pending: Promise<void>[] = [];
      let n = 0;
      const tick = () => {
        const record: TickRecord = {
          label: `${name} tick ${++n}`,
          at: Date.now() - phaseStart,
          tickMs: 0,
          tally: fetches.tally(`${name} tick ${n}`),
        };
        ticks.push(record);
        pending.push(
          stack.tick(record.tally).then(
            (run) => {
              record.tickMs = run.tickMs;
              record.report = run.report;
              record.invocationMs = run.invocationMs;
            },
            (error: unknown) => {
              record.error = String(error);
            },
          ),
        );
      };
      tick();
      const timer = setInterval(tick, everyMs);
      return async () => {
        clearInterval(timer);
        await Promise.all(pending);
      };
    },
  };
}

export type LatenessGroup = Percentiles & {
  jobs: number;
  early: number;
  missing: number;
  /** Deliveries beyond the first, over all jobs of the group. */
  duplicates: number;
};

function latenessOf(jobs: readonly Job[], arrivals: Map<string, number[]>): LatenessGroup {
  const late: number[] = [];
  let missing = 0;
  let duplicates = 0;
  for (const job of jobs) {
    const times = arrivals.get(job.id);
    if (!times || times.length === 0) {
      missing += 1;
      continue;
    }
    duplicates += times.length - 1;
    late.push(Math.min(...times) - job.due);
  }
  return {
    ...percentiles(late),
    jobs: jobs.length,
    early: late.filter((ms) => ms < 0).length,
    missing,
    duplicates,
  };
}

/** Resolves once every job arrived at least once, or after `ms`. */
async function delivered(
  jobs: readonly Job[],
  arrivals: Map<string, number[]>,
  ms: number,
  label: string,
): Promise<void> {
  const deadline = Date.now() + ms;
  const count = () => jobs.filter((job) => arrivals.has(job.id)).length;
  const stop = startProgress(label, () => `delivered ${count()}/${jobs.length}`, 5000);
  try {
    while (count() < jobs.length && Date.now() < deadline) await sleep(250);
  } finally {
    stop();
  }
}

export type PushCost = {
  jobs: number;
  /** Every Redis command (inside scripts included) from the first add to the last settle. */
  cmdsPerJob: number;
  /** REST requests the service sent to Redis. */
  redisRequestsPerJob: number;
  qstashRequestsPerJob: number;
  /** Subrequests (Redis + QStash + deliveries) per job, and per kind of invocation. */
  subrequestsPerJob: number;
  subrequestsPerJobBy: { requests: number; ticks: number; callbacks: number };
  byDestinationPerJob: Record<string, number>;
  byCommand: CommandStats;
};

/** Warnings and errors the service logged (failed claims, full claims), by event and message. */
function loggedOf(stack: PushStack): Record<string, number> {
  const out: Record<string, number> = {};
  for (const entry of stack.logs) {
    const text = `${String(entry.event)}${entry.message ? `: ${String(entry.message)}` : ""}`;
    out[text] = (out[text] ?? 0) + 1;
  }
  return out;
}

export type TickSummary = {
  ticks: number;
  /** Ticks whose claim was full (the dispatcher logged push_budget): work carried onwards. */
  carried: number;
  maxTickMs: number;
  maxInvocationMs: number;
  /** Most subrequests in one tick's invocation (its deferred deliveries included). */
  maxSubrequests: number;
  /** Most deliveries or publishes one tick made. */
  maxJobsPerTick: number;
  subrequestBudget: number;
  tickBudgetMs: number;
  errors: string[];
};

function summarizeTicks(stack: PushStack): TickSummary {
  const carried = new Set(
    stack.logs.filter((entry) => entry.event === "push_budget").map((entry) => entry.invocation),
  );
  const ticks = stack.ticks;
  return {
    ticks: ticks.length,
    carried: ticks.filter((tick) => carried.has(tick.label)).length,
    maxTickMs: Math.max(0, ...ticks.map((tick) => tick.tickMs)),
    maxInvocationMs: Math.max(0, ...ticks.map((tick) => tick.invocationMs ?? 0)),
    maxSubrequests: Math.max(0, ...ticks.map((tick) => tallyTotal(tick.tally))),
    maxJobsPerTick: Math.max(
      0,
      ...ticks.map((tick) => {
        const budget = stack.logs.find(
          (entry) => entry.event === "push_budget" && entry.invocation === tick.label,
        );
        return Math.max(Number(budget?.claimed ?? 0), tick.tally.counts.delivery ?? 0);
      }),
    ),
    subrequestBudget: SUBREQUEST_BUDGET,
    tickBudgetMs: TICK_BUDGET_MS,
    errors: ticks.flatMap((tick) => (tick.error ? [tick.error] : [])),
  };
}

/**
 * Starts counting a phase's cost (Redis commands, then the service's REST requests); the returned
 * function reads it once the phase's `jobs` are delivered and settled.
 */
async function countCost(stack: PushStack): Promise<(jobs: number) => Promise<PushCost>> {
  const before = await stack.counter.snapshot();
  const requestsBefore = await stack.redisRequests();
  return async (jobs) => {
    const delta = commandDelta(before, await stack.counter.snapshot());
    const redisRequests = (await stack.redisRequests()) - requestsBefore;
    const tallies = [
      ...stack.requests.map((tally) => ["requests", tally] as const),
      ...stack.ticks.map((tick) => ["ticks", tick.tally] as const),
      ["callbacks", stack.callbacks.tally] as const,
    ];
    const by = { requests: 0, ticks: 0, callbacks: 0 };
    const destinationsTotal: Record<string, number> = {};
    for (const [kind, tally] of tallies) {
      by[kind] += tallyTotal(tally);
      for (const [destination, n] of Object.entries(tally.counts)) {
        destinationsTotal[destination] = (destinationsTotal[destination] ?? 0) + n;
      }
    }
    const perJob = (n: number) => n / jobs;
    return {
      jobs,
      cmdsPerJob: perJob(delta.total),
      redisRequestsPerJob: perJob(redisRequests),
      qstashRequestsPerJob: perJob(destinationsTotal.qstash ?? 0),
      subrequestsPerJob: perJob(by.requests + by.ticks + by.callbacks),
      subrequestsPerJobBy: {
        requests: perJob(by.requests),
        ticks: perJob(by.ticks),
        callbacks: perJob(by.callbacks),
      },
      byDestinationPerJob: Object.fromEntries(
        Object.entries(destinationsTotal).map(([name, n]) => [name, perJob(n)]),
      ),
      byCommand: delta.byCommand,
    };
  };
}

/** Waits for QStash's callbacks to settle what it delivered (the cost includes them). */
async function settled(stack: PushStack, mode: Mode, deliveries: number): Promise<void> {
  if (mode !== "qstash") return;
  const deadline = Date.now() + 15_000;
  while (stack.callbacks.count < deliveries && Date.now() < deadline) await sleep(100);
}

const arrivalsOf = (jobs: readonly Job[], arrivals: Map<string, number[]>) =>
  jobs.reduce((n, job) => n + (arrivals.get(job.id)?.length ?? 0), 0);

export type PushLatenessResult = {
  /** Warnings and errors the service logged, by event and message, with how often. */
  logged: Record<string, number>;
  mode: Mode;
  tickMs: number;
  maxDelayMs: number;
  all: LatenessGroup;
  /** By the delay the job was added with: direct mode's rules differ by it. */
  byDelay: Record<string, LatenessGroup>;
  cost: PushCost;
  ticks: TickSummary;
};

/** Direct mode's rules differ by delay: the request delivers within 25 s, the tick beyond. */
const DELAY_GROUPS: readonly [string, (delayMs: number) => boolean][] = [
  ["delay ≤ 25 s", (ms) => ms <= 25_000],
  ["25 s < delay < 60 s", (ms) => ms > 25_000 && ms < 60_000],
  ["delay ≥ 60 s", (ms) => ms >= 60_000],
];

/** P1: waves of adds over one tick interval, delays uniform in [0, maxDelay]. */
async function pushLateness(
  mode: Mode,
  options: PushOptions,
  fetches: FetchCounter,
): Promise<PushLatenessResult> {
  const stack = await openPushStack(`P1 ${mode}`, fetches);
  try {
    const topic = `p1-${mode}`;
    await stack.configure(topic, mode);
    const cost = await countCost(stack);
    const start = Date.now();
    const stopTicks = stack.startTicks(options.tickMs, start);
    const random = mulberry32(mode === "direct" ? 11 : 13);
    const jobs: Job[] = [];
    for (let wave = 0; wave < options.waves; wave++) {
      const at = start + 500 + (wave * options.tickMs) / options.waves;
      await sleep(Math.max(0, at - Date.now()));
      const now = Date.now();
      const batch = Array.from({ length: options.jobsPerWave }, (_, i) => {
        const delayMs = Math.round(random() * options.maxDelayMs);
        return { id: `${topic}-${wave}-${i}`, topic, due: now + delayMs, delayMs };
      });
      jobs.push(...batch);
      await stack.add(batch);
    }
    const lastDue = Math.max(...jobs.map((job) => job.due));
    await delivered(
      jobs,
      stack.arrivals,
      lastDue - Date.now() + options.tickMs + 30_000,
      `P1 ${mode}`,
    );
    await stopTicks();
    await settled(stack, mode, arrivalsOf(jobs, stack.arrivals));
    const byDelay: Record<string, LatenessGroup> = {};
    for (const [name, within] of DELAY_GROUPS) {
      byDelay[name] = latenessOf(
        jobs.filter((job) => within(job.delayMs)),
        stack.arrivals,
      );
    }
    return {
      mode,
      tickMs: options.tickMs,
      maxDelayMs: options.maxDelayMs,
      all: latenessOf(jobs, stack.arrivals),
      byDelay,
      cost: await cost(jobs.length),
      ticks: summarizeTicks(stack),
      logged: loggedOf(stack),
    };
  } finally {
    await stack.close();
  }
}

export type PushMinuteResult = {
  /** Warnings and errors the service logged, by event and message, with how often. */
  logged: Record<string, number>;
  mode: Mode;
  tickMs: number;
  /** Jobs due within one tick interval, beginning `tickMs + 10 s` after they were added. */
  lateness: LatenessGroup;
  cost: PushCost;
  ticks: TickSummary;
};

/** P2: `minuteJobs` added at once, due uniformly over the interval after the next tick's. */
async function pushMinute(
  mode: Mode,
  options: PushOptions,
  fetches: FetchCounter,
): Promise<PushMinuteResult> {
  const stack = await openPushStack(`P2 ${mode}`, fetches);
  try {
    const topic = `p2-${mode}`;
    await stack.configure(topic, mode);
    const cost = await countCost(stack);
    const start = Date.now();
    const stopTicks = stack.startTicks(options.tickMs, start);
    await sleep(500);
    const from = start + options.tickMs + 10_000;
    const jobs: Job[] = Array.from({ length: options.minuteJobs }, (_, i) => {
      const due = Math.round(from + (i * options.tickMs) / options.minuteJobs);
      return { id: `${topic}-${i}`, topic, due, delayMs: due - Date.now() };
    });
    await stack.add(jobs);
    await delivered(
      jobs,
      stack.arrivals,
      from + 2 * options.tickMs + 30_000 - Date.now(),
      `P2 ${mode}`,
    );
    await stopTicks();
    await settled(stack, mode, arrivalsOf(jobs, stack.arrivals));
    return {
      mode,
      tickMs: options.tickMs,
      lateness: latenessOf(jobs, stack.arrivals),
      cost: await cost(jobs.length),
      ticks: summarizeTicks(stack),
      logged: loggedOf(stack),
    };
  } finally {
    await stack.close();
  }
}

export type PushScaleResult = {
  /** Warnings and errors the service logged, by event and message, with how often. */
  logged: Record<string, number>;
  mode: Mode;
  jobs: number;
  tickMs: number;
  dueFromMs: number;
  spanMs: number;
  lateness: LatenessGroup;
  /** Seconds from the first due time until every job had arrived. */
  drainedSeconds: number;
  ticks: TickSummary;
  /**
   * With a cron once a minute the same work takes ceil(jobs / jobs per tick) ticks: the last
   * jobs would go out about this many minutes after the minute they were due in.
   */
  atOnceAMinute: { ticksNeeded: number; lastLateMinutes: number } | null;
  cost: PushCost;
};

/** P3: `scaleJobs` direct jobs due within one span, more than one claim can take. */
async function pushScale(options: PushOptions, fetches: FetchCounter): Promise<PushScaleResult> {
  const mode: Mode = "direct";
  const stack = await openPushStack("P3", fetches);
  try {
    const topic = "p3";
    await stack.configure(topic, mode);
    const cost = await countCost(stack);
    const start = Date.now();
    const from = start + options.scaleDueFromMs;
    const jobs: Job[] = Array.from({ length: options.scaleJobs }, (_, i) => {
      const due = Math.round(from + (i * options.scaleSpanMs) / options.scaleJobs);
      return { id: `${topic}-${i}`, topic, due, delayMs: due - start };
    });
    await stack.add(jobs);
    const stopTicks = stack.startTicks(options.scaleTickMs, start);
    await delivered(
      jobs,
      stack.arrivals,
      from + options.scaleSpanMs + options.timeoutMs - Date.now(),
      "P3",
    );
    const drainedAt = Date.now();
    await stopTicks();
    const ticks = summarizeTicks(stack);
    const ticksNeeded = Math.ceil(options.scaleJobs / Math.max(1, ticks.maxJobsPerTick));
    return {
      mode,
      jobs: options.scaleJobs,
      tickMs: options.scaleTickMs,
      dueFromMs: options.scaleDueFromMs,
      spanMs: options.scaleSpanMs,
      lateness: latenessOf(jobs, stack.arrivals),
      drainedSeconds: (drainedAt - from) / 1000,
      ticks,
      // Only when ticks did the work (not the requests that added the jobs).
      atOnceAMinute:
        ticks.maxJobsPerTick === 0
          ? null
          : {
              ticksNeeded,
              // The tick before the minute and the one in it claim ahead; each further one is a
              // minute later.
              lastLateMinutes: Math.max(
                0,
                ticksNeeded - Math.ceil(options.scaleSpanMs / 60_000) - 1,
              ),
            },
      cost: await cost(jobs.length),
      logged: loggedOf(stack),
    };
  } finally {
    await stack.close();
  }
}

export type PushResult = {
  options: PushOptions;
  lateness: PushLatenessResult[];
  minute: PushMinuteResult[];
  scale?: PushScaleResult;
  errors: Record<string, string>;
};

const message = (error: unknown) =>
  error instanceof Error ? error.message.split("\n")[0] || error.name : String(error);

/**
 * P1 and P2, direct and via QStash, side by side (four stacks: each its own redis-server, bridge,
 * stand-in and receiver; the cron of each ticks at the same moments), then P3 (or beside them).
 * `beside` runs along with P1 and P2 (idle counts that do not depend on CPU).
 */
export async function runPush(
  options: PushOptions,
  beside?: () => Promise<void>,
): Promise<PushResult> {
  const fetches = installFetchCounter((url) => {
    if (url.pathname.startsWith("/__sandbox")) return undefined;
    return destinations.get(url.origin) ?? "other";
  });
  const result: PushResult = { options, lateness: [], minute: [], errors: {} };
  const attempt = async <T>(name: string, run: () => Promise<T>): Promise<T | undefined> => {
    log(`push ${name}: start`);
    const started = Date.now();
    try {
      const value = await run();
      log(`push ${name}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      return value;
    } catch (error) {
      result.errors[name] = message(error);
      log(`push ${name}: failed: ${message(error)}`);
      return undefined;
    }
  };
  const scale = async () => {
    result.scale = await attempt("P3 10k due in one span", () => pushScale(options, fetches));
  };
  try {
    const phases: Promise<unknown>[] = (["direct", "qstash"] as const).flatMap((mode) => [
      attempt(`P1 ${mode}`, () => pushLateness(mode, options, fetches)).then((value) => {
        if (value) result.lateness.push(value);
      }),
      attempt(`P2 ${mode}`, () => pushMinute(mode, options, fetches)).then((value) => {
        if (value) result.minute.push(value);
      }),
    ]);
    if (beside) phases.push(beside());
    if (options.parallel) phases.push(scale());
    await Promise.all(phases);
    if (!options.parallel) await scale();
  } finally {
    fetches.uninstall();
  }
  result.lateness.sort((a, b) => a.mode.localeCompare(b.mode));
  result.minute.sort((a, b) => a.mode.localeCompare(b.mode));
  return result;
}

/** P3 alone (a debugging aid: `--only push-scale`). */
export async function runPushScaleOnly(options: PushOptions): Promise<PushScaleResult | undefined> {
  const fetches = installFetchCounter((url) =>
    url.pathname.startsWith("/__sandbox") ? undefined : (destinations.get(url.origin) ?? "other"),
  );
  try {
    return await pushScale(options, fetches);
  } finally {
    fetches.uninstall();
  }
}
