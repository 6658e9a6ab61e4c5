// /docs: the OpenAPI document rendered on the server as one page: every route with its parameters,
// request fields, responses and error codes, and every schema with its fields, units and examples.
import { html } from "hono/html";
import { ERROR_STATUS, type ErrorCode } from "../../domain/errors";
import { type Html, inlineMarkdown, shell } from "./layout";

/** The parts of an OpenAPI 3.1 document this page reads. */
type Schema = {
  $ref?: string;
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  description?: string;
  example?: unknown;
  examples?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
};
type Parameter = {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
  example?: unknown;
};
type Media = { schema?: Schema; example?: unknown };
type Operation = {
  tags?: string[];
  summary?: string;
  description?: string;
  security?: unknown[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; description?: string; content?: Record<string, Media> };
  responses?: Record<string, { description?: string; content?: Record<string, Media> }>;
};
export type OpenApiDocument = {
  info: { title: string; version: string; description?: string };
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
};

/**
 * What each error code means, for the page's table of errors (codes the design names before they
 * exist are harmless: the table lists the codes ERROR_STATUS has).
 */
export const ERROR_MEANINGS: Readonly<Record<string, string>> = {
  invalid_request:
    "Malformed JSON, a wrong type, a number out of range, a bad id or topic, an unknown field or query parameter; the message names the field.",
  unauthorized: "No bearer token, or one that is not in `DQ_TOKENS`.",
  forbidden: "The token is limited to other topics.",
  not_found: "No such route.",
  job_not_found: "No such job, or its record outlived the retention window.",
  method_not_allowed: "The route exists, but not with this method.",
  job_exists: "The id belongs to a job of another topic.",
  job_reserved: "`replace` on a job a consumer holds.",
  not_reserved: "finish, touch, release or bury on a job that is not reserved.",
  stale_receipt: "The receipt is from a reservation that has ended.",
  payload_too_large:
    "A job body over `DQ_MAX_BODY_BYTES`, or a request over `DQ_MAX_REQUEST_BYTES`.",
  internal_error: "A bug, or a misconfigured deployment (the message names the variable); logged.",
  redis_unavailable: "Redis does not answer; retry after `Retry-After` seconds.",
  push_topic: "pop on a push topic: its jobs are delivered to its webhook, not popped.",
  payment_not_found: "No payment watch with this provider, account and outTradeNo.",
  unknown_account:
    "The payment account is not configured (`DQ_ALIPAY_ACCOUNTS`, `DQ_WECHATPAY_ACCOUNTS`).",
};

const METHODS = ["get", "post", "put", "patch", "delete"] as const;

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
    html`<h2 id="tag-${tag}">${tag}</h2>${ops
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

type Op = { tag: string; method: string; path: string; op: Operation; anchor: string };

function operations(doc: OpenApiDocument): Op[] {
  const out: Op[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const anchor = `op-${method}-${path.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "")}`;
      out.push({ tag: op.tags?.[0] ?? "other", method, path, op, anchor });
    }
  }
  return out;
}

function operationSection({ method, path, op, anchor }: Op, doc: OpenApiDocument): Html {
  const secured = (op.security?.length ?? 0) > 0;
  const params = op.parameters ?? [];
  const body = op.requestBody;
  return html`<section class="op card" id="${anchor}">
<h3><span class="badge ${method}">${method.toUpperCase()}</span> <span class="mono path">${path}</span>
${secured ? html`<span class="badge" title="Authorization: Bearer &lt;token&gt;">token</span>` : html`<span class="badge">no token</span>`}</h3>
<p><b>${inlineMarkdown(op.summary)}</b></p>
${op.description ? html`<p>${inlineMarkdown(op.description)}</p>` : ""}
${params.length > 0 ? parametersTable(params, doc) : ""}
${body?.content ? requestBody(body, doc) : ""}
<h4>Responses</h4>
${responses(op, doc)}
</section>`;
}

function parametersTable(params: Parameter[], doc: OpenApiDocument): Html {
  return html`<h4>Parameters</h4><table class="params"><thead><tr><th>Name</th><th>In</th><th>Type</th>
