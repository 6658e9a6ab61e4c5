// /dashboard: server-rendered pages to see topics, page through jobs, look a job up, kick, delete,
// bury (with a confirmation step), pause and resume, and list payment watches. No script at all.
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { html } from "hono/html";
import { DelayqError } from "../../domain/errors";
import type { Job, ListableState, TopicConfig, TopicStats } from "../../domain/schemas";
import { TopicName } from "../../domain/schemas";
import type { Logger } from "../../log";
import type { DelayQueue } from "../../queue";
import type { TokenSet } from "../auth";
import type { AppEnv } from "../context";
import {
  bodyText,
  count,
  duration,
  formatTime,
  type Html,
  indentJson,
  preview,
  relative,
  setPageHeaders,
  shell,
} from "./layout";
import { type PaymentWatchSource, WATCHES_PER_PAGE, watchesPanel } from "./payments";
import {
  type DashboardSession,
  endSession,
  fromThisSite,
  readSession,
  sameText,
  startSession,
} from "./session";
import { FAVICON_SVG, STYLESHEET } from "./style";

export type DashboardOptions = {
  /** The queue; each session sees it scoped to its token's topics. */
  queue: DelayQueue;
  tokens: TokenSet;
  /** Lists payment watches; without it the panel says there are none. */
  paymentWatches?: PaymentWatchSource;
  log: Logger;
};

/** Rows per page: topics on the overview, jobs on a topic's page. */
export const DASHBOARD_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 100;
/** Dead jobs one "kick all" or "delete all" acts on (one script call). */
const BULK = 1000;
const STATES: readonly ListableState[] = ["ready", "delayed", "reserved", "dead"];

type Action = "kick" | "kick-dead" | "delete" | "delete-dead" | "bury" | "pause" | "resume";
const ACTIONS: readonly Action[] = [
  "kick",
  "kick-dead",
  "delete",
  "delete-dead",
  "bury",
  "pause",
  "resume",
];
/** Actions that lose or move work ask first; pause and resume are undone with one click. */
const CONFIRMED: ReadonlySet<Action> = new Set([
  "kick",
  "kick-dead",
  "delete",
  "delete-dead",
  "bury",
]);

type View = { c: Context<AppEnv>; session: DashboardSession; queue: DelayQueue };

const enc = encodeURIComponent;
const topicHref = (topic: string, query?: Record<string, string>) =>
  `/dashboard/topics/${enc(topic)}${query ? `?${new URLSearchParams(query)}` : ""}`;
const jobHref = (id: string) => `/dashboard/jobs/${enc(id)}`;

