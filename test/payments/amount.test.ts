// The amount a watch expects (DESIGN §4, "Money and the closed loop"): through the service, the
// bridge's Redis and the sandboxes, a verified paid answer with another total or currency ends
// the watch `mismatch` and fans out payment.mismatch (the provider's amount and the expected
// one), never payment.paid; one that matches is paid as ever, its amount always there.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, NOTIFY_ORIGIN, startHarness, uid } from "./harness";

let h: Harness;

beforeAll(async () => {
  h = await startHarness("amount");
}, 30_000);

afterAll(async () => {
  await h?.close();
});

function watch(provider: string, no: string, topic: string, extra: Record<string, unknown>) {
  return h.call("POST", "/v1/payments", {
    provider,
    account: "sandbox",
    outTradeNo: no,
    schedule: [0.2],
    notify: [topic],
    ...extra,
  });
}

describe("a paid answer with another amount", () => {
  it("by a WeChat Pay poll: ends mismatch, and only payment.mismatch is fanned out", async () => {
    const no = `wm-${uid()}`;
    const topic = `r-${uid()}`;
    h.wechat.createTrade(no, { total: 1999 });
    h.wechat.pay(no);
    const started = await watch("wechatpay", no, topic, { amount: { total: 2999 } });
    expect(started.status).toBe(201);
    // The expected amount is the watch's, its currency defaulted.
    expect(started.json.payment.amount).toEqual({ total: 2999, currency: "CNY" });
    const ended = await h.watchState("wechatpay", no, "mismatch");
    expect(ended.amount).toEqual({ total: 2999, currency: "CNY" });
    expect(ended.outcome).toMatchObject({
      event: "payment.mismatch",
      tradeState: "SUCCESS",
      tradeNo: h.wechat.trade(no)?.transactionId,
      amount: { total: 1999, currency: "CNY" },
      expected: { total: 2999, currency: "CNY" },
      source: "poll",
    });
    const told = await h.outcomes(topic);
    expect(told.map((o) => o.json)).toEqual([ended.outcome]);
    expect(told[0]?.text).not.toContain("payment.paid");
  });

  it("by an Alipay poll, in another currency: mismatch too", async () => {
    const no = `am-${uid()}`;
    const topic = `r-${uid()}`;
    h.alipay.createTrade(no, { totalAmount: "12.30" });
    h.alipay.pay(no);
    await watch("alipay", no, topic, { amount: { total: 1230, currency: "USD" } });
    const ended = await h.watchState("alipay", no, "mismatch");
    expect(ended.outcome).toMatchObject({
      event: "payment.mismatch",
      amount: { total: 1230, currency: "CNY" },
      expected: { total: 1230, currency: "USD" },
    });
    expect((await h.outcomes(topic)).map((o) => o.json.event)).toEqual(["payment.mismatch"]);
  });

  it("by a verified Alipay notification: mismatch, source notify", async () => {
    const no = `an-${uid()}`;
    const topic = `r-${uid()}`;
    h.alipay.createTrade(no, { totalAmount: "5.00" });
    await watch("alipay", no, topic, { amount: { total: 600 }, schedule: [3600] });
    h.alipay.pay(no);
    const sent = await h.alipay.notify(no, `${NOTIFY_ORIGIN}/v1/notify/alipay/sandbox`);
    expect(sent).toEqual({ status: 200, text: "success" });
    const ended = await h.payment("alipay", no);
    expect(ended).toMatchObject({
      state: "mismatch",
      polls: 0,
      outcome: {
        event: "payment.mismatch",
        amount: { total: 500, currency: "CNY" },
        expected: { total: 600, currency: "CNY" },
        source: "notify",
      },
    });
    expect((await h.outcomes(topic)).map((o) => o.json.event)).toEqual(["payment.mismatch"]);
  });

  it("by a verified WeChat Pay notification: mismatch", async () => {
    const no = `wn-${uid()}`;
    const topic = `r-${uid()}`;
    h.wechat.createTrade(no, { total: 100 });
    await watch("wechatpay", no, topic, { amount: { total: 101 }, schedule: [3600] });
    h.wechat.pay(no);
    expect(await h.wechat.notify(no, `${NOTIFY_ORIGIN}/v1/notify/wechatpay/sandbox`)).toMatchObject(
      { status: 204 },
    );
    expect((await h.payment("wechatpay", no)).state).toBe("mismatch");
    expect((await h.outcomes(topic)).map((o) => o.json)).toEqual([
      expect.objectContaining({
        event: "payment.mismatch",
        expected: { total: 101, currency: "CNY" },
      }),
    ]);
  });
});

describe("a paid answer with the expected amount", () => {
  it.each(["alipay", "wechatpay"] as const)(
    "%s: paid, with the amount, no expected",
    async (provider) => {
      const no = `ok-${uid()}`;
      const topic = `r-${uid()}`;
      if (provider === "alipay") {
        h.alipay.createTrade(no, { totalAmount: "19.99" });
        h.alipay.pay(no);
      } else {
        h.wechat.createTrade(no, { total: 1999 });
        h.wechat.pay(no);
      }
      await watch(provider, no, topic, { amount: { total: 1999, currency: "CNY" } });
      const paid = await h.watchState(provider, no, "paid");
      expect(paid.outcome).toMatchObject({
        event: "payment.paid",
        amount: { total: 1999, currency: "CNY" },
      });
      expect(paid.outcome).not.toHaveProperty("expected");
      expect((await h.outcomes(topic)).map((o) => o.json.event)).toEqual(["payment.paid"]);
    },
  );

  it("an unpaid answer never compares amounts: a closed trade of another total ends closed", async () => {
    const no = `cl-${uid()}`;
    h.wechat.createTrade(no, { total: 1 });
    h.wechat.close(no);
    await watch("wechatpay", no, `r-${uid()}`, { amount: { total: 2 } });
    expect((await h.watchState("wechatpay", no, "closed")).outcome.event).toBe("payment.closed");
  });
});

describe("an invalid amount", () => {
  it.each([
    [5, "amount: expected object, received number"],
    [null, "amount: expected object, received null"],
    [{}, "amount.total: expected number, received undefined"],
    [{ total: "100" }, "amount.total: expected number, received string"],
    [{ total: 0 }, "amount.total: must be more than 0"],
    [{ total: -5 }, "amount.total: must be more than 0"],
    [{ total: 19.99 }, "amount.total: must be a whole number of fen (1999 for ¥19.99)"],
    [{ total: 2 ** 53 }, "amount.total: must be a whole number of fen"],
    [{ total: 100, currency: "cny" }, "amount.currency: must be an ISO 4217 code"],
    [{ total: 100, currency: "RMB1" }, "amount.currency: must be an ISO 4217 code"],
    [{ total: 100, currency: 156 }, "amount.currency: expected string, received number"],
    [{ total: 100, yuan: 1 }, 'unknown field "yuan" in amount'],
  ])("refuses %j with 400 invalid_request naming the field", async (amount, message) => {
    const res = await watch("wechatpay", `bad-${uid()}`, "t", { amount });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe("invalid_request");
    expect(res.json.error.message).toContain(message);
  });
});
