// Payment crypto inside workerd: WebCrypto there must give node:crypto's signatures byte for byte.
// Every expected value below was made once with node:crypto and the openssl CLI (Node 20, OpenSSL
// 3.0) and pasted here as golden vectors; nothing here is computed by the code under test.
import { describe, expect, it } from "vitest";
import { parseAlipayAccounts, parseWechatPayAccounts } from "../../src/payments/accounts";
import { alipayProvider, beijingTimestamp } from "../../src/payments/alipay";
import {
  aesGcmDecrypt,
  importPrivateKey,
  importPublicKey,
  signRsaSha256,
  verifyRsaSha256,
} from "../../src/payments/crypto";
import { certificates } from "../../src/payments/keys";
import { verifyWechatPayNotification, wechatPayProvider } from "../../src/payments/wechatpay";

/** A 2048-bit test key (node:crypto generateKeyPairSync), PKCS#8; used for nothing else. */
const PKCS8_PEM = `-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCVCin+Zovkmmx9
kfRJq1dA9oRna8CX1HSGhqdSNnjuYKylUmZKi4N8bh4z2uiCC2xMBwBs/1k+G0Xi
ht/UjuSCKdCeYQ1QTK+z5JJOo3ZHMaQNkHHNS/mIxNE0MeeNiA95Lzbt3Qx11CYj
PvjYTRXO5/xd6wlPn/r5cN5BuLcLjjAq7n5FdBqB4/8pjjsShN8DJCaqJQLIlb6w
LWGmotJuMiWe5H03xT5X2dyO3w6JFa3BMoQDoojoWi2AKu/G7AfuUafPG7d1VJVi
uAgpS+kTyk8eHW06piZY9Psy31jn18biYeLwHycDJDLRoGIPSK4mp8vVrWNbXC+A
v3v5iXgBAgMBAAECggEABStKE5G47l/QvXYvc9KmfxFNvEyHbHyo4fWPnhFXlmTx
9/XoqFM4ZztmfsPr5n7A7c4cXKtqi/XkMZwd7UBbeow6uROCo7NVMLcPv/x5YLS/
DN1ipQ0qhWzWGKpWbpk2eCyECjHtebS28egAN3hM9lUjcppxQzq4OKiKfNsMNjFV
s0Gm3F9do0tUPqANpFxPDlO3vD7iJGAceDxGOFX0vCUM0KsTny42/kipH3CDqeJG
S4+sOvx7A20JF25C6DTTqd9eSSROEDQxwb7Sp/sKM/dNAr9Hw4mJq27EGVAh+mHC
B0AJGsLO5Bf9q7K7Uyrk3a9ukxQezD0GgzO6J5PXhQKBgQDRb90bm1tkpg8mKwaw
aPd+2O/+DR/I5Qo1qshnFlBj54YeRpglWmyuOCqxlMqpCjksAhz55tPY/iEicEkN
81lbdydPjr0w8SzRFdIbWqABn6VqjV8f9v22TGFGXK4xjZekihybH2G7M8e5KzNG
xyFxevqWep3UewLpf+3RUtrvHwKBgQC2LMfwkjG2WPaTK8WRmToZBqOm3yzTtR1K
lkLNOB2aGeYmAtOwBa9EC3NRQjOVF3op6o/DQKe37ATzlU4UAVRLE9NEQlR6hUCp
Y7IvKpvj9ivEAs0cZ6oakacErhImDkHj1hE1B5lOppqPFYsQB9GjGHCy4HHlG5wz
npTrtwNU3wKBgCSRhqbSWoPZZt3AN3vH6Cby0/yk5/7Y1w6F0lYFlGXNQCK7Ksei
4UUOM44sL7KSQWdIuyx7PFQwEzMDLg5MhjatOGTwxGHuSmf7imMSUMvXxzcylgBr
zOLutTFm71dhpK+rGdGQCi14ng/b1ikujc1VrrllkXdPPzPsDWc2M1n7AoGASjxB
VYUdgOMLx7kkj0pTZHNSKOP0zmiVgRluK1Zcqbk4EfFA9g+69g18dnZ1sqGYhJAy
+SvVrJsfAWusH3bTNKzlgIFPD4ZRbTVVHOdOEzzzZLKHhrWvmZgU6VFNz/grXX6U
EHoCPQyjGv96ZZPqF34UHrBbeTMhGd/ba5puXx0CgYEAuLV+YASHTFZsADcIos6l
yYewNMlAxiJy1qZdRZNAZGIygZItIgUniURVX/IZW610u9mjt56JVUgoIi99xaBd
M01tIr5gWZ8Yv7Ds/mPm+rAUznvvPnG+rVQWCg0hebTRWP2ni+OKdCu+zjsiZ8eE
tQlayxLxUXxs9yiG11BceFA=
-----END PRIVATE KEY-----
`;

