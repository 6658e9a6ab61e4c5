// CPU per payment-provider call: µs to build and sign one request, and to verify and read one answer,
// for Alipay classic and v3 and WeChat Pay in public-key and certificate mode (npx tsx bench/payments-crypto.ts;
// `npm run bench` runs it too, through measurePaymentsCrypto).
// The providers run whole against an in-process fetch that answers at once with an answer signed
// beforehand by node:crypto, so the figures are our CPU, not the network's. CPU is process.cpuUsage
// (all threads: Node runs WebCrypto RSA on its thread pool), user + system.

import { execFileSync } from "node:child_process";
import { createSign, generateKeyPairSync, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseAlipayAccounts, parseWechatPayAccounts } from "../src/payments/accounts";
import { alipayProvider } from "../src/payments/alipay";
import {
  importPrivateKey,
  importPublicKey,
  signRsaSha256,
  verifyRsaSha256,
} from "../src/payments/crypto";
import type { Provider } from "../src/payments/provider";
import { wechatPayProvider } from "../src/payments/wechatpay";

const WARMUP = 50;

const sign = (pem: string, text: string) =>
  createSign("RSA-SHA256").update(text, "utf8").sign(pem, "base64");

function rsa() {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return {
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }) as string,
    publicPem: publicKey.export({ type: "spki", format: "pem" }) as string,
  };
}

