// The WeChat Pay provider over HTTP against a gateway that checks requests and signs answers with
// node:crypto, in public-key and certificate mode: every mapping row, faults, close, notifications.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseWechatPayAccounts } from "../../src/payments/accounts";
import {
  verifyWechatPayNotification,
  WECHATPAY_TRADE_STATES,
  wechatPayProvider,
} from "../../src/payments/wechatpay";
import {
  beijingByIntl,
  type Gateway,
  nodeAesGcmEncrypt,
  nodeSign,
  rsaKey,
  selfSignedCertificate,
  wechatGateway,
} from "./support";

const merchant = rsaKey();
const platform = rsaKey();
const other = rsaKey();
const oldCert = selfSignedCertificate("1D2E3F40506070");
const cert = selfSignedCertificate("8F0E2B7C6D5A4B3C2D1E0F");
const MCHID = "1900000109";
const MERCHANT_SERIAL = "3775B6A45ACD588826D15E583A95F5DD4B3B4C2A";
const PUB_KEY_ID = "PUB_KEY_ID_0114232134912410000000000000";
const API_V3_KEY = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb";

type Mode = "public key" | "certificate";

function account(mode: Mode, baseUrl: string, overrides: Record<string, unknown> = {}) {
  const base = {
    mchid: MCHID,
    serialNo: MERCHANT_SERIAL,
    privateKey: merchant.pkcs8Pem,
    apiV3Key: API_V3_KEY,
    baseUrl,
  };
  const keys =
    mode === "public key"
      ? { platformPublicKey: platform.spkiBase64, platformPublicKeyId: PUB_KEY_ID }
      : { platformCertificates: [oldCert.pem, cert.pem] };
  const parsed = parseWechatPayAccounts({ shop: { ...base, ...keys, ...overrides } }).get("shop");
  if (!parsed) throw new Error("no account");
  return parsed;
}

const signer = (mode: Mode) =>
  mode === "public key"
    ? { signingKey: platform.pkcs8Pem, signingSerial: PUB_KEY_ID }
    : { signingKey: cert.keyPem, signingSerial: cert.serial };

