// The dashboard's shared page parts: the frame around every page, the sign-in, error and not-found
// pages, and the small renderings of a topic's due time, delivery, defaults and hidden fields.
import { html } from "hono/html";
import { DelayqError } from "../../domain/errors";
import { mask, maskPush, type PushConfig } from "../../domain/push";
import type { Job, TopicConfig, TopicStats } from "../../domain/schemas";
import type { Logger } from "../../log";
import { BUG_MESSAGE, logBug, seeTheLogs } from "../errors";
import type { View } from "./dashboard-view";
import { count, duration, formatTime, type Html, relative, shell } from "./layout";

export function frame(view: Omit<View, "cursors">, title: string, body: Html): Html {
  const { scope, accounts } = view.session;
  const who =
    scope === undefined
      ? "token: every topic"
      : `token: ${[...scope, ...(accounts ?? [])].join(", ") || "no topic"}`;
  const nav = html`<header class="top">
<a class="brand" href="/dashboard">delayq</a>
<nav><a href="/dashboard">Topics</a><a href="/dashboard/payments">Payment watches</a><a href="/dashboard/schedules">Schedules</a><a href="/docs">API docs</a></nav>
<form method="get" action="/dashboard/find" class="row"><input type="text" name="job" placeholder="job id" aria-label="Find a job by id" required><button>Find job</button></form>
<span class="who">${who}</span>
<form method="post" action="/dashboard/logout">${hidden({ csrf: view.session.csrf })}<button class="small" id="sign-out">Sign out</button></form>
</header>`;
  return shell({ title: `${title} · delayq`, nav, body });
}

export function loginPage(error?: string): Html {
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

export function errorPage(view: View, error: unknown, log: Logger): Response | Promise<Response> {
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
  const requestId: string = c.get("requestId");
  if (error instanceof DelayqError && error.code === "redis_unavailable") {
    // What Redis said (its address, maybe) is for the log line the page points at.
    const route = `${c.req.method} ${c.req.path}`;
    log({
      level: "error",
      code: error.code,
      message: error.message,
      detail: error.detail,
      route,
      requestId,
    });
    c.header("Retry-After", "1");
    return c.html(
      frame(
        view,
        "Redis unavailable",
        html`<h1>Redis does not answer</h1><p class="error" id="page-error">${error.message}; ${seeTheLogs(requestId)}. Reload the page in a moment.</p>`,
      ),
      503,
    );
  }
  logBug(log, error, `${c.req.method} ${c.req.path}`, requestId);
  return c.html(
    frame(
      view,
      "Error",
      html`<h1>Something went wrong</h1><p class="error" id="page-error">${BUG_MESSAGE}; ${seeTheLogs(requestId)}.</p>`,
    ),
    500,
  );
}

function titleFor(code: string): string {
  if (code === "job_not_found" || code === "not_found") return "Not found";
  if (code === "forbidden") return "Not allowed";
  return "That did not work";
}

export function notFound(): Html {
  return html`<h1>Not found</h1><p>No dashboard page here. <a href="/dashboard">Back to the topics</a>.</p>`;
}

export function oldestDue(t: TopicStats, now: number): Html | string {
  const due = t.oldestDueAt;
  if (due === undefined) return html`<span class="muted">nothing waiting</span>`;
  if (due <= now) {
    return html`<span title="${formatTime(due)}">due ${duration(now - due)} ago</span>`;
  }
  return html`<span class="muted" title="${formatTime(due)}">next ${relative(due, now)}</span>`;
}

/** The topic's push config (DESIGN §3), or "pull". Secrets and header values are shown masked. */
export function delivery(config: TopicConfig, full = false): Html | string {
  const push = (config as Record<string, unknown>).push;
  if (!push || typeof push !== "object") return full ? "pull (consumers pop)" : "pull";
  const p = push as Record<string, unknown>;
  const via = typeof p.via === "string" ? p.via : "direct";
  const url = typeof p.url === "string" ? p.url : "";
  if (!full) return html`push (${via}) <span class="mono small">${url}</span>`;
  const secret = typeof p.secret === "string" && p.secret ? maskPush(p as PushConfig).secret : "";
  // Header values (an API key, often) masked as the secret is.
  const headers =
    p.headers && typeof p.headers === "object"
      ? Object.entries(p.headers as Record<string, unknown>).map(
          ([name, value]) => `${name}: ${typeof value === "string" ? mask(value) : "…"}`,
        )
      : [];
  return html`push via <b>${via}</b> to <code>${url}</code>${
    typeof p.timeout === "number" ? html`, timeout ${p.timeout} s` : ""
  }${secret ? html`, secret <code>${secret}</code>` : ""}${
    typeof p.failureUrl === "string" ? html`, failures told to <code>${p.failureUrl}</code>` : ""
  }${headers.length > 0 ? html`, headers ${headers.map((h) => html`<code>${h}</code> `)}` : ""}${flowLimits(p)}`;
}

/** A push config's flow control (`rate`, `parallelism`), or "" for none. */
function flowLimits(p: Record<string, unknown>): Html | string {
  const parts: Html[] = [];
  if (typeof p.rate === "number")
    parts.push(html`<span id="flow-rate">at most ${p.rate} a second</span>`);
  if (typeof p.parallelism === "number")
    parts.push(
      html`<span id="flow-parallelism">at most ${p.parallelism} unanswered at once</span>`,
    );
  if (parts.length === 0) return "";
  return html`; flow control: ${parts.map((part, i) => html`${i > 0 ? ", " : ""}${part}`)}`;
}

/** A push topic's held-back jobs (due, not yet sent), and since when; "" for a pulled topic. */
export function heldBack(t: TopicStats, now: number): Html | string {
  if (t.heldBack === undefined) return "";
  const since = t.heldBackSince;
  const age =
    since !== undefined && since <= now ? html`, the oldest due ${duration(now - since)} ago` : "";
  return html`<dt>Held back</dt><dd id="held-back">${count(t.heldBack)}${age}</dd>`;
}

export function defaults(config: TopicConfig): Html {
  const parts: Html[] = [];
  if (config.ttr !== undefined) parts.push(html`ttr ${config.ttr} s`);
  if (config.maxAttempts !== undefined) parts.push(html`maxAttempts ${config.maxAttempts}`);
  if (config.backoff !== undefined)
    parts.push(html`backoff <code>${JSON.stringify(config.backoff)}</code>`);
  if (parts.length === 0)
    return html`<span class="muted">the deployment's (DQ_DEFAULT_TTR, DQ_DEFAULT_MAX_ATTEMPTS)</span>`;
  return html`${parts.map((p, i) => html`${i > 0 ? ", " : ""}${p}`)}`;
}

export function deadReasonText(reason: NonNullable<Job["deadReason"]>): string {
  return {
    attempts: "attempts used up",
    deadline: "past its deadline",
    buried: "buried",
  }[reason];
}

export function hidden(fields: Record<string, string>): Html {
  return html`${Object.entries(fields)
    .filter(([, value]) => value !== "")
    .map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}`;
}
