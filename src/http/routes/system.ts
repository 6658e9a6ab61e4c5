// Unauthenticated routes: /health and /openapi.json (the /docs page is in routes/ops.ts).
import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import { DelayqError } from "../../domain/errors";
import { type Logger, messageOf } from "../../log";
import type { DelayQueue } from "../../queue";
import type { AppEnv } from "../context";
import { seeTheLogs } from "../errors";
import { Health, json } from "../schemas";

export function systemRoutes(app: OpenAPIHono<AppEnv>, queue: DelayQueue, log: Logger): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/health",
      operationId: "getHealth",
      tags: ["system"],
      summary: "Liveness and Redis reachability (no token needed)",
      responses: {
        200: json(Health, "Up, and Redis answers"),
        503: json(Health, "Up, but Redis does not answer"),
      },
    }),
    async (c) => {
      try {
        await queue.ping();
        return c.json({ status: "ok" as const, redis: "ok" as const }, 200);
      } catch (error) {
        // Anyone may ask: the reason (which names Redis's address) goes to the log only.
        const requestId = c.get("requestId");
        const detail = error instanceof DelayqError ? error.detail : undefined;
        log({
          level: "warn",
          event: "health_degraded",
          message: messageOf(error),
          detail,
          requestId,
        });
        c.header("Retry-After", "1");
        const message = `Redis does not answer delayq; ${seeTheLogs(requestId)}`;
        return c.json({ status: "degraded" as const, redis: "unreachable" as const, message }, 503);
      }
    },
  );

  app.doc31("/openapi.json", OPENAPI_CONFIG);
  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
  });
}

/** The document's header, shared by /openapi.json and the /docs page (routes/ops.ts). */
export const OPENAPI_CONFIG = {
  openapi: "3.1.0",
  info: {
    title: "delayq",
    version: "1",
    description:
      "A delay queue on Redis: add jobs with a delay and a time-to-run, pop them when due, " +
      "finish or delete them. Every /v1 route and /metrics need `Authorization: Bearer <token>`. " +
      'Errors are `{"error": {"code", "message", "requestId"}}`, and every answer has an ' +
      "`x-request-id` header; times are unix milliseconds, `delay` and " +
      "`ttr` seconds. Operators also have /dashboard (sign in with a token) and /metrics " +
      "(Prometheus).",
  },
  servers: [
    {
      url: "https://delayq.{subdomain}.workers.dev",
      description: "A deployment on Cloudflare Workers (wrangler deploy, the Worker named delayq)",
      variables: {
        subdomain: { default: "example", description: "The account's workers.dev subdomain" },
      },
    },
    { url: "http://127.0.0.1:8787", description: "npm run dev, or npm start, on this machine" },
  ],
  tags: [
    {
      name: "jobs",
      description:
        "Add, read and delete jobs; finish, touch, release or bury the jobs a pop reserved.",
    },
    {
      name: "topics",
      description:
        "Take a topic's due jobs (pop, long-polling), read its counts and page through its " +
        "jobs by state, set its config, and retry or drop its dead jobs.",
    },
    {
      name: "command protocol",
      description:
        "The Youzan delay-queue design's JSON protocol: one command, or an array, per request.",
    },
    {
      name: "payments",
      description:
        "Payment watches: delayq queries Alipay or WeChat Pay about an order on a schedule until " +
        "it is paid, closed or failed, and adds the outcome to the watch's notify topics.",
    },
    {
      name: "refunds",
      description:
        "Refund watches: delayq queries Alipay or WeChat Pay about a refund on a schedule until " +
        "it succeeds, closes or goes abnormal (or its deadline passes), and adds the outcome to " +
        "the watch's notify topics.",
    },
    {
      name: "schedules",
      description:
        "Recurring schedules: a job in a topic at each time a cron expression names, in a time " +
        "zone, each fire made once as the job `{name}@{fire time}`.",
    },
    {
      name: "notifications",
      description:
        "Where Alipay and WeChat Pay send their notifications of a payment, and WeChat Pay those " +
        "of a refund (the notify URL of the merchant's create-order and refund calls). Called by " +
        "the providers, authenticated by their " +
        "signatures: no bearer token.",
    },
    {
      name: "push",
      description:
        "Called by Upstash QStash for push topics delivered through it and for hand-offs; " +
        "authenticated by QStash's signature: no bearer token.",
    },
    { name: "system", description: "Liveness and Redis reachability, and Prometheus metrics." },
  ],
};