<th>Required</th><th>Constraints</th><th>Description</th><th>Example</th></tr></thead><tbody>
${params.map((p) => {
  const schema = p.schema ?? {};
  const example = p.example ?? schema.example;
  return html`<tr><td><code>${p.name}</code></td><td>${p.in}</td><td class="schema-type">${typeText(schema, doc)}</td>
<td>${p.required ? "yes" : "no"}</td><td>${constraints(deref(schema, doc))}</td>
<td>${inlineMarkdown(p.description ?? schema.description)}</td><td>${exampleCell(example)}</td></tr>`;
})}</tbody></table>`;
}

function requestBody(body: NonNullable<Operation["requestBody"]>, doc: OpenApiDocument): Html {
  return html`${Object.entries(body.content ?? {}).map(([type, media]) => {
    const schema = media.schema ?? {};
    const name = refName(schema);
    const example = media.example ?? exampleOf(schema, doc);
    return html`<h4>Request body <span class="muted small">${type}${body.required ? ", required" : ", optional"}</span></h4>
${name ? html`<p>A <a href="#schema-${name}">${name}</a>.${inlineMarkdown(deref(schema, doc).description ? ` ${deref(schema, doc).description}` : "")}</p>` : ""}
${fieldsTable(schema, doc)}
${deref(schema, doc).additionalProperties === false ? html`<p class="muted small">Unknown fields are refused with 400 <code>invalid_request</code>.</p>` : ""}
${example === undefined ? "" : html`<p class="muted small">Example</p><pre><code>${JSON.stringify(example, null, 2)}</code></pre>`}`;
  })}`;
}

function responses(op: Operation, doc: OpenApiDocument): Html {
  const entries = Object.entries(op.responses ?? {});
  return html`${entries.map(([status, response]) => {
    const content = Object.entries(response.content ?? {});
    const ok = status.startsWith("2");
    return html`<div class="response" data-status="${status}">
<p><span class="badge ${ok ? "get" : "delete"}">${status}</span> ${inlineMarkdown(response.description)}${content.map(
      ([type, media]) => {
        const schema = media.schema;
        if (!schema) return html` <span class="muted small">${type}</span>`;
        const name = refName(schema);
        const shape = name ? html`<a href="#schema-${name}">${name}</a>` : typeText(schema, doc);
        return html` → ${shape} <span class="muted small">${type}</span>`;
      },
    )}</p>
${ok ? content.map(([, media]) => responseShape(media, doc)) : ""}
</div>`;
  })}`;
}

function responseShape(media: Media, doc: OpenApiDocument): Html | string {
  if (!media.schema) return "";
  const example = media.example ?? exampleOf(media.schema, doc);
  return html`${fieldsTable(media.schema, doc)}${
    example === undefined
      ? ""
      : html`<p class="muted small">Example</p><pre><code>${JSON.stringify(example, null, 2)}</code></pre>`
  }`;
}

function schemaSection(name: string, schema: Schema, doc: OpenApiDocument): Html {
  const example = exampleOf(schema, doc);
  return html`<section class="card" id="schema-${name}">
<h3 class="mono">${name}</h3>
${schema.description ? html`<p>${inlineMarkdown(schema.description)}</p>` : ""}
${schema.properties ? fieldsTable(schema, doc) : html`<p>${typeText(schema, doc)} ${constraints(schema)}</p>`}
${example === undefined ? "" : html`<p class="muted small">Example</p><pre><code>${JSON.stringify(example, null, 2)}</code></pre>`}
</section>`;
}

type Row = { name: string; schema: Schema; required: boolean };

/** The fields of an object schema (its $ref resolved), nested objects as dotted rows. */
function fieldsTable(schema: Schema, doc: OpenApiDocument): Html | string {
  const rows = fieldRows(deref(schema, doc), doc, "", 0);
  if (rows.length === 0) return "";
  return html`<table class="fields"><thead><tr><th>Field</th><th>Type</th><th>Required</th>
