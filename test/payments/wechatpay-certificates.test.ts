// WeChat Pay's certificate mode against the sandbox (whose /v3/certificates is checked with
// wechatpay-axios-plugin's primitives: test/dev/wechatpay-sandbox.test.ts): an answer signed by a
// certificate delayq does not know fetches the account's certificates once, at most once a
// minute; fetched certificates are used only when they decrypt and the answer is signed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { parseWechatPayAccounts, type WechatPayAccount } from "../../src/payments/accounts";
import { countingFetches } from "../../src/payments/provider";
import { createPayments } from "../../src/payments/watches";
import { wechatPayProvider } from "../../src/payments/wechatpay";
import { CERTIFICATE_FETCH_INTERVAL_MS } from "../../src/payments/wechatpay-certificates";

let sandbox: WechatPaySandbox;
let seq = 0;
const no = (label: string) => `${label}${Date.now() % 1e8}${++seq}`;

beforeAll(async () => {
  sandbox = await startWechatPaySandbox({ mode: "certificate", mchid: "1900000021" });
}, 30_000);
afterAll(async () => {
  await sandbox?.close();
});

/** A fresh account object: its fetched certificates and its last fetch are its own. */
function account(): WechatPayAccount {
  const parsed = parseWechatPayAccounts({ shop: sandbox.account }).get("shop");
  if (!parsed) throw new Error("no account");
  return parsed;
}
const downloads = () => sandbox.requests().filter((r) => r.path === "/v3/certificates").length;

