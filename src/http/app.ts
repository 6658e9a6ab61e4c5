// The Hono app: the v1 API, the command protocol, auth, health and the OpenAPI document.
import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { DestinationPolicy } from "../domain/destinations";
import { jsonLogger, type Logger } from "../log";
import type { Counters } from "../metrics/counters";
import type { DelayQueue } from "../queue";
import { createRun, type Run } from "../run/run";
import type { Schedules } from "../schedules/schedules";
import { bearerAuth, type TokenSet } from "./auth";
import { DEFAULT_MAX_REQUEST_BYTES, jsonBodies } from "./body";
import type { AppEnv } from "./context";
import { errorResponse, handleError, validationHook } from "./errors";
import type { PaymentWatchSource, RefundWatchSource } from "./pages/payments";
import { knownQueryOnly } from "./query";
import { REQUEST_ID_HEADER, requestIdOf } from "./request-id";
import { commandRoutes } from "./routes/command";
import { compatRoutes } from "./routes/compat";
import { jobRoutes } from "./routes/jobs";
import { opsRoutes } from "./routes/ops";
import { notifyRoutes, type PaymentRouteOptions, paymentRoutes } from "./routes/payments";
import { type PushOptions, pushRoutes, pushSoon } from "./routes/push";
import { refundRoutes } from "./routes/refunds";
import { scheduleRoutes } from "./routes/schedules";
import { systemRoutes } from "./routes/system";
import { topicRoutes } from "./routes/topics";
import { topicCursors } from "./topic-cursors";

export type AppOptions = {
  /** The queue; each request gets a view of it scoped to its token's topics. */
  queue: DelayQueue;
  /** The accepted bearer tokens (parseTokens(DQ_TOKENS)). */
  tokens: TokenSet;
  /** Largest request body, bytes. @default DEFAULT_MAX_REQUEST_BYTES */
  maxRequestBytes?: number;
  /** Where errors are logged. @default one JSON line on stderr */
  log?: Logger;
  /** Process counters for /metrics (createCounters()); the same object the scheduler counts in. */
  counters?: Counters;
  /** The most topics one /metrics scrape reads (DQ_METRICS_MAX_TOPICS). @default DEFAULT_METRICS_MAX_TOPICS (1000) */
  metricsMaxTopics?: number;
  /** Lists payment watches for /dashboard/payments. @default none: "no payment watches" */
  paymentWatches?: PaymentWatchSource;
  /** Lists refund watches for the dashboard, under the payment watches. */
  refundWatches?: RefundWatchSource;
  /** How long a dashboard session lasts, seconds (DQ_DASHBOARD_SESSION_S). @default 12 h */
  dashboardSessionSeconds?: number;
  /** Push delivery: the QStash callback route, and prompt delivery of jobs due soon. */
  push?: PushOptions;
  /** Payment (and refund) watches: /v1/payments, /v1/refunds and the providers' notifications. */
  payments?: PaymentRouteOptions;
  /** Recurring schedules: /v1/schedules and the dashboard's schedules page. @default none */
  schedules?: Schedules;
  /** Which topics push to public addresses only (DQ_PRIVATE_PUSH). @default none */
  destinations?: DestinationPolicy;
  /**
   * Makes the run of a request its entry point did not give one (`app.request()`, an embedding
   * app): `waitUntil` is the request's ExecutionContext's, when it has one.
   * @default a run of 1000 subrequests, for 30 s
   */
  newRun?: (request: {
    path: string;
    requestId?: string;
    waitUntil?: (work: Promise<unknown>) => void;
  }) => Run;
};

/** Builds the app from its dependencies; it holds no state of its own. */
export function createApp(options: AppOptions): OpenAPIHono<AppEnv> {
  const log = options.log ?? jsonLogger;
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  app.onError(handleError(log));
  app.notFound((c) =>
    errorResponse(
      c,
      "not_found",
      `No route ${c.req.method} ${c.req.path}; the API is described at /openapi.json`,
    ),
  );

  const newRun =
    options.newRun ??
    ((request) =>
      createRun({
        subrequests: 1000,
        lifetimeMs: 30_000,
        log,
        waitUntil: request.waitUntil,
        label: {
          path: request.path,
          ...(request.requestId === undefined ? {} : { requestId: request.requestId }),
        },
      }));
  app.use("*", async (c, next) => {
    // The entry's run brings the id it logs under; else (app.request()) it is made here.
    const given = c.env?.run;
    const requestId = given?.label.requestId ?? requestIdOf(c.req.raw.headers);
    c.set("requestId", requestId);
    c.set("run", given ?? newRun({ path: c.req.path, requestId, waitUntil: waitUntilOf(c) }));
    c.header(REQUEST_ID_HEADER, requestId);
    await next();
    // An answer built as a Response of its own did not take the header set above.
    if (!c.res.headers.has(REQUEST_ID_HEADER)) c.header(REQUEST_ID_HEADER, requestId);
  });
  // Before the bearer auth: QStash authenticates its callbacks with their signature.
  if (options.push) pushRoutes(app, options.push);
  if (options.payments) notifyRoutes(app, options.payments);
  app.use(
    "/v1/*",
    bearerAuth(options.tokens, options.queue, options.push && pushSoon(options.push)),
  );
  app.use("/v1/*", knownQueryOnly(app));
  app.use("/v1/*", jsonBodies(options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES));

  systemRoutes(app, options.queue, log);
  jobRoutes(app);
  topicRoutes(app, {
    qstashReady: options.push?.qstashReady ?? false,
    destinations: options.destinations,
    cursors: topicCursors(options.queue),
  });
  commandRoutes(app, log);
  if (options.payments) paymentRoutes(app, options.payments);
  if (options.payments?.refunds) {
    refundRoutes(app, {
      refunds: options.payments.refunds,
      dispatcher: options.payments.dispatcher,
    });
  }
  if (options.schedules) {
    scheduleRoutes(app, {
      schedules: options.schedules,
      pushed: options.push && pushSoon(options.push),
    });
  }
  opsRoutes(app, { ...options, log });
  compatRoutes(app, { ...options, log });
  return app;
}

/** The request's ExecutionContext's waitUntil (a Worker's); none on Node. */
function waitUntilOf(c: Context<AppEnv>): ((work: Promise<unknown>) => void) | undefined {
  try {
    const ctx = c.executionCtx;
    return (work) => ctx.waitUntil(work);
  } catch {
    return undefined; // Node: no ExecutionContext, and none is needed
  }
}
