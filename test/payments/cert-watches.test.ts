// Payment watches on certificate-mode accounts, through the real service (buildService on the
// bridge to redis-server) and the sandboxes in certificate mode: Alipay (classic and v3) ends paid,
// an answer naming another certificate is not taken; WeChat Pay follows a platform certificate
// rotated mid-watch with one /v3/certificates fetch, and fetches no more within the minute.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import type { Service } from "../../src/service";
import { bridgeService } from "../support/service";

let alipay: AlipaySandbox;
/** One sandbox for polls, another for notifications: each account fetches once a minute. */
let wechat: WechatPaySandbox;
let wechatNotified: WechatPaySandbox;
let service: Service;
const TOKEN = "cert-admin";

beforeAll(async () => {
  [alipay, wechat, wechatNotified] = await Promise.all([
    startAlipaySandbox({ mode: "certificate" }),
    startWechatPaySandbox({ mode: "certificate", mchid: "1900000031" }),
    startWechatPaySandbox({ mode: "certificate", mchid: "1900000032" }),
  ]);
  ({ service } = bridgeService("cert", {
    DQ_TOKENS: TOKEN,
    DQ_ALIPAY_ACCOUNTS: JSON.stringify({
      "sandbox-cert": alipay.account,
      "sandbox-cert-v3": { ...alipay.account, api: "v3" },
    }),
    DQ_WECHATPAY_ACCOUNTS: JSON.stringify({
      "sandbox-cert": wechat.account,
      "notify-cert": wechatNotified.account,
    }),
    DQ_MIN_POLL_MS: "0",
  }));
  await service.ready;
}, 30_000);

afterAll(async () => {
  await alipay?.close();
  await wechat?.close();
  await wechatNotified?.close();
});

async function call(method: string, path: string, body?: unknown) {
  const res = await service.app.request(path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** Polls due now run, as the Node entry's ticker runs them; then `probe` until it answers. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await service.scheduler.tick(service.runs.tick({}));
    await new Promise((r) => setTimeout(r, 100));
  }
}

type Payment = {
  state: string;
  polls: number;
  lastAnswer?: { tradeState: string };
  outcome?: Record<string, unknown>;
};
const payment = async (provider: string, account: string, no: string): Promise<Payment> =>
  (await call("GET", `/v1/payments/${provider}/${account}/${no}`)).json.payment;
const watchUntil = (
  provider: string,
  account: string,
  no: string,
  what: string,
  test: (p: Payment) => boolean,
) =>
  until(`${provider}/${account}/${no} ${what}`, async () => {
    const got = await payment(provider, account, no);
    return test(got) ? got : undefined;
  });

const uid = () => crypto.randomUUID().slice(0, 8);
const certDownloads = (sandbox: WechatPaySandbox) =>
  sandbox.requests().filter((r) => r.path === "/v3/certificates").length;

describe("an Alipay watch in certificate mode", () => {
  it.each(["sandbox-cert", "sandbox-cert-v3"])("ends paid (%s)", async (account) => {
    const no = `ali-${uid()}`;
    alipay.createTrade(no, { totalAmount: "6.60" });
    const started = await call("POST", "/v1/payments", {
      provider: "alipay",
      account,
      outTradeNo: no,
      schedule: [0.2],
      notify: [`r-${uid()}`],
    });
    expect(started.status).toBe(201);
    await watchUntil("alipay", account, no, "polled", (p) => p.polls >= 1);
    alipay.pay(no);
    const paid = await watchUntil("alipay", account, no, "paid", (p) => p.state === "paid");
    expect(paid.outcome).toMatchObject({ tradeState: "TRADE_SUCCESS", amount: { total: 660 } });
    // Every request carried the app's and the root bundle's SNs.
    const mine = alipay.requests().filter((r) => JSON.stringify(r.bizContent ?? "").includes(no));
    expect(mine.length).toBeGreaterThanOrEqual(2);
    for (const request of mine)
      expect(request).toMatchObject({ verified: true, certificateSns: true });
  });

  it("holds an answer naming another alipay_cert_sn as transient, then ends paid", async () => {
    const no = `ali-sn-${uid()}`;
    alipay.createTrade(no);
    alipay.pay(no);
    alipay.inject("wrongCertSn", 1);
    await call("POST", "/v1/payments", {
      provider: "alipay",
      account: "sandbox-cert",
      outTradeNo: no,
      schedule: [0.2],
      notify: [`r-${uid()}`],
    });
    const held = await watchUntil(
      "alipay",
      "sandbox-cert",
      no,
      "a first answer",
      (p) => p.polls >= 1,
    );
    expect(held.state).toBe("polling");
    expect(held.lastAnswer?.tradeState).toContain(
      `unverified: signed with Alipay certificate ${alipay.certificates?.appCertSn}, not alipayCert's ${alipay.certificates?.alipayCertSn}`,
    );
    // The transient wait (5 s), then a verified answer.
    const paid = await watchUntil("alipay", "sandbox-cert", no, "paid", (p) => p.state === "paid");
    expect(paid.polls).toBeGreaterThanOrEqual(2);
  });
});