/** The same key as node:crypto exports it in PKCS#1. */
const PKCS1_PEM = `-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAlQop/maL5JpsfZH0SatXQPaEZ2vAl9R0hoanUjZ47mCspVJm
SouDfG4eM9roggtsTAcAbP9ZPhtF4obf1I7kginQnmENUEyvs+SSTqN2RzGkDZBx
zUv5iMTRNDHnjYgPeS827d0MddQmIz742E0Vzuf8XesJT5/6+XDeQbi3C44wKu5+
RXQageP/KY47EoTfAyQmqiUCyJW+sC1hpqLSbjIlnuR9N8U+V9ncjt8OiRWtwTKE
A6KI6FotgCrvxuwH7lGnzxu3dVSVYrgIKUvpE8pPHh1tOqYmWPT7Mt9Y59fG4mHi
8B8nAyQy0aBiD0iuJqfL1a1jW1wvgL97+Yl4AQIDAQABAoIBAAUrShORuO5f0L12
L3PSpn8RTbxMh2x8qOH1j54RV5Zk8ff16KhTOGc7Zn7D6+Z+wO3OHFyraov15DGc
He1AW3qMOrkTgqOzVTC3D7/8eWC0vwzdYqUNKoVs1hiqVm6ZNngshAox7Xm0tvHo
ADd4TPZVI3KacUM6uDioinzbDDYxVbNBptxfXaNLVD6gDaRcTw5Tt7w+4iRgHHg8
RjhV9LwlDNCrE58uNv5IqR9wg6niRkuPrDr8ewNtCRduQug006nfXkkkThA0McG+
0qf7CjP3TQK/R8OJiatuxBlQIfphwgdACRrCzuQX/auyu1Mq5N2vbpMUHsw9BoMz
uieT14UCgYEA0W/dG5tbZKYPJisGsGj3ftjv/g0fyOUKNarIZxZQY+eGHkaYJVps
rjgqsZTKqQo5LAIc+ebT2P4hInBJDfNZW3cnT469MPEs0RXSG1qgAZ+lao1fH/b9
tkxhRlyuMY2XpIocmx9huzPHuSszRschcXr6lnqd1HsC6X/t0VLa7x8CgYEAtizH
8JIxtlj2kyvFkZk6GQajpt8s07UdSpZCzTgdmhnmJgLTsAWvRAtzUUIzlRd6KeqP
w0Cnt+wE85VOFAFUSxPTREJUeoVAqWOyLyqb4/YrxALNHGeqGpGnBK4SJg5B49YR
NQeZTqaajxWLEAfRoxhwsuBx5RucM56U67cDVN8CgYAkkYam0lqD2WbdwDd7x+gm
8tP8pOf+2NcOhdJWBZRlzUAiuyrHouFFDjOOLC+ykkFnSLssezxUMBMzAy4OTIY2
rThk8MRh7kpn+4pjElDL18c3MpYAa8zi7rUxZu9XYaSvqxnRkAoteJ4P29YpLo3N
Va65ZZF3Tz8z7A1nNjNZ+wKBgEo8QVWFHYDjC8e5JI9KU2RzUijj9M5olYEZbitW
XKm5OBHxQPYPuvYNfHZ2dbKhmISQMvkr1aybHwFrrB920zSs5YCBTw+GUW01VRzn
ThM882Syh4a1r5mYFOlRTc/4K11+lBB6Aj0Moxr/emWT6hd+FB6wW3kzIRnf22ua
bl8dAoGBALi1fmAEh0xWbAA3CKLOpcmHsDTJQMYictamXUWTQGRiMoGSLSIFJ4lE
VV/yGVutdLvZo7eeiVVIKCIvfcWgXTNNbSK+YFmfGL+w7P5j5vqwFM577z5xvq1U
FgoNIXm00Vj9p4vjinQrvs47ImfHhLUJWssS8VF8bPcohtdQXHhQ
-----END RSA PRIVATE KEY-----
`;

