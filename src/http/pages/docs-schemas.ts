// The /docs page's schema renderings: a schema's own section, its fields as a table (nested
// objects as dotted rows), its type in words, its constraints and a short example.
import { html } from "hono/html";
import { deref, exampleOf, type OpenApiDocument, refName, type Schema } from "./docs-openapi";
import { type Html, inlineMarkdown } from "./layout";

export function schemaSection(name: string, schema: Schema, doc: OpenApiDocument): Html {
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
export function fieldsTable(schema: Schema, doc: OpenApiDocument): Html | string {
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

export function typeText(schema: Schema, doc: OpenApiDocument): Html | string {
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

export function constraints(schema: Schema): string {
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
export function exampleCell(example: unknown): Html | string {
  if (example === undefined) return "";
  const text = JSON.stringify(example);
  return text.length > 60 ? "" : html`<code>${text}</code>`;
}
