// Refund watches (DESIGN §4, "Refund watches") through the real service, Redis through the
// bridge, and the Alipay and WeChat Pay sandboxes on the wire: a refund watch per provider
// (WeChat Pay, Alipay classic, Alipay v3) to each of its ends, WeChat Pay's refund
// notifications at the payment notify URL, a notification racing a poll, answers not to be
// trusted, bad input, and tokens limited to their tenants' topics and accounts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBeijingTime } from "../../dev/alipay-sandbox";
import { type Harness, NOTIFY_ORIGIN, type Popped, sleep, startHarness, uid } from "./harness";

let h: Harness;
const WECHAT = `${NOTIFY_ORIGIN}/v1/notify/wechatpay/sandbox`;
const HOUR = 3600_000;
/** A tenant's token: its topics and the sandbox accounts. */
const SHOP = "refund-shop";
/** A tenant's token with the topics of SHOP, but no payment account of its own. */
const NO_ACCOUNTS = "refund-no-accounts";

beforeAll(async () => {
  h = await startHarness("refunds", {
    vars: {
      DQ_TOKENS: ["refunds-admin", `${SHOP}:shop.*|*/sandbox`, `${NO_ACCOUNTS}:shop.*`].join(","),
    },
  });
}, 30_000);

afterAll(async () => {
  await h?.close();
});

type Provider = "wechatpay" | "alipay";

const start = (body: Record<string, unknown>, token?: string) =>
  h.call("POST", "/v1/refunds", { account: "sandbox", schedule: [0.2], ...body }, token);

const path = (provider: Provider, no: string, account = "sandbox") =>
  `/v1/refunds/${provider}/${account}/${no}`;

const refund = async (provider: Provider, no: string, account = "sandbox") =>
  (await h.call("GET", path(provider, no, account))).json?.refund;

/** The refund watch once it reads `state` (running due polls meanwhile). */
const refundState = (provider: Provider, no: string, state: string, account = "sandbox") =>
  h.until(`${provider}/${account}/${no} ${state}`, async () => {
    const got = await refund(provider, no, account);
    return got?.state === state ? got : undefined;
  });

/** The watch once it has been polled `n` times. */
const polled = (provider: Provider, no: string, n = 1, account = "sandbox") =>
  h.until(`${provider}/${account}/${no} polled`, async () => {
    const got = await refund(provider, no, account);
    return got?.polls >= n ? got : undefined;
  });

const events = (popped: Popped[]) =>
  popped.map((o) => `${o.json.event}${o.json.late ? " (late)" : ""}`);

/** A paid WeChat Pay order and a refund of it (PROCESSING): their numbers. */
function wechatRefund(total = 1999, amount = 500) {
  const order = `o-${uid()}`;
  const no = `rf-${uid()}`;
  h.wechat.createTrade(order, { total });
  h.wechat.pay(order);
  h.wechat.createRefund(order, no, { refund: amount });
  return { order, no };
}

/** A paid Alipay trade and a refund request of it (processing). */
function alipayRefund(totalAmount = "12.30", refundAmount = "2.05") {
  const order = `o-${uid()}`;
  const no = `rf-${uid()}`;
  h.alipay.createTrade(order, { totalAmount });
  h.alipay.pay(order);
  h.alipay.createRefund(order, no, { refundAmount });
  return { order, no };
}

