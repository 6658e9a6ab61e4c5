// Schedule presets from the providers' own advice (docs/payments.md): each preset's
// waits, as a watch polls on it, and DQ_MIN_POLL_MS refusing a preset whose step is under it.
//
// Real parts: the scripts on the run's bridge (a key prefix per test), the WeChat Pay sandbox on
// the wire (it answers NOTPAY: each poll is pending, the next one a step further), Payments as
// the service builds it with the test's clock, its poller handed each claimed poll job as the
// dispatcher does; and the service through its API for DQ_MIN_POLL_MS.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { REDIS_CLIENT_OPTIONS } from "../../src/redis/runner";
import { claimPolls, clockedPayments, type Harness, startHarness, uid } from "./harness";

const redis = new Redis({
  url: inject("bridgeUrl"),
  token: `${inject("bridgeToken")}:presets-${uid()}`,
  ...REDIS_CLIENT_OPTIONS,
});
const EVERYONE = { scope: undefined, accounts: undefined };

let wechat: WechatPaySandbox;
beforeAll(async () => {
  wechat = await startWechatPaySandbox();
}, 30_000);
afterAll(async () => {
  await wechat?.close();
});

/**
 * The waits (s) between a watch's start and its first `count` polls, and between each poll and
 * the next, as the watch's scripts schedule them: each poll is claimed at its due time (never
 * before: a claim 1 ms earlier finds nothing) and answered NOTPAY.
 */
async function waits(schedule: string, count: number): Promise<number[]> {
  let t = Math.floor(Date.now() / 1000) * 1000;
  const { scripts, run, payments } = clockedPayments(redis, wechat, () => t);
  const order = { provider: "wechatpay" as const, account: "sandbox", outTradeNo: `p${uid()}` };
  wechat.createTrade(order.outTradeNo);
  const started = await payments.start(
    run,
    { ...order, schedule, deadline: t + 30 * 86_400_000, notify: ["results"] },
    EVERYONE,
  );
  expect(started.created).toBe(true);
  const out: number[] = [];
  let from = t;
  for (let n = 0; n < count; n++) {
    const due = (await payments.get(order, EVERYONE)).nextPollAt as number;
    out.push((due - from) / 1000);
    expect(await claimPolls(scripts, due - 1), `poll ${n + 1} not before its time`).toEqual([]);
    t = due;
    const records = await claimPolls(scripts, due);
    expect(records).toHaveLength(1);
    for (const job of records) await payments.poller.run(job, run);
    from = due;
  }
  const polled = await payments.get(order, EVERYONE);
  expect(polled).toMatchObject({ state: "polling", polls: count });
  expect(polled.lastAnswer?.tradeState).toBe("NOTPAY");
  return out;
}

const five = Array.from({ length: 12 }, () => 5);
const four = Array.from({ length: 15 }, () => 4);

describe("schedule presets", () => {
  it("wechatpay-native: every 5 s through the first minute, then WeChat Pay's back-end steps", async () => {
    expect(await waits("wechatpay-native", 19)).toEqual([
      ...five,
      30,
      60,
      180,
      300,
      600,
      1800,
      1800,
    ]);
  }, 60_000);

  it("alipay-f2f: every 4 s (3-6 s) for a minute, then backing off", async () => {
    expect(await waits("alipay-f2f", 22)).toEqual([...four, 30, 60, 180, 300, 600, 1800, 1800]);
  }, 60_000);

  it("refund: 1 min, then 5, 10, 20 and 30 min, the last repeating", async () => {
    expect(await waits("refund", 7)).toEqual([60, 300, 600, 1200, 1800, 1800, 1800]);
  });

  it("keeps the names that were there: wechatpay and alipay", async () => {
    expect(await waits("wechatpay", 8)).toEqual([5, 30, 60, 180, 300, 600, 1800, 1800]);
    expect(await waits("alipay", 3)).toEqual([240, 600, 600]);
  });
});

describe("DQ_MIN_POLL_MS", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness("presets-min", { vars: { DQ_MIN_POLL_MS: "5000" } });
  }, 30_000);
  afterAll(async () => {
    await h?.close();
  });

  const watch = (schedule: unknown) =>
    h.call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: `m-${uid()}`,
      schedule,
      notify: [`r-${uid()}`],
    });

  it("refuses a preset whose step is under it, with 400 naming the setting and the preset", async () => {
    const refused = await watch("alipay-f2f");
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe("invalid_request");
    expect(refused.json.error.message).toContain("DQ_MIN_POLL_MS");
    expect(refused.json.error.message).toContain('schedule: "alipay-f2f" waits 4 s');
    expect(refused.json.error.message).toContain("at least 5 s");
  });

  it("takes the presets whose every step is at least it", async () => {
    const first = { "wechatpay-native": 5, wechatpay: 5, alipay: 240, refund: 60 };
    for (const [preset, seconds] of Object.entries(first)) {
      const taken = await watch(preset);
      expect(taken.status, preset).toBe(201);
      const { nextPollAt, createdAt } = taken.json.payment;
      expect(nextPollAt - createdAt, preset).toBe(seconds * 1000);
    }
  });

  it("holds for refund watches too", async () => {
    const refund = (schedule: unknown) =>
      h.call("POST", "/v1/refunds", {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: `m-${uid()}`,
        schedule,
        notify: [`r-${uid()}`],
      });
    const refused = await refund("alipay-f2f");
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toContain('"alipay-f2f" waits 4 s');
    expect(refused.json.error.message).toContain("DQ_MIN_POLL_MS");
    const taken = await refund("wechatpay-native");
    expect(taken.status).toBe(201);
    expect(taken.json.refund.nextPollAt - taken.json.refund.createdAt).toBe(5000);
  });

  it("names an unknown preset among the ones there are", async () => {
    const unknown = await watch("wechatpay-qr");
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toMatch(/schedule: .*wechatpay-native.*alipay-f2f.*refund/);
  });
});
