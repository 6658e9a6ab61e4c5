// The providers' notification endpoints take no token, so they must not tell who has an account:
// an unknown account is answered byte for byte as a known one whose notification does not verify
// (status, headers, body), and the log alone says which it was.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import type { LogEntry } from "../../src/log";
import type { Service } from "../../src/service";
import { bridgeService } from "../support/service";

let alipay: AlipaySandbox;
let wechat: WechatPaySandbox;
let service: Service;
const logged: LogEntry[] = [];

beforeAll(async () => {
  alipay = await startAlipaySandbox();
  wechat = await startWechatPaySandbox();
  ({ service } = bridgeService(
    "names",
    {
      DQ_TOKENS: "names-admin",
      DQ_ALIPAY_ACCOUNTS: JSON.stringify({ shop: alipay.account }),
      DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ shop: wechat.account }),
    },
    (entry) => logged.push(entry),
  ));
}, 30_000);

afterAll(async () => {
  await alipay?.close();
  await wechat?.close();
});

/** Everything an answer says: status, headers (but the request's own id) and body bytes. */
async function answer(path: string, init: RequestInit) {
  const res = await service.app.request(`http://delayq.test${path}`, { method: "POST", ...init });
  const headers = [...res.headers].filter(([name]) => name !== "x-request-id");
  return {
    status: res.status,
    headers,
    body: Buffer.from(await res.arrayBuffer()).toString("hex"),
  };
}

const ALIPAY_FORM = {
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: "out_trade_no=o-1&trade_status=TRADE_SUCCESS&total_amount=1.00&sign_type=RSA2&sign=AAAA",
};
const WECHAT_EVENT = {
  headers: {
    "content-type": "application/json",
    "wechatpay-timestamp": "1700000000",
    "wechatpay-nonce": "n",
    "wechatpay-serial": "s",
    "wechatpay-signature": "AAAA",
  },
  body: JSON.stringify({ id: "e-1", event_type: "TRANSACTION.SUCCESS", resource: {} }),
};

describe("an unknown account reads as a known one whose notification does not verify", () => {
  it.each([
    ["a badly signed form", ALIPAY_FORM],
    ["an empty body", { body: "" }],
    ["no body at all", {}],
  ])("Alipay, %s", async (_, init) => {
    const known = await answer("/v1/notify/alipay/shop", init);
    const unknown = await answer("/v1/notify/alipay/nobody-here", init);
    expect(known.status).toBe(400);
    expect(unknown).toEqual(known);
  });

  it.each([
    ["a badly signed event", WECHAT_EVENT],
    ["an unsigned body", { body: "{}" }],
    ["no body at all", {}],
  ])("WeChat Pay, %s", async (_, init) => {
    const known = await answer("/v1/notify/wechatpay/shop", init);
    const unknown = await answer("/v1/notify/wechatpay/nobody-here", init);
    expect(known.status).toBe(401);
    expect(unknown).toEqual(known);
  });

  it("WeChat Pay's refusal says the same whatever failed: why is in the log", async () => {
    const signed = await answer("/v1/notify/wechatpay/shop", WECHAT_EVENT);
    const unsigned = await answer("/v1/notify/wechatpay/shop", { body: "{}" });
    expect(signed).toEqual(unsigned);
    const reasons = logged
      .filter((entry) => entry.event === "notify_refused" && entry.provider === "wechatpay")
      .map((entry) => `${entry.account}: ${entry.reason}`);
    expect(reasons).toContain("nobody-here: no WeChat Pay account of that name");
    expect(reasons.filter((reason) => reason.startsWith("shop: ")).length).toBeGreaterThan(1);
  });

  it("an unknown account's body over the limit is 413, as a known one's", async () => {
    const big = { body: "x".repeat(64 * 1024 + 1) };
    for (const provider of ["alipay", "wechatpay"]) {
      const known = await answer(`/v1/notify/${provider}/shop`, big);
      const unknown = await answer(`/v1/notify/${provider}/nobody-here`, big);
      expect(known.status).toBe(413);
      expect(unknown.status).toBe(413);
    }
  });
});
