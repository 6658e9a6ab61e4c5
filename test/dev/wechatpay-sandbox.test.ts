// The WeChat Pay sandbox driven by wechatpay-axios-plugin's client, and checked by hand with node:crypto: signatures, answers, notifications, faults.
import {
  createDecipheriv,
  createSign,
  createVerify,
  type KeyObject,
  randomBytes,
  X509Certificate,
} from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Aes, Formatter, Rsa, Wechatpay } from "wechatpay-axios-plugin";
import { privateKeyPem, readPublicKey, rsaKeyPair } from "../../dev/payment-keys";
import {
  parseWechatAuthorization,
  startWechatPaySandbox,
  type WechatPayAccount,
  type WechatPaySandbox,
} from "../../dev/wechatpay-sandbox";

type PublicKeyAccount = Extract<WechatPayAccount, { platformPublicKey: string }>;
type CertificateAccount = Extract<WechatPayAccount, { platformCertificates: string[] }>;

let sandbox: WechatPaySandbox;
let account: PublicKeyAccount;
let wx: Wechatpay;
let strangerKey: KeyObject;
let seq = 0;
const no = (label: string) => `${label}${Date.now() % 1e8}${++seq}`;

/** The official client for an account; `certs` maps Wechatpay-Serial values to keys or certificates. */
function client(
  a: WechatPayAccount,
  certs: Record<string, string>,
  privateKey?: string,
): Wechatpay {
  return new Wechatpay({
    mchid: a.mchid,
    serial: a.serialNo,
    privateKey: privateKey ?? a.privateKey,
    certs,
    baseURL: a.baseUrl,
  });
}

// chain(path) is the client's own path builder (`c.v3.pay…` in JS), spelled out for the type checker.
const query = (c: Wechatpay, outTradeNo: string, config: Record<string, unknown> = {}) =>
  c.chain("v3/pay/transactions/out-trade-no/{out_trade_no}").get({
    params: { mchid: account.mchid },
    out_trade_no: outTradeNo,
    ...config,
  });
const closeOrder = (c: Wechatpay, outTradeNo: string) =>
  c
    .chain("v3/pay/transactions/out-trade-no/{out_trade_no}/close")
    .post({ mchid: account.mchid }, { out_trade_no: outTradeNo });
/** The axios error's response, for answers the client rejects. */
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("expected the request to fail");
    },
    (error: { code?: string; response?: { status: number; data: unknown } }) => error,
  );

const last = () => sandbox.requests().at(-1);

/** Verifies an answer's Wechatpay-* headers by hand with node:crypto. */
function answerVerifies(headers: Headers | IncomingHttpHeaders, body: string, key: KeyObject) {
  const get = (name: string) =>
    headers instanceof Headers ? headers.get(name) : (headers[name.toLowerCase()] as string);
  return createVerify("RSA-SHA256")
    .update(`${get("Wechatpay-Timestamp")}\n${get("Wechatpay-Nonce")}\n${body}\n`)
    .verify(key, get("Wechatpay-Signature") ?? "", "base64");
}

/** A request signed by hand (node:crypto, not the plugin), Authorization fields in an unusual order. */
async function signedFetch(
  path: string,
  opts: { method?: string; body?: string; key?: string; serial?: string; ts?: number } = {},
) {
  const method = opts.method ?? "GET";
  const body = opts.body ?? "";
  const ts = opts.ts ?? Math.floor(Date.now() / 1000);
  const nonce = randomBytes(16).toString("hex");
  const signature = createSign("RSA-SHA256")
    .update(`${method}\n${path}\n${ts}\n${nonce}\n${body}\n`)
    .sign(opts.key ?? account.privateKey, "base64");
  const authorization =
    `WECHATPAY2-SHA256-RSA2048 signature="${signature}",timestamp="${ts}",` +
    `serial_no="${opts.serial ?? account.serialNo}",nonce_str="${nonce}",mchid="${account.mchid}"`;
  const res = await fetch(`${sandbox.url}${path}`, {
    method,
    headers: { authorization, accept: "application/json", "content-type": "application/json" },
    body: method === "GET" ? undefined : body,
  });
  return { res, text: await res.text() };
}

beforeAll(async () => {
  sandbox = await startWechatPaySandbox();
  account = sandbox.account as PublicKeyAccount;
  wx = client(account, { [account.platformPublicKeyId]: account.platformPublicKey });
  strangerKey = (await rsaKeyPair("wechatpay-test-stranger")).privateKey;
});
afterAll(async () => {
  await sandbox.close();
});

