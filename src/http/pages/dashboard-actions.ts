// The dashboard's actions: the forms that post them, the confirmation step, running one against
// the queue (kick, delete, bury, pause, resume, promote, reschedule), and the notice shown after
// it.
import type { Context } from "hono";
import { html } from "hono/html";
import { sameText } from "../../domain/bytes";
import { clip, DelayqError } from "../../domain/errors";
import type { Job } from "../../domain/schemas";
import type { DelayQueue } from "../../queue";
import type { AppEnv } from "../context";
import { frame, hidden } from "./dashboard-pieces";
import {
  ACTIONS,
  type Action,
  BULK,
  CONFIRMED,
  safeBack,
  topicHref,
  type View,
} from "./dashboard-view";
import { count, type Html } from "./layout";
import { type DashboardSession, fromThisSite } from "./session";

export const UNREADABLE_FORM =
  "The form could not be read: send it as application/x-www-form-urlencoded or as well-formed multipart/form-data";

/** The posted form; a body that is not the form its Content-Type says is a 400, not a 500. */
export async function readForm(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  try {
    return await c.req.parseBody();
  } catch {
    throw new DelayqError("invalid_request", UNREADABLE_FORM);
  }
}

export async function act(view: View): Promise<Response> {
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
    throw new DelayqError("invalid_request", `Unknown action "${clip(field("action"))}"`);
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
    case "promote":
      await queue.promote(id);
      break;
    case "reschedule":
      await queue.reschedule(id, { delay: delayOf(field("delay")) });
      break;
  }
  const url = new URL(back, "http://dashboard.invalid");
  url.searchParams.set("done", action);
  url.searchParams.set("n", String(n));
  return c.redirect(`${url.pathname}${url.search}`, 303);
}

/** The reschedule form's `delay`, seconds: a number the API then checks (NaN is refused). */
function delayOf(text: string): number {
  return text.trim() === "" ? Number.NaN : Number(text);
}

/** Pause or resume: one PATCH of `paused` (atomic), so the rest of the config is left alone. */
async function setPaused(queue: DelayQueue, topic: string, paused: boolean): Promise<void> {
  await queue.updateConfig(topic, { paused: paused ? true : null });
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
  promote: (f) => html`Make job <code>${f.id}</code> ready now?`,
  reschedule: (f) => html`Reschedule job <code>${f.id}</code>?`,
};

const VERB: Record<Action, string> = {
  kick: "Kick",
  "kick-dead": "Kick them",
  delete: "Delete",
  "delete-dead": "Delete them",
  bury: "Bury",
  pause: "Pause",
  resume: "Resume",
  promote: "Promote",
  reschedule: "Reschedule",
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
  promote: () => "Made the job ready now.",
  reschedule: () => "Gave the job its new due time.",
};

export function notice(c: Context): Html | string {
  const done = c.req.query("done") as Action | undefined;
  if (!done || !ACTIONS.includes(done)) return "";
  const n = Number.parseInt(c.req.query("n") ?? "1", 10);
  return html`<p class="notice" id="notice">${DONE[done](Number.isFinite(n) ? n : 1)}</p>`;
}

export function jobActions(job: Job, session: DashboardSession, back: string, size: string): Html {
  const f = { topic: job.topic, id: job.id };
  const del = actionForm(session, "delete", f, "Delete", back, `danger ${size}`);
  if (job.state === "dead")
    return html`${actionForm(session, "kick", f, "Kick", back, size)} ${del}`;
  if (job.state === "reserved") {
    return html`${actionForm(session, "bury", f, "Bury", back, `danger ${size}`)} ${del}`;
  }
  if (job.state === "delayed") {
    return html`${actionForm(session, "promote", f, "Promote", back, size)} ${del}`;
  }
  if (job.state === "ready") return del;
  return html``;
}

/** A delayed or ready job's reschedule form: a new due time, seconds from now. */
export function rescheduleForm(job: Job, session: DashboardSession, back: string): Html {
  if (job.state !== "delayed" && job.state !== "ready") return html``;
  return html`<form method="post" action="/dashboard/actions" class="inline" id="reschedule">${hidden(
    { action: "reschedule", topic: job.topic, id: job.id, back, csrf: session.csrf },
  )}<label>Due in <input type="number" name="delay" min="0" step="any" required class="short"> s</label>
<button type="submit" data-action="reschedule">Reschedule</button></form>`;
}

export function actionForm(
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
