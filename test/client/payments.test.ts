import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { createClient, type FetchLike, type ProviderName } from "../../src/client";
import type { Service } from "../../src/service";
import { SHOP_A } from "../support/app";
import { bridgeService } from "../support/service";
import { BASE, failure, recording, setup } from "./support";

const TOKEN = "client-pay-admin";
const SHOP = "client-pay-shop";
/** An hour between polls: no poll comes during a test unless it asks for one. */
const HOURLY = [3600];

let alipay: AlipaySandbox;
let wechat: WechatPaySandbox;
let service: Service;

beforeAll(async () => {
  [alipay, wechat] = await Promise.all([startAlipaySandbox(), startWechatPaySandbox()]);
  ({ service } = bridgeService("cpay", {
    DQ_TOKENS: `${TOKEN},${SHOP}:shop.*|alipay/sandbox`,
    DQ_ALIPAY_ACCOUNTS: JSON.stringify({ sandbox: alipay.account }),
    DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ sandbox: wechat.account }),
  }));
}, 30_000);

afterAll(async () => {
  await alipay?.close();
  await wechat?.close();
});

/** A client of the service; `sent` holds what it sent. */
function client(token = TOKEN, next?: FetchLike) {
  const { fetch, sent } = recording(next ?? ((input, init) => service.app.request(input, init)));
  return { dq: createClient({ baseUrl: BASE, token, fetch, retryDelayMs: 1 }), sent };
}

const uid = () => crypto.randomUUID().slice(0, 8);

