// Issue 11's black-box suite: payment (and refund) watches of `npm run dev` (the worker in wrangler
// dev) driven from outside over HTTP, against Alipay and WeChat Pay stand-ins of this suite's own
// (dev/'s sandboxes, started here: each checks every request's signature with node:crypto or the
// official SDK, independently of src/), given to the stack through DQ_ALIPAY_ACCOUNTS /
// DQ_WECHATPAY_ACCOUNTS. Outcomes are read by pop from pull topics and by a receiver of ours from
// push topics (delayq-signature checked with node:crypto, QStash's with the real Receiver). The
// stack's cron keeps its default (once a minute): every poll here must come on time without it.
import { Receiver as QStashReceiver } from "@upstash/qstash";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import {
  checkDelayqSignature,
  eventually,
  type Receiver,
  type Stack,
  sleep,
  startReceiver,
  startStack,
} from "./support";

let stack: Stack;
let rx: Receiver;
let qstash: QStashReceiver;
/** Our stand-ins: `shop` for most tests, `flaky` for injected faults (their queues are global). */
let alipay: AlipaySandbox;
let alipayFlaky: AlipaySandbox;
let wechat: WechatPaySandbox;
let wechatFlaky: WechatPaySandbox;
let wechatCert: WechatPaySandbox;
const suiteStarted = Date.now();
const SECRET = "bb-pay-secret-0123456789";

beforeAll(async () => {
  rx = await startReceiver();
  [alipay, alipayFlaky, wechat, wechatFlaky, wechatCert] = await Promise.all([
    startAlipaySandbox(),
    startAlipaySandbox(),
    startWechatPaySandbox({ mode: "publicKey" }),
    startWechatPaySandbox({ mode: "publicKey" }),
    startWechatPaySandbox({ mode: "certificate" }),
  ]);
  const alipayAccounts = {
    shop: alipay.account,
    shopv3: { ...alipay.account, api: "v3" },
    flaky: alipayFlaky.account,
    // An app id the gateway does not know: a configuration error, not a transient one.
    badapp: { ...alipay.account, appId: "2021000000009999" },
  };
  const wechatAccounts = {
    shop: wechat.account,
    flaky: wechatFlaky.account,
    shopcert: wechatCert.account,
  };
  stack = await startStack({
    DQ_ALIPAY_ACCOUNTS: JSON.stringify(alipayAccounts),
    DQ_WECHATPAY_ACCOUNTS: JSON.stringify(wechatAccounts),
  });
  qstash = new QStashReceiver({
    currentSigningKey: stack.info.qstashCurrentSigningKey,
    nextSigningKey: stack.info.qstashNextSigningKey,
  });
}, 150_000);

afterAll(async () => {
  const restarted = await stack?.restarted();
  if (restarted) console.warn(`the worker restarted during the suite (isolate ${restarted})`);
  await stack?.stop();
  await rx?.close();
  await Promise.all([alipay, alipayFlaky, wechat, wechatFlaky, wechatCert].map((s) => s?.close()));
  const up = stack ? `, the stack up in ${(stack.startMs / 1000).toFixed(1)} s` : "";
  console.log(`payments suite: ${((Date.now() - suiteStarted) / 1000).toFixed(1)} s in all${up}`);
}, 60_000);

type Provider = "alipay" | "wechatpay";

async function watch(input: Record<string, unknown>, expected = 201) {
  const res = await stack.api("POST", "/v1/payments", input);
  expect(res.status, res.text).toBe(expected);
  return res.json as { created: boolean; payment: Record<string, any> };
}

async function readWatch(provider: Provider, account: string, no: string) {
  const res = await stack.api("GET", `/v1/payments/${provider}/${account}/${no}`);
  expect(res.status, res.text).toBe(200);
  return res.json.payment as Record<string, any>;
}

/** Polls a watch until it leaves `polling` (or the time runs out). */
function settled(provider: Provider, account: string, no: string, timeoutMs = 10_000) {
  return eventually(
    () => readWatch(provider, account, no),
    (p) => p.state !== "polling",
    timeoutMs,
  );
}

/** Every job a pull topic holds now (popped, then finished). */
async function drain(topic: string): Promise<Record<string, any>[]> {
  const res = await stack.api("POST", `/v1/topics/${topic}/pop`, { count: 100 });
  expect(res.status, res.text).toBe(200);
  for (const job of res.json.jobs) {
    await stack.api("POST", `/v1/jobs/${job.id}/finish`, { receipt: job.receipt });
  }
  return res.json.jobs;
}

/** The API's notification endpoints, as a provider reaches them. */
const notifyUrl = (provider: Provider, account: string) =>
  `${stack.info.apiUrl}/v1/notify/${provider}/${account}`;

/** The stand-in's query requests for one order (Alipay by biz_content, WeChat Pay by path). */
function alipayRequests(sandbox: AlipaySandbox, no: string) {
  return sandbox
    .requests()
    .filter((r) => (r.bizContent as { out_trade_no?: string } | undefined)?.out_trade_no === no);
}
function wechatRequests(sandbox: WechatPaySandbox, no: string) {
  return sandbox.requests().filter((r) => r.path.includes(`/out-trade-no/${no}`));
}