<th>Constraints</th><th>Description</th><th>Example</th></tr></thead><tbody>
${rows.map((row) => {
  // A named schema ($ref) is documented in its own section: only the field's own words here.
  const resolved = row.schema.$ref ? {} : row.schema;
  return html`<tr><td><code>${row.name}</code></td><td class="schema-type">${typeText(row.schema, doc)}</td>
<td>${row.required ? "yes" : "no"}</td><td>${constraints(resolved)}</td>
<td>${inlineMarkdown(row.schema.description ?? resolved.description)}</td>
<td>${exampleCell(row.schema.example ?? resolved.example)}</td></tr>`;
})}</tbody></table>`;
}

function fieldRows(schema: Schema, doc: OpenApiDocument, prefix: string, depth: number): Row[] {
  const rows: Row[] = [];
  const required = new Set(schema.required ?? []);
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const path = `${prefix}${name}`;
    rows.push({ name: path, schema: property, required: required.has(name) });
    // Inline objects are spelled out; named ones ($ref) link to their own section.
    if (depth < 3 && !property.$ref) {
      if (property.properties) rows.push(...fieldRows(property, doc, `${path}.`, depth + 1));
      else if (property.items?.properties) {
        rows.push(...fieldRows(property.items, doc, `${path}[].`, depth + 1));
      }
    }
  }
  return rows;
}

function typeText(schema: Schema, doc: OpenApiDocument): Html | string {
  const name = refName(schema);
  if (name) return html`<a href="#schema-${name}">${name}</a>`;
  const variants = schema.anyOf ?? schema.oneOf;
  if (variants) {
    return html`one of:<ul class="variants">${variants.map((v) => {
      const resolved = deref(v, doc);
      const rows = !v.$ref && resolved.properties ? fieldRows(resolved, doc, "", 2) : [];
      return html`<li>${typeText(v, doc)} ${constraints(resolved)}${
        rows.length > 0
          ? html` with ${rows.map((r, i) => html`${i > 0 ? ", " : ""}<code>${r.name}</code>${r.required ? "" : "?"}`)}`
          : ""
      }${v.description ? html` — ${inlineMarkdown(v.description)}` : ""}</li>`;
    })}</ul>`;
  }
  if (schema.const !== undefined) return html`<code>${JSON.stringify(schema.const)}</code>`;
  if (schema.enum) {
    return html`${schema.enum.map((v, i) => html`${i > 0 ? " | " : ""}<code>${JSON.stringify(v)}</code>`)}`;
  }
  const type = Array.isArray(schema.type) ? schema.type.join(" | ") : schema.type;
  if (type === "array") return html`array of ${schema.items ? typeText(schema.items, doc) : "any"}`;
  if (type === "object" && !schema.properties && schema.additionalProperties) {
    const values = schema.additionalProperties;
    return html`object of ${typeof values === "object" ? typeText(values, doc) : "any"}`;
  }
  if (!type) return "any JSON value";
  return schema.format ? `${type} (${schema.format})` : type;
}

function constraints(schema: Schema): string {
  const parts: string[] = [];
  const { minimum: min, maximum: max } = schema;
  if (min !== undefined && max !== undefined) parts.push(`${min} to ${max}`);
  else if (min !== undefined) parts.push(`≥ ${min}`);
  else if (max !== undefined) parts.push(`≤ ${max}`);
  if (schema.exclusiveMinimum !== undefined) parts.push(`> ${schema.exclusiveMinimum}`);
  if (schema.exclusiveMaximum !== undefined) parts.push(`< ${schema.exclusiveMaximum}`);
  if (schema.minLength !== undefined || schema.maxLength !== undefined) {
    parts.push(`${schema.minLength ?? 0}–${schema.maxLength ?? "∞"} characters`);
  }
  if (schema.minItems !== undefined || schema.maxItems !== undefined) {
    parts.push(`${schema.minItems ?? 0}–${schema.maxItems ?? "∞"} items`);
  }
  if (schema.pattern) parts.push(`pattern ${schema.pattern}`);
  if (schema.default !== undefined) parts.push(`default ${JSON.stringify(schema.default)}`);
  return parts.join("; ");
}

/** A short example in a table cell; a long one would crowd the table (the body example has it). */
function exampleCell(example: unknown): Html | string {
  if (example === undefined) return "";
  const text = JSON.stringify(example);
  return text.length > 60 ? "" : html`<code>${text}</code>`;
}

/** The schema's example, or one assembled from its fields' examples. */
function exampleOf(schema: Schema, doc: OpenApiDocument, depth = 0): unknown {
  const resolved = deref(schema, doc);
  if (schema.example !== undefined) return schema.example;
  if (resolved.example !== undefined) return resolved.example;
  if (depth > 3 || !resolved.properties) return undefined;
  const out: Record<string, unknown> = {};
  for (const [name, property] of Object.entries(resolved.properties)) {
    const value = exampleOf(property, doc, depth + 1);
    if (value !== undefined) out[name] = value;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function refName(schema: Schema): string | undefined {
  return schema.$ref?.startsWith("#/components/schemas/")
    ? schema.$ref.slice("#/components/schemas/".length)
    : undefined;
}

function deref(schema: Schema, doc: OpenApiDocument): Schema {
  const name = refName(schema);
  return (name && doc.components?.schemas?.[name]) || schema;
}

/** The routes that are not JSON, so not in the OpenAPI document. */
function operatorRoutes(): Html {
  return html`<h2 id="operators">For operators</h2>
<section class="op card" id="op-get-metrics">
<h3><span class="badge get">GET</span> <span class="mono path">/metrics</span> <span class="badge">token</span></h3>
<p><b>Prometheus metrics</b>, text format 0.0.4 (<code>text/plain; version=0.0.4</code>): per topic
<code>delayq_jobs{topic,state}</code> (state <code>delayed</code>, <code>ready</code>,
<code>reserved</code>, <code>dead</code>), <code>delayq_oldest_due_age_seconds{topic}</code> (seconds)
and <code>delayq_topic_paused{topic}</code>; <code>delayq_topics</code>,
<code>delayq_metrics_topics_truncated</code> and <code>delayq_metrics_redis_requests</code> about the
scrape; and the process's counters <code>delayq_tick_slices_total{step}</code>,
<code>delayq_tick_work_total{step,kind}</code>, <code>delayq_tick_step_failures_total{step}</code>,
<code>delayq_deliveries_total{topic,outcome}</code>, <code>delayq_polls_total{provider,outcome}</code>
with <code>delayq_process_start_time_seconds</code>.</p>
<p>Reads at most <code>DQ_METRICS_MAX_TOPICS</code> topics (default 1000) in pages of 100, one Redis
request per page. A token limited to some topics sees only those. 401 <code>unauthorized</code>
without a valid token; 503 <code>redis_unavailable</code> when Redis does not answer.</p>
</section>
<section class="op card" id="op-get-dashboard">
<h3><span class="badge get">GET</span> <span class="mono path">/dashboard</span> <span class="badge">sign-in</span></h3>
<p><b>The dashboard</b>: topics and their counts, jobs by state, a job by id, kick, delete, bury,
pause and resume, payment watches. Sign in with an API token; it is kept in an HttpOnly cookie.</p>
</section>`;
}
