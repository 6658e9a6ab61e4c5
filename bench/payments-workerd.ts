// CPU of one payment poll inside the service's own process: the worker in `wrangler dev`
// (workerd), and functions/node.ts for the same steps. Redis (with the bridge) and the WeChat Pay
// sandbox are processes of their own, so the service process's CPU time (/proc/<pid>/stat, user
// + system) over a round of polls is what the polls cost it: the watch's read, signing the
// query, verifying the answer, the transition, and the tick's claims. Each round starts `polls`
// watches whose first poll is 40 s away (past a start's own 25 s, so no start polls), then one
// tick claims them all and polls each at its due time; the CPU is read after the starts have
// settled and again once every poll is done, less what the process spends idle over as long
// (measured just before). The first round warms the process up; the last is reported.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startRedisServer } from "../dev/redis-server";
import { type ServiceMode, startService } from "../dev/service-process";
import { log } from "./lib/measure";
import { processCpuMs, startBridgeProcess } from "./lib/processes";
import { startSandboxProcess } from "./lib/sandbox-child";

const TOKEN = "bench-workerd";
/** The first poll's wait after the start, s: past the start's own window (25 s). */
const FIRST_POLL_S = 40;
/** How long the idle process is watched before each round's polls, ms. */
const IDLE_MS = 5000;

export type PollCpuResult = {
  mode: ServiceMode;
  /** Polls a round. */
  polls: number;
  /** CPU ms per poll of each round, in order (the first warms up). */
  rounds: number[];
  /** The last round's. */
  cpuMsPerPoll: number;
  /** Polls the watches had counted at the end (each round's watches once each). */
  pollsSeen: number;
  /** The process's CPU ms per second while idle, each round's (taken off its polls' CPU). */
  idleCpuMsPerSecond: number[];
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The workerd process wrangler started (in its process group), or wrangler itself for Node. */
function serviceProcess(mode: ServiceMode, groupId: number): number {
  if (mode === "node") return groupId;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // pgrp is field 5, i.e. 2 after the state.
      if (comm === "workerd" && Number(fields[2]) === groupId) return Number(entry);
    } catch {
      // the process ended
    }
  }
  throw new Error(`no workerd process in wrangler's process group ${groupId}`);
}

/** Runs `rounds` rounds of `polls` polls through the service in `mode`. */
export async function measurePollCpu(
  mode: ServiceMode,
  polls: number,
  rounds = 2,
): Promise<PollCpuResult> {
  const closers: (() => Promise<void> | void)[] = [];
  const stateDir = mkdtempSync(join(tmpdir(), "delayq-pollcpu-"));
  closers.push(() => rmSync(stateDir, { recursive: true, force: true }));
  try {
    const server = await startRedisServer();
    closers.push(() => server.stop());
    const [bridge, sandbox] = await Promise.all([
      startBridgeProcess(server.port, [TOKEN]),
      startSandboxProcess(),
    ]);
    closers.push(
      () => bridge.close(),
      () => sandbox.close(),
    );
    const service = await startService({
      mode,
      port: await freePort(),
      stateDir,
      stdio: "ignore",
      vars: {
        UPSTASH_REDIS_REST_URL: bridge.url,
        UPSTASH_REDIS_REST_TOKEN: TOKEN,
        DQ_TOKENS: TOKEN,
        DQ_PREFIX: "pollcpu",
        DQ_SUBREQUESTS: "10000",
        DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ sandbox: sandbox.account }),
        // Node's own ticker claims the polls soon after their starts (a tick a second);
        // wrangler dev's cron is triggered below.
        DQ_TICK_INTERVAL_MS: "1000",
      },
    });
    closers.push(() => service.stop());
    const pid = serviceProcess(mode, service.child.pid ?? 0);
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${service.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
      return (await res.json()) as Record<string, unknown>;
    };
    const perRound: number[] = [];
    const idle: number[] = [];
    let pollsSeen = 0;
    for (let round = 0; round < rounds; round++) {
      const orders = Array.from({ length: polls }, (_, n) => `cpu${round}-${n}`);
      for (const order of orders) {
        const res = await fetch(`${sandbox.url}/__sandbox/trades`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ outTradeNo: order, amount: 100 }),
        });
        if (res.status !== 201) throw new Error(`sandbox: trade ${order}: HTTP ${res.status}`);
        await res.body?.cancel();
      }
      const firstStart = Date.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: 6 }, async () => {
          for (let i = next++; i < orders.length; i = next++) {
            await api("POST", "/v1/payments", {
              provider: "wechatpay",
              account: "sandbox",
              outTradeNo: orders[i],
              schedule: [FIRST_POLL_S, 3600],
              deadline: Date.now() + 7_200_000,
              notify: ["cpu-results"],
            });
          }
        }),
      );
      const lastStart = Date.now();
      if (lastStart - firstStart > (FIRST_POLL_S - 20) * 1000) {
        throw new Error(`the starts took ${lastStart - firstStart} ms: too slow to measure`);
      }
      await sleep(2000); // the starts' background work
      // What the process spends idle (its timers, the dev server's own work), taken off below.
      const idleFrom = { cpu: processCpuMs(pid), at: Date.now() };
      await sleep(IDLE_MS);
      const before = processCpuMs(pid);
      const idlePerMs = (before - idleFrom.cpu) / (Date.now() - idleFrom.at);
      const startedAt = Date.now();
      if (mode === "wrangler") {
        const res = await fetch(`${service.url}/__scheduled?cron=*+*+*+*+*`);
        await res.body?.cancel();
      }
      // Every poll is due by lastStart + 40 s; a few seconds more for the last answers.
      await sleep(Math.max(0, lastStart + FIRST_POLL_S * 1000 + 8000 - Date.now()));
      const cpu = processCpuMs(pid) - before - idlePerMs * (Date.now() - startedAt);
      idle.push(idlePerMs * 1000);
      let seen = 0;
      for (const order of orders) {
        const { payment } = (await api("GET", `/v1/payments/wechatpay/sandbox/${order}`)) as {
          payment: { polls: number };
        };
        seen += payment.polls;
      }
      pollsSeen += seen;
      if (seen < polls) throw new Error(`round ${round + 1}: ${seen} of ${polls} polls done`);
      perRound.push(cpu / seen);
      log(
        `poll CPU (${mode}): round ${round + 1}, ${seen} polls, ${(cpu / seen).toFixed(2)} ms each`,
      );
    }
    return {
      mode,
      polls,
      rounds: perRound,
      cpuMsPerPoll: perRound[perRound.length - 1] ?? Number.NaN,
      pollsSeen,
      idleCpuMsPerSecond: idle,
    };
  } finally {
    for (const close of closers.reverse()) await close();
  }
}