const SPKI_PEM = `-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAlQop/maL5JpsfZH0SatX
QPaEZ2vAl9R0hoanUjZ47mCspVJmSouDfG4eM9roggtsTAcAbP9ZPhtF4obf1I7k
ginQnmENUEyvs+SSTqN2RzGkDZBxzUv5iMTRNDHnjYgPeS827d0MddQmIz742E0V
zuf8XesJT5/6+XDeQbi3C44wKu5+RXQageP/KY47EoTfAyQmqiUCyJW+sC1hpqLS
bjIlnuR9N8U+V9ncjt8OiRWtwTKEA6KI6FotgCrvxuwH7lGnzxu3dVSVYrgIKUvp
E8pPHh1tOqYmWPT7Mt9Y59fG4mHi8B8nAyQy0aBiD0iuJqfL1a1jW1wvgL97+Yl4
AQIDAQAB
-----END PUBLIC KEY-----
`;

const RSA_PUBLIC_KEY_PEM = `-----BEGIN RSA PUBLIC KEY-----
MIIBCgKCAQEAlQop/maL5JpsfZH0SatXQPaEZ2vAl9R0hoanUjZ47mCspVJmSouD
fG4eM9roggtsTAcAbP9ZPhtF4obf1I7kginQnmENUEyvs+SSTqN2RzGkDZBxzUv5
iMTRNDHnjYgPeS827d0MddQmIz742E0Vzuf8XesJT5/6+XDeQbi3C44wKu5+RXQa
geP/KY47EoTfAyQmqiUCyJW+sC1hpqLSbjIlnuR9N8U+V9ncjt8OiRWtwTKEA6KI
6FotgCrvxuwH7lGnzxu3dVSVYrgIKUvpE8pPHh1tOqYmWPT7Mt9Y59fG4mHi8B8n
AyQy0aBiD0iuJqfL1a1jW1wvgL97+Yl4AQIDAQAB
-----END RSA PUBLIC KEY-----
`;