describe("payment watches from outside: bad input", () => {
  it("refuses bad watches with a stable code and a message naming the field; stores nothing", async () => {
    const good = { provider: "alipay", account: "shop", outTradeNo: "bb-bad-1", notify: ["t"] };
    const cases: [Record<string, unknown> | string, number, string, RegExp][] = [
      [{ ...good, account: "nobody" }, 400, "unknown_account", /DQ_ALIPAY_ACCOUNTS.*"shop"/],
      [
        { ...good, provider: "wechatpay", account: "badapp" },
        400,
        "unknown_account",
        /DQ_WECHATPAY_ACCOUNTS/,
      ],
      [{ ...good, provider: "paypal" }, 400, "invalid_request", /provider/],
      [{ ...good, outTradeNo: undefined }, 400, "invalid_request", /outTradeNo/],
      [{ ...good, outTradeNo: "has space" }, 400, "invalid_request", /outTradeNo/],
      [{ ...good, outTradeNo: "x".repeat(65) }, 400, "invalid_request", /outTradeNo/],
      [{ ...good, notify: [] }, 400, "invalid_request", /notify/],
      [
        { ...good, notify: Array.from({ length: 11 }, (_, i) => `t${i}`) },
        400,
        "invalid_request",
        /notify/,
      ],
      [{ ...good, notify: ["bad topic"] }, 400, "invalid_request", /notify/],
      [{ ...good, notify: undefined }, 400, "invalid_request", /notify/],
      [{ ...good, schedule: "weekly" }, 400, "invalid_request", /schedule/],
      [{ ...good, schedule: [-5] }, 400, "invalid_request", /schedule/],
      // A floor under the polls (DQ_MIN_POLL_MS, 1 s here): [0] polled ~115 times a second.
      [{ ...good, schedule: [0] }, 400, "invalid_request", /schedule: .*at least 1 s/],
      [{ ...good, schedule: [60, 0.5] }, 400, "invalid_request", /at least 1 s/],
      [
        { ...good, schedule: { type: "exponential", delay: 0.001 } },
        400,
        "invalid_request",
        /at least 1 s/,
      ],
      [{ ...good, schedule: "youzan" }, 400, "invalid_request", /at least 1 s/],
      [
        { ...good, notify: ["t", "u", "t"] },
        400,
        "invalid_request",
        /notify: name each topic once/,
      ],
      [{ ...good, metadata: "x".repeat(16_384) }, 413, "payload_too_large", /metadata is 16386/],
      [{ ...good, deadline: Date.now() - 1000 }, 400, "invalid_request", /deadline/],
      [{ ...good, deadline: "next tuesday" }, 400, "invalid_request", /deadline/],
      [{ ...good, closeOnDeadline: "yes" }, 400, "invalid_request", /closeOnDeadline/],
      [{ ...good, dealine: Date.now() + 60_000 }, 400, "invalid_request", /dealine/],
      ['{"provider": "alipay", ', 400, "invalid_request", /JSON/i],
    ];
    for (const [body, status, code, message] of cases) {
      const res = await stack.api("POST", "/v1/payments", body);
      const label = typeof body === "string" ? body : JSON.stringify(body);
      expect(res.status, `${label}: ${res.text}`).toBe(status);
      expect(res.json.error.code, label).toBe(code);
      expect(res.json.error.message, label).toMatch(message);
      expect(res.text).not.toMatch(/\n\s+at |\.ts:\d+/);
    }
    const unauthorized = await stack.api("POST", "/v1/payments", good, { token: null });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.json.error.code).toBe("unauthorized");
    const wrong = await stack.api("POST", "/v1/payments", good, { token: "not-the-token" });
    expect(wrong.status).toBe(401);
    // Nothing was stored by any of them.
    for (const path of ["alipay/shop/bb-bad-1", "alipay/nobody/bb-bad-1"]) {
      const res = await stack.api("GET", `/v1/payments/${path}`);
      expect(res.status, path).toBe(404);
      expect(res.json.error.code).toBe("payment_not_found");
    }
    const stop = await stack.api("DELETE", "/v1/payments/wechatpay/shop/bb-never");
    expect(stop.status).toBe(404);
    expect(stop.json.error.code).toBe("payment_not_found");
    const badProvider = await stack.api("GET", "/v1/payments/paypal/shop/bb-bad-1");
    expect(badProvider.status).toBe(400);
    expect(badProvider.json.error.code).toBe("invalid_request");
    expect(alipayRequests(alipay, "bb-bad-1")).toHaveLength(0);
  });

  it("answers notifications for an account it does not have as for one whose notification does not verify", async () => {
    // A token-less caller learns no account names: "nobody" is answered as "shop" is.
    const send = async (provider: Provider, account: string, init: RequestInit) => {
      const res = await fetch(notifyUrl(provider, account), { method: "POST", ...init });
      return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
    };
    const form = {
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "out_trade_no=x&trade_status=TRADE_SUCCESS",
    };
    const ali = await send("alipay", "nobody", form);
    expect(ali).toMatchObject({ status: 400, body: "fail" });
    expect(await send("alipay", "shop", form)).toEqual(ali);
    const json = { headers: { "content-type": "application/json" }, body: "{}" };
    const wx = await send("wechatpay", "nobody", json);
    expect(wx.status).toBe(401);
    expect(JSON.parse(wx.body)).toMatchObject({ code: "FAIL" });
    expect(await send("wechatpay", "shop", json)).toEqual(wx);
  });
});

describe("payment watches from outside: transient errors (started now, checked below)", () => {
  it("starts watches of paid orders whose first answers are faults, bad signatures first", async () => {
    alipayFlaky.createTrade("bb-flaky-a", { totalAmount: "3.00" });
    alipayFlaky.pay("bb-flaky-a");
    // Each answer signed with a key that is not Alipay's says TRADE_SUCCESS: it must not count.
    alipayFlaky.inject("badSignature");
    alipayFlaky.inject("5xx");
    alipayFlaky.inject("systemError");
    alipayFlaky.inject("timeout"); // held 30 s; delayq gives up after 10 s
    wechatFlaky.createTrade("bb-flaky-w", { total: 300 });
    wechatFlaky.pay("bb-flaky-w");
    wechatFlaky.inject("badSignature");
    wechatFlaky.inject("staleTimestamp");
    wechatFlaky.inject("5xx");
    wechatFlaky.inject("429");
    for (const [provider, no] of [
      ["alipay", "bb-flaky-a"],
      ["wechatpay", "bb-flaky-w"],
    ] as const) {
      const { payment } = await watch({
        provider,
        account: "flaky",
        outTradeNo: no,
        schedule: [1],
        notify: ["bb-flaky"],
      });
      expect(payment.state).toBe("polling");
    }
  });
});

