// The Alipay sandbox driven by Alipay's official SDK: its requests verify, its answers verify in the SDK, and it refuses what Alipay refuses.
import { createSign, createVerify } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { AlipayRequestError, AlipaySdk, type AlipaySdkConfig } from "alipay-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AlipayAccount,
  type AlipaySandbox,
  beijingTime,
  classicSignContent,
  parseBeijingTime,
  startAlipaySandbox,
} from "../../dev/alipay-sandbox";
import {
  base64ToPem,
  isPkcs8Der,
  pemToBase64,
  pkcs1ToPkcs8,
  pkcs1ToSpki,
  pkcs8ToPkcs1,
  privateKeyPem,
  readPrivateKey,
  readPublicKey,
  rsaKeyPair,
  spkiToPkcs1,
} from "../../dev/payment-keys";

type PublicKeyAccount = Extract<AlipayAccount, { alipayPublicKey: string }>;

let sandbox: AlipaySandbox;
/** The sandbox's account (public-key mode). */
const account = () => sandbox.account as PublicKeyAccount;
let sdk: AlipaySdk;
/** A client whose app key is not the one the sandbox knows. */
let stranger: AlipaySdk;
let seq = 0;
const no = (label: string) => `${label}-${Date.now()}-${++seq}`;

/** An official SDK client for the sandbox's account; `overrides` swap keys, app id, timeouts. */
function client(overrides: Partial<AlipaySdkConfig> = {}): AlipaySdk {
  return new AlipaySdk({
    appId: sandbox.account.appId,
    privateKey: pemToBase64(sandbox.account.privateKey),
    keyType: "PKCS8",
    alipayPublicKey: account().alipayPublicKey,
    gateway: `${sandbox.url}/gateway.do`,
    endpoint: sandbox.url,
    timeout: 3000,
    ...overrides,
  });
}

// The SDK stamps `timestamp` in the machine's local zone; Alipay wants Beijing time, so
// (like any merchant server not in Asia/Shanghai) the caller passes it explicitly.
const exec = (c: AlipaySdk, method: string, outTradeNo: string) =>
  c.exec(method, { bizContent: { outTradeNo }, timestamp: beijingTime() }, { validateSign: true });

const curl = (c: AlipaySdk, path: string, outTradeNo: string) =>
  c.curl("POST", path, { body: { out_trade_no: outTradeNo } });

const last = () => sandbox.requests().at(-1);

beforeAll(async () => {
  sandbox = await startAlipaySandbox();
  sdk = client();
  const other = await rsaKeyPair("alipay-test-stranger");
  stranger = client({ privateKey: pemToBase64(privateKeyPem(other.privateKey)) });
});
afterAll(async () => {
  await sandbox.close();
});

