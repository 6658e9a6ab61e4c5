// /docs against the OpenAPI document it renders: every route, parameter, request field, response,
// error code and schema field is on the page; no raw $ref, no Markdown backticks, no script.
import { describe, expect, it } from "vitest";
import { ERROR_STATUS } from "../../src/domain/errors";
import { testApp } from "../support/app";

type Schema = {
  $ref?: string;
  properties?: Record<string, Schema>;
  description?: string;
};
type Operation = {
  parameters?: { name: string }[];
  responses: Record<string, unknown>;
  requestBody?: { content?: Record<string, { schema?: Schema }> };
};
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
};

async function load() {
  const t = testApp();
  const doc = (await (await t.app.request("/openapi.json")).json()) as Document;
  const res = await t.app.request("/docs");
  return { doc, res, html: await res.text() };
}

/** The text of the page's element with this id, tags dropped and entities decoded. */
function section(html: string, id: string): string {
  const start = html.indexOf(`id="${id}"`);
  if (start < 0) throw new Error(`no element with id ${id}`);
  const end = html.indexOf("</section>", start);
  return decode(html.slice(start, end));
}

function decode(html: string): string {
  return html
    .replace(/<[^>]+>/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ");
}

describe("/docs", () => {
  it("is one HTML page, no token needed, no script and nothing from another host", async () => {
    const { res, html } = await load();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(html).toContain('<link rel="stylesheet" href="/dashboard/assets/style.css">');
  });

  it("renders no raw $ref, no Markdown backticks and no JSON dump of the document", async () => {
    const { html } = await load();
    const text = decode(html);
    expect(text).not.toContain("$ref");
    expect(text).not.toContain("#/components/schemas");
    expect(text).not.toContain("`");
    expect(html).toContain("<code>invalid_request</code>");
  });

  it("has a section per route with its parameters, request fields and every response status", async () => {
    const { doc, html } = await load();
    let routes = 0;
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        routes++;
        const anchor = `op-${method}-${path.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "")}`;
        const text = section(html, anchor);
        expect(text, anchor).toContain(`${method.toUpperCase()} ${path}`);
        for (const parameter of op.parameters ?? []) expect(text, anchor).toContain(parameter.name);
        for (const status of Object.keys(op.responses)) expect(text, anchor).toContain(status);
        const body = op.requestBody?.content?.["application/json"]?.schema;
        if (body) {
          const name = body.$ref?.split("/").pop() as string;
          const fields = doc.components.schemas[name]?.properties ?? body.properties ?? {};
          for (const field of Object.keys(fields))
            expect(text, `${anchor} ${field}`).toContain(field);
        }
      }
    }
    expect(routes).toBeGreaterThanOrEqual(18);
  });

  it("shows the add route's fields with units, descriptions, constraints and an example", async () => {
    const { html } = await load();
    const text = section(html, "op-post-v1-jobs");
    expect(text).toContain("Seconds from now until the job is due");
    expect(text).toContain("1 to 86400"); // ttr's range
    expect(text).toContain("unix ms or ISO-8601");
    expect(text).toContain('"wechatpay" | "alipay" | "youzan"');
    expect(text).toContain('"topic": "payments"'); // the request example
    expect(text).toContain("Unknown fields are refused with 400 invalid_request");
    expect(text).toMatch(/409 State conflict \( ?job_exists/);
  });

  it("lists every error code with its status, and documents every schema's fields", async () => {
    const { doc, html } = await load();
    const errors = decode(html.slice(html.indexOf('id="error-codes"')));
    for (const [code, status] of Object.entries(ERROR_STATUS)) {
      expect(errors).toMatch(new RegExp(`${status} ${code} \\S`));
    }
    for (const [name, schema] of Object.entries(doc.components.schemas)) {
      const text = section(html, `schema-${name}`);
      for (const field of Object.keys(schema.properties ?? {})) {
        expect(text, `${name}.${field}`).toContain(field);
      }
    }
    const metrics = section(html, "op-get-metrics");
    expect(metrics).toContain("delayq_oldest_due_age_seconds{topic}");
    expect(metrics).toContain("DQ_METRICS_MAX_TOPICS");
    const job = section(html, "schema-Job");
    expect(job).toContain("When the job is (or was) due, unix ms.");
    expect(job).toContain('"receipt": "p1.mywpj0qw.mywpiww0.12nq13p"');
  });
});