// Independent watches (their own orders and topics), so run side by side to keep the suite short.
describe.concurrent("payment watches from outside: outcomes by poll", () => {
  it("paid: Alipay (classic and v3) and WeChat Pay (public key and certificates), the outcome in a pull topic", async () => {
    const orders = [
      {
        provider: "alipay",
        account: "shop",
        no: "bb-paid-a",
        total: 1234,
        tradeState: "TRADE_SUCCESS",
      },
      {
        provider: "alipay",
        account: "shopv3",
        no: "bb-paid-a3",
        total: 1,
        tradeState: "TRADE_SUCCESS",
      },
      {
        provider: "wechatpay",
        account: "shop",
        no: "bb-paid-w",
        total: 1999,
        tradeState: "SUCCESS",
      },
      {
        provider: "wechatpay",
        account: "shopcert",
        no: "bb-paid-wc",
        total: 5,
        tradeState: "SUCCESS",
      },
    ] as const;
    const tradeNos: Record<string, string> = {};
    for (const o of orders) {
      if (o.provider === "alipay") {
        tradeNos[o.no] = alipay.createTrade(o.no, {
          totalAmount: (o.total / 100).toFixed(2),
        }).tradeNo;
      } else {
        const sandbox = o.account === "shop" ? wechat : wechatCert;
        tradeNos[o.no] = sandbox.createTrade(o.no, { total: o.total }).transactionId;
      }
    }
    const metadata = { orderId: "4200001234567890123", note: "wörld/" };
    const started: Record<string, Record<string, any>> = {};
    for (const o of orders) {
      const answer = await watch({
        provider: o.provider,
        account: o.account,
        outTradeNo: o.no,
        schedule: [1],
        notify: [`bb-paid-${o.provider}`],
        metadata,
      });
      expect(answer.created).toBe(true);
      const p = answer.payment;
      expect(p).toMatchObject({
        provider: o.provider,
        account: o.account,
        outTradeNo: o.no,
        state: "polling",
        polls: 0,
        notify: [`bb-paid-${o.provider}`],
        metadata,
      });
      expect(p.nextPollAt - p.createdAt).toBe(1000);
      expect(p.deadline - p.createdAt).toBe(24 * 3600_000);
      started[o.no] = p;
    }
    // The first polls find the orders unpaid: still polling, the provider's word recorded.
    for (const o of orders) {
      const p = await eventually(
        () => readWatch(o.provider, o.account, o.no),
        (w) => w.polls >= 1,
        6000,
      );
      expect(p.state, o.no).toBe("polling");
      expect(p.lastAnswer.tradeState, o.no).toBe(
        o.provider === "alipay" ? "WAIT_BUYER_PAY" : "NOTPAY",
      );
    }
    for (const o of orders) {
      if (o.provider === "alipay") alipay.pay(o.no);
      else (o.account === "shop" ? wechat : wechatCert).pay(o.no);
    }
    for (const o of orders) {
      const p = await settled(o.provider, o.account, o.no);
      expect(p.state, o.no).toBe("paid");
      expect(p.outcome).toMatchObject({ event: "payment.paid", source: "poll" });
    }
    for (const provider of ["alipay", "wechatpay"] as const) {
      const jobs = await drain(`bb-paid-${provider}`);
      const mine = orders.filter((o) => o.provider === provider);
      expect(jobs).toHaveLength(mine.length);
      for (const o of mine) {
        const job = jobs.find((j) => j.body.outTradeNo === o.no);
        expect(job, o.no).toBeDefined();
        const outcome = job?.body;
        expect(Object.keys(outcome)).toEqual([
          "event",
          "provider",
          "account",
          "outTradeNo",
          "tradeNo",
          "tradeState",
          "amount",
          "paidAt",
          "source",
          "polls",
          "metadata",
        ]);
        expect(outcome).toEqual({
          event: "payment.paid",
          provider: o.provider,
          account: o.account,
          outTradeNo: o.no,
          tradeNo: tradeNos[o.no],
          tradeState: o.tradeState,
          amount: { total: o.total, currency: "CNY" },
          paidAt: expect.any(Number),
          source: "poll",
          polls: expect.any(Number),
          metadata,
        });
        expect(outcome.polls).toBeGreaterThanOrEqual(2);
        // Paid within the last minute (Alipay writes seconds, Beijing time).
        expect(Math.abs(outcome.paidAt - Date.now())).toBeLessThan(60_000);
        const watchNow = await readWatch(o.provider, o.account, o.no);
        expect(watchNow.outcome).toEqual(outcome);
      }
    }
    // Each first query came a whole step after its watch started, never before, and on time
    // without the cron (which comes once a minute).
    for (const o of orders) {
      const first =
        o.provider === "alipay"
          ? alipayRequests(alipay, o.no)[0]
          : wechatRequests(o.account === "shop" ? wechat : wechatCert, o.no)[0];
      const due = (started[o.no]?.createdAt ?? 0) + 1000;
      expect(first?.at, o.no).toBeGreaterThanOrEqual(due);
      expect(first?.at, o.no).toBeLessThan(due + 3000);
    }
    // Nothing more in the topics, and no more queries once paid.
    await sleep(1500);
    for (const provider of ["alipay", "wechatpay"])
      expect(await drain(`bb-paid-${provider}`)).toEqual([]);
    const polled = alipayRequests(alipay, "bb-paid-a").length;
    await sleep(1200);
    expect(alipayRequests(alipay, "bb-paid-a")).toHaveLength(polled);
  });

  it("closed, failed, and paid by other words: CLOSED, REVOKED; PAYERROR, a bad app id; REFUND, TRADE_FINISHED", async () => {
    alipay.createTrade("bb-closed-a");
    alipay.close("bb-closed-a");
    for (const no of ["bb-closed-w", "bb-revoked-w", "bb-payerror-w", "bb-refund-w"]) {
      wechat.createTrade(no, { total: 88 });
    }
    wechat.close("bb-closed-w");
    wechat.setState("bb-revoked-w", "REVOKED");
    wechat.setState("bb-payerror-w", "PAYERROR");
    wechat.pay("bb-refund-w");
    wechat.refund("bb-refund-w");
    alipay.createTrade("bb-badapp");
    alipay.createTrade("bb-finished-a");
    alipay.pay("bb-finished-a", { finished: true });
    const expected = [
      ["alipay", "shop", "bb-closed-a", "closed", "TRADE_CLOSED"],
      ["wechatpay", "shop", "bb-closed-w", "closed", "CLOSED"],
      ["wechatpay", "shop", "bb-revoked-w", "closed", "REVOKED"],
      ["wechatpay", "shop", "bb-payerror-w", "failed", "PAYERROR"],
      ["wechatpay", "shop", "bb-refund-w", "paid", "REFUND"],
      ["alipay", "shop", "bb-finished-a", "paid", "TRADE_FINISHED"],
      ["alipay", "badapp", "bb-badapp", "failed", /invalid-app-id|AppID/i],
    ] as const;
    for (const [provider, account, no] of expected) {
      await watch({
        provider,
        account,
        outTradeNo: no,
        schedule: [1],
        notify: ["bb-ended"],
        metadata: no,
      });
    }
    for (const [provider, account, no, state, tradeState] of expected) {
      const p = await settled(provider, account, no);
      expect(p.state, no).toBe(state);
      expect(p.outcome.event, no).toBe(`payment.${state}`);
      expect(p.outcome.tradeState, no).toMatch(
        typeof tradeState === "string" ? new RegExp(`^${tradeState}$`) : tradeState,
      );
      expect(p.polls, no).toBe(1);
    }
    const jobs = await drain("bb-ended");
    expect(jobs.map((j) => j.body.metadata).sort()).toEqual(expected.map((e) => e[2]).sort());
    const refund = jobs.find((j) => j.body.outTradeNo === "bb-refund-w")?.body;
    expect(refund?.amount).toEqual({ total: 88, currency: "CNY" });
    // A configuration error stops the watch: one query, no retries.
    await sleep(1500);
    expect(alipayRequests(alipay, "bb-badapp")).toHaveLength(1);
  });

  it("expired: at the deadline, closing the order when asked; a close refused because it was paid ends paid", async () => {
    const deadline = Date.now() + 2500;
    alipay.createTrade("bb-exp-a");
    alipay.createTrade("bb-exp-close-a");
    wechat.createTrade("bb-exp-close-w", { total: 10 });
    alipay.createTrade("bb-exp-paid-a", { totalAmount: "7.00" });
    const specs = [
      ["alipay", "bb-exp-a", false, [1]],
      ["alipay", "bb-exp-close-a", true, [1]],
      ["wechatpay", "bb-exp-close-w", true, [1]],
      // First poll due after the deadline: the deadline's close is the first call.
      ["alipay", "bb-exp-paid-a", true, [30]],
    ] as const;
    for (const [provider, no, closeOnDeadline, schedule] of specs) {
      const { payment } = await watch({
        provider,
        account: "shop",
        outTradeNo: no,
        schedule,
        deadline: new Date(deadline).toISOString(),
        closeOnDeadline,
        notify: ["bb-expired"],
      });
      expect(payment.deadline).toBe(deadline);
    }
    await sleep(800);
    alipay.pay("bb-exp-paid-a"); // paid before the deadline, no notification sent
    const results: Record<string, Record<string, any>> = {};
    for (const [provider, no] of specs) results[no] = await settled(provider, "shop", no, 8000);

    expect(results["bb-exp-a"]).toMatchObject({
      state: "expired",
      outcome: { event: "payment.expired", tradeState: "WAIT_BUYER_PAY", source: "poll" },
    });
    expect(alipay.trade("bb-exp-a")?.status).toBe("WAIT_BUYER_PAY");
    expect(alipayRequests(alipay, "bb-exp-a").some((r) => r.method_ === "alipay.trade.close")).toBe(
      false,
    );

    expect(results["bb-exp-close-a"]).toMatchObject({
      state: "expired",
      outcome: { event: "payment.expired", tradeState: "TRADE_CLOSED" },
    });
    expect(alipay.trade("bb-exp-close-a")?.status).toBe("TRADE_CLOSED");
    const close = alipayRequests(alipay, "bb-exp-close-a").find(
      (r) => r.method_ === "alipay.trade.close",
    );
    expect(close?.verified).toBe(true);
    expect(close?.at).toBeGreaterThanOrEqual(deadline);

    expect(results["bb-exp-close-w"]).toMatchObject({
      state: "expired",
      outcome: { event: "payment.expired", tradeState: "CLOSED" },
    });
    expect(wechat.trade("bb-exp-close-w")?.state).toBe("CLOSED");
    const wxClose = wechat
      .requests()
      .find((r) => r.path.endsWith("/out-trade-no/bb-exp-close-w/close"));
    expect(wxClose).toMatchObject({ method: "POST", verified: true, status: 204 });
    expect(wxClose?.at).toBeGreaterThanOrEqual(deadline);

    // The close was refused (the order was paid): one more query found it paid.
    expect(results["bb-exp-paid-a"]).toMatchObject({
      state: "paid",
      outcome: {
        event: "payment.paid",
        tradeState: "TRADE_SUCCESS",
        amount: { total: 700, currency: "CNY" },
      },
    });
    expect(alipay.trade("bb-exp-paid-a")?.status).toBe("TRADE_SUCCESS");
    expect(
      alipayRequests(alipay, "bb-exp-paid-a").map((r) => [r.method_, r.subCode ?? r.code]),
    ).toEqual([
      ["alipay.trade.close", "ACQ.TRADE_STATUS_ERROR"],
      ["alipay.trade.query", "10000"],
    ]);

    const events = (await drain("bb-expired")).map((j) => `${j.body.outTradeNo} ${j.body.event}`);
    expect(events.sort()).toEqual([
      "bb-exp-a payment.expired",
      "bb-exp-close-a payment.expired",
      "bb-exp-close-w payment.expired",
      "bb-exp-paid-a payment.paid",
    ]);
  });

  it("is idempotent by (provider, account, outTradeNo); DELETE stops polling and reads stopped", async () => {
    alipay.createTrade("bb-idem");
    const first = await watch({
      provider: "alipay",
      account: "shop",
      outTradeNo: "bb-idem",
      schedule: [1],
      notify: ["bb-idem"],
      metadata: { v: 1 },
    });
    expect(first.created).toBe(true);
    const again = await watch(
      {
        provider: "alipay",
        account: "shop",
        outTradeNo: "bb-idem",
        schedule: [5],
        notify: ["bb-idem-other"],
        metadata: { v: 2 },
      },
      200,
    );
    expect(again.created).toBe(false);
    expect(again.payment).toMatchObject({
      createdAt: first.payment.createdAt,
      deadline: first.payment.deadline,
      notify: ["bb-idem"],
      metadata: { v: 1 },
    });
    // Another account (same order number, same provider keys): another watch.
    const other = await watch({
      provider: "alipay",
      account: "shopv3",
      outTradeNo: "bb-idem",
      schedule: [1],
      notify: ["bb-idem"],
    });
    expect(other.created).toBe(true);
    await eventually(
      () => readWatch("alipay", "shop", "bb-idem"),
      (p) => p.polls >= 1,
      5000,
    );
    const stop = await stack.api("DELETE", "/v1/payments/alipay/shop/bb-idem");
    expect(stop.status).toBe(200);
    expect(stop.json).toEqual({ deleted: true });
    const stopped = await readWatch("alipay", "shop", "bb-idem");
    expect(stopped.state).toBe("stopped");
    expect(stopped.nextPollAt).toBeUndefined();
    const again2 = await stack.api("DELETE", "/v1/payments/alipay/shop/bb-idem");
    expect(again2.status).toBe(200);
    const restart = await watch(
      { provider: "alipay", account: "shop", outTradeNo: "bb-idem", notify: ["bb-idem"] },
      200,
    );
    expect(restart).toMatchObject({ created: false, payment: { state: "stopped" } });
    // The shopv3 watch ends paid; shop's, stopped, asks no more and tells nobody.
    alipay.pay("bb-idem");
    const v3 = await settled("alipay", "shopv3", "bb-idem");
    expect(v3.state).toBe("paid");
    // A query already under way when the watch stopped may still land; none after it.
    const classic = () => alipayRequests(alipay, "bb-idem").filter((r) => r.api === "classic");
    await sleep(300);
    const queried = classic().length;
    await sleep(1500);
    expect(classic()).toHaveLength(queried);
    const jobs = await drain("bb-idem");
    expect(jobs.map((j) => j.body.account)).toEqual(["shopv3"]);
    // An ended watch answers as it is, outcome and all.
    const paidAgain = await watch(
      { provider: "alipay", account: "shopv3", outTradeNo: "bb-idem", notify: ["bb-idem"] },
      200,
    );
    expect(paidAgain.payment).toMatchObject({ state: "paid", outcome: v3.outcome });
    expect(await drain("bb-idem")).toEqual([]);
  });
});

