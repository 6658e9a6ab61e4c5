// Certificate-mode accounts are checked at start-up: a bad one stops the service with one message
// naming the variable, the account and the reason, never a key or a certificate. What takes
// WebCrypto (the chain) is Service.ready, which the entry points await before serving.
import { Redis } from "@upstash/redis";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type AlipayCertificateFiles,
  alipayCertificateFiles,
  pemToBase64,
  privateKeyPem,
  publicKeyPem,
  rsaKeyPair,
} from "../../dev/payment-keys";
import { DelayqError } from "../../src/domain/errors";
import { buildService } from "../../src/service";
import { spawnNodeEntry } from "../support/service";

const base = {
  UPSTASH_REDIS_REST_URL: "http://127.0.0.1:9",
  UPSTASH_REDIS_REST_TOKEN: "token",
  DQ_TOKENS: "admin",
};
let files: AlipayCertificateFiles;
let appKey: string;
let alipayPublicKey: string;
beforeAll(async () => {
  const [app, alipay] = await Promise.all([
    rsaKeyPair("startup-app"),
    rsaKeyPair("startup-alipay"),
  ]);
  appKey = privateKeyPem(app.privateKey);
  alipayPublicKey = pemToBase64(publicKeyPem(alipay.publicKey));
  files = await alipayCertificateFiles({
    app: app.privateKey,
    alipay: alipay.privateKey,
    appId: "2021000000000009",
  });
}, 30_000);

const account = (overrides: Record<string, unknown> = {}) => ({
  appId: "2021000000000009",
  privateKey: appKey,
  appCert: files.appCert,
  alipayCert: files.alipayCert,
  alipayRootCert: files.alipayRootCert,
  ...overrides,
});
const build = (accounts: Record<string, unknown>) =>
  buildService(
    { ...base, DQ_ALIPAY_ACCOUNTS: JSON.stringify(accounts) },
    (settings) => new Redis({ url: settings.url, token: settings.token }),
    { log: () => {} },
  );
/** alipayCert without the intermediate that links it to the root. */
const leafOnly = () => files.alipayCert.split(/(?<=-----END CERTIFICATE-----\n)/)[0] as string;
const NOT_CHAINED = `delayq is misconfigured: DQ_ALIPAY_ACCOUNTS: account "shop": "alipayCert" does not chain to a certificate of "alipayRootCert" (its signature is not a root's, nor an intermediate's given after it in "alipayCert")`;

/** Nothing of a key or a certificate: fragments of each text given. */
function expectNoKeyMaterial(message: string) {
  for (const text of [appKey, files.appCert, files.alipayCert, files.alipayRootCert]) {
    const body = text.replace(/-----[A-Z ]+-----|\s/g, "");
    for (let at = 0; at + 24 <= body.length; at += 200) {
      expect(message).not.toContain(body.slice(at, at + 24));
    }
  }
}

describe("buildService with certificate-mode Alipay accounts", () => {
  it("is ready when every alipayCert chains to its root bundle", async () => {
    await expect(build({ shop: account() }).ready).resolves.toBeUndefined();
  });

  it("refuses mixed modes at once, and an alipayCert that does not chain when ready", async () => {
    let thrown: unknown;
    try {
      build({ shop: account({ alipayPublicKey }) });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(DelayqError);
    expect((thrown as DelayqError).code).toBe("internal_error");
    expect((thrown as DelayqError).message).toMatch(
      /^delayq is misconfigured: DQ_ALIPAY_ACCOUNTS: account "shop": the account mixes the two modes/,
    );

    const service = build({ good: account(), shop: account({ alipayCert: leafOnly() }) });
    const error = await service.ready.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DelayqError);
    expect((error as DelayqError).message).toBe(NOT_CHAINED);
    expectNoKeyMaterial((error as DelayqError).message);
  });
});

describe("certificate fields that name a variable", () => {
  it("are read from the service's environment; one not set stops it, naming the variable", async () => {
    const accounts = JSON.stringify({
      shop: account({
        appCert: { env: "SHOP_APP_CERT" },
        alipayCert: { env: "SHOP_ALIPAY_CERT" },
        alipayRootCert: { env: "SHOP_ROOT_CERT" },
      }),
    });
    const env = {
      ...base,
      DQ_ALIPAY_ACCOUNTS: accounts,
      SHOP_APP_CERT: files.appCert,
      SHOP_ALIPAY_CERT: files.alipayCert,
      SHOP_ROOT_CERT: files.alipayRootCert,
    };
    const make = (vars: Record<string, unknown>) =>
      buildService(vars, (settings) => new Redis({ url: settings.url, token: settings.token }), {
        log: () => {},
      });
    await expect(make(env).ready).resolves.toBeUndefined();
    const { SHOP_ROOT_CERT: _, ...missing } = env;
    expect(() => make(missing)).toThrow(
      'delayq is misconfigured: DQ_ALIPAY_ACCOUNTS: account "shop": "alipayRootCert" names the variable SHOP_ROOT_CERT, which is not set',
    );
  });
});

describe("functions/node.ts", () => {
  it("exits 1 before listening, with the one line, when alipayCert does not chain", async () => {
    const entry = spawnNodeEntry({
      ...base,
      HOST: "127.0.0.1",
      PORT: "1",
      DQ_ALIPAY_ACCOUNTS: JSON.stringify({ shop: account({ alipayCert: leafOnly() }) }),
    });
    expect(await entry.exited).toBe(1);
    const output = entry.output().trim();
    expect(output).toBe(NOT_CHAINED);
    expect(output).not.toContain("listening");
    expectNoKeyMaterial(output);
  });
});
