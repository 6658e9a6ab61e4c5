// DQ_ALIPAY_ACCOUNTS / DQ_WECHATPAY_ACCOUNTS parsing: shapes from DESIGN §4, errors that name the
// variable, account and field and never echo a value.
import { generateKeyPairSync } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type AlipayCertificateFiles,
  alipayCertificateFiles,
  issueCertificate,
  rsaKeyPair,
} from "../../dev/payment-keys";
import {
  checkAccounts,
  parseAlipayAccounts,
  parseWechatPayAccounts,
} from "../../src/payments/accounts";
import { bytesToBase64, certificates } from "../../src/payments/keys";
import { PaymentsError } from "../../src/payments/provider";
import { rsaKey, selfSignedCertificate } from "./support";

const merchant = rsaKey();
const platform = rsaKey();
const cert = selfSignedCertificate("3A6F0E2C4B5D");
const apiV3Key = "0123456789abcdefABCDEF0123456789";

const alipay = {
  appId: "2021000000000001",
  privateKey: merchant.pkcs8Base64,
  alipayPublicKey: platform.spkiBase64,
};
const wechat = {
  mchid: "1900000109",
  serialNo: "5157f09efdc096de15ebe81a47057a7232f1b8e1",
  privateKey: merchant.pkcs8Pem,
  apiV3Key,
  platformPublicKey: platform.spkiPem,
  platformPublicKeyId: "PUB_KEY_ID_0114232134912410000000000000",
};

/** The error thrown by `run`, asserted to be an invalid_accounts PaymentsError. */
function failure(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(PaymentsError);
    expect((error as PaymentsError).code).toBe("invalid_accounts");
    return (error as PaymentsError).message;
  }
  throw new Error("expected a failure");
}

/** Every secret fragment that must never appear in a message. */
const secrets = [
  merchant.pkcs8Base64.slice(64, 96),
  merchant.pkcs1Base64.slice(64, 96),
  platform.spkiBase64.slice(64, 96),
  apiV3Key,
  apiV3Key.slice(0, 20),
];
const expectNoSecret = (message: string) => {
  for (const secret of secrets) expect(message).not.toContain(secret);
};

describe("parseAlipayAccounts", () => {
  it("reads accounts with defaults: classic api, the production base URL", () => {
    const accounts = parseAlipayAccounts(
      JSON.stringify({
        shop: alipay,
        "shop-v3": {
          ...alipay,
          privateKey: merchant.pkcs1Pem,
          api: "v3",
          baseUrl: "http://127.0.0.1:9/",
        },
      }),
    );
    expect([...accounts.keys()]).toEqual(["shop", "shop-v3"]);
    expect(accounts.get("shop")).toEqual({
      ...alipay,
      name: "shop",
      api: "classic",
      baseUrl: "https://openapi.alipay.com",
    });
    expect(accounts.get("shop-v3")).toMatchObject({ api: "v3", baseUrl: "http://127.0.0.1:9" });
    // A Map: an unknown name is undefined, even one Object.prototype has.
    expect(accounts.get("constructor")).toBeUndefined();
  });

  it("accepts the variable as an object (a wrangler var table) and unset or empty as none", () => {
    expect(parseAlipayAccounts({ shop: alipay }).get("shop")?.appId).toBe(alipay.appId);
    expect(parseAlipayAccounts(undefined).size).toBe(0);
    expect(parseAlipayAccounts("").size).toBe(0);
    expect(parseAlipayAccounts("  ").size).toBe(0);
  });

  it("says which variable holds bad JSON without quoting it", () => {
    const text = `{"shop": {"privateKey": "${merchant.pkcs8Base64}", }`;
    const message = failure(() => parseAlipayAccounts(text));
    expect(message).toBe(
      "DQ_ALIPAY_ACCOUNTS is not valid JSON: give an object keyed by account name",
    );
    expectNoSecret(message);
    expect(failure(() => parseAlipayAccounts("[1]"))).toContain(
      "must be a JSON object keyed by account name",
    );
    expect(failure(() => parseAlipayAccounts('"x"'))).toContain("DQ_ALIPAY_ACCOUNTS");
  });

  it("names the account and each missing or wrong field", () => {
    const { alipayPublicKey: _, ...missing } = alipay;
    expect(failure(() => parseAlipayAccounts({ shop: missing }))).toBe(
      `DQ_ALIPAY_ACCOUNTS: account "shop": the account needs Alipay's key: "alipayPublicKey" (public-key mode) or "appCert", "alipayCert" and "alipayRootCert" (certificate mode)`,
    );
    expect(failure(() => parseAlipayAccounts({ shop: { ...alipay, appId: 42 } }))).toBe(
      'DQ_ALIPAY_ACCOUNTS: account "shop": "appId" must be a string',
    );
    expect(failure(() => parseAlipayAccounts({ shop: { ...alipay, api: "v2" } }))).toBe(
      'DQ_ALIPAY_ACCOUNTS: account "shop": "api" must be one of "classic", "v3"',
    );
    expect(failure(() => parseAlipayAccounts({ shop: { ...alipay, baseUrl: "ftp://x" } }))).toBe(
      'DQ_ALIPAY_ACCOUNTS: account "shop": "baseUrl" must be an http(s) URL',
    );
    expect(failure(() => parseAlipayAccounts({ shop: { ...alipay, appid: "x" } }))).toBe(
      'DQ_ALIPAY_ACCOUNTS: account "shop": unknown field "appid"',
    );
    expect(failure(() => parseAlipayAccounts({ shop: "x" }))).toBe(
      'DQ_ALIPAY_ACCOUNTS: account "shop": the account must be an object',
    );
    expect(failure(() => parseAlipayAccounts({ "../x": alipay }))).toContain(
      "account names must be",
    );
  });

  it("checks keys when parsing and never echoes them", () => {
    const cases = [
      { ...alipay, privateKey: merchant.pkcs8Base64.slice(0, 400) },
      { ...alipay, privateKey: platform.spkiPem },
      {
        ...alipay,
        privateKey: `${merchant.pkcs1Base64.slice(0, 200)}*${merchant.pkcs1Base64.slice(201)}`,
      },
      { ...alipay, alipayPublicKey: merchant.pkcs8Base64 },
    ];
    const messages = cases.map((account) => failure(() => parseAlipayAccounts({ shop: account })));
    expect(messages[0]).toMatch(
      /^DQ_ALIPAY_ACCOUNTS: account "shop": "privateKey" (truncated DER|not)/,
    );
    expect(messages[1]).toContain(
      '"privateKey" expected a private key, found a PEM "PUBLIC KEY" block',
    );
    expect(messages[2]).toBe('DQ_ALIPAY_ACCOUNTS: account "shop": "privateKey" not base64');
    expect(messages[3]).toContain('"alipayPublicKey"');
    for (const message of messages) expectNoSecret(message);
  });
});