describe.concurrent("payment watches from outside: notifications", () => {
  it("a verified notification settles the watch at once (source notify), once, before any poll", async () => {
    alipay.createTrade("bb-notify-a", { totalAmount: "20.00" });
    wechat.createTrade("bb-notify-w", { total: 2000 });
    for (const [provider, no] of [
      ["alipay", "bb-notify-a"],
      ["wechatpay", "bb-notify-w"],
    ] as const) {
      await watch({
        provider,
        account: "shop",
        outTradeNo: no,
        schedule: [30],
        notify: ["bb-notified"],
      });
    }
    alipay.pay("bb-notify-a");
    wechat.pay("bb-notify-w");
    const ali = await alipay.notify("bb-notify-a", notifyUrl("alipay", "shop"));
    expect(ali).toEqual({ status: 200, text: "success" });
    const wx = await wechat.notify("bb-notify-w", notifyUrl("wechatpay", "shop"));
    expect(wx.status).toBe(204);
    // Settled by the time the notification was answered.
    for (const [provider, no, tradeState, total] of [
      ["alipay", "bb-notify-a", "TRADE_SUCCESS", 2000],
      ["wechatpay", "bb-notify-w", "SUCCESS", 2000],
    ] as const) {
      const p = await readWatch(provider, "shop", no);
      expect(p.state, no).toBe("paid");
      expect(p.polls, no).toBe(0);
      expect(p.outcome).toMatchObject({
        event: "payment.paid",
        tradeState,
        source: "notify",
        polls: 0,
        amount: { total, currency: "CNY" },
      });
    }
    // Providers resend: a second notification is acknowledged and changes nothing.
    expect(await alipay.notify("bb-notify-a", notifyUrl("alipay", "shop"))).toEqual({
      status: 200,
      text: "success",
    });
    expect((await wechat.notify("bb-notify-w", notifyUrl("wechatpay", "shop"))).status).toBe(204);
    const jobs = await drain("bb-notified");
    expect(jobs.map((j) => j.body.outTradeNo).sort()).toEqual(["bb-notify-a", "bb-notify-w"]);
    // The notification won: the provider was never queried.
    expect(alipayRequests(alipay, "bb-notify-a")).toHaveLength(0);
    expect(wechatRequests(wechat, "bb-notify-w")).toHaveLength(0);
  });

  it("an order the provider does not know yet is polled again, not failed (a QR trade appears at the scan)", async () => {
    for (const [provider, no] of [
      ["alipay", "bb-late-a"],
      ["wechatpay", "bb-late-w"],
    ] as const) {
      await watch({
        provider,
        account: "shop",
        outTradeNo: no,
        schedule: [1],
        notify: ["bb-late"],
      });
    }
    for (const [provider, no, word] of [
      ["alipay", "bb-late-a", /TRADE_NOT_EXIST/],
      ["wechatpay", "bb-late-w", /ORDER_NOT_EXIST/],
    ] as const) {
      const p = await eventually(
        () => readWatch(provider, "shop", no),
        (w) => w.polls >= 2,
        6000,
      );
      expect(p.state, no).toBe("polling");
      expect(p.lastAnswer.tradeState, no).toMatch(word);
    }
    alipay.createTrade("bb-late-a");
    alipay.pay("bb-late-a");
    wechat.createTrade("bb-late-w");
    wechat.pay("bb-late-w");
    for (const [provider, no] of [
      ["alipay", "bb-late-a"],
      ["wechatpay", "bb-late-w"],
    ] as const) {
      expect((await settled(provider, "shop", no)).state, no).toBe("paid");
    }
    expect((await drain("bb-late")).map((j) => j.body.event)).toEqual([
      "payment.paid",
      "payment.paid",
    ]);
  });

  it("a notification racing the poll: one outcome per order either way", async () => {
    const orders = Array.from({ length: 6 }, (_, i) => ({
      provider: i % 2 === 0 ? ("alipay" as const) : ("wechatpay" as const),
      no: `bb-race-${i}`,
      offset: 850 + i * 60, // around the first poll, due 1 s after the watch starts
    }));
    for (const o of orders) {
      if (o.provider === "alipay") alipay.createTrade(o.no);
      else wechat.createTrade(o.no);
    }
    await Promise.all(
      orders.map(async (o) => {
        await watch({
          provider: o.provider,
          account: "shop",
          outTradeNo: o.no,
          schedule: [1],
          notify: ["bb-race"],
        });
        if (o.provider === "alipay") alipay.pay(o.no);
        else wechat.pay(o.no);
        await sleep(o.offset);
        const sent =
          o.provider === "alipay"
            ? await alipay.notify(o.no, notifyUrl("alipay", "shop"))
            : await wechat.notify(o.no, notifyUrl("wechatpay", "shop"));
        expect(sent.status, o.no).toBeLessThan(300);
      }),
    );
    const sources: string[] = [];
    for (const o of orders) {
      const p = await settled(o.provider, "shop", o.no);
      expect(p.state, o.no).toBe("paid");
      sources.push(p.outcome.source);
    }
    await sleep(1500); // a second outcome would be in the topic by now
    const jobs = await drain("bb-race");
    expect(jobs.map((j) => j.body.outTradeNo).sort()).toEqual(orders.map((o) => o.no).sort());
    console.log(`notification vs poll race: outcomes by ${sources.join(", ")}`);
  });

  it("a notification for an order nobody watches is acknowledged and ignored", async () => {
    alipay.createTrade("bb-unwatched-a");
    alipay.pay("bb-unwatched-a");
    expect(await alipay.notify("bb-unwatched-a", notifyUrl("alipay", "shop"))).toEqual({
      status: 200,
      text: "success",
    });
    wechat.createTrade("bb-unwatched-w");
    wechat.pay("bb-unwatched-w");
    expect((await wechat.notify("bb-unwatched-w", notifyUrl("wechatpay", "shop"))).status).toBe(
      204,
    );
    for (const [provider, no] of [
      ["alipay", "bb-unwatched-a"],
      ["wechatpay", "bb-unwatched-w"],
    ]) {
      const res = await stack.api("GET", `/v1/payments/${provider}/shop/${no}`);
      expect(res.status).toBe(404);
    }
  });

  it("refuses notifications whose signature does not verify, and the watch goes on", async () => {
    alipay.createTrade("bb-forged-a", { totalAmount: "1.00" });
    alipay.pay("bb-forged-a");
    wechat.createTrade("bb-forged-w");
    wechat.pay("bb-forged-w");
    for (const [provider, no] of [
      ["alipay", "bb-forged-a"],
      ["wechatpay", "bb-forged-w"],
    ] as const) {
      await watch({
        provider,
        account: "shop",
        outTradeNo: no,
        schedule: [60],
        notify: ["bb-forged"],
      });
    }
    // Changed after signing.
    expect(
      await alipay.notify("bb-forged-a", notifyUrl("alipay", "shop"), { tamper: true }),
    ).toEqual({
      status: 400,
      text: "fail",
    });
    const tampered = await wechat.notify("bb-forged-w", notifyUrl("wechatpay", "shop"), {
      tamper: true,
    });
    expect(tampered.status).toBe(401);
    expect(JSON.parse(tampered.text)).toMatchObject({ code: "FAIL" });
    // WeChat Pay's signature probe must fail.
    const probe = await wechat.notify("bb-forged-w", notifyUrl("wechatpay", "shop"), {
      probe: true,
    });
    expect(probe.status).toBe(401);
    // Signed, but by another platform key: the stack's own sandbox accounts trust other keys.
    expect(await alipay.notify("bb-forged-a", notifyUrl("alipay", "sandbox"))).toEqual({
      status: 400,
      text: "fail",
    });
    expect((await wechat.notify("bb-forged-w", notifyUrl("wechatpay", "sandbox"))).status).toBe(
      401,
    );
    // A form with no signature at all.
    const unsigned = await fetch(notifyUrl("alipay", "shop"), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        out_trade_no: "bb-forged-a",
        trade_status: "TRADE_SUCCESS",
        total_amount: "1.00",
        app_id: alipay.account.appId,
      }).toString(),
    });
    expect(unsigned.status).toBe(400);
    expect(await unsigned.text()).toBe("fail");
    const noHeaders = await fetch(notifyUrl("wechatpay", "shop"), { method: "POST", body: "{}" });
    expect(noHeaders.status).toBe(401);
    for (const [provider, no] of [
      ["alipay", "bb-forged-a"],
      ["wechatpay", "bb-forged-w"],
    ] as const) {
      const p = await readWatch(provider, "shop", no);
      expect(p.state, no).toBe("polling");
    }
    expect(await drain("bb-forged")).toEqual([]);
    // The genuine one still settles it.
    expect(await alipay.notify("bb-forged-a", notifyUrl("alipay", "shop"))).toEqual({
      status: 200,
      text: "success",
    });
    expect((await readWatch("alipay", "shop", "bb-forged-a")).state).toBe("paid");
  });
});

