// The Alipay provider over HTTP against a gateway that checks requests and signs answers with
// node:crypto: every mapping row, both APIs, faults, the raw-text rule, Beijing time, notifications.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAlipayAccounts } from "../../src/payments/accounts";
import {
  ALIPAY_TRADE_STATES,
  alipayProvider,
  alipaySignContent,
  beijingTimestamp,
  parseBeijingTime,
  rawMembers,
  verifyAlipayNotification,
} from "../../src/payments/alipay";
import { yuanToFen } from "../../src/payments/provider";
import {
  alipayGateway,
  beijingByIntl,
  type Gateway,
  nodeSign,
  nodeVerify,
  rsaKey,
} from "./support";

const merchant = rsaKey();
const gatewayKey = rsaKey();
const other = rsaKey();
const APP_ID = "2021000000000001";

function account(api: "classic" | "v3", baseUrl: string, overrides: Record<string, unknown> = {}) {
  const accounts = parseAlipayAccounts({
    shop: {
      appId: APP_ID,
      privateKey: api === "classic" ? merchant.pkcs1Base64 : merchant.pkcs8Pem,
      alipayPublicKey: gatewayKey.spkiBase64,
      api,
      baseUrl,
      ...overrides,
    },
  });
  const parsed = accounts.get("shop");
  if (!parsed) throw new Error("no account");
  return parsed;
}

describe("Beijing time", () => {
  it("formats across UTC date, month, year and leap-day boundaries like Intl's Asia/Shanghai", () => {
    const cases: [string, string][] = [
      ["2024-12-31T16:00:00.000Z", "2025-01-01 00:00:00"],
      ["2024-12-31T15:59:59.999Z", "2024-12-31 23:59:59"],
      ["2024-02-28T16:30:05.000Z", "2024-02-29 00:30:05"],
      ["2025-06-30T23:59:59.000Z", "2025-07-01 07:59:59"],
      ["2026-03-01T00:00:00.000Z", "2026-03-01 08:00:00"],
    ];
    for (const [utc, beijing] of cases) {
      const ms = Date.parse(utc);
      expect(beijingTimestamp(ms)).toBe(beijing);
      expect(beijingByIntl(ms)).toBe(beijing);
      expect(parseBeijingTime(beijing)).toBe(Math.floor(ms / 1000) * 1000);
    }
    expect(parseBeijingTime("2024-01-01T00:00:00")).toBeUndefined();
  });
});

describe("amounts", () => {
  it("turns yuan text into fen exactly, without floats", () => {
    const cases: [string, number][] = [
      ["12.34", 1234], ["0.01", 1], ["19.99", 1999], ["0.29", 29], ["12.3", 1230],
      ["100", 10000], ["0.10", 10], ["1.15", 115], ["99999999.99", 9999999999],
    ]; // biome-ignore format: a table
    for (const [text, fen] of cases) expect(yuanToFen(text)).toBe(fen);
    // The float way gets some of these wrong, which is why the helper never uses it.
    expect(Math.trunc(Number("19.99") * 100)).not.toBe(1999);
    for (const bad of ["1.234", "-1", "1e3", "", " 1", "1.", ".5", "NaN", 12.34, null]) {
      expect(yuanToFen(bad)).toBeUndefined();
    }
  });
});

describe("raw answer text", () => {
  it("returns a member's value exactly as received, \\/ escapes, braces in strings and all", () => {
    const inner =
      '{"code":"10000","qr_code":"https:\\/\\/qr.alipay.com\\/x","subject":"a } \\" { b","list":[{"a":1},[2]],"n":1.50}';
    const text = ` { "alipay_trade_query_response" : ${inner} ,"sign":"c2ln\\/bg==","alipay_cert_sn":"abc"}`;
    expect(rawMembers(text, "alipay_trade_query_response")).toEqual([inner]);
    expect(rawMembers(text, "sign")).toEqual(['"c2ln\\/bg=="']);
    expect(rawMembers(text, "alipay_cert_sn")).toEqual(['"abc"']);
    expect(rawMembers(text, "missing")).toEqual([]);
    // Re-serialising changes the bytes (and so the signature would fail): never do it.
    expect(JSON.stringify(JSON.parse(inner))).not.toBe(inner);
    expect(rawMembers('{"a":1,"a":{"b":2}}', "a")).toEqual(["1", '{"b":2}']);
  });

  it("builds the sorted signing string without sign and empty values", () => {
    expect(alipaySignContent({ b: "2", sign: "x", a: "1=&", c: "", sign_type: "RSA2" })).toBe(
      "a=1=&&b=2&sign_type=RSA2",
    );
  });
});

