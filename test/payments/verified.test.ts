// Only verified answers decide (DESIGN §4, "Money and the closed loop"): through the service, the
// bridge's Redis and the sandboxes, an answer without a valid signature (an error answer
// included) and a verified one whose signed time is more than 5 minutes off are transient, at the
// query and at the close: the watch keeps polling, and its lastAnswer says which rule decided.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness, uid } from "./harness";

let h: Harness;

beforeAll(async () => {
  h = await startHarness("verified");
}, 30_000);

afterAll(async () => {
  await h?.close();
});

/** The watch once it has answered `polls` polls. */
function polled(provider: string, no: string, polls: number, account = "sandbox") {
  return h.until(`${no}: ${polls} polls`, async () => {
    const got = await h.payment(provider, no, account);
    return got?.polls >= polls ? got : undefined;
  });
}

describe("an answer without a valid signature", () => {
  it.each([
    ["alipay", "sandbox-v3", "unverified: no alipay-signature (HTTP 400 ACQ.INVALID_PARAMETER)"],
    ["alipay", "sandbox", "unverified: no sign (40004 ACQ.INVALID_PARAMETER"],
    ["wechatpay", "sandbox", "unverified: unsigned (Wechatpay-* headers missing) (HTTP 400)"],
  ] as const)(
    "%s (%s): an unsigned error at the query is transient, and says so",
    async (provider, account, why) => {
      const no = `u-${uid()}`;
      const topic = `r-${uid()}`;
      if (provider === "alipay") {
        h.alipay.createTrade(no, { totalAmount: "3.00" });
        h.alipay.inject("unsignedError");
      } else {
        h.wechat.createTrade(no, { total: 300 });
        h.wechat.inject("unsignedError");
      }
      const started = await h.call("POST", "/v1/payments", {
        provider,
        account,
        outTradeNo: no,
        schedule: [0.2],
        notify: [topic],
      });
      expect(started.status).toBe(201);
      // Trusted, "invalid parameter" would end the watch failed: unsigned, it is retried.
      const first = await polled(provider, no, 1, account);
      expect(first).toMatchObject({
        state: "polling",
        lastAnswer: { tradeState: expect.stringContaining(why) },
      });
      if (provider === "alipay") h.alipay.pay(no);
      else h.wechat.pay(no);
      const paid = await h.watchState(provider, no, "paid", account);
      expect(paid.polls).toBeGreaterThanOrEqual(2);
      expect((await h.outcomes(topic)).map((o) => o.json.event)).toEqual(["payment.paid"]);
    },
  );

  it("an unsigned error at the close is transient: the close is tried again seconds later, and the order closed", async () => {
    const no = `uc-${uid()}`;
    const topic = `r-${uid()}`;
    h.alipay.createTrade(no);
    await h.call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox-v3",
      outTradeNo: no,
      schedule: [60],
      deadline: Date.now() + 300,
      closeOnDeadline: true,
      notify: [topic],
    });
    h.alipay.inject("unsignedError");
    const first = await polled("alipay", no, 1, "sandbox-v3");
    expect(first.state).toBe("polling");
    expect(first.lastAnswer.tradeState).toBe(
      "close: unverified: no alipay-signature (HTTP 400 ACQ.INVALID_PARAMETER)",
    );
    const expired = await h.watchState("alipay", no, "expired", "sandbox-v3");
    expect(expired.outcome).toMatchObject({ event: "payment.expired", tradeState: "TRADE_CLOSED" });
    expect(h.alipay.trade(no)?.status).toBe("TRADE_CLOSED");
    // The close that failed, the query after it, then the close again: not at once past the
    // deadline (which would hammer Alipay), but after the transient wait (5 s).
    const calls = h.alipay
      .requests()
      .filter((r) => (r.bizContent as { out_trade_no?: string } | undefined)?.out_trade_no === no);
    expect(calls.map((r) => r.method_)).toEqual([
      "alipay.trade.close",
      "alipay.trade.query",
      "alipay.trade.close",
      "alipay.trade.query",
    ]);
    const [firstClose, , secondClose] = calls;
    expect((secondClose?.at ?? 0) - (firstClose?.at ?? 0)).toBeGreaterThanOrEqual(4500);
  }, 20_000);
});

describe("a verified answer whose signed time is more than 5 minutes off", () => {
  it.each([
    [
      "alipay",
      "sandbox-v3",
      /^stale: alipay-timestamp 60\d s off \(more than 300 s\) \(HTTP 200\)$/,
    ],
    [
      "wechatpay",
      "sandbox",
      /^stale: Wechatpay-Timestamp 60\d s off \(more than 300 s\) \(HTTP 200\)$/,
    ],
  ] as const)("%s: is transient, and says so", async (provider, account, why) => {
    const no = `st-${uid()}`;
    if (provider === "alipay") {
      h.alipay.createTrade(no);
      h.alipay.pay(no);
      h.alipay.inject("staleTimestamp");
    } else {
      h.wechat.createTrade(no);
      h.wechat.pay(no);
      h.wechat.inject("staleTimestamp");
    }
    await h.call("POST", "/v1/payments", {
      provider,
      account,
      outTradeNo: no,
      schedule: [0.2],
      notify: [`r-${uid()}`],
    });
    const first = await polled(provider, no, 1, account);
    expect(first.state).toBe("polling");
    expect(first.lastAnswer.tradeState).toMatch(why);
    expect(await h.watchState(provider, no, "paid", account)).toMatchObject({
      outcome: { event: "payment.paid", source: "poll" },
    });
  });
});
