import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AlipaySandbox } from "../../dev/alipay-sandbox";
import type { WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { type Harness, NOTIFY_ORIGIN, publicWatchId, startHarness, uid } from "./harness";

let h: Harness;
let alipay: AlipaySandbox;
let wechat: WechatPaySandbox;
const TOKEN = "pay-admin";
const SHOP = "pay-shop";
/** A tenant's token with the topics of SHOP, but no payment account of its own. */
const NO_ACCOUNTS = "pay-no-accounts";
/** A tenant's token with the topics of SHOP and an Alipay account that is not the sandbox's. */
const OTHER_ACCOUNT = "pay-other-account";
/** A tenant's token for every topic (`*`), and no payment account. */
const EVERY_TOPIC = "pay-every-topic";

beforeAll(async () => {
  h = await startHarness("pay", {
    vars: {
      DQ_TOKENS: [
        TOKEN,
        `${SHOP}:shop.*|*/sandbox`,
        `${NO_ACCOUNTS}:shop.*`,
        `${OTHER_ACCOUNT}:shop.*|alipay/other-*`,
        `${EVERY_TOPIC}:*`,
      ].join(","),
    },
  });
  ({ alipay, wechat } = h);
}, 30_000);

afterAll(async () => {
  await h?.close();
});

const call = (method: string, path: string, body?: unknown, token = TOKEN) =>
  h.call(method, path, body, token);

/**
 * Runs the polls that are due, as the Node entry's ticker does (functions/node.ts): the tick
 * claims what is due, and what falls due within its claim horizon (65 s), and returns; the polls
 * run in the background at their due times. A tick that waited for them waited for any watch's
 * poll claimed ahead, another test's included: 21 s under load, past this suite's 20 s limit
 * (the timeouts CI saw in "ends paid when the trade is paid").
 */
const pollNow = () => h.pollNow();
const until = <T>(what: string, probe: () => Promise<T | undefined>, ms?: number) =>
  h.until(what, probe, ms);
const watchState = (provider: string, no: string, state: string) =>
  h.watchState(provider, no, state);
/** The outcome jobs of a pull topic (popped and finished), each body's raw text too. */
const outcomes = (topic: string) => h.outcomes(topic);

describe("a WeChat Pay watch", () => {
  it("polls on its schedule until paid, then tells each notify topic once, metadata as sent", async () => {
    const no = `wx-${uid()}`;
    const topics = [`results-${uid()}`, `audit-${uid()}`];
    wechat.createTrade(no, { total: 1999 });
    const started = await call(
      "POST",
      "/v1/payments",
      `{"provider":"wechatpay","account":"sandbox","outTradeNo":"${no}","schedule":[0.2],"notify":${JSON.stringify(topics)},"metadata":{"orderId":4200001234567890123}}`,
    );
    expect(started.status).toBe(201);
    expect(started.json.payment).toMatchObject({ state: "polling", polls: 0, notify: topics });
    expect(started.text).toContain('"metadata":{"orderId":4200001234567890123}');
    // Idempotent: watching it again answers the watch as it is.
    const again = await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      notify: topics,
    });
    expect(again.status).toBe(200);
    expect(again.json.created).toBe(false);
    // Polled while unpaid (NOTPAY): still polling, the answer recorded.
    const polling = await until("a poll", async () => {
      const got = (await call("GET", `/v1/payments/wechatpay/sandbox/${no}`)).json.payment;
      return got.polls >= 1 ? got : undefined;
    });
    expect(polling.lastAnswer.tradeState).toBe("NOTPAY");
    wechat.pay(no);
    const paid = await watchState("wechatpay", no, "paid");
    expect(paid.outcome).toMatchObject({
      event: "payment.paid",
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      tradeState: "SUCCESS",
      amount: { total: 1999, currency: "CNY" },
      source: "poll",
    });
    expect(paid.outcome.tradeNo).toBe(wechat.trade(no)?.transactionId);
    expect(typeof paid.outcome.paidAt).toBe("number");
    for (const topic of topics) {
      const [outcome, ...more] = await outcomes(topic);
      expect(more).toEqual([]);
      expect(outcome?.json).toMatchObject({ event: "payment.paid", outTradeNo: no });
      expect(outcome?.text).toContain('"metadata":{"orderId":4200001234567890123}}');
    }
    // No poll after the outcome.
    const requests = wechat.requests().length;
    await new Promise((r) => setTimeout(r, 500));
    await pollNow();
    // A poll the tick found due would be under way in the background: give it time to be sent.
    await new Promise((r) => setTimeout(r, 500));
    expect(wechat.requests().length).toBe(requests);
  });

  it("polls on the schedule's next step, and says when, also once a tick claimed that poll ahead", async () => {
    const no = `wx-${uid()}`;
    wechat.createTrade(no);
    const path = `/v1/payments/wechatpay/sandbox/${no}`;
    const posted = await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [0.2, 2],
      notify: [`r-${uid()}`],
    });
    expect(posted.status).toBe(201);
    const polled = await until("a poll", async () => {
      const got = (await call("GET", path)).json.payment;
      return got.polls >= 1 ? got : undefined;
    });
    // DESIGN §5: the first poll one step after the start, the next one step further (2 s).
    expect(polled.nextPollAt - polled.lastAnswer.at).toBeGreaterThanOrEqual(1900);
    expect(polled.nextPollAt - polled.lastAnswer.at).toBeLessThanOrEqual(2100);
    // The poll that did not end the watch claimed the next one (due within seconds) and waits
    // for its time: while the poll job is held ahead of its time, the watch still says when.
    await new Promise((r) => setTimeout(r, 300));
    expect((await call("GET", path)).json.payment.nextPollAt).toBe(polled.nextPollAt);
    const second = await until("the second poll", async () => {
      const got = (await call("GET", path)).json.payment;
      return got.polls >= 2 ? got : undefined;
    });
    expect(second.lastAnswer.at).toBeGreaterThanOrEqual(polled.nextPollAt);
    await call("DELETE", path);
  });

  it.each([
    ["CLOSED", "closed", "payment.closed"],
    ["REVOKED", "closed", "payment.closed"],
    ["PAYERROR", "failed", "payment.failed"],
    ["REFUND", "paid", "payment.paid"],
  ] as const)("maps %s to %s", async (tradeState, state, event) => {
    const no = `wx-${uid()}`;
    const topic = `r-${uid()}`;
    wechat.createTrade(no);
    wechat.setState(no, tradeState);
    await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [0.1],
      notify: [topic],
    });
    const watch = await watchState("wechatpay", no, state);
    expect(watch.outcome).toMatchObject({ event, tradeState });
    expect((await outcomes(topic)).map((o) => o.json.event)).toEqual([event]);
  });

  it("keeps polling through transient errors, and never takes an unverified answer", async () => {
    const no = `wx-${uid()}`;
    wechat.createTrade(no);
    wechat.pay(no);
    wechat.inject("badSignature", 1);
    wechat.inject("5xx", 1);
    await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [0.1],
      notify: [`r-${uid()}`],
    });
    const paid = await watchState("wechatpay", no, "paid");
    expect(paid.polls).toBeGreaterThanOrEqual(3);
  });
});