describe("account", () => {
  it("has the shape of a DQ_WECHATPAY_ACCOUNTS value in public-key mode", () => {
    expect(account).toEqual({
      mchid: "1900000001",
      serialNo: expect.stringMatching(/^[0-9A-F]{40}$/),
      privateKey: expect.stringContaining("-----BEGIN PRIVATE KEY-----"),
      apiV3Key: expect.stringMatching(/^[0-9A-Za-z]{32}$/),
      platformPublicKey: expect.stringContaining("-----BEGIN PUBLIC KEY-----"),
      platformPublicKeyId: expect.stringMatching(/^PUB_KEY_ID_\d{32}$/),
      baseUrl: sandbox.url,
    });
    expect(sandbox.keys.platformSerial).toBe(account.platformPublicKeyId);
    expect(sandbox.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });
});

describe("query and close through the official client (answers verified by it)", () => {
  it("answers an unpaid order without payment fields", async () => {
    const id = no("unpaid");
    sandbox.createTrade(id, { total: 100 });
    const { status, data } = await query(wx, id);
    expect(status).toBe(200);
    expect(data).toEqual({
      amount: { currency: "CNY", payer_currency: "CNY", total: 100 },
      appid: "wx8888888888888888",
      attach: "",
      mchid: account.mchid,
      out_trade_no: id,
      promotion_detail: [],
      trade_state: "NOTPAY",
      trade_state_desc: "订单未支付",
    });
    expect(last()).toMatchObject({
      method: "GET",
      path: `/v3/pay/transactions/out-trade-no/${id}?mchid=${account.mchid}`,
      verified: true,
      status: 200,
    });
  });

  it("answers a paid order with the payer, amounts and an RFC 3339 +08:00 success time", async () => {
    const id = no("paid");
    sandbox.createTrade(id, { total: 250 });
    sandbox.pay(id);
    const { data } = await query(wx, id);
    const trade = sandbox.trade(id);
    expect(data).toMatchObject({
      appid: "wx8888888888888888",
      mchid: account.mchid,
      out_trade_no: id,
      transaction_id: trade?.transactionId,
      trade_type: "NATIVE",
      trade_state: "SUCCESS",
      trade_state_desc: "支付成功",
      bank_type: "OTHERS",
      payer: { openid: trade?.openid },
      amount: { total: 250, payer_total: 250, currency: "CNY", payer_currency: "CNY" },
    });
    expect(data.transaction_id).toMatch(/^\d{28}$/);
    expect(data.success_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+08:00$/);
    expect(Math.abs(Date.parse(data.success_time) - Date.now())).toBeLessThan(5000);
  });

  it("reports every state setState puts an order in", async () => {
    const id = no("states");
    sandbox.createTrade(id);
    const desc: Record<string, string> = {};
    for (const state of [
      "USERPAYING",
      "PAYERROR",
      "REVOKED",
      "CLOSED",
      "SUCCESS",
      "REFUND",
    ] as const) {
      sandbox.setState(id, state);
      const { data } = await query(wx, id);
      expect(data.trade_state).toBe(state);
      desc[state] = data.trade_state_desc;
    }
    expect(desc.REFUND).toBe("转入退款");
    expect(new Set(Object.values(desc)).size).toBe(6);
  });

  it("closes an unpaid order with 204 and no body, idempotently", async () => {
    const id = no("close");
    sandbox.createTrade(id);
    const res = await closeOrder(wx, id);
    expect(res.status).toBe(204);
    expect(res.data).toBe("");
    expect(sandbox.trade(id)?.state).toBe("CLOSED");
    expect((await query(wx, id)).data.trade_state).toBe("CLOSED");
    expect((await closeOrder(wx, id)).status).toBe(204);
    expect(sandbox.requests().at(-3)).toMatchObject({
      method: "POST",
      path: `/v3/pay/transactions/out-trade-no/${id}/close`,
      verified: true,
      status: 204,
    });
  });

  it("refuses to close a paid order: 400 ORDERPAID", async () => {
    const id = no("paidclose");
    sandbox.createTrade(id);
    sandbox.pay(id);
    const error = await failure(closeOrder(wx, id));
    expect(error.response).toMatchObject({
      status: 400,
      data: { code: "ORDERPAID", message: "订单已支付" },
    });
    expect(sandbox.trade(id)?.state).toBe("SUCCESS");
  });

  it("answers 404 ORDER_NOT_EXIST for an unknown order, to query and close", async () => {
    for (const call of [query, closeOrder]) {
      const error = await failure(call(wx, no("ghost")));
      expect(error.response).toMatchObject({
        status: 404,
        data: { code: "ORDER_NOT_EXIST", message: "订单不存在" },
      });
    }
  });

  it("refuses a request signed with another key: 401 SIGN_ERROR", async () => {
    const stranger = client(
      account,
      { [account.platformPublicKeyId]: account.platformPublicKey },
      privateKeyPem(strangerKey),
    );
    const error = await failure(query(stranger, no("x")));
    expect(error.response).toMatchObject({
      status: 401,
      data: { code: "SIGN_ERROR", detail: { field: "signature", location: "authorization" } },
    });
    expect(last()).toMatchObject({ verified: false, status: 401, code: "SIGN_ERROR" });
  });
});

describe("the wire, by hand with node:crypto", () => {
  const platformKey = () => readPublicKey(account.platformPublicKey);

  it("accepts Authorization fields in any order and signs every answer, 204 included", async () => {
    const id = no("wire");
    sandbox.createTrade(id);
    const q = await signedFetch(`/v3/pay/transactions/out-trade-no/${id}?mchid=${account.mchid}`);
    expect(q.res.status).toBe(200);
    expect(q.res.headers.get("Wechatpay-Serial")).toBe(account.platformPublicKeyId);
    expect(q.res.headers.get("Wechatpay-Signature-Type")).toBe("WECHATPAY2-SHA256-RSA2048");
    expect(q.res.headers.get("Request-ID")).toBeTruthy();
    expect(answerVerifies(q.res.headers, q.text, platformKey())).toBe(true);
    expect(answerVerifies(q.res.headers, `${q.text} `, platformKey())).toBe(false);

    const body = JSON.stringify({ mchid: account.mchid });
    const c = await signedFetch(`/v3/pay/transactions/out-trade-no/${id}/close`, {
      method: "POST",
      body,
    });
    expect(c.res.status).toBe(204);
    expect(c.text).toBe("");
    expect(answerVerifies(c.res.headers, "", platformKey())).toBe(true);
    // Errors are signed too.
    const e = await signedFetch(
      `/v3/pay/transactions/out-trade-no/${no("none")}?mchid=${account.mchid}`,
    );
    expect(e.res.status).toBe(404);
    expect(answerVerifies(e.res.headers, e.text, platformKey())).toBe(true);
  });

  it("refuses a wrong serial, a stale timestamp, a missing mchid and a malformed header", async () => {
    const path = `/v3/pay/transactions/out-trade-no/any?mchid=${account.mchid}`;
    const wrongSerial = await signedFetch(path, {
      serial: "0123456789ABCDEF0123456789ABCDEF01234567",
    });
    expect(wrongSerial.res.status).toBe(401);
    expect(JSON.parse(wrongSerial.text).code).toBe("SIGN_ERROR");
    expect(last()?.verified).toBe(true);

    const stale = await signedFetch(path, { ts: Math.floor(Date.now() / 1000) - 301 });
    expect(stale.res.status).toBe(401);
    expect(JSON.parse(stale.text).code).toBe("SIGN_ERROR");

    const noMchid = await signedFetch("/v3/pay/transactions/out-trade-no/any");
    expect(noMchid.res.status).toBe(400);
    expect(JSON.parse(noMchid.text).code).toBe("PARAM_ERROR");

    const res = await fetch(`${sandbox.url}${path}`, {
      headers: { authorization: 'WECHATPAY2-SHA256-RSA2048 mchid="1"' },
    });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { code: string }).code).toBe("SIGN_ERROR");
    expect(last()?.verified).toBe(false);
  });

  it("parses Authorization headers like WeChat Pay", () => {
    const header = Formatter.authorization("19", "n", "s==", 1700000000, "AB");
    expect(parseWechatAuthorization(header)).toEqual({
      mchid: "19",
      serial_no: "AB",
      timestamp: "1700000000",
      nonce_str: "n",
      signature: "s==",
    });
    expect(parseWechatAuthorization('WECHATPAY2-SHA256-RSA2048 mchid="19"')).toBeUndefined();
    expect(parseWechatAuthorization(header.replace("WECHATPAY2", "WECHATPAY3"))).toBeUndefined();
  });
});

