// Workload "burst" (one run per invocation): delayq's service in the harness with a small
// subrequest budget (DQ_SUBREQUESTS=300), the QStash stand-in and the service served over HTTP so
// that hand-offs reach it (POST /v1/qstash/continue), a real receiver. B1: 2,000 direct jobs due
// at the same moment, added ~30 s ahead through the batch API, one tick: the tick takes what its
// budget pays for and asks QStash for fresh invocations for the rest. B0: the same burst without
// QStash (no hand-offs). B2: failure notices, timed from each job's death (its record's endedAt)
// to the notice's arrival at the failureUrl, for jobs dying in direct deliveries of a request's
// run and of a tick's, with a cron once a minute.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type QStashStandIn, startQStash } from "../dev/qstash";
import { type CommandStats, commandDelta, log, type Percentiles, percentiles } from "./lib/measure";
import { openServiceStack, type ServiceStack } from "./lib/service-stack";
import { type FetchCounter, installFetchCounter, type Tally, tallyTotal } from "./lib/subrequests";

export type BurstOptions = {
  /** B1 and B0: direct jobs due at the same moment. */
  jobs: number;
  /** DQ_SUBREQUESTS of B1 and B0. */
  subrequests: number;
  /** Further budgets B1 runs at, for what QStash messages a job costs there. */
  alsoAt: number[];
  /** How long after their add the jobs fall due (past a request's own 25 s window). */
  dueInMs: number;
  /** Jobs delivered within this long of their due time count as delivered. */
  withinMs: number;
  /** B2: jobs dying in a request's run, and as many in a tick's. */
  noticeJobs: number;
  /** B2's cron (a Worker's is once a minute): a notice left for a tick would wait for it. */
  cronMs: number;
};

export const BURST_DEFAULTS: BurstOptions = {
  jobs: 2_000,
  subrequests: 300,
  alsoAt: [1000],
  dueInMs: 30_000,
  withinMs: 60_000,
  noticeJobs: 200,
  cronMs: 60_000,
};

/** A smoke run: a smaller burst, no run at a second budget, a shorter cron. */
export const BURST_QUICK: BurstOptions = {
  jobs: 500,
  subrequests: 300,
  alsoAt: [],
  dueInMs: 30_000,
  withinMs: 15_000,
  noticeJobs: 50,
  cronMs: 20_000,
};

