// Workload W, payment watches (issue 11): watches polled on the WeChat Pay schedule against the
// WeChat Pay sandbox (its own process), by delayq's own service (buildService: the payments route,
// the dispatcher's poller, the scheduler) with the cron driven from here and Redis through the
// bridge (its own process). Time may be compressed: the schedule, the cron, the ramp and the
// 10 minutes are all divided by `speedup`; lateness stays in real milliseconds.
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { Redis } from "@upstash/redis";
import { type QStashStandIn, startQStash } from "../dev/qstash";
import { BACKOFF_SCHEDULES } from "../src/domain/schemas";
import { scriptText } from "../src/redis/lua/scripts";
import { PAYMENTS_TOPIC } from "../src/redis/lua/scripts/payments";
import { claim } from "../src/redis/lua/scripts/push";
import { splitRecord } from "../src/redis/record";
import type { RedisClient } from "../src/redis/runner";
import type { Service } from "../src/service";
import {
  type CommandStats,
  commandDelta,
  log,
  type Percentiles,
  percentiles,
  startProgress,
} from "./lib/measure";
import { type SandboxProcess, startSandboxProcess } from "./lib/sandbox-child";
import { openServiceStack, TICK_BUDGET_MS } from "./lib/service-stack";
import { installFetchCounter, type Tally, tallyTotal } from "./lib/subrequests";
import { measurePollCpu, type PollCpuResult } from "./payments-workerd";

export type PaymentsOptions = {
  /** Watches started, each on its own order (NOTPAY at the sandbox throughout). */
  watches: number;
  /** The schedule, the cron, the ramp and the follow-up are divided by this. */
  speedup: number;
  /** Real seconds over which the watches start, evenly (so that all are live at once after). */
  rampSeconds: number;
  /** Real seconds each watch is followed: its deadline (it then expires, one last query). */
  followSeconds: number;
  /** Watches started on their own first, to measure one start's cost. */
  startCostWatches: number;
  timeoutMs: number;
  /**
   * DQ_SUBREQUESTS: the subrequests one invocation may make. 10,000 is Workers' paid plan; at
   * the default 1000 a tick pays for about 300 polls.
   */
  subrequests: number;
  /**
   * QStash (the stand-in) configured, so that a run its budget stops hands the polls left to
   * fresh invocations (POST /v1/qstash/continue, served here); without it they wait for a tick.
   */
  handOffs: boolean;
  /**
   * Polls a round of the CPU measurement in the service's own process, workerd (wrangler dev)
   * and functions/node.ts (bench/payments-workerd.ts); 0: not measured.
   */
  cpuPolls: number;
};

export const PAYMENTS_DEFAULTS: PaymentsOptions = {
  watches: 10_000,
  // WeChat Pay's own schedule and a cron a minute, as deployed: compressed 2×, the 10,000
  // watches' starts and polls came twice as fast, more than a 2-core machine running the
  // bridge, the sandbox and the harness carries (Redis timeouts, 503s on starts).
  speedup: 1,
  rampSeconds: 300,
  followSeconds: 600,
  startCostWatches: 100,
  timeoutMs: 300_000,
  subrequests: 10_000,
  handOffs: true,
  cpuPolls: 300,
};

export const PAYMENTS_QUICK: PaymentsOptions = {
  watches: 200,
  speedup: 60,
  rampSeconds: 300,
  followSeconds: 600,
  startCostWatches: 20,
  timeoutMs: 60_000,
  subrequests: 10_000,
  handOffs: true,
  cpuPolls: 100,
};

const NOTIFY = "payment-results";
/** The free plan's subrequest limit, for comparison with DQ_SUBREQUESTS' default. */
const FREE_SUBREQUESTS = 50;

/**
 * The client delayq gets, unchanged, except that each claim's reply is also read here: for every
 * poll job claimed (topic __payments), its order and due time go to `onPoll`.
 */
