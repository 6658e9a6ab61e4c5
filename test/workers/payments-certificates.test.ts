// Certificate modes inside workerd: @peculiar/asn1-x509 reads the certificates, WebCrypto checks
// their chain, our MD5 makes Alipay's SNs, the Worker entry refuses a certificate that does not
// chain, and a WeChat Pay answer signed by an unknown certificate fetches /v3/certificates. Every expected value below was made once in Node (openssl, node:crypto, the official
// alipay-sdk) and pasted here; nothing here is computed by the code under test.
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import worker from "../../functions/worker";
import {
  checkAccounts,
  parseAlipayAccounts,
  parseWechatPayAccounts,
} from "../../src/payments/accounts";
import { alipayProvider } from "../../src/payments/alipay";
import { wechatPayProvider } from "../../src/payments/wechatpay";

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

/** WeChat Pay: the configured platform certificate (openssl, a key of its own). */
const WX_CERT_A = `-----BEGIN CERTIFICATE-----
MIID6TCCAtGgAwIBAgIUGis8TV5vcIGSo7TF1uf4CRI0VngwDQYJKoZIhvcNAQEL
BQAwgYIxCzAJBgNVBAYTAkNOMRIwEAYDVQQIDAlHdWFuZ2RvbmcxETAPBgNVBAcM
CFNoZW56aGVuMRMwEQYDVQQKDApUZW5wYXkuY29tMR0wGwYDVQQLDBRUZW5wYXku
Y29tIENBIENlbnRlcjEYMBYGA1UEAwwPVGVucGF5LmNvbSBzaWduMCAXDTI2MTIw
NjA3MDIxNloYDzIxMjYxMTEyMDcwMjE2WjCBgjELMAkGA1UEBhMCQ04xEjAQBgNV
BAgMCUd1YW5nZG9uZzERMA8GA1UEBwwIU2hlbnpoZW4xEzARBgNVBAoMClRlbnBh
eS5jb20xHTAbBgNVBAsMFFRlbnBheS5jb20gQ0EgQ2VudGVyMRgwFgYDVQQDDA9U
ZW5wYXkuY29tIHNpZ24wggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQCj
sEkcCEPTNc5F7gOyIa21iNWDHtIsKp1mO39QPJek/bsK3Xy4kVIQhQsA90iP8jPq
+WzZnXAwuYJE8l4TnwpVm9l0G1FwPID9Vkj8TB8UQQcny0UYiBmImTo5nghJcKDj
br8l0Q6lECOjvOMbZH+273gR1hO1HNfa9mGzQ53c5rKZelItlIrceI/1rpoUs8uP
iG6cozaDO3PwUkyuXvKD4smD8CpzNhRURFSKz1pxRdaOLNs/BW5bVZD0OJCcPksH
riWRst9+bKqz0eAM4MS5xo3avaCg0DtF/IykjTE7hbD0v5IbyBmLbhyonk2bvI+J
0GwUm8ZrdbFan8IaEFQzAgMBAAGjUzBRMB0GA1UdDgQWBBRm0Huw46cE+mfDDqQb
BxecU0qUETAfBgNVHSMEGDAWgBRm0Huw46cE+mfDDqQbBxecU0qUETAPBgNVHRMB
Af8EBTADAQH/MA0GCSqGSIb3DQEBCwUAA4IBAQAU9ihQN5j2rRuINV+rlb9A6hyw
EapJ3ZfrFvVDIur3cIIp27AkBILJ/9R8E7eJ73P+S8ve4qF0ABWGOdb32ZWPPNwI
TyOyoMlLu8TpC4yk8aSzR4mCiqQDVY8WsudpxjOMmPdLrZDFM7aVnvTaYov4gUvb
yITLwipBEcBdW0WfT96h+aH6n0FsqjFd0Dv3uDVbpKzBGm9PSlqibHhsMf8UB3p6
d1XvOW7cr/3fVAqrVbKjk4THyyKhgISGbpmVyPjItHGHqV9Bl0daxUvoZfyh5kug
Ck/EwAGjPsgV9/ezJV5nn2Q8SsSORuHf4w8w/MzqjW8yAivnmBFGV1160B4/
-----END CERTIFICATE-----
`;
/** The certificate WeChat Pay rotated to (openssl, another key): signs the answers below. */
const WX_SERIAL_B = "7F6E5D4C3B2A19080706050403020100AABBCCDD";
const WX_API_V3_KEY = "c0ffeec0ffeec0ffeec0ffeec0ffee12";
/** When the answers were signed (s), and their nonces. */
const WX_T = 1796540536;
/** A query answer signed by B (node:crypto) at WX_T with nonce "nonce-query". */
const WX_B_QUERY =
  '{"mchid":"1900000109","out_trade_no":"order-1042","transaction_id":"4200000002","trade_state":"SUCCESS","success_time":"2026-12-01T10:03:04+08:00","amount":{"total":2500,"currency":"CNY"}}';
