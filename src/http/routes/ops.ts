// The operator's routes: /metrics (Prometheus, bearer token), /docs (the API rendered) and
// /dashboard (server-rendered pages, token in an HttpOnly cookie).
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
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
import { errors } from "../schemas";
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

  app.use("/metrics", bearerAuth(tokens, queue));
  app.openapi(
    createRoute({
      method: "get",
      path: "/metrics",
      tags: ["operations"],
      security: [{ bearer: [] }],
      summary: "Prometheus metrics: jobs per topic and state, oldest due age, process counters",
      description:
        "Text format 0.0.4. Reads at most `DQ_METRICS_MAX_TOPICS` topics (default 1000) in " +
        "pages of 100, one Redis request per page; `delayq_metrics_topics_truncated` is 1 when " +
        "more exist. A token limited to some topics sees only those. Counters (`*_total`) are " +
        "kept per process (per isolate on Workers) and start at zero when it starts.",
      responses: {
        200: {
          description: "The metrics",
          content: {
            "text/plain": {
              schema: z.string().meta({
                example:
                  '# HELP delayq_jobs Jobs per topic and state\n# TYPE delayq_jobs gauge\ndelayq_jobs{topic="orders",state="ready"} 3\n',
              }),
            },
          },
        },
        ...errors(),
      },
    }),
    async (c) => {
      const families = await collectMetrics(c.var.queue, {
        maxTopics: options.metricsMaxTopics ?? DEFAULT_METRICS_MAX_TOPICS,
        ...(options.counters ? { counters: options.counters } : {}),
      });
      return c.text(renderPrometheus(families), 200, {
        "Content-Type": PROMETHEUS_CONTENT_TYPE,
        "Cache-Control": "no-store",
      });
    },
  );

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