describe("fault injection", () => {
  it("5xx and 429: signed errors, one request each, then normal again", async () => {
    const id = no("fault");
    sandbox.createTrade(id);
    sandbox.inject("5xx");
    sandbox.inject("429", 2);
    expect((await failure(query(wx, id))).response).toMatchObject({
      status: 500,
      data: { code: "SYSTEM_ERROR" },
    });
    for (let i = 0; i < 2; i++) {
      expect((await failure(query(wx, id))).response).toMatchObject({
        status: 429,
        data: { code: "FREQUENCY_LIMITED" },
      });
    }
    expect((await query(wx, id)).status).toBe(200);
    expect(
      sandbox
        .requests()
        .slice(-4)
        .map((r) => r.fault),
    ).toEqual(["5xx", "429", "429", undefined]);
  });

  it("timeout: the request hangs past the client's timeout", async () => {
    sandbox.inject("timeout");
    const error = await failure(query(wx, no("hang"), { timeout: 400 }));
    expect(error.code).toBe("ECONNABORTED");
  });

  it("badSignature and staleTimestamp: the client refuses the answer", async () => {
    const id = no("badans");
    sandbox.createTrade(id);
    sandbox.inject("badSignature");
    expect((await failure(query(wx, id))).code).toBe("EV3_RES_HEADER_SIGNATURE_DIGEST");
    sandbox.inject("staleTimestamp");
    expect((await failure(query(wx, id))).code).toBe("EV3_RES_HEADER_TIMESTAMP_OFFSET");
    expect((await query(wx, id)).data.trade_state).toBe("NOTPAY");
  });
});