describe("classic gateway, through AlipaySdk.exec with validateSign", () => {
  it("answers an unpaid trade, verified by the SDK", async () => {
    const id = no("unpaid");
    sandbox.createTrade(id, { totalAmount: "12.3" });
    const result = await exec(sdk, "alipay.trade.query", id);
    expect(result).toMatchObject({
      code: "10000",
      msg: "Success",
      tradeStatus: "WAIT_BUYER_PAY",
      outTradeNo: id,
      totalAmount: "12.30",
      tradeNo: sandbox.trade(id)?.tradeNo,
    });
    expect(result.sendPayDate).toBeUndefined();
    expect(last()).toMatchObject({
      api: "classic",
      method: "POST",
      path: "/gateway.do",
      verified: true,
      method_: "alipay.trade.query",
      bizContent: { out_trade_no: id },
      status: 200,
      code: "10000",
    });
  });

  it("answers a paid trade with its payment time in Beijing time", async () => {
    const id = no("paid");
    sandbox.createTrade(id, { totalAmount: "88.88" });
    sandbox.pay(id);
    const result = await exec(sdk, "alipay.trade.query", id);
    expect(result.tradeStatus).toBe("TRADE_SUCCESS");
    expect(result.buyerPayAmount).toBe("88.88");
    expect(result.buyerLogonId).toMatch(/^\d{3}\*{4}\d{4}$/);
    expect(result.buyerUserId).toMatch(/^2088\d{12}$/);
    expect(result.sendPayDate).toBe(sandbox.trade(id)?.gmtPayment);
    const at = parseBeijingTime(result.sendPayDate);
    expect(Math.abs((at ?? 0) - Date.now())).toBeLessThan(5000);

    sandbox.pay(id, { finished: true });
    expect((await exec(sdk, "alipay.trade.query", id)).tradeStatus).toBe("TRADE_FINISHED");
  });

  it("closes an unpaid trade, then reports it closed", async () => {
    const id = no("close");
    sandbox.createTrade(id);
    const closed = await exec(sdk, "alipay.trade.close", id);
    expect(closed).toMatchObject({
      code: "10000",
      outTradeNo: id,
      tradeNo: sandbox.trade(id)?.tradeNo,
    });
    expect(sandbox.trade(id)?.status).toBe("TRADE_CLOSED");
    expect((await exec(sdk, "alipay.trade.query", id)).tradeStatus).toBe("TRADE_CLOSED");
    expect(last()?.method_).toBe("alipay.trade.query");
  });

  it("refuses to close a paid trade with ACQ.TRADE_STATUS_ERROR", async () => {
    const id = no("paid-close");
    sandbox.createTrade(id);
    sandbox.pay(id);
    const result = await exec(sdk, "alipay.trade.close", id);
    expect(result).toMatchObject({
      code: "40004",
      msg: "Business Failed",
      subCode: "ACQ.TRADE_STATUS_ERROR",
    });
    expect(sandbox.trade(id)?.status).toBe("TRADE_SUCCESS");
  });

  it("answers ACQ.TRADE_NOT_EXIST to query and close of an unknown trade", async () => {
    for (const method of ["alipay.trade.query", "alipay.trade.close"]) {
      const result = await exec(sdk, method, no("ghost"));
      expect(result).toMatchObject({ code: "40004", subCode: "ACQ.TRADE_NOT_EXIST" });
    }
  });

  it("refuses a request signed with another key: isv.invalid-signature, answer still signed", async () => {
    const id = no("stranger");
    sandbox.createTrade(id);
    const result = await exec(stranger, "alipay.trade.query", id);
    expect(result).toMatchObject({
      code: "40002",
      msg: "Invalid Arguments",
      subCode: "isv.invalid-signature",
    });
    // Alipay shows the string it checked, so a merchant can compare it with what they signed.
    expect(result.subMsg).toContain("app_id=");
    expect(result.subMsg).toContain(`"out_trade_no":"${id}"`);
    expect(last()).toMatchObject({
      verified: false,
      code: "40002",
      subCode: "isv.invalid-signature",
    });
  });

  it("refuses an unknown app id and an unknown method", async () => {
    const result = await exec(client({ appId: "2021009999999999" }), "alipay.trade.query", no("x"));
    expect(result).toMatchObject({ code: "40002", subCode: "isv.invalid-app-id" });
    const unknown = await sdk.exec("alipay.trade.refund", {
      bizContent: { outTradeNo: "x" },
      timestamp: beijingTime(),
    });
    expect(unknown).toMatchObject({ code: "40002", subCode: "isv.invalid-method" });
  });

  it("refuses a timestamp stamped in UTC instead of Beijing time", async () => {
    const saved = process.env.TZ;
    process.env.TZ = "UTC";
    try {
      const id = no("utc");
      sandbox.createTrade(id);
      // No explicit timestamp: the SDK writes local time, which is now UTC, 8 hours off.
      const result = await sdk.exec(
        "alipay.trade.query",
        { bizContent: { outTradeNo: id } },
        { validateSign: true },
      );
      expect(result).toMatchObject({ code: "40002", subCode: "isv.invalid-timestamp" });
      expect(last()?.verified).toBe(true);
    } finally {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    }
  });

  it("accepts a PKCS#1 app key, the SDK's default key type", async () => {
    const pkcs1 = client({
      privateKey: pemToBase64(pkcs8ToPkcs1(sandbox.account.privateKey)),
      keyType: "PKCS1",
    });
    const id = no("pkcs1");
    sandbox.createTrade(id);
    expect((await exec(pkcs1, "alipay.trade.query", id)).code).toBe("10000");
  });

  it("signs the raw answer text, `\\/` escapes included, so re-serializing fails", async () => {
    const id = no("raw");
    sandbox.createTrade(id, { subject: "Sandbox/原始文本" });
    // A request signed by hand with node:crypto, independent of the SDK.
    const params: Record<string, string> = {
      app_id: sandbox.account.appId,
      method: "alipay.trade.query",
      charset: "utf-8",
      sign_type: "RSA2",
      timestamp: beijingTime(),
      version: "1.0",
      biz_content: JSON.stringify({ out_trade_no: id }),
    };
    params.sign = createSign("RSA-SHA256")
      .update(classicSignContent(params), "utf8")
      .sign(sandbox.account.privateKey, "base64");
    const { biz_content, ...urlParams } = params;
    const res = await fetch(`${sandbox.url}/gateway.do?${new URLSearchParams(urlParams)}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded;charset=utf-8" },
      body: new URLSearchParams({ biz_content: biz_content as string }),
    });
    const text = await res.text();
    const key = '{"alipay_trade_query_response":';
    expect(text.startsWith(key)).toBe(true);
    const signAt = text.lastIndexOf(',"sign":"');
    const inner = text.slice(key.length, signAt);
    const sign = JSON.parse(text).sign as string;
    expect(inner).toContain("Sandbox\\/原始文本");
    const alipayKey = readPublicKey(account().alipayPublicKey);
    const verify = (content: string) =>
      createVerify("RSA-SHA256").update(content, "utf8").verify(alipayKey, sign, "base64");
    expect(verify(inner)).toBe(true);
    const reserialized = JSON.stringify(JSON.parse(inner));
    expect(reserialized).not.toBe(inner);
    expect(verify(reserialized)).toBe(false);
  });
});

describe("v3, through AlipaySdk.curl (which verifies 2xx answers)", () => {
  it("queries unpaid and paid trades with verified answers", async () => {
    const id = no("v3");
    sandbox.createTrade(id, { totalAmount: "5" });
    const unpaid = await curl(sdk, "/v3/alipay/trade/query", id);
    expect(unpaid.responseHttpStatus).toBe(200);
    expect(unpaid.data).toMatchObject({
      out_trade_no: id,
      trade_status: "WAIT_BUYER_PAY",
      total_amount: "5.00",
    });
    expect(unpaid.data.code).toBeUndefined();
    sandbox.pay(id);
    const paid = await curl(sdk, "/v3/alipay/trade/query", id);
    expect(paid.data).toMatchObject({
      trade_status: "TRADE_SUCCESS",
      send_pay_date: expect.any(String),
    });
    expect(last()).toMatchObject({ api: "v3", path: "/v3/alipay/trade/query", verified: true });
  });

  it("closes, refuses to close a paid trade, and answers HTTP 400 for an unknown one", async () => {
    const id = no("v3-close");
    sandbox.createTrade(id);
    const closed = await curl(sdk, "/v3/alipay/trade/close", id);
    expect(closed.data).toMatchObject({ out_trade_no: id, trade_no: sandbox.trade(id)?.tradeNo });
    expect(sandbox.trade(id)?.status).toBe("TRADE_CLOSED");

    const paidId = no("v3-paid");
    sandbox.createTrade(paidId);
    sandbox.pay(paidId);
    await expect(curl(sdk, "/v3/alipay/trade/close", paidId)).rejects.toMatchObject({
      code: "ACQ.TRADE_STATUS_ERROR",
      responseHttpStatus: 400,
    });
    await expect(curl(sdk, "/v3/alipay/trade/query", no("v3-ghost"))).rejects.toMatchObject({
      code: "ACQ.TRADE_NOT_EXIST",
      responseHttpStatus: 400,
    });
  });

  it("refuses a request signed with another key", async () => {
    await expect(curl(stranger, "/v3/alipay/trade/query", no("x"))).rejects.toMatchObject({
      code: "invalid-signature",
      responseHttpStatus: 401,
    });
    expect(last()?.verified).toBe(false);
  });
});

describe("refunds: alipay.trade.fastpay.refund.query through the official SDK, classic and v3", () => {
  const REFUND_QUERY = "alipay.trade.fastpay.refund.query";
  const V3_REFUND_QUERY = "/v3/alipay/trade/fastpay/refund/query";
  const refundQuery = (outTradeNo: string, outRequestNo: string) =>
    sdk.exec(
      REFUND_QUERY,
      {
        bizContent: { outTradeNo, outRequestNo, queryOptions: ["gmt_refund_pay"] },
        timestamp: beijingTime(),
      },
      { validateSign: true },
    );
  const v3RefundQuery = (outTradeNo: string, outRequestNo: string) =>
    sdk.curl("POST", V3_REFUND_QUERY, {
      body: { out_trade_no: outTradeNo, out_request_no: outRequestNo },
    });

  it("answers a processing refund without refund_status, then REFUND_SUCCESS with its amounts", async () => {
    const id = no("refund");
    sandbox.createTrade(id, { totalAmount: "12.30" });
    sandbox.pay(id);
    const made = sandbox.createRefund(id, "r1", { refundAmount: "2.3" });
    expect(made).toMatchObject({ outRequestNo: "r1", refundAmount: "2.30", status: "PROCESSING" });
    const processing = await refundQuery(id, "r1");
    expect(processing).toMatchObject({
      code: "10000",
      msg: "Success",
      outTradeNo: id,
      outRequestNo: "r1",
      tradeNo: sandbox.trade(id)?.tradeNo,
      totalAmount: "12.30",
    });
    expect(processing.refundStatus).toBeUndefined();
    expect(processing.refundAmount).toBeUndefined();
    expect(last()).toMatchObject({
      api: "classic",
      verified: true,
      method_: REFUND_QUERY,
      bizContent: { out_trade_no: id, out_request_no: "r1", query_options: ["gmt_refund_pay"] },
      code: "10000",
    });
    sandbox.succeedRefund(id, "r1");
    const done = await refundQuery(id, "r1");
    expect(done).toMatchObject({
      code: "10000",
      refundStatus: "REFUND_SUCCESS",
      refundAmount: "2.30",
      totalAmount: "12.30",
      gmtRefundPay: sandbox.getRefund(id, "r1")?.gmtRefundPay,
    });
    expect(parseBeijingTime(done.gmtRefundPay)).toBeDefined();
    // Part of it refunded: the trade stays paid.
    expect(sandbox.trade(id)).toMatchObject({ status: "TRADE_SUCCESS", refundFee: "2.30" });
  });

  it("v3: the same answers, verified by curl; gmt_refund_pay only when asked", async () => {
    const id = no("v3-refund");
    sandbox.createTrade(id, { totalAmount: "8" });
    sandbox.pay(id);
    sandbox.createRefund(id, "all");
    const processing = await v3RefundQuery(id, "all");
    expect(processing.responseHttpStatus).toBe(200);
    expect(processing.data).toEqual({
      out_request_no: "all",
      out_trade_no: id,
      total_amount: "8.00",
      trade_no: sandbox.trade(id)?.tradeNo,
    });
    sandbox.succeedRefund(id, "all");
    const done = await v3RefundQuery(id, "all");
    expect(done.data).toMatchObject({ refund_status: "REFUND_SUCCESS", refund_amount: "8.00" });
    expect(done.data.gmt_refund_pay).toBeUndefined();
    expect(last()).toMatchObject({ api: "v3", path: V3_REFUND_QUERY, verified: true });
    // All of it refunded: Alipay closes the trade.
    expect(sandbox.trade(id)).toMatchObject({ status: "TRADE_CLOSED", refundFee: "8.00" });
  });

  it("answers a refund request it never received without refund_status, and an unknown trade ACQ.TRADE_NOT_EXIST", async () => {
    const id = no("norefund");
    sandbox.createTrade(id);
    sandbox.pay(id);
    const none = await refundQuery(id, "never");
    expect(none).toMatchObject({ code: "10000", outRequestNo: "never" });
    expect(none.refundStatus).toBeUndefined();
    const ghost = await refundQuery(no("ghost"), "r1");
    expect(ghost).toMatchObject({ code: "40004", subCode: "ACQ.TRADE_NOT_EXIST" });
    await expect(v3RefundQuery(no("ghost"), "r1")).rejects.toMatchObject({
      code: "ACQ.TRADE_NOT_EXIST",
      responseHttpStatus: 400,
    });
  });

  it("faults apply to refund queries: badSignature is refused by the SDK", async () => {
    const id = no("refund-fault");
    sandbox.createTrade(id);
    sandbox.pay(id);
    sandbox.createRefund(id, "r1");
    sandbox.inject("badSignature");
    await expect(refundQuery(id, "r1")).rejects.toThrow(/验签失败|sign/i);
    sandbox.inject("badSignature");
    await expect(v3RefundQuery(id, "r1")).rejects.toThrow(/验签失败|sign/i);
  });

  it("control API: create (of a paid trade only, within what is left), read, succeed", async () => {
    const call = async (path: string, body?: unknown, method = "POST") => {
      const res = await fetch(`${sandbox.url}/__sandbox${path}`, {
        method,
        headers: { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const id = no("refund-ctl");
    sandbox.createTrade(id, { totalAmount: "10.00" });
    expect((await call(`/trades/${id}/refunds`, { outRequestNo: "r1" })).json).toMatchObject({
      error: "bad_state",
    });
    sandbox.pay(id);
    expect(await call(`/trades/${id}/refunds`, { outRequestNo: "r1", amount: "4" })).toMatchObject({
      status: 201,
      json: {
        outRequestNo: "r1",
        refundAmount: "4.00",
        totalAmount: "10.00",
        status: "PROCESSING",
      },
    });
    expect((await call(`/trades/${id}/refunds`, { outRequestNo: "r1" })).status).toBe(409);
    expect(
      (await call(`/trades/${id}/refunds`, { outRequestNo: "r2", amount: "6.01" })).status,
    ).toBe(400);
    expect((await call(`/trades/${id}/refunds/r1`, undefined, "GET")).json.status).toBe(
      "PROCESSING",
    );
    expect((await call(`/trades/${id}/refunds/r1/succeed`)).json.status).toBe("REFUND_SUCCESS");
    expect((await call(`/trades/${id}/refunds/r1/succeed`)).status).toBe(409);
    expect((await call(`/trades/${id}/refunds/r9`, undefined, "GET")).status).toBe(404);
    expect((await refundQuery(id, "r1")).refundStatus).toBe("REFUND_SUCCESS");
  });
});

describe("certificate mode, through the official SDK in certificate mode", () => {
  type CertificateAccount = Extract<AlipayAccount, { appCert: string }>;
  let certSandbox: AlipaySandbox;
  let certAccount: CertificateAccount;
  let certSdk: AlipaySdk;
  beforeAll(async () => {
    certSandbox = await startAlipaySandbox({ mode: "certificate", appId: "2021000000000002" });
    certAccount = certSandbox.account as CertificateAccount;
    certSdk = new AlipaySdk({
      appId: certAccount.appId,
      privateKey: pemToBase64(certAccount.privateKey),
      keyType: "PKCS8",
      appCertContent: certAccount.appCert,
      alipayPublicCertContent: certAccount.alipayCert,
      alipayRootCertContent: certAccount.alipayRootCert,
      gateway: `${certSandbox.url}/gateway.do`,
      endpoint: certSandbox.url,
      timeout: 3000,
    });
  }, 30_000);
  afterAll(async () => {
    await certSandbox.close();
  });
  const lastCert = () => certSandbox.requests().at(-1);

  it("gives certificates, not a public key, and the SNs the SDK computes from them", () => {
    expect("alipayPublicKey" in certAccount).toBe(false);
    expect(certSandbox.mode).toBe("certificate");
    const config = certSdk.config as unknown as Record<string, string>;
    expect(certSandbox.certificates).toMatchObject({
      appCertSn: config.appCertSn,
      alipayCertSn: config.alipayCertSn,
      alipayRootCertSn: config.alipayRootCertSn,
    });
    // Leaf then intermediate in each certificate file; an RSA and an EC root in the bundle.
    for (const text of [certAccount.appCert, certAccount.alipayCert, certAccount.alipayRootCert]) {
      expect(text.match(/-----BEGIN CERTIFICATE-----/g)).toHaveLength(2);
    }
  });

  it("classic: checks app_cert_sn and alipay_root_cert_sn, answers with alipay_cert_sn, verified by the SDK", async () => {
    const id = no("cert");
    certSandbox.createTrade(id, { totalAmount: "3" });
    const result = await exec(certSdk, "alipay.trade.query", id);
    expect(result).toMatchObject({ code: "10000", tradeStatus: "WAIT_BUYER_PAY" });
    expect(lastCert()).toMatchObject({ api: "classic", verified: true, certificateSns: true });
    // The raw answer names Alipay's certificate after the signature.
    const res = await fetch(
      `${certSandbox.url}/gateway.do?${new URLSearchParams({
        app_id: certAccount.appId,
      })}`,
      { method: "POST" },
    );
    expect(await res.text()).toContain(
      `"alipay_cert_sn":"${certSandbox.certificates?.alipayCertSn}"}`,
    );
  });

  it("v3: checks the authorization's app_cert_sn and the alipay-root-cert-sn header; alipay-sn verified by the SDK", async () => {
    const id = no("cert-v3");
    certSandbox.createTrade(id);
    const answer = await curl(certSdk, "/v3/alipay/trade/query", id);
    expect(answer.data).toMatchObject({ out_trade_no: id, trade_status: "WAIT_BUYER_PAY" });
    expect(lastCert()).toMatchObject({ api: "v3", verified: true, certificateSns: true });
    certSandbox.inject("wrongCertSn");
    await expect(curl(certSdk, "/v3/alipay/trade/query", id)).rejects.toMatchObject({
      code: "response-alipay-sn-verify-error",
    });
  });

  it("refuses a request without the SNs (a client in public-key mode)", async () => {
    const publicKeyClient = new AlipaySdk({
      appId: certAccount.appId,
      privateKey: pemToBase64(certAccount.privateKey),
      keyType: "PKCS8",
      alipayPublicKey: pemToBase64(
        readPublicKey(certAccount.alipayCert).export({
          type: "spki",
          format: "pem",
        }) as string,
      ),
      gateway: `${certSandbox.url}/gateway.do`,
      endpoint: certSandbox.url,
    });
    const id = no("cert-nosn");
    certSandbox.createTrade(id);
    await expect(exec(publicKeyClient, "alipay.trade.query", id)).resolves.toMatchObject({
      code: "40002",
      subCode: "isv.missing-app-cert-sn",
    });
    expect(lastCert()).toMatchObject({ verified: true, certificateSns: false });
    await expect(curl(publicKeyClient, "/v3/alipay/trade/query", id)).rejects.toMatchObject({
      code: "isv.missing-app-cert-sn",
      responseHttpStatus: 401,
    });
  });
});

describe("fault injection", () => {
  it("5xx: two HTTP 502s in a row, then a normal answer", async () => {
    const id = no("5xx");
    sandbox.createTrade(id);
    sandbox.inject("5xx", 2);
    for (let i = 0; i < 2; i++) {
      const error = await exec(sdk, "alipay.trade.query", id).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AlipayRequestError);
      expect((error as Error).message).toContain("status: 502");
    }
    expect((await exec(sdk, "alipay.trade.query", id)).code).toBe("10000");
    expect(
      sandbox
        .requests()
        .slice(-3)
        .map((r) => r.fault),
    ).toEqual(["5xx", "5xx", undefined]);
  });

  it("timeout: the request hangs past the client's timeout", async () => {
    sandbox.inject("timeout");
    const started = Date.now();
    await expect(
      exec(client({ timeout: 400 }), "alipay.trade.query", no("hang")),
    ).rejects.toBeInstanceOf(AlipayRequestError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
  });

  it("systemError, tradeNotExist: signed business errors", async () => {
    const id = no("sys");
    sandbox.createTrade(id);
    sandbox.inject("systemError");
    expect(await exec(sdk, "alipay.trade.query", id)).toMatchObject({
      code: "20000",
      subCode: "ACQ.SYSTEM_ERROR",
    });
    sandbox.inject("tradeNotExist");
    expect(await exec(sdk, "alipay.trade.query", id)).toMatchObject({
      code: "40004",
      subCode: "ACQ.TRADE_NOT_EXIST",
    });
    sandbox.inject("systemError");
    await expect(curl(sdk, "/v3/alipay/trade/query", id)).rejects.toMatchObject({
      code: "ACQ.SYSTEM_ERROR",
    });
  });

  it("badSignature: the SDK rejects the answer, classic and v3", async () => {
    const id = no("badsig");
    sandbox.createTrade(id);
    sandbox.inject("badSignature");
    await expect(exec(sdk, "alipay.trade.query", id)).rejects.toThrow(/验签失败/);
    sandbox.inject("badSignature");
    await expect(curl(sdk, "/v3/alipay/trade/query", id)).rejects.toMatchObject({
      code: "response-signature-verify-error",
    });
    // Only the signature was wrong: unchecked, the same answer reads fine.
    sandbox.inject("badSignature");
    const unchecked = await sdk.exec("alipay.trade.query", {
      bizContent: { outTradeNo: id },
      timestamp: beijingTime(),
    });
    expect(unchecked.tradeStatus).toBe("WAIT_BUYER_PAY");
  });
});

describe("notifications", () => {
  let receiver: Server;
  let receiverUrl: string;
  const received: { contentType: string; body: string }[] = [];
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({
          contentType: String(req.headers["content-type"]),
          body: Buffer.concat(chunks).toString("utf8"),
        });
        res.end("success");
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/notify`;
  });
  afterAll(() => new Promise<void>((r) => receiver.close(() => r())));

  const lastPost = () => Object.fromEntries(new URLSearchParams(received.at(-1)?.body ?? ""));

  it("posts a signed trade_status_sync form that the SDK's checkNotifySign accepts", async () => {
    const id = no("notify");
    sandbox.createTrade(id, { totalAmount: "9.90" });
    sandbox.pay(id);
    expect(await sandbox.notify(id, receiverUrl)).toEqual({ status: 200, text: "success" });
    expect(received.at(-1)?.contentType).toContain("application/x-www-form-urlencoded");
    const post = lastPost();
    expect(post).toMatchObject({
      notify_type: "trade_status_sync",
      app_id: sandbox.account.appId,
      charset: "utf-8",
      version: "1.0",
      sign_type: "RSA2",
      out_trade_no: id,
      trade_no: sandbox.trade(id)?.tradeNo,
      trade_status: "TRADE_SUCCESS",
      total_amount: "9.90",
      gmt_payment: sandbox.trade(id)?.gmtPayment,
    });
    expect(post.notify_id).toBeTruthy();
    expect(sdk.checkNotifySign(post)).toBe(true);
    expect(sdk.checkNotifySignV2(post)).toBe(true);
    // And by hand: every field but sign and sign_type, sorted, raw values.
    const { sign, sign_type, ...rest } = post;
    const content = Object.keys(rest)
      .sort()
      .map((k) => `${k}=${rest[k]}`)
      .join("&");
    expect(
      createVerify("RSA-SHA256")
        .update(content, "utf8")
        .verify(readPublicKey(account().alipayPublicKey), sign as string, "base64"),
    ).toBe(true);
  });

  it("tamper: a changed field no longer verifies", async () => {
    const id = no("tamper");
    sandbox.createTrade(id, { totalAmount: "1.00" });
    sandbox.pay(id);
    await sandbox.notify(id, receiverUrl, { tamper: true });
    const post = lastPost();
    expect(post.out_trade_no).toBe(id);
    expect(sdk.checkNotifySign(post)).toBe(false);
    expect(sdk.checkNotifySignV2(post)).toBe(false);
  });

  it("control API: create, pay, read, notify, refund, and clear errors", async () => {
    const call = async (path: string, body?: unknown, method = "POST") => {
      const res = await fetch(`${sandbox.url}/__sandbox${path}`, {
        method,
        headers: { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const id = no("ctl");
    expect(await call("/trades", { outTradeNo: id, amount: "3.5" })).toMatchObject({
      status: 201,
      json: { outTradeNo: id, totalAmount: "3.50", status: "WAIT_BUYER_PAY" },
    });
    expect((await call("/trades", { outTradeNo: id })).json).toMatchObject({
      error: "trade_exists",
    });
    expect((await call("/trades", { outTradeNo: no("bad"), amount: "1.234" })).status).toBe(400);
    expect((await call(`/trades/${id}/pay`)).json.status).toBe("TRADE_SUCCESS");
    expect((await call(`/trades/${id}`, undefined, "GET")).json.status).toBe("TRADE_SUCCESS");
    expect((await call(`/trades/${id}/close`)).json).toMatchObject({ error: "bad_state" });
    expect((await call(`/trades/${id}/notify`, { url: receiverUrl })).json).toEqual({
      status: 200,
      text: "success",
    });
    expect(sdk.checkNotifySignV2(lastPost())).toBe(true);
    expect((await call(`/trades/${id}/refund`)).json).toMatchObject({
      status: "TRADE_CLOSED",
      refundFee: "3.50",
    });
    expect((await exec(sdk, "alipay.trade.query", id)).tradeStatus).toBe("TRADE_CLOSED");
    expect((await call(`/trades/${no("ghost")}`, undefined, "GET")).status).toBe(404);
    expect((await call("/faults", { fault: "nope" })).status).toBe(400);
  });
});

describe("requests() and keys", () => {
  it("records params but never a key or a signature", () => {
    const text = JSON.stringify(sandbox.requests());
    expect(text.length).toBeGreaterThan(100);
    expect(text).not.toContain(pemToBase64(sandbox.account.privateKey).slice(0, 40));
    expect(text).not.toContain(pemToBase64(sandbox.keys.alipayPrivateKey).slice(0, 40));
    expect(text).not.toContain('"sign"');
  });

  it("converts key formats without changing the key", () => {
    const pkcs8 = sandbox.account.privateKey;
    const pkcs1 = pkcs8ToPkcs1(pkcs8);
    expect(pkcs1).toContain("BEGIN RSA PRIVATE KEY");
    expect(pkcs1ToPkcs8(pkcs1)).toBe(pkcs8);
    expect(isPkcs8Der(Buffer.from(pemToBase64(pkcs8), "base64"))).toBe(true);
    expect(isPkcs8Der(Buffer.from(pemToBase64(pkcs1), "base64"))).toBe(false);
    // PKCS#1 v1.5 is deterministic: the same key in any format makes the same signature.
    const sig = (key: string) =>
      createSign("RSA-SHA256").update("delayq").sign(readPrivateKey(key), "base64");
    expect(sig(pemToBase64(pkcs1))).toBe(sig(pkcs8));
    expect(base64ToPem(pemToBase64(pkcs8), "PRIVATE KEY")).toBe(pkcs8);

    const spki = base64ToPem(account().alipayPublicKey, "PUBLIC KEY");
    expect(spki).toBe(
      readPublicKey(account().alipayPublicKey).export({ type: "spki", format: "pem" }),
    );
    expect(pkcs1ToSpki(spkiToPkcs1(spki))).toBe(spki);
    expect(spkiToPkcs1(spki)).toContain("BEGIN RSA PUBLIC KEY");
  });

  it("writes and reads Beijing time", () => {
    expect(beijingTime(Date.UTC(2024, 0, 31, 16, 5, 9))).toBe("2024-02-01 00:05:09");
    expect(parseBeijingTime("2024-02-01 00:05:09")).toBe(Date.UTC(2024, 0, 31, 16, 5, 9));
    expect(parseBeijingTime("2024-02-30 00:00:00")).toBeUndefined();
    expect(parseBeijingTime("2024-02-01T00:05:09")).toBeUndefined();
  });
});
