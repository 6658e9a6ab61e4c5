// The rules of a refund watch's polls, on a test clock: when each query comes and what its answer
// decides, at the schedule's steps, at the deadline and past it (docs/payments.md).
//
// Real parts: the scripts on the run's bridge (a key prefix per test), the Alipay and WeChat Pay
// sandboxes on the wire, Refunds as the service builds it with the test's clock, and its poller
// handed each claimed poll job as the dispatcher does.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import type { Refund } from "../../src/domain/refunds";
import { parseAlipayAccounts, parseWechatPayAccounts } from "../../src/payments/accounts";
import { createRefunds, type Refunds } from "../../src/payments/refunds";
import { splitRecord } from "../../src/redis/record";
import { createScriptRunner, REDIS_CLIENT_OPTIONS } from "../../src/redis/runner";
import { createRun, type Run } from "../../src/run/run";
import { uid } from "./harness";

const redis = new Redis({
  url: inject("bridgeUrl"),
  token: `${inject("bridgeToken")}:refund-rules-${uid()}`,
  ...REDIS_CLIENT_OPTIONS,
});
const EVERYONE = { scope: undefined, accounts: undefined };
const MINUTE = 60_000;

let alipay: AlipaySandbox;
let wechat: WechatPaySandbox;
beforeAll(async () => {
  [alipay, wechat] = await Promise.all([startAlipaySandbox(), startWechatPaySandbox()]);
}, 30_000);
afterAll(async () => {
  await Promise.all([alipay?.close(), wechat?.close()]);
});

type World = {
  t: number;
  run: Run;
  refunds(accounts?: { alipay?: unknown; wechatpay?: unknown }): Refunds;
  /**
   * Claims the refund polls due at t and runs them (with Refunds over `accounts`, the same
   * Redis: an account's configuration changed since the watch started); how many there were.
   */
  poll(accounts?: { alipay?: unknown; wechatpay?: unknown }): Promise<number>;
};

/** A prefix of its own, the test's clock, Refunds over the sandboxes' accounts. */
function world(): World {
  const scripts = createScriptRunner(redis, `refundrules${uid()}`, 60_000);
  const w = { t: Math.floor(Date.now() / 1000) * 1000 } as World;
  w.run = createRun({
    clock: () => w.t,
    subrequests: 10_000,
    lifetimeMs: 3_600_000,
    log: () => {},
  });
  const made = new Map<string, Refunds>();
  w.refunds = (accounts = {}) => {
    const key = JSON.stringify(accounts);
    let refunds = made.get(key);
    if (!refunds) {
      refunds = createRefunds({
        scripts,
        clock: () => w.t,
        alipay: parseAlipayAccounts(accounts.alipay ?? { sandbox: alipay.account }),
        wechatpay: parseWechatPayAccounts(accounts.wechatpay ?? { sandbox: wechat.account }),
        defaults: { ttrMs: 60_000, maxAttempts: 10 },
      });
      made.set(key, refunds);
    }
    return refunds;
  };
  w.poll = async (accounts) => {
    const claimed = await scripts.run("claim", w.t, [
      w.t,
      10,
      100,
      crypto.randomUUID(),
      "__refunds",
      0,
    ]);
    const jobs = claimed.flatMap((group) => group.records.map(splitRecord));
    for (const job of jobs) await w.refunds(accounts).poller.run(job, w.run);
    return jobs.length;
  };
  return w;
}

/** The outcome a refund read carries (its stored JSON text). */
const outcomeOf = (refund: Refund) => JSON.parse((refund.outcome as { text: string }).text);

const read = (w: World, provider: "alipay" | "wechatpay", outRefundNo: string): Promise<Refund> =>
  w.refunds().get({ provider, account: "sandbox", outRefundNo }, EVERYONE);

