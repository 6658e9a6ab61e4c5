// The operator's routes: /metrics (Prometheus, bearer token), /docs (the API rendered) and
// /dashboard (server-rendered pages, token in an HttpOnly cookie).
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Logger } from "../../log";
import { collectMetrics, DEFAULT_METRICS_MAX_TOPICS } from "../../metrics/collect";
import type { Counters } from "../../metrics/counters";
import { PROMETHEUS_CONTENT_TYPE, renderPrometheus } from "../../metrics/prometheus";
import type { DelayQueue } from "../../queue";
import { bearerAuth, type TokenSet } from "../auth";
import type { AppEnv } from "../context";
import { dashboardRoutes } from "../pages/dashboard";
import { docsPage, type OpenApiDocument } from "../pages/docs";
import type { Html } from "../pages/layout";
import { setPageHeaders } from "../pages/layout";
import type { PaymentWatchSource } from "../pages/payments";
import { OPENAPI_CONFIG } from "./system";

export type OpsOptions = {
  queue: DelayQueue;
  tokens: TokenSet;
  log: Logger;
  /** Process counters shown by /metrics (createCounters()); none when absent. */
  counters?: Counters;
  /** The most topics one scrape reads (DQ_METRICS_MAX_TOPICS). @default 1000 */
  metricsMaxTopics?: number;
  /** Lists payment watches for the dashboard; without it the panel says there are none. */
  paymentWatches?: PaymentWatchSource;
};

export function opsRoutes(app: OpenAPIHono<AppEnv>, options: OpsOptions): void {
  const { queue, tokens } = options;

  // Not in the OpenAPI document: it is not a JSON route (the /docs page describes it).
  app.use("/metrics", bearerAuth(tokens, queue));
  app.get("/metrics", async (c) => {
    const families = await collectMetrics(c.get("queue"), {
      maxTopics: options.metricsMaxTopics ?? DEFAULT_METRICS_MAX_TOPICS,
      ...(options.counters ? { counters: options.counters } : {}),
    });
    return c.text(renderPrometheus(families), 200, {
      "Content-Type": PROMETHEUS_CONTENT_TYPE,
      "Cache-Control": "no-store",
    });
  });

  // Rendered once per app: the document does not change while the app lives.
  let docs: Html | undefined;
  app.get("/docs", (c) => {
    docs ??= docsPage(app.getOpenAPI31Document(OPENAPI_CONFIG) as unknown as OpenApiDocument);
    setPageHeaders(c);
    c.header("cache-control", "public, max-age=300");
    return c.html(docs);
  });

  app.route(
    "/dashboard",
    dashboardRoutes({
      queue,
      tokens,
      log: options.log,
      ...(options.paymentWatches ? { paymentWatches: options.paymentWatches } : {}),
    }),
  );
}