describe("a WeChat Pay refund watch", () => {
  it("polls until SUCCESS, then tells each notify topic refund.succeeded once, metadata as sent", async () => {
    const { order, no } = wechatRefund(1999, 500);
    const topics = [`refunds-${uid()}`, `audit-${uid()}`];
    const started = await h.call(
      "POST",
      "/v1/refunds",
      `{"provider":"wechatpay","account":"sandbox","outRefundNo":"${no}","outTradeNo":"${order}","schedule":[0.2],"notify":${JSON.stringify(topics)},"metadata":{"ticket":4200001234567890123}}`,
    );
    expect(started.status).toBe(201);
    expect(started.json).toMatchObject({
      created: true,
      refund: {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: no,
        outTradeNo: order,
        state: "polling",
        polls: 0,
        notify: topics,
      },
    });
    expect(started.text).toContain('"metadata":{"ticket":4200001234567890123}');
    // Idempotent: watching it again answers the watch as it is.
    const again = await start({ provider: "wechatpay", outRefundNo: no, notify: topics });
    expect(again.status).toBe(200);
    expect(again.json.created).toBe(false);
    const processing = await polled("wechatpay", no);
    expect(processing).toMatchObject({ state: "polling", lastAnswer: { status: "PROCESSING" } });
    expect(typeof processing.nextPollAt).toBe("number");
    h.wechat.setRefundStatus(no, "SUCCESS");
    const done = await refundState("wechatpay", no, "succeeded");
    const refunded = h.wechat.getRefund(no);
    expect(done.outcome).toEqual({
      event: "refund.succeeded",
      provider: "wechatpay",
      account: "sandbox",
      outRefundNo: no,
      outTradeNo: order,
      refundNo: refunded?.refundId,
      status: "SUCCESS",
      amount: { refund: 500, total: 1999, currency: "CNY" },
      succeededAt: Date.parse(refunded?.successTime ?? ""),
      source: "poll",
      polls: done.polls,
      metadata: expect.any(Object),
    });
    // The metadata as sent, byte for byte (a JavaScript round trip would round it).
    const read = await h.call("GET", path("wechatpay", no));
    expect(read.text).toContain('"metadata":{"ticket":4200001234567890123}}');
    expect(done.nextPollAt).toBeUndefined();
    for (const topic of topics) {
      const [outcome, ...more] = await h.outcomes(topic);
      expect(more).toEqual([]);
      expect(outcome?.json).toMatchObject({ event: "refund.succeeded", outRefundNo: no });
      expect(outcome?.text).toContain('"metadata":{"ticket":4200001234567890123}}');
    }
    // No query after the outcome.
    const asked = () => h.wechat.requests().filter((r) => r.path.includes(no)).length;
    const before = asked();
    await sleep(500);
    await h.pollNow();
    await sleep(300);
    expect(asked()).toBe(before);
  });

  it("ends closed (refund.closed) and abnormal (refund.abnormal), the provider's word kept", async () => {
    for (const [status, state] of [
      ["CLOSED", "closed"],
      ["ABNORMAL", "abnormal"],
    ] as const) {
      const { no } = wechatRefund();
      const topic = `r-${uid()}`;
      expect(
        (await start({ provider: "wechatpay", outRefundNo: no, notify: [topic] })).status,
      ).toBe(201);
      await polled("wechatpay", no);
      h.wechat.setRefundStatus(no, status);
      const ended = await refundState("wechatpay", no, state);
      expect(ended.outcome).toMatchObject({
        event: `refund.${state}`,
        status,
        amount: { refund: 500, total: 1999, currency: "CNY" },
        source: "poll",
      });
      expect(ended.outcome.succeededAt).toBeUndefined();
      expect(events(await h.outcomes(topic))).toEqual([`refund.${state}`]);
    }
  });

  it("ends expired when the refund is still PROCESSING at the deadline", async () => {
    const { no } = wechatRefund();
    const topic = `r-${uid()}`;
    await start({
      provider: "wechatpay",
      outRefundNo: no,
      notify: [topic],
      schedule: [0.2],
      deadline: Date.now() + 800,
    });
    const expired = await refundState("wechatpay", no, "expired");
    expect(expired.outcome).toMatchObject({
      event: "refund.expired",
      outRefundNo: no,
      status: "PROCESSING",
      source: "poll",
    });
    expect(expired.polls).toBeGreaterThanOrEqual(2);
    expect(events(await h.outcomes(topic))).toEqual(["refund.expired"]);
  });

  it("takes an unknown refund (404 RESOURCE_NOT_EXISTS) as not yet", async () => {
    const no = `rf-${uid()}`;
    await start({ provider: "wechatpay", outRefundNo: no, notify: [`r-${uid()}`] });
    const got = await polled("wechatpay", no, 2);
    expect(got).toMatchObject({ state: "polling", lastAnswer: { status: "RESOURCE_NOT_EXISTS" } });
    await h.call("DELETE", path("wechatpay", no));
  });
});