describe.each(["classic", "v3"] as const)(
  "alipayProvider (%s) against a node:crypto gateway",
  (api) => {
    let gateway: Gateway;
    beforeAll(async () => {
      gateway = await alipayGateway({
        appId: APP_ID,
        merchantPublicKey: merchant.spkiPem,
        gatewayPrivateKey: gatewayKey.pkcs8Pem,
        otherPrivateKey: other.pkcs8Pem,
        certSn: api === "classic" ? "a2c8f3e0b1" : undefined,
      });
    });
    afterAll(() => gateway.close());

    const provider = (options = {}) => alipayProvider(account(api, gateway.url), options);
    const paidAt = Date.parse("2024-12-31T16:00:07.000Z");

    it("maps every trade_status row, with amount, trade number and paid time", async () => {
      const rows = Object.entries(ALIPAY_TRADE_STATES);
      expect(rows).toEqual([
        ["WAIT_BUYER_PAY", "pending"],
        ["TRADE_SUCCESS", "paid"],
        ["TRADE_FINISHED", "paid"],
        ["TRADE_CLOSED", "closed"],
      ]);
      for (const [state, outcome] of rows) {
        const no = `${api}-${state}`;
        const paid = outcome === "paid";
        gateway.trades.set(no, {
          state,
          totalFen: 1999,
          tradeNo: `2024${state}`,
          paidAt: paid ? paidAt : undefined,
        });
        const answer = await provider().query(no);
        expect(answer).toEqual({
          kind: "trade",
          outcome,
          tradeState: state,
          tradeNo: `2024${state}`,
          amount: { total: 1999, currency: "CNY" },
          ...(paid ? { paidAt } : {}),
        });
      }
      expect(gateway.requests.every((r) => r.verified)).toBe(true);
    });

    it("treats ACQ.TRADE_NOT_EXIST as pending (a QR trade exists once scanned)", async () => {
      expect(await provider().query(`${api}-never`)).toEqual({
        kind: "trade",
        outcome: "pending",
        tradeState: "ACQ.TRADE_NOT_EXIST",
      });
    });

    it("retries soon on ACQ.SYSTEM_ERROR, 20000, 5xx, 429, timeouts and dropped connections", async () => {
      const p = provider({ timeoutMs: 500 });
      gateway.trades.set(`${api}-t`, { state: "WAIT_BUYER_PAY", totalFen: 1, tradeNo: "t" });
      gateway.errors.push("ACQ.SYSTEM_ERROR");
      expect(await p.query(`${api}-t`)).toMatchObject({
        kind: "transient",
        reason: expect.stringContaining("ACQ.SYSTEM_ERROR"),
      });
      if (api === "classic") {
        gateway.errors.push("isp.unknow-error");
        expect(await p.query(`${api}-t`)).toMatchObject({
          kind: "transient",
          reason: expect.stringContaining("20000"),
        });
      }
      for (const fault of ["status500", "status429", "slow", "reset"] as const) {
        gateway.faults.push(fault);
        const answer = await p.query(`${api}-t`);
        expect(answer.kind, fault).toBe("transient");
      }
      gateway.faults.push("slow");
      expect(await p.query(`${api}-t`)).toEqual({
        kind: "transient",
        reason: "timeout after 500 ms",
      });
      expect(await p.query(`${api}-t`)).toMatchObject({ kind: "trade", outcome: "pending" });
    });

    it("never takes an unverified answer as an outcome: tampered, unsigned, another key", async () => {
      gateway.trades.set(`${api}-paid`, {
        state: "TRADE_SUCCESS",
        totalFen: 500,
        tradeNo: "p",
        paidAt,
      });
      for (const fault of ["tamper", "unsigned", "wrongKey"] as const) {
        gateway.faults.push(fault);
        const answer = await provider().query(`${api}-paid`);
        expect(answer, fault).toMatchObject({ kind: "transient" });
        expect(JSON.stringify(answer)).not.toContain(merchant.pkcs8Base64.slice(50, 80));
      }
      expect(await provider().query(`${api}-paid`)).toMatchObject({
        kind: "trade",
        outcome: "paid",
      });
    });

    it("stops on configuration errors with the provider's message", async () => {
      gateway.errors.push("ACQ.INVALID_PARAMETER");
      expect(await provider().query(`${api}-x`)).toMatchObject({
        kind: "config",
        reason: expect.stringContaining("ACQ.INVALID_PARAMETER"),
      });
      const wrongApp = alipayProvider(account(api, gateway.url, { appId: "2021999999999999" }));
      expect(await wrongApp.query(`${api}-x`)).toMatchObject({
        kind: "config",
        reason: expect.stringContaining("isv.invalid-app-id"),
      });
    });

    it("takes an unsigned error for transient, never for a configuration error: query and close", async () => {
      const unverified =
        api === "v3"
          ? "unverified: no alipay-signature (HTTP 400 ACQ.INVALID_PARAMETER)"
          : "unverified: no sign (40004 ACQ.INVALID_PARAMETER";
      gateway.errors.push("ACQ.INVALID_PARAMETER");
      gateway.faults.push("unsigned");
      expect(await provider().query(`${api}-x`)).toEqual({
        kind: "transient",
        reason: expect.stringContaining(unverified),
      });
      gateway.trades.set(`${api}-u`, { state: "WAIT_BUYER_PAY", totalFen: 100, tradeNo: "u" });
      gateway.errors.push("ACQ.INVALID_PARAMETER");
      gateway.faults.push("unsigned");
      expect(await provider().close(`${api}-u`)).toEqual({
        kind: "transient",
        reason: expect.stringContaining(unverified),
      });
      // The same error signed is Alipay's word about our setup.
      gateway.errors.push("ACQ.INVALID_PARAMETER");
      expect(await provider().close(`${api}-u`)).toMatchObject({ kind: "config" });
    });

    it.runIf(api === "v3")(
      "takes a verified answer whose alipay-timestamp is more than 5 minutes off for transient",
      async () => {
        gateway.trades.set("v3-late", {
          state: "TRADE_SUCCESS",
          totalFen: 5,
          tradeNo: "l",
          paidAt,
        });
        gateway.faults.push("staleTimestamp");
        expect(await provider().query("v3-late")).toEqual({
          kind: "transient",
          reason: expect.stringMatching(
            /^stale: alipay-timestamp 30[12] s off \(more than 300 s\) \(HTTP 200\)$/,
          ),
        });
        // Our clock ahead of Alipay's: the same rule, either way.
        const ahead = provider({ clock: () => Date.now() + 301_000 });
        expect(await ahead.query("v3-late")).toMatchObject({
          kind: "transient",
          reason: expect.stringContaining("stale: alipay-timestamp"),
        });
        const within = provider({ clock: () => Date.now() + 295_000 });
        expect(await within.query("v3-late")).toMatchObject({ kind: "trade", outcome: "paid" });
      },
    );

    it("signs with the merchant key so that the gateway's node:crypto check passes", async () => {
      const wrongKey = alipayProvider(account(api, gateway.url, { privateKey: other.pkcs8Base64 }));
      const before = gateway.requests.length;
      const answer = await wrongKey.query(`${api}-x`);
      expect(gateway.requests[before]?.verified).toBe(false);
      // classic: the gateway answers 40002 isv.invalid-signature; v3: 401. Both signed.
      expect(answer).toMatchObject({
        kind: "config",
        reason: expect.stringContaining("signature"),
      });
    });

    it("closes a waiting trade, refuses a paid one, and reports a missing one", async () => {
      gateway.trades.set(`${api}-c1`, { state: "WAIT_BUYER_PAY", totalFen: 100, tradeNo: "c1" });
      gateway.trades.set(`${api}-c2`, {
        state: "TRADE_SUCCESS",
        totalFen: 100,
        tradeNo: "c2",
        paidAt,
      });
      const p = provider();
      expect(await p.close(`${api}-c1`)).toEqual({ kind: "closed" });
      expect(await p.query(`${api}-c1`)).toMatchObject({
        outcome: "closed",
        tradeState: "TRADE_CLOSED",
      });
      expect(await p.close(`${api}-c2`)).toMatchObject({
        kind: "refused",
        reason: expect.stringContaining("ACQ.TRADE_STATUS_ERROR"),
      });
      expect(await p.close(`${api}-none`)).toEqual({ kind: "notFound" });
      gateway.errors.push("ACQ.SYSTEM_ERROR");
      expect(await p.close(`${api}-c2`)).toMatchObject({ kind: "transient" });
      gateway.faults.push("tamper");
      gateway.trades.set(`${api}-c3`, { state: "WAIT_BUYER_PAY", totalFen: 100, tradeNo: "c3" });
      expect(await p.close(`${api}-c3`)).toMatchObject({ kind: "transient" });
    });

    it("sends what the wire format asks", async () => {
      const clock = () => Date.parse("2024-12-31T16:00:00.000Z");
      const before = gateway.requests.length;
      await provider({ clock }).query(`${api}-wire/1`);
      const request = gateway.requests[before];
      expect(request?.verified).toBe(true);
      if (api === "classic") {
        expect(request?.params).toMatchObject({
          app_id: APP_ID,
          method: "alipay.trade.query",
          charset: "utf-8",
          sign_type: "RSA2",
          version: "1.0",
          // Workers run in UTC: 16:00 UTC on Dec 31 is already the new year in Beijing.
          timestamp: "2025-01-01 00:00:00",
          biz_content: '{"out_trade_no":"classic-wire/1"}',
        });
      } else {
        expect(request?.path).toBe("/v3/alipay/trade/query");
        expect(request?.params.timestamp).toBe(String(clock()));
        expect(request?.params.body).toBe('{"out_trade_no":"v3-wire/1"}');
      }
    });
  },
);

