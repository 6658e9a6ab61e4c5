// Payment watches over HTTP: start, read and stop a watch (bearer token), and the providers'
// asynchronous notifications (no token: their signature is the authentication).
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Dispatcher } from "../../dispatch/dispatcher";
import { clip } from "../../domain/errors";
import type { ProviderName } from "../../domain/payments";
import { Payment, ProviderField, WatchInput } from "../../domain/payments";
import type { Access } from "../../domain/scope";
import { type Logger, messageOf } from "../../log";
import { verifyAlipayNotification } from "../../payments/alipay";
import type { ProviderAnswer } from "../../payments/provider";
import type { RefundAnswer } from "../../payments/refund-provider";
import type { Refunds } from "../../payments/refunds";
import type { Payments } from "../../payments/watches";
import { verifyWechatPayEvent } from "../../payments/wechatpay-refunds";
import { cappedText, requestJson } from "../body";
import type { AppEnv } from "../context";
import { jsonBody } from "../json";
import { documentedRoute } from "../route";
import { body, errors, json, SECURED } from "../schemas";
import { ALIPAY_NOTIFY_ROUTE, WECHATPAY_NOTIFY_ROUTE } from "./notify-docs";
import { drainAfter } from "./push";

export type PaymentRouteOptions = {
  payments: Payments;
  /**
   * Refund watches: /v1/refunds, and WeChat Pay's refund notifications (at the same notify URL).
   * @default none: refund notifications are acknowledged and ignored
   */
  refunds?: Refunds;
  /** Drains what a start or a notification leads to (first polls, an outcome's pushes). */
  dispatcher: Dispatcher;
  alipayAccounts: ReadonlyMap<string, unknown>;
  wechatpayAccounts: ReadonlyMap<string, unknown>;
  log: Logger;
};

const PaymentAnswer = z
  .object({
    created: z
      .boolean()
      .meta({ description: "false when the order was watched already.", example: true }),
    payment: Payment,
  })
  .meta({ id: "PaymentAnswer" });

/** The path's provider and account, of a payment watch's or a refund watch's route. */
export const WatchAccountParams = {
  provider: ProviderField.meta({ param: { name: "provider", in: "path" } }),
  account: z
    .string()
    .min(1)
    .max(64)
    .meta({ param: { name: "account", in: "path" }, example: "shop" }),
};

const WatchParams = z.object({
  ...WatchAccountParams,
  outTradeNo: z
    .string()
    .min(1)
    .max(64)
    .meta({ param: { name: "outTradeNo", in: "path" }, example: "order-1042" }),
});

/** What the request's token may act on: its topics and payment accounts. */
export function accessOf(c: Context<AppEnv>): Access {
  return { scope: c.get("queue").scope, accounts: c.get("accounts"), tokenId: c.get("tokenId") };
}

/** POST/GET/DELETE /v1/payments: behind the bearer auth. */
export function paymentRoutes(app: OpenAPIHono<AppEnv>, options: PaymentRouteOptions): void {
  const tags = ["payments"];
  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/payments",
      operationId: "watchPayment",
      tags,
      security: SECURED,
      summary: "Watch an order at Alipay or WeChat Pay until it is paid, closed or failed",
      description:
        "delayq queries the provider on the schedule (signed requests, verified answers) until " +
        "an outcome or the deadline, and adds the outcome as a job to each notify topic, once. " +
        "Idempotent by (provider, account, outTradeNo): a second call answers the watch as it is.",
      request: { body: body(WatchInput, true) },
      responses: {
        201: json(PaymentAnswer, "Watching"),
        200: json(PaymentAnswer, "The order was watched already: the watch as it is"),
        ...errors(403, 409, 413, 429),
      },
    }),
    async (c) => {
      const input = requestJson(c, c.req.valid("json"));
      const { work, ...result } = await options.payments.start(c.get("run"), input, accessOf(c));
      // The polls due within seconds go out from this request, after its answer.
      drainAfter(c, options.dispatcher, work);
      return result.created ? jsonBody(c, result, 201) : jsonBody(c, result, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/payments/{provider}/{account}/{outTradeNo}",
      operationId: "getPayment",
      tags,
      security: SECURED,
      summary: "A payment watch: its state, polls, last answer and outcome",
      request: { params: WatchParams },
      responses: {
        200: json(z.object({ payment: Payment }), "The watch"),
        ...errors(404),
      },
    }),
    async (c) => {
      const payment = await options.payments.get(c.req.valid("param"), accessOf(c));
      return jsonBody(c, { payment }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "delete",
      path: "/v1/payments/{provider}/{account}/{outTradeNo}",
      operationId: "stopPayment",
      tags,
      security: SECURED,
      summary: "Stop watching an order (it reads stopped while it is retained)",
      request: { params: WatchParams },
      responses: {
        200: json(
          z.object({ deleted: z.literal(true).meta({ description: "Stopped.", example: true }) }),
          "Stopped",
        ),
        ...errors(404),
      },
    }),
    async (c) => {
      await options.payments.stop(c.req.valid("param"), accessOf(c));
      return c.json({ deleted: true as const }, 200);
    },
  );
}

