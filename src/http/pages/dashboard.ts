// /dashboard: server-rendered pages to see topics, page through jobs, look a job up, kick, delete,
// bury (with a confirmation step), pause and resume, and list payment watches. No script at all.
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { html } from "hono/html";
import { sameText } from "../../domain/bytes";
import type { Logger } from "../../log";
import type { DelayQueue } from "../../queue";
import type { TokenSet } from "../auth";
import type { AppEnv } from "../context";
import { topicCursors } from "../topic-cursors";
import { act, readForm, UNREADABLE_FORM } from "./dashboard-actions";
import { find, jobPage, paymentsPage, topicPage, topicsPage } from "./dashboard-pages";
import { errorPage, frame, loginPage, notFound } from "./dashboard-pieces";
import type { View } from "./dashboard-view";
import { setPageHeaders } from "./layout";
import type { PaymentWatchSource, RefundWatchSource } from "./payments";
import { SCHEDULES_PER_PAGE, type ScheduleSource, schedulesPanel } from "./schedules";
import {
  DEFAULT_SESSION_SECONDS,
  endSession,
  fromThisSite,
  readSession,
  startSession,
} from "./session";
import { FAVICON_SVG, STYLESHEET } from "./style";

export { DASHBOARD_PAGE_SIZE } from "./dashboard-view";

export type DashboardOptions = {
  /** The queue; each session sees it scoped to its token's topics. */
  queue: DelayQueue;
  tokens: TokenSet;
  /** Lists payment watches; without it the panel says there are none. */
  paymentWatches?: PaymentWatchSource;
  /** Lists refund watches, under the payment watches; without it there is no such table. */
  refundWatches?: RefundWatchSource;
  /** Lists recurring schedules for /dashboard/schedules; without it the page says there are none. */
  schedules?: ScheduleSource;
  log: Logger;
  /** How long a session lasts, seconds (DQ_DASHBOARD_SESSION_S). @default DEFAULT_SESSION_SECONDS (12 h) */
  sessionSeconds?: number;
};

/** The dashboard's routes, to mount at /dashboard. */
export function dashboardRoutes(options: DashboardOptions): Hono<AppEnv> {
  const { tokens, log, queue } = options;
  const sessionSeconds = options.sessionSeconds ?? DEFAULT_SESSION_SECONDS;
  const cursors = topicCursors(options.queue);
  const app = new Hono<AppEnv>();

  app.use("*", async (c, next) => {
    await next();
    if (!c.res.headers.has("content-security-policy")) setPageHeaders(c);
  });
  // Forms are small; nothing else is posted here.
  app.use("*", bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.text("Form too large", 413) }));

  app.get("/assets/style.css", (c) => {
    c.header("cache-control", "public, max-age=3600");
    c.header("x-content-type-options", "nosniff");
    c.header("content-security-policy", "default-src 'none'");
    return c.body(STYLESHEET, 200, { "content-type": "text/css; charset=utf-8" });
  });

  app.get("/assets/favicon.svg", (c) => {
    c.header("cache-control", "public, max-age=86400");
    c.header("content-security-policy", "default-src 'none'");
    return c.body(FAVICON_SVG, 200, { "content-type": "image/svg+xml" });
  });

  app.get("/login", async (c) => {
    if (await readSession(c, tokens, queue)) return c.redirect("/dashboard", 303);
    return c.html(loginPage());
  });

  app.post("/login", async (c) => {
    if (!fromThisSite(c))
      return c.html(loginPage("Sign-in refused: the form came from another site."), 403);
    const form = await readForm(c).catch(() => undefined);
    if (!form) return c.html(loginPage(UNREADABLE_FORM), 400);
    const token = typeof form.token === "string" ? form.token.trim() : "";
    const access = token ? await tokens.identify(token) : undefined;
    if (!access?.tokenId) {
      return c.html(loginPage("That token is not valid. Use one of the API's bearer tokens."), 401);
    }
    await startSession(c, queue, access.tokenId, sessionSeconds);
    return c.redirect("/dashboard", 303);
  });

  app.post("/logout", async (c) => {
    const session = await readSession(c, tokens, queue);
    const form = await readForm(c).catch(() => undefined);
    if (!form) return c.html(loginPage(UNREADABLE_FORM), 400);
    if (session && fromThisSite(c) && sameText(String(form.csrf ?? ""), session.csrf)) {
      await endSession(c, queue, session);
    }
    return c.redirect("/dashboard/login", 303);
  });

  /** Wraps a page: no session → the login form; errors → an error page, never a stack. */
  const page =
    (render: (view: View) => Promise<Response>) =>
    async (c: Context<AppEnv>): Promise<Response> => {
      const session = await readSession(c, tokens, queue);
      if (!session) {
        return c.req.method === "GET" || c.req.method === "HEAD"
          ? c.redirect("/dashboard/login", 303)
          : c.html(loginPage("Your session has ended: sign in again."), 401);
      }
      const view = {
        c,
        session,
        queue: options.queue.withScope(session.scope),
        cursors,
      };
      try {
        return await render(view);
      } catch (error) {
        return errorPage(view, error, log);
      }
    };

  app.get("/", page(topicsPage));
  app.get("/find", page(find));
  app.get("/topics/:topic", page(topicPage));
  app.get("/jobs/:id", page(jobPage));
  app.get(
    "/payments",
    page((view) => paymentsPage(view, options.paymentWatches, options.refundWatches)),
  );
  app.get(
    "/schedules",
    page(async ({ c, session, queue }) => {
      const now = queue.clock();
      const after = c.req.query("after") || undefined;
      const list = await options.schedules?.list(
        { ...(after === undefined ? {} : { after }), limit: SCHEDULES_PER_PAGE },
        session.scope,
        now,
      );
      const next =
        list?.next && `/dashboard/schedules?${new URLSearchParams({ after: list.next })}`;
      const body = html`<h1>Schedules</h1>
<p class="muted">Recurring schedules: each makes a job in its topic at every time its cron names.</p>
${schedulesPanel(list, now, next || undefined)}`;
      return c.html(frame({ c, session, queue }, "Schedules", body));
    }),
  );
  app.post("/actions", page(act));
  app.all(
    "*",
    page(async (view) =>
      view.c.req.path === "/dashboard/"
        ? view.c.redirect("/dashboard", 303)
        : view.c.html(frame(view, "Not found", notFound()), 404),
    ),
  );
  return app;
}