describe("an Alipay refund watch", () => {
  for (const account of ["sandbox", "sandbox-v3"]) {
    const api = account === "sandbox" ? "classic" : "v3";
    it(`${api}: polls until REFUND_SUCCESS; amounts in fen, converted from yuan exactly`, async () => {
      const { order, no } = alipayRefund("12.30", "2.05");
      const topic = `r-${uid()}`;
      const started = await start({
        provider: "alipay",
        account,
        outRefundNo: no,
        outTradeNo: order,
        notify: [topic],
        metadata: { n: 1 },
      });
      expect(started.status).toBe(201);
      const processing = await polled("alipay", no, 1, account);
      expect(processing.lastAnswer.status).toBe("no refund_status");
      // The query names the trade and the refund request, and asks for the refund's time.
      const asked = h.alipay
        .requests()
        .filter((r) => JSON.stringify(r.bizContent ?? "").includes(no));
      expect(asked[0]).toMatchObject({
        api,
        verified: true,
        method_: "alipay.trade.fastpay.refund.query",
        bizContent: { out_trade_no: order, out_request_no: no, query_options: ["gmt_refund_pay"] },
      });
      h.alipay.succeedRefund(order, no);
      const done = await refundState("alipay", no, "succeeded", account);
      expect(done.outcome).toEqual({
        event: "refund.succeeded",
        provider: "alipay",
        account,
        outRefundNo: no,
        outTradeNo: order,
        status: "REFUND_SUCCESS",
        amount: { refund: 205, total: 1230, currency: "CNY" },
        succeededAt: parseBeijingTime(h.alipay.getRefund(order, no)?.gmtRefundPay ?? ""),
        source: "poll",
        polls: done.polls,
        metadata: { n: 1 },
      });
      expect(events(await h.outcomes(topic))).toEqual(["refund.succeeded"]);
    });
  }

  it("converts amounts a float would get wrong (0.1 + 0.2 yuan, 19.99 of 1234567.89)", async () => {
    const { order, no } = alipayRefund("1234567.89", "19.99");
    h.alipay.succeedRefund(order, no);
    await start({ provider: "alipay", outRefundNo: no, outTradeNo: order, notify: [`r-${uid()}`] });
    const done = await refundState("alipay", no, "succeeded");
    expect(done.outcome.amount).toEqual({ refund: 1999, total: 123456789, currency: "CNY" });
  });

  it("ends expired when there is no refund_status by the deadline", async () => {
    const { order, no } = alipayRefund();
    await start({
      provider: "alipay",
      account: "sandbox-v3",
      outRefundNo: no,
      outTradeNo: order,
      notify: [`r-${uid()}`],
      deadline: Date.now() + 800,
    });
    const expired = await refundState("alipay", no, "expired", "sandbox-v3");
    expect(expired.outcome).toMatchObject({
      event: "refund.expired",
      outTradeNo: order,
      status: "no refund_status",
    });
  });

  it("refuses the same outRefundNo for another order (out_request_no is unique within a trade only): 409 refund_exists", async () => {
    const { order, no } = alipayRefund();
    const topic = `r-${uid()}`;
    await start({ provider: "alipay", outRefundNo: no, outTradeNo: order, notify: [topic] });
    const other = await start({
      provider: "alipay",
      outRefundNo: no,
      outTradeNo: "o-other",
      notify: [topic],
    });
    expect(other.status).toBe(409);
    expect(other.json.error.code).toBe("refund_exists");
    expect(other.json.error.message).toContain(order);
    await h.call("DELETE", path("alipay", no));
  });
});

describe("defaults", () => {
  it("polls on the refund preset (first query 60 s after the start) until 7 days after it", async () => {
    const { no } = wechatRefund();
    const started = await h.call("POST", "/v1/refunds", {
      provider: "wechatpay",
      account: "sandbox",
      outRefundNo: no,
      notify: [`r-${uid()}`],
    });
    expect(started.status).toBe(201);
    const { createdAt, nextPollAt, deadline } = started.json.refund;
    expect(nextPollAt - createdAt).toBe(60_000);
    expect(deadline - createdAt).toBe(7 * 24 * HOUR);
    await h.call("DELETE", path("wechatpay", no));
  });
});