/**
 * The most of a provider's notification read (they are a few KiB): these routes have no token, so
 * anyone may send them anything.
 */
export const MAX_NOTIFICATION_BYTES = 64 * 1024;

/** WeChat Pay's answer to every notification refused: unknown account, signature, time, form. */
const WECHATPAY_REFUSED = { code: "FAIL", message: "the notification does not verify" } as const;

/** The notification endpoints: register before the bearer auth (they have no token). */
export function notifyRoutes(app: OpenAPIHono<AppEnv>, options: PaymentRouteOptions): void {
  const { payments, log } = options;
  const notified = async (
    c: Context<AppEnv>,
    provider: ProviderName,
    account: string,
    outTradeNo: string,
    answer: ProviderAnswer & { kind: "trade" },
    notifyId: string | undefined,
  ) => {
    try {
      const order = { provider, account, outTradeNo };
      const { work, how } = await payments.notified(c.get("run"), order, answer, notifyId);
      // Taken before (a resend): acknowledged again, and nothing else.
      if (how === "duplicate") log({ level: "info", event: "notify_duplicate", provider, account });
      // The outcome's pushes go out after the answer: the providers want one within seconds.
      drainAfter(c, options.dispatcher, work);
      return true;
    } catch (error) {
      log({ level: "error", event: "notify_failed", provider, account, message: messageOf(error) });
      return false;
    }
  };

  /** A verified refund notification: settles its refund watch, as `notified` a payment's. */
  const refunded = async (
    c: Context<AppEnv>,
    account: string,
    outRefundNo: string,
    answer: RefundAnswer & { kind: "refund" },
    notifyId: string | undefined,
  ) => {
    const provider = "wechatpay";
    if (!options.refunds) return true; // no refund watches here: nobody watches it
    try {
      const refund = { provider, account, outRefundNo } as const;
      const { work, how } = await options.refunds.notified(c.get("run"), refund, answer, notifyId);
      if (how === "duplicate") log({ level: "info", event: "notify_duplicate", provider, account });
      drainAfter(c, options.dispatcher, work);
      return true;
    } catch (error) {
      log({ level: "error", event: "notify_failed", provider, account, message: messageOf(error) });
      return false;
    }
  };

  /** Why a notification was refused goes to the log only (the answer is always the same). */
  const refusedLog = (provider: ProviderName, account: string, reason: string) =>
    log({ level: "warn", event: "notify_refused", provider, account: clip(account), reason });

  app.openAPIRegistry.registerPath(ALIPAY_NOTIFY_ROUTE);
  app.post("/v1/notify/alipay/:account", async (c) => {
    const name = c.req.param("account");
    const account = options.alipayAccounts.get(name) as
      | Parameters<typeof verifyAlipayNotification>[0]
      | undefined;
    const text = await cappedText(c.req.raw, MAX_NOTIFICATION_BYTES);
    // Alipay reads the text "success"; anything else makes it send again later. An account that
    // does not exist is answered as a notification that does not verify, so that nobody learns
    // account names here (the log tells them apart).
    const result = account
      ? await verifyAlipayNotification(account, new URLSearchParams(text), c.get("run").clock())
      : ({ ok: false, reason: "no Alipay account of that name" } as const);
    if (!result.ok) {
      refusedLog("alipay", name, result.reason);
      return c.text("fail", 400);
    }
    const taken = await notified(
      c,
      "alipay",
      name,
      result.outTradeNo,
      result.answer,
      result.notifyId,
    );
    return taken ? c.text("success") : c.text("fail", 503);
  });

  app.openAPIRegistry.registerPath(WECHATPAY_NOTIFY_ROUTE);
  app.post("/v1/notify/wechatpay/:account", async (c) => {
    const name = c.req.param("account");
    const account = options.wechatpayAccounts.get(name) as
      | Parameters<typeof verifyWechatPayEvent>[0]
      | undefined;
    const raw = await cappedText(c.req.raw, MAX_NOTIFICATION_BYTES);
    const now = c.get("run").clock();
    // A transaction's notification, or a refund's (REFUND.*): both come to this URL. As for
    // Alipay, an unknown account reads as a notification that does not verify, and every refusal
    // answers the same bytes: why is in the log.
    const result = account
      ? await verifyWechatPayEvent(account, c.req.raw.headers, raw, now)
      : ({ ok: false, reason: "no WeChat Pay account of that name" } as const);
    if (!result.ok) {
      refusedLog("wechatpay", name, result.reason);
      return c.json(WECHATPAY_REFUSED, 401);
    }
    const taken =
      result.kind === "refund"
        ? await refunded(c, name, result.outRefundNo, result.answer, result.notifyId)
        : await notified(c, "wechatpay", name, result.outTradeNo, result.answer, result.notifyId);
    return taken ? c.body(null, 204) : c.json({ code: "FAIL", message: "try again" }, 503);
  });
}
