// Model-based test of a refund watch's transitions: random runs of starts, polls (some answered
// with a 5xx), the refund's status moved at the provider (PROCESSING → SUCCESS, CLOSED or
// ABNORMAL; ABNORMAL retried by the merchant → any of them), REFUND.* notifications (some resent
// with the same event id), stops and the passing of the deadline, compared step by step with a
// model of the rules (DESIGN §4 "Refund watches"). After every step: the watch reads the model's
// state, and each notify topic holds exactly the outcomes the model says, each once (a late
// success included), a refund.succeeded always with the refund's amount.
//
// Real parts: the transitions' scripts on the run's bridge (a key prefix per run), the WeChat Pay
// sandbox on the wire, Refunds as the service builds it, its poller handed each claimed poll job
// as the dispatcher does, and the sandbox's signed REFUND.* notifications checked by
// verifyWechatPayEvent (the notify route's check). The watch's clock is the test's.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "@upstash/redis";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import type { LogEntry } from "../../src/log";
import { parseWechatPayAccounts } from "../../src/payments/accounts";
import { createRefunds, type Refunds } from "../../src/payments/refunds";
import { verifyWechatPayEvent } from "../../src/payments/wechatpay-refunds";
import { keys } from "../../src/redis/keys";
import { splitRecord } from "../../src/redis/record";
import {
  createScriptRunner,
  REDIS_CLIENT_OPTIONS,
  type ScriptRunner,
} from "../../src/redis/runner";
import { createRun, type Run } from "../../src/run/run";
import { publicWatchId } from "./harness";

const STEP_MS = 1000;
const DEADLINE_MS = 6000;
const TOPICS = ["results", "audit"];
const TOTAL = 1230;
const REFUND = 700;

type Status = "PROCESSING" | "SUCCESS" | "CLOSED" | "ABNORMAL";
type Ended = "succeeded" | "closed" | "abnormal" | "expired" | "stopped";

const ENDS: Record<Exclude<Status, "PROCESSING">, Ended> = {
  SUCCESS: "succeeded",
  CLOSED: "closed",
  ABNORMAL: "abnormal",
};

type Model = {
  /** The refund at the provider. */
  status: Status;
  state: "polling" | Ended;
  /** When the next poll is due (while polling). */
  due: number;
  /** Each topic's outcomes, as "event" or "event (late)". */
  told: string[];
  /** The last notification sent: its event id, and the status it said (a resend says the same). */
  last?: { eventId: string; status: Status };
};

type World = {
  t: number;
  refunds: Refunds;
  scripts: ScriptRunner;
  key: ReturnType<typeof keys>;
  run: Run;
  /** The order refunded, and the refund (its out_refund_no). */
  order: string;
  no: string;
  start: number;
  log: string[];
};

let wechat: WechatPaySandbox;
let receiver: { url: string; close(): Promise<void> };
/** The run the receiver hands notifications to (the current fast-check run's). */
let current: World | undefined;
const redis = new Redis({
  url: inject("bridgeUrl"),
  token: `${inject("bridgeToken")}:rmodel-${crypto.randomUUID().slice(0, 8)}`,
  ...REDIS_CLIENT_OPTIONS,
});