/** openssl req -x509 -set_serial 0x8F0E2B7C6D5A4B3C2D1E0F -days 36500 (a separate key). */
const CERT_PEM = `-----BEGIN CERTIFICATE-----
MIIDDTCCAfWgAwIBAgIMAI8OK3xtWks8LR4PMA0GCSqGSIb3DQEBCwUAMBkxFzAV
BgNVBAMMDldlQ2hhdFBheSBUZXN0MCAXDTI2MTIwNjA3NDQzOFoYDzIxMjYxMTEy
MDc0NDM4WjAZMRcwFQYDVQQDDA5XZUNoYXRQYXkgVGVzdDCCASIwDQYJKoZIhvcN
AQEBBQADggEPADCCAQoCggEBAOOcLPxxXLG9fCpJ0oLg+4/UklV0v0BShPbeJ8QN
lFdiy2ERg9LWCAQYvXrGVGqVDlRLacwWtA6fwdGvPzsCB9pohQyBRbeM4D3ITxJK
CchPk8lZmsRIa2fND81IRIupJtvQ2NfjUoHw7ihwJWtfrt4TGVpTAj4Gwa2sgmaZ
fVxu7sMueNhLtsK9AlKEZfZyl07Ty9bphuJuiTDdiUXyeywDK1caqF/mWEctOjrY
ODbfZtB8dSqudx68Xkbc2n1tCbcRAv/BMF0bx6++/ryL4CmAfonlXnFdI3keaQCa
vgjZMyfJvJZw3+Jazjsy13BTmWfp9l8fL36vHp6hM4ck1fkCAwEAAaNTMFEwHQYD
VR0OBBYEFPFbWmAAJ4Fmbh4lWRLv+FkcC6VRMB8GA1UdIwQYMBaAFPFbWmAAJ4Fm
bh4lWRLv+FkcC6VRMA8GA1UdEwEB/wQFMAMBAf8wDQYJKoZIhvcNAQELBQADggEB
ALaGLLMMSrIyYxu1G60huciUkNYYU+M23SRaI75b2GAxky7fSSqlzw6k+4IQl712
zd3zepwcVaEjvEgwLfZi+/GX4jQceK93iojT5f9UDzd1FgGn67XHGuwL6h1I2vjd
Qd5Cw2tD3JhIiuTWGt5UnxNqPFWQnhZYP4qTQ+9fHb69f9sc4wI01SKuwE76WJ0f
QhVmu2BMBnFoi91WgEZCAbAxycKCN8kt/6bWzC9g9rucVqglOBfkBNxlVnAlXvNH
yCey444L2wFwK351ih5fKvkaGJKk2rsRTFlBAsuJELKbwr/HcGn54fwkALYZhhfN
SwWfrez6ua5tlFPOWUsSM/A=
-----END CERTIFICATE-----
`;
/** The certificate's serial as node:crypto's X509Certificate reads it. */
const CERT_SERIAL = "8F0E2B7C6D5A4B3C2D1E0F";

const bare = (pem: string) => pem.replace(/-----[A-Z ]+-----|\s/g, "");

const TEXTS = [
  'app_id=2021000000000001&biz_content={"out_trade_no":"order-1042"}&charset=utf-8',
  "订单 №1042 ✓ — 支付宝 / 微信支付 😀",
  "",
];
/** createSign("RSA-SHA256").update(text, "utf8").sign(PKCS8_PEM, "base64") for each text. */
const NODE_SIGNATURES = [
  "RWeWvxK/6YwU5S4/nHq0NeAN1SF/rZzY7YdG9q4tCh3m9u2GzgBCJyh0YKnYGPsAISLQtnyhP2rK61q7uezzh843cGpG2Cm30Nm/ytG7QZe44arEbxVbJ1kEyJbUcCNeW2Gw4RYMpfFilPILRehx8cPE0NdGWECPp5n75jMmmcnXvnzw8zw3gORG21G+wJuT5CTWTDgYN1ImKHzDHjbjX3BTOcYLurnODgP0YvP6Kg6ikbwVVOBouZ4wno+Kz4s/YwPMsbSH6NNYZNB+QwrTQ9JbOhwfeYbozG4k1r/0dhd0PhAm+kaK0FtkB0AbbMuEFzTRbio3RgPR0tuiWOo1aA==",
  "bc80k1IMhFoc6OF6AsDsKdM4gWBbkVlcwsTxPR3Hy36uqiC1IDTha+14S38nyjxjmZViI6FWgtdl4oNEEoa95fKQUEDeLhVBMGdGd+Idioi6nGH0iNXM+OdN0Vj5oLrq5KMDmPic/CStVawjRS3pf8E0/FzLnzztkIGncX6wRsp5waxeD8tmzuKZVLlqrvwrmp1Q+Qc3CxlJ6Xx0lXlYZz5vp1qc4OnEIP2KYJ+umDbrrXQttoh+3l3Qd9M19xq0ejDGfldCNHGGiHMGPRUpTFm45GNc3UU+Ge5jB55/MnKq2dAdEE4o9F8CYC83YU7FUSGAZsEcc/NWWQ3/Uq9Srg==",
  "MevVDlMxTRcmlX1zjTiKknZIL4+436f7SrLGUQe2yeKZhT4qc9Z4hyNiQM/LYoK6hsSE+I2/np9DPQC0rJSRAMbzABj33dZSeIKVD8uADo4Fp//1d4xaQARoZlmA+K8p1WwtxhpCaqUvYmbcT64MbVhG0jL7FS6GIGflEGZQY2sWo6gWMNBvaAgnFDF0ixp5x3pP0WOWJy6OF6UvdUpJqX56Q9VS9js5JPTbUGzzwrUlRtrirAIiiHdy8peiYiOyOoUYyu5n47GFCzFAKtTvZZKs8MH7FBp7VnqGNfQ7/LBOMnTEfQOpmULeLWT7sWtKhFNO6swcfa5rKaeULNdFFQ==",
];
/** The certificate's key's node:crypto signature of TEXTS[1]. */
const CERT_SIGNATURE =
  "mEOVssrHQZ05jigj3x24RyG4L0QmlwUgN0gMW2YeWJSb4ruYgJ1WWuE7n/7Ueh+3xfPkGQIezkjOviaC+VfPT35iVqFmLP0gxQGmyektQ2fmzBkqKFxhSI6QDUX2xgOqb8Opi3ee7NnGjB+INL74z8UJI2xBYOS0YuNIl/6I9MMwBYMQ4/CgPOQWiUkWroZSONOXEornXza2aZueM2OO49wOLAbjMXd5Q+nq0xQrWEVI7eA6+Pv+vrMzGtTHKgwSFIOTiuW8efY+HZy0174FlRsRKb0qak73//sT4gEen0R/y9KxAuOn8j2kI/VaN3HXLSae2MDwLbPJjVpBBjmIDA==";