describe("payment watches from outside: money and the closed loop", () => {
  it("a paid answer with another amount than expected ends mismatch, by poll or notification: never payment.paid", async () => {
    wechat.createTrade("bb-mis-w", { total: 1999 });
    wechat.pay("bb-mis-w");
    alipay.createTrade("bb-mis-a", { totalAmount: "5.00" });
    await watch({
      provider: "wechatpay",
      account: "shop",
      outTradeNo: "bb-mis-w",
      schedule: [1],
      amount: { total: 2999 },
      notify: ["bb-money"],
    });
    await watch({
      provider: "alipay",
      account: "shop",
      outTradeNo: "bb-mis-a",
      schedule: [30],
      amount: { total: 600, currency: "CNY" },
      notify: ["bb-money"],
    });
    alipay.pay("bb-mis-a");
    expect(await alipay.notify("bb-mis-a", notifyUrl("alipay", "shop"))).toEqual({
      status: 200,
      text: "success",
    });
    const w = await settled("wechatpay", "shop", "bb-mis-w", 8000);
    expect(w).toMatchObject({
      state: "mismatch",
      amount: { total: 2999, currency: "CNY" },
      outcome: {
        event: "payment.mismatch",
        amount: { total: 1999, currency: "CNY" },
        expected: { total: 2999, currency: "CNY" },
        source: "poll",
      },
    });
    expect(await readWatch("alipay", "shop", "bb-mis-a")).toMatchObject({
      state: "mismatch",
      outcome: {
        event: "payment.mismatch",
        amount: { total: 500, currency: "CNY" },
        expected: { total: 600, currency: "CNY" },
        source: "notify",
      },
    });
    const events = (await drain("bb-money")).map((j) => `${j.body.outTradeNo} ${j.body.event}`);
    expect(events.sort()).toEqual(["bb-mis-a payment.mismatch", "bb-mis-w payment.mismatch"]);
  });

  it("a payment after the watch expired is told once more, late; its resend and later news are not", async () => {
    alipay.createTrade("bb-late-paid", { totalAmount: "8.00" });
    await watch({
      provider: "alipay",
      account: "shop",
      outTradeNo: "bb-late-paid",
      schedule: [1],
      deadline: Date.now() + 1500,
      notify: ["bb-late"],
    });
    expect(await settled("alipay", "shop", "bb-late-paid", 8000)).toMatchObject({
      state: "expired",
      outcome: { event: "payment.expired", tradeState: "WAIT_BUYER_PAY" },
    });
    alipay.pay("bb-late-paid");
    const notifyId = `bb${Date.now()}`;
    for (let n = 0; n < 2; n++) {
      // The second is Alipay's resend of the first (the same notify_id).
      const sent = await alipay.notify("bb-late-paid", notifyUrl("alipay", "shop"), { notifyId });
      expect(sent).toEqual({ status: 200, text: "success" });
    }
    alipay.pay("bb-late-paid", { finished: true });
    expect(await alipay.notify("bb-late-paid", notifyUrl("alipay", "shop"))).toEqual({
      status: 200,
      text: "success",
    });
    expect(await readWatch("alipay", "shop", "bb-late-paid")).toMatchObject({
      state: "paid",
      outcome: {
        event: "payment.paid",
        tradeState: "TRADE_SUCCESS",
        amount: { total: 800, currency: "CNY" },
        source: "notify",
        late: true,
      },
      firstOutcome: { event: "payment.expired" },
    });
    const jobs = await drain("bb-late");
    expect(jobs.map((j) => `${j.body.event}${j.body.late ? " late" : ""}`)).toEqual([
      "payment.expired",
      "payment.paid late",
    ]);
  });
});