describe("an Alipay watch", () => {
  it("ends paid when the trade is paid, and the outcome's amount is in fen", async () => {
    const no = `ali-${uid()}`;
    const topic = `r-${uid()}`;
    alipay.createTrade(no, { totalAmount: "12.30" });
    await call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [0.1],
      notify: [topic],
    });
    await until("a poll", async () => {
      const got = (await call("GET", `/v1/payments/alipay/sandbox/${no}`)).json.payment;
      return got.polls >= 1 ? got : undefined;
    });
    alipay.pay(no);
    const paid = await watchState("alipay", no, "paid");
    expect(paid.outcome).toMatchObject({
      tradeState: "TRADE_SUCCESS",
      amount: { total: 1230, currency: "CNY" },
    });
  });

  it("closes the order at the deadline when asked, and ends expired", async () => {
    const no = `ali-${uid()}`;
    const topic = `r-${uid()}`;
    alipay.createTrade(no);
    await call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [0.2],
      deadline: Date.now() + 700,
      closeOnDeadline: true,
      notify: [topic],
    });
    const expired = await watchState("alipay", no, "expired");
    expect(expired.outcome.event).toBe("payment.expired");
    expect(alipay.trade(no)?.status).toBe("TRADE_CLOSED");
  });

  it("queries again when the close is refused because the order was paid", async () => {
    const no = `ali-${uid()}`;
    alipay.createTrade(no);
    await call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [60],
      deadline: Date.now() + 500,
      closeOnDeadline: true,
      notify: [`r-${uid()}`],
    });
    alipay.pay(no);
    const paid = await watchState("alipay", no, "paid");
    expect(paid.outcome.event).toBe("payment.paid");
    expect(alipay.trade(no)?.status).toBe("TRADE_SUCCESS");
  });
});