describe("a WeChat Pay watch in certificate mode", () => {
  it("follows a platform certificate rotated mid-watch with one fetch, and fetches no more within the minute", async () => {
    const no = `wx-${uid()}`;
    wechat.createTrade(no, { total: 1999 });
    await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox-cert",
      outTradeNo: no,
      schedule: [0.2],
      notify: [`r-${uid()}`],
    });
    await watchUntil("wechatpay", "sandbox-cert", no, "polled", (p) => p.polls >= 1);
    expect(certDownloads(wechat)).toBe(0);
    await wechat.rotateCertificate();
    wechat.pay(no);
    const paid = await watchUntil(
      "wechatpay",
      "sandbox-cert",
      no,
      "paid",
      (p) => p.state === "paid",
    );
    expect(paid.outcome).toMatchObject({ tradeState: "SUCCESS", amount: { total: 1999 } });
    expect(certDownloads(wechat)).toBe(1);

    // Rotated again within the minute: its answers are not verified, and nothing is fetched.
    const other = `wx-${uid()}`;
    wechat.createTrade(other);
    const { serial } = await wechat.rotateCertificate();
    wechat.pay(other);
    await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox-cert",
      outTradeNo: other,
      schedule: [0.2],
      notify: [`r-${uid()}`],
    });
    const held = await watchUntil(
      "wechatpay",
      "sandbox-cert",
      other,
      "an answer",
      (p) => p.polls >= 1,
    );
    expect(held.state).toBe("polling");
    expect(held.lastAnswer?.tradeState).toBe(
      `unverified: unknown Wechatpay-Serial ${serial} (HTTP 200)`,
    );
    expect(certDownloads(wechat)).toBe(1);
    await call("DELETE", `/v1/payments/wechatpay/sandbox-cert/${other}`);
  });

  it("takes a notification signed by a rotated certificate after one fetch", async () => {
    const no = `wx-n-${uid()}`;
    wechatNotified.createTrade(no);
    await call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "notify-cert",
      outTradeNo: no,
      schedule: [3600],
      notify: [`r-${uid()}`],
    });
    await wechatNotified.rotateCertificate();
    wechatNotified.pay(no);
    const target = "http://delayq.test/v1/notify/wechatpay/notify-cert";
    const real = globalThis.fetch;
    // The sandbox's POST goes into the app; the app's own fetch of /v3/certificates goes out.
    globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url === target) return service.app.request(new URL(url).pathname, init);
      return real(input, init);
    }) as typeof fetch;
    try {
      expect(await wechatNotified.notify(no, target)).toMatchObject({ status: 204 });
    } finally {
      globalThis.fetch = real;
    }
    expect(certDownloads(wechatNotified)).toBe(1);
    const paid = await payment("wechatpay", "notify-cert", no);
    expect(paid).toMatchObject({ state: "paid", outcome: { source: "notify" } });
  });
});