describe("parseAlipayAccounts and checkAccounts: certificate mode", () => {
  let files: AlipayCertificateFiles;
  const { alipayPublicKey: _, ...keyless } = alipay;
  beforeAll(async () => {
    const [app, platformKeys] = await Promise.all([
      rsaKeyPair("accounts-app"),
      rsaKeyPair("accounts-alipay"),
    ]);
    files = await alipayCertificateFiles({
      app: app.privateKey,
      alipay: platformKeys.privateKey,
      appId: alipay.appId,
    });
  }, 30_000);
  const certMode = () => ({
    ...keyless,
    appCert: files.appCert,
    alipayCert: files.alipayCert,
    alipayRootCert: files.alipayRootCert,
  });
  /** Fragments of the certificate texts, which no message may quote. */
  const certificateFragments = () =>
    [files.appCert, files.alipayCert, files.alipayRootCert].map((pem) => pem.slice(100, 140));

  it("reads the three certificates into SNs and alipayCert's key, and checks the chain", async () => {
    const accounts = parseAlipayAccounts(JSON.stringify({ shop: certMode() }));
    const shop = accounts.get("shop");
    expect(shop?.certificates?.appCertSn).toMatch(/^[0-9a-f]{32}$/);
    expect(shop?.certificates?.alipayRootCertSn).toMatch(/^[0-9a-f]{32}$/);
    expect(shop?.alipayPublicKey).toBe(
      bytesToBase64(certificates(files.alipayCert)[0]?.spki as Uint8Array),
    );
    expect(shop).not.toHaveProperty("appCert");
    await expect(checkAccounts({ alipay: accounts })).resolves.toBeUndefined();
  });

  it("refuses mixed modes, a missing certificate, and a certificate that does not parse", () => {
    const [leafPem] = files.alipayCert.split(/(?<=-----END CERTIFICATE-----\n)/);
    const ecRoot = issueCertificate(generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey, {
      subject: "/CN=EC only",
      ca: true,
    });
    const { alipayRootCert: _root, ...twoOfThree } = certMode();
    const cases: [Record<string, unknown>, string][] = [
      [
        { ...certMode(), alipayPublicKey: alipay.alipayPublicKey },
        `the account mixes the two modes: give "alipayPublicKey" (public-key mode) or "appCert", "alipayCert" and "alipayRootCert" (certificate mode), not both`,
      ],
      [{ ...alipay, alipayCert: leafPem }, "the account mixes the two modes"],
      [twoOfThree, `the account is in certificate mode and also needs "alipayRootCert"`],
      [{ ...certMode(), alipayCert: "MIIB" }, `"alipayCert" not an X.509 certificate`],
      [
        { ...certMode(), appCert: platform.spkiPem },
        `"appCert" expected a certificate, found a PEM "PUBLIC KEY" block`,
      ],
      [
        { ...certMode(), alipayRootCert: ecRoot.pem },
        `"alipayRootCert" holds no RSA-signed certificate`,
      ],
      [
        {
          ...certMode(),
          alipayCert: (leafPem as string).replace("-----\nMII", "-----\n*II"),
        },
        `"alipayCert" not base64`,
      ],
    ];
    for (const [account, expected] of cases) {
      const message = failure(() => parseAlipayAccounts({ shop: account }));
      expect(message).toContain(`DQ_ALIPAY_ACCOUNTS: account "shop": ${expected}`);
      expectNoSecret(message);
      for (const fragment of certificateFragments()) expect(message).not.toContain(fragment);
    }
  });

  it("refuses at the check an alipayCert that does not chain to alipayRootCert", async () => {
    const [leafPem] = files.alipayCert.split(/(?<=-----END CERTIFICATE-----\n)/);
    const accounts = parseAlipayAccounts({
      ok: certMode(),
      shop: { ...certMode(), alipayCert: leafPem },
    });
    const error = await checkAccounts({ alipay: accounts }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsError);
    expect((error as PaymentsError).code).toBe("invalid_accounts");
    expect((error as PaymentsError).message).toBe(
      `DQ_ALIPAY_ACCOUNTS: account "shop": "alipayCert" does not chain to a certificate of "alipayRootCert" (its signature is not a root's, nor an intermediate's given after it in "alipayCert")`,
    );
  });
});