const API_V3_KEY = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb";
const GCM_NONCE = "5K8264ILTKCH";
const GCM_PLAIN =
  '{"mchid":"1900000109","out_trade_no":"order-1042","transaction_id":"4200000001","trade_state":"SUCCESS","success_time":"2025-01-01T10:03:04+08:00","amount":{"total":100,"currency":"CNY"}}';
/** createCipheriv("aes-256-gcm", key, nonce) with aad "transaction": base64(ciphertext‖tag). */
const GCM_CIPHERTEXT =
  "WGYQSp5Uc1kdc1Z0Y6f+DmPgRiIqic6qMPEznsbyUZNPfvaUwyHpllkatgoozuSGK8vp2DkKDIXTA6kyQieMEFImEa8EWkzFolLSJ0REMGIuJRlOxAYp7N/4nFKgyp4xxsVXVMRfpzOt1ANLH+ob/W06CLitn+159J851E3aaWFwkdjyqpp5Ho83jX0Q8a58bRls1A6snqx9B1yZifQ13HZmCJoxFB1XzVOqeMJDD7Mw5mpFus4O3hfaIguPTPzQg/Syx6ks+On5c2U=";

/** A classic alipay.trade.query answer signed over the raw object by PKCS8_PEM, `\/` and all. */
const ALIPAY_ANSWER =
  '{"alipay_trade_query_response":{"code":"10000","msg":"Success","out_trade_no":"order-1042","trade_no":"2025010122001","trade_status":"TRADE_SUCCESS","total_amount":"19.99","send_pay_date":"2025-01-01 00:00:07","qr_code":"https:\\/\\/qr.alipay.com\\/bax"},"sign":"Rg5hj87PPlktFDXJ+8AR7fjzFDRScSvM0HiL37pRxYmJb6hG/HpnEBorexdbX622+wsggvr7iLabxarVtsDmJdyzYTzDGKU8jN7bUPHn6kaZ/l0nSmF5SLVDsvpD4ZBO2DM+aPJW24BdF/3gXdQJS0ii/0cE1bttWdF/CHy3gbsr+yievCpMWKxa9epYOz2JiehoTMUZ1RQHv2+uutRCMyny/aqNPCj9rc+wwgGchdBxL0C7w1YZeTMFxHIQtNc5DRBJ/2OrCJDdfZnuaUFQYoMqxiOLBPUsTNjNaeWVVnnGsy850X2E3eb8VDvRDf+MimwWvvqNFXvyUfUYAKhA9g==","alipay_cert_sn":"5d1a"}';

