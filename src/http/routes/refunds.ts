// Refund watches over HTTP: start, read and stop a refund watch (bearer token). Their
// notifications (WeChat Pay's REFUND.*) arrive at the payment notify URL (routes/payments.ts).
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Dispatcher } from "../../dispatch/dispatcher";
import { Refund, RefundInput } from "../../domain/refunds";
import type { Refunds } from "../../payments/refunds";
import { requestJson } from "../body";
import type { AppEnv } from "../context";
import { jsonBody } from "../json";
import { documentedRoute } from "../route";
import { body, errors, json, SECURED } from "../schemas";
import { accessOf, WatchAccountParams } from "./payments";
import { drainAfter } from "./push";

export type RefundRouteOptions = {
  refunds: Refunds;
  /** Drains what a start leads to (first polls). */
  dispatcher: Dispatcher;
};

const RefundAnswer = z
  .object({
    created: z
      .boolean()
      .meta({ description: "false when the refund was watched already.", example: true }),
    refund: Refund,
  })
  .meta({ id: "RefundAnswer" });

const RefundParams = z.object({
  ...WatchAccountParams,
  outRefundNo: z
    .string()
    .min(1)
    .max(64)
    .meta({ param: { name: "outRefundNo", in: "path" }, example: "refund-1042-1" }),
});

/** POST/GET/DELETE /v1/refunds: behind the bearer auth. */
export function refundRoutes(app: OpenAPIHono<AppEnv>, options: RefundRouteOptions): void {
  const tags = ["refunds"];
  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/refunds",
      operationId: "watchRefund",
      tags,
      security: SECURED,
      summary: "Watch a refund at Alipay or WeChat Pay until it succeeds, closes or goes abnormal",
      description:
        "delayq queries the provider about the refund on the schedule (signed requests, " +
        "verified answers) until an outcome or the deadline (then refund.expired), and adds the " +
        "outcome as a job to each notify topic, once. WeChat Pay's refund notifications settle " +
        "it at once. Idempotent by (provider, account, outRefundNo): a second call answers the " +
        "watch as it is.",
      request: { body: body(RefundInput, true) },
      responses: {
        201: json(RefundAnswer, "Watching"),
        200: json(RefundAnswer, "The refund was watched already: the watch as it is"),
        ...errors(403, 409, 413, 429),
      },
    }),
    async (c) => {
      const input = requestJson(c, c.req.valid("json"));
      const { work, ...result } = await options.refunds.start(c.get("run"), input, accessOf(c));
      // The polls due within seconds go out from this request, after its answer.
      drainAfter(c, options.dispatcher, work);
      return result.created ? jsonBody(c, result, 201) : jsonBody(c, result, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/refunds/{provider}/{account}/{outRefundNo}",
      operationId: "getRefund",
      tags,
      security: SECURED,
      summary: "A refund watch: its state, queries, last answer and outcome",
      request: { params: RefundParams },
      responses: {
        200: json(z.object({ refund: Refund }), "The refund watch"),
        ...errors(404),
      },
    }),
    async (c) => {
      const refund = await options.refunds.get(c.req.valid("param"), accessOf(c));
      return jsonBody(c, { refund }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "delete",
      path: "/v1/refunds/{provider}/{account}/{outRefundNo}",
      operationId: "stopRefund",
      tags,
      security: SECURED,
      summary: "Stop watching a refund (it reads stopped while it is retained)",
      request: { params: RefundParams },
      responses: {
        200: json(
          z.object({ deleted: z.literal(true).meta({ description: "Stopped.", example: true }) }),
          "Stopped",
        ),
        ...errors(404),
      },
    }),
    async (c) => {
      await options.refunds.stop(c.req.valid("param"), accessOf(c));
      return c.json({ deleted: true as const }, 200);
    },
  );
}
