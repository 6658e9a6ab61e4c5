// Model-based test of a payment watch's transitions: random runs of starts, polls (some answered
// with a 5xx), payments and closes at the provider, notifications (some resent with the same
// id), stops and the passing of the deadline, compared step by step with a model of the rules
// (DESIGN §4; docs/payments.md). After every step: the watch reads the model's state,
// and each notify topic holds exactly the outcomes the model says, each once (a late payment
// included), and never payment.paid for an amount other than the expected one.
//
// Real parts: the transitions' scripts on the run's bridge (a key prefix per run), the WeChat Pay
// sandbox on the wire, Payments as the service builds it, its poller handed each claimed poll
// job as the dispatcher does, and the sandbox's signed notifications checked by
// verifyWechatPayNotification. The watch's clock is the test's (polls come when it says).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "@upstash/redis";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import type { LogEntry } from "../../src/log";
import { parseWechatPayAccounts } from "../../src/payments/accounts";
import { createPayments, type Payments } from "../../src/payments/watches";
import { verifyWechatPayNotification } from "../../src/payments/wechatpay";
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
const TOTAL = 500;

type Provider = "NOTPAY" | "SUCCESS" | "CLOSED" | "PAYERROR";
type Ended = "paid" | "closed" | "failed" | "expired" | "stopped" | "mismatch";

type Model = {
  /** The trade at the provider. */
  trade: Provider;
  state: "polling" | Ended;
  /** When the next poll is due (while polling). */
  due: number;
  /** Each topic's outcomes, as "event" or "event (late)". */
  told: string[];
  /** The last notification id sent, for resends. */
  lastEventId?: string;
};

type World = {
  t: number;
  payments: Payments;
  scripts: ScriptRunner;
  redis: Redis;
  key: ReturnType<typeof keys>;
  run: Run;
  no: string;
  expected: number | undefined;
  closeOnDeadline: boolean;
  start: number;
  log: string[];
};

let wechat: WechatPaySandbox;
let receiver: { url: string; close(): Promise<void> };
/** The run the receiver hands notifications to (the current fast-check run's). */
let current: World | undefined;
const redis = new Redis({
  url: inject("bridgeUrl"),
  token: `${inject("bridgeToken")}:model-${crypto.randomUUID().slice(0, 8)}`,
  ...REDIS_CLIENT_OPTIONS,
});

beforeAll(async () => {
  wechat = await startWechatPaySandbox();
  const account = parseWechatPayAccounts({ sandbox: wechat.account }).get("sandbox");
  if (!account) throw new Error("no account");
  // delayq's notify route, less the HTTP framework: verify, then the watch's transition.
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = new Headers(req.headers as Record<string, string>);
      const body = Buffer.concat(chunks).toString("utf8");
      const result = await verifyWechatPayNotification(account, headers, body, Date.now());
      const world = current;
      if (!result.ok || !world) {
        res.writeHead(401).end();
        return;
      }
      const order = {
        provider: "wechatpay" as const,
        account: "sandbox",
        outTradeNo: result.outTradeNo,
      };
      await world.payments.notified(world.run, order, result.answer, result.notifyId);
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

const LATE_AFTER = new Set<string>(["expired", "closed", "failed", "stopped"]);

/** The outcome a paid trade is for this watch: paid, or mismatch for another amount. */
function paidAs(w: World): "paid" | "mismatch" {
  return w.expected === undefined || w.expected === TOTAL ? "paid" : "mismatch";
}

function end(m: Model, state: Ended): void {
  m.state = state;
  if (state !== "stopped") m.told.push(`payment.${state}`);
}

/** A poll, as the rules say: `fault` the first request of it answered 5xx. */
function polled(m: Model, w: World, fault: boolean): void {
  const ended = pollEnds(m, w, fault);
  if (ended) end(m, ended);
}

/** How a poll ends the watch, or undefined when it polls again (its next due time set). */
function pollEnds(m: Model, w: World, fault: boolean): Ended | undefined {
  if (w.t < w.start + DEADLINE_MS) {
    // A query; a 5xx is retried one step later at most (5 s capped by the 1 s step).
    if (!fault && m.trade === "SUCCESS") return paidAs(w);
    if (!fault && m.trade === "CLOSED") return "closed";
    if (!fault && m.trade === "PAYERROR") return "failed";
    m.due = Math.min(w.t + STEP_MS, w.start + DEADLINE_MS);
    return undefined;
  }
  // The deadline: the close (when asked), then a query whatever the close answered.
  const closeFailed = w.closeOnDeadline && fault;
  // WeChat Pay closes an unpaid order (PAYERROR included); a paid one it refuses.
  if (w.closeOnDeadline && !fault && (m.trade === "NOTPAY" || m.trade === "PAYERROR")) {
    m.trade = "CLOSED";
  }
  const queryFault = fault && !w.closeOnDeadline;
  // Transient past the deadline (the query, or the close of an unpaid order): the transient
  // wait, not at once.
  if (queryFault || (closeFailed && m.trade === "NOTPAY")) {
    m.due = w.t + STEP_MS;
    return undefined;
  }
  if (m.trade === "SUCCESS") return paidAs(w);
  if (m.trade === "PAYERROR") return "failed";
  return "expired";
}

function notified(m: Model, w: World, resend: boolean): void {
  if (resend) return; // taken before: acknowledged, nothing else
  const as = paidAs(w);
  if (m.state === "polling") end(m, as);
  else if (LATE_AFTER.has(m.state)) {
    m.state = as;
    m.told.push(`payment.${as} (late)`);
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
      "__payments",
      0,
    ]);
    const records = claimed.flatMap((group) => group.records.map(splitRecord));
    expect(records.length, "a poll is claimed exactly when the model says it is due").toBe(
      due ? 1 : 0,
    );
    for (const job of records) await w.payments.poller.run(job, w.run);
    if (due) polled(m, w, this.fault);
    await agree(m, w);
  }
  toString = () => `poll${this.fault ? "(5xx)" : ""}`;
}