describe("stopping and reading", () => {
  it("stops a watch on DELETE: it reads stopped and is polled no more", async () => {
    const { no } = wechatRefund();
    await start({ provider: "wechatpay", outRefundNo: no, notify: [`r-${uid()}`] });
    await polled("wechatpay", no);
    expect(await h.call("DELETE", path("wechatpay", no))).toMatchObject({
      status: 200,
      json: { deleted: true },
    });
    const stopped = await refund("wechatpay", no);
    expect(stopped.state).toBe("stopped");
    expect(stopped.nextPollAt).toBeUndefined();
    const asked = () => h.wechat.requests().filter((r) => r.path.includes(no)).length;
    const before = asked();
    await sleep(600);
    await h.pollNow();
    await sleep(300);
    expect(asked()).toBe(before);
  });

  it("answers 404 refund_not_found for a refund nobody watches, to GET and DELETE", async () => {
    for (const method of ["GET", "DELETE"]) {
      const missing = await h.call(method, path("wechatpay", `nobody-${uid()}`));
      expect(missing.status, method).toBe(404);
      expect(missing.json.error.code, method).toBe("refund_not_found");
    }
    // A payment watch of the same number is not a refund watch.
    const no = `same-${uid()}`;
    h.wechat.createTrade(no);
    await h.call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [3600],
      notify: [`r-${uid()}`],
    });
    expect((await h.call("GET", path("wechatpay", no))).status).toBe(404);
  });

  it("lists refund watches newest first (the dashboard's), apart from payment watches", async () => {
    const first = wechatRefund();
    const second = wechatRefund();
    for (const { no } of [first, second]) {
      await start({
        provider: "wechatpay",
        outRefundNo: no,
        notify: [`r-${uid()}`],
        schedule: [3600],
      });
      await sleep(5);
    }
    const everyone = { scope: undefined, accounts: undefined };
    const listed = await h.service.refunds.list({ limit: 100, ...everyone });
    const numbers = listed.refunds.map((r) => r.outRefundNo);
    expect(numbers.indexOf(second.no)).toBeGreaterThanOrEqual(0);
    expect(numbers.indexOf(second.no)).toBeLessThan(numbers.indexOf(first.no));
    expect(listed.refunds.find((r) => r.outRefundNo === first.no)).toMatchObject({
      provider: "wechatpay",
      state: "polling",
    });
    const payments = await h.service.payments.list({ limit: 100, ...everyone });
    expect(payments.watches.map((w) => w.outTradeNo)).not.toContain(first.no);
    expect(payments.watches.every((w) => w.outTradeNo !== undefined)).toBe(true);
    // A token limited to other accounts sees none of them.
    const other = await h.service.refunds.list({ limit: 100, scope: ["shop.*"], accounts: [] });
    expect(other.refunds).toEqual([]);
    for (const { no } of [first, second]) await h.call("DELETE", path("wechatpay", no));
  });

  it("keeps an ended watch at least 25 hours", async () => {
    const { no } = wechatRefund();
    h.wechat.setRefundStatus(no, "SUCCESS");
    await start({ provider: "wechatpay", outRefundNo: no, notify: [`r-${uid()}`] });
    await refundState("wechatpay", no, "succeeded");
    const keys = (await h.redis.keys(`${h.key.base}pay:*`)) as string[];
    const ttls = await Promise.all(keys.map((key) => h.redis.pttl(key)));
    // The longest-lived ended watch hash: this one, just ended.
    expect(Math.max(...ttls)).toBeGreaterThan(25 * HOUR - 60_000);
  });
});