const SECRET = "bench-burst-secret-0001";
/** QStash's price: $1 per 100,000 messages (pay as you go). */
const DOLLARS_PER_MESSAGE = 1 / 100_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One invocation: an API request, a tick, or a call from QStash (a hand-off's run, a callback). */
type Invocation = {
  kind: "request" | "tick" | "hand-off" | "callback";
  tally: Tally;
  /** Settles once its work and what it deferred (a Worker's waitUntil) have. */
  done: Promise<void>;
};

/** Arrivals per job id (ms since the epoch) at one path of a receiver. */
type Arrivals = Map<string, number[]>;

/** A receiver: `/deliver` answers `deliverStatus`, `/failed` 204; each notes when ids arrived. */
async function startReceiver(deliverStatus: number): Promise<{
  url: string;
  deliveries: Arrivals;
  notices: Arrivals;
  close(): Promise<void>;
}> {
  const deliveries: Arrivals = new Map();
  const notices: Arrivals = new Map();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const at = Date.now();
      const notice = req.url?.startsWith("/failed") ?? false;
      try {
        const { id } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id: string };
        const into = notice ? notices : deliveries;
        const list = into.get(id);
        if (list) list.push(at);
        else into.set(id, [at]);
      } catch {
        // not a delivery; counted nowhere
      }
      res.writeHead(notice ? 204 : deliverStatus);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    deliveries,
    notices,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type BurstPeers = {
  qstash?: QStashStandIn;
  receiver: Awaited<ReturnType<typeof startReceiver>>;
  publicUrl: string;
};

type BurstStack = ServiceStack<BurstPeers> & {
  invocations: Invocation[];
  /** One API request as one invocation (a Worker's ExecutionContext collects its deferred work). */
  call(method: string, path: string, body: unknown): Promise<Invocation>;
  /** One cron tick as one invocation. */
  cron(label: string): Invocation;
  /** Resolves once every invocation so far has settled, or after `ms`. */
  settled(ms: number): Promise<void>;
};

/** Where each origin's fetches go (the stacks share the global fetch). */
const destinations = new Map<string, string>();

const API_TOKEN = "bench-api";

async function openBurstStack(
  fetches: FetchCounter,
  settings: { subrequests: number; qstash: boolean; deliverStatus: number },
): Promise<BurstStack> {
  const invocations: Invocation[] = [];
  /** Runs `request` through the app as one invocation counted in `tally`. */
  let invoke: (kind: Invocation["kind"], tally: Tally, request: Request) => Promise<Response> =
    () => {
      throw new Error("the service is not built yet");
    };
  const stack = await openServiceStack<BurstPeers>({
    fetches,
    async peers(onClose) {
      const qstash = settings.qstash ? await startQStash() : undefined;
      if (qstash) onClose(() => qstash.close());
      const receiver = await startReceiver(settings.deliverStatus);
      onClose(() => receiver.close());
      // Served, so that QStash can call it: each call is an invocation of its own.
      const http = serve({
        fetch: (request) => {
          const path = new URL(request.url).pathname;
          const kind = path.endsWith("/continue") ? "hand-off" : "callback";
          return invoke(kind, fetches.tally(`${kind} ${invocations.length}`), request);
        },
        port: 0,
        hostname: "127.0.0.1",
      });
      await new Promise<void>((resolve) => http.once("listening", () => resolve()));
      onClose(() => new Promise<void>((resolve) => http.close(() => resolve())));
      const publicUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      return { qstash, receiver, publicUrl };
    },
    env: ({ qstash, publicUrl }) => ({
      DQ_SUBREQUESTS: String(settings.subrequests),
      DQ_PUBLIC_URL: publicUrl,
      ...(qstash
        ? {
            QSTASH_URL: qstash.url,
            QSTASH_TOKEN: qstash.token,
            QSTASH_CURRENT_SIGNING_KEY: qstash.currentSigningKey,
            QSTASH_NEXT_SIGNING_KEY: qstash.nextSigningKey,
          }
        : {}),
    }),
  });
  const app = stack.service.app;
  invoke = async (kind, tally, request) => {
    const deferred: Promise<unknown>[] = [];
    const ctx = {
      waitUntil: (work: Promise<unknown>) => void deferred.push(work),
      passThroughOnException: () => {},
      props: {},
    };
    let answered: () => void = () => {};
    const answer = new Promise<void>((resolve) => {
      answered = resolve;
    });
    const done = answer.then(async () => {
      while (deferred.length > 0) await Promise.allSettled(deferred.splice(0));
    });
    invocations.push({ kind, tally, done });
    try {
      return await fetches.run(tally, () => app.fetch(request, undefined, ctx));
    } finally {
      answered();
    }
  };
  const { qstash, receiver, publicUrl } = stack.peers;
  destinations.set(new URL(stack.bridge.url).origin, "redis");
  if (qstash) destinations.set(new URL(qstash.url).origin, "qstash");
  destinations.set(new URL(receiver.url).origin, "delivery");
  destinations.set(new URL(publicUrl).origin, "self");
  return {
    ...stack,
    invocations,
    async call(method, path, body) {
      const tally = fetches.tally(`request ${method} ${path}`);
      const res = await invoke(
        "request",
        tally,
        new Request(`http://bench${path}`, {
          method,
          headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
      );
      if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
      await res.body?.cancel();
      const invocation = invocations.find((item) => item.tally === tally);
      if (!invocation) throw new Error("the request's invocation was not recorded");
      return invocation;
    },
    cron(label) {
      const tally = fetches.tally(label);
      const done = stack.tick(tally).then(() => undefined);
      const invocation: Invocation = { kind: "tick", tally, done };
      invocations.push(invocation);
      return invocation;
    },
    async settled(ms) {
      const deadline = Date.now() + ms;
      let seen = 0;
      while (seen < invocations.length && Date.now() < deadline) {
        const now = invocations.slice(seen);
        seen = invocations.length;
        await Promise.race([Promise.allSettled(now.map((item) => item.done)), sleep(ms)]);
      }
    },
  };
}

type Job = { id: string; topic: string; due: number };

/** Adds jobs through the batch API, 1,000 a request. */
async function addJobs(stack: BurstStack, jobs: readonly Job[]): Promise<Invocation[]> {
  const out: Invocation[] = [];
  for (let i = 0; i < jobs.length; i += 1000) {
    out.push(
      await stack.call("POST", "/v1/jobs/batch", {
        jobs: jobs.slice(i, i + 1000).map((job) => ({
          topic: job.topic,
          id: job.id,
          runAt: job.due,
          body: { id: job.id },
        })),
      }),
    );
  }
  return out;
}

/** How far this process's timers ran late meanwhile (the service, receiver and harness share it). */
function lagProbe(): () => Percentiles {
  const lags: number[] = [];
  let expected = performance.now() + 100;
  const timer = setInterval(() => {
    const now = performance.now();
    lags.push(now - expected);
    expected = now + 100;
  }, 100);
  return () => {
    clearInterval(timer);
    return percentiles(lags);
  };
}

export type BurstRun = {
  /** QStash configured (hand-offs on), or not (B0). */
  handOffs: boolean;
  subrequests: number;
  jobs: number;
  withinMs: number;
  /** Jobs whose first delivery came within `withinMs` of their due time. */
  deliveredWithin: number;
  missing: number;
  /** Lateness of each job's first delivery (those delivered at all), ms. */
  lateness: Percentiles;
  early: number;
  /** Jobs delivered more than once. */
  deliveredTwice: number;
  /** The tick and the runs hand-offs asked for (requests to /v1/qstash/continue). */
  invocations: { ticks: number; handOffRuns: number };
  /** Most subrequests one invocation made, by kind (adds, the tick, the hand-off runs). */
  maxSubrequests: { request: number; tick: number; handOff: number };
  /** Subrequests of each hand-off run, in the order they came. */
  handOffSubrequests: number[];
  /** Jobs each hand-off run delivered. */
  handOffDeliveries: number[];
  /** When each hand-off run started, ms after the jobs' due time (negative: before it). */
  handOffStartedMs: number[];
  /** Messages QStash delivered (hand-off runs), and its API requests (publishes), per job. */
  qstashMessagesPerJob: number;
  qstashRequestsPerJob: number;
  /** Money per 1M jobs at QStash's $1 per 100,000 messages. */
  dollarsPerMillionJobs: number;
  /** From before the adds until every invocation settled. */
  cmdsPerJob: number;
  subrequestsPerJob: number;
  subrequestsPerJobBy: Record<string, number>;
  byCommand: CommandStats;
  /** This process's timer lag during the burst (the service shares it with the receiver). */
  timerLagMs: Percentiles;
  /** Warnings and errors the service logged, by event. */
  logged: Record<string, number>;
};

/** B1 (hand-offs) or B0 (none): `jobs` direct jobs due at one moment, one tick. */
async function burst(
  fetches: FetchCounter,
  options: BurstOptions,
  settings: { subrequests: number; handOffs: boolean },
): Promise<BurstRun> {
  const stack = await openBurstStack(fetches, {
    subrequests: settings.subrequests,
    qstash: settings.handOffs,
    deliverStatus: 204,
  });
  try {
    const { receiver } = stack.peers;
    const topic = "burst";
    await stack.call("PUT", `/v1/topics/${topic}`, {
      push: { url: `${receiver.url}/deliver`, secret: SECRET },
    });
    const before = await stack.counter.snapshot();
    const due = Date.now() + options.dueInMs;
    const jobs: Job[] = Array.from({ length: options.jobs }, (_, i) => ({
      id: `${topic}-${i}`,
      topic,
      due,
    }));
    await addJobs(stack, jobs);
    const stopProbe = lagProbe();
    stack.cron("tick");
    const deadline = due + options.withinMs;
    const count = () => receiver.deliveries.size;
    let lastLog = 0;
    while (count() < jobs.length && Date.now() < deadline) {
      if (Date.now() - lastLog > 5000) {
        lastLog = Date.now();
        log(`burst (${settings.subrequests}): delivered ${count()}/${jobs.length}`);
      }
      await sleep(200);
    }
    await sleep(1500); // a delivery sent twice would come now
    const timerLagMs = stopProbe();
    await stack.settled(30_000);
    const delta = commandDelta(before, await stack.counter.snapshot());

    const late: number[] = [];
    let within = 0;
    let twice = 0;
    for (const job of jobs) {
      const times = receiver.deliveries.get(job.id);
      if (!times) continue;
      const first = Math.min(...times);
      late.push(first - job.due);
      if (first - job.due <= options.withinMs) within += 1;
      if (times.length > 1) twice += 1;
    }
    const of = (kind: Invocation["kind"]) =>
      stack.invocations.filter((item) => item.kind === kind).map((item) => item.tally);
    const most = (tallies: Tally[]) => Math.max(0, ...tallies.map((tally) => tallyTotal(tally)));
    const handOffRuns = of("hand-off");
    const by: Record<string, number> = {};
    let subrequests = 0;
    for (const item of stack.invocations) {
      const n = tallyTotal(item.tally);
      by[item.kind] = (by[item.kind] ?? 0) + n / jobs.length;
      subrequests += n;
    }
    const qstashRequests = stack.invocations.reduce(
      (n, item) => n + (item.tally.counts.qstash ?? 0),
      0,
    );
    const messages = new Set(
      (stack.peers.qstash?.deliveries() ?? [])
        .filter((d) => d.destination.endsWith("/v1/qstash/continue"))
        .map((d) => d.messageId),
    ).size;
    const logged: Record<string, number> = {};
    for (const entry of stack.logs) {
      const event = String(entry.event);
      logged[event] = (logged[event] ?? 0) + 1;
    }
    return {
      handOffs: settings.handOffs,
      subrequests: settings.subrequests,
      jobs: jobs.length,
      withinMs: options.withinMs,
      deliveredWithin: within,
      missing: jobs.length - late.length,
      lateness: percentiles(late),
      early: late.filter((ms) => ms < 0).length,
      deliveredTwice: twice,
      invocations: { ticks: of("tick").length, handOffRuns: handOffRuns.length },
      maxSubrequests: {
        request: most(of("request")),
        tick: most(of("tick")),
        handOff: most(handOffRuns),
      },
      handOffSubrequests: handOffRuns.map((tally) => tallyTotal(tally)),
      handOffDeliveries: handOffRuns.map((tally) => tally.counts.delivery ?? 0),
      handOffStartedMs: handOffRuns.map((tally) =>
        Math.round(performance.timeOrigin + tally.startedAt - due),
      ),
      qstashMessagesPerJob: messages / jobs.length,
      qstashRequestsPerJob: qstashRequests / jobs.length,
      dollarsPerMillionJobs: (messages / jobs.length) * 1_000_000 * DOLLARS_PER_MESSAGE,
      cmdsPerJob: delta.total / jobs.length,
      subrequestsPerJob: subrequests / jobs.length,
      subrequestsPerJobBy: by,
      byCommand: delta.byCommand,
      timerLagMs,
      logged,
    };
  } finally {
    await stack.close();
  }
}

export type NoticeGroup = {
  /** Whose run delivered them: the request that added them (due within its window), or a tick. */
  diedIn: "request" | "tick";
  jobs: number;
  dead: number;
  notices: number;
  /** Jobs whose failureUrl was told more than once. */
  noticedTwice: number;
  /** From the group's first death to its last, ms. */
  deathsSpanMs: number;
  /** From each job's death (its record's endedAt) to its notice's arrival, ms. */
  deathToNotice: Percentiles;
  /** Notices that came after a tick started since the job's death (told by that tick). */
  afterATick: number;
};

export type NoticesRun = {
  cronMs: number;
  groups: NoticeGroup[];
  /** When each tick started, ms after the first add. */
  ticksAt: number[];
  /** Most subrequests one invocation made (the service's default budget, 1000). */
  maxSubrequests: number;
  logged: Record<string, number>;
};

/**
 * B2: `noticeJobs` jobs that die in their first delivery (the receiver answers 500, maxAttempts
 * 1), added due within a request's own window (its run delivers them), and as many due past it
 * (a tick's run does), with a cron from the first add on.
 */
async function notices(fetches: FetchCounter, options: BurstOptions): Promise<NoticesRun> {
  const stack = await openBurstStack(fetches, {
    subrequests: 1000,
    qstash: false,
    deliverStatus: 500,
  });
  try {
    const { receiver } = stack.peers;
    const topic = "notices";
    await stack.call("PUT", `/v1/topics/${topic}`, {
      maxAttempts: 1,
      push: {
        url: `${receiver.url}/deliver`,
        secret: SECRET,
        failureUrl: `${receiver.url}/failed`,
      },
    });
    const start = Date.now();
    const make = (group: string, due: number): Job[] =>
      Array.from({ length: options.noticeJobs }, (_, i) => ({
        id: `${group}-${i}`,
        topic,
        due,
      }));
    const inRequest = make("request", start + 3_000);
    const inTick = make("tick", start + options.dueInMs);
    await addJobs(stack, inRequest);
    await addJobs(stack, inTick);
    const ticksAt: number[] = [];
    let n = 0;
    const tick = () => {
      ticksAt.push(Date.now() - start);
      stack.cron(`tick ${++n}`);
    };
    tick();
    const cron = setInterval(tick, options.cronMs);
    const all = [...inRequest, ...inTick];
    const deadline = start + options.dueInMs + options.cronMs + 15_000;
    try {
      while (receiver.notices.size < all.length && Date.now() < deadline) await sleep(250);
      await sleep(1000);
    } finally {
      clearInterval(cron);
    }
    await stack.settled(30_000);
    const groups: NoticeGroup[] = [];
    for (const [diedIn, jobs] of [
      ["request", inRequest],
      ["tick", inTick],
    ] as const) {
      const gaps: number[] = [];
      const deaths: number[] = [];
      let dead = 0;
      let twice = 0;
      let afterATick = 0;
      let told = 0;
      for (const job of jobs) {
        const record = await stack.service.queue.get(job.id);
        if (record.state !== "dead" || record.endedAt === undefined) continue;
        dead += 1;
        deaths.push(record.endedAt);
        const times = receiver.notices.get(job.id);
        if (!times) continue;
        told += 1;
        if (times.length > 1) twice += 1;
        const at = Math.min(...times);
        gaps.push(at - record.endedAt);
        const died = record.endedAt - start;
        if (ticksAt.some((t) => t > died && t < at - start)) afterATick += 1;
      }
      groups.push({
        diedIn,
        jobs: jobs.length,
        dead,
        notices: told,
        noticedTwice: twice,
        deathsSpanMs: deaths.length === 0 ? 0 : Math.max(...deaths) - Math.min(...deaths),
        deathToNotice: percentiles(gaps),
        afterATick,
      });
    }
    const logged: Record<string, number> = {};
    for (const entry of stack.logs) {
      const event = String(entry.event);
      logged[event] = (logged[event] ?? 0) + 1;
    }
    return {
      cronMs: options.cronMs,
      groups,
      ticksAt,
      maxSubrequests: Math.max(0, ...stack.invocations.map((item) => tallyTotal(item.tally))),
      logged,
    };
  } finally {
    await stack.close();
  }
}

export type BurstResult = {
  options: BurstOptions;
  /** B1 at `subrequests`, then at each of `alsoAt`. */
  handOffs: BurstRun[];
  /** B0: the same burst without QStash. */
  without?: BurstRun;
  notices?: NoticesRun;
  errors: Record<string, string>;
};

const message = (error: unknown) =>
  error instanceof Error ? error.message.split("\n")[0] || error.name : String(error);

/** B1, B0 and B2, one after another (each alone on the machine's two cores). */
export async function runBurst(
  options: BurstOptions,
  only?: { notices?: boolean; bursts?: boolean },
): Promise<BurstResult> {
  const fetches = installFetchCounter((url) => destinations.get(url.origin) ?? "other");
  const result: BurstResult = { options, handOffs: [], errors: {} };
  const attempt = async <T>(name: string, run: () => Promise<T>): Promise<T | undefined> => {
    log(`burst ${name}: start`);
    const started = Date.now();
    try {
      const value = await run();
      log(`burst ${name}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      return value;
    } catch (error) {
      result.errors[name] = message(error);
      log(`burst ${name}: failed: ${message(error)}`);
      return undefined;
    }
  };
  try {
    if (only?.bursts !== false) {
      for (const subrequests of [options.subrequests, ...options.alsoAt]) {
        const run = await attempt(`B1 at ${subrequests}`, () =>
          burst(fetches, options, { subrequests, handOffs: true }),
        );
        if (run) result.handOffs.push(run);
      }
      result.without = await attempt("B0 without QStash", () =>
        burst(fetches, options, { subrequests: options.subrequests, handOffs: false }),
      );
    }
    if (only?.notices !== false) {
      result.notices = await attempt("B2 notices", () => notices(fetches, options));
    }
  } finally {
    fetches.uninstall();
  }
  return result;
}