describe("notifications", () => {
  it("a verified Alipay notification settles the watch at once; a repeat and a later poll add nothing", async () => {
    const no = `ali-${uid()}`;
    const topic = `r-${uid()}`;
    alipay.createTrade(no, { totalAmount: "5.00" });
    await call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [3600],
      notify: [topic],
    });
    alipay.pay(no);
    const target = `${NOTIFY_ORIGIN}/v1/notify/alipay/sandbox`;
    const sent = await alipayNotify(no, target);
    expect(sent).toEqual({ status: 200, text: "success" });
    const paid = (await call("GET", `/v1/payments/alipay/sandbox/${no}`)).json.payment;
    expect(paid).toMatchObject({
      state: "paid",
      polls: 0,
      outcome: { source: "notify", amount: { total: 500 } },
    });
    expect(await alipayNotify(no, target)).toEqual({ status: 200, text: "success" });
    expect((await outcomes(topic)).length).toBe(1);
  });

  it("refuses a tampered notification, and a WeChat signature probe", async () => {
    const no = `wx-${uid()}`;
    wechat.createTrade(no);
    await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [3600],
      notify: [`r-${uid()}`],
    });
    wechat.pay(no);
    const target = `${NOTIFY_ORIGIN}/v1/notify/wechatpay/sandbox`;
    expect((await wechatNotify(no, target, { tamper: true })).status).toBe(401);
    expect((await wechatNotify(no, target, { probe: true })).status).toBe(401);
    expect((await call("GET", `/v1/payments/wechatpay/sandbox/${no}`)).json.payment.state).toBe(
      "polling",
    );
    expect(await wechatNotify(no, target)).toMatchObject({ status: 204 });
    expect((await call("GET", `/v1/payments/wechatpay/sandbox/${no}`)).json.payment.state).toBe(
      "paid",
    );
  });
});