class Pay implements Cmd {
  check = (m: Readonly<Model>) => m.trade === "NOTPAY";
  async run(m: Model, w: World) {
    wechat.pay(w.no);
    m.trade = "SUCCESS";
  }
  toString = () => "pay";
}

class CloseAtProvider implements Cmd {
  check = (m: Readonly<Model>) => m.trade === "NOTPAY";
  async run(m: Model, w: World) {
    wechat.close(w.no);
    m.trade = "CLOSED";
  }
  toString = () => "closeAtProvider";
}

class FailAtProvider implements Cmd {
  check = (m: Readonly<Model>) => m.trade === "NOTPAY";
  async run(m: Model, w: World) {
    wechat.setState(w.no, "PAYERROR");
    m.trade = "PAYERROR";
  }
  toString = () => "failAtProvider";
}

/** What WeChat Pay should never do, and delayq must take all the same: paid after closed or failed. */
class PayAnyway implements Cmd {
  check = (m: Readonly<Model>) => m.trade === "CLOSED" || m.trade === "PAYERROR";
  async run(m: Model, w: World) {
    wechat.setState(w.no, "SUCCESS");
    m.trade = "SUCCESS";
  }
  toString = () => "payAnyway";
}

class Notify implements Cmd {
  constructor(readonly resend: boolean) {}
  // WeChat Pay notifies paid orders.
  check = (m: Readonly<Model>) => m.trade === "SUCCESS" && (!this.resend || !!m.lastEventId);
  async run(m: Model, w: World) {
    const eventId = this.resend && m.lastEventId ? m.lastEventId : crypto.randomUUID();
    m.lastEventId = eventId;
    expect((await wechat.notify(w.no, receiver.url, { eventId })).status).toBe(204);
    notified(m, w, this.resend);
    await agree(m, w);
  }
  toString = () => (this.resend ? "notify(resend)" : "notify");
}

class Stop implements Cmd {
  check = () => true;
  async run(m: Model, w: World) {
    await w.payments.stop(
      { provider: "wechatpay", account: "sandbox", outTradeNo: w.no },
      { scope: undefined, accounts: undefined },
    );
    if (m.state === "polling") m.state = "stopped";
    await agree(m, w);
  }
  toString = () => "stop";
}

/** The watch and its topics agree with the model. */
async function agree(m: Model, w: World): Promise<void> {
  const order = { provider: "wechatpay" as const, account: "sandbox", outTradeNo: w.no };
  const payment = await w.payments.get(order, { scope: undefined, accounts: undefined });
  expect(payment.state, w.log.join(" ")).toBe(m.state);
  const watchId = publicWatchId("wechatpay", w.no);
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
        amount?: { total: number };
      };
      expect(id.startsWith(`pay:${watchId}:`)).toBe(true);
      // Never paid for an amount other than the expected one.
      if (outcome.event === "payment.paid" && w.expected !== undefined) {
        expect(outcome.amount?.total).toBe(w.expected);
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
// Picked evenly: time and polls more often than the rest, a stop (which ends it all) seldom.
const commands = fc.commands(
  [
    advance,
    advance,
    advance,
    poll,
    poll,
    poll,
    fc.constant(new Pay()),
    fc.constant(new CloseAtProvider()),
    fc.constant(new FailAtProvider()),
    fc.constant(new PayAnyway()),
    notify,
    notify,
    fc.constant(new Stop()),
  ],
  { maxCommands: 40, size: "large" },
);

describe("a payment watch, against a model of its rules", () => {
  it("tells each outcome to each topic exactly once (late ones included), never paid for another amount", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(undefined, TOTAL, TOTAL + 1),
        fc.boolean(),
        commands,
        async (expected, closeOnDeadline, cmds) => {
          const label = crypto.randomUUID().slice(0, 8);
          const prefix = `model${label}`;
          const scripts = createScriptRunner(redis, prefix, 60_000);
          const logs: LogEntry[] = [];
          const world: World = {
            t: Math.floor(Date.now() / 1000) * 1000,
            payments: undefined as never,
            scripts,
            redis,
            key: keys(prefix),
            run: undefined as never,
            no: `m${label}`,
            expected,
            closeOnDeadline,
            start: 0,
            log: [],
          };
          world.start = world.t;
          world.run = createRun({
            clock: () => world.t,
            subrequests: 10_000,
            lifetimeMs: 3_600_000,
            log: (entry) => logs.push(entry),
          });
          world.payments = createPayments({
            scripts,
            clock: () => world.t,
            alipay: new Map(),
            wechatpay: parseWechatPayAccounts({ sandbox: wechat.account }),
            minPollMs: 0,
            defaults: { ttrMs: 60_000, maxAttempts: 10 },
          });
          current = world;
          wechat.createTrade(world.no, { total: TOTAL });
          await world.payments.start(
            world.run,
            {
              provider: "wechatpay",
              account: "sandbox",
              outTradeNo: world.no,
              schedule: [STEP_MS / 1000],
              deadline: world.start + DEADLINE_MS,
              closeOnDeadline,
              notify: TOPICS,
              ...(expected === undefined ? {} : { amount: { total: expected } }),
            },
            { scope: undefined, accounts: undefined },
          );
          const model: Model = {
            trade: "NOTPAY",
            state: "polling",
            due: world.start + STEP_MS,
            told: [],
          };
          world.log.push(`expected=${expected} close=${closeOnDeadline}`);
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
        },
      ),
      { numRuns: Number(process.env.MODEL_RUNS ?? 40) },
    );
  }, 600_000);
});
