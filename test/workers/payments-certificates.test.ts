// Certificate modes inside workerd: @peculiar/asn1-x509 reads the certificates, WebCrypto checks
// their chain, our MD5 makes Alipay's SNs, and the Worker entry refuses a certificate that does
// not chain. Every expected value below was made once in Node (openssl, node:crypto, the official
// alipay-sdk) and pasted here; nothing here is computed by the code under test.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../functions/worker";
import { checkAccounts, parseAlipayAccounts } from "../../src/payments/accounts";
import { alipayProvider } from "../../src/payments/alipay";

/** A 2048-bit test key (node:crypto), PKCS#8: the key of ALIPAY_CERT's first certificate. */
const KEY_PEM = `-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC4Q3PP9zknVeXa
+u/Aa2gF/CH5LCW9gFpO9kh4LF/BVBLOoQrch/jhwnm9Z14kJcgC095JcrleBHPC
TB0zLPJUOHdbbNGfLMK2AyhYjmEi0v+ZWHhbADCLmWrC3FJIY9895dpoGMWGtmVI
Xwy+/FmTz0AUnDU4B8nlAXOC8zWweFr/jeibAds3447OFHTaMlaQ8N4rbwNduyB7
wrwT5b1lVxLpYc1kPngF8jnNAeRj4HpNzPSHhXPzn1TW1K1bFr01/6DUY+8jZRld
y0qzxErzvA/sH0nfP3nDcgxyYuyvZZVN2tQ9Q+F11y/d8c27BmEU1C5tHZWRom6o
ryE1xDthAgMBAAECggEAE0ehgkjWntZGyOkZNWu3lGq7fkgfgcrAiEMONZ7E/SRI
HH0utwD2Kl8QIGCEsekPGrai61H48cyq9RFEO+LPzz6iRHtoGozTKbq+Wbe6E6v6
qQef/juQmMa6bD2j0WW7ycz3U42F+3Cxu8cQPRqH3+afSJjIm7564j6K4NCEVVyw
bv5zruSEX6h3xOH7Narcdjt9otRprpm1TRwP7qWPic/LVOCRxtKS8OcZ+XaStyww
s85cCieevBGYPez+aRJX04tYKY3uEuclSrL/GVdDxSmBuNYl3KoV1s+xmkbiYDpz
L3Z9gZ6mnAaHe4jQf+YSTV6JJEZ1i6RwysKbAA/v3QKBgQD/2MoimXwfcigsfBwZ
oBKkKyKxOZ8hyvb45a30XbKzoVINXlltpVY5nuZ5NWHxwTrXCUygk228T1UHgwfL
6gzcTPn2XOBCu8izB9NnTpz+2ncKTk4rAIwmiUQz2cffZrRy8r433HLVhjvD1xSr
RAwUsITZrVI537m9ivMM7QgdLQKBgQC4X7EvOYrDcnLSPXJKfxWHOAchr6Wx18eo
gyr7cnWYdMvjSxEV4KldlegAX3S1tV0Tr5tMGo7ec5FrLvZ3Uh4bfVHymPYHOQ7h
+BDQvoFUk3MJ8/LJjYzmdk/EHsVOjlodYnNO1+Iu4dXif/qUXkxR/nQaeHKdl8IE
gCz2uDs/hQKBgARcUI2oagorKu4fK2dwaADuT0gQAFtWF0GEwKNCmZIgNMLPkdyh
jceroqf8NfAl5/fUS78M5DjqbTuUiyR5l8CFe1ksmhHpG3GZt4uyNlDNrmu5i/GF
r93URxpPIu321SqEYqOXGUn0YL5kwxBsN3x+ybTgFF+yJXtKi/vzakj9AoGAPkCR
ItDa+YL7IeF9ZYnjSvSv87/KwnGJCGzBZoUPD5rf/K6r5iclCGRFIVsZnQDPnIX+
eYO+GX4L65S/wyoG4GE/+hmLeITbcZDAnLq2EEh43zNvFn6kxGvOIvoAxLVr1+AV
7tkVlZ7LCN8NTGtKeaTgrs9cY7mJ2NsuU1+BIcECgYEA1/L80ODts0lEuGMuj7WB
vpD6xV+KxMMWdv1K8W1sKf+gkFINe/14ahBtL1nkz+zP0QOTchY6QGEXZJJYXAS/
mxChKd5Xx0jqGvhLTwJoPhagPa7atQw4dYZ3QBdqvxUWaCnqw/76cj7JlP6BoTlZ
Taqn6lHFimJUiwqmNAmUuak=
-----END PRIVATE KEY-----
`;
/** openssl: Alipay's certificate (for KEY_PEM, serial 0x02024091000123456789ABCDEF), then the Class 2 intermediate. */
const ALIPAY_CERT = `-----BEGIN CERTIFICATE-----
MIIDuDCCAqCgAwIBAgINAgJAkQABI0VniavN7zANBgkqhkiG9w0BAQsFADCBiTEL
MAkGA1UEBhMCQ04xFjAUBgNVBAoMDUFudCBGaW5hbmNpYWwxIDAeBgNVBAsMF0Nl
cnRpZmljYXRpb24gQXV0aG9yaXR5MUAwPgYDVQQDDDdBbnQgRmluYW5jaWFsIENl
cnRpZmljYXRpb24gQXV0aG9yaXR5IENsYXNzIDIgUjEgKHRlc3QpMCAXDTI2MTIw
NjA2MzMwNloYDzIxMjYxMTEyMDYzMzA2WjBFMQswCQYDVQQGEwJDTjEWMBQGA1UE
CgwNQWxpcGF5ICh0ZXN0KTEeMBwGA1UEAwwVQWxpcGF5IFJTQTIwNDggKHRlc3Qp
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAuENzz/c5J1Xl2vrvwGto
Bfwh+SwlvYBaTvZIeCxfwVQSzqEK3If44cJ5vWdeJCXIAtPeSXK5XgRzwkwdMyzy
VDh3W2zRnyzCtgMoWI5hItL/mVh4WwAwi5lqwtxSSGPfPeXaaBjFhrZlSF8MvvxZ
k89AFJw1OAfJ5QFzgvM1sHha/43omwHbN+OOzhR02jJWkPDeK28DXbsge8K8E+W9
ZVcS6WHNZD54BfI5zQHkY+B6Tcz0h4Vz859U1tStWxa9Nf+g1GPvI2UZXctKs8RK
87wP7B9J3z95w3IMcmLsr2WVTdrUPUPhddcv3fHNuwZhFNQubR2VkaJuqK8hNcQ7
YQIDAQABo2AwXjAMBgNVHRMBAf8EAjAAMA4GA1UdDwEB/wQEAwIHgDAdBgNVHQ4E
FgQUm5Y74sE3fLVOLDBsM4SV5QMPL3EwHwYDVR0jBBgwFoAU8RohtbayW7P4W6CR
J0OZBA0/c8AwDQYJKoZIhvcNAQELBQADggEBAFBZxHBEE22L5D6hzndQRqNfanKE
23hxlU57M8Pv0BRLuL1nremU5eOe77dnktcTrCEJyhkxzefl6SmcJ709qXgf4Nz1
yHcFhnbBm96uEDTxy8xiu6Vw97iMQ6Dwq+WVpqUYrUJ1xQYPWnogPjuKH7V9mjBX
e9B1zeSOsmeBTRTbKk0H4UIgfUu9GhpgSiQ+mzX7ff8QlgSMi+uKXgmCJcYFHMIC
O72oqnQABlO2pLUm4x8Ovg75YVr5TiR+xl14asebQypPL6rc0cBmY6H5eX3LJU7g
EB/as5cZ1SmHfR4S3uX9YFEBQBhaLDY+tl+UW/xi4UhnLT/YoaYCWB2tA/s=
-----END CERTIFICATE-----
-----BEGIN CERTIFICATE-----
MIID/zCCAuegAwIBAgIUd14nR5zL9f3GqpSqlQH75Kge5cwwDQYJKoZIhvcNAQEL
BQAwgYExCzAJBgNVBAYTAkNOMRYwFAYDVQQKDA1BbnQgRmluYW5jaWFsMSAwHgYD
VQQLDBdDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTE4MDYGA1UEAwwvQW50IEZpbmFu
Y2lhbCBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eSBSMSAodGVzdCkwIBcNMjYxMjA2
MDYzMzA2WhgPMjEyNjExMTIwNjMzMDZaMIGJMQswCQYDVQQGEwJDTjEWMBQGA1UE
CgwNQW50IEZpbmFuY2lhbDEgMB4GA1UECwwXQ2VydGlmaWNhdGlvbiBBdXRob3Jp
dHkxQDA+BgNVBAMMN0FudCBGaW5hbmNpYWwgQ2VydGlmaWNhdGlvbiBBdXRob3Jp
dHkgQ2xhc3MgMiBSMSAodGVzdCkwggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEK
AoIBAQCxlZS2I7mGzWa99uqQxHAxcGD/8iaZh2ktMcAwgZpc12uhBEiyiY0sJWe6
1KkdRDZBaZEaY8WSGdElvcq1/eNymPyLJI46k1JSvhqFJtsxCGXmsvVRwGuhj8s9
URFDa7uSNDXLEVSl+GwxqKgXIDmqtYScxf7e83VT/Sq3wgdfWtTh819ZEE4dBecA
yEhvhC4ab8y2307m+N9kEkPXrGzMW02dJL3En6LFZfKqELJfYOeMkSlWVauQx4DU
XNezIOZSZwrF0sad+SMumLpynahtiehMsjLaCHne8noSWFndCVyIC/3jZ11zw20s
4KBkOf+ABl8xJJB4mBTTqx8HOx4jAgMBAAGjYzBhMA8GA1UdEwEB/wQFMAMBAf8w
DgYDVR0PAQH/BAQDAgEGMB0GA1UdDgQWBBTxGiG1trJbs/hboJEnQ5kEDT9zwDAf
BgNVHSMEGDAWgBShBrIqzCKE37FTn1M1tujkKivdHDANBgkqhkiG9w0BAQsFAAOC
AQEAL0m33Ki9FXYEPL7K84HyVLBVyIO3+pZWeCdpI0z5aoCfApYSVV13nXriJLSb
JCdIatK6AxhnW96Ml0YO0Xaaq/jGxM2LcKbivUZ4Z72LjIJTVMDFu4ppaYW0weCU
XnkFcJ8g7TVyYsVXHyihWk0xp623HZ+yi9pP+LCip95N308ei0E0CBmepo4S5L4s
VC4e9RaDPIDT4qTuSBpHExOS8FVpqPCECE596Yya/eMOVvNWs4I/0eakNL1Xy1Bh
RIL5Wb8hZ9Z9GFjquugUh2DA0fPtKGLhgL7MzPEgVqe7b+K3lE+0bie2q76yqjH8
e/9Dbgp4eRkgYIYfsj5St38m/A==
-----END CERTIFICATE-----
`;
/** openssl: the RSA root that issued the intermediate, then an EC root (left out of the SN). */
const ALIPAY_ROOT_CERT = `-----BEGIN CERTIFICATE-----
MIID5zCCAs+gAwIBAgIUMbO4Csi3oACuQG3Vyoo8dQVwc28wDQYJKoZIhvcNAQEL
BQAwgYExCzAJBgNVBAYTAkNOMRYwFAYDVQQKDA1BbnQgRmluYW5jaWFsMSAwHgYD
VQQLDBdDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTE4MDYGA1UEAwwvQW50IEZpbmFu
Y2lhbCBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eSBSMSAodGVzdCkwIBcNMjYxMjA2
MDYzMzA1WhgPMjEyNjExMTIwNjMzMDVaMIGBMQswCQYDVQQGEwJDTjEWMBQGA1UE
CgwNQW50IEZpbmFuY2lhbDEgMB4GA1UECwwXQ2VydGlmaWNhdGlvbiBBdXRob3Jp
dHkxODA2BgNVBAMML0FudCBGaW5hbmNpYWwgQ2VydGlmaWNhdGlvbiBBdXRob3Jp
dHkgUjEgKHRlc3QpMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAuYEr
US4uqyQjtqasCd9n305XhkV6d3x+mljaO6+NPcPhT6oKW2k6G5pB+FKdapNiZm4Y
Rcv6hX/Z/2Di/L4DqCYVowZ1GAWAWCFobpjzEaSnMPu1uaxW+sgnVWmx1Z2BCjDt
jznx8eCe/j+HLSJ+DJTpYvIsCwsdV30sb32a3s8J6kzUG68WiuDY+Z80IaeqMF+d
zbAPlzHv30F8G+5BDyI8Hc5khddprHobBqjArSiyLOBZc7XgXs6mkQVyQ80yJvRr
/lv+QuWXghPuwy9x1fnRLKYLRaskVQMn1ilcAf6c8s/H1scxXjf1gFTeBGUiyIZK
IzpIERJBCkh2YWOgaQIDAQABo1MwUTAdBgNVHQ4EFgQUoQayKswihN+xU59TNbbo
5Cor3RwwHwYDVR0jBBgwFoAUoQayKswihN+xU59TNbbo5Cor3RwwDwYDVR0TAQH/
BAUwAwEB/zANBgkqhkiG9w0BAQsFAAOCAQEAk2BsmZvMlrhMpuEY7jX+HGZMc4t4
vaEbszb4WjMqBB6yvEfAIXxFPIBCaGbq0VQq8oNrBHJujlhmg6TuxejRLpbgK24P
A0HVKPHayBqU7Sgp2W9l1tX9x9w4T9lH1KEnsC2sebKYdWTfVZ46/FMq/kuIzbYV
6ok55cJv+GAtWUGPooaKkWIy1oSrRLTpkapCjDQELeuRWEPi9HKKUSGnZK+/x+Zx
QMluAYdI5AjvX0LM/+GqB0TSjHiFAxBH4SnL5/iUbanqu0oBqP8Cl2E+ogRtvtxm
zKjgkgOOjVtzPbNoh0AUKV3VTIPFIMbQLKMyr357fHZkIfugOupZV1zKdg==
-----END CERTIFICATE-----
-----BEGIN CERTIFICATE-----
MIICWzCCAgGgAwIBAgIUdc5/0C0TKsfFTnvkY4wifFuVCegwCgYIKoZIzj0EAwIw
gYExCzAJBgNVBAYTAkNOMRYwFAYDVQQKDA1BbnQgRmluYW5jaWFsMSAwHgYDVQQL
DBdDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTE4MDYGA1UEAwwvQW50IEZpbmFuY2lh
bCBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eSBFMSAodGVzdCkwIBcNMjYxMjA2MDYz
MzA1WhgPMjEyNjExMTIwNjMzMDVaMIGBMQswCQYDVQQGEwJDTjEWMBQGA1UECgwN
QW50IEZpbmFuY2lhbDEgMB4GA1UECwwXQ2VydGlmaWNhdGlvbiBBdXRob3JpdHkx
ODA2BgNVBAMML0FudCBGaW5hbmNpYWwgQ2VydGlmaWNhdGlvbiBBdXRob3JpdHkg
RTEgKHRlc3QpMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEsIbZc689lcN0K8KL
ZsRKjCUK3BopGfW4NqbRI+vhKI7aHbPH///jtYT+tdGjjrznPiTDWsEvhMAeZv8v
eDt8C6NTMFEwHQYDVR0OBBYEFLk2l8ytKydkFJEGM4Yqba19R/LnMB8GA1UdIwQY
MBaAFLk2l8ytKydkFJEGM4Yqba19R/LnMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZI
zj0EAwIDSAAwRQIhAOob2hSv+ChKrGTz/ToT+ht2bRxH82qaSj+yvwXT+3KHAiAb
oAj5Pmf1TWGChoVEWZMXd4vLkd0y01yif6dRwoPLNw==
-----END CERTIFICATE-----
`;
/** The SNs the official alipay-sdk computes for these (appCertContent = ALIPAY_CERT too). */
const ALIPAY_CERT_SN = "2b76b72391272ce7763aedaffc82ddb4";
const ALIPAY_ROOT_CERT_SN = "a227c18037353cda9c4d9d65cdcd4a3d";
/** A classic answer's inner object, and node:crypto's signature of it with KEY_PEM. */
const ANSWER_INNER =
  '{"code":"10000","msg":"Success","out_trade_no":"order-1042","trade_no":"2025010122001","trade_status":"TRADE_SUCCESS","total_amount":"19.99","send_pay_date":"2025-01-01 00:00:07"}';