/** The dashboard's routes, to mount at /dashboard. */
export function dashboardRoutes(options: DashboardOptions): Hono<AppEnv> {
  const { tokens, log } = options;
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
    if (await readSession(c, tokens)) return c.redirect("/dashboard", 303);
    return c.html(loginPage());
  });

  app.post("/login", async (c) => {
    if (!fromThisSite(c))
      return c.html(loginPage("Sign-in refused: the form came from another site."), 403);
    const form = await readForm(c).catch(() => undefined);
    if (!form) return c.html(loginPage(UNREADABLE_FORM), 400);
    const token = typeof form.token === "string" ? form.token.trim() : "";
    if (!token || !(await tokens.identify(token))) {
      return c.html(loginPage("That token is not valid. Use one of the API's bearer tokens."), 401);
    }
    startSession(c, token);
    return c.redirect("/dashboard", 303);
  });

  app.post("/logout", async (c) => {
    const session = await readSession(c, tokens);
    const form = await readForm(c).catch(() => undefined);
    if (!form) return c.html(loginPage(UNREADABLE_FORM), 400);
    if (session && fromThisSite(c) && sameText(String(form.csrf ?? ""), session.csrf)) {
      endSession(c);
    }
    return c.redirect("/dashboard/login", 303);
  });

  /** Wraps a page: no session → the login form; errors → an error page, never a stack. */
  const page =
    (render: (view: View) => Promise<Response>) =>
    async (c: Context<AppEnv>): Promise<Response> => {
      const session = await readSession(c, tokens);
      if (!session) {
        return c.req.method === "GET" || c.req.method === "HEAD"
          ? c.redirect("/dashboard/login", 303)
          : c.html(loginPage("Your session has ended: sign in again."), 401);
      }
      const view = { c, session, queue: options.queue.withScope(session.scope) };
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
    page((view) => paymentsPage(view, options.paymentWatches)),
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

// ---- pages ----

async function topicsPage({ c, session, queue }: View): Promise<Response> {
  const limit = pageSize(c.req.query("limit"));
  const after = c.req.query("after") || undefined;
  const page = await queue.topics(after === undefined ? { limit } : { after, limit });
  const now = queue.clock();
  const back = here(c);
  const next =
    page.cursor &&
    `/dashboard?${new URLSearchParams({ after: page.cursor, limit: String(limit) })}`;
  const body = html`<h1>Topics</h1>
${notice(c)}
<div class="card row">
<form method="get" action="/dashboard/find" class="row"><label for="find-topic">Open topic</label>
<input type="text" id="find-topic" name="topic" placeholder="orders" required><button>Open</button></form>
<form method="get" action="/dashboard" class="row"><label for="after">List topics after</label>
<input type="text" id="after" name="after" placeholder="name (A–Z order)" value="${after ?? ""}"><button>List</button></form>
</div>
${
  page.topics.length === 0
    ? html`<p class="card muted" id="no-topics">${
        after
          ? "No topics on this page that your token may see."
          : "No topics yet: a topic appears when a job or a config names it."
      }</p>`
    : html`<table id="topics">
<thead><tr><th>Topic</th><th class="n">Delayed</th><th class="n">Ready</th><th class="n">Reserved</th>
<th class="n">Dead</th><th>Oldest due</th><th>Delivery</th><th>Paused</th><th></th></tr></thead>
<tbody>${page.topics.map((t) => topicRow(t, now, session, back))}</tbody></table>`
}
<div class="pager">${after ? html`<a href="/dashboard?limit=${limit}" id="first-page">← First page</a>` : ""}
${next ? html`<a href="${next}" id="next-page">Next page →</a>` : ""}</div>
<p class="muted small">${page.topics.length} topic${page.topics.length === 1 ? "" : "s"} on this page, by name; up to ${limit} per page.</p>`;
  return c.html(frame({ c, session, queue }, "Topics", body));
}

function topicRow(t: TopicStats, now: number, session: DashboardSession, back: string): Html {
  const paused = t.config.paused === true;
  return html`<tr data-topic="${t.topic}">
<td><a href="${topicHref(t.topic)}">${t.topic}</a></td>
<td class="n" data-count="delayed">${count(t.counts.delayed)}</td>
<td class="n" data-count="ready">${count(t.counts.ready)}</td>
<td class="n" data-count="reserved">${count(t.counts.reserved)}</td>
<td class="n" data-count="dead">${t.counts.dead > 0 ? html`<a href="${topicHref(t.topic, { state: "dead" })}">${count(t.counts.dead)}</a>` : "0"}</td>
<td>${oldestDue(t, now)}</td>
<td>${delivery(t.config)}</td>
<td data-paused="${String(paused)}">${paused ? html`<span class="badge paused">paused</span>` : html`<span class="muted">no</span>`}</td>
<td>${actionForm(session, paused ? "resume" : "pause", { topic: t.topic }, paused ? "Resume" : "Pause", back, "small")}</td>
</tr>`;
}

async function find({ c }: View): Promise<Response> {
  const topic = c.req.query("topic")?.trim();
  const id = c.req.query("job")?.trim();
  if (topic) {
    if (!TopicName.safeParse(topic).success) {
      throw new DelayqError("invalid_request", `"${topic}" is not a topic name: ${TOPIC_RULE}`);
    }
    return c.redirect(topicHref(topic), 303);
  }
  if (id) return c.redirect(jobHref(id), 303);
  return c.redirect("/dashboard", 303);
}

const TOPIC_RULE = "1-100 characters of A-Z a-z 0-9 _ . : -";

async function topicPage({ c, session, queue }: View): Promise<Response> {
  const topic = c.req.param("topic") as string;
  const stats = await queue.topic(topic);
  const asked = c.req.query("state");
  const state: ListableState = STATES.includes(asked as ListableState)
    ? (asked as ListableState)
    : stats.counts.dead > 0
      ? "dead"
      : "ready";
  const limit = pageSize(c.req.query("limit"));
  const cursor = c.req.query("cursor") || undefined;
  const page = await queue.list(
    topic,
    cursor === undefined ? { state, limit } : { state, cursor, limit },
  );
  const now = queue.clock();
  const back = here(c);
  const paused = stats.config.paused === true;
  const next =
    page.cursor && topicHref(topic, { state, cursor: page.cursor, limit: String(limit) });
  const body = html`<h1>Topic <code>${topic}</code> ${paused ? html`<span class="badge paused" id="paused-badge">paused</span>` : ""}</h1>
${notice(c)}
<div class="counts">${STATES.map(
    (s) => html`<a class="card" href="${topicHref(topic, { state: s })}" id="count-${s}">
<div class="muted small">${s}</div><div class="v">${count(stats.counts[s])}</div></a>`,
  )}</div>
<div class="card">
<dl class="record">
<dt>Oldest due</dt><dd>${oldestDue(stats, now)}</dd>
<dt>Paused</dt><dd>${paused ? "yes: nothing is handed out; jobs still become due and wait" : "no"}
${actionForm(session, paused ? "resume" : "pause", { topic }, paused ? "Resume topic" : "Pause topic", back, "", `${paused ? "resume" : "pause"}-topic`)}</dd>
<dt>Delivery</dt><dd>${delivery(stats.config, true)}</dd>
<dt>Job defaults</dt><dd>${defaults(stats.config)}</dd>
</dl>
</div>
<nav class="tabs">${STATES.map(
    (s) =>
      html`<a href="${topicHref(topic, { state: s })}" class="${s === state ? "on" : ""}" id="tab-${s}">${s} (${count(stats.counts[s])})</a>`,
  )}</nav>
${
  state === "dead" && stats.counts.dead > 0
    ? html`<div class="row" style="margin-bottom:.6rem">
${actionForm(session, "kick-dead", { topic }, `Kick all dead (up to ${count(BULK)})`, back)}
${actionForm(session, "delete-dead", { topic }, `Delete all dead (up to ${count(BULK)})`, back, "danger")}</div>`
    : ""
}
${
  page.jobs.length === 0
    ? html`<p class="card muted" id="no-jobs">No ${state} jobs${cursor ? " on this page" : ""}.</p>`
    : jobsTable(page.jobs, state, now, session, back)
}
<div class="pager">${cursor ? html`<a href="${topicHref(topic, { state })}" id="first-page">← First page</a>` : ""}
${next ? html`<a href="${next}" id="next-page">Next page →</a>` : ""}</div>`;
  return c.html(frame({ c, session, queue }, `Topic ${topic}`, body));
}

function jobsTable(
  jobs: readonly Job[],
  state: ListableState,
  now: number,
  session: DashboardSession,
  back: string,
): Html {
  const when = { delayed: "Due", ready: "Due", reserved: "Lease ends", dead: "Died" }[state];
  return html`<table id="jobs">
<thead><tr><th>Id</th><th>${when}</th><th class="n">Attempts</th><th>Body</th><th></th></tr></thead>
<tbody>${jobs.map((job) => {
    const at =
      state === "reserved" ? job.reservedUntil : state === "dead" ? job.endedAt : job.dueAt;
    return html`<tr data-id="${job.id}">
<td><a href="${jobHref(job.id)}" class="mono">${job.id}</a></td>
<td>${formatTime(at)} <span class="muted small">${relative(at, now)}</span>${
      job.deadReason ? html` <span class="badge dead">${job.deadReason}</span>` : ""
    }</td>
<td class="n">${job.attempts} / ${job.maxAttempts}</td>
<td><code class="preview">${preview(bodyText(job.body))}</code></td>
<td class="row">${jobActions(job, session, back, "small")}</td>
</tr>`;
  })}</tbody></table>`;
}

async function jobPage({ c, session, queue }: View): Promise<Response> {
  const id = c.req.param("id") as string;
  const job = await queue.get(id);
  const now = queue.clock();
  const back = here(c);
  const time = (ms: number | undefined) =>
    ms === undefined
      ? html`<span class="muted">—</span>`
      : html`${formatTime(ms)} <span class="muted small">(${relative(ms, now)})</span>`;
  const body = html`<h1>Job <code>${job.id}</code> <span class="badge ${job.state}" id="job-state">${job.state}</span></h1>
${notice(c)}
<div class="card">
<dl class="record" id="job-record">
<dt>Topic</dt><dd><a href="${topicHref(job.topic)}">${job.topic}</a></dd>
<dt>State</dt><dd>${job.state}${job.deadReason ? html` (${deadReasonText(job.deadReason)})` : ""}</dd>
<dt>Due at</dt><dd>${time(job.dueAt)}</dd>
<dt>Created at</dt><dd>${time(job.createdAt)}</dd>
<dt>Time to run</dt><dd>${job.ttr} s</dd>
<dt>Attempts</dt><dd>${job.attempts} of ${job.maxAttempts}</dd>
<dt>Backoff</dt><dd>${job.backoff === undefined ? html`<span class="muted">none (ready again at once)</span>` : html`<code>${JSON.stringify(job.backoff)}</code>`}</dd>
<dt>Deadline</dt><dd>${time(job.deadline)}</dd>
<dt>Reserved until</dt><dd>${time(job.reservedUntil)}</dd>
<dt>Receipt</dt><dd>${job.receipt ? html`<code>${job.receipt}</code>` : html`<span class="muted">—</span>`}</dd>
<dt>Ended at</dt><dd>${time(job.endedAt)}</dd>
</dl>
</div>
<div class="row">${jobActions(job, session, back, "")}</div>
<h2>Body</h2>
<pre id="job-body"><code>${indentJson(bodyText(job.body))}</code></pre>`;
  return c.html(frame({ c, session, queue }, `Job ${job.id}`, body));
}

async function paymentsPage(
  { c, session, queue }: View,
  source: PaymentWatchSource | undefined,
): Promise<Response> {
  const cursor = c.req.query("cursor") || undefined;
  const page = source
    ? await source.list({
        limit: WATCHES_PER_PAGE,
        scope: session.scope,
        ...(cursor === undefined ? {} : { cursor }),
      })
    : undefined;
  const next =
    page?.cursor && `/dashboard/payments?${new URLSearchParams({ cursor: page.cursor })}`;
  const body = html`<h1>Payment watches</h1>
<p class="muted">Orders delayq polls at Alipay or WeChat Pay until they are paid, closed or past their deadline.</p>
${watchesPanel(page, queue.clock(), next || undefined)}`;
  return c.html(frame({ c, session, queue }, "Payment watches", body));
}

// ---- actions ----

const UNREADABLE_FORM =
  "The form could not be read: send it as application/x-www-form-urlencoded or as well-formed multipart/form-data";

/** The posted form; a body that is not the form its Content-Type says is a 400, not a 500. */
async function readForm(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  try {
    return await c.req.parseBody();
  } catch {
    throw new DelayqError("invalid_request", UNREADABLE_FORM);
  }
}

async function act(view: View): Promise<Response> {
  const { c, session, queue } = view;
  const form = await readForm(c);
  const field = (name: string) => (typeof form[name] === "string" ? (form[name] as string) : "");
  if (!fromThisSite(c) || !sameText(field("csrf"), session.csrf)) {
    throw new DelayqError(
      "forbidden",
      "This form is not from this dashboard session (or the session changed): reload the page and try again",
    );
  }
  const action = field("action") as Action;
  if (!ACTIONS.includes(action)) {
    throw new DelayqError("invalid_request", `Unknown action "${field("action")}"`);
  }
  const topic = field("topic");
  const id = field("id");
  const back = safeBack(field("back"), topic ? topicHref(topic) : "/dashboard");
  if (CONFIRMED.has(action) && field("confirm") !== "yes") {
    return c.html(frame(view, "Confirm", confirmPage(view, action, { topic, id }, back)));
  }
  let n = 1;
  switch (action) {
    case "kick":
      n = await queue.kick(topic, { ids: [id] });
      break;
    case "kick-dead":
      n = await queue.kick(topic, { count: BULK });
      break;
    case "delete-dead":
      n = await queue.deleteDead(topic, { count: BULK });
      break;
    case "delete":
      await queue.delete(id);
      break;
    case "bury":
      await queue.bury(id);
      break;
    case "pause":
    case "resume":
      await setPaused(queue, topic, action === "pause");
      break;
  }
  const url = new URL(back, "http://dashboard.invalid");
  url.searchParams.set("done", action);
  url.searchParams.set("n", String(n));
  return c.redirect(`${url.pathname}${url.search}`, 303);
}

/**
 * Pause or resume keeps the rest of the config: configure() replaces the whole of it, so it is
 * read first. Two people editing one topic's config at the same moment: the last write wins.
 */
async function setPaused(queue: DelayQueue, topic: string, paused: boolean): Promise<void> {
  const { config } = await queue.topic(topic);
  const next: Record<string, unknown> = { ...config };
  if (paused) next.paused = true;
  else delete next.paused;
  await queue.configure(topic, next as TopicConfig);
}

const CONFIRM_TEXT: Record<Action, (f: { topic: string; id: string }) => Html> = {
  kick: (f) =>
    html`Move dead job <code>${f.id}</code> of topic <code>${f.topic}</code> back to ready? Its attempts start again from 0.`,
  "kick-dead": (f) =>
    html`Move up to ${count(BULK)} of the oldest dead jobs of topic <code>${f.topic}</code> back to ready? Their attempts start again from 0.`,
  delete: (f) =>
    html`Delete job <code>${f.id}</code>? It is never handed out again. This cannot be undone.`,
  "delete-dead": (f) =>
    html`Delete up to ${count(BULK)} of the oldest dead jobs of topic <code>${f.topic}</code>? This cannot be undone.`,
  bury: (f) =>
    html`Move job <code>${f.id}</code>, which a consumer holds, to the dead letter? That consumer's receipt stops working.`,
  pause: (f) => html`Pause topic <code>${f.topic}</code>?`,
  resume: (f) => html`Resume topic <code>${f.topic}</code>?`,
};

const VERB: Record<Action, string> = {
  kick: "Kick",
  "kick-dead": "Kick them",
  delete: "Delete",
  "delete-dead": "Delete them",
  bury: "Bury",
  pause: "Pause",
  resume: "Resume",
};

function confirmPage(
  { session }: View,
  action: Action,
  fields: { topic: string; id: string },
  back: string,
): Html {
  const danger = action.startsWith("delete") || action === "bury";
  return html`<h1>Are you sure?</h1>
<div class="card" id="confirm">
<p>${CONFIRM_TEXT[action](fields)}</p>
<form method="post" action="/dashboard/actions" class="row">
${hidden({ action, topic: fields.topic, id: fields.id, back, csrf: session.csrf, confirm: "yes" })}
<button type="submit" class="${danger ? "danger" : "primary"}" id="confirm-yes">${VERB[action]}</button>
<a href="${back}" class="button" id="confirm-cancel">Cancel</a>
</form>
</div>`;
}

const DONE: Record<Action, (n: number) => string> = {
  kick: (n) =>
    n > 0 ? "Kicked the job back to ready." : "Nothing kicked: the job is no longer dead.",
  "kick-dead": (n) => `Kicked ${count(n)} dead job${n === 1 ? "" : "s"} back to ready.`,
  delete: () => "Deleted the job.",
  "delete-dead": (n) => `Deleted ${count(n)} dead job${n === 1 ? "" : "s"}.`,
  bury: () => "Moved the job to the dead letter.",
  pause: () => "Paused the topic.",
  resume: () => "Resumed the topic.",
};

function notice(c: Context): Html | string {
  const done = c.req.query("done") as Action | undefined;
  if (!done || !ACTIONS.includes(done)) return "";
  const n = Number.parseInt(c.req.query("n") ?? "1", 10);
  return html`<p class="notice" id="notice">${DONE[done](Number.isFinite(n) ? n : 1)}</p>`;
}

function jobActions(job: Job, session: DashboardSession, back: string, size: string): Html {
  const f = { topic: job.topic, id: job.id };
  const del = actionForm(session, "delete", f, "Delete", back, `danger ${size}`);
  if (job.state === "dead")
    return html`${actionForm(session, "kick", f, "Kick", back, size)} ${del}`;
  if (job.state === "reserved") {
    return html`${actionForm(session, "bury", f, "Bury", back, `danger ${size}`)} ${del}`;
  }
  if (job.state === "delayed" || job.state === "ready") return del;
  return html``;
}

function actionForm(
  session: DashboardSession,
  action: Action,
  fields: { topic?: string; id?: string },
  label: string,
  back: string,
  cls = "",
  id?: string,
): Html {
  return html`<form method="post" action="/dashboard/actions" class="inline">${hidden({
    action,
    topic: fields.topic ?? "",
    id: fields.id ?? "",
    back,
    csrf: session.csrf,
  })}<button type="submit" class="${cls}" data-action="${action}"${id ? html` id="${id}"` : ""}>${label}</button></form>`;
}

function hidden(fields: Record<string, string>): Html {
  return html`${Object.entries(fields)
    .filter(([, value]) => value !== "")
    .map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}`;
}

// ---- pieces ----

function frame(view: View, title: string, body: Html): Html {
  const scope = view.session.scope;
  const who = scope === undefined ? "token: every topic" : `token: ${scope.join(", ")}`;
  const nav = html`<header class="top">
<a class="brand" href="/dashboard">delayq</a>
<nav><a href="/dashboard">Topics</a><a href="/dashboard/payments">Payment watches</a><a href="/docs">API docs</a></nav>
<form method="get" action="/dashboard/find" class="row"><input type="text" name="job" placeholder="job id" aria-label="Find a job by id" required><button>Find job</button></form>
<span class="who">${who}</span>
<form method="post" action="/dashboard/logout">${hidden({ csrf: view.session.csrf })}<button class="small" id="sign-out">Sign out</button></form>
</header>`;
  return shell({ title: `${title} · delayq`, nav, body });
}

function loginPage(error?: string): Html {
  return shell({
    title: "Sign in · delayq",
    body: html`<div class="login card">
<h1>delayq dashboard</h1>
${error ? html`<p class="error" id="login-error">${error}</p>` : ""}
<form method="post" action="/dashboard/login">
<label for="token">API token</label>
<input type="password" id="token" name="token" autocomplete="current-password" required autofocus>
<button type="submit" class="primary" id="sign-in">Sign in</button>
</form>
<p class="muted small">One of the API's bearer tokens (DQ_TOKENS). It is kept in an HttpOnly
cookie for this browser session only, and a token limited to some topics sees only those.</p>
</div>`,
  });
}

function errorPage(view: View, error: unknown, log: Logger): Response | Promise<Response> {
  const { c } = view;
  if (error instanceof DelayqError && error.status < 500) {
    return c.html(
      frame(
        view,
        "Error",
        html`<h1>${titleFor(error.code)}</h1><p class="error" id="page-error"><code>${error.code}</code> ${error.message}</p>`,
      ),
      error.status as 400,
    );
  }
  if (error instanceof DelayqError && error.code === "redis_unavailable") {
    c.header("Retry-After", "1");
    return c.html(
      frame(
        view,
        "Redis unavailable",
        html`<h1>Redis does not answer</h1><p class="error" id="page-error">${error.message}. Reload the page in a moment.</p>`,
      ),
      503,
    );
  }
  log({
    level: "error",
    code: "internal_error",
    message: error instanceof Error ? error.message : String(error),
    stack: error instanceof Error ? error.stack : undefined,
    route: `${c.req.method} ${c.req.path}`,
  });
  return c.html(
    frame(
      view,
      "Error",
      html`<h1>Something went wrong</h1><p class="error" id="page-error">Something went wrong inside delayq; it is logged.</p>`,
    ),
    500,
  );
}

function titleFor(code: string): string {
  if (code === "job_not_found" || code === "not_found") return "Not found";
  if (code === "forbidden") return "Not allowed";
  if (code === "invalid_request") return "That did not work";
  return "That did not work";
}

function notFound(): Html {
  return html`<h1>Not found</h1><p>No dashboard page here. <a href="/dashboard">Back to the topics</a>.</p>`;
}

function oldestDue(t: TopicStats, now: number): Html | string {
  const due = t.oldestDueAt;
  if (due === undefined) return html`<span class="muted">nothing waiting</span>`;
  if (due <= now) {
    return html`<span title="${formatTime(due)}">due ${duration(now - due)} ago</span>`;
  }
  return html`<span class="muted" title="${formatTime(due)}">next ${relative(due, now)}</span>`;
}

/** The topic's push config (DESIGN §3), or "pull". Secrets and header values are never shown. */
function delivery(config: TopicConfig, full = false): Html | string {
  const push = (config as Record<string, unknown>).push;
  if (!push || typeof push !== "object") return full ? "pull (consumers pop)" : "pull";
  const p = push as Record<string, unknown>;
  const via = typeof p.via === "string" ? p.via : "direct";
  const url = typeof p.url === "string" ? p.url : "";
  if (!full) return html`push (${via}) <span class="mono small">${url}</span>`;
  const secret = typeof p.secret === "string" && p.secret ? `…${p.secret.slice(-4)}` : "";
  const headers =
    p.headers && typeof p.headers === "object" ? Object.keys(p.headers as object) : [];
  return html`push via <b>${via}</b> to <code>${url}</code>${
    typeof p.timeout === "number" ? html`, timeout ${p.timeout} s` : ""
  }${secret ? html`, secret <code>${secret}</code>` : ""}${
    typeof p.failureUrl === "string" ? html`, failures told to <code>${p.failureUrl}</code>` : ""
  }${headers.length > 0 ? html`, headers ${headers.map((h) => html`<code>${h}</code> `)}` : ""}`;
}

function defaults(config: TopicConfig): Html {
  const parts: Html[] = [];
  if (config.ttr !== undefined) parts.push(html`ttr ${config.ttr} s`);
  if (config.maxAttempts !== undefined) parts.push(html`maxAttempts ${config.maxAttempts}`);
  if (config.backoff !== undefined)
    parts.push(html`backoff <code>${JSON.stringify(config.backoff)}</code>`);
  if (parts.length === 0)
    return html`<span class="muted">the deployment's (DQ_DEFAULT_TTR, DQ_DEFAULT_MAX_ATTEMPTS)</span>`;
  return html`${parts.map((p, i) => html`${i > 0 ? ", " : ""}${p}`)}`;
}

function deadReasonText(reason: NonNullable<Job["deadReason"]>): string {
  return {
    attempts: "attempts used up",
    deadline: "past its deadline",
    buried: "buried",
  }[reason];
}

function pageSize(value: string | undefined): number {
  const n = Number.parseInt(value ?? "", 10);
  if (!Number.isFinite(n)) return DASHBOARD_PAGE_SIZE;
  return Math.min(MAX_PAGE_SIZE, Math.max(1, n));
}

/** The current page's path and query, without the notice of a previous action. */
function here(c: Context): string {
  const url = new URL(c.req.url);
  url.searchParams.delete("done");
  url.searchParams.delete("n");
  return `${url.pathname}${url.search}`;
}

/** Where to go after an action: a dashboard path of this site, never anywhere else. */
function safeBack(value: string, fallback: string): string {
  if (!value) return fallback;
  try {
    const base = "http://dashboard.invalid";
    const url = new URL(value, base);
    const inside = url.pathname === "/dashboard" || url.pathname.startsWith("/dashboard/");
    if (url.origin !== base || !inside || !value.startsWith("/dashboard")) return fallback;
    url.searchParams.delete("done");
    url.searchParams.delete("n");
    return `${url.pathname}${url.search}`;
  } catch {
    return fallback;
  }
}
