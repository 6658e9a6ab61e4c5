// The providers' notification routes as the OpenAPI document describes them. They are served by
// notifyRoutes (routes/payments.ts) from the raw body, which only the provider's signature
// validates, so these definitions document them and validate nothing.
import { createRoute, z } from "@hono/zod-openapi";
import { ErrorBody, json } from "../schemas";

const tags = ["notifications"];

const AccountParam = z.object({
  account: z.string().meta({
    param: { name: "account", in: "path" },
    description:
      "The account's name: a key of DQ_ALIPAY_ACCOUNTS or DQ_WECHATPAY_ACCOUNTS, as in the " +
      "notify URL the merchant's create-order call gave the provider.",
    example: "shop",
  }),
});

/** A plain-text answer, as Alipay reads it. */
const text = (answer: "success" | "fail", description: string) => ({
  content: {
    "text/plain": {
      schema: z.string().meta({ description: "The text Alipay reads.", example: answer }),
    },
  },
  description,
});

const TOO_LARGE = json(ErrorBody, "Body over 64 KiB (`payload_too_large`)");

export const ALIPAY_NOTIFY_ROUTE = createRoute({
  method: "post",
  path: "/v1/notify/alipay/{account}",
  operationId: "notifyAlipay",
  tags,
  summary: "Alipay's asynchronous notification of a trade (no token: Alipay's signature)",
  description:
    "Give `https://<delayq>/v1/notify/alipay/<account>` as `notify_url` in the merchant's " +
    "create-order call. The form's `sign` is verified with the account's Alipay public key (or " +
    "certificate); a verified notification of a watched order concludes its watch at once, as " +
    "a verified query would, and its outcome goes to the watch's notify topics. Alipay reads " +
    "the text `success`; anything else makes it send the notification again later.",
  request: {
    params: AccountParam,
    body: {
      content: {
        "application/x-www-form-urlencoded": {
          schema: z.record(z.string(), z.string()).meta({
            description:
              "Alipay's notification form, as Alipay signs it (`sign`, `sign_type`, " +
              "`out_trade_no`, `trade_status`, `total_amount`, …): read as sent.",
            example: {
              notify_time: "2026-11-20 10:00:05",
              notify_type: "trade_status_sync",
              notify_id: "ac05099524730693a8b330c5ecf72da978",
              app_id: "2021000000000001",
              charset: "utf-8",
              version: "1.0",
              sign_type: "RSA2",
              sign: "dBW4bHpC...",
              trade_no: "2026112022001400000000000001",
              out_trade_no: "order-1042",
              trade_status: "TRADE_SUCCESS",
              total_amount: "19.99",
            },
          }),
        },
      },
      required: true,
    },
  },
  responses: {
    200: text("success", "Taken: the watch is concluded, or the notification changes nothing"),
    400: text(
      "fail",
      "The signature or the form does not verify, or there is no Alipay account of that name: " +
        "the same answer for each, so that it tells no account names (logged as notify_refused)",
    ),
    413: TOO_LARGE,
    503: text("fail", "Not recorded (Redis did not answer): Alipay sends it again later"),
  },
});

const WechatAnswer = z
  .object({
    code: z.literal("FAIL").meta({ description: "Always FAIL: WeChat Pay sends it again later." }),
    message: z.string().meta({
      description:
        "Always the same text: why it was refused is in delayq's log (notify_refused), not here.",
      example: "the notification does not verify",
    }),
  })
  .meta({ id: "WechatPayNotifyRefusal" });