describe("a refund watch's polls", () => {
  it("a verified configuration error decides nothing: asked again at the schedule's step, then expired at the deadline with it", async () => {
    const w = world();
    const order = `o-${uid()}`;
    alipay.createTrade(order);
    alipay.pay(order);
    alipay.createRefund(order, "r1");
    // Another app id: the sandbox answers isv.invalid-app-id, signed (a configuration error).
    const wrong = { alipay: { sandbox: { ...alipay.account, appId: "2021000000009999" } } };
    const refunds = w.refunds(wrong);
    await refunds.start(
      w.run,
      {
        provider: "alipay",
        account: "sandbox",
        outRefundNo: "r1",
        outTradeNo: order,
        schedule: [60],
        deadline: w.t + 3 * MINUTE,
        notify: ["results"],
      },
      EVERYONE,
    );
    for (let n = 1; n <= 2; n++) {
      w.t += MINUTE;
      const jobs = await w.poll(wrong);
      expect(jobs, `poll ${n}`).toBe(1);
      const got = await read(w, "alipay", "r1");
      expect(got.state).toBe("polling");
      expect(got.lastAnswer?.status).toMatch(/isv\.invalid-app-id/);
      // The schedule's step (1 min), not the transient wait (5 s).
      expect(got.nextPollAt).toBe(w.t + MINUTE);
    }
    w.t += MINUTE;
    expect(await w.poll(wrong)).toBe(1);
    const expired = await read(w, "alipay", "r1");
    expect(expired.state).toBe("expired");
    expect(outcomeOf(expired)).toMatchObject({
      event: "refund.expired",
      status: expect.stringMatching(/isv\.invalid-app-id/),
    });
  });

  it("at the deadline a query not to be trusted is asked again soon, for up to 10 minutes, then the watch expires", async () => {
    const w = world();
    const order = `o-${uid()}`;
    wechat.createTrade(order);
    wechat.pay(order);
    const no = `rf-${uid()}`;
    wechat.createRefund(order, no);
    await w.refunds().start(
      w.run,
      {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: no,
        schedule: [600],
        deadline: w.t + MINUTE,
        notify: ["results"],
      },
      EVERYONE,
    );
    // The first query comes at the deadline (before the schedule's step), and fails.
    expect((await read(w, "wechatpay", no)).nextPollAt).toBe(w.t + MINUTE);
    w.t += MINUTE;
    wechat.inject("5xx");
    expect(await w.poll()).toBe(1);
    const retried = await read(w, "wechatpay", no);
    expect(retried).toMatchObject({ state: "polling", nextPollAt: w.t + 5000 });
    // 11 minutes past the deadline it fails again: the watch gives up, expired.
    w.t += 11 * MINUTE;
    wechat.inject("5xx");
    expect(await w.poll()).toBe(1);
    const expired = await read(w, "wechatpay", no);
    expect(outcomeOf(expired)).toMatchObject({
      event: "refund.expired",
      status: "HTTP 500 SYSTEM_ERROR",
    });
  });

  it("a refund that ended by the deadline's query ends as it did, not expired", async () => {
    const w = world();
    const order = `o-${uid()}`;
    wechat.createTrade(order, { total: 700 });
    wechat.pay(order);
    const no = `rf-${uid()}`;
    wechat.createRefund(order, no);
    await w.refunds().start(
      w.run,
      {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: no,
        deadline: w.t + MINUTE,
        notify: ["results"],
      },
      EVERYONE,
    );
    wechat.setRefundStatus(no, "SUCCESS");
    w.t += MINUTE;
    expect(await w.poll()).toBe(1);
    expect(outcomeOf(await read(w, "wechatpay", no))).toMatchObject({
      event: "refund.succeeded",
      amount: { refund: 700, total: 700, currency: "CNY" },
    });
  });

  it("an answer about another order than the watch was given decides nothing: asked again at the step", async () => {
    const w = world();
    const order = `o-${uid()}`;
    wechat.createTrade(order);
    wechat.pay(order);
    const no = `rf-${uid()}`;
    wechat.createRefund(order, no);
    wechat.setRefundStatus(no, "SUCCESS");
    await w.refunds().start(
      w.run,
      {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: no,
        outTradeNo: "o-not-this-one",
        schedule: [60],
        notify: ["results"],
      },
      EVERYONE,
    );
    w.t += MINUTE;
    expect(await w.poll()).toBe(1);
    const got = await read(w, "wechatpay", no);
    expect(got).toMatchObject({ state: "polling", nextPollAt: w.t + MINUTE });
    expect(got.lastAnswer?.status).toBe(
      `answer names another order (out_trade_no ${order}, the watch's o-not-this-one)`,
    );
  });

  it("an account gone from the configuration ends the watch expired at its next poll", async () => {
    const w = world();
    const no = `rf-${uid()}`;
    await w.refunds().start(
      w.run,
      {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: no,
        schedule: [60],
        notify: ["results"],
      },
      EVERYONE,
    );
    w.t += MINUTE;
    expect(await w.poll({ wechatpay: {} })).toBe(1);
    const got = await read(w, "wechatpay", no);
    expect(outcomeOf(got)).toMatchObject({
      event: "refund.expired",
      status: expect.stringMatching(/No wechatpay account "sandbox"/),
    });
  });
});