describe("watch input and lifecycle", () => {
  it("stops a watch on DELETE: it reads stopped and is polled no more", async () => {
    const no = `wx-${uid()}`;
    wechat.createTrade(no);
    await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [0.3],
      notify: [`r-${uid()}`],
    });
    expect((await call("DELETE", `/v1/payments/wechatpay/sandbox/${no}`)).json).toEqual({
      deleted: true,
    });
    expect((await call("GET", `/v1/payments/wechatpay/sandbox/${no}`)).json.payment.state).toBe(
      "stopped",
    );
    const before = wechat.requests().filter((r) => r.path.includes(no)).length;
    await new Promise((r) => setTimeout(r, 500));
    await pollNow();
    await new Promise((r) => setTimeout(r, 500));
    expect(wechat.requests().filter((r) => r.path.includes(no)).length).toBe(before);
  });

  it.each([
    [
      { provider: "alipay", account: "nope", outTradeNo: "o1", notify: ["t"] },
      400,
      "unknown_account",
    ],
    [
      { provider: "paypal", account: "sandbox", outTradeNo: "o1", notify: ["t"] },
      400,
      "invalid_request",
    ],
    [
      { provider: "alipay", account: "sandbox", outTradeNo: "o 1", notify: ["t"] },
      400,
      "invalid_request",
    ],
    [
      { provider: "alipay", account: "sandbox", outTradeNo: "o1", notify: [] },
      400,
      "invalid_request",
    ],
    [
      { provider: "alipay", account: "sandbox", outTradeNo: "o1", notify: ["__payments"] },
      400,
      "invalid_request",
    ],
    [
      {
        provider: "alipay",
        account: "sandbox",
        outTradeNo: "o1",
        notify: ["t"],
        schedule: "weekly",
      },
      400,
      "invalid_request",
    ],
    [
      { provider: "alipay", account: "sandbox", outTradeNo: "o1", notify: ["t"], deadline: 1_000 },
      400,
      "invalid_request",
    ],
  ])("refuses %j", async (input, status, code) => {
    const res = await call("POST", "/v1/payments", input);
    expect(res.status).toBe(status);
    expect(res.json.error.code).toBe(code);
  });

  it("refuses a deadline more than 400 days ahead, ms or ISO-8601, and takes one just within", async () => {
    const spec = { provider: "alipay", account: "sandbox", notify: ["t"] };
    const day = 86_400_000;
    for (const deadline of [
      Date.now() + 401 * day,
      new Date(Date.now() + 401 * day).toISOString(),
      99_999_999_999_999, // the year 5138: what a timestamp may otherwise be
    ]) {
      const res = await call("POST", "/v1/payments", { ...spec, outTradeNo: "far", deadline });
      expect(res.status, String(deadline)).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.message).toMatch(/deadline: must be at most 400 days ahead/);
    }
    // Nothing was written: the watch is unknown.
    expect((await call("GET", "/v1/payments/alipay/sandbox/far")).status).toBe(404);
    const within = { ...spec, outTradeNo: "near", deadline: Date.now() + 399 * day };
    expect((await call("POST", "/v1/payments", within)).status).toBe(201);
    await call("DELETE", "/v1/payments/alipay/sandbox/near");
  });

  it("names in unknown_account the accounts a token may watch, no others", async () => {
    const spec = { provider: "alipay", outTradeNo: "o1", notify: ["shop.paid"] };
    const tenant = await call(
      "POST",
      "/v1/payments",
      { ...spec, account: "other-x" },
      OTHER_ACCOUNT,
    );
    expect(tenant.status).toBe(400);
    expect(tenant.json.error.code).toBe("unknown_account");
    expect(tenant.json.error.message).toContain("none this token may watch");
    expect(tenant.json.error.message).not.toContain("sandbox");
    const shop = await call("POST", "/v1/payments", { ...spec, account: "nope" }, TOKEN);
    expect(shop.json.error.message).toContain('"sandbox"');
  });

  it("keeps scoped tokens to their topics, and 404s an unknown watch", async () => {
    const refused = await call(
      "POST",
      "/v1/payments",
      { provider: "alipay", account: "sandbox", outTradeNo: "o-scope", notify: ["other"] },
      SHOP,
    );
    expect(refused.status).toBe(403);
    // An order watched for other topics: its watch is not shown, its existence alone is told.
    const watched = await call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox",
      outTradeNo: "o-other-tenant",
      notify: ["billing"],
      metadata: { customer: "alice@example.com" },
    });
    expect(watched.status).toBe(201);
    const probe = await call(
      "POST",
      "/v1/payments",
      { provider: "alipay", account: "sandbox", outTradeNo: "o-other-tenant", notify: ["shop.x"] },
      SHOP,
    );
    expect(probe.status).toBe(409);
    expect(probe.json.error.code).toBe("payment_exists");
    expect(JSON.stringify(probe.json)).not.toMatch(/billing|alice/);
    // Nothing changed: the watch still notifies its own topics only.
    const kept = await call("GET", "/v1/payments/alipay/sandbox/o-other-tenant");
    expect(kept.json.payment.notify).toEqual(["billing"]);
    const missing = await call("GET", "/v1/payments/alipay/sandbox/never-watched");
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("payment_not_found");
  });

  it("keeps tenants' tokens to their payment accounts: no start, read or stop elsewhere", async () => {
    const no = `o-account-${uid()}`;
    const input = { provider: "alipay", account: "sandbox", outTradeNo: no, notify: ["shop.paid"] };
    for (const token of [NO_ACCOUNTS, OTHER_ACCOUNT]) {
      const refused = await call("POST", "/v1/payments", input, token);
      expect(refused.status).toBe(403);
      expect(refused.json.error.code).toBe("forbidden");
      expect(refused.json.error.message).toContain("alipay/sandbox");
    }
    // An account that does not exist is refused the same way: a tenant learns no account names.
    const unknown = await call(
      "POST",
      "/v1/payments",
      { ...input, account: "other-shop" },
      NO_ACCOUNTS,
    );
    expect(unknown.status).toBe(403);
    expect((await call("GET", `/v1/payments/alipay/sandbox/${no}`)).status).toBe(404);

    // The operator watches the order for the tenant's own topic: the tenant's token without the
    // account neither reads nor stops it (404, as for a watch that does not exist).
    const started = await call("POST", "/v1/payments", { ...input, schedule: [3600] });
    expect(started.status).toBe(201);
    for (const token of [NO_ACCOUNTS, OTHER_ACCOUNT]) {
      const read = await call("GET", `/v1/payments/alipay/sandbox/${no}`, undefined, token);
      expect(read.status).toBe(404);
      expect(read.json.error.code).toBe("payment_not_found");
      const stop = await call("DELETE", `/v1/payments/alipay/sandbox/${no}`, undefined, token);
      expect(stop.status).toBe(404);
      // Starting it again does not tell it is watched either.
      expect((await call("POST", "/v1/payments", input, token)).status).toBe(403);
    }
    expect((await call("GET", `/v1/payments/alipay/sandbox/${no}`)).json.payment.state).toBe(
      "polling",
    );
    // The token whose patterns name the account does all three.
    const again = await call("POST", "/v1/payments", input, SHOP);
    expect(again.status).toBe(200);
    expect(again.json.created).toBe(false);
    expect((await call("GET", `/v1/payments/alipay/sandbox/${no}`, undefined, SHOP)).status).toBe(
      200,
    );
    expect(
      (await call("DELETE", `/v1/payments/alipay/sandbox/${no}`, undefined, SHOP)).json,
    ).toEqual({ deleted: true });
  });

  it("keeps delayq's own topic from a token limited to every topic (*): its poll jobs hold watches", async () => {
    const no = `o-star-${uid()}`;
    const started = await call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox",
      outTradeNo: no,
      notify: ["billing"],
      schedule: [3600],
      metadata: { customer: "alice@example.com" },
    });
    expect(started.status).toBe(201);
    // The watch's poll job: its id is derived from the order, so anyone can compute it.
    const watchId = publicWatchId("alipay", no);
    const poll = `/v1/jobs/${encodeURIComponent(`pay:${watchId}`)}`;
    expect((await call("GET", poll)).json.job.topic).toBe("__payments");
    const read = await call("GET", poll, undefined, EVERY_TOPIC);
    expect(read.status).toBe(404);
    expect(read.text).not.toContain("alice");
    expect((await call("DELETE", poll, undefined, EVERY_TOPIC)).status).toBe(404);
    const topics = await call("GET", "/v1/topics", undefined, EVERY_TOPIC);
    expect(topics.json.topics.map((t: { topic: string }) => t.topic)).not.toContain("__payments");
    // Untouched: the watch still polls.
    expect((await call("GET", poll)).json.job.state).toBe("delayed");
  });

  it("refuses job ids a watch's poll or outcome will need, so no tenant can take them first", async () => {
    // A watch's id is public (derived from the order); computed here with node:crypto.
    const no = `wx-squat-${uid()}`;
    const watchId = publicWatchId("wechatpay", no);
    const taken = [`pay:${watchId}:1`, `pay:${watchId}`];
    for (const id of taken) {
      const attempts = [
        await call("POST", "/v1/jobs", { topic: "shop.squat", id, delay: 3600 }, SHOP),
        await call("POST", "/v1/jobs/batch", { jobs: [{ topic: "shop.squat", id }] }, SHOP),
        await call("POST", "/v1/command", { command: "add", topic: "shop.squat", id }, SHOP),
      ];
      for (const res of attempts) expect(res.text).toContain('must not start with \\"pay:\\"');
      expect(attempts[0]?.status).toBe(400);
      expect(attempts[1]?.json.results[0].error.code).toBe("invalid_request");
      expect((await call("GET", `/v1/jobs/${encodeURIComponent(id)}`)).status).toBe(404);
    }
    // So the watch polls, and its outcome reaches its topic.
    wechat.createTrade(no, { total: 500 });
    const topic = `shop.paid-${uid()}`;
    const started = await call(
      "POST",
      "/v1/payments",
      {
        provider: "wechatpay",
        account: "sandbox",
        outTradeNo: no,
        schedule: [0.2],
        notify: [topic],
      },
      SHOP,
    );
    expect(started.status).toBe(201);
    wechat.pay(no);
    await watchState("wechatpay", no, "paid");
    const [outcome] = await outcomes(topic);
    expect(outcome?.json).toMatchObject({ event: "payment.paid", outTradeNo: no });
    const got = await call("GET", `/v1/jobs/${encodeURIComponent(taken[0] as string)}`);
    expect(got.json.job.topic).toBe(topic);
  });
});

/** Sends the sandbox's signed notification to the app (NOTIFY_ORIGIN is routed to it). */
function alipayNotify(no: string, target: string) {
  return alipay.notify(no, target);
}

function wechatNotify(
  no: string,
  target: string,
  opts: { tamper?: boolean; probe?: boolean } = {},
) {
  return wechat.notify(no, target, opts);
}