describe.each(["public key", "certificate"] as const)("wechatPayProvider (%s mode)", (mode) => {
  let gateway: Gateway;
  beforeAll(async () => {
    gateway = await wechatGateway({
      mchid: MCHID,
      merchantSerial: MERCHANT_SERIAL,
      merchantPublicKey: merchant.spkiPem,
      otherPrivateKey: other.pkcs8Pem,
      ...signer(mode),
    });
  });
  afterAll(() => gateway.close());

  const provider = (options = {}) => wechatPayProvider(account(mode, gateway.url), options);
  const paidAt = Date.parse("2025-01-01T02:03:04.000Z");

  it("maps every trade_state row, with amount, transaction id and paid time", async () => {
    const rows = Object.entries(WECHATPAY_TRADE_STATES);
    expect(rows).toEqual([
      ["SUCCESS", "paid"],
      ["REFUND", "paid"],
      ["NOTPAY", "pending"],
      ["USERPAYING", "pending"],
      ["CLOSED", "closed"],
      ["REVOKED", "closed"],
      ["PAYERROR", "failed"],
    ]);
    for (const [state, outcome] of rows) {
      const paid = outcome === "paid";
      gateway.trades.set(`w-${state}`, {
        state,
        totalFen: 1234,
        tradeNo: `42000${state}`,
        paidAt: paid ? paidAt : undefined,
      });
      expect(await provider().query(`w-${state}`)).toEqual({
        kind: "trade",
        outcome,
        tradeState: state,
        tradeNo: `42000${state}`,
        amount: { total: 1234, currency: "CNY" },
        ...(paid ? { paidAt } : {}),
      });
    }
    expect(gateway.requests.length).toBeGreaterThanOrEqual(rows.length);
    expect(gateway.requests.every((r) => r.verified)).toBe(true);
  });

  it("answers notFound on 404 ORDER_NOT_EXIST", async () => {
    expect(await provider().query("w-missing")).toEqual({
      kind: "notFound",
      tradeState: "ORDER_NOT_EXIST",
    });
  });

  it("retries soon on 5xx, 429, SYSTEM_ERROR, timeouts and dropped connections", async () => {
    gateway.trades.set("w-t", { state: "NOTPAY", totalFen: 1, tradeNo: "t" });
    const p = provider({ timeoutMs: 500 });
    for (const fault of ["status500", "status429", "slow", "reset"] as const) {
      gateway.faults.push(fault);
      expect((await p.query("w-t")).kind, fault).toBe("transient");
    }
    gateway.errors.push("SYSTEM_ERROR");
    expect(await p.query("w-t")).toEqual({ kind: "transient", reason: "HTTP 500 SYSTEM_ERROR" });
    gateway.errors.push("FREQUENCY_LIMITED");
    expect(await p.query("w-t")).toMatchObject({ kind: "transient" });
    expect(await p.query("w-t")).toMatchObject({ kind: "trade", outcome: "pending" });
  });

  it("never acts on an unverified answer: tampered, unsigned, wrong key, wrong serial, stale", async () => {
    gateway.trades.set("w-paid", { state: "SUCCESS", totalFen: 9, tradeNo: "p", paidAt });
    const expected: Record<string, string> = {
      tamper: "unverified: signature does not verify",
      unsigned: "unverified: unsigned",
      wrongKey: "unverified: signature does not verify",
      wrongSerial: "unverified: unknown Wechatpay-Serial",
      staleTimestamp: "stale: Wechatpay-Timestamp",
    };
    for (const [fault, reason] of Object.entries(expected)) {
      gateway.faults.push(fault as never);
      const answer = await provider().query("w-paid");
      expect(answer, fault).toEqual({ kind: "transient", reason: expect.stringContaining(reason) });
    }
    // Not-found answers are verified too: an unsigned 404 is not a notFound.
    gateway.faults.push("unsigned");
    expect(await provider().query("w-missing")).toMatchObject({ kind: "transient" });
    // Our clock 301 s ahead of WeChat's makes a fresh answer stale.
    const ahead = provider({ clock: () => Date.now() + 301_000 });
    expect(await ahead.query("w-paid")).toMatchObject({
      kind: "transient",
      reason: expect.stringContaining("stale"),
    });
    expect(await provider().query("w-paid")).toMatchObject({ kind: "trade", outcome: "paid" });
  });

  it("stops on configuration errors with WeChat's message", async () => {
    gateway.errors.push("PARAM_ERROR");
    expect(await provider().query("w-x")).toEqual({
      kind: "config",
      reason: "PARAM_ERROR: PARAM_ERROR 说明",
    });
    const wrongKey = wechatPayProvider(account(mode, gateway.url, { privateKey: other.pkcs1Pem }));
    expect(await wrongKey.query("w-x")).toEqual({ kind: "config", reason: "SIGN_ERROR: 签名错误" });
    const wrongMchid = wechatPayProvider(account(mode, gateway.url, { mchid: "1900000999" }));
    expect(await wrongMchid.query("w-x")).toMatchObject({ kind: "config" });
  });

  it("closes an unpaid order (verified 204), refuses a paid one, reports a missing one", async () => {
    gateway.trades.set("w-c1", { state: "NOTPAY", totalFen: 1, tradeNo: "c1" });
    gateway.trades.set("w-c2", { state: "SUCCESS", totalFen: 1, tradeNo: "c2", paidAt });
    const p = provider();
    expect(await p.close("w-c1")).toEqual({ kind: "closed" });
    expect(await p.query("w-c1")).toMatchObject({ outcome: "closed", tradeState: "CLOSED" });
    expect(await p.close("w-c2")).toEqual({ kind: "refused", reason: "ORDERPAID: 订单已支付" });
    expect(await p.close("w-none")).toEqual({ kind: "notFound" });
    gateway.trades.set("w-c3", { state: "NOTPAY", totalFen: 1, tradeNo: "c3" });
    for (const fault of [
      "unsigned",
      "wrongKey",
      "wrongSerial",
      "staleTimestamp",
      "status500",
    ] as const) {
      gateway.faults.push(fault);
      expect(await p.close("w-c3"), fault).toMatchObject({ kind: "transient" });
    }
  });

  it("sends the request WeChat Pay documents", async () => {
    const before = gateway.requests.length;
    gateway.trades.set("w-wire_1", { state: "NOTPAY", totalFen: 1, tradeNo: "w" });
    await provider().query("w-wire_1");
    const request = gateway.requests[before];
    expect(request).toMatchObject({
      path: "/v3/pay/transactions/out-trade-no/w-wire_1",
      verified: true,
      params: { mchid: MCHID, serial_no: MERCHANT_SERIAL, query: `?mchid=${MCHID}` },
    });
    expect(request?.params["user-agent"]).not.toBe("");
    expect(request?.params.nonce_str).toMatch(/^[0-9a-f]{32}$/);
    expect(Math.abs(Number(request?.params.timestamp) - Date.now() / 1000)).toBeLessThan(5);
  });
});

