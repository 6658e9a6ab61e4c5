// The /docs page's routes: each operation of the document with its parameters, request body and
// responses.
import { html } from "hono/html";
import {
  deref,
  exampleOf,
  type Media,
  type OpenApiDocument,
  type Operation,
  type Parameter,
  refName,
} from "./docs-openapi";
import { constraints, exampleCell, fieldsTable, typeText } from "./docs-schemas";
import { type Html, inlineMarkdown } from "./layout";

const METHODS = ["get", "post", "put", "patch", "delete"] as const;

export type Op = { tag: string; method: string; path: string; op: Operation; anchor: string };

export function operations(doc: OpenApiDocument): Op[] {
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

export function operationSection({ method, path, op, anchor }: Op, doc: OpenApiDocument): Html {
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
