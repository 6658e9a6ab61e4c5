// Workload W, payment watches (issue 11): watches polled on the WeChat Pay schedule against the
// WeChat Pay sandbox (its own process), by delayq's own pieces wired as src/service.ts wires them
// (dispatcher, payments, scheduler) with the cron driven from here and Redis through the bridge
// (its own process). Time may be compressed: the schedule, the cron, the ramp and the 10 minutes
// are all divided by `speedup`; lateness stays in real milliseconds.
import { Redis } from "@upstash/redis";
import { startRedisServer } from "../dev/redis-server";
import { createDispatcher, DIRECT_WINDOW_MS } from "../src/dispatch/dispatcher";
import { BACKOFF_SCHEDULES } from "../src/domain/schemas";
import type { Logger } from "../src/log";
import { parseWechatPayAccounts } from "../src/payments/accounts";
import { createPayments, type Payments } from "../src/payments/watches";
import { DelayQueue } from "../src/queue";
import { PAYMENTS_TOPIC } from "../src/redis/lua/scripts/payments";
import { createScriptRunner, REDIS_CLIENT_OPTIONS } from "../src/redis/runner";
import { createScheduler, drainStep } from "../src/scheduler";
import { pushStep } from "../src/scheduler/push";
import {
  CommandCounter,
  type CommandStats,
  commandDelta,
  log,
  type Percentiles,
  percentiles,
  startProgress,
} from "./lib/measure";
import { startBridgeProcess } from "./lib/processes";
import { startSandboxProcess } from "./lib/sandbox-child";
import { installFetchCounter, type Tally, tallyTotal } from "./lib/subrequests";

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
};

export const PAYMENTS_DEFAULTS: PaymentsOptions = {
  watches: 10_000,
  speedup: 2,
  rampSeconds: 300,
  followSeconds: 600,
  startCostWatches: 100,
  timeoutMs: 300_000,
};

export const PAYMENTS_QUICK: PaymentsOptions = {
  watches: 200,
  speedup: 30,
  rampSeconds: 300,
  followSeconds: 600,
  startCostWatches: 20,
  timeoutMs: 60_000,
};

const REDIS_TOKEN = "bench-service";
const PREFIX = "bench";
const NOTIFY = "payment-results";
const RETENTION_MS = 3_600_000;
/** DQ_SUBREQUESTS' default, and the free plan's limit, for comparison. */
const SUBREQUEST_BUDGET = 1000;
const FREE_SUBREQUESTS = 50;
const TICK_BUDGET_MS = 20_000;

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
  /** Provider query time − the poll job's due time, ms (real). */
  lateness: Percentiles & { early: number };
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
    overBudget: number;
    overFreePlan: number;
    /** From an invocation's start to its last subrequest. */
    maxSpanMs: number;
  };
  ticks: { count: number; maxTickMs: number; carried: number; tickBudgetMs: number };
  byCommand: CommandStats;
  errors: string[];
};

/**
 * W: `watches` watches start evenly over the ramp; each is polled on the WeChat schedule until
 * its deadline (`followSeconds` after it started), when it expires. The cron ticks every
 * minute ÷ speedup. Every poll's lateness is the provider query's time minus the due time of the
 * poll job the dispatcher handed over.
 */