function certificate(): { pem: string; keyPem: string; serial: string } {
  const dir = mkdtempSync(join(tmpdir(), "dq-bench-"));
  try {
    const key = join(dir, "k.pem");
    const cert = join(dir, "c.pem");
    // biome-ignore format: one openssl command line
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=bench", "-set_serial", "0x5157F09EFDC096DE15EB"], { stdio: "ignore" });
    const pem = readFileSync(cert, "utf8");
    return {
      pem,
      keyPem: readFileSync(key, "utf8"),
      serial: new X509Certificate(pem).serialNumber,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export type CryptoRow = {
  provider: string;
  /** CPU µs to build and sign one query. */
  signedRequestUs: number;
  /** CPU µs to verify and read one answer (whole query − signed request). */
  verifiedAnswerUs: number;
  wholeQueryUs: number;
};

export type CryptoResult = {
  iterations: number;
  rows: CryptoRow[];
  /** The primitives alone: one RSA-2048 signature, one verification. */
  signUs: number;
  verifyUs: number;
};

/** Measures every provider, `iterations` calls each (medians of 5 rounds). */
export async function measurePaymentsCrypto(iterations = 500): Promise<CryptoResult> {
  const merchant = rsa();
  const gateway = rsa();
  const cert = certificate();
  const OUT_TRADE_NO = "order-1042";

  /** A fetch that fails at once: what remains of a query is building and signing the request. */
  const refuse = (async () => {
    throw new Error("bench: no network");
  }) as typeof fetch;

  /** A fetch that answers at once with a fixed response. */
  const answer = (body: string, headers: Record<string, string> = {}, status = 200) =>
    (async () => new Response(body, { status, headers })) as typeof fetch;

  // ---- the answers, signed once by node:crypto ----------------------------------------------------

  const alipayRecord = {
    code: "10000",
    msg: "Success",
    out_trade_no: OUT_TRADE_NO,
    trade_no: "2025010122001400001",
    trade_status: "TRADE_SUCCESS",
    total_amount: "88.88",
    send_pay_date: "2025-01-01 00:00:07",
    buyer_logon_id: "159****5620",
  };
  const classicInner = JSON.stringify(alipayRecord).replaceAll("/", "\\/");
  const classicBody = `{"alipay_trade_query_response":${classicInner},"sign":"${sign(gateway.privatePem, classicInner)}"}`;

  const { code: _code, msg: _msg, ...v3Record } = alipayRecord;
  const v3Body = JSON.stringify(v3Record);
  const v3Time = String(Date.now());
  const v3Headers = {
    "alipay-timestamp": v3Time,
    "alipay-nonce": "9b1c6e0d2f",
    "alipay-signature": sign(gateway.privatePem, `${v3Time}\n9b1c6e0d2f\n${v3Body}\n`),
  };

  const wechatBody = JSON.stringify({
    mchid: "1900000109",
    out_trade_no: OUT_TRADE_NO,
    transaction_id: "4200000001202501010000000000",
    trade_state: "SUCCESS",
    success_time: "2025-01-01T10:03:04+08:00",
    amount: { total: 8888, payer_total: 8888, currency: "CNY", payer_currency: "CNY" },
  });
  const wechatTime = String(Math.floor(Date.now() / 1000));
  const wechatHeaders = (serial: string, keyPem: string) => ({
    "wechatpay-serial": serial,
    "wechatpay-timestamp": wechatTime,
    "wechatpay-nonce": "593BEC0C930BF1AFEB40B4A08C8FB242",
    "wechatpay-signature": sign(
      keyPem,
      `${wechatTime}\n593BEC0C930BF1AFEB40B4A08C8FB242\n${wechatBody}\n`,
    ),
  });

  // ---- the providers -------------------------------------------------------------------------------

  const alipayAccounts = parseAlipayAccounts({
    classic: {
      appId: "2021000000000001",
      privateKey: merchant.privatePem,
      alipayPublicKey: gateway.publicPem,
    },
    v3: {
      appId: "2021000000000001",
      privateKey: merchant.privatePem,
      alipayPublicKey: gateway.publicPem,
      api: "v3",
    },
  });
  const wechatBase = {
    mchid: "1900000109",
    serialNo: "3775B6A45ACD588826D15E583A95F5DD4B3B4C2A",
    privateKey: merchant.privatePem,
    apiV3Key: "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb",
  };
  const wechatAccounts = parseWechatPayAccounts({
    pk: {
      ...wechatBase,
      platformPublicKey: gateway.publicPem,
      platformPublicKeyId: "PUB_KEY_ID_0114232134912410000000000000",
    },
    cert: { ...wechatBase, platformCertificates: [cert.pem] },
  });

  type Fetch = typeof globalThis.fetch;
  type Case = { name: string; make: (f: Fetch) => Provider; answers: Fetch };
  const get = <T>(map: Map<string, T>, name: string): T => {
    const value = map.get(name);
    if (!value) throw new Error(`bench: no account ${name}`);
    return value;
  };
  const cases: Case[] = [
    {
      name: "Alipay classic",
      make: (f) => alipayProvider(get(alipayAccounts, "classic"), { fetch: f }),
      answers: answer(classicBody),
    },
    {
      name: "Alipay v3",
      make: (f) => alipayProvider(get(alipayAccounts, "v3"), { fetch: f }),
      answers: answer(v3Body, v3Headers),
    },
    {
      name: "WeChat Pay, public key",
      make: (f) => wechatPayProvider(get(wechatAccounts, "pk"), { fetch: f }),
      answers: answer(
        wechatBody,
        wechatHeaders("PUB_KEY_ID_0114232134912410000000000000", gateway.privatePem),
      ),
    },
    {
      name: "WeChat Pay, certificate",
      make: (f) => wechatPayProvider(get(wechatAccounts, "cert"), { fetch: f }),
      answers: answer(wechatBody, wechatHeaders(cert.serial, cert.keyPem)),
    },
  ];

  /** CPU µs per call of `work` over `iterations` calls. */
  async function cpuPerCall(work: () => Promise<unknown>, iterations: number): Promise<number> {
    const start = process.cpuUsage();
    for (let i = 0; i < iterations; i++) await work();
    const used = process.cpuUsage(start);
    return (used.user + used.system) / iterations;
  }

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

  // The machine is shared, so the two measurements alternate in rounds and the medians are kept.
  const ROUNDS = 5;
  const rows: string[][] = [];
  for (const c of cases) {
    const requestOnly = c.make(refuse);
    const whole = c.make(c.answers);
    const check = await whole.query(OUT_TRADE_NO);
    if (check.kind !== "trade" || check.outcome !== "paid") {
      throw new Error(`bench: ${c.name} did not verify its answer: ${JSON.stringify(check)}`);
    }
    for (let i = 0; i < WARMUP; i++)
      await Promise.all([requestOnly.query(OUT_TRADE_NO), whole.query(OUT_TRADE_NO)]);
    const requests: number[] = [];
    const queries: number[] = [];
    const answers: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const request = await cpuPerCall(() => requestOnly.query(OUT_TRADE_NO), iterations / ROUNDS);
      const query = await cpuPerCall(() => whole.query(OUT_TRADE_NO), iterations / ROUNDS);
      requests.push(request);
      queries.push(query);
      answers.push(query - request);
    }
    rows.push([
      c.name,
      median(requests).toFixed(0),
      Math.max(0, median(answers)).toFixed(0),
      median(queries).toFixed(0),
    ]);
  }

  // The primitives alone, for scale: one RSA-2048 signature and one verification.
  const key = await importPrivateKey(merchant.privatePem);
  const publicKey = await importPublicKey(gateway.publicPem);
  const text = `GET\n/v3/pay/transactions/out-trade-no/${OUT_TRADE_NO}?mchid=1900000109\n1735696984\nabc\n\n`;
  const signature = sign(gateway.privatePem, text);
  await cpuPerCall(() => signRsaSha256(key, text), WARMUP);
  const signOnly = await cpuPerCall(() => signRsaSha256(key, text), iterations);
  await cpuPerCall(() => verifyRsaSha256(publicKey, text, signature), WARMUP);
  const verifyOnly = await cpuPerCall(
    () => verifyRsaSha256(publicKey, text, signature),
    iterations,
  );
  return {
    iterations: iterations,
    rows: rows.map(([provider, request, answer, query]) => ({
      provider: provider ?? "",
      signedRequestUs: Number(request),
      verifiedAnswerUs: Number(answer),
      wholeQueryUs: Number(query),
    })),
    signUs: signOnly,
    verifyUs: verifyOnly,
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const ITERATIONS = Number(process.env.ITERATIONS ?? 500);
  const {
    rows: measured,
    signUs: signOnly,
    verifyUs: verifyOnly,
  } = await measurePaymentsCrypto(ITERATIONS);
  const ROUNDS = 5;
  const rows = measured.map((row) => [
    row.provider,
    row.signedRequestUs.toFixed(0),
    row.verifiedAnswerUs.toFixed(0),
    row.wholeQueryUs.toFixed(0),
  ]);
  const header = ["provider", "signed request µs", "verified answer µs", "whole query µs"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
      .join("  ");
  console.log(
    `CPU per call, ${ITERATIONS} iterations (median of ${ROUNDS} rounds), RSA-2048, Node ${process.version}`,
  );
  console.log(line(header));
  for (const row of rows) console.log(line(row));
  console.log(
    `\nprimitives: signRsaSha256 ${signOnly.toFixed(0)} µs, verifyRsaSha256 ${verifyOnly.toFixed(0)} µs`,
  );
  console.log(
    "verified answer = whole query − signed request: RSA verify, raw-text scan or header checks, JSON, mapping.",
  );
}
