// One subrequest budget per invocation, for payment polls: the service as buildService wires it
// (real Redis through the bridge, the WeChat Pay sandbox on the wire), every fetch and every Redis
// call counted by the invocation (a start request, a tick) that made it, with all it deferred.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  type FetchCounter,
  installFetchCounter,
  type Tally,
  tallyTotal,
} from "../../bench/lib/subrequests";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { PAYMENTS_TOPIC } from "../../src/redis/lua/scripts/payments";
import { splitRecord } from "../../src/redis/record";
import { buildService, type Service } from "../../src/service";
import { bridgeStats } from "../support/redis";
import { countingRedis } from "../support/subrequests";
import { postWatch } from "./support";

const BUDGET = 40;
const TOKEN = "budget-admin";
const WATCHES = 12;

let wechat: WechatPaySandbox;
let service: Service;
let fetches: FetchCounter;
let redisToken: string;
const logs: Record<string, unknown>[] = [];
/** The due time of each order's poll job as its claim answered it. */
const dueByOrder = new Map<string, number>();
/** Provider query time − the poll's due time, ms, for every poll. */
const lateness: number[] = [];

beforeAll(async () => {
  wechat = await startWechatPaySandbox();
  const sandboxOrigin = new URL(wechat.url).origin;
  const bridgeOrigin = new URL(inject("bridgeUrl")).origin;
  fetches = installFetchCounter(
    (url) => {
      if (url.origin === bridgeOrigin) return url.pathname.startsWith("/__") ? undefined : "redis";
      return url.origin === sandboxOrigin ? "provider" : undefined;
    },
    (destination, url) => {
      const order = /\/out-trade-no\/([^/?]+)$/.exec(url.pathname)?.[1];
      if (destination !== "provider" || !order) return;
      const due = dueByOrder.get(order);
      lateness.push(due === undefined ? Number.NaN : Date.now() - due);
    },
  );
  const label = crypto.randomUUID().slice(0, 8);
  redisToken = `${inject("bridgeToken")}:${label}`;
  service = buildService(
    {
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: redisToken,
      DQ_TOKENS: TOKEN,
      DQ_PREFIX: `bud${label}`,
      DQ_SUBREQUESTS: String(BUDGET),
      DQ_MIN_POLL_MS: "0", // its watches poll every 250 ms
      DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ sandbox: wechat.account }),
    },
    (settings) =>
      countingRedis(
        // No auto-pipelining: each call is its own request, made in the invocation that called.
        new Redis({
          url: settings.url,
          token: settings.token,
          ...settings.options,
          enableAutoPipelining: false,
        }),
        fetches,
        (groups) => {
          for (const group of groups) {
            if (group.topic !== PAYMENTS_TOPIC) continue;
            for (const raw of group.records) {
              const { meta, body } = splitRecord(raw);
              dueByOrder.set((JSON.parse(body) as { outTradeNo: string }).outTradeNo, meta.due);
            }
          }
        },
      ),
    { log: (entry) => logs.push(entry) },
  );
}, 30_000);

afterAll(async () => {
  fetches?.uninstall();
  await wechat?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("payment polls and the subrequest budget", () => {
  it("keeps every invocation within DQ_SUBREQUESTS while polls chain; the rest waits for the next tick, none lost, none early", async () => {
    const invocations: Tally[] = [];
    const deferred: Promise<unknown>[] = [];
    const executionCtx = {
      waitUntil: (work: Promise<unknown>) => deferred.push(work),
      passThroughOnException: () => {},
      props: {},
    };
    const redisBefore = (await bridgeStats(inject("bridgeUrl"), redisToken)).requests.total;
    const uid = crypto.randomUUID().slice(0, 6);
    const orders = Array.from({ length: WATCHES }, (_, n) => `bud-${uid}-${n}`);
    const deadline = Date.now() + 3000;
    // Each start is a request: its background claim of the polls due soon is its invocation's.
    for (const order of orders) {
      wechat.createTrade(order); // NOTPAY throughout: every poll leads to the next
      const tally = fetches.tally(`start ${order}`);
      invocations.push(tally);
      const res = await fetches.run(tally, () =>
        postWatch(
          service.app,
          TOKEN,
          {
            provider: "wechatpay",
            account: "sandbox",
            outTradeNo: order,
            schedule: [0.25],
            deadline,
            notify: [`results-${uid}`],
          },
          executionCtx,
        ),
      );
      expect(res.status).toBe(201);
    }
    // The cron, as functions/node.ts runs it: each tick one invocation with its own budget.
    const ended = async () => {
      let done = 0;
      for (const order of orders) {
        const res = await service.app.request(`/v1/payments/wechatpay/sandbox/${order}`, {
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        const { payment } = (await res.json()) as { payment: { state: string } };
        if (payment.state !== "polling") done += 1;
      }
      return done === orders.length;
    };
    const giveUp = Date.now() + 40_000;
    for (let n = 1; !(await ended()); n++) {
      expect(Date.now(), "every watch ends").toBeLessThan(giveUp);
      const tally = fetches.tally(`tick ${n}`);
      invocations.push(tally);
      await fetches.run(tally, () =>
        service.scheduler.tick(service.runs.tick({ waitUntil: (work) => deferred.push(work) })),
      );
      await sleep(700);
    }
    while (deferred.length > 0) await Promise.all(deferred.splice(0));

    const made = (tally: Tally) => tallyTotal(tally, ["redis", "provider"]);
    const calls = (tally: Tally) => (tally.counts.redisCalls ?? 0) + (tally.counts.provider ?? 0);
    const ticks = invocations.filter((tally) => tally.label.startsWith("tick"));
    for (const tally of invocations) {
      expect(made(tally), `${tally.label}: ${JSON.stringify(tally.counts)}`).toBeLessThanOrEqual(
        BUDGET,
      );
      expect(calls(tally), `${tally.label}: ${JSON.stringify(tally.counts)}`).toBeLessThanOrEqual(
        BUDGET,
      );
    }
    // A tick's polls chained (pollSoon) until the budget stopped them.
    expect(Math.max(...ticks.map(made))).toBeGreaterThan(BUDGET - 8);
    // The bridge's own count of Redis requests agrees with the invocations' (GETs of the watches
    // made outside any invocation aside).
    const redisMade = invocations.reduce((sum, tally) => sum + (tally.counts.redis ?? 0), 0);
    const bridgeSaw =
      (await bridgeStats(inject("bridgeUrl"), redisToken)).requests.total - redisBefore;
    expect(bridgeSaw - (fetches.outside.redis ?? 0)).toBe(redisMade);
    // The polls the starts had no budget for were taken by the ticks that followed.
    const tickPolls = ticks.reduce((sum, tally) => sum + (tally.counts.provider ?? 0), 0);
    expect(tickPolls).toBeGreaterThan(0);
    // None early: every provider query came at or after its poll's due time.
    expect(lateness.length).toBeGreaterThan(WATCHES);
    expect(lateness.filter((ms) => !(ms >= 0))).toEqual([]);
    // None lost: every watch ended by its deadline's poll (expired), each polled more than once.
    for (const order of orders) {
      const res = await service.app.request(`/v1/payments/wechatpay/sandbox/${order}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      const { payment } = (await res.json()) as {
        payment: { state: string; polls: number; lastAnswer: { at: number } };
      };
      expect(payment.state).toBe("expired");
      expect(payment.polls).toBeGreaterThan(1);
      expect(payment.lastAnswer.at).toBeGreaterThanOrEqual(deadline);
    }
    expect(logs.filter((entry) => entry.level === "error")).toEqual([]);
  }, 60_000);
});