describe("bad input", () => {
  const good = () => ({
    provider: "alipay",
    account: "sandbox",
    outRefundNo: `rf-${uid()}`,
    outTradeNo: `o-${uid()}`,
    notify: [`r-${uid()}`],
  });
  const refused = async (body: Record<string, unknown>) => {
    const res = await h.call("POST", "/v1/refunds", body);
    expect(res.status, JSON.stringify(body)).toBe(400);
    return res.json.error as { code: string; message: string };
  };

  it("400 invalid_request naming the field: Alipay without outTradeNo, a bad outRefundNo, a bad schedule, an unknown field", async () => {
    const { outTradeNo: _, ...noTrade } = good();
    const missing = await refused(noTrade);
    expect(missing.code).toBe("invalid_request");
    expect(missing.message).toMatch(/outTradeNo: required for Alipay/);
    expect((await refused({ ...good(), outRefundNo: "bad refund/no" })).message).toMatch(
      /outRefundNo: must be 1-64 characters/,
    );
    expect((await refused({ ...good(), outRefundNo: "x".repeat(65) })).message).toMatch(
      /outRefundNo/,
    );
    expect((await refused({ ...good(), schedule: "weekly" })).message).toMatch(/schedule/);
    expect((await refused({ ...good(), schedule: [] })).message).toMatch(/schedule/);
    expect((await refused({ ...good(), deadline: Date.now() - 1000 })).message).toMatch(
      /deadline: must be in the future/,
    );
    expect((await refused({ ...good(), deadline: Date.now() + 401 * 86_400_000 })).message).toMatch(
      /deadline: must be at most 400 days ahead/,
    );
    expect((await refused({ ...good(), closeOnDeadline: true })).message).toMatch(
      /unknown field "closeOnDeadline"/,
    );
    expect((await refused({ ...good(), notify: [] })).message).toMatch(/notify/);
    // WeChat Pay needs no outTradeNo.
    const { outTradeNo: __, ...wechat } = { ...good(), provider: "wechatpay" };
    const taken = await h.call("POST", "/v1/refunds", wechat);
    expect(taken.status).toBe(201);
    expect(taken.json.refund.outTradeNo).toBeUndefined();
    // Stopped: its first poll, 60 s on, would take a fault a later test injects for its own.
    await h.call("DELETE", path("wechatpay", taken.json.refund.outRefundNo));
  });

  it("400 unknown_account for an account nobody configured", async () => {
    const unknown = await refused({ ...good(), account: "nope" });
    expect(unknown.code).toBe("unknown_account");
    expect(unknown.message).toContain("DQ_ALIPAY_ACCOUNTS");
  });
});

describe("tokens limited to topics", () => {
  it("watch refunds of their own accounts and topics only: 403 otherwise, 404 for others' watches, 409 for a refund watched for others' topics", async () => {
    const { no } = wechatRefund();
    const body = { provider: "wechatpay", outRefundNo: no, notify: ["shop.refunds"] };
    const noAccount = await start(body, NO_ACCOUNTS);
    expect(noAccount.status).toBe(403);
    expect(noAccount.json.error.message).toContain("refunds of wechatpay");
    const otherTopic = await start({ ...body, notify: ["other.refunds"] }, SHOP);
    expect(otherTopic.status).toBe(403);
    // The operator watches it for a topic the tenant may not see.
    expect((await start({ ...body, notify: ["ops.refunds"] })).status).toBe(201);
    const exists = await start(body, SHOP);
    expect(exists.status).toBe(409);
    expect(exists.json.error.code).toBe("refund_exists");
    expect(exists.text).not.toContain("ops.refunds");
    expect((await h.call("GET", path("wechatpay", no), undefined, SHOP)).status).toBe(404);
    expect((await h.call("DELETE", path("wechatpay", no), undefined, SHOP)).status).toBe(404);
    expect((await h.call("GET", path("wechatpay", no), undefined, NO_ACCOUNTS)).status).toBe(404);
    // Its own: seen and stopped.
    const own = wechatRefund();
    const mine = { provider: "wechatpay", outRefundNo: own.no, notify: ["shop.refunds"] };
    expect((await start(mine, SHOP)).status).toBe(201);
    expect((await h.call("GET", path("wechatpay", own.no), undefined, SHOP)).status).toBe(200);
    expect((await h.call("DELETE", path("wechatpay", own.no), undefined, SHOP)).status).toBe(200);
    await h.call("DELETE", path("wechatpay", no));
  });
});