describe("payment watches", () => {
  it("watchPayment starts a watch (created: true); starting it again answers it as it is", async () => {
    const { dq, sent } = client();
    const outTradeNo = `wx-${uid()}`;
    const notify = [`results-${uid()}`];
    const watch = {
      provider: "wechatpay" as const,
      account: "sandbox",
      outTradeNo,
      notify,
      schedule: HOURLY,
      metadata: { cart: 77 },
    };
    const before = Date.now();
    const first = await dq.watchPayment(watch);
    expect(first).toEqual({
      created: true,
      payment: {
        provider: "wechatpay",
        account: "sandbox",
        outTradeNo,
        state: "polling",
        polls: 0,
        nextPollAt: first.payment.createdAt + 3_600_000,
        createdAt: expect.any(Number),
        deadline: first.payment.createdAt + 24 * 3_600_000,
        notify,
        metadata: { cart: 77 },
      },
    });
    expect(first.payment.createdAt).toBeGreaterThanOrEqual(before);
    expect(sent[0]).toMatchObject({ method: "POST", url: `${BASE}/v1/payments`, body: watch });
    expect(sent[0]?.headers.get("authorization")).toBe(`Bearer ${TOKEN}`);

    // Idempotent by (provider, account, outTradeNo): other fields do not change the stored watch.
    const again = await dq.watchPayment({ ...watch, metadata: { cart: 78 } });
    expect(again).toEqual({ created: false, payment: first.payment });
  });

  it("a retried start whose first answer was lost answers created: false, one watch", async () => {
    let attempts = 0;
    const lossy: FetchLike = async (input, init) => {
      attempts++;
      const response = await service.app.request(input, init);
      if (attempts === 1) throw new TypeError("fetch failed");
      return response;
    };
    const { dq, sent } = client(TOKEN, lossy);
    const outTradeNo = `ali-${uid()}`;
    const result = await dq.watchPayment({
      provider: "alipay",
      account: "sandbox",
      outTradeNo,
      notify: [`results-${uid()}`],
      schedule: HOURLY,
    });
    expect(attempts).toBe(2);
    expect(sent[1]?.body).toEqual(sent[0]?.body);
    expect(result).toMatchObject({ created: false, payment: { outTradeNo, state: "polling" } });
    expect(await dq.getPayment("alipay", "sandbox", outTradeNo)).toEqual(result.payment);
  });

  it("getPayment reads the watch, with its order number sent as one path segment", async () => {
    const { dq, sent } = client();
    // ":", "|" and "*" are valid in an order number and must be encoded in the path.
    const outTradeNo = `a:b|c*${uid()}`;
    const { payment } = await dq.watchPayment({
      provider: "alipay",
      account: "sandbox",
      outTradeNo,
      notify: [`results-${uid()}`],
      schedule: HOURLY,
    });
    expect(await dq.getPayment("alipay", "sandbox", outTradeNo)).toEqual(payment);
    expect(sent[1]).toMatchObject({
      method: "GET",
      url: `${BASE}/v1/payments/alipay/sandbox/${encodeURIComponent(outTradeNo)}`,
    });
    expect(sent[1]?.url).not.toContain("|");
  });

  it("getPayment reads a polled watch's last answer and outcome once it is paid", async () => {
    const { dq } = client();
    const outTradeNo = `wx-${uid()}`;
    wechat.createTrade(outTradeNo, { total: 1999 });
    await dq.watchPayment({
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo,
      notify: [`results-${uid()}`],
      schedule: [1],
      metadata: { cart: 1 },
    });
    wechat.pay(outTradeNo);
    const deadline = Date.now() + 10_000;
    let payment = await dq.getPayment("wechatpay", "sandbox", outTradeNo);
    while (payment.state === "polling" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      await service.scheduler.tick(service.runs.tick({}));
      payment = await dq.getPayment("wechatpay", "sandbox", outTradeNo);
    }
    expect(payment).toMatchObject({
      state: "paid",
      polls: expect.any(Number),
      lastAnswer: { tradeState: "SUCCESS", at: expect.any(Number) },
      outcome: {
        event: "payment.paid",
        provider: "wechatpay",
        outTradeNo,
        tradeState: "SUCCESS",
        amount: { total: 1999, currency: "CNY" },
        metadata: { cart: 1 },
      },
    });
    expect(payment.polls).toBeGreaterThanOrEqual(1);
    expect(payment.nextPollAt).toBeUndefined();
  });

  it("stopPayment stops the watch (it reads stopped); stopping it again succeeds", async () => {
    const { dq, sent } = client();
    const outTradeNo = `ali-${uid()}`;
    await dq.watchPayment({
      provider: "alipay",
      account: "sandbox",
      outTradeNo,
      notify: [`results-${uid()}`],
      schedule: HOURLY,
    });
    await expect(dq.stopPayment("alipay", "sandbox", outTradeNo)).resolves.toBeUndefined();
    expect(sent[1]).toMatchObject({
      method: "DELETE",
      url: `${BASE}/v1/payments/alipay/sandbox/${outTradeNo}`,
    });
    const stopped = await dq.getPayment("alipay", "sandbox", outTradeNo);
    expect(stopped).toMatchObject({ outTradeNo, state: "stopped" });
    expect(stopped.nextPollAt).toBeUndefined();
    await expect(dq.stopPayment("alipay", "sandbox", outTradeNo)).resolves.toBeUndefined();
    expect((await dq.getPayment("alipay", "sandbox", outTradeNo)).state).toBe("stopped");
    // Watching a stopped order again answers the stopped watch.
    const again = await dq.watchPayment({
      provider: "alipay",
      account: "sandbox",
      outTradeNo,
      notify: [`results-${uid()}`],
    });
    expect(again).toMatchObject({ created: false, payment: { state: "stopped" } });
  });

  it("a watch nobody started is payment_not_found (404), to getPayment and stopPayment", async () => {
    const { dq } = client();
    const no = `none-${uid()}`;
    const read = await failure(dq.getPayment("wechatpay", "sandbox", no));
    expect(read).toMatchObject({ code: "payment_not_found", status: 404 });
    const stop = await failure(dq.stopPayment("wechatpay", "sandbox", no));
    expect(stop).toMatchObject({ code: "payment_not_found", status: 404 });
  });

  it("a refused start throws the server's code; nothing is watched", async () => {
    const { dq } = client();
    const outTradeNo = `bad-${uid()}`;
    const notify = [`results-${uid()}`];
    const unknown = await failure(
      dq.watchPayment({ provider: "alipay", account: "no-such-account", outTradeNo, notify }),
    );
    expect(unknown).toMatchObject({ code: "unknown_account", status: 400 });
    expect(unknown.message).toContain("no-such-account");
    const provider = await failure(
      dq.watchPayment({
        provider: "paypal" as ProviderName,
        account: "sandbox",
        outTradeNo,
        notify,
      }),
    );
    expect(provider).toMatchObject({ code: "invalid_request", status: 400 });
    const noTopics = await failure(
      dq.watchPayment({ provider: "alipay", account: "sandbox", outTradeNo, notify: [] }),
    );
    expect(noTopics).toMatchObject({ code: "invalid_request", status: 400 });
    expect(noTopics.message).toContain("notify");
    const read = await failure(dq.getPayment("alipay", "sandbox", outTradeNo));
    expect(read.code).toBe("payment_not_found");
  });

  it("a token limited to other topics may not watch for them (forbidden, 403)", async () => {
    const { dq } = client(SHOP);
    const error = await failure(
      dq.watchPayment({
        provider: "alipay",
        account: "sandbox",
        outTradeNo: `scoped-${uid()}`,
        notify: ["shop.results", "billing"],
        schedule: HOURLY,
      }),
    );
    expect(error).toMatchObject({ code: "forbidden", status: 403 });
  });

  it('"." and ".." are refused before sending, as for job ids', async () => {
    const { dq, sent } = client();
    const dot = await failure(dq.getPayment("alipay", "sandbox", ".."));
    expect(dot).toMatchObject({ code: "invalid_request", status: 0 });
    const account = await failure(dq.stopPayment("alipay", ".", "order-1"));
    expect(account).toMatchObject({ code: "invalid_request", status: 0 });
    expect(sent).toEqual([]);
  });
});