/**
 * WeChat Pay answers signed by the certificate's key at WX_TIME (s) with WX_NONCE; WX_TIME falls
 * within the certificate's validity (a platform certificate is used only while valid).
 */
const WX_TIME = 1796543078;
const WX_NONCE = "593BEC0C930BF1AFEB40B4A08C8FB242";
const WX_QUERY_BODY =
  '{"mchid":"1900000109","out_trade_no":"order-1042","transaction_id":"4200000001","trade_state":"SUCCESS","success_time":"2025-01-01T10:03:04+08:00","amount":{"total":1999,"currency":"CNY"}}';
const WX_QUERY_SIGNATURE =
  "SqdAsFZ2t6VIJJyfHy06Ol153NDCNqXx7M6oBbqNeBXSMosVc65Qe3/c7xS93cIAchOYuLuvolk9MNLF7NiAMA2RE1K7Y6jmnEg84ApqpoTWYCuafSVcvrk5H6ncSIn1yponiPuXF/ez4ZNhvQZYEMUIhWkbxZXVI0bJbbrdxzJiEMSDq8gplYU43l49OPMt8ixqc94KkizkjDLwbLJwyGtYwOy9vlxIKbL8XYgHzmC0aF8wKXWOUF1AnzVA/hIS9SKxxFVWY1lL1liS6nPSz0kHEl2xQgGrmJij+dQU9P63F4cGBDBb4pbR39AJtLRFK/NaLSypzk3Qdr9brH975A==";
const WX_CLOSE_SIGNATURE =
  "R+lQeuNyBC3Jnm09mvQjgb3ts9A8fV6wAFQX3EhpOWwEO1Ey5fb5XhSL/1RiP3RZoERMZP8JzeTZIeficTWdfJYnX26+cYSiNEFpDk0UlL+IPyooc3bblHLrNAw5ZHkwZgwv11haljinVU4EH1rK6IrYLoFsPQK1CpQ9OAE/8UmnHNac3h0z/FW/NbA9TK4rGZ1jlbMnQE9qG1QFOvsorpyIwwPVJjr3GUMVEVBrxInu5QAiXvYANY2qdg7jyKJbpI7GX6lOOK8onS3KwnFyF9TjB1bgSF1SxqmismjwYoTLvprvfq18KtCAuPFYwDahlvLPlCMK6QpShH/nCUQfnw==";
const WX_NOTIFY_BODY =
  '{"id":"EV-1","event_type":"TRANSACTION.SUCCESS","resource_type":"encrypt-resource","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"WGYQSp5Uc1kdc1Z0Y6f+DmPgRiIqic6qMPEznsbyUZNPfvaUwyHpllkatgoozuSGK8vp2DkKDIXTA6kyQieMEFImEa8EWkzFolLSJ0REMGIuJRlOxAYp7N/4nFKgyp4xxsVXVMRfpzOt1ANLH+ob/W06CLitn+159J851E3aaWFwkdjyqpp5Ho83jX0Q8a58bRls1A6snqx9B1yZifQ13HZmCJoxFB1XzVOqeMJDD7Mw5mpFus4O3hfaIguPTPzQg/Syx6ks+On5c2U=","associated_data":"transaction","nonce":"5K8264ILTKCH","original_type":"transaction"}}';
const WX_NOTIFY_SIGNATURE =
  "YZf1HvBSrNnFYvg4dj0o5Q3vUz0lNioUkvr9FWjsD3avP6O9UkQchAdgtcsrKHWToo6ZgHNVrxSqblmQ912h0fIunekue/EKBFdilmQL7VgwSsfarzFX/X8u+tobUSLSCFv6CwBZE3EMXODtYeVwiPayZ4a5/ivMw7fl2+CUvCKDH/YUP+GQLgeYNOmRF0XRE7LeUHKFlCimv7gH8OWhOUsbJ82CIc+k74IMqoTB5c+LNpgRPN6TjNmwL+t30bQ67ThWtbyOW7BH55goynH/s9Qj8Fe6a5os8k1Oq4QVKFzrw6Ct3jhObSySwI2VyaDbF9VEGXwDR6ChAgyPU3LqCQ==";