describe("classic answers are verified over the raw object text", () => {
  it("verifies a hand-written answer with \\/ escapes and an alipay_cert_sn after the object", async () => {
    const inner =
      '{"code":"10000","msg":"Success","out_trade_no":"raw-1","trade_no":"2025","trade_status":"TRADE_SUCCESS","total_amount":"88.80","send_pay_date":"2025-01-01 00:00:07","qr_code":"https:\\/\\/qr.alipay.com\\/bax"}';
    const sign = nodeSign(gatewayKey.pkcs8Pem, inner);
    const body = `{"alipay_trade_query_response":${inner},"sign":"${sign}","alipay_cert_sn":"5d1a"}`;
    const fetchAnswer = (async () => new Response(body, { status: 200 })) as typeof fetch;
    const p = alipayProvider(account("classic", "http://alipay.test"), { fetch: fetchAnswer });
    expect(await p.query("raw-1")).toEqual({
      kind: "trade",
      outcome: "paid",
      tradeState: "TRADE_SUCCESS",
      tradeNo: "2025",
      amount: { total: 8880, currency: "CNY" },
      paidAt: Date.parse("2024-12-31T16:00:07.000Z"),
    });
    // Signed over the re-serialised object instead, the same answer must not verify.
    const reserialised = JSON.stringify(JSON.parse(inner));
    const wrongSign = nodeSign(gatewayKey.pkcs8Pem, reserialised);
    const body2 = body.replace(sign, wrongSign);
    const p2 = alipayProvider(account("classic", "http://alipay.test"), {
      fetch: (async () => new Response(body2)) as typeof fetch,
    });
    expect(await p2.query("raw-1")).toMatchObject({ kind: "transient" });
    // An answer about another order is not this order's outcome.
    expect(await p.query("raw-2")).toEqual({
      kind: "transient",
      reason: "answer names another order",
    });
  });

  it("reads an error_response, and refuses answers carrying two response objects", async () => {
    const inner =
      '{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-timestamp","sub_msg":"非法的时间戳参数"}';
    const body = `{"error_response":${inner},"sign":"${nodeSign(gatewayKey.pkcs8Pem, inner)}"}`;
    const p = alipayProvider(account("classic", "http://alipay.test"), {
      fetch: (async () => new Response(body)) as typeof fetch,
    });
    expect(await p.query("o")).toEqual({
      kind: "config",
      reason: "40002 isv.invalid-timestamp: 非法的时间戳参数",
    });
    const ok = '{"code":"10000","trade_status":"TRADE_CLOSED"}';
    const sign = nodeSign(gatewayKey.pkcs8Pem, ok);
    const twice = `{"alipay_trade_query_response":${ok},"alipay_trade_query_response":${ok},"sign":"${sign}"}`;
    const p2 = alipayProvider(account("classic", "http://alipay.test"), {
      fetch: (async () => new Response(twice)) as typeof fetch,
    });
    expect(await p2.query("o")).toMatchObject({ kind: "transient" });
  });
});