describe('key and certificate fields that name a variable: {"env": NAME}', () => {
  let files: AlipayCertificateFiles;
  beforeAll(async () => {
    const [app, platformKeys] = await Promise.all([
      rsaKeyPair("accounts-app"),
      rsaKeyPair("accounts-alipay"),
    ]);
    files = await alipayCertificateFiles({
      app: app.privateKey,
      alipay: platformKeys.privateKey,
      appId: alipay.appId,
    });
  }, 30_000);

  it("reads each from its variable, so that no variable outgrows a Worker's 5 KB", () => {
    const env = {
      SHOP_KEY: merchant.pkcs8Pem,
      SHOP_APP_CERT: files.appCert,
      SHOP_ALIPAY_CERT: files.alipayCert,
      SHOP_ROOT_CERT: files.alipayRootCert,
      WX_CERT: cert.pem,
    };
    const inline = {
      appId: alipay.appId,
      privateKey: merchant.pkcs8Pem,
      appCert: files.appCert,
      alipayCert: files.alipayCert,
      alipayRootCert: files.alipayRootCert,
    };
    const referenced = {
      appId: alipay.appId,
      privateKey: { env: "SHOP_KEY" },
      appCert: { env: "SHOP_APP_CERT" },
      alipayCert: { env: "SHOP_ALIPAY_CERT" },
      alipayRootCert: { env: "SHOP_ROOT_CERT" },
    };
    // Inline, one account is past a Worker's limit for a variable; each part is within it.
    expect(JSON.stringify({ shop: inline }).length).toBeGreaterThan(5 * 1024);
    for (const text of Object.values(env)) expect(text.length).toBeLessThan(5 * 1024);
    const { name: _n, ...fromInline } = parseAlipayAccounts({ shop: inline }).get("shop") ?? {};
    const { name: _r, ...fromEnv } =
      parseAlipayAccounts(JSON.stringify({ shop: referenced }), env).get("shop") ?? {};
    expect(fromEnv).toEqual(fromInline);
    const { platformPublicKey: _k, platformPublicKeyId: _i, ...base } = wechat;
    const wx = parseWechatPayAccounts(
      {
        shop: {
          ...base,
          privateKey: { env: "SHOP_KEY" },
          platformCertificates: [{ env: "WX_CERT" }],
        },
      },
      env,
    ).get("shop");
    expect(wx).toMatchObject({ privateKey: merchant.pkcs8Pem, platformCertificates: [cert.pem] });
  });

  it("names the field and the variable when it is not set or the reference is malformed", () => {
    const { alipayPublicKey: _, ...keyless } = alipay;
    const cases: [Record<string, unknown>, string][] = [
      [
        { ...alipay, privateKey: { env: "NOT_SET" } },
        '"privateKey" names the variable NOT_SET, which is not set',
      ],
      [
        { ...alipay, privateKey: { env: "EMPTY" } },
        '"privateKey" names the variable EMPTY, which is not set',
      ],
      [
        { ...alipay, privateKey: { env: "BAD NAME" } },
        `"privateKey" must be text, or {"env": "<VARIABLE>"} naming the variable that holds it`,
      ],
      [
        { ...keyless, appCert: { env: "A" }, alipayCert: { file: "x" }, alipayRootCert: "x" },
        `"appCert" names the variable A, which is not set; "alipayCert" must be text, or {"env": "<VARIABLE>"} naming the variable that holds it`,
      ],
    ];
    for (const [account, expected] of cases) {
      const message = failure(() => parseAlipayAccounts({ shop: account }, { EMPTY: " " }));
      expect(message).toBe(`DQ_ALIPAY_ACCOUNTS: account "shop": ${expected}`);
    }
    const { platformPublicKey: _k, platformPublicKeyId: _i, ...base } = wechat;
    expect(
      failure(() =>
        parseWechatPayAccounts({ shop: { ...base, platformCertificates: ["x", { env: "GONE" }] } }),
      ),
    ).toBe(
      'DQ_WECHATPAY_ACCOUNTS: account "shop": "platformCertificates.1" names the variable GONE, which is not set',
    );
  });
});