describe("RSA signatures in workerd equal node:crypto's", () => {
  const spellings: [string, string][] = [
    ["PKCS#8 PEM", PKCS8_PEM],
    ["PKCS#8 bare base64", bare(PKCS8_PEM)],
    ["PKCS#1 PEM", PKCS1_PEM],
    ["PKCS#1 bare base64", bare(PKCS1_PEM)],
  ];
  for (const [name, text] of spellings) {
    it(`signs with a ${name} key`, async () => {
      const key = await importPrivateKey(text);
      for (const [i, message] of TEXTS.entries()) {
        expect(await signRsaSha256(key, message)).toBe(NODE_SIGNATURES[i]);
      }
    });
  }

  it("verifies node:crypto signatures with SPKI, RSA PUBLIC KEY and certificate keys", async () => {
    for (const text of [SPKI_PEM, bare(SPKI_PEM), RSA_PUBLIC_KEY_PEM, bare(RSA_PUBLIC_KEY_PEM)]) {
      const key = await importPublicKey(text);
      for (const [i, message] of TEXTS.entries()) {
        expect(await verifyRsaSha256(key, message, NODE_SIGNATURES[i] ?? "")).toBe(true);
        expect(await verifyRsaSha256(key, `${message}x`, NODE_SIGNATURES[i] ?? "")).toBe(false);
      }
    }
    const certKey = await importPublicKey(CERT_PEM);
    expect(await verifyRsaSha256(certKey, TEXTS[1] ?? "", CERT_SIGNATURE)).toBe(true);
    expect(await verifyRsaSha256(certKey, TEXTS[1] ?? "", NODE_SIGNATURES[1] ?? "")).toBe(false);
  });

  it("reads the certificate's serial as node:crypto does", () => {
    expect(certificates(CERT_PEM).map((c) => c.serial)).toEqual([CERT_SERIAL]);
  });
});

describe("AES-256-GCM in workerd", () => {
  it("decrypts node:crypto's ciphertext and refuses another aad", async () => {
    expect(await aesGcmDecrypt(API_V3_KEY, GCM_NONCE, "transaction", GCM_CIPHERTEXT)).toBe(
      GCM_PLAIN,
    );
    await expect(
      aesGcmDecrypt(API_V3_KEY, GCM_NONCE, "certificate", GCM_CIPHERTEXT),
    ).rejects.toMatchObject({
      code: "decrypt_failed",
    });
  });
});