const WX_B_QUERY_SIGNATURE =
  "XROuU/Hax3B3nVYlmZhcTN5RpEXrt7+eLwwQb8tHNOjOU9OCG9B3Xg6nUJq5h5UcmU52+BZ6fkMoDLmboAIA+gyiRqi4FJ6kLDrrQa5yzweSDNHwQKw28tMXUwcRApqdIPqGXtBNQ5x3fa4zV2qKYDkkhGrJtGoeiKoegpGbtb07cLwGT08hyz4/F39er6n3q4BQkwPmeGAsN06uCUQTIq5wpA6IcHW9A9l68gUGnUT28xcq7FSGN2XXdGYPdbEQMbWoTxI/3ALfkAfjFspn2Ux0iVq4vGWcpjVeR8fBK/pbUFWNbRUnQ5L7RQOuSwNPYQdiITtWgdMtKflznId4tg==";
/** GET /v3/certificates: B encrypted with the APIv3 key (node:crypto AES-256-GCM), signed by B with nonce "nonce-certs". */
const WX_B_CERTIFICATES =
  '{"data":[{"effective_time":"2026-12-01T00:00:00+08:00","encrypt_certificate":{"algorithm":"AEAD_AES_256_GCM","associated_data":"certificate","ciphertext":"PU+Dth0k/g3DJtl140ISkeGtMbJBXq5+GLGUM7wxU75YKV9hGXb0U3aOOesBVNEqUUf9xtmIoq4qI+hsRddV5AtXsTL8qWRLdNXa0jRYUbzBzFCvQj/YzlKJwsupJARpMiP8jiJ+jD/8fGD7E0SmRfg0z2d9q4bu+7icUD/qbTcuFP1HtOo8FBGFbkIed2z2HA+zs4n2RkKRoJp1G3iyQ4gbPkLD20N2G04LksAMdREx0X3z+T4scg1fGu86YDhDFGcy+JA09jOgLBKOX9rM61Y5RYEhdn7SoircZ7erEShCSwmFCWZSkbPCYVkE0kfF7LfqCd5wXh4MXUnryi+qV4kg1UpWopB3cOzXxMnK87vyME+1ZP+w7Ipbtlsy06BEBQFuBEwFGNn3lBP4Cyk0ZudXSBsRDubGTI7i+BpidL2zXjRSF2gxAsVy9cwwg8SXvjBgaF4f9Il6zFCBUQ5Avjwf7/pk3RqXCn6gkk02c+YnhewPA9+FdplwLo2oaTam5MhueJniOFlsPtJHyUTIa9NJ01ba6KXSSr9SLWtlZGYMSm7CjrnHdX6sqtdFipvlI/7wdLWVsG0c6IYAOgsY2dbzfn0KbaBU8MwEmssD9dQLMRLsfl9fc18Ez2y5MjzSbHVwWlzy3sOLabRSHX+S0+8eTrlDtMt9iw8x+lib8K+vGiw+x8+sS3Q1YJgpJ5lctMtZm/VUADnfdxo8iUhknjdiUXv3c5dv5HHw/w/MAyAdXszUL/ECsRxw1FdY+7CWHBpES6n1OU+G9qa6LyhQWF/ox5WQd5O3I94APWXzkBBKV03ziAYmFfNPR9prStAuNCUB/Pv1pkjC1lpRl0yN9lhqF8tNi6eCfgaXc/ZO9ubIeJlFYhj7u5I999l/Ylt7mCvR5yDjrrkGftWOsylfCqbSRY2M/a2zro+933OZ9SeBlZQLdYgnLQm5aTDg7INlgws43OzPfHjNMGuR2jg3fqTXWmnEIJm/SyLEl9Eoyy6d/STnOZS7wdQq3Mn2EbIXSXHlboGmOanuPJ6/yc5QdCav1/jyVwiUTlX3CPCeNVGoO4MJyGfSulWeTOOyD9YgALC0bJ3bERFHItQU0LTVIQv2jSQeDB7ewVanujwHknOmj7KH8iosdnNWqzsqdluBIOEIXx+BM+N/a2YdEEDVdifMpXskHo9TFVBQSsSAbP3LyguGaZM3JCtqwmq6vS5ZkEoI7InGy+BeYBZmYITAWz6LAu2E/cVRRcQFzRSWHhG73nLHrNZzEMA2wtHcB6VlODTDrNzQVicE0z7FF2YPaLfZXX9W1rkK8ueU/2+HoZfoLBXjazHO1pwX8dx2o6HWpEuM7GL8sTHIKWa/PZhm2ev7HFHdgmhtjss46qcKIeB7SEwEpj+mkcegn3gqIVlFbv1cKUmOaqAsaTxuH4O/6W51d7n+GbEmyF4+G2sOGx11qPuZNrmsIlWHj+qYGHNVL0TVdXM4vBc8kzeSR+jFeC1J/8lgl8KX88IvwF7kUb83TZr/LYjTQvtBFZhLY+7Wg2iEJXxFHYDbWpTTX6c3B2N32JysU7stOhZWCm+CpEemUVYIqJNSnJdXw116s4AYcXMyRhMsJwnzHFD174hvV+9bDEVPj4N92V1w4UkqFAp5YOvFL68oL0QLarQaCUOvJGL6xdswPm8BY4odk23JIBh9ctSTcB0rXbnKHoeccAdP6j5z7E20/EHqKwhS5YfFOt8s7GkylnCoo6kmR2m70sbRCrZzzC8QU7uJRLF7RsZ2ZgIEAxZob87FYZlsoNsi7UNljMA/rIOGQ/BT6TAKd1Tw236XpAmXIZ1pnEKNDCr2m3Ats7sOasFaiOnWObz5wwm1naPGDIYnlaFuBvJlEBN5CL8FLZyoouk5Prwx9HUSlY5+P1DJ","nonce":"n0nce0f12byt"},"expire_time":"2126-12-01T00:00:00+08:00","serial_no":"7F6E5D4C3B2A19080706050403020100AABBCCDD"}]}';