describe("an unknown Wechatpay-Serial", () => {
  it("fetches /v3/certificates once, then verifies with the new certificate from then on", async () => {
    const shop = account();
    const id = no("rot");
    sandbox.createTrade(id, { total: 300 });
    const provider = wechatPayProvider(shop);
    expect(await provider.query(id)).toMatchObject({ kind: "trade", tradeState: "NOTPAY" });
    const before = downloads();
    await sandbox.rotateCertificate();
    sandbox.pay(id);
    expect(await provider.query(id)).toMatchObject({
      kind: "trade",
      outcome: "paid",
      amount: { total: 300 },
    });
    expect(downloads()).toBe(before + 1);
    expect(await provider.query(id)).toMatchObject({ kind: "trade", outcome: "paid" });
    expect(await provider.close(id)).toMatchObject({ kind: "refused" });
    expect(downloads()).toBe(before + 1);
  });

  it("does not fetch again within the minute: a second unknown serial is unverified until then", async () => {
    const shop = account();
    const id = no("twice");
    sandbox.createTrade(id);
    await sandbox.rotateCertificate();
    // The clock from here: a rotation on a loaded machine takes seconds.
    let now = Date.now();
    const provider = wechatPayProvider(shop, { clock: () => now });
    expect(await provider.query(id)).toMatchObject({ kind: "trade", tradeState: "NOTPAY" });
    const after = downloads();
    const { serial } = await sandbox.rotateCertificate();
    now += 30_000;
    expect(await provider.query(id)).toEqual({
      kind: "transient",
      reason: `unverified: unknown Wechatpay-Serial ${serial} (HTTP 200)`,
    });
    expect(downloads()).toBe(after);
    // A minute after the last fetch, the next one (the sandbox allows 5 minutes of skew).
    now += CERTIFICATE_FETCH_INTERVAL_MS - 30_000;
    expect(await provider.query(id)).toMatchObject({ kind: "trade", tradeState: "NOTPAY" });
    expect(downloads()).toBe(after + 1);
  });

  it("takes a certificate issued a moment ago by a clock ahead of ours (within 5 minutes)", async () => {
    const id = no("behind");
    sandbox.createTrade(id);
    await sandbox.rotateCertificate();
    const behind = wechatPayProvider(account(), { clock: () => Date.now() - 60_000 });
    expect(await behind.query(id)).toMatchObject({ kind: "trade", tradeState: "NOTPAY" });
  });

  it("fetches once for calls that meet it at the same time", async () => {
    const shop = account();
    const provider = wechatPayProvider(shop);
    const ids = [no("c"), no("c"), no("c")];
    for (const id of ids) sandbox.createTrade(id);
    await sandbox.rotateCertificate();
    const before = downloads();
    const answers = await Promise.all(ids.map((id) => provider.query(id)));
    for (const answer of answers) expect(answer).toMatchObject({ kind: "trade" });
    expect(downloads()).toBe(before + 1);
  });

  it("keeps none of a download that does not decrypt, or whose signature does not verify", async () => {
    const cases: [(text: string) => string, RegExp][] = [
      // Another ciphertext: the AES-GCM tag fails.
      [
        (text) =>
          text.replace(/"ciphertext":"(.)/g, (_, c) => `"ciphertext":"${c === "A" ? "B" : "A"}`),
        /the resource did not decrypt/,
      ],
      // The body changed after signing: its certificates decrypt, the signature fails.
      [(text) => text.replace('{"data"', '{ "data"'), /signature does not verify/],
    ];
    for (const [tamper, reason] of cases) {
      const id = no("tamper");
      sandbox.createTrade(id);
      await sandbox.rotateCertificate();
      const tampering = (async (input: string | URL | Request, init?: RequestInit) => {
        const res = await fetch(input, init);
        if (!String(input).includes("/v3/certificates")) return res;
        return new Response(tamper(await res.text()), { status: res.status, headers: res.headers });
      }) as typeof fetch;
      const answer = await wechatPayProvider(account(), { fetch: tampering }).query(id);
      expect(answer.kind).toBe("transient");
      expect((answer as { reason: string }).reason).toMatch(
        /^unverified: unknown Wechatpay-Serial/,
      );
      expect((answer as { reason: string }).reason).toMatch(reason);
    }
  });

  it("fetches nothing for an account in public-key mode", async () => {
    const publicKeySandbox = await startWechatPaySandbox({ mchid: "1900000022" });
    try {
      const shop = parseWechatPayAccounts({ shop: publicKeySandbox.account }).get("shop");
      if (!shop) throw new Error("no account");
      const id = no("pk");
      publicKeySandbox.createTrade(id);
      const otherSerial = (async (input: string | URL | Request, init?: RequestInit) => {
        const res = await fetch(input, init);
        const headers = new Headers(res.headers);
        headers.set("wechatpay-serial", "5157F09EFDC096DE15EBE81A47057A7232F1B8E1");
        return new Response(await res.text(), { status: res.status, headers });
      }) as typeof fetch;
      expect(await wechatPayProvider(shop, { fetch: otherSerial }).query(id)).toMatchObject({
        kind: "transient",
        reason:
          "unverified: unknown Wechatpay-Serial 5157F09EFDC096DE15EBE81A47057A7232F1B8E1 (HTTP 200)",
      });
      expect(publicKeySandbox.requests().map((r) => r.path)).not.toContain("/v3/certificates");
    } finally {
      await publicKeySandbox.close();
    }
  });
});

describe("the poll budget", () => {
  it("reserves one more subrequest per poll when a WeChat Pay account may fetch certificates", () => {
    const payments = (wechatpay: Map<string, WechatPayAccount>) =>
      createPayments({
        scripts: undefined as never,
        alipay: new Map(),
        wechatpay,
        defaults: { ttrMs: 60_000, maxAttempts: 3 },
      });
    const publicKey = parseWechatPayAccounts({
      shop: {
        ...sandbox.account,
        platformCertificates: undefined,
        platformPublicKey: sandbox.keys.merchantPublicKey,
        platformPublicKeyId: "PUB_KEY_ID_0000000000000000000000000001",
      },
    });
    expect(payments(publicKey).poller.subrequests).toBe(4);
    expect(payments(new Map([["shop", account()]])).poller.subrequests).toBe(5);
  });

  it("counts a poll's certificate download among its calls", async () => {
    const id = no("count");
    sandbox.createTrade(id);
    await sandbox.rotateCertificate();
    const counted = countingFetches();
    expect(await wechatPayProvider(account(), counted.options).query(id)).toMatchObject({
      kind: "trade",
    });
    expect(counted.made()).toBe(2);
  });
});