describe("answers not to be trusted", () => {
  it("takes an unverified or stale answer as transient: nothing decided, asked again soon", async () => {
    const { no } = wechatRefund();
    h.wechat.setRefundStatus(no, "SUCCESS");
    h.wechat.inject("badSignature");
    h.wechat.inject("unsignedError");
    h.wechat.inject("staleTimestamp");
    const from = h.logs.length;
    // Each answer not to be trusted is asked again after the transient wait (5 s, doubling),
    // capped by the schedule's step (0.3 s here).
    await start({
      provider: "wechatpay",
      outRefundNo: no,
      notify: [`r-${uid()}`],
      schedule: [0.3],
    });
    const first = await polled("wechatpay", no, 1);
    expect(first.state).toBe("polling");
    expect(first.lastAnswer.status).toMatch(/^(unverified|stale): /);
    const done = await refundState("wechatpay", no, "succeeded");
    // Three answers not trusted, then the verified SUCCESS.
    expect(done.polls).toBe(4);
    const transient = h.logs
      .slice(from)
      .filter((l) => l.event === "refund_poll" && l.result === "transient")
      .map((l) => String(l.status));
    expect(transient).toEqual([
      expect.stringMatching(/^unverified: signature does not verify/),
      expect.stringMatching(/^unverified: unsigned \(Wechatpay-\* headers missing\)/),
      expect.stringMatching(/^stale: Wechatpay-Timestamp \d+ s off/),
    ]);
    // Nothing was decided by them: the outcome is the verified answer's.
    expect(done.outcome).toMatchObject({ event: "refund.succeeded", status: "SUCCESS" });
  });

  it("Alipay: a 5xx and a bad signature are transient too", async () => {
    const { order, no } = alipayRefund();
    h.alipay.succeedRefund(order, no);
    h.alipay.inject("5xx");
    h.alipay.inject("badSignature");
    const from = h.logs.length;
    await start({ provider: "alipay", outRefundNo: no, outTradeNo: order, notify: [`r-${uid()}`] });
    expect((await refundState("alipay", no, "succeeded")).polls).toBe(3);
    const transient = h.logs
      .slice(from)
      .filter((l) => l.event === "refund_poll" && l.result === "transient")
      .map((l) => String(l.status));
    expect(transient).toEqual([
      "HTTP 502",
      expect.stringMatching(/^unverified: sign does not verify/),
    ]);
  });
});