describe("refund watches", () => {
  it("watchRefund starts a watch (created: true); starting it again answers it as it is", async () => {
    const { dq, sent } = client();
    const outRefundNo = `rf-${uid()}`;
    const notify = [`refunds-${uid()}`];
    const watch = {
      provider: "alipay" as const,
      account: "sandbox",
      outRefundNo,
      outTradeNo: `o-${uid()}`,
      notify,
      schedule: HOURLY,
      metadata: { ticket: 9 },
    };
    const first = await dq.watchRefund(watch);
    expect(first).toEqual({
      created: true,
      refund: {
        provider: "alipay",
        account: "sandbox",
        outRefundNo,
        outTradeNo: watch.outTradeNo,
        state: "polling",
        polls: 0,
        nextPollAt: first.refund.createdAt + 3_600_000,
        createdAt: expect.any(Number),
        deadline: first.refund.createdAt + 7 * 24 * 3_600_000,
        notify,
        metadata: { ticket: 9 },
      },
    });
    expect(sent[0]).toMatchObject({ method: "POST", url: `${BASE}/v1/refunds`, body: watch });
    expect(await dq.watchRefund({ ...watch, metadata: 1 })).toEqual({
      created: false,
      refund: first.refund,
    });
  });

  it("getRefund reads a polled watch's last answer and outcome once it succeeded", async () => {
    const { dq, sent } = client();
    const order = `o-${uid()}`;
    const outRefundNo = `rf@${uid()}|1`;
    wechat.createTrade(order, { total: 800 });
    wechat.pay(order);
    wechat.createRefund(order, outRefundNo, { refund: 300 });
    await dq.watchRefund({
      provider: "wechatpay",
      account: "sandbox",
      outRefundNo,
      notify: [`refunds-${uid()}`],
      schedule: [1],
    });
    wechat.setRefundStatus(outRefundNo, "SUCCESS");
    const deadline = Date.now() + 10_000;
    let refund = await dq.getRefund("wechatpay", "sandbox", outRefundNo);
    while (refund.state === "polling" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      await service.scheduler.tick(service.runs.tick({}));
      refund = await dq.getRefund("wechatpay", "sandbox", outRefundNo);
    }
    expect(refund).toMatchObject({
      state: "succeeded",
      lastAnswer: { status: "SUCCESS", at: expect.any(Number) },
      outcome: {
        event: "refund.succeeded",
        outRefundNo,
        outTradeNo: order,
        status: "SUCCESS",
        amount: { refund: 300, total: 800, currency: "CNY" },
      },
    });
    // Its number is one path segment: "@" and "|" encoded.
    expect(sent[1]?.url).toBe(
      `${BASE}/v1/refunds/wechatpay/sandbox/${encodeURIComponent(outRefundNo)}`,
    );
  });

  it("stopRefund stops it (stopped); a refund nobody watches is refund_not_found; bad input throws the server's code", async () => {
    const { dq, sent } = client();
    const outRefundNo = `rf-${uid()}`;
    await dq.watchRefund({
      provider: "wechatpay",
      account: "sandbox",
      outRefundNo,
      notify: [`refunds-${uid()}`],
      schedule: HOURLY,
    });
    await expect(dq.stopRefund("wechatpay", "sandbox", outRefundNo)).resolves.toBeUndefined();
    expect(sent[1]).toMatchObject({
      method: "DELETE",
      url: `${BASE}/v1/refunds/wechatpay/sandbox/${outRefundNo}`,
    });
    expect((await dq.getRefund("wechatpay", "sandbox", outRefundNo)).state).toBe("stopped");
    const missing = await failure(dq.getRefund("wechatpay", "sandbox", `none-${uid()}`));
    expect(missing).toMatchObject({ code: "refund_not_found", status: 404 });
    const stopMissing = await failure(dq.stopRefund("alipay", "sandbox", `none-${uid()}`));
    expect(stopMissing).toMatchObject({ code: "refund_not_found", status: 404 });
    const noTrade = await failure(
      dq.watchRefund({
        provider: "alipay",
        account: "sandbox",
        outRefundNo: `rf-${uid()}`,
        notify: ["r"],
      }),
    );
    expect(noTrade).toMatchObject({ code: "invalid_request", status: 400 });
    expect(noTrade.message).toContain("outTradeNo");
    const unknown = await failure(
      dq.watchRefund({ provider: "wechatpay", account: "nope", outRefundNo: "r1", notify: ["r"] }),
    );
    expect(unknown).toMatchObject({ code: "unknown_account", status: 400 });
  });
});