export async function runPayments(options: PaymentsOptions): Promise<PaymentsResult> {
  const closers: (() => Promise<void> | void)[] = [];
  const close = async () => {
    for (const closer of closers.reverse()) await closer();
  };
  try {
    const server = await startRedisServer();
    closers.push(() => server.stop());
    const counter = await CommandCounter.open(server.port);
    closers.push(() => counter.close());
    const [bridge, sandbox] = await Promise.all([
      startBridgeProcess(server.port, [REDIS_TOKEN]),
      startSandboxProcess(),
    ]);
    closers.push(
      () => bridge.close(),
      () => sandbox.close(),
    );
    const bridgeOrigin = new URL(bridge.url).origin;
    const sandboxOrigin = new URL(sandbox.url).origin;

    // Lateness: the dispatcher hands a poll job over at its due time; the query follows.
    const dueByOrder = new Map<string, number>();
    const lateness: number[] = [];
    let polls = 0;
    const fetches = installFetchCounter(
      (url) => {
        if (url.origin === bridgeOrigin) return "redis";
        if (url.origin !== sandboxOrigin || url.pathname.startsWith("/__sandbox")) return undefined;
        return "provider";
      },
      (destination, url) => {
        if (destination !== "provider") return;
        const order = /\/out-trade-no\/([^/?]+)$/.exec(url.pathname)?.[1];
        if (!order) return;
        polls += 1;
        const due = dueByOrder.get(order);
        if (due !== undefined) lateness.push(Date.now() - due);
        dueByOrder.delete(order);
      },
    );
    closers.push(() => fetches.uninstall());

    const logs: Record<string, unknown>[] = [];
    const logger: Logger = (entry) => {
      if (entry.level !== "info") logs.push({ ...entry, invocation: fetches.current()?.label });
    };
    const outcomes: Record<string, number> = {};
    // As src/service.ts wires them, with the poll handler noting each poll job's due time.
    const redis = new Redis({
      url: bridge.url,
      token: REDIS_TOKEN,
      ...REDIS_CLIENT_OPTIONS,
      retry: { retries: 1 },
      signal: () => AbortSignal.timeout(5000),
    });
    let payments: Payments | undefined;
    const dispatcher = createDispatcher({
      internal: {
        "internal:payments": (meta, body) => {
          const { outTradeNo } = JSON.parse(body) as { outTradeNo: string };
          dueByOrder.set(outTradeNo, meta.due);
          return (payments as Payments).poll(meta, body);
        },
      },
      redis,
      prefix: PREFIX,
      retentionMs: RETENTION_MS,
      log: logger,
      subrequests: SUBREQUEST_BUDGET,
    });
    payments = createPayments({
      scripts: createScriptRunner(redis, PREFIX, RETENTION_MS),
      clock: Date.now,
      alipay: new Map(),
      wechatpay: parseWechatPayAccounts({ sandbox: sandbox.account }),
      defaults: { ttrMs: 60_000, maxAttempts: 10 },
      log: logger,
      count: (_provider, outcome) => {
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      },
      pollSoon: () =>
        dispatcher.run({
          now: Date.now(),
          horizon: Date.now() + DIRECT_WINDOW_MS,
          topic: PAYMENTS_TOPIC,
        }),
      onOutcome: (topics) => {
        for (const topic of new Set(topics)) {
          void dispatcher.run({ now: Date.now(), topic }).catch(() => undefined);
        }
      },
    });
    const watching = payments;
    const queue = new DelayQueue({ redis, prefix: PREFIX, retention: RETENTION_MS / 1000 });
    const scheduler = createScheduler({
      steps: [drainStep(queue), pushStep(dispatcher, logger)],
      budgetMs: TICK_BUDGET_MS,
      log: logger,
    });

    const schedule = BACKOFF_SCHEDULES.wechatpay.map((s) => s / options.speedup);
    const followMs = (options.followSeconds * 1000) / options.speedup;
    const invocations: Tally[] = [];
    const background: Promise<unknown>[] = [];
    /** The route's work for one watch: start it, then claim polls due soon in the background. */
    const start = async (order: string) => {
      const tally = fetches.tally(`start ${order}`);
      invocations.push(tally);
      await fetches.run(tally, async () => {
        const { created } = await watching.start(
          {
            provider: "wechatpay",
            account: "sandbox",
            outTradeNo: order,
            schedule,
            deadline: Date.now() + followMs,
            notify: [NOTIFY],
          },
          undefined,
        );
        if (created) background.push(watching.pollSoon());
      });
      return tally;
    };
    const createTrades = async (prefix: string, n: number) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          for (let i = next++; i < n; i = next++) {
            const res = await fetch(`${sandbox.url}/__sandbox/trades`, {
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
    const farSchedule = [3600];
    const startFar = async (order: string) => {
      const tally = fetches.tally(`start ${order}`);
      await fetches.run(tally, async () => {
        await watching.start(
          {
            provider: "wechatpay",
            account: "sandbox",
            outTradeNo: order,
            schedule: farSchedule,
            deadline: Date.now() + 7_200_000,
            notify: [NOTIFY],
          },
          undefined,
        );
        await watching.pollSoon();
      });
      return tally;
    };
    await startFar(`cost${options.startCostWatches}`); // scripts loaded, topic made
    const costBefore = await counter.snapshot();
    const costRequestsBefore = (await bridge.stats(REDIS_TOKEN)).requests.total;
    let startSubrequests = 0;
    for (let i = 0; i < options.startCostWatches; i++) {
      startSubrequests += tallyTotal(await startFar(`cost${i}`));
    }
    const costDelta = commandDelta(costBefore, await counter.snapshot());
    const startCost = {
      cmds: costDelta.total / options.startCostWatches,
      redisRequests:
        ((await bridge.stats(REDIS_TOKEN)).requests.total - costRequestsBefore) /
        options.startCostWatches,
      subrequests: startSubrequests / options.startCostWatches,
    };

    // The run.
    const before = await counter.snapshot();
    const requestsBefore = (await bridge.stats(REDIS_TOKEN)).requests.total;
    const cpuBefore = process.cpuUsage();
    const tickMs = 60_000 / options.speedup;
    const ticks: { label: string; tickMs: number }[] = [];
    const deferred: Promise<unknown>[] = [];
    let tickNo = 0;
    const tick = () => {
      const label = `tick ${++tickNo}`;
      const tally = fetches.tally(label);
      invocations.push(tally);
      const started = performance.now();
      deferred.push(
        fetches
          .run(tally, () =>
            scheduler.tick({ now: Date.now(), defer: (work) => deferred.push(work) }),
          )
          .then(() => {
            ticks.push({ label, tickMs: performance.now() - started });
          }),
      );
    };
    tick();
    const ticker = setInterval(tick, tickMs);
    const expired = () => outcomes.expired ?? 0;
    const stopProgress = startProgress(
      "payments W",
      () => `${polls} polls, ${expired()}/${options.watches} watches ended`,
      5000,
    );
    const errors: string[] = [];
    const rampMs = (options.rampSeconds * 1000) / options.speedup;
    const t0 = Date.now();
    try {
      const starts: Promise<unknown>[] = [];
      for (let i = 0; i < options.watches; i++) {
        const at = t0 + (i * rampMs) / options.watches;
        if (at > Date.now()) await sleep(at - Date.now());
        starts.push(
          start(`w${i}`).catch((error: unknown) => {
            errors.push(`start w${i}: ${String(error)}`);
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
    await Promise.allSettled(background);
    const cpu = process.cpuUsage(cpuBefore);
    const delta = commandDelta(before, await counter.snapshot());
    const redisRequests = (await bridge.stats(REDIS_TOKEN)).requests.total - requestsBefore;
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
      logs.filter((entry) => entry.event === "push_budget").map((entry) => entry.invocation),
    );
    for (const entry of logs) {
      if (entry.level === "error") errors.push(`${String(entry.event)}: ${String(entry.message)}`);
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
      lateness: { ...late, early: lateness.filter((ms) => ms < 0).length },
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
        overBudget: spans.filter((s) => s.total > SUBREQUEST_BUDGET).length,
        overFreePlan: spans.filter((s) => s.total > FREE_SUBREQUESTS).length,
        maxSpanMs: Math.max(0, ...spans.map((s) => s.span)),
      },
      ticks: {
        count: ticks.length,
        maxTickMs: Math.max(0, ...ticks.map((t) => t.tickMs)),
        carried: ticks.filter((t) => carried.has(t.label)).length,
        tickBudgetMs: TICK_BUDGET_MS,
      },
      byCommand: delta.byCommand,
      errors: errors.slice(0, 20),
    };
  } finally {
    await close();
  }
}