describe("WeChat Pay refund notifications at the payment notify URL", () => {
  it("settle the watch at once (source notify); a resend acts no more", async () => {
    const { no } = wechatRefund();
    const topics = [`r-${uid()}`, `a-${uid()}`];
    await start({ provider: "wechatpay", outRefundNo: no, notify: topics, schedule: [3600] });
    h.wechat.setRefundStatus(no, "SUCCESS");
    const eventId = `evt-${uid()}`;
    expect(await h.wechat.notifyRefund(no, WECHAT, { eventId })).toEqual({ status: 204, text: "" });
    const done = await refund("wechatpay", no);
    expect(done).toMatchObject({
      state: "succeeded",
      polls: 0,
      outcome: {
        event: "refund.succeeded",
        status: "SUCCESS",
        source: "notify",
        polls: 0,
        amount: { refund: 500, total: 1999, currency: "CNY" },
      },
    });
    expect(await h.wechat.notifyRefund(no, WECHAT, { eventId })).toEqual({ status: 204, text: "" });
    expect(h.logs.some((l) => l.event === "notify_duplicate")).toBe(true);
    for (const topic of topics)
      expect(events(await h.outcomes(topic))).toEqual(["refund.succeeded"]);
  });

  it("REFUND.ABNORMAL and REFUND.CLOSED end the watch abnormal and closed", async () => {
    for (const [status, state] of [
      ["ABNORMAL", "abnormal"],
      ["CLOSED", "closed"],
    ] as const) {
      const { no } = wechatRefund();
      const topic = `r-${uid()}`;
      await start({ provider: "wechatpay", outRefundNo: no, notify: [topic], schedule: [3600] });
      h.wechat.setRefundStatus(no, status);
      expect((await h.wechat.notifyRefund(no, WECHAT)).status).toBe(204);
      expect((await refund("wechatpay", no)).outcome).toMatchObject({
        event: `refund.${state}`,
        status,
        source: "notify",
      });
      expect(events(await h.outcomes(topic))).toEqual([`refund.${state}`]);
    }
  });

  it("acknowledge and ignore one for a refund nobody watches; refuse a tampered one", async () => {
    const { no } = wechatRefund();
    h.wechat.setRefundStatus(no, "SUCCESS");
    expect(await h.wechat.notifyRefund(no, WECHAT)).toEqual({ status: 204, text: "" });
    expect((await h.call("GET", path("wechatpay", no))).status).toBe(404);
    const tampered = await h.wechat.notifyRefund(no, WECHAT, { tamper: true });
    expect(tampered.status).toBe(401);
    expect(JSON.parse(tampered.text)).toMatchObject({ code: "FAIL" });
  });

  it("a notification racing a poll: the outcome once per topic", async () => {
    const { no } = wechatRefund();
    const topics = [`r-${uid()}`, `a-${uid()}`];
    await start({ provider: "wechatpay", outRefundNo: no, notify: topics });
    await polled("wechatpay", no);
    // The next query is held a second at the sandbox, and answers SUCCESS then...
    h.wechat.inject("slow");
    h.wechat.setRefundStatus(no, "SUCCESS");
    const asked = () =>
      h.wechat.requests().filter((r) => r.path.includes(no) && r.fault === "slow");
    await h.until("the slow query", async () => (asked().length > 0 ? true : undefined));
    // ...while notifications arrive, before and after it answers.
    const sent: Promise<{ status: number }>[] = [];
    for (let n = 0; n < 8; n++) {
      sent.push(h.wechat.notifyRefund(no, WECHAT));
      await sleep(150);
    }
    expect((await Promise.all(sent)).map((r) => r.status)).toEqual(sent.map(() => 204));
    await sleep(500);
    expect((await refund("wechatpay", no)).state).toBe("succeeded");
    for (const topic of topics)
      expect(events(await h.outcomes(topic))).toEqual(["refund.succeeded"]);
  });

  it("a success after the watch expired is told once, late", async () => {
    const { no } = wechatRefund();
    const topic = `r-${uid()}`;
    await start({
      provider: "wechatpay",
      outRefundNo: no,
      notify: [topic],
      deadline: Date.now() + 500,
    });
    const expired = await refundState("wechatpay", no, "expired");
    expect(expired.outcome.event).toBe("refund.expired");
    h.wechat.setRefundStatus(no, "SUCCESS");
    for (let n = 0; n < 3; n++) expect((await h.wechat.notifyRefund(no, WECHAT)).status).toBe(204);
    const late = await refund("wechatpay", no);
    expect(late).toMatchObject({
      state: "succeeded",
      outcome: { event: "refund.succeeded", source: "notify", late: true },
      firstOutcome: { event: "refund.expired", status: "PROCESSING" },
    });
    expect(events(await h.outcomes(topic))).toEqual(["refund.expired", "refund.succeeded (late)"]);
  });

  it("a success after the watch ended abnormal, or was stopped, is told late too; nothing after it", async () => {
    const abnormal = wechatRefund();
    const stopped = wechatRefund();
    const topic = `r-${uid()}`;
    for (const { no } of [abnormal, stopped]) {
      await start({ provider: "wechatpay", outRefundNo: no, notify: [topic], schedule: [3600] });
    }
    h.wechat.setRefundStatus(abnormal.no, "ABNORMAL");
    expect((await h.wechat.notifyRefund(abnormal.no, WECHAT)).status).toBe(204);
    expect((await refund("wechatpay", abnormal.no)).state).toBe("abnormal");
    await h.call("DELETE", path("wechatpay", stopped.no));
    for (const { no } of [abnormal, stopped]) {
      h.wechat.setRefundStatus(no, "SUCCESS");
      expect((await h.wechat.notifyRefund(no, WECHAT)).status).toBe(204);
      expect((await h.wechat.notifyRefund(no, WECHAT)).status).toBe(204);
      expect((await refund("wechatpay", no)).outcome).toMatchObject({
        event: "refund.succeeded",
        late: true,
      });
    }
    expect((await refund("wechatpay", stopped.no)).firstOutcome).toBeUndefined();
    expect(events(await h.outcomes(topic)).sort()).toEqual([
      "refund.abnormal",
      "refund.succeeded (late)",
      "refund.succeeded (late)",
    ]);
  });
});