describe("verifyAlipayNotification", () => {
  const acct = account("classic", "http://alipay.test");
  const fields: Record<string, string> = {
    notify_time: "2025-01-01 00:00:09",
    notify_type: "trade_status_sync",
    notify_id: "ac05099524730693a8b330c5ecf72da9786",
    app_id: APP_ID,
    charset: "utf-8",
    version: "1.0",
    sign_type: "RSA2",
    trade_no: "2025010122001400001",
    out_trade_no: "order-1042",
    trade_status: "TRADE_SUCCESS",
    total_amount: "0.29",
    gmt_payment: "2025-01-01 00:00:07",
    subject: "T恤 & 帽子 = 100% 好",
    passback_params: "",
  };
  /** Our clock: 10 s after the notification's notify_time (2025-01-01 00:00:09 in Beijing). */
  const NOW = Date.parse("2024-12-31T16:00:19.000Z");
  /** Alipay's notify signing content: all fields but sign and sign_type, sorted, non-empty. */
  const content = (f: Record<string, string>, keepSignType = false) =>
    Object.keys(f)
      .filter((k) => k !== "sign" && (keepSignType || k !== "sign_type") && f[k] !== "")
      .sort()
      .map((k) => `${k}=${f[k]}`)
      .join("&");
  const signed = (f: Record<string, string>, keepSignType = false) => ({
    ...f,
    sign: nodeSign(gatewayKey.pkcs8Pem, content(f, keepSignType)),
  });

  it("accepts a node:crypto-signed form, as a URL-encoded body or a record", async () => {
    const form = signed(fields);
    expect(nodeVerify(gatewayKey.spkiPem, content(fields), form.sign)).toBe(true);
    const expected = {
      ok: true,
      outTradeNo: "order-1042",
      answer: {
        kind: "trade",
        outcome: "paid",
        tradeState: "TRADE_SUCCESS",
        tradeNo: "2025010122001400001",
        amount: { total: 29, currency: "CNY" },
        paidAt: Date.parse("2024-12-31T16:00:07.000Z"),
      },
      notifyId: "ac05099524730693a8b330c5ecf72da9786",
    };
    const wire = new URLSearchParams(form).toString();
    expect(await verifyAlipayNotification(acct, new URLSearchParams(wire), NOW)).toEqual(expected);
    expect(await verifyAlipayNotification(acct, form, NOW)).toEqual(expected);
    // The older content that keeps sign_type is accepted too, as the official SDK does.
    expect(await verifyAlipayNotification(acct, signed(fields, true), NOW)).toMatchObject({
      ok: true,
    });
    const waiting = signed({ ...fields, trade_status: "WAIT_BUYER_PAY" });
    expect(await verifyAlipayNotification(acct, waiting, NOW)).toMatchObject({
      ok: true,
      answer: { outcome: "pending" },
    });
  });

  it("takes a verified notification as fresh within Alipay's resend window, not past it nor from the future", async () => {
    const at = (ms: number) => signed({ ...fields, notify_time: beijingByIntl(ms) });
    const H = 3600_000;
    // Alipay's last resend comes about 24.4 h after the first: still a fact to take.
    for (const ok of [at(NOW - 24.9 * H), at(NOW + 299_000), at(NOW)]) {
      expect(await verifyAlipayNotification(acct, ok, NOW)).toMatchObject({ ok: true });
    }
    const cases: [Record<string, string>, string][] = [
      [at(NOW - 25.2 * H), "stale: notify_time 25.2 h old (Alipay's resends end within 25 h)"],
      [at(NOW + 360_000), "stale: notify_time 360 s ahead of our clock (more than 300 s)"],
      [signed({ ...fields, notify_time: "2025-01-01T00:00:09" }), "stale: no readable notify_time"],
      [
        signed(Object.fromEntries(Object.entries(fields).filter(([k]) => k !== "notify_time"))),
        "stale: no readable notify_time",
      ],
    ];
    for (const [input, reason] of cases) {
      expect(await verifyAlipayNotification(acct, input, NOW)).toEqual({ ok: false, reason });
    }
  });

  it("refuses tampered, unsigned, foreign and ambiguous notifications", async () => {
    const form = signed(fields);
    const cases: [Record<string, string> | URLSearchParams, string][] = [
      [{ ...form, total_amount: "2.90" }, "unverified: signature does not verify"],
      [{ ...form, trade_status: "TRADE_FINISHED" }, "unverified: signature does not verify"],
      [
        { ...form, sign: nodeSign(other.pkcs8Pem, content(fields)) },
        "unverified: signature does not verify",
      ],
      [{ ...fields }, "unverified: no sign field"],
      [{ ...form, sign_type: "RSA" }, "sign_type is not RSA2"],
      [signed({ ...fields, app_id: "2021999999999999" }), "app_id is not this account's"],
      [
        new URLSearchParams([...Object.entries(form), ["out_trade_no", "order-9"]]),
        "field out_trade_no appears twice",
      ],
    ];
    for (const [input, reason] of cases) {
      expect(await verifyAlipayNotification(acct, input, NOW)).toEqual({ ok: false, reason });
    }
  });
});
