// The closed loop (DESIGN §4, "Money and the closed loop"), through the service, the bridge's
// Redis and the sandboxes: an ended watch is kept at least 25 hours whatever the retention
// window, and a verified payment of a watch that ended expired, closed, failed or stopped is
// told once more, late (payment.paid, or payment.mismatch, with "late": true), exactly once per
// topic however many notifications and queries race to tell it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Harness,
  NOTIFY_ORIGIN,
  type Popped,
  publicWatchId,
  sleep,
  startHarness,
  uid,
} from "./harness";

let h: Harness;
const ALIPAY = `${NOTIFY_ORIGIN}/v1/notify/alipay/sandbox`;
const WECHAT = `${NOTIFY_ORIGIN}/v1/notify/wechatpay/sandbox`;
const HOUR = 3600_000;

beforeAll(async () => {
  // A retention window far shorter than the providers' notification windows.
  h = await startHarness("loop", { vars: { DQ_RETENTION_SECONDS: "60" } });
}, 30_000);

afterAll(async () => {
  await h?.close();
});

function watch(provider: string, no: string, notify: string[], extra = {}) {
  return h.call("POST", "/v1/payments", {
    provider,
    account: "sandbox",
    outTradeNo: no,
    schedule: [60],
    notify,
    ...extra,
  });
}

/** An order's watch that ends expired, its deadline passed unpaid (no close). */
async function expiredWatch(provider: "alipay" | "wechatpay", topic: string, extra = {}) {
  const no = `x-${uid()}`;
  if (provider === "alipay") h.alipay.createTrade(no, { totalAmount: "5.00" });
  else h.wechat.createTrade(no, { total: 500 });
  await watch(provider, no, [topic], { deadline: Date.now() + 300, ...extra });
  const expired = await h.watchState(provider, no, "expired");
  expect(expired.outcome.event).toBe("payment.expired");
  return no;
}

const ttl = (provider: string, no: string) =>
  h.redis.pttl(h.key.watch(publicWatchId(provider, no)));

const events = (popped: Popped[]) =>
  popped.map((o) => `${o.json.event}${o.json.late ? " (late)" : ""}`);

describe("an ended watch", () => {
  it("is kept at least 25 hours, whatever its state, with a 60 s retention window", async () => {
    const paid = `k-${uid()}`;
    h.wechat.createTrade(paid);
    h.wechat.pay(paid);
    await watch("wechatpay", paid, [`r-${uid()}`], { schedule: [0.1] });
    await h.watchState("wechatpay", paid, "paid");
    const stopped = `k-${uid()}`;
    await watch("wechatpay", stopped, [`r-${uid()}`], { schedule: [3600] });
    await h.call("DELETE", `/v1/payments/wechatpay/sandbox/${stopped}`);
    const expired = await expiredWatch("wechatpay", `r-${uid()}`);
    for (const no of [paid, stopped, expired]) {
      const left = await ttl("wechatpay", no);
      expect(left, no).toBeGreaterThan(25 * HOUR - 60_000);
      expect(left, no).toBeLessThanOrEqual(25 * HOUR);
    }
  });

  it("is kept for the retention window when that is longer", async () => {
    const long = await startHarness("loop-long", { vars: { DQ_RETENTION_SECONDS: "172800" } });
    try {
      const no = `k-${uid()}`;
      await long.call("POST", "/v1/payments", {
        provider: "wechatpay",
        account: "sandbox",
        outTradeNo: no,
        schedule: [3600],
        notify: ["r"],
      });
      await long.call("DELETE", `/v1/payments/wechatpay/sandbox/${no}`);
      const left = await long.redis.pttl(long.key.watch(publicWatchId("wechatpay", no)));
      expect(left).toBeGreaterThan(48 * HOUR - 60_000);
    } finally {
      await long.close();
    }
  });
});

