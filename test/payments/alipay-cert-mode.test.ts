// The Alipay provider in certificate mode against the sandbox in certificate mode (whose SNs come
// from the official alipay-sdk, and which the SDK itself checks: test/dev/alipay-sandbox.test.ts):
// requests carry the SNs, answers must name alipayCert's.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { type AlipayAccount, parseAlipayAccounts } from "../../src/payments/accounts";
import { alipayProvider } from "../../src/payments/alipay";
import { ANSWER_CLOCK_SKEW_MS } from "../../src/payments/provider";

let sandbox: AlipaySandbox;
const accounts: Record<"classic" | "v3", AlipayAccount> = {} as never;
let seq = 0;
const no = (label: string) => `${label}-${Date.now()}-${++seq}`;

beforeAll(async () => {
  sandbox = await startAlipaySandbox({ mode: "certificate", appId: "2021000000000003" });
  for (const api of ["classic", "v3"] as const) {
    const parsed = parseAlipayAccounts({ shop: { ...sandbox.account, api } }).get("shop");
    if (!parsed) throw new Error("no account");
    accounts[api] = parsed;
  }
}, 30_000);
afterAll(async () => {
  await sandbox?.close();
});

describe.each(["classic", "v3"] as const)("certificate mode, %s", (api) => {
  it("sends the SNs the SDK computes and takes answers naming alipayCert", async () => {
    expect(accounts[api].certificates).toMatchObject({
      appCertSn: sandbox.certificates?.appCertSn,
      alipayRootCertSn: sandbox.certificates?.alipayRootCertSn,
      alipayCertSn: sandbox.certificates?.alipayCertSn,
    });
    const id = no(api);
    sandbox.createTrade(id, { totalAmount: "8.88" });
    const provider = alipayProvider(accounts[api]);
    expect(await provider.query(id)).toMatchObject({ kind: "trade", tradeState: "WAIT_BUYER_PAY" });
    expect(sandbox.requests().at(-1)).toMatchObject({ api, verified: true, certificateSns: true });
    sandbox.pay(id);
    expect(await provider.query(id)).toMatchObject({
      kind: "trade",
      outcome: "paid",
      amount: { total: 888, currency: "CNY" },
    });
  });

  it("holds an answer naming another certificate as unverified (transient), even if its signature checks", async () => {
    const id = no(`${api}-sn`);
    sandbox.createTrade(id);
    sandbox.pay(id);
    sandbox.inject("wrongCertSn");
    const answer = await alipayProvider(accounts[api]).query(id);
    expect(answer).toEqual({
      kind: "transient",
      reason: expect.stringContaining(
        `unverified: signed with Alipay certificate ${sandbox.certificates?.appCertSn}, not alipayCert's ${sandbox.certificates?.alipayCertSn}`,
      ),
    });
  });

  it("holds answers as unverified once alipayCert has expired", async () => {
    const id = no(`${api}-expired`);
    sandbox.createTrade(id);
    const certs = accounts[api].certificates;
    if (!certs) throw new Error("certificate mode expected");
    // The same certificate, as if its validity had ended (beyond the 5 minutes clocks may differ).
    const expired = { ...certs.alipayCert, notAfter: Date.now() - ANSWER_CLOCK_SKEW_MS - 1000 };
    const provider = alipayProvider({
      ...accounts[api],
      certificates: { ...certs, alipayCert: expired },
    });
    expect(await provider.query(id)).toMatchObject({
      kind: "transient",
      reason: expect.stringContaining("unverified: alipayCert is not valid now"),
    });
  });
});