describe("verifyWechatPayNotification", () => {
  const transaction = {
    mchid: MCHID,
    appid: "wxd678efh567hg6787",
    out_trade_no: "order-1042",
    transaction_id: "1217752501201407033233368018",
    trade_type: "NATIVE",
    trade_state: "SUCCESS",
    trade_state_desc: "支付成功",
    success_time: "2025-01-01T10:03:04+08:00",
    amount: { total: 100, payer_total: 100, currency: "CNY", payer_currency: "CNY" },
  };

  function notification(
    options: {
      plain?: unknown;
      key?: string;
      aad?: string;
      serial?: string;
      signer?: string;
      at?: number;
    } = {},
  ) {
    const nonce = randomBytes(6).toString("hex");
    const aad = options.aad ?? "transaction";
    const body = JSON.stringify({
      id: "EV-2018022511223320873",
      create_time: "2025-01-01T10:03:05+08:00",
      resource_type: "encrypt-resource",
      event_type: "TRANSACTION.SUCCESS",
      summary: "支付成功",
      resource: {
        original_type: "transaction",
        algorithm: "AEAD_AES_256_GCM",
        ciphertext: nodeAesGcmEncrypt(
          options.key ?? API_V3_KEY,
          nonce,
          aad,
          JSON.stringify(options.plain ?? transaction),
        ),
        associated_data: aad,
        nonce,
      },
    });
    const seconds = Math.floor((options.at ?? Date.now()) / 1000);
    const headerNonce = randomBytes(16).toString("hex");
    const headers = new Headers({
      "wechatpay-serial": options.serial ?? PUB_KEY_ID,
      "wechatpay-timestamp": String(seconds),
      "wechatpay-nonce": headerNonce,
      "wechatpay-signature": nodeSign(
        options.signer ?? platform.pkcs8Pem,
        `${seconds}\n${headerNonce}\n${body}\n`,
      ),
      "content-type": "application/json",
    });
    return { headers, body };
  }

  const acct = account("public key", "http://wechat.test");
  const expected = {
    ok: true,
    outTradeNo: "order-1042",
    answer: {
      kind: "trade",
      outcome: "paid",
      tradeState: "SUCCESS",
      tradeNo: "1217752501201407033233368018",
      amount: { total: 100, currency: "CNY" },
      paidAt: Date.parse("2025-01-01T02:03:04.000Z"),
    },
    notifyId: "EV-2018022511223320873",
  };

  it("verifies the headers and decrypts the resource made by node:crypto", async () => {
    const { headers, body } = notification();
    expect(await verifyWechatPayNotification(acct, headers, body, Date.now())).toEqual(expected);
    const certAcct = account("certificate", "http://wechat.test");
    const byCert = notification({ serial: cert.serial.toLowerCase(), signer: cert.keyPem });
    expect(
      await verifyWechatPayNotification(certAcct, byCert.headers, byCert.body, Date.now()),
    ).toEqual(expected);
    const byOldCert = notification({ serial: oldCert.serial, signer: oldCert.keyPem });
    expect(
      await verifyWechatPayNotification(certAcct, byOldCert.headers, byOldCert.body, Date.now()),
    ).toEqual(expected);
  });

  it("refuses tampered, probing, stale, foreign and undecryptable notifications", async () => {
    // A whole second: the header's timestamp is in seconds, so the offsets below are exact.
    const now = Math.floor(Date.now() / 1000) * 1000;
    const fresh = notification();
    const probe = notification();
    probe.headers.set(
      "wechatpay-signature",
      `WECHATPAY/SIGNTEST/${probe.headers.get("wechatpay-signature")}`,
    );
    const unsigned = notification();
    unsigned.headers.delete("wechatpay-signature");
    const cases: [{ headers: Headers; body: string }, string][] = [
      [
        {
          headers: fresh.headers,
          body: fresh.body.replace("TRANSACTION.SUCCESS", "TRANSACTION.SUCCESS "),
        },
        "unverified: signature does not verify",
      ],
      [probe, "unverified: signature probe (WECHATPAY/SIGNTEST/)"],
      [unsigned, "unverified: unsigned (Wechatpay-* headers missing)"],
      [
        notification({ at: now - 301_000 }),
        "stale: Wechatpay-Timestamp 301 s off (more than 300 s)",
      ],
      [
        notification({ at: now + 301_000 }),
        "stale: Wechatpay-Timestamp 301 s off (more than 300 s)",
      ],
      [
        notification({ serial: "PUB_KEY_ID_0000" }),
        "unverified: unknown Wechatpay-Serial PUB_KEY_ID_0000",
      ],
      [notification({ signer: other.pkcs8Pem }), "unverified: signature does not verify"],
      [
        notification({ key: "b7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb" }),
        "the resource did not decrypt (key, nonce or tag)",
      ],
      [
        notification({ plain: { ...transaction, mchid: "1900000999" } }),
        "mchid is not this account's",
      ],
      [
        notification({ plain: { ...transaction, amount: undefined } }),
        "SUCCESS answer without a readable amount.total",
      ],
    ];
    for (const [{ headers, body }, reason] of cases) {
      expect(await verifyWechatPayNotification(acct, headers, body, now)).toEqual({
        ok: false,
        reason,
      });
    }
    // Within the window either side, it passes.
    const early = notification({ at: now - 299_000 });
    expect(await verifyWechatPayNotification(acct, early.headers, early.body, now)).toMatchObject({
      ok: true,
    });
  });

  it("reads other trade states from the resource", async () => {
    const { headers, body } = notification({
      plain: { ...transaction, trade_state: "PAYERROR", success_time: undefined },
    });
    expect(await verifyWechatPayNotification(acct, headers, body, Date.now())).toMatchObject({
      ok: true,
      answer: { outcome: "failed", tradeState: "PAYERROR" },
    });
  });

  it("agrees with Intl on Beijing wall time for success_time", () => {
    expect(beijingByIntl(expected.answer.paidAt)).toBe("2025-01-01 10:03:04");
  });
});