describe("providers in workerd, on golden answers", () => {
  it("formats Beijing time in a runtime that runs in UTC", () => {
    expect(new Date(0).getTimezoneOffset()).toBe(0);
    expect(beijingTimestamp(Date.parse("2024-12-31T16:00:00Z"))).toBe("2025-01-01 00:00:00");
  });

  it("Alipay classic: signs the request, verifies the raw answer text, maps it", async () => {
    const account = parseAlipayAccounts({
      shop: {
        appId: "2021000000000001",
        privateKey: bare(PKCS1_PEM),
        alipayPublicKey: bare(SPKI_PEM),
      },
    }).get("shop");
    if (!account) throw new Error("no account");
    const publicKey = await importPublicKey(SPKI_PEM);
    let requestVerified = false;
    const fetchStub = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(String(input));
      const params = Object.fromEntries(url.searchParams);
      for (const [k, v] of new URLSearchParams(String(init?.body))) params[k] = v;
      const content = Object.keys(params)
        .filter((k) => k !== "sign")
        .sort()
        .map((k) => `${k}=${params[k]}`)
        .join("&");
      requestVerified = await verifyRsaSha256(publicKey, content, params.sign ?? "");
      return new Response(ALIPAY_ANSWER);
    }) as typeof fetch;
    const answer = await alipayProvider(account, { fetch: fetchStub }).query("order-1042");
    expect(requestVerified).toBe(true);
    expect(answer).toEqual({
      kind: "trade",
      outcome: "paid",
      tradeState: "TRADE_SUCCESS",
      tradeNo: "2025010122001",
      amount: { total: 1999, currency: "CNY" },
      paidAt: Date.parse("2024-12-31T16:00:07Z"),
    });
    const tampered = (async () =>
      new Response(ALIPAY_ANSWER.replace("19.99", "1.99"))) as typeof fetch;
    expect(await alipayProvider(account, { fetch: tampered }).query("order-1042")).toMatchObject({
      kind: "transient",
    });
  });

  it("WeChat Pay (certificate mode): verifies answers, the empty 204, and a notification", async () => {
    const account = parseWechatPayAccounts({
      shop: {
        mchid: "1900000109",
        serialNo: "3775B6A45ACD588826D15E583A95F5DD4B3B4C2A",
        privateKey: PKCS8_PEM,
        apiV3Key: API_V3_KEY,
        platformCertificates: [CERT_PEM],
      },
    }).get("shop");
    if (!account) throw new Error("no account");
    const signed = (body: string, signature: string, status = 200) =>
      (async () =>
        new Response(status === 204 ? null : body, {
          status,
          headers: {
            "wechatpay-serial": CERT_SERIAL,
            "wechatpay-timestamp": String(WX_TIME),
            "wechatpay-nonce": WX_NONCE,
            "wechatpay-signature": signature,
          },
        })) as typeof fetch;
    const clock = () => WX_TIME * 1000 + 2_000;
    const query = wechatPayProvider(account, {
      fetch: signed(WX_QUERY_BODY, WX_QUERY_SIGNATURE),
      clock,
    });
    expect(await query.query("order-1042")).toEqual({
      kind: "trade",
      outcome: "paid",
      tradeState: "SUCCESS",
      tradeNo: "4200000001",
      amount: { total: 1999, currency: "CNY" },
      paidAt: Date.parse("2025-01-01T02:03:04Z"),
    });
    const stale = wechatPayProvider(account, {
      fetch: signed(WX_QUERY_BODY, WX_QUERY_SIGNATURE),
      clock: () => (WX_TIME + 301) * 1000,
    });
    expect(await stale.query("order-1042")).toMatchObject({ kind: "transient" });
    const close = wechatPayProvider(account, { fetch: signed("", WX_CLOSE_SIGNATURE, 204), clock });
    expect(await close.close("order-1042")).toEqual({ kind: "closed" });
    const badClose = wechatPayProvider(account, {
      fetch: signed("", WX_QUERY_SIGNATURE, 204),
      clock,
    });
    expect(await badClose.close("order-1042")).toMatchObject({ kind: "transient" });

    const headers = new Headers({
      "wechatpay-serial": CERT_SERIAL,
      "wechatpay-timestamp": String(WX_TIME),
      "wechatpay-nonce": WX_NONCE,
      "wechatpay-signature": WX_NOTIFY_SIGNATURE,
    });
    expect(await verifyWechatPayNotification(account, headers, WX_NOTIFY_BODY, clock())).toEqual({
      ok: true,
      outTradeNo: "order-1042",
      answer: {
        kind: "trade",
        outcome: "paid",
        tradeState: "SUCCESS",
        tradeNo: "4200000001",
        amount: { total: 100, currency: "CNY" },
        paidAt: Date.parse("2025-01-01T02:03:04Z"),
      },
      notifyId: "EV-1",
    });
    headers.set("wechatpay-signature", `WECHATPAY/SIGNTEST/${WX_NOTIFY_SIGNATURE}`);
    expect(
      await verifyWechatPayNotification(account, headers, WX_NOTIFY_BODY, clock()),
    ).toMatchObject({
      ok: false,
    });
  });
});