describe("updateTopic", () => {
  it("changes the fields given, removes those set to null and keeps the rest", async () => {
    const { client: dq, sent } = setup();
    await dq.configureTopic("patched", { ttr: 30, maxAttempts: 5, backoff: [5, 30] });
    const changed = await dq.updateTopic("patched", { paused: true, ttr: null });
    expect(changed).toEqual({ maxAttempts: 5, backoff: [5, 30], paused: true });
    expect(sent[1]).toMatchObject({
      method: "PATCH",
      url: `${BASE}/v1/topics/patched`,
      body: { paused: true, ttr: null },
    });
    expect((await dq.topic("patched")).config).toEqual(changed);
    // Left out is kept: an empty patch changes nothing.
    expect(await dq.updateTopic("patched", {})).toEqual(changed);
    // Defaults are filled in as for a PUT; the patched config takes effect.
    const backoff = await dq.updateTopic("patched", {
      backoff: { type: "exponential", delay: 1 },
      paused: null,
    });
    expect(backoff).toEqual({
      maxAttempts: 5,
      backoff: { type: "exponential", delay: 1, factor: 2 },
    });
    const { job } = await dq.add({ topic: "patched" });
    expect(job).toMatchObject({ ttr: 60, maxAttempts: 5 });
    expect((await dq.pop("patched")).map((j) => j.id)).toEqual([job.id]);
  });

  it("a push config given by PATCH keeps the rest; a later patch keeps the push", async () => {
    const { client: dq } = setup();
    await dq.configureTopic("patched-push", { ttr: 20 });
    const pushed = await dq.updateTopic("patched-push", {
      push: { url: "https://shop.example/hooks", secret: "patch-secret-0123456789" },
    });
    expect(pushed).toEqual({
      ttr: 20,
      push: {
        url: "https://shop.example/hooks",
        via: "direct",
        timeout: 15,
        // A secret given by the caller is never echoed.
        secret: "…6789",
      },
    });
    expect(await dq.updateTopic("patched-push", { paused: true })).toEqual({
      ...pushed,
      paused: true,
    });
    expect(await dq.updateTopic("patched-push", { push: null })).toEqual({
      ttr: 20,
      paused: true,
    });
  });

  it("a misspelt field is invalid_request (400), and the config is unchanged", async () => {
    const { client: dq } = setup();
    await dq.configureTopic("patched-typo", { ttr: 30 });
    const error = await failure(
      dq.updateTopic("patched-typo", { tttr: 5 } as unknown as { ttr: number }),
    );
    expect(error).toMatchObject({ code: "invalid_request", status: 400 });
    expect(error.message).toContain("tttr");
    expect((await dq.topic("patched-typo")).config).toEqual({ ttr: 30 });
  });

  it("a token limited to other topics may not patch one (forbidden, 403)", async () => {
    const { client: dq } = setup({ token: SHOP_A });
    const error = await failure(dq.updateTopic("billing", { paused: true }));
    expect(error).toMatchObject({ code: "forbidden", status: 403 });
    expect((await dq.updateTopic("shop-a.orders", { paused: true })).paused).toBe(true);
  });
});