describe("notifications", () => {
  let receiver: Server;
  let receiverUrl: string;
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/notify`;
  });
  afterAll(() => new Promise<void>((r) => receiver.close(() => r())));

  const lastNote = () => {
    const note = received.at(-1);
    if (!note) throw new Error("nothing received");
    return note;
  };
  const pluginVerifies = (note: { headers: IncomingHttpHeaders; body: string }, key: string) =>
    Rsa.verify(
      Formatter.response(
        note.headers["wechatpay-timestamp"] as string,
        note.headers["wechatpay-nonce"] as string,
        note.body,
      ),
      note.headers["wechatpay-signature"] as string,
      Rsa.from(key, Rsa.KEY_TYPE_PUBLIC),
    );

  it("posts a signed TRANSACTION.SUCCESS whose resource decrypts with the APIv3 key", async () => {
    const id = no("notify");
    sandbox.createTrade(id, { total: 888 });
    sandbox.pay(id);
    expect(await sandbox.notify(id, receiverUrl)).toEqual({ status: 204, text: "" });
    const note = lastNote();
    expect(note.headers["wechatpay-serial"]).toBe(account.platformPublicKeyId);
    expect(note.headers["wechatpay-signature-type"]).toBe("WECHATPAY2-SHA256-RSA2048");
    expect(pluginVerifies(note, account.platformPublicKey)).toBe(true);
    expect(answerVerifies(note.headers, note.body, readPublicKey(account.platformPublicKey))).toBe(
      true,
    );

    const event = JSON.parse(note.body);
    expect(event).toMatchObject({
      id: expect.any(String),
      create_time: expect.stringMatching(/\+08:00$/),
      event_type: "TRANSACTION.SUCCESS",
      resource_type: "encrypt-resource",
      summary: "支付成功",
      resource: {
        algorithm: "AEAD_AES_256_GCM",
        associated_data: "transaction",
        original_type: "transaction",
        nonce: expect.stringMatching(/^[0-9A-Za-z]{12}$/),
      },
    });
    const { ciphertext, nonce, associated_data } = event.resource;
    const plain = JSON.parse(
      Aes.AesGcm.decrypt(ciphertext, account.apiV3Key, nonce, associated_data),
    );
    expect(plain).toMatchObject({
      out_trade_no: id,
      mchid: account.mchid,
      transaction_id: sandbox.trade(id)?.transactionId,
      trade_state: "SUCCESS",
      amount: { total: 888, payer_total: 888, currency: "CNY" },
    });
    // And with node:crypto: ciphertext‖16-byte tag, iv = the nonce, aad = associated_data.
    const raw = Buffer.from(ciphertext, "base64");
    const decipher = createDecipheriv(
      "aes-256-gcm",
      Buffer.from(account.apiV3Key),
      Buffer.from(nonce),
    );
    decipher.setAAD(Buffer.from(associated_data));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    const text = Buffer.concat([
      decipher.update(raw.subarray(0, -16)),
      decipher.final(),
    ]).toString();
    expect(JSON.parse(text)).toEqual(plain);
  });

  it("tamper: the body changes after signing, so the signature fails (it still decrypts)", async () => {
    const id = no("tamper");
    sandbox.createTrade(id);
    sandbox.pay(id);
    await sandbox.notify(id, receiverUrl, { tamper: true });
    const note = lastNote();
    expect(pluginVerifies(note, account.platformPublicKey)).toBe(false);
    const { ciphertext, nonce, associated_data } = JSON.parse(note.body).resource;
    expect(
      JSON.parse(Aes.AesGcm.decrypt(ciphertext, account.apiV3Key, nonce, associated_data)),
    ).toMatchObject({
      out_trade_no: id,
    });
  });

  it("probe: a WECHATPAY/SIGNTEST/ signature, which must not verify", async () => {
    const id = no("probe");
    sandbox.createTrade(id);
    sandbox.pay(id);
    await sandbox.notify(id, receiverUrl, { probe: true });
    const note = lastNote();
    expect(note.headers["wechatpay-signature"]).toMatch(/^WECHATPAY\/SIGNTEST\//);
    expect(pluginVerifies(note, account.platformPublicKey)).toBe(false);
  });

  it("refuses to notify an unpaid order, as WeChat Pay never would", async () => {
    const id = no("unpaidnote");
    sandbox.createTrade(id);
    await expect(sandbox.notify(id, receiverUrl)).rejects.toThrow(/paid orders only/);
  });

  it("control API: create, pay, state, refund, notify, and clear errors", async () => {
    const call = async (path: string, body?: unknown, method = "POST") => {
      const res = await fetch(`${sandbox.url}/__sandbox${path}`, {
        method,
        headers: { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const id = no("ctl");
    expect(await call("/trades", { outTradeNo: id, amount: 1999 })).toMatchObject({
      status: 201,
      json: { outTradeNo: id, total: 1999, state: "NOTPAY" },
    });
    expect((await call("/trades", { outTradeNo: no("bad"), amount: "19.99" })).status).toBe(400);
    expect((await call(`/trades/${id}/notify`, { url: receiverUrl })).status).toBe(409);
    expect((await call(`/trades/${id}/pay`)).json.state).toBe("SUCCESS");
    expect((await call(`/trades/${id}/notify`, { url: receiverUrl, probe: true })).json).toEqual({
      status: 204,
      text: "",
    });
    expect(lastNote().headers["wechatpay-signature"]).toMatch(/^WECHATPAY\/SIGNTEST\//);
    expect((await call(`/trades/${id}/refund`)).json.state).toBe("REFUND");
    expect((await call(`/trades/${id}/state`, { state: "PAYERROR" })).json.state).toBe("PAYERROR");
    expect((await call(`/trades/${id}/state`, { state: "LOST" })).status).toBe(400);
    expect((await call(`/trades/${id}`, undefined, "GET")).json.state).toBe("PAYERROR");
    expect((await call(`/trades/${id}/close`)).json.state).toBe("CLOSED");
    expect((await call(`/trades/${no("ghost")}/pay`)).status).toBe(404);
    expect((await call("/faults", { fault: "429", count: 1 })).status).toBe(200);
    expect((await failure(query(wx, id))).response?.status).toBe(429);
  });
});

describe("refunds", () => {
  let receiver: Server;
  let receiverUrl: string;
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/notify`;
  });
  afterAll(() => new Promise<void>((r) => receiver.close(() => r())));

  // The plugin verifies each answer's signature with the key Wechatpay-Serial names.
  const refundQuery = (c: Wechatpay, outRefundNo: string) =>
    c.chain("v3/refund/domestic/refunds/{out_refund_no}").get({ out_refund_no: outRefundNo });

  it("answers the refund query, PROCESSING then SUCCESS, verified by the official client", async () => {
    const id = no("refund");
    sandbox.createTrade(id, { total: 1999 });
    sandbox.pay(id);
    const refundNo = no("rf");
    const made = sandbox.createRefund(id, refundNo, { refund: 500 });
    expect(made).toMatchObject({ outRefundNo: refundNo, status: "PROCESSING", refund: 500 });
    // A refund moves the order to REFUND, as at WeChat Pay.
    expect(sandbox.trade(id)?.state).toBe("REFUND");
    const processing = await refundQuery(wx, refundNo);
    expect(processing.status).toBe(200);
    expect(processing.data).toMatchObject({
      out_refund_no: refundNo,
      out_trade_no: id,
      transaction_id: sandbox.trade(id)?.transactionId,
      refund_id: made.refundId,
      status: "PROCESSING",
      amount: { total: 1999, refund: 500, currency: "CNY" },
      create_time: expect.stringMatching(/\+08:00$/),
    });
    expect(processing.data.success_time).toBeUndefined();
    expect(last()).toMatchObject({
      method: "GET",
      path: `/v3/refund/domestic/refunds/${refundNo}`,
      verified: true,
      status: 200,
    });
    sandbox.setRefundStatus(refundNo, "SUCCESS");
    const done = await refundQuery(wx, refundNo);
    expect(done.data).toMatchObject({
      status: "SUCCESS",
      success_time: expect.stringMatching(/\+08:00$/),
    });
  });

  it("closes or fails a refund, refuses to refund an unpaid order or more than is left, and answers 404 RESOURCE_NOT_EXISTS", async () => {
    const id = no("refund2");
    sandbox.createTrade(id, { total: 100 });
    expect(() => sandbox.createRefund(id, no("rf"))).toThrow(/only a paid order/);
    sandbox.pay(id);
    const closed = no("rf");
    sandbox.createRefund(id, closed, { refund: 60 });
    expect(() => sandbox.createRefund(id, no("rf"), { refund: 41 })).toThrow(/1-40 fen/);
    sandbox.setRefundStatus(closed, "CLOSED");
    expect((await refundQuery(wx, closed)).data.status).toBe("CLOSED");
    // A closed refund gives its amount back: all of the order may be refunded again.
    const abnormal = no("rf");
    expect(sandbox.createRefund(id, abnormal).refund).toBe(100);
    sandbox.setRefundStatus(abnormal, "ABNORMAL");
    expect((await refundQuery(wx, abnormal)).data.status).toBe("ABNORMAL");
    // An abnormal refund may still succeed (the merchant retries it to another account).
    expect(sandbox.setRefundStatus(abnormal, "SUCCESS").status).toBe("SUCCESS");
    expect(() => sandbox.setRefundStatus(abnormal, "CLOSED")).toThrow(/SUCCESS already/);
    const missing = await failure(refundQuery(wx, no("ghost")));
    expect(missing.response?.status).toBe(404);
    expect(missing.response?.data).toMatchObject({ code: "RESOURCE_NOT_EXISTS" });
  });

  it("faults apply to refund queries: 5xx, then badSignature refused by the client", async () => {
    const id = no("refund3");
    sandbox.createTrade(id);
    sandbox.pay(id);
    const refundNo = no("rf");
    sandbox.createRefund(id, refundNo);
    sandbox.inject("5xx");
    expect((await failure(refundQuery(wx, refundNo))).response?.status).toBe(500);
    sandbox.inject("badSignature");
    await expect(refundQuery(wx, refundNo)).rejects.toThrow();
    expect((await refundQuery(wx, refundNo)).status).toBe(200);
  });

  it("posts REFUND.SUCCESS, REFUND.CLOSED and REFUND.ABNORMAL, signed, the resource encrypted with the APIv3 key", async () => {
    const id = no("refund4");
    sandbox.createTrade(id, { total: 300 });
    sandbox.pay(id);
    const cases = [
      ["SUCCESS", "退款成功"],
      ["CLOSED", "退款关闭"],
      ["ABNORMAL", "退款异常"],
    ] as const;
    for (const [status, summary] of cases) {
      const refundNo = no("rf");
      sandbox.createRefund(id, refundNo, { refund: 100 });
      await expect(sandbox.notifyRefund(refundNo, receiverUrl)).rejects.toThrow(/PROCESSING/);
      sandbox.setRefundStatus(refundNo, status);
      expect(await sandbox.notifyRefund(refundNo, receiverUrl)).toEqual({ status: 204, text: "" });
      const note = received.at(-1);
      if (!note) throw new Error("nothing received");
      const verified = Rsa.verify(
        Formatter.response(
          note.headers["wechatpay-timestamp"] as string,
          note.headers["wechatpay-nonce"] as string,
          note.body,
        ),
        note.headers["wechatpay-signature"] as string,
        Rsa.from(account.platformPublicKey, Rsa.KEY_TYPE_PUBLIC),
      );
      expect(verified).toBe(true);
      const event = JSON.parse(note.body);
      expect(event).toMatchObject({
        event_type: `REFUND.${status}`,
        summary,
        resource_type: "encrypt-resource",
        resource: { original_type: "refund", associated_data: "refund" },
      });
      const { ciphertext, nonce, associated_data } = event.resource;
      const plain = JSON.parse(
        Aes.AesGcm.decrypt(ciphertext, account.apiV3Key, nonce, associated_data),
      );
      expect(plain).toMatchObject({
        mchid: account.mchid,
        out_trade_no: id,
        transaction_id: sandbox.trade(id)?.transactionId,
        out_refund_no: refundNo,
        refund_id: sandbox.getRefund(refundNo)?.refundId,
        refund_status: status,
        amount: { total: 300, refund: 100, payer_total: 300, payer_refund: 100 },
      });
      expect(plain.success_time !== undefined).toBe(status === "SUCCESS");
    }
  });

  it("control API: create, read, succeed, close, abnormal, notify (a resend keeps its id)", async () => {
    const call = async (path: string, body?: unknown, method = "POST") => {
      const res = await fetch(`${sandbox.url}/__sandbox${path}`, {
        method,
        headers: { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const id = no("refund5");
    sandbox.createTrade(id, { total: 900 });
    sandbox.pay(id);
    const [a, b, c] = [no("rf"), no("rf"), no("rf")];
    expect(await call(`/trades/${id}/refunds`, { outRefundNo: a, amount: 300 })).toMatchObject({
      status: 201,
      json: { outRefundNo: a, refund: 300, total: 900, status: "PROCESSING" },
    });
    expect((await call(`/trades/${id}/refunds`, { outRefundNo: a })).status).toBe(409);
    expect((await call(`/trades/${id}/refunds`, {})).status).toBe(400);
    await call(`/trades/${id}/refunds`, { outRefundNo: b, amount: 300 });
    await call(`/trades/${id}/refunds`, { outRefundNo: c, amount: 300 });
    expect((await call(`/refunds/${a}`, undefined, "GET")).json.status).toBe("PROCESSING");
    expect((await call(`/refunds/${a}/notify`, { url: receiverUrl })).status).toBe(409);
    expect((await call(`/refunds/${a}/succeed`)).json.status).toBe("SUCCESS");
    expect((await call(`/refunds/${b}/close`)).json.status).toBe("CLOSED");
    expect((await call(`/refunds/${c}/abnormal`)).json.status).toBe("ABNORMAL");
    const sent = await call(`/refunds/${a}/notify`, { url: receiverUrl, eventId: "evt-1" });
    expect(sent.json).toEqual({ status: 204, text: "" });
    expect(JSON.parse(received.at(-1)?.body ?? "{}").id).toBe("evt-1");
    expect((await call(`/refunds/${no("ghost")}`, undefined, "GET")).status).toBe(404);
  });
});

describe("certificate mode", () => {
  let certSandbox: WechatPaySandbox;
  let certAccount: CertificateAccount;
  beforeAll(async () => {
    certSandbox = await startWechatPaySandbox({ mode: "certificate", mchid: "1900000002" });
    certAccount = certSandbox.account as CertificateAccount;
  });
  afterAll(async () => {
    await certSandbox.close();
  });

  it("serves a self-signed platform certificate whose serial is Wechatpay-Serial", async () => {
    const [pem] = certAccount.platformCertificates;
    const cert = new X509Certificate(pem as string);
    expect(cert.serialNumber.toUpperCase()).toBe(certSandbox.keys.platformSerial);
    expect(certSandbox.keys.platformSerial).toMatch(/^[0-9A-F]{40}$/);
    expect("platformPublicKey" in certAccount).toBe(false);
    // The certificate holds the key the sandbox signs with.
    const signed = createSign("RSA-SHA256")
      .update("x")
      .sign(certSandbox.keys.platformPrivateKey, "base64");
    expect(createVerify("RSA-SHA256").update("x").verify(cert.publicKey, signed, "base64")).toBe(
      true,
    );

    const c = client(certAccount, { [certSandbox.keys.platformSerial]: pem as string });
    certSandbox.createTrade("cert-order", { total: 5 });
    const res = await c.chain("v3/pay/transactions/out-trade-no/{out_trade_no}").get({
      params: { mchid: certAccount.mchid },
      out_trade_no: "cert-order",
    });
    expect(res.headers["wechatpay-serial"]).toBe(certSandbox.keys.platformSerial);
    expect(res.data.trade_state).toBe("NOTPAY");

    // /v3/certificates hands out the same certificate, encrypted with the APIv3 key.
    const list = await c.chain("v3/certificates").get();
    const entry = list.data.data[0];
    expect(entry.serial_no).toBe(certSandbox.keys.platformSerial);
    const { ciphertext, nonce, associated_data } = entry.encrypt_certificate;
    expect(Aes.AesGcm.decrypt(ciphertext, certAccount.apiV3Key, nonce, associated_data)).toBe(pem);
  });
});

describe("certificate mode: rotation and the certificate download", () => {
  let rotating: WechatPaySandbox;
  let rotatingAccount: CertificateAccount;
  beforeAll(async () => {
    rotating = await startWechatPaySandbox({ mode: "certificate", mchid: "1900000003" });
    rotatingAccount = rotating.account as CertificateAccount;
  }, 30_000);
  afterAll(async () => {
    await rotating.close();
  });

  it("signs with a new certificate once rotated, and /v3/certificates serves both, as the plugin's downloader reads them", async () => {
    const [firstPem] = rotatingAccount.platformCertificates;
    const first = rotating.keys.platformSerial;
    const rotated = await fetch(`${rotating.url}/__sandbox/certificates/rotate`, {
      method: "POST",
    });
    const { serial } = (await rotated.json()) as { serial: string };
    expect(serial).not.toBe(first);
    expect(rotating.keys.platformSerial).toBe(serial);

    // The download with wechatpay-axios-plugin's client (its own verifier left out: it holds a copy
    // of the certificates it was given, and the answer is signed with one it has not seen), each
    // certificate decrypted with the APIv3 key by its AesGcm, and the answer checked by its Rsa
    // against the certificate it names, just decrypted.
    const c = client(rotatingAccount, { [first]: firstPem as string });
    const list = await c
      .chain("v3/certificates")
      .get({ transformResponse: [(raw: string) => raw] });
    const body = list.data as string;
    type Entry = {
      serial_no: string;
      encrypt_certificate: { nonce: string; associated_data: string; ciphertext: string };
    };
    const certs: Record<string, string> = {};
    for (const entry of (JSON.parse(body) as { data: Entry[] }).data) {
      const { nonce, associated_data: aad, ciphertext } = entry.encrypt_certificate;
      certs[entry.serial_no] = Aes.AesGcm.decrypt(ciphertext, rotatingAccount.apiV3Key, nonce, aad);
    }
    expect(Object.keys(certs)).toEqual([first, serial]);
    expect(certs[first]).toBe(firstPem);
    expect(new X509Certificate(certs[serial] as string).serialNumber.toUpperCase()).toBe(serial);
    const h = list.headers as Record<string, string>;
    expect(h["wechatpay-serial"]).toBe(serial);
    const signed = Formatter.response(
      h["wechatpay-timestamp"] as string,
      h["wechatpay-nonce"] as string,
      body,
    );
    expect(Rsa.verify(signed, h["wechatpay-signature"] as string, certs[serial] as string)).toBe(
      true,
    );
    expect(Rsa.verify(signed, h["wechatpay-signature"] as string, firstPem as string)).toBe(false);

    // Answers are signed with the new certificate from now on.
    rotating.createTrade("rotated-order");
    const answer = await client(rotatingAccount, { [serial]: certs[serial] as string })
      .chain("v3/pay/transactions/out-trade-no/{out_trade_no}")
      .get({ params: { mchid: rotatingAccount.mchid }, out_trade_no: "rotated-order" });
    expect(answer.headers["wechatpay-serial"]).toBe(serial);
    // Public-key mode has no certificates to rotate.
    const refused = await fetch(`${sandbox.url}/__sandbox/certificates/rotate`, { method: "POST" });
    expect(refused.status).toBe(409);
  });
});

describe("requests()", () => {
  it("never holds a key or a signature", () => {
    const text = JSON.stringify(sandbox.requests());
    expect(text.length).toBeGreaterThan(100);
    expect(text).not.toContain("PRIVATE KEY");
    expect(text).not.toContain("signature");
    expect(text).not.toContain(account.apiV3Key);
  });
});