describe("parseWechatPayAccounts", () => {
  it("reads public-key mode, certificate mode and both, with the default base URL", () => {
    const { platformPublicKey: _k, platformPublicKeyId: _i, ...base } = wechat;
    const accounts = parseWechatPayAccounts(
      JSON.stringify({
        pk: wechat,
        certs: { ...base, mchid: 1900000110, platformCertificates: [cert.pem] },
        both: { ...wechat, platformCertificates: [cert.pem], baseUrl: "http://127.0.0.1:8/" },
      }),
    );
    expect(accounts.get("pk")).toEqual({
      ...wechat,
      name: "pk",
      serialNo: wechat.serialNo.toUpperCase(),
      baseUrl: "https://api.mch.weixin.qq.com",
    });
    expect(accounts.get("certs")).toMatchObject({
      mchid: "1900000110",
      platformCertificates: [cert.pem],
    });
    expect(accounts.get("both")?.baseUrl).toBe("http://127.0.0.1:8");
  });

  it("names what is missing or wrong, never the value", () => {
    const { platformPublicKey: _k, platformPublicKeyId: _i, ...noMode } = wechat;
    const cases: [Record<string, unknown>, string][] = [
      [
        noMode,
        "the account needs the WeChat Pay public key (platformPublicKey + platformPublicKeyId) or platformCertificates",
      ],
      [
        { ...noMode, platformPublicKey: platform.spkiPem },
        '"platformPublicKeyId" platformPublicKey and platformPublicKeyId go together',
      ],
      [{ ...wechat, apiV3Key: "short-key" }, '"apiV3Key" must be the 32-character APIv3 key'],
      [{ ...wechat, apiV3Key: `${apiV3Key}x` }, '"apiV3Key" must be the 32-character APIv3 key'],
      [{ ...wechat, mchid: "19x" }, '"mchid" must be digits'],
      [{ ...wechat, mchid: true }, '"mchid" must be a string of digits'],
      [
        { ...wechat, serialNo: "not-hex" },
        `"serialNo" must be the merchant certificate's hex serial`,
      ],
      [{ ...noMode, platformCertificates: [] }, '"platformCertificates" must not be empty'],
      [
        { ...noMode, platformCertificates: [platform.spkiPem] },
        '"platformCertificates.0" expected a certificate, found a PEM "PUBLIC KEY" block',
      ],
      [{ ...wechat, privateKey: undefined }, '"privateKey" is missing'],
    ];
    for (const [account, expected] of cases) {
      const message = failure(() => parseWechatPayAccounts({ shop: account }));
      expect(message).toBe(`DQ_WECHATPAY_ACCOUNTS: account "shop": ${expected}`);
      expectNoSecret(message);
    }
  });

  it("reports bad JSON under its own variable name", () => {
    expect(failure(() => parseWechatPayAccounts(`{"shop": {"apiV3Key": "${apiV3Key}"`))).toBe(
      "DQ_WECHATPAY_ACCOUNTS is not valid JSON: give an object keyed by account name",
    );
  });
});