describe("refund watches from outside", () => {
  async function watchRefund(input: Record<string, unknown>, expected = 201) {
    const res = await stack.api("POST", "/v1/refunds", input);
    expect(res.status, res.text).toBe(expected);
    return res.json as { created: boolean; refund: Record<string, any> };
  }
  const readRefund = async (provider: Provider, account: string, no: string) => {
    const res = await stack.api("GET", `/v1/refunds/${provider}/${account}/${no}`);
    expect(res.status, res.text).toBe(200);
    return res.json.refund as Record<string, any>;
  };
  const refundSettled = (provider: Provider, account: string, no: string) =>
    eventually(
      () => readRefund(provider, account, no),
      (r) => r.state !== "polling",
      10_000,
    );

  it("succeeded: WeChat Pay, Alipay classic and v3, by their queries; amounts in fen; once in a pull topic", async () => {
    wechat.createTrade("bb-rf-order-w", { total: 1999 });
    wechat.pay("bb-rf-order-w");
    wechat.createRefund("bb-rf-order-w", "bb-rf-w", { refund: 999 });
    for (const account of ["shop", "shopv3"]) {
      alipay.createTrade(`bb-rf-order-${account}`, { totalAmount: "12.30" });
      alipay.pay(`bb-rf-order-${account}`);
      alipay.createRefund(`bb-rf-order-${account}`, `bb-rf-${account}`, { refundAmount: "0.07" });
    }
    const started = await watchRefund({
      provider: "wechatpay",
      account: "shop",
      outRefundNo: "bb-rf-w",
      outTradeNo: "bb-rf-order-w",
      schedule: [1],
      notify: ["bb-refunds"],
      metadata: { ticket: 1 },
    });
    expect(started.refund).toMatchObject({ state: "polling", polls: 0, outRefundNo: "bb-rf-w" });
    for (const account of ["shop", "shopv3"]) {
      await watchRefund({
        provider: "alipay",
        account,
        outRefundNo: `bb-rf-${account}`,
        outTradeNo: `bb-rf-order-${account}`,
        schedule: [1],
        notify: ["bb-refunds"],
      });
    }
    // Still processing at the first queries; then the refunds go through.
    await eventually(
      () => readRefund("wechatpay", "shop", "bb-rf-w"),
      (r) => r.polls >= 1,
      8000,
    );
    wechat.setRefundStatus("bb-rf-w", "SUCCESS");
    for (const account of ["shop", "shopv3"]) {
      alipay.succeedRefund(`bb-rf-order-${account}`, `bb-rf-${account}`);
    }
    expect(await refundSettled("wechatpay", "shop", "bb-rf-w")).toMatchObject({
      state: "succeeded",
      outcome: {
        event: "refund.succeeded",
        outRefundNo: "bb-rf-w",
        outTradeNo: "bb-rf-order-w",
        refundNo: wechat.getRefund("bb-rf-w")?.refundId,
        status: "SUCCESS",
        amount: { refund: 999, total: 1999, currency: "CNY" },
        succeededAt: expect.any(Number),
        source: "poll",
        metadata: { ticket: 1 },
      },
    });
    for (const account of ["shop", "shopv3"]) {
      expect(await refundSettled("alipay", account, `bb-rf-${account}`)).toMatchObject({
        state: "succeeded",
        outcome: {
          event: "refund.succeeded",
          status: "REFUND_SUCCESS",
          amount: { refund: 7, total: 1230, currency: "CNY" },
          succeededAt: expect.any(Number),
        },
      });
    }
    const jobs = await drain("bb-refunds");
    expect(jobs.map((j) => `${j.body.outRefundNo} ${j.body.event}`).sort()).toEqual([
      "bb-rf-shop refund.succeeded",
      "bb-rf-shopv3 refund.succeeded",
      "bb-rf-w refund.succeeded",
    ]);
  });

  it("a WeChat Pay refund notification at the payment notify URL settles the watch at once; an unwatched one is ignored", async () => {
    wechat.createTrade("bb-rfn-order", { total: 500 });
    wechat.pay("bb-rfn-order");
    wechat.createRefund("bb-rfn-order", "bb-rfn", { refund: 400 });
    wechat.createRefund("bb-rfn-order", "bb-rfn-nobody", { refund: 1 });
    await watchRefund({
      provider: "wechatpay",
      account: "shop",
      outRefundNo: "bb-rfn",
      schedule: [30],
      notify: ["bb-refunds-n"],
    });
    wechat.setRefundStatus("bb-rfn", "ABNORMAL");
    expect((await wechat.notifyRefund("bb-rfn", notifyUrl("wechatpay", "shop"))).status).toBe(204);
    expect(await readRefund("wechatpay", "shop", "bb-rfn")).toMatchObject({
      state: "abnormal",
      polls: 0,
      outcome: { event: "refund.abnormal", status: "ABNORMAL", source: "notify" },
    });
    wechat.setRefundStatus("bb-rfn-nobody", "SUCCESS");
    const ignored = await wechat.notifyRefund("bb-rfn-nobody", notifyUrl("wechatpay", "shop"));
    expect(ignored.status).toBe(204);
    const missing = await stack.api("GET", "/v1/refunds/wechatpay/shop/bb-rfn-nobody");
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("refund_not_found");
    expect((await drain("bb-refunds-n")).map((j) => j.body.event)).toEqual(["refund.abnormal"]);
  });

  it("expired past its deadline; stopped on DELETE; 400 naming outTradeNo for Alipay without one", async () => {
    alipay.createTrade("bb-rfx-order", { totalAmount: "3.00" });
    alipay.pay("bb-rfx-order");
    alipay.createRefund("bb-rfx-order", "bb-rfx");
    await watchRefund({
      provider: "alipay",
      account: "shop",
      outRefundNo: "bb-rfx",
      outTradeNo: "bb-rfx-order",
      schedule: [1],
      deadline: Date.now() + 1500,
      notify: ["bb-refunds-x"],
    });
    expect(await refundSettled("alipay", "shop", "bb-rfx")).toMatchObject({
      state: "expired",
      outcome: { event: "refund.expired", status: "no refund_status", outTradeNo: "bb-rfx-order" },
    });
    await watchRefund({
      provider: "wechatpay",
      account: "shop",
      outRefundNo: "bb-rfs",
      schedule: [3600],
      notify: ["bb-refunds-x"],
    });
    expect((await stack.api("DELETE", "/v1/refunds/wechatpay/shop/bb-rfs")).status).toBe(200);
    expect((await readRefund("wechatpay", "shop", "bb-rfs")).state).toBe("stopped");
    const refused = await stack.api("POST", "/v1/refunds", {
      provider: "alipay",
      account: "shop",
      outRefundNo: "bb-rf-bad",
      notify: ["bb-refunds-x"],
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({ code: "invalid_request" });
    expect(refused.json.error.message).toMatch(/outTradeNo: required for Alipay/);
    expect((await drain("bb-refunds-x")).map((j) => j.body.event)).toEqual(["refund.expired"]);
  });
});

describe("payment watches from outside: fan-out", () => {
  /** The fan-out's outcomes by order, and when the notification that settled one was sent. */
  const fan: { outcomes: Record<string, Record<string, unknown>>; notifiedAt: number } = {
    outcomes: {},
    notifiedAt: 0,
  };
  const FAN_PUSH = [
    ["/fan-direct", "bb-fan-direct"],
    ["/fan-qstash", "bb-fan-qstash"],
  ] as const;

  it("adds each outcome to every notify topic exactly once (pull topics, read by pop)", async () => {
    // Two push topics among them, one of each kind (checked in the next test).
    await stack.api("PUT", "/v1/topics/bb-fan-direct", {
      push: { url: rx.url("/fan-direct"), secret: SECRET },
    });
    await stack.api("PUT", "/v1/topics/bb-fan-qstash", {
      push: { url: rx.url("/fan-qstash"), secret: SECRET, via: "qstash" },
    });
    const notify = ["bb-fan-a", "bb-fan-b", "bb-fan-direct", "bb-fan-qstash"];
    // One outcome by poll (WeChat Pay, paid before the watch), one by notification (Alipay).
    wechat.createTrade("bb-fan-w", { total: 4321 });
    wechat.pay("bb-fan-w");
    alipay.createTrade("bb-fan-a", { totalAmount: "0.50" });
    await watch({
      provider: "wechatpay",
      account: "shop",
      outTradeNo: "bb-fan-w",
      schedule: [1],
      notify,
    });
    await watch({
      provider: "alipay",
      account: "shop",
      outTradeNo: "bb-fan-a",
      schedule: [60],
      notify,
    });
    alipay.pay("bb-fan-a");
    fan.notifiedAt = Date.now();
    expect(await alipay.notify("bb-fan-a", notifyUrl("alipay", "shop"))).toEqual({
      status: 200,
      text: "success",
    });
    const wx = await settled("wechatpay", "shop", "bb-fan-w");
    expect(wx.state).toBe("paid");
    fan.outcomes["bb-fan-w"] = wx.outcome;
    fan.outcomes["bb-fan-a"] = (await readWatch("alipay", "shop", "bb-fan-a")).outcome;
    await sleep(1000); // any duplicate would have come by now
    for (const topic of ["bb-fan-a", "bb-fan-b"]) {
      const jobs = await drain(topic);
      expect(
        jobs.map((j) => j.body).sort((a, b) => a.outTradeNo.localeCompare(b.outTradeNo)),
        topic,
      ).toEqual([fan.outcomes["bb-fan-a"], fan.outcomes["bb-fan-w"]]);
    }
  });

  // DESIGN §4: outcomes go to "push topics that carry it to the merchant's webhook receivers".
  // (Until c738d78 they were claimed and then cut off by workerd: sent a lease and a tick later.)
  it("carries each outcome to push notify topics at once, once each, signed (QStash's checked too)", async () => {
    const arrived = await Promise.all(FAN_PUSH.map(([path]) => rx.waitFor(path, 2, 6000)));
    await sleep(1000); // any duplicate would have come by now
    for (const [n, [path, topic]] of FAN_PUSH.entries()) {
      const hits = rx.hits(path);
      expect(arrived[n], path).toHaveLength(2);
      expect(hits, path).toHaveLength(2);
      for (const hit of hits) {
        checkDelayqSignature(SECRET, hit.headers["delayq-signature"], hit.raw);
        const delivery = JSON.parse(hit.raw);
        expect(delivery).toMatchObject({ topic, attempt: 1 });
        expect(delivery.body).toEqual(fan.outcomes[delivery.body.outTradeNo]);
        if (path === "/fan-qstash") {
          const signature = String(hit.headers["upstash-signature"]);
          expect(await qstash.verify({ signature, body: hit.raw, url: rx.url(path) })).toBe(true);
        }
      }
      expect(hits.map((h) => JSON.parse(h.raw).body.outTradeNo).sort()).toEqual([
        "bb-fan-a",
        "bb-fan-w",
      ]);
      // The notification's outcome went out from its own request, not a tick (a minute away).
      const fromNotify = hits.find((h) => JSON.parse(h.raw).body.outTradeNo === "bb-fan-a");
      expect((fromNotify?.at ?? Number.POSITIVE_INFINITY) - fan.notifiedAt, path).toBeLessThan(
        5000,
      );
      const stats = await stack.api("GET", `/v1/topics/${topic}`);
      expect(stats.json.counts, topic).toMatchObject({
        reserved: 0,
        ready: 0,
        delayed: 0,
        dead: 0,
      });
    }
  });
});

describe("payment watches from outside: transient errors (checked)", () => {
  it("retries provider errors, timeouts and bad signatures soon, never taking them as an outcome", async () => {
    const cases = [
      {
        provider: "alipay",
        no: "bb-flaky-a",
        faults: ["badSignature", "5xx", "systemError", "timeout"],
      },
      {
        provider: "wechatpay",
        no: "bb-flaky-w",
        faults: ["badSignature", "staleTimestamp", "5xx", "429"],
      },
    ] as const;
    for (const c of cases) {
      const p = await settled(c.provider, "flaky", c.no, 25_000);
      expect(p.state, c.no).toBe("paid");
      // Every faulty answer was retried, not taken (the first ones already said "paid").
      expect(p.outcome).toMatchObject({
        event: "payment.paid",
        source: "poll",
        polls: c.faults.length + 1,
      });
      const records =
        c.provider === "alipay"
          ? alipayRequests(alipayFlaky, c.no)
          : wechatRequests(wechatFlaky, c.no);
      expect(records.map((r) => r.fault ?? null)).toEqual([...c.faults, null]);
      // Retried within seconds (the 10 s of a timed-out call aside), not a schedule step later.
      for (let i = 1; i < records.length; i++) {
        const gap = (records[i]?.at ?? 0) - (records[i - 1]?.at ?? 0);
        const limit = records[i - 1]?.fault === "timeout" ? 14_000 : 4000;
        expect(gap, `${c.no}: between query ${i} and ${i + 1}`).toBeLessThan(limit);
      }
    }
    const jobs = await drain("bb-flaky");
    expect(jobs.map((j) => j.body.outTradeNo).sort()).toEqual(["bb-flaky-a", "bb-flaky-w"]);
  }, 40_000);

  it("signed every request it sent the stand-ins with the merchant's key (checked there, independently)", () => {
    for (const [name, sandbox] of [
      ["alipay", alipay],
      ["alipay flaky", alipayFlaky],
      ["wechatpay", wechat],
      ["wechatpay flaky", wechatFlaky],
      ["wechatpay certificate", wechatCert],
    ] as const) {
      const requests = sandbox.requests();
      expect(requests.length, name).toBeGreaterThan(0);
      // The bad app id is refused by the gateway, but its request is signed all the same.
      expect(
        requests.filter((r) => !r.verified),
        name,
      ).toEqual([]);
    }
    expect(alipay.requests().some((r) => r.api === "v3")).toBe(true);
  });
});