const ANSWER_SIGN =
  "mKWfVHm7goSyXl7bhe1syzp2zTgPTTu45lYzxUklajMbbhTyDmGRC6HEUUmDFCUV4WRxlBxE0ibwgIbt1OZPryXvIa/DNZTKXOztrIXlGnKqNiyMlg/GRRZMcPWRGWfPVQ4+vgIeAKu8vG6Mib7HuddzyPGz/YOUSElejMcyVlpWepJpSKmyPOfb62f6cCSDSt5iVdg4SsTU3n3LZOXNs1ruXULw5aqcQa8E06B9hmaiZ2Yv9qRmqjVE+MHvtBLayBDAJ95dMR+X/Uj9mwLC6nzS23zhhqhTjFoxWjSAQ78zamZR3+JFdJyurbv/E1QEbJJTAR/Qj8S6ttO6J0ctgg==";

const firstCertificate = (pem: string) => pem.split(/(?<=-----END CERTIFICATE-----\n)/)[0] ?? "";
const certMode = (alipayCert = ALIPAY_CERT) => ({
  appId: "2021000000000001",
  privateKey: KEY_PEM,
  appCert: ALIPAY_CERT,
  alipayCert,
  alipayRootCert: ALIPAY_ROOT_CERT,
});

describe("Alipay certificate mode in workerd", () => {
  it("computes the SDK's SNs and checks the chain with WebCrypto", async () => {
    const accounts = parseAlipayAccounts({ shop: certMode() });
    expect(accounts.get("shop")?.certificates).toMatchObject({
      appCertSn: ALIPAY_CERT_SN,
      alipayCertSn: ALIPAY_CERT_SN,
      alipayRootCertSn: ALIPAY_ROOT_CERT_SN,
    });
    await expect(checkAccounts({ alipay: accounts })).resolves.toBeUndefined();
    const unchained = parseAlipayAccounts({ shop: certMode(firstCertificate(ALIPAY_CERT)) });
    await expect(checkAccounts({ alipay: unchained })).rejects.toMatchObject({
      code: "invalid_accounts",
      message: expect.stringContaining('"alipayCert" does not chain'),
    });
  });

  it("sends the SNs and takes only answers that name alipayCert", async () => {
    const account = parseAlipayAccounts({ shop: certMode() }).get("shop");
    if (!account) throw new Error("no account");
    let sent: Record<string, string> = {};
    const answering = (sn: string) =>
      (async (input: RequestInfo | URL) => {
        sent = Object.fromEntries(new URL(String(input)).searchParams);
        const body = `{"alipay_trade_query_response":${ANSWER_INNER},"sign":"${ANSWER_SIGN}","alipay_cert_sn":"${sn}"}`;
        return new Response(body);
      }) as typeof fetch;
    const paid = await alipayProvider(account, { fetch: answering(ALIPAY_CERT_SN) }).query(
      "order-1042",
    );
    expect(sent).toMatchObject({
      app_cert_sn: ALIPAY_CERT_SN,
      alipay_root_cert_sn: ALIPAY_ROOT_CERT_SN,
    });
    expect(paid).toMatchObject({ kind: "trade", outcome: "paid", amount: { total: 1999 } });
    const other = await alipayProvider(account, { fetch: answering(ALIPAY_ROOT_CERT_SN) }).query(
      "order-1042",
    );
    expect(other).toMatchObject({ kind: "transient" });
  });
});

describe("the Worker entry", () => {
  it("answers every route 500 internal_error naming the account when alipayCert does not chain", async () => {
    const bindings = {
      ...env,
      DQ_ALIPAY_ACCOUNTS: JSON.stringify({ shop: certMode(firstCertificate(ALIPAY_CERT)) }),
    };
    for (const path of ["/health", "/v1/payments"]) {
      const ctx = createExecutionContext();
      const res = await worker.fetch(new Request(`http://delayq.test${path}`), bindings, ctx);
      await waitOnExecutionContext(ctx);
      expect(res.status).toBe(500);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("internal_error");
      expect(body.error.message).toMatch(
        /^delayq is misconfigured: DQ_ALIPAY_ACCOUNTS: account "shop": "alipayCert" does not chain/,
      );
      expect(body.error.message).not.toContain("BEGIN");
    }
  });
});