function observeClaims(
  redis: Redis,
  onPoll: (outTradeNo: string, due: number) => void,
): RedisClient {
  const claimText = scriptText(claim);
  return new Proxy(redis, {
    get(target, property) {
      if (property === "createScript") {
        return (text: string) => {
          const script = target.createScript(text);
          if (text !== claimText) return script;
          return {
            async exec(keys: string[], args: string[]) {
              const reply = await script.exec(keys, args);
              for (const group of claim.parse(reply)) {
                if (group.topic !== PAYMENTS_TOPIC) continue;
                for (const raw of group.records) {
                  const { meta, body } = splitRecord(raw);
                  const { outTradeNo } = JSON.parse(body) as { outTradeNo: string };
                  onPoll(outTradeNo, meta.due);
                }
              }
              return reply;
            },
          };
        };
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as unknown as RedisClient;
}

type PaymentsPeers = {
  sandbox: SandboxProcess;
  /** With hand-offs: the QStash stand-in, and where it reaches the service. */
  qstash?: QStashStandIn;
  publicUrl?: string;
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls of a watch within its first hour on the real WeChat schedule (the last step repeats). */
function pollsInFirstHour(): number {
  const steps = BACKOFF_SCHEDULES.wechatpay;
  let at = 0;
  let polls = 0;
  for (let n = 0; ; n++) {
    at += steps[Math.min(n, steps.length - 1)] ?? 0;
    if (at > 3600) return polls;
    polls += 1;
  }
}

export type PaymentsResult = {
  options: PaymentsOptions;
  /** The schedule the watches ran on (seconds), and what it stands for. */
  schedule: number[];
  realSchedule: readonly number[];
  tickMs: number;
  watches: number;
  polls: number;
  /** Polls per watch of the run: fewest, most, and how many watches had each count. */
  pollsPerWatch: Record<string, number>;
  /** Provider query time − the poll job's due time, ms (real). */
  lateness: Percentiles & { early: number };
  /**
   * The same by the kind of invocation that made the poll ("tick", "start", "hand-off"), and
   * how many polls of each were more than a second late.
   */
  latenessBy: Record<string, Percentiles & { overSecond: number }>;
  outcomes: Record<string, number>;
  /** One watch's start (the route's work: watchStart, then a claim for polls due soon). */
  start: { cmds: number; redisRequests: number; subrequests: number };
  /** Everything else over the run, per poll (the watch's end included in its last poll). */
  perPoll: {
    cmds: number;
    redisRequests: number;
    providerRequests: number;
    subrequests: number;
    /** The harness process's CPU per poll: delayq's signing, verifying, scripts, and the clients. */
    harnessCpuMs: number;
  };
  /** A watch's first hour on the real schedule: start plus this many polls. */
  perThousandWatchesPerHour: {
    polls: number;
    cmds: number;
    redisRequests: number;
    providerRequests: number;
  };
  invocations: {
    /** Ticks, and watch starts (each a request whose background work goes on). */
    count: number;
    maxSubrequests: number;
    maxSubrequestsLabel: string;
    /** DQ_SUBREQUESTS of the run. */
    budget: number;
    overBudget: number;
    overFreePlan: number;
    /** From an invocation's start to its last subrequest. */
    maxSpanMs: number;
  };
  ticks: { count: number; maxTickMs: number; carried: number; tickBudgetMs: number };
  /**
   * The runs QStash started for what a run's budget left (none without QStash): asks made, runs
   * asked and come, most subrequests in one, polls they made, and QStash's cost per poll; and
   * `covers`: runs asked for polls due before the next tick that a run could not wait for (one
   * per 20 s wave, QStash dropping the repeats).
   */
  handOffs: {
    enabled: boolean;
    asks: number;
    runsAsked: number;
    covers: number;
    runs: number;
    maxSubrequests: number;
    polls: number;
    qstashMessagesPerPoll: number;
    qstashRequestsPerPoll: number;
  };
  /**
   * CPU per poll in the service's own process, measured apart (bench/payments-workerd.ts):
   * the worker in wrangler dev (workerd) and functions/node.ts.
   */
  pollCpu?: { workerd: PollCpuResult | { error: string }; node: PollCpuResult | { error: string } };
  byCommand: CommandStats;
  /** Warnings and errors delayq logged, by event and message, with how often. */
  errors: Record<string, number>;
};

/**
 * W: `watches` watches start evenly over the ramp; each is polled on the WeChat schedule until
 * its deadline (`followSeconds` after it started), when it expires. The cron ticks every
 * minute ÷ speedup. Every poll's lateness is the provider query's time minus the due time of the
 * poll job the dispatcher handed over.
 */
export async function runPayments(options: PaymentsOptions): Promise<PaymentsResult> {
  const result = await runWatches(options);
  if (options.cpuPolls > 0) {
    const failed = (error: unknown) => ({ error: String(error) });
    result.pollCpu = {
      workerd: await measurePollCpu("wrangler", options.cpuPolls).catch(failed),
      node: await measurePollCpu("node", options.cpuPolls).catch(failed),
    };
  }
  return result;
}

async function runWatches(options: PaymentsOptions): Promise<PaymentsResult> {
  // Lateness: the dispatcher hands a poll job over at its due time; the query follows.
  const dueByOrder = new Map<string, number>();
  const pollsByOrder = new Map<string, number>();
  const lateness: number[] = [];
  const latenessBy = new Map<string, number[]>();
  let polls = 0;
  /** Known once the stack is up; until then nothing is counted. */
  const origins = { redis: "", sandbox: "", qstash: "" };
  const fetches = installFetchCounter(
    (url) => {
      if (url.origin === origins.redis) return "redis";
      if (url.origin === origins.qstash) return "qstash";
      if (url.origin !== origins.sandbox || url.pathname.startsWith("/__sandbox")) return undefined;
      return "provider";
    },
    (destination, url) => {
      if (destination !== "provider") return;
      const order = /\/out-trade-no\/([^/?]+)$/.exec(url.pathname)?.[1];
      if (!order) return;
      polls += 1;
      pollsByOrder.set(order, (pollsByOrder.get(order) ?? 0) + 1);
      const due = dueByOrder.get(order);
      if (due !== undefined) {
        const ms = Date.now() - due;
        lateness.push(ms);
        // The tally's label names the invocation: "tick 3", "start w12", "hand-off 4".
        const kind = /^[a-z-]+/.exec(fetches.current()?.label ?? "")?.[0] ?? "other";
        const ofKind = latenessBy.get(kind) ?? [];
        ofKind.push(ms);
        latenessBy.set(kind, ofKind);
      }
      dueByOrder.delete(order);
    },
  );
  const outcomes: Record<string, number> = {};
  const invocations: Tally[] = [];
  /** The runs hand-offs asked for: each a call from QStash, settled once its deferred work is. */
  const handOffRuns: { tally: Tally; done: Promise<void> }[] = [];
  /** What the hand-offs asked for: asks, and fresh runs asked. */
  const asked = { asks: 0, runs: 0, covers: 0 };
  /** One call from QStash (POST /v1/qstash/continue) as one invocation of its own. */
  const handOffRun = async (app: Service["app"], request: Request) => {
    const tally = fetches.tally(`hand-off ${handOffRuns.length + 1}`);
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
    handOffRuns.push({ tally, done });
    invocations.push(tally);
    try {
      return await fetches.run(tally, () => app.fetch(request, undefined, ctx));
    } finally {
      answered();
    }
  };
  const stack = await openServiceStack<PaymentsPeers>({
    fetches,
    async peers(onClose, service) {
      const sandbox = await startSandboxProcess();
      onClose(() => sandbox.close());
      if (!options.handOffs) return { sandbox };
      const qstash = await startQStash();
      onClose(() => qstash.close());
      // Served, so that QStash can call it: each call is an invocation of its own.
      const http = serve({
        fetch: (request) => handOffRun(service().app, request),
        port: 0,
        hostname: "127.0.0.1",
      });
      await new Promise<void>((resolve) => http.once("listening", () => resolve()));
      onClose(() => new Promise<void>((resolve) => http.close(() => resolve())));
      const publicUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      return { sandbox, qstash, publicUrl };
    },
    env: ({ sandbox, qstash, publicUrl }) => ({
      DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ sandbox: sandbox.account }),
      DQ_SUBREQUESTS: String(options.subrequests),
      // The schedule is compressed by the speed-up: its first steps fall under a second.
      DQ_MIN_POLL_MS: "0",
      // The cron ticks every minute ÷ speed-up here (below): the dispatcher plans with that.
      DQ_TICK_INTERVAL_MS: String(Math.round(60_000 / options.speedup)),
      ...(qstash && publicUrl
        ? {
            QSTASH_URL: qstash.url,
            QSTASH_TOKEN: qstash.token,
            QSTASH_CURRENT_SIGNING_KEY: qstash.currentSigningKey,
            QSTASH_NEXT_SIGNING_KEY: qstash.nextSigningKey,
            DQ_PUBLIC_URL: publicUrl,
          }
        : {}),
    }),
    onLog(entry) {
      if (entry.event === "payment_outcome") {
        const state = String(entry.state);
        outcomes[state] = (outcomes[state] ?? 0) + 1;
      } else if (entry.event === "hand_off") {
        asked.asks += 1;
        asked.runs += Number(entry.runs ?? 0);
      } else if (entry.event === "wave_asked") {
        asked.covers += 1;
      }
    },
    // The service as functions/node.ts builds it; its Redis client also tells the harness each
    // claimed poll job's due time (from the claim script's reply), for the lateness.
    wrapRedis: (redis) =>
      observeClaims(redis, (outTradeNo, due) => dueByOrder.set(outTradeNo, due)),
  }).catch((error: unknown) => {
    fetches.uninstall();
    throw error;
  });
  try {
    origins.redis = new URL(stack.bridge.url).origin;
    origins.sandbox = new URL(stack.peers.sandbox.url).origin;
    if (stack.peers.qstash) origins.qstash = new URL(stack.peers.qstash.url).origin;
    const schedule = BACKOFF_SCHEDULES.wechatpay.map((s) => s / options.speedup);
    const followMs = (options.followSeconds * 1000) / options.speedup;
    /** POST /v1/payments as one invocation (its background claim of polls due soon included). */
    const start = async (order: string, watch: { schedule: number[]; deadline: number }) => {
      const tally = fetches.tally(`start ${order}`);
      const res = await stack.request(tally, "POST", "/v1/payments", {
        provider: "wechatpay",
        account: "sandbox",
        outTradeNo: order,
        notify: [NOTIFY],
        ...watch,
      });
      if (res.status !== 201) throw new Error(`POST /v1/payments: HTTP ${res.status}`);
      await res.body?.cancel();
      return tally;
    };
    const createTrades = async (prefix: string, n: number) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          for (let i = next++; i < n; i = next++) {
            const res = await fetch(`${stack.peers.sandbox.url}/__sandbox/trades`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ outTradeNo: `${prefix}${i}`, amount: 100 }),
            });
            if (res.status !== 201) throw new Error(`sandbox: trade ${i}: HTTP ${res.status}`);
            await res.body?.cancel();
          }
        }),
      );
    };

    // One start's cost: watches whose first poll is an hour away, started one by one.
    log(`payments W: creating ${options.watches + options.startCostWatches + 1} trades`);
    await createTrades("cost", options.startCostWatches + 1);
    await createTrades("w", options.watches);
    const startFar = async (order: string) => {
      const tally = await start(order, { schedule: [3600], deadline: Date.now() + 7_200_000 });
      // The route claims polls due soon in the background: let it finish.
      await sleep(100);
      return tally;
    };
    await startFar(`cost${options.startCostWatches}`); // scripts loaded, topic made
    const costBefore = await stack.counter.snapshot();
    const costRequestsBefore = await stack.redisRequests();
    let startSubrequests = 0;
    for (let i = 0; i < options.startCostWatches; i++) {
      startSubrequests += tallyTotal(await startFar(`cost${i}`));
    }
    const costDelta = commandDelta(costBefore, await stack.counter.snapshot());
    const startCost = {
      cmds: costDelta.total / options.startCostWatches,
      redisRequests:
        ((await stack.redisRequests()) - costRequestsBefore) / options.startCostWatches,
      subrequests: startSubrequests / options.startCostWatches,
    };

    // The run.
    const before = await stack.counter.snapshot();
    const requestsBefore = await stack.redisRequests();
    const cpuBefore = process.cpuUsage();
    const tickMs = 60_000 / options.speedup;
    const ticks: { label: string; tickMs: number }[] = [];
    /** Each tick with its deferred work (the polls it hands over). */
    const deferred: Promise<unknown>[] = [];
    let tickNo = 0;
    const tick = () => {
      const label = `tick ${++tickNo}`;
      const tally = fetches.tally(label);
      invocations.push(tally);
      deferred.push(stack.tick(tally).then((run) => ticks.push({ label, tickMs: run.tickMs })));
    };
    tick();
    const ticker = setInterval(tick, tickMs);
    const expired = () => outcomes.expired ?? 0;
    const stopProgress = startProgress(
      "payments W",
      () => `${polls} polls, ${expired()}/${options.watches} watches ended`,
      5000,
    );
    const errors: Record<string, number> = {};
    const note = (text: string) => {
      errors[text] = (errors[text] ?? 0) + 1;
    };
    const rampMs = (options.rampSeconds * 1000) / options.speedup;
    const t0 = Date.now();
    try {
      const starts: Promise<unknown>[] = [];
      for (let i = 0; i < options.watches; i++) {
        const at = t0 + (i * rampMs) / options.watches;
        if (at > Date.now()) await sleep(at - Date.now());
        starts.push(
          start(`w${i}`, { schedule, deadline: Date.now() + followMs })
            .then((tally) => invocations.push(tally))
            .catch((error: unknown) => {
              note(`start: ${String(error)}`);
            }),
        );
      }
      await Promise.all(starts);
      const deadline = Date.now() + followMs + options.timeoutMs;
      while (expired() < options.watches && Date.now() < deadline) await sleep(250);
    } finally {
      stopProgress();
      clearInterval(ticker);
    }
    await Promise.allSettled(deferred);
    // Hand-off runs (and what they deferred), those that came meanwhile included.
    for (let seen = 0; seen < handOffRuns.length; ) {
      const now = handOffRuns.slice(seen);
      seen = handOffRuns.length;
      await Promise.allSettled(now.map((item) => item.done));
    }
    const cpu = process.cpuUsage(cpuBefore);
    const delta = commandDelta(before, await stack.counter.snapshot());
    const redisRequests = (await stack.redisRequests()) - requestsBefore;
    const n = options.watches;
    let subrequests = 0;
    let provider = 0;
    for (const tally of invocations) {
      subrequests += tallyTotal(tally);
      provider += tally.counts.provider ?? 0;
    }
    const perPoll = {
      cmds: (delta.total - n * startCost.cmds) / polls,
      redisRequests: (redisRequests - n * startCost.redisRequests) / polls,
      providerRequests: provider / polls,
      subrequests: (subrequests - n * startCost.subrequests) / polls,
      harnessCpuMs: (cpu.user + cpu.system) / 1000 / polls,
    };
    const hourPolls = pollsInFirstHour();
    const spans = invocations.map((tally) => ({
      label: tally.label,
      total: tallyTotal(tally),
      span: tally.lastFetchAt - tally.startedAt,
    }));
    const busiest = spans.reduce((a, b) => (b.total > a.total ? b : a), {
      label: "",
      total: 0,
      span: 0,
    });
    const carried = new Set(
      stack.logs.filter((entry) => entry.event === "push_budget").map((entry) => entry.invocation),
    );
    for (const entry of stack.logs) {
      if (entry.level === "error" || entry.level === "warn") {
        note(`${String(entry.event)}: ${String(entry.message ?? entry.tradeState ?? "")}`);
      }
    }
    const late = percentiles(lateness);
    log(`payments W: ${polls} polls, p99 lateness ${Math.round(late.p99)} ms`);
    return {
      options,
      schedule,
      realSchedule: BACKOFF_SCHEDULES.wechatpay,
      tickMs,
      watches: n,
      polls,
      pollsPerWatch: (() => {
        const histogram: Record<string, number> = {};
        for (let i = 0; i < n; i++) {
          const count = String(pollsByOrder.get(`w${i}`) ?? 0);
          histogram[count] = (histogram[count] ?? 0) + 1;
        }
        return histogram;
      })(),
      lateness: { ...late, early: lateness.filter((ms) => ms < 0).length },
      latenessBy: Object.fromEntries(
        [...latenessBy].map(([kind, all]) => [
          kind,
          { ...percentiles(all), overSecond: all.filter((ms) => ms > 1000).length },
        ]),
      ),
      outcomes,
      start: startCost,
      perPoll,
      perThousandWatchesPerHour: {
        polls: hourPolls,
        cmds: 1000 * (startCost.cmds + hourPolls * perPoll.cmds),
        redisRequests: 1000 * (startCost.redisRequests + hourPolls * perPoll.redisRequests),
        providerRequests: 1000 * hourPolls * perPoll.providerRequests,
      },
      invocations: {
        count: invocations.length,
        maxSubrequests: busiest.total,
        maxSubrequestsLabel: busiest.label,
        budget: options.subrequests,
        overBudget: spans.filter((s) => s.total > options.subrequests).length,
        overFreePlan: spans.filter((s) => s.total > FREE_SUBREQUESTS).length,
        maxSpanMs: Math.max(0, ...spans.map((s) => s.span)),
      },
      ticks: {
        count: ticks.length,
        maxTickMs: Math.max(0, ...ticks.map((t) => t.tickMs)),
        carried: ticks.filter((t) => carried.has(t.label)).length,
        tickBudgetMs: TICK_BUDGET_MS,
      },
      handOffs: (() => {
        const messages = (stack.peers.qstash?.deliveries() ?? []).filter((d) =>
          d.destination.endsWith("/v1/qstash/continue"),
        ).length;
        const qstashRequests = invocations.reduce((sum, t) => sum + (t.counts.qstash ?? 0), 0);
        return {
          enabled: options.handOffs,
          asks: asked.asks,
          runsAsked: asked.runs,
          covers: asked.covers,
          runs: handOffRuns.length,
          maxSubrequests: Math.max(0, ...handOffRuns.map((run) => tallyTotal(run.tally))),
          polls: handOffRuns.reduce((sum, run) => sum + (run.tally.counts.provider ?? 0), 0),
          qstashMessagesPerPoll: messages / Math.max(1, polls),
          qstashRequestsPerPoll: qstashRequests / Math.max(1, polls),
        };
      })(),
      byCommand: delta.byCommand,
      errors,
    };
  } finally {
    await stack.close();
    fetches.uninstall();
  }
}