describe("a verified payment after the watch ended", () => {
  it("expired (Alipay, notified): payment.paid late, once; the watch reads paid, its first outcome kept", async () => {
    const topic = `r-${uid()}`;
    const no = await expiredWatch("alipay", topic);
    h.alipay.pay(no);
    expect(await h.alipay.notify(no, ALIPAY)).toEqual({ status: 200, text: "success" });
    const late = await h.payment("alipay", no);
    expect(late).toMatchObject({
      state: "paid",
      outcome: {
        event: "payment.paid",
        tradeState: "TRADE_SUCCESS",
        amount: { total: 500, currency: "CNY" },
        source: "notify",
        late: true,
      },
      firstOutcome: { event: "payment.expired", tradeState: "WAIT_BUYER_PAY" },
    });
    // Another notification (TRADE_FINISHED, its own id) tells nothing more.
    h.alipay.pay(no, { finished: true });
    expect(await h.alipay.notify(no, ALIPAY)).toEqual({ status: 200, text: "success" });
    const told = await h.outcomes(topic);
    expect(events(told)).toEqual(["payment.expired", "payment.paid (late)"]);
    const id = publicWatchId("alipay", no);
    expect(told.map((o) => o.id)).toEqual([`pay:${id}:1`, `pay:${id}:late:1`]);
    expect(told[1]?.json).toEqual(late.outcome);
  });

  it("closed (WeChat Pay): payment.paid late", async () => {
    const topic = `r-${uid()}`;
    const no = `c-${uid()}`;
    h.wechat.createTrade(no, { total: 200 });
    h.wechat.close(no);
    await watch("wechatpay", no, [topic], { schedule: [0.1] });
    await h.watchState("wechatpay", no, "closed");
    // The sandbox's knob for what WeChat Pay should never do: paid after closed.
    h.wechat.setState(no, "SUCCESS");
    expect(await h.wechat.notify(no, WECHAT)).toMatchObject({ status: 204 });
    expect(await h.payment("wechatpay", no)).toMatchObject({
      state: "paid",
      outcome: { event: "payment.paid", late: true, amount: { total: 200 } },
      firstOutcome: { event: "payment.closed", tradeState: "CLOSED" },
    });
    expect(events(await h.outcomes(topic))).toEqual(["payment.closed", "payment.paid (late)"]);
  });

  it("failed (WeChat Pay PAYERROR): payment.paid late", async () => {
    const topic = `r-${uid()}`;
    const no = `f-${uid()}`;
    h.wechat.createTrade(no);
    h.wechat.setState(no, "PAYERROR");
    await watch("wechatpay", no, [topic], { schedule: [0.1] });
    await h.watchState("wechatpay", no, "failed");
    h.wechat.setState(no, "SUCCESS");
    expect(await h.wechat.notify(no, WECHAT)).toMatchObject({ status: 204 });
    expect(events(await h.outcomes(topic))).toEqual(["payment.failed", "payment.paid (late)"]);
  });

  it("expired, with another amount than expected: payment.mismatch late", async () => {
    const topic = `r-${uid()}`;
    const no = await expiredWatch("alipay", topic, { amount: { total: 600 } });
    h.alipay.pay(no);
    expect(await h.alipay.notify(no, ALIPAY)).toEqual({ status: 200, text: "success" });
    expect(await h.payment("alipay", no)).toMatchObject({
      state: "mismatch",
      outcome: {
        event: "payment.mismatch",
        amount: { total: 500 },
        expected: { total: 600, currency: "CNY" },
        late: true,
      },
    });
    expect(events(await h.outcomes(topic))).toEqual(["payment.expired", "payment.mismatch (late)"]);
  });

  it("stopped while the deadline's close-then-query is in flight: the poll tells it, late", async () => {
    const topic = `r-${uid()}`;
    const no = `q-${uid()}`;
    h.alipay.createTrade(no, { totalAmount: "4.00" });
    await watch("alipay", no, [topic], { deadline: Date.now() + 300, closeOnDeadline: true });
    h.alipay.inject("slow");
    await h.until("the close at the deadline", async () =>
      h.alipay
        .requests()
        .some(
          (r) => r.method_ === "alipay.trade.close" && JSON.stringify(r.bizContent).includes(no),
        )
        ? true
        : undefined,
    );
    await h.call("DELETE", `/v1/payments/alipay/sandbox/${no}`);
    h.alipay.pay(no);
    const late = await h.watchState("alipay", no, "paid");
    expect(late.outcome).toMatchObject({ event: "payment.paid", source: "poll", late: true });
    expect(events(await h.outcomes(topic))).toEqual(["payment.paid (late)"]);
  });

  it("stopped, with the deadline's close-then-query in flight and notifications racing it: once per topic", async () => {
    const topics = [`r-${uid()}`, `a-${uid()}`];
    const no = `s-${uid()}`;
    h.wechat.createTrade(no, { total: 300 });
    await watch("wechatpay", no, topics, { deadline: Date.now() + 300, closeOnDeadline: true });
    // The deadline's close is held a second at the sandbox...
    h.wechat.inject("slow");
    const asked = (what: RegExp) =>
      h.wechat.requests().filter((r) => r.path.includes(no) && what.test(`${r.method} ${r.path}`));
    await h.until("the close at the deadline", async () =>
      asked(/^POST .*\/close$/).length > 0 ? true : undefined,
    );
    // ...meanwhile the watch is stopped and the order paid: the close is refused (ORDERPAID),
    // the query after it says SUCCESS, and notifications keep coming while it is asked.
    expect((await h.call("DELETE", `/v1/payments/wechatpay/sandbox/${no}`)).status).toBe(200);
    h.wechat.pay(no);
    const sent: Promise<{ status: number }>[] = [];
    while (asked(/^GET /).length === 0) {
      sent.push(h.wechat.notify(no, WECHAT));
      await sleep(40);
    }
    for (let n = 0; n < 5; n++) sent.push(h.wechat.notify(no, WECHAT));
    expect((await Promise.all(sent)).map((r) => r.status)).toEqual(sent.map(() => 204));
    // The poll's own conclusion comes right after its query: give it the time to land.
    await sleep(500);
    const ended = await h.payment("wechatpay", no);
    expect(ended).toMatchObject({
      state: "paid",
      outcome: { event: "payment.paid", late: true, amount: { total: 300, currency: "CNY" } },
    });
    expect(ended.firstOutcome).toBeUndefined();
    for (const topic of topics) {
      expect(events(await h.outcomes(topic)), topic).toEqual(["payment.paid (late)"]);
    }
  });

  it("never after paid or mismatch: a later payment notification tells nothing", async () => {
    const topic = `r-${uid()}`;
    const no = `p-${uid()}`;
    h.alipay.createTrade(no, { totalAmount: "1.00" });
    await watch("alipay", no, [topic], { schedule: [3600], amount: { total: 200 } });
    h.alipay.pay(no);
    expect(await h.alipay.notify(no, ALIPAY)).toEqual({ status: 200, text: "success" });
    h.alipay.pay(no, { finished: true });
    expect(await h.alipay.notify(no, ALIPAY)).toEqual({ status: 200, text: "success" });
    expect(events(await h.outcomes(topic))).toEqual(["payment.mismatch"]);
  });
});
