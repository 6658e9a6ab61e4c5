// The dashboard's pages: the topics overview, one topic's jobs by state, one job, the payment
// watches, and the find box's redirect to a topic or a job.
import { html } from "hono/html";
import { clip, DelayqError } from "../../domain/errors";
import type { Job, ListableState, TopicStats } from "../../domain/schemas";
import { TopicName } from "../../domain/schemas";
import { cursorGiven, readTopics } from "../topic-cursors";
import { actionForm, jobActions, notice, rescheduleForm } from "./dashboard-actions";
import { deadReasonText, defaults, delivery, frame, heldBack, oldestDue } from "./dashboard-pieces";
import { BULK, here, jobHref, pageSize, STATES, topicHref, type View } from "./dashboard-view";
import { bodyText, count, formatTime, type Html, indentJson, preview, relative } from "./layout";
import {
  type PaymentWatchSource,
  type RefundWatchPage,
  type RefundWatchSource,
  refundsPanel,
  WATCHES_PER_PAGE,
  watchesPanel,
} from "./payments";
import type { DashboardSession } from "./session";

export async function topicsPage({ c, session, queue, cursors }: View): Promise<Response> {
  const limit = pageSize(c.req.query("limit"));
  const after = c.req.query("after") || undefined;
  const page = await readTopics(queue, cursors, { after, limit });
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
${
  // A token limited to some topics pages with sealed cursors only (http/topic-cursors.ts).
  session.scope === undefined
    ? html`<form method="get" action="/dashboard" class="row"><label for="after">List topics after</label>
<input type="text" id="after" name="after" placeholder="name (A–Z order)" value="${after ?? ""}"><button>List</button></form>`
    : ""
}
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

export async function find({ c }: View): Promise<Response> {
  const topic = c.req.query("topic")?.trim();
  const id = c.req.query("job")?.trim();
  if (topic) {
    if (!TopicName.safeParse(topic).success) {
      throw new DelayqError(
        "invalid_request",
        `"${clip(topic)}" is not a topic name: ${TOPIC_RULE}`,
      );
    }
    return c.redirect(topicHref(topic), 303);
  }
  if (id) return c.redirect(jobHref(id), 303);
  return c.redirect("/dashboard", 303);
}

const TOPIC_RULE = "1-100 characters of A-Z a-z 0-9 _ . : -";

export async function topicPage({ c, session, queue }: View): Promise<Response> {
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
${heldBack(stats, now)}
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
    }${
      state === "dead" && job.lastError
        ? html`<br><span class="small last-error" title="${job.lastError.message}">${preview(job.lastError.message)}</span>`
        : ""
    }</td>
<td class="n">${job.attempts} / ${job.maxAttempts}</td>
<td><code class="preview">${preview(bodyText(job.body))}</code></td>
<td class="row">${jobActions(job, session, back, "small")}</td>
</tr>`;
  })}</tbody></table>`;
}

export async function jobPage({ c, session, queue }: View): Promise<Response> {
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
<dt>Last error</dt><dd id="job-last-error">${
    job.lastError
      ? html`<code>${job.lastError.message}</code> <span class="muted small">(attempt ${job.lastError.attempt}, ${formatTime(job.lastError.at)}, ${relative(job.lastError.at, now)})</span>`
      : html`<span class="muted">—</span>`
  }</dd>
</dl>
</div>
<div class="row">${jobActions(job, session, back, "")} ${rescheduleForm(job, session, back)}</div>
<h2>Body</h2>
<pre id="job-body"><code>${indentJson(bodyText(job.body))}</code></pre>`;
  return c.html(frame({ c, session, queue }, `Job ${job.id}`, body));
}

export async function paymentsPage(
  view: View,
  source: PaymentWatchSource | undefined,
  refundSource?: RefundWatchSource,
): Promise<Response> {
  const { c, session, queue, cursors } = view;
  // A page's cursor is the last watch it read, maybe another account's (its id a hash of the
  // order): a limited session's cursors are sealed, and only those taken (topic-cursors.ts).
  const limited = session.scope !== undefined;
  const cursor = await cursorGiven(cursors, c.req.query("cursor") || undefined, "watch", limited);
  const page = source
    ? await source.list({
        limit: WATCHES_PER_PAGE,
        scope: session.scope,
        accounts: session.accounts,
        ...(cursor === undefined ? {} : { cursor }),
      })
    : undefined;
  const nextCursor =
    page?.cursor && (limited ? await cursors.seal(page.cursor, "watch") : page.cursor);
  const next = nextCursor && `/dashboard/payments?${new URLSearchParams({ cursor: nextCursor })}`;
  const refunds = refundSource && (await refundPage(view, refundSource));
  const body = html`<h1>Payment watches</h1>
<p class="muted">Orders delayq polls at Alipay or WeChat Pay until they are paid, closed or past their deadline.</p>
${watchesPanel(page, queue.clock(), next || undefined)}
${refundsPanel(refunds?.page, queue.clock(), refunds?.next)}`;
  return c.html(frame({ c, session, queue }, "Payment watches", body));
}

/** A page of refund watches (its own cursor, `refunds`, sealed for a limited session). */
async function refundPage(
  { c, session, cursors }: View,
  source: RefundWatchSource,
): Promise<{ page: RefundWatchPage; next?: string }> {
  const limited = session.scope !== undefined;
  const cursor = await cursorGiven(cursors, c.req.query("refunds") || undefined, "watch", limited);
  const page = await source.list({
    limit: WATCHES_PER_PAGE,
    scope: session.scope,
    accounts: session.accounts,
    ...(cursor === undefined ? {} : { cursor }),
  });
  const nextCursor =
    page.cursor && (limited ? await cursors.seal(page.cursor, "watch") : page.cursor);
  if (!nextCursor) return { page };
  return { page, next: `/dashboard/payments?${new URLSearchParams({ refunds: nextCursor })}` };
}