const WechatHeaders = z.object({
  "Wechatpay-Signature": z.string().meta({
    param: { name: "Wechatpay-Signature", in: "header" },
    description: "WeChat Pay's signature of `<timestamp>\\n<nonce>\\n<body>\\n`, base64.",
    example: "CtcbzwtQjN8rnOXItEBJ5aQFSnIXESeV28Pr2YEmf9wsDQ8Nx25ytW6FXBCAFdrr...",
  }),
  "Wechatpay-Timestamp": z.string().meta({
    param: { name: "Wechatpay-Timestamp", in: "header" },
    description: "When WeChat Pay signed it, unix seconds; refused more than 5 minutes off.",
    example: "1800000005",
  }),
  "Wechatpay-Nonce": z.string().meta({
    param: { name: "Wechatpay-Nonce", in: "header" },
    description: "The signature's nonce.",
    example: "fdasflkja484w",
  }),
  "Wechatpay-Serial": z.string().meta({
    param: { name: "Wechatpay-Serial", in: "header" },
    description: "Which WeChat Pay key signed it: the public key's ID or a certificate's serial.",
    example: "PUB_KEY_ID_0000000000000000000000000000000000",
  }),
});

export const WECHATPAY_NOTIFY_ROUTE = createRoute({
  method: "post",
  path: "/v1/notify/wechatpay/{account}",
  operationId: "notifyWechatpay",
  tags,
  summary:
    "WeChat Pay's notification of a transaction or a refund (no token: WeChat Pay's signature)",
  description:
    "Give `https://<delayq>/v1/notify/wechatpay/<account>` as `notify_url` in the merchant's " +
    "create-order and refund calls. The Wechatpay-* headers are verified against the raw body " +
    "with the account's WeChat Pay key, and `resource` is decrypted with its APIv3 key; a " +
    "verified notification of a watched order (TRANSACTION.*) or refund (REFUND.SUCCESS, " +
    "REFUND.ABNORMAL, REFUND.CLOSED) concludes its watch at once, and its outcome goes to the " +
    "watch's notify topics. WeChat Pay reads 204 (or 200) as taken and sends anything else " +
    "again later.",
  request: {
    params: AccountParam,
    headers: WechatHeaders,
    body: {
      content: {
        "application/json": {
          schema: z
            .object({
              id: z.string().meta({ description: "The notification's id." }),
              create_time: z.string().meta({ description: "When it was made, ISO-8601." }),
              event_type: z.string().meta({
                description: "What happened, e.g. `TRANSACTION.SUCCESS`, `REFUND.SUCCESS`.",
              }),
              resource_type: z.string().meta({ description: "`encrypt-resource`." }),
              summary: z.string().meta({ description: "WeChat Pay's summary, for people." }),
              resource: z
                .object({
                  algorithm: z.string().meta({ description: "`AEAD_AES_256_GCM`." }),
                  ciphertext: z.string().meta({
                    description: "The transaction, encrypted with the account's APIv3 key.",
                  }),
                  associated_data: z.string().meta({ description: "Authenticated with it." }),
                  nonce: z.string().meta({ description: "The encryption's nonce." }),
                  original_type: z.string().meta({ description: "`transaction`." }),
                })
                .meta({ description: "The encrypted transaction." }),
            })
            .meta({
              description: "WeChat Pay's notification, as WeChat Pay signs it (read raw).",
              example: {
                id: "EV-2018022511223320873",
                create_time: "2026-11-20T10:00:05+08:00",
                event_type: "TRANSACTION.SUCCESS",
                resource_type: "encrypt-resource",
                summary: "支付成功",
                resource: {
                  algorithm: "AEAD_AES_256_GCM",
                  ciphertext: "ZXhhbXBsZSBjaXBoZXJ0ZXh0...",
                  associated_data: "transaction",
                  nonce: "fdasflkja484",
                  original_type: "transaction",
                },
              },
            }),
        },
      },
      required: true,
    },
  },
  responses: {
    204: { description: "Taken: the watch is concluded, or the notification changes nothing" },
    401: json(
      WechatAnswer,
      "The signature, time or form does not verify, or there is no WeChat Pay account of that " +
        'name: always {"code":"FAIL","message":"the notification does not verify"}, so that it ' +
        "tells no account names (logged as notify_refused)",
    ),
    413: TOO_LARGE,
    503: json(WechatAnswer, "Not recorded (Redis did not answer): WeChat Pay sends it again"),
  },
});
