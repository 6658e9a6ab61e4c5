// What a poll leads to: a claim that names the watch's next poll's due time, so that the run
// decides (src/dispatch/loop.ts): claim it itself when it can wait for it, ask for a fresh run
// when the next tick may come too late, or leave it to the tick (test/dispatch/hand-off.test.ts).
//
// Real parts: the scripts on the run's bridge (a key prefix per test), the WeChat Pay sandbox on
// the wire (NOTPAY, or a 5xx when told), Payments as the service builds it with the test's clock,
// its poller handed each claimed poll job as the dispatcher does.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { DIRECT_WINDOW_MS } from "../../src/domain/push";
import { PAYMENTS_TOPIC } from "../../src/redis/lua/scripts/payments";
import { REDIS_CLIENT_OPTIONS } from "../../src/redis/runner";
import { claimPolls, clockedPayments, uid } from "./harness";

const redis = new Redis({
  url: inject("bridgeUrl"),
  token: `${inject("bridgeToken")}:follow-${uid()}`,
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

describe("a poll's follow-up claim", () => {
  it("names the next poll's due time: a step, a retry, the deadline", async () => {
    let t = Math.floor(Date.now() / 1000) * 1000;
    const { scripts, run, payments } = clockedPayments(redis, wechat, () => t);
    const order = { provider: "wechatpay" as const, account: "sandbox", outTradeNo: `f${uid()}` };
    wechat.createTrade(order.outTradeNo);
    // Polls at +5 s, +15 s (10 s on), +75 s (60 s on), then the deadline at +90 s (15 s on,
    // though the step is 60 s).
    const started = await payments.start(
      run,
      { ...order, schedule: [5, 10, 60], deadline: t + 90_000, notify: ["results"] },
      EVERYONE,
    );
    expect(started.created).toBe(true);
    /** Polls the watch's due poll at its due time; answers what followed and the next due time. */
    const poll = async () => {
      t = (await payments.get(order, EVERYONE)).nextPollAt as number;
      const jobs = await claimPolls(scripts, t);
      expect(jobs).toHaveLength(1);
      const handled = await payments.poller.run(jobs[0] as (typeof jobs)[number], run);
      const next = (await payments.get(order, EVERYONE)).nextPollAt as number;
      return { work: handled.work, wait: next - t };
    };
    const claimFor = (due: number) => [
      { kind: "claim", topic: PAYMENTS_TOPIC, horizon: t + DIRECT_WINDOW_MS, due },
    ];

    let polled = await poll(); // +5 s: the next 10 s on
    expect(polled.wait).toBe(10_000);
    expect(polled.work).toEqual(claimFor(t + 10_000));

    polled = await poll(); // +15 s: the next 60 s on
    expect(polled.wait).toBe(60_000);
    expect(polled.work).toEqual(claimFor(t + 60_000));

    // A transient answer (a 5xx) is retried 5 s on: within the window again.
    t += 60_000;
    wechat.inject("5xx");
    const jobs = await claimPolls(scripts, t);
    expect(jobs).toHaveLength(1);
    const retried = await payments.poller.run(jobs[0] as (typeof jobs)[number], run);
    expect((await payments.get(order, EVERYONE)).nextPollAt).toBe(t + 5000);
    expect(retried.work).toEqual(claimFor(t + 5000));

    polled = await poll(); // +80 s: the deadline (+90 s) comes before the next step
    expect(polled.wait).toBe(10_000);
    expect(polled.work).toEqual(claimFor(t + 10_000));
  }, 30_000);

  it("a pending answer asked before the deadline and applied past it brings the deadline's question at once, not a step later", async () => {
    let t = Math.floor(Date.now() / 1000) * 1000;
    const deadline = t + 60_000;
    // The query is asked at t; its answer comes back 5 s past the deadline (a slow network).
    const { scripts, run, payments } = clockedPayments(redis, wechat, () => t, {
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        if (t < deadline) t = deadline + 5000;
        return res;
      },
    });
    const order = { provider: "wechatpay" as const, account: "sandbox", outTradeNo: `d${uid()}` };
    wechat.createTrade(order.outTradeNo);
    await payments.start(
      run,
      { ...order, schedule: [55, 300], deadline, notify: ["results"] },
      EVERYONE,
    );
    t = (await payments.get(order, EVERYONE)).nextPollAt as number; // 5 s before the deadline
    const jobs = await claimPolls(scripts, t);
    expect(jobs).toHaveLength(1);
    await payments.poller.run(jobs[0] as (typeof jobs)[number], run);
    const after = await payments.get(order, EVERYONE);
    expect(after).toMatchObject({ state: "polling", polls: 1 });
    // Due now (5 s past the deadline), not the step's 300 s on; that poll ends the watch.
    expect(after.nextPollAt).toBe(deadline + 5000);
    const next = await claimPolls(scripts, t);
    expect(next).toHaveLength(1);
    await payments.poller.run(next[0] as (typeof next)[number], run);
    expect(await payments.get(order, EVERYONE)).toMatchObject({ state: "expired", polls: 2 });
  }, 30_000);
});
