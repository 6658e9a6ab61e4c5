// The providers end to end against the local Alipay and WeChat Pay sandboxes (dev/, built on the
// official SDKs): every provider queries and closes real sandbox trades through all their states,
// the sandboxes' notifications verify, tampered ones fail, injected faults give transient.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, parseBeijingTime, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import {
  type AlipayAccount,
  parseAlipayAccounts,
  parseWechatPayAccounts,
  type WechatPayAccount,
} from "../../src/payments/accounts";
import { alipayProvider, verifyAlipayNotification } from "../../src/payments/alipay";
import { MAX_ANSWER_BYTES, type NotificationResult } from "../../src/payments/provider";
import { verifyWechatPayNotification, wechatPayProvider } from "../../src/payments/wechatpay";

/** How long an injected "timeout" holds a request; the providers give up well before. */
const HANG_MS = 2_000;
const TIMEOUT_MS = 400;

/** A notify endpoint in the test: runs `check` on each delivery and answers as delayq will. */
async function receiver(
  check: (req: IncomingMessage, body: string) => Promise<NotificationResult>,
  reply: (result: NotificationResult) => { status: number; body: string },
) {
  const results: NotificationResult[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const result = await check(req, Buffer.concat(chunks).toString("utf8"));
      results.push(result);
      const { status, body } = reply(result);
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/notify`,
    results,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let sequence = 0;
const orderNo = (prefix: string) =>
  `${prefix}${Date.now().toString(36)}${(sequence++).toString(36)}`;

describe.each(["classic", "v3"] as const)("Alipay %s against the sandbox", (api) => {
  let sandbox: AlipaySandbox;
  let account: AlipayAccount;
  let notifications: Awaited<ReturnType<typeof receiver>>;
  beforeAll(async () => {
    sandbox = await startAlipaySandbox({ hangMs: HANG_MS });
    const parsed = parseAlipayAccounts(JSON.stringify({ sandbox: { ...sandbox.account, api } }));
    account = parsed.get("sandbox") as AlipayAccount;
    notifications = await receiver(
      async (_req, body) =>
        verifyAlipayNotification(account, new URLSearchParams(body), Date.now()),
      (result) => ({ status: 200, body: result.ok ? "success" : "fail" }),
    );
  });
  afterAll(async () => {
    await sandbox.close();
    await notifications.close();
  });

  const provider = () => alipayProvider(account, { timeoutMs: TIMEOUT_MS });

  it("follows a trade from not-yet-scanned through waiting, paid, finished", async () => {
    const no = orderNo("ali-");
    const p = provider();
    expect(await p.query(no)).toEqual({
      kind: "trade",
      outcome: "pending",
      tradeState: "ACQ.TRADE_NOT_EXIST",
    });
    const created = sandbox.createTrade(no, { totalAmount: "19.99" });
    expect(await p.query(no)).toEqual({
      kind: "trade",
      outcome: "pending",
      tradeState: "WAIT_BUYER_PAY",
      tradeNo: created.tradeNo,
      amount: { total: 1999, currency: "CNY" },
    });
    const paid = sandbox.pay(no);
    const paidAt = parseBeijingTime(paid.gmtPayment ?? "");
    expect(paidAt).toBeTypeOf("number");
    expect(await p.query(no)).toEqual({
      kind: "trade",
      outcome: "paid",
      tradeState: "TRADE_SUCCESS",
      tradeNo: created.tradeNo,
      amount: { total: 1999, currency: "CNY" },
      paidAt,
    });
    sandbox.pay(no, { finished: true });
    expect(await p.query(no)).toMatchObject({
      outcome: "paid",
      tradeState: "TRADE_FINISHED",
      paidAt,
    });
  });

  it("sees trades closed by timeout and by a full refund as closed", async () => {
    const p = provider();
    const expired = orderNo("ali-");
    sandbox.createTrade(expired);
    sandbox.close(expired);
    expect(await p.query(expired)).toMatchObject({ outcome: "closed", tradeState: "TRADE_CLOSED" });
    const refunded = orderNo("ali-");
    sandbox.createTrade(refunded, { totalAmount: "5" });
    sandbox.pay(refunded);
    sandbox.refund(refunded);
    expect(await p.query(refunded)).toMatchObject({
      outcome: "closed",
      tradeState: "TRADE_CLOSED",
      amount: { total: 500, currency: "CNY" },
    });
  });

  it("closes a waiting trade; refuses to close a paid or closed one; notFound for none", async () => {
    const p = provider();
    const waiting = orderNo("ali-");
    sandbox.createTrade(waiting);
    expect(await p.close(waiting)).toEqual({ kind: "closed" });
    expect(sandbox.trade(waiting)?.status).toBe("TRADE_CLOSED");
    expect(await p.query(waiting)).toMatchObject({ outcome: "closed" });
    expect(await p.close(waiting)).toMatchObject({
      kind: "refused",
      reason: expect.stringContaining("ACQ.TRADE_STATUS_ERROR"),
    });
    const paid = orderNo("ali-");
    sandbox.createTrade(paid);
    sandbox.pay(paid);
    expect(await p.close(paid)).toMatchObject({ kind: "refused" });
    // Refused, the caller queries again, and finds it paid.
    expect(await p.query(paid)).toMatchObject({ outcome: "paid" });
    expect(await p.close(orderNo("ali-none-"))).toEqual({ kind: "notFound" });
  });

  it("signs every request so that the sandbox's official-SDK check passes", () => {
    const requests = sandbox.requests();
    expect(requests.length).toBeGreaterThan(5);
    expect(requests.filter((r) => !r.verified)).toEqual([]);
    expect(requests.every((r) => r.api === api)).toBe(true);
  });

  it("gives transient for every injected fault, and then the real answer", async () => {
    const p = provider();
    const no = orderNo("ali-");
    sandbox.createTrade(no);
    sandbox.pay(no);
    for (const fault of ["5xx", "timeout", "systemError", "badSignature"] as const) {
      sandbox.inject(fault);
      const answer = await p.query(no);
      expect(answer, fault).toMatchObject({ kind: "transient" });
    }
    // A signed answer over 1 MiB (Content-Length says so) is not read, however good it is.
    sandbox.inject("huge");
    expect(await p.query(no)).toEqual({
      kind: "transient",
      reason: `HTTP 200 answer over ${MAX_ANSWER_BYTES} bytes, not read (the limit)`,
    });
    sandbox.inject("badSignature");
    expect(await p.close(no)).toMatchObject({ kind: "transient" });
    sandbox.inject("tradeNotExist");
    expect(await p.query(no)).toEqual({
      kind: "trade",
      outcome: "pending",
      tradeState: "ACQ.TRADE_NOT_EXIST",
    });
    expect(await p.query(no)).toMatchObject({ kind: "trade", outcome: "paid" });
  });

  it("stops with the sandbox's message on a wrong app id or key", async () => {
    const wrongApp = { ...account, appId: "2021999999999999" };
    expect(await alipayProvider(wrongApp).query(orderNo("ali-"))).toMatchObject({
      kind: "config",
      reason: expect.stringContaining("invalid-app-id"),
    });
    const other = parseAlipayAccounts({
      x: { ...sandbox.account, api, privateKey: sandbox.keys.alipayPrivateKey },
    }).get("x") as AlipayAccount;
    expect(await alipayProvider(other).query(orderNo("ali-"))).toMatchObject({
      kind: "config",
      reason: expect.stringContaining("invalid-signature"),
    });
  });

  it("verifies the sandbox's notifications and refuses tampered ones", async () => {
    const no = orderNo("ali-");
    sandbox.createTrade(no, { totalAmount: "0.29" });
    sandbox.pay(no);
    const before = notifications.results.length;
    expect(await sandbox.notify(no, notifications.url)).toEqual({ status: 200, text: "success" });
    expect(notifications.results[before]).toEqual({
      ok: true,
      outTradeNo: no,
      answer: {
        kind: "trade",
        outcome: "paid",
        tradeState: "TRADE_SUCCESS",
        tradeNo: sandbox.trade(no)?.tradeNo,
        amount: { total: 29, currency: "CNY" },
        paidAt: parseBeijingTime(sandbox.trade(no)?.gmtPayment ?? ""),
      },
      notifyId: expect.stringMatching(/^\d{8}00222\d{27}$/),
    });
    expect(await sandbox.notify(no, notifications.url, { tamper: true })).toEqual({
      status: 200,
      text: "fail",
    });
    expect(notifications.results[before + 1]).toEqual({
      ok: false,
      reason: "unverified: signature does not verify",
    });
    sandbox.refund(no);
    expect(await sandbox.notify(no, notifications.url)).toEqual({ status: 200, text: "success" });
    expect(notifications.results[before + 2]).toMatchObject({
      ok: true,
      answer: { outcome: "closed" },
    });
  });
});

describe.each(["publicKey", "certificate"] as const)(
  "WeChat Pay (%s mode) against the sandbox",
  (mode) => {
    let sandbox: WechatPaySandbox;
    let account: WechatPayAccount;
    let notifications: Awaited<ReturnType<typeof receiver>>;
    beforeAll(async () => {
      sandbox = await startWechatPaySandbox({ mode, hangMs: HANG_MS });
      account = parseWechatPayAccounts(JSON.stringify({ sandbox: sandbox.account })).get(
        "sandbox",
      ) as WechatPayAccount;
      notifications = await receiver(
        async (req, body) => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(req.headers)) {
            if (typeof value === "string") headers.set(name, value);
          }
          return verifyWechatPayNotification(account, headers, body, Date.now());
        },
        (result) =>
          result.ok
            ? { status: 204, body: "" }
            : { status: 401, body: JSON.stringify({ code: "FAIL", message: result.reason }) },
      );
    });
    afterAll(async () => {
      await sandbox.close();
      await notifications.close();
    });

    const provider = () => wechatPayProvider(account, { timeoutMs: TIMEOUT_MS });

    it("is configured in the mode under test", () => {
      if (mode === "publicKey") expect(account.platformPublicKeyId).toMatch(/^PUB_KEY_ID_/);
      else expect(account.platformCertificates?.length).toBeGreaterThan(0);
    });

    it("follows an order through every trade_state", async () => {
      const p = provider();
      const no = orderNo("wx");
      expect(await p.query(no)).toEqual({ kind: "notFound", tradeState: "ORDER_NOT_EXIST" });
      const created = sandbox.createTrade(no, { total: 1999 });
      // An untouched NOTPAY order has no transaction_id yet, as at WeChat Pay.
      const expected = (outcome: string, tradeState: string, paidAt?: number) => ({
        kind: "trade",
        outcome,
        tradeState,
        ...(tradeState === "NOTPAY" ? {} : { tradeNo: created.transactionId }),
        amount: { total: 1999, currency: "CNY" },
        ...(paidAt === undefined ? {} : { paidAt }),
      });
      expect(await p.query(no)).toEqual(expected("pending", "NOTPAY"));
      sandbox.setState(no, "USERPAYING");
      expect(await p.query(no)).toEqual(expected("pending", "USERPAYING"));
      const paid = sandbox.pay(no);
      const paidAt = Date.parse(paid.successTime ?? "");
      expect(Number.isFinite(paidAt)).toBe(true);
      expect(await p.query(no)).toEqual(expected("paid", "SUCCESS", paidAt));
      sandbox.refund(no);
      expect(await p.query(no)).toEqual(expected("paid", "REFUND", paidAt));
      for (const [state, outcome] of [
        ["CLOSED", "closed"],
        ["REVOKED", "closed"],
        ["PAYERROR", "failed"],
      ] as const) {
        sandbox.setState(no, state);
        expect(await p.query(no), state).toMatchObject({
          kind: "trade",
          outcome,
          tradeState: state,
        });
      }
    });

    it("closes an unpaid order (a verified 204), refuses a paid one, notFound for none", async () => {
      const p = provider();
      const unpaid = orderNo("wx");
      sandbox.createTrade(unpaid);
      expect(await p.close(unpaid)).toEqual({ kind: "closed" });
      expect(sandbox.trade(unpaid)?.state).toBe("CLOSED");
      expect(await p.query(unpaid)).toMatchObject({ outcome: "closed", tradeState: "CLOSED" });
      const paid = orderNo("wx");
      sandbox.createTrade(paid);
      sandbox.pay(paid);
      expect(await p.close(paid)).toEqual({ kind: "refused", reason: "ORDERPAID: 订单已支付" });
      expect(await p.query(paid)).toMatchObject({ outcome: "paid" });
      expect(await p.close(orderNo("wx-none"))).toEqual({ kind: "notFound" });
    });

    it("signs every request so that the sandbox's official-SDK check passes", () => {
      const requests = sandbox.requests();
      expect(requests.length).toBeGreaterThan(5);
      expect(requests.filter((r) => !r.verified)).toEqual([]);
    });

    it("gives transient for every injected fault, on query and on close", async () => {
      const p = provider();
      const no = orderNo("wx");
      sandbox.createTrade(no);
      sandbox.pay(no);
      for (const fault of ["5xx", "timeout", "429", "badSignature", "staleTimestamp"] as const) {
        sandbox.inject(fault);
        expect(await p.query(no), fault).toMatchObject({ kind: "transient" });
      }
      // A signed answer over 1 MiB, streamed without a Content-Length: read up to the limit only.
      sandbox.inject("huge");
      expect(await p.query(no)).toEqual({
        kind: "transient",
        reason: `HTTP 200 answer over ${MAX_ANSWER_BYTES} bytes, not read (the limit)`,
      });
      const unpaid = orderNo("wx");
      sandbox.createTrade(unpaid);
      for (const fault of ["badSignature", "staleTimestamp"] as const) {
        sandbox.inject(fault);
        expect(await p.close(unpaid), fault).toMatchObject({ kind: "transient" });
      }
      sandbox.inject("badSignature");
      expect(await p.query(orderNo("wx-none"))).toMatchObject({ kind: "transient" });
      expect(await p.query(no)).toMatchObject({ kind: "trade", outcome: "paid" });
    });

    it("stops with the sandbox's message on a wrong merchant serial or key", async () => {
      const wrongSerial = { ...account, serialNo: "0123456789ABCDEF" };
      expect(await wechatPayProvider(wrongSerial).query(orderNo("wx"))).toMatchObject({
        kind: "config",
        reason: expect.stringContaining("SIGN_ERROR"),
      });
      const wrongMchid = { ...account, mchid: "1900009999" };
      expect(await wechatPayProvider(wrongMchid).query(orderNo("wx"))).toMatchObject({
        kind: "config",
      });
    });

    it("refuses answers signed by a key the account does not have", async () => {
      // The account of the other mode knows other WeChat keys, so every answer is foreign to it.
      const otherMode = mode === "publicKey" ? "certificate" : "publicKey";
      const other = await startWechatPaySandbox({ mode: otherMode });
      try {
        const foreign = { ...account, baseUrl: other.url };
        const answer = await wechatPayProvider(foreign).query(orderNo("wx"));
        expect(answer).toMatchObject({ kind: "transient" });
      } finally {
        await other.close();
      }
    });

    it("verifies the sandbox's notifications; tampered and probe ones fail", async () => {
      const no = orderNo("wx");
      sandbox.createTrade(no, { total: 29 });
      sandbox.pay(no);
      const before = notifications.results.length;
      expect(await sandbox.notify(no, notifications.url)).toEqual({ status: 204, text: "" });
      expect(notifications.results[before]).toEqual({
        ok: true,
        outTradeNo: no,
        answer: {
          kind: "trade",
          outcome: "paid",
          tradeState: "SUCCESS",
          tradeNo: sandbox.trade(no)?.transactionId,
          amount: { total: 29, currency: "CNY" },
          paidAt: Date.parse(sandbox.trade(no)?.successTime ?? ""),
        },
        notifyId: expect.any(String),
      });
      const tampered = await sandbox.notify(no, notifications.url, { tamper: true });
      expect(tampered.status).toBe(401);
      expect(notifications.results[before + 1]).toEqual({
        ok: false,
        reason: "unverified: signature does not verify",
      });
      const probe = await sandbox.notify(no, notifications.url, { probe: true });
      expect(probe.status).toBe(401);
      expect(notifications.results[before + 2]).toEqual({
        ok: false,
        reason: "unverified: signature probe (WECHATPAY/SIGNTEST/)",
      });
    });
  },
);
