// /docs: the OpenAPI document rendered on the server as one page: every route with its parameters,
// request fields, responses and error codes, and every schema with its fields, units and examples.
import { html } from "hono/html";
import { ERROR_STATUS, type ErrorCode } from "../../domain/errors";
import type { OpenApiDocument } from "./docs-openapi";
import { operationSection, operations } from "./docs-operations";
import { schemaSection } from "./docs-schemas";
import { type Html, inlineMarkdown, shell } from "./layout";

export type { OpenApiDocument } from "./docs-openapi";

/** What each error code means, for the page's table of errors: one line for every code. */
export const ERROR_MEANINGS: Readonly<Record<ErrorCode, string>> = {
  invalid_request:
    "Malformed JSON, JSON nested over 512 levels, a wrong type, a number out of range, a bad id or topic, an unknown field or query parameter; the message names the field.",
  unauthorized: "No bearer token, or one that is not in `DQ_TOKENS`.",
  forbidden: "The token is limited to other topics, or to other payment accounts.",
  not_found: "No such route.",
  job_not_found: "No such job, or its record outlived the retention window.",
  method_not_allowed: "The route exists, but not with this method.",
  job_exists: "The id belongs to a job of another topic.",
  job_reserved: "`replace` on a job a consumer holds.",
  not_reserved: "finish, touch, release or bury on a job that is not reserved.",
  stale_receipt: "The receipt is from a reservation that has ended.",
  payload_too_large:
    "A job body over `DQ_MAX_BODY_BYTES`, a request over `DQ_MAX_REQUEST_BYTES`, or a watch's `metadata` over 16 KiB.",
  too_many_watches:
    "The token has `DQ_MAX_WATCHES_PER_TOKEN` watches polling (payments and refunds together): stop some or wait for some to end.",
  internal_error:
    "A bug; logged with the answer's request id (`x-request-id`, `requestId`), which the message quotes.",
  misconfigured:
    "The deployment's variables are wrong (a Worker then answers every route so); the log line of the request id names the variable.",
  redis_unavailable: "Redis does not answer; retry after `Retry-After` seconds.",
  qstash_unavailable:
    "A delete could not cancel the job's pending QStash message; retry after `Retry-After` seconds (a retried delete cancels again).",
  invalid_state:
    "reschedule of a job that is not delayed or ready, or promote of one that is not delayed (the message says its state).",
  push_topic: "pop on a push topic: its jobs are delivered to its webhook, not popped.",
  payment_not_found: "No payment watch with this provider, account and outTradeNo.",
  payment_exists: "The order is watched already, for topics the token may not act on.",
  refund_not_found: "No refund watch with this provider, account and outRefundNo.",
  schedule_not_found: "No schedule of that name (among the topics the token may act on).",
  refund_exists:
    "The refund is watched already, for topics the token may not act on or for another outTradeNo.",
  unknown_account:
    "The payment account is not configured (`DQ_ALIPAY_ACCOUNTS`, `DQ_WECHATPAY_ACCOUNTS`).",
};

/** Renders the whole page for a document. Pure: the same document gives the same page. */
export function docsPage(doc: OpenApiDocument): Html {
  const ops = operations(doc);
  const tags = [...new Set(ops.map((op) => op.tag))];
  const schemas = Object.entries(doc.components?.schemas ?? {}).sort(([a], [b]) =>
    a.localeCompare(b),
  );
  const nav = html`<header class="top"><a class="brand" href="/docs">delayq API</a>
<nav><a href="#routes">Routes</a><a href="#operators">Operators</a><a href="#errors">Errors</a><a href="#schemas">Schemas</a>
<a href="/openapi.json">openapi.json</a><a href="/dashboard">Dashboard</a></nav></header>`;
  const body = html`<h1>${doc.info.title} API <span class="muted small">v${doc.info.version}</span></h1>
<div class="card"><p>${inlineMarkdown(doc.info.description)}</p>
<p>Conventions: JSON in and out; times in responses are <b>unix milliseconds</b>; <code>delay</code>,
<code>ttr</code> and backoff steps in requests are <b>seconds</b>; <code>runAt</code> and
<code>deadline</code> are unix ms or ISO-8601. Routes marked <span class="badge">token</span> need
<code>Authorization: Bearer &lt;token&gt;</code>. The machine-readable document is
<a href="/openapi.json">/openapi.json</a>.</p></div>
<h2 id="routes">Routes</h2>
<ul class="toc">${tags.map(
    (tag) =>
      html`<li><b>${tag}</b><ul>${ops
        .filter((op) => op.tag === tag)
        .map(
          (op) =>
            html`<li><a href="#${op.anchor}"><span class="mono">${op.method.toUpperCase()} ${op.path}</span></a></li>`,
        )}</ul></li>`,
  )}</ul>
${tags.map(
  (tag) =>
    html`<h2 id="tag-${tag}">${tag}</h2>
<p>${inlineMarkdown(doc.tags?.find((described) => described.name === tag)?.description)}</p>${ops
      .filter((op) => op.tag === tag)
      .map((op) => operationSection(op, doc))}`,
)}
${operatorRoutes()}
<h2 id="errors">Errors</h2>
<p>Every error is <code>{"error": {"code": "...", "message": "..."}}</code>; the code is stable, the
message says what to change.</p>
<table id="error-codes"><thead><tr><th>Status</th><th>Code</th><th>When</th></tr></thead><tbody>
${(Object.entries(ERROR_STATUS) as [ErrorCode, number][]).map(
  ([code, status]) =>
    html`<tr><td class="n">${status}</td><td><code>${code}</code></td><td>${inlineMarkdown(ERROR_MEANINGS[code] ?? "See the message.")}</td></tr>`,
)}
</tbody></table>
<h2 id="schemas">Schemas</h2>
${schemas.map(([name, schema]) => schemaSection(name, schema, doc))}`;
  return shell({ title: `${doc.info.title} API`, nav, body });
}

/** The operator's page that is not an API route, so not in the OpenAPI document (/metrics is). */
function operatorRoutes(): Html {
  return html`<h2 id="operators">For operators</h2>
<section class="op card" id="op-get-dashboard">
<h3><span class="badge get">GET</span> <span class="mono path">/dashboard</span> <span class="badge">sign-in</span></h3>
<p><b>The dashboard</b>: topics and their counts, jobs by state, a job by id, kick, delete, bury,
pause and resume, payment watches. Sign in with an API token; it is kept in an HttpOnly cookie.</p>
</section>`;
}
