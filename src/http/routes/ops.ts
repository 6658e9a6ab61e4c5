// The operator's routes: /metrics (Prometheus, bearer token), /docs (the API rendered) and
// /dashboard (server-rendered pages, token in an HttpOnly cookie).
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Logger } from "../../log";
import { collectMetrics, DEFAULT_METRICS_MAX_TOPICS } from "../../metrics/collect";
import type { Counters } from "../../metrics/counters";
import {
  type MetricFamily,
  PROMETHEUS_CONTENT_TYPE,
  renderPrometheus,
} from "../../metrics/prometheus";
import type { DelayQueue } from "../../queue";
import { bearerAuth, type TokenSet } from "../auth";
import type { AppEnv } from "../context";
import { dashboardRoutes } from "../pages/dashboard";
import { docsPage, type OpenApiDocument } from "../pages/docs";
import type { Html } from "../pages/layout";
import { setPageHeaders } from "../pages/layout";
import type { PaymentWatchSource, RefundWatchSource } from "../pages/payments";
import type { ScheduleSource } from "../pages/schedules";
import { ErrorBody, json, SECURED } from "../schemas";
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
  /** Lists refund watches for the dashboard, under the payment watches. */
  refundWatches?: RefundWatchSource;
  /** Lists recurring schedules for the dashboard. */
  schedules?: ScheduleSource;
  /** How long a dashboard session lasts, seconds (DQ_DASHBOARD_SESSION_S). @default 12 h */
  dashboardSessionSeconds?: number;
  /** Payment watches: /metrics shows how many each token has polling. */
  payments?: { payments: TokenWatchSource };
};

/** Counts each token's polling watches (payments/watch-service.ts: tokenWatches). */
export type TokenWatchSource = {
  tokenWatches(tokenIds: readonly string[]): Promise<{ counts: number[]; max: number }>;
};

export function opsRoutes(app: OpenAPIHono<AppEnv>, options: OpsOptions): void {
  const { queue, tokens } = options;

  // Documented, served as text by the handler below (not a JSON route: nothing to validate).
  app.openAPIRegistry.registerPath(METRICS_ROUTE);
  app.use("/metrics", bearerAuth(tokens, queue));
  app.get("/metrics", async (c) => {
    const families = await collectMetrics(c.get("queue"), {
      maxTopics: options.metricsMaxTopics ?? DEFAULT_METRICS_MAX_TOPICS,
      ...(options.counters ? { counters: options.counters } : {}),
    });
    families.push(...(await tokenWatchFamilies(c, tokens, options.payments?.payments)));
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
      ...(options.dashboardSessionSeconds
        ? { sessionSeconds: options.dashboardSessionSeconds }
        : {}),
      ...(options.paymentWatches ? { paymentWatches: options.paymentWatches } : {}),
      ...(options.refundWatches ? { refundWatches: options.refundWatches } : {}),
      ...(options.schedules ? { schedules: options.schedules } : {}),
    }),
  );
}

/**
 * How many watches each token has polling, by its entry number in DQ_TOKENS (1: the first), and
 * the cap (one Redis request). A token limited to some topics sees its own count only.
 */
async function tokenWatchFamilies(
  c: Context<AppEnv>,
  tokens: TokenSet,
  source: TokenWatchSource | undefined,
): Promise<MetricFamily[]> {
  const own = c.get("tokenId");
  if (!source || own === undefined) return [];
  const ids = await tokens.ids();
  const shown =
    c.get("queue").scope === undefined
      ? ids.map((id, i) => ({ id, entry: i + 1 }))
      : [{ id: own, entry: ids.indexOf(own) + 1 }];
  const { counts, max } = await source.tokenWatches(shown.map(({ id }) => id));
  return [
    {
      name: "delayq_token_watches",
      help:
        "Watches polling (payments and refunds) that each token started, `token` being its " +
        "entry number in DQ_TOKENS (1: the first); a token limited to some topics sees its own.",
      type: "gauge",
      samples: shown.map(({ entry }, i) => ({
        labels: { token: String(entry) },
        value: counts[i] ?? 0,
      })),
    },
    {
      name: "delayq_token_watches_max",
      help: "The most watches one token may have polling (DQ_MAX_WATCHES_PER_TOKEN).",
      type: "gauge",
      samples: [{ value: max }],
    },
  ];
}

const METRICS_ROUTE = createRoute({
  method: "get",
  path: "/metrics",
  operationId: "getMetrics",
  tags: ["system"],
  security: SECURED,
  summary: "Prometheus metrics, text format 0.0.4",
  description:
    "Per topic `delayq_jobs{topic,state}` (state `delayed`, `ready`, `reserved`, `dead`), " +
    "`delayq_oldest_due_age_seconds{topic}` (seconds) and `delayq_topic_paused{topic}`; " +
    "`delayq_topics`, `delayq_metrics_topics_truncated` and `delayq_metrics_redis_requests` " +
    "about the scrape; and the process's counters `delayq_tick_slices_total{step}`, " +
    "`delayq_tick_work_total{step,kind}`, `delayq_tick_step_failures_total{step}`, " +
    "`delayq_deliveries_total{topic,outcome}`, `delayq_polls_total{provider,outcome}`, " +
    "`delayq_refund_polls_total{provider,outcome}` with " +
    "`delayq_process_start_time_seconds`; `delayq_token_watches{token}` (watches polling that " +
    "each token started, `token` being its entry number in DQ_TOKENS) and " +
    "`delayq_token_watches_max` (DQ_MAX_WATCHES_PER_TOKEN). Reads at most `DQ_METRICS_MAX_TOPICS` topics " +
    "(default 1000) in pages of 100, one Redis request per page. A token limited to some " +
    "topics sees only those.",
  responses: {
    200: {
      content: {
        [PROMETHEUS_CONTENT_TYPE]: {
          schema: z.string().meta({
            description: "Prometheus's text exposition format.",
            example: '# TYPE delayq_jobs gauge\ndelayq_jobs{topic="payments",state="ready"} 3\n',
          }),
        },
      },
      description: "The metrics",
    },
    401: json(ErrorBody, "Missing or wrong bearer token (`unauthorized`)"),
    503: json(
      ErrorBody,
      "Redis unreachable (`redis_unavailable`); retry after `Retry-After` seconds",
    ),
  },
});
