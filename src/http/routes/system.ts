// Unauthenticated routes: /health and /openapi.json (the /docs page is in routes/ops.ts).
import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import { type Logger, messageOf } from "../../log";
import type { DelayQueue } from "../../queue";
import type { AppEnv } from "../context";
import { Health, json } from "../schemas";

export function systemRoutes(app: OpenAPIHono<AppEnv>, queue: DelayQueue, log: Logger): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/health",
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
        log({ level: "warn", event: "health_degraded", message: messageOf(error) });
        c.header("Retry-After", "1");
        const message = "Redis does not answer delayq; the service's log says why";
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
      'Errors are `{"error": {"code", "message"}}`; times are unix milliseconds, `delay` and ' +
      "`ttr` seconds. Operators also have /dashboard (sign in with a token) and /metrics " +
      "(Prometheus).",
  },
};