const WX_B_CERTIFICATES_SIGNATURE =
  "Rs97dVATZCZfgZ/2LIb/3sSzHM1kpHmqSd72tpNU608fUqcjQAiTpSAJ/Ior0C2zh4wJIbsF3SqDwKH+oYAGhDvYUmZ0spV2ZaXxpHsei/U+Jg2NACyBe6rmi2MIUsM3ymaLtOXnnOeoarMGveeSE1Tg30rpQlECKhppFMiZtPaNjiPNA6NSGPgxt8ztKlUKTac3lV4cZvBWI/q6j57ofV0/CglBxMysp0P1bzUqNfu+GDhSsoWoWa0f6TfLOD29IUJgdTHn3H8TYeLQrgloVJDFFh2uPH39OptqONdLiZCcKKS4YM/jQDGxPYGWKlMOTtKQsWyzebRqNDnq9NUBSw==";

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

describe("WeChat Pay certificate mode in workerd", () => {
  it("fetches /v3/certificates for an unknown serial, decrypts and checks it, then verifies", async () => {
    const account = parseWechatPayAccounts({
      shop: {
        mchid: "1900000109",
        serialNo: "3775B6A45ACD588826D15E583A95F5DD4B3B4C2A",
        privateKey: KEY_PEM,
        apiV3Key: WX_API_V3_KEY,
        platformCertificates: [WX_CERT_A],
      },
    }).get("shop");
    if (!account) throw new Error("no account");
    const paths: string[] = [];
    const signedByB = (body: string, nonce: string, signature: string) =>
      new Response(body, {
        headers: {
          "wechatpay-serial": WX_SERIAL_B,
          "wechatpay-timestamp": String(WX_T),
          "wechatpay-nonce": nonce,
          "wechatpay-signature": signature,
        },
      });
    const wechat = (async (input: RequestInfo | URL) => {
      const path = new URL(String(input)).pathname;
      paths.push(path);
      if (path === "/v3/certificates")
        return signedByB(WX_B_CERTIFICATES, "nonce-certs", WX_B_CERTIFICATES_SIGNATURE);
      return signedByB(WX_B_QUERY, "nonce-query", WX_B_QUERY_SIGNATURE);
    }) as typeof fetch;
    const provider = wechatPayProvider(account, { fetch: wechat, clock: () => WX_T * 1000 });
    expect(await provider.query("order-1042")).toMatchObject({
      kind: "trade",
      outcome: "paid",
      amount: { total: 2500, currency: "CNY" },
    });
    expect(await provider.query("order-1042")).toMatchObject({ kind: "trade" });
    expect(paths).toEqual([
      "/v3/pay/transactions/out-trade-no/order-1042",
      "/v3/certificates",
      "/v3/pay/transactions/out-trade-no/order-1042",
    ]);
  });
});

describe("the Worker entry", () => {
  it("answers every route 500 misconfigured, its log line naming the account, when alipayCert does not chain", async () => {
    const bindings = {
      ...env,
      DQ_ALIPAY_ACCOUNTS: JSON.stringify({ shop: certMode(firstCertificate(ALIPAY_CERT)) }),
    };
    const spy = vi.spyOn(console, "error").mockImplementation(() => {});
    const logged = spy.mock.calls;
    onTestFinished(() => spy.mockRestore());
    for (const path of ["/health", "/v1/payments"]) {
      const ctx = createExecutionContext();
      const res = await worker.fetch(new Request(`http://delayq.test${path}`), bindings, ctx);
      await waitOnExecutionContext(ctx);
      expect(res.status).toBe(500);
      const text = await res.text();
      const body = JSON.parse(text) as { error: { code: string; requestId: string } };
      expect(body.error.code).toBe("misconfigured");
      expect(text).not.toContain("BEGIN");
      // What is wrong is in the log line of the answer's request id.
      const line = logged
        .map((args) => JSON.parse(String(args[0])) as Record<string, string>)
        .find((entry) => entry.requestId === body.error.requestId);
      expect(line?.message).toMatch(
        /^delayq is misconfigured: DQ_ALIPAY_ACCOUNTS: account "shop": "alipayCert" does not chain/,
      );
      expect(line?.message).not.toContain("BEGIN");
    }
  });
});