beforeAll(async () => {
  wechat = await startWechatPaySandbox();
  const account = parseWechatPayAccounts({ sandbox: wechat.account }).get("sandbox");
  if (!account) throw new Error("no account");
  // delayq's notify route for refunds, less the HTTP framework: verify, then the transition.
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = new Headers(req.headers as Record<string, string>);
      const body = Buffer.concat(chunks).toString("utf8");
      const result = await verifyWechatPayEvent(account, headers, body, Date.now());
      const world = current;
      if (!result.ok || result.kind !== "refund" || !world) {
        res.writeHead(401).end();
        return;
      }
      const refund = {
        provider: "wechatpay" as const,
        account: "sandbox",
        outRefundNo: result.outRefundNo,
      };
      await world.refunds.notified(world.run, refund, result.answer, result.notifyId);
      res.writeHead(204).end();
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/notify`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}, 30_000);

afterAll(async () => {
  await wechat?.close();
  await receiver?.close();
});

// ---- the rules ---------------------------------------------------------------------------

/** The ended states a success is still told after, late (DESIGN §4: money moved after all). */
const LATE_AFTER = new Set<string>(["expired", "closed", "abnormal", "stopped"]);

function end(m: Model, state: Ended): void {
  m.state = state;
  if (state !== "stopped") m.told.push(`refund.${state}`);
}

/** How a poll ends the watch, or undefined when it polls again (its next due time set). */
function pollEnds(m: Model, w: World, fault: boolean): Ended | undefined {
  const final = m.status === "PROCESSING" ? undefined : ENDS[m.status];
  if (w.t < w.start + DEADLINE_MS) {
    if (!fault && final) return final;
    // PROCESSING: the schedule's next step; a 5xx: the transient wait, capped by that step.
    m.due = Math.min(w.t + STEP_MS, w.start + DEADLINE_MS);
    return undefined;
  }
  // The deadline: one last query. A 5xx is tried again (for up to 10 minutes past it).
  if (fault) {
    m.due = w.t + STEP_MS;
    return undefined;
  }
  return final ?? "expired";
}

function notified(m: Model, resend: boolean): void {
  if (resend || m.status === "PROCESSING") return; // taken before, or nothing final to tell
  const ended = ENDS[m.status];
  if (m.state === "polling") end(m, ended);
  else if (ended === "succeeded" && LATE_AFTER.has(m.state)) {
    m.state = "succeeded";
    m.told.push("refund.succeeded (late)");
  }
}

// ---- the commands ------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<Model, World>;

class Advance implements Cmd {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(_m: Model, w: World) {
    w.t += this.ms;
  }
  toString = () => `advance(${this.ms})`;
}

class Poll implements Cmd {
  constructor(readonly fault: boolean) {}
  check = () => true;
  async run(m: Model, w: World) {
    const due = m.state === "polling" && w.t >= m.due;
    if (this.fault && due) wechat.inject("5xx");
    const claimed = await w.scripts.run("claim", w.t, [
      w.t,
      10,
      100,
      crypto.randomUUID(),
      "__refunds",
      0,
    ]);
    const records = claimed.flatMap((group) => group.records.map(splitRecord));
    expect(records.length, "a poll is claimed exactly when the model says it is due").toBe(
      due ? 1 : 0,
    );
    for (const job of records) await w.refunds.poller.run(job, w.run);
    if (due) {
      const ended = pollEnds(m, w, this.fault);
      if (ended) end(m, ended);
    }
    await agree(m, w);
  }
  toString = () => `poll${this.fault ? "(5xx)" : ""}`;
}

/** The refund's status moved at WeChat Pay, as its rules allow (from PROCESSING or ABNORMAL). */
class SetStatus implements Cmd {
  constructor(readonly to: Exclude<Status, "PROCESSING">) {}
  check = (m: Readonly<Model>) => m.status === "PROCESSING" || m.status === "ABNORMAL";
  async run(m: Model, w: World) {
    wechat.setRefundStatus(w.no, this.to);
    m.status = this.to;
  }
  toString = () => `status(${this.to})`;
}

class Notify implements Cmd {
  constructor(readonly resend: boolean) {}
  // WeChat Pay notifies a refund that ended; a resend is the same event, saying the same.
  check = (m: Readonly<Model>) =>
    m.status !== "PROCESSING" && (!this.resend || m.last?.status === m.status);
  async run(m: Model, w: World) {
    const eventId = this.resend && m.last ? m.last.eventId : crypto.randomUUID();
    m.last = { eventId, status: m.status };
    expect((await wechat.notifyRefund(w.no, receiver.url, { eventId })).status).toBe(204);
    notified(m, this.resend);
    await agree(m, w);
  }
  toString = () => (this.resend ? "notify(resend)" : "notify");
}

class Stop implements Cmd {
  check = () => true;
  async run(m: Model, w: World) {
    await w.refunds.stop(
      { provider: "wechatpay", account: "sandbox", outRefundNo: w.no },
      { scope: undefined, accounts: undefined },
    );
    if (m.state === "polling") m.state = "stopped";
    await agree(m, w);
  }
  toString = () => "stop";
}

/** The watch and its topics agree with the model. */
async function agree(m: Model, w: World): Promise<void> {
  const key = { provider: "wechatpay" as const, account: "sandbox", outRefundNo: w.no };
  const refund = await w.refunds.get(key, { scope: undefined, accounts: undefined });
  expect(refund.state, w.log.join(" ")).toBe(m.state);
  // The watch's id, computed here as the design says (sha256 of kind, provider, account, number).
  const watchId = publicWatchId("refund\nwechatpay", w.no);
  for (const topic of TOPICS) {
    const ids = [
      ...(await redis.zrange(w.key.ready(topic), 0, -1)),
      ...(await redis.zrange(w.key.delayed(topic), 0, -1)),
    ] as string[];
    const told: string[] = [];
    for (const id of ids.sort()) {
      const { body } = splitRecord(await redis.get(w.key.job(id)));
      const outcome = JSON.parse(body) as {
        event: string;
        late?: boolean;
        outRefundNo: string;
        outTradeNo?: string;
        amount?: { refund: number; total: number };
      };
      expect(id.startsWith(`pay:${watchId}:`)).toBe(true);
      expect(outcome.outRefundNo).toBe(w.no);
      expect(outcome.outTradeNo).toBe(w.order);
      // A success always carries the refund's amount, in fen.
      if (outcome.event === "refund.succeeded") {
        expect(outcome.amount).toMatchObject({ refund: REFUND, total: TOTAL });
      }
      told.push(`${outcome.event}${outcome.late ? " (late)" : ""}`);
    }
    // Sorted ids: pay:<w>:<n> before pay:<w>:late:<n>, as the model tells them.
    expect(told, `${topic} after ${w.log.join(" ")}`).toEqual(m.told);
  }
}

// ---- the runs ----------------------------------------------------------------------------

const advance = fc.integer({ min: 200, max: 2500 }).map((ms) => new Advance(ms));
const poll = fc.boolean().map((fault) => new Poll(fault));
const notify = fc.boolean().map((resend) => new Notify(resend));
const status = fc
  .constantFrom("SUCCESS" as const, "CLOSED" as const, "ABNORMAL" as const)
  .map((to) => new SetStatus(to));
// Weighted: time, polls and the provider's moves often; ABNORMAL (the path to a late success
// after an abnormal end) as often as the other two together; a stop (which ends it all) seldom.
const commands = fc.commands(
  [
    fc.oneof(
      { arbitrary: advance, weight: 6 },
      { arbitrary: poll, weight: 6 },
      { arbitrary: status, weight: 2 },
      { arbitrary: fc.constant(new SetStatus("ABNORMAL")), weight: 2 },
      { arbitrary: notify, weight: 5 },
      { arbitrary: fc.constant(new Stop()), weight: 1 },
    ),
  ],
  { maxCommands: 40, size: "large" },
);

/** A world for one run: a paid order with a refund of it, PROCESSING, watched from now. */
async function openWorld(): Promise<World> {
  const label = crypto.randomUUID().slice(0, 8);
  const prefix = `rmodel${label}`;
  const scripts = createScriptRunner(redis, prefix, 60_000);
  const logs: LogEntry[] = [];
  const t = Math.floor(Date.now() / 1000) * 1000;
  const world: World = {
    t,
    refunds: createRefunds({
      scripts,
      clock: () => world.t,
      alipay: new Map(),
      wechatpay: parseWechatPayAccounts({ sandbox: wechat.account }),
      minPollMs: 0,
      defaults: { ttrMs: 60_000, maxAttempts: 10 },
    }),
    scripts,
    key: keys(prefix),
    run: undefined as never,
    order: `o${label}`,
    no: `r${label}`,
    start: t,
    log: [],
  };
  world.run = createRun({
    clock: () => world.t,
    subrequests: 10_000,
    lifetimeMs: 3_600_000,
    log: (entry) => logs.push(entry),
  });
  wechat.createTrade(world.order, { total: TOTAL });
  wechat.pay(world.order);
  wechat.createRefund(world.order, world.no, { refund: REFUND });
  return world;
}

describe("a refund watch, against a model of its rules", () => {
  it("tells each outcome to each topic exactly once (a late success included), with its amount", async () => {
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        const world = await openWorld();
        current = world;
        await world.refunds.start(
          world.run,
          {
            provider: "wechatpay",
            account: "sandbox",
            outRefundNo: world.no,
            outTradeNo: world.order,
            schedule: [STEP_MS / 1000],
            deadline: world.start + DEADLINE_MS,
            notify: TOPICS,
          },
          { scope: undefined, accounts: undefined },
        );
        const model: Model = {
          status: "PROCESSING",
          state: "polling",
          due: world.start + STEP_MS,
          told: [],
        };
        await fc.asyncModelRun(
          () => ({ model, real: world }),
          [...cmds].map((cmd) => ({
            check: (m: Readonly<Model>) => cmd.check(m),
            run: async (m: Model, w: World) => {
              w.log.push(String(cmd));
              await cmd.run(m, w);
            },
            toString: () => String(cmd),
          })),
        );
        if (process.env.MODEL_TRACE) {
          console.log(`${world.log.join(" ")} => ${model.state} ${model.told.join(",")}`);
        }
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 80) },
    );
  }, 600_000);
});
