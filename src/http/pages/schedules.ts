// The dashboard's schedules: name, cron and zone, topic, next and last fire, paused.
import { html } from "hono/html";
import type { Schedule } from "../../domain/schedules";
import type { TopicScope } from "../../domain/scope";
import { formatTime, type Html, relative } from "./layout";

/** Lists schedules for the dashboard (src/schedules/schedules.ts: Schedules.list). */
export type ScheduleSource = {
  list(
    page: { after?: string; limit?: number },
    scope: TopicScope,
    now: number,
  ): Promise<{ schedules: Schedule[]; next?: string }>;
};

/** Schedules a dashboard page shows. */
export const SCHEDULES_PER_PAGE = 50;

export function schedulesPanel(
  page: { schedules: Schedule[] } | undefined,
  now: number,
  nextHref: string | undefined,
): Html {
  if (page === undefined || page.schedules.length === 0) {
    return html`<p class="card muted" id="no-schedules">No schedules.</p>`;
  }
  const when = (at: number | null | undefined) =>
    at === null || at === undefined
      ? html`<span class="muted">none</span>`
      : html`${formatTime(at)} <span class="muted small">(${relative(at, now)})</span>`;
  return html`<table id="schedules">
<thead><tr><th>Name</th><th>Cron</th><th>Time zone</th><th>Topic</th><th>Next run</th>
<th>Last run</th><th>State</th></tr></thead>
<tbody>${page.schedules.map(
    (s) => html`<tr>
<td class="mono">${s.name}</td><td><code>${s.cron}</code></td><td>${s.timezone}</td>
<td><a href="/dashboard/topics/${encodeURIComponent(s.topic)}">${s.topic}</a></td>
<td>${when(s.nextRunAt)}</td><td>${when(s.lastRunAt)}</td>
<td><span class="badge">${s.paused ? "paused" : "active"}</span></td></tr>`,
  )}</tbody></table>
${nextHref ? html`<div class="pager"><a href="${nextHref}" id="next-schedules">Next page →</a></div>` : ""}`;
}
