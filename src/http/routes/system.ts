// Unauthenticated routes: /health, /openapi.json and a docs page that works offline.
import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import type { DelayQueue } from "../../queue";
import type { AppEnv } from "../context";
import { Health, json } from "../schemas";

export function systemRoutes(app: OpenAPIHono<AppEnv>, queue: DelayQueue): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/health",
      tags: ["system"],
      summary: "Liveness and Redis reachability (no token needed)",
      responses: {
        200: json(Health, "Up, and Redis answers"),
        503: json(Health, "Up, but Redis does not answer"),
      },
    }),
    async (c) => {
      try {
        await queue.ping();
        return c.json({ status: "ok" as const, redis: "ok" as const }, 200);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        c.header("Retry-After", "1");
        return c.json({ status: "degraded" as const, redis: "unreachable" as const, message }, 503);
      }
    },
  );

  app.doc31("/openapi.json", {
    openapi: "3.1.0",
    info: {
      title: "delayq",
      version: "1",
      description:
        "A delay queue on Redis: add jobs with a delay and a time-to-run, pop them when due, " +
        "finish or delete them. Every /v1 route needs `Authorization: Bearer <token>`. Errors " +
        'are `{"error": {"code", "message"}}`; times are unix milliseconds, `delay` and `ttr` ' +
        "seconds.",
    },
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
  });

  app.get("/docs", (c) => c.html(DOCS_PAGE));
}

/** A self-contained page that renders /openapi.json: no CDN, so it works offline. */
const DOCS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>delayq API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#222}
h2{margin-top:2rem;border-bottom:1px solid #ddd}
details{border:1px solid #ddd;border-radius:6px;margin:.5rem 0;padding:.4rem .8rem}
summary{cursor:pointer}code,pre{font:13px ui-monospace,monospace}
pre{background:#f6f8fa;padding:.6rem;overflow:auto;border-radius:4px}
.m{display:inline-block;min-width:4.5rem;font-weight:600}
.get{color:#0a7}.post{color:#07c}.put{color:#a60}.delete{color:#c33}
</style></head><body>
<h1>delayq API</h1><p id="intro">Loading <a href="/openapi.json">/openapi.json</a>…</p>
<div id="routes"></div>
<script>
const esc = (s) => String(s).replace(/[&<>]/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;"})[c]);
fetch("/openapi.json").then((r) => r.json()).then((doc) => {
  document.getElementById("intro").innerHTML = esc(doc.info.description) +
    ' The machine-readable document is <a href="/openapi.json">/openapi.json</a>.';
  const byTag = {};
  for (const [path, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops))
      (byTag[(op.tags || ["other"])[0]] ||= []).push({ path, method, op });
  let html = "";
  for (const [tag, list] of Object.entries(byTag)) {
    html += "<h2>" + esc(tag) + "</h2>";
    for (const { path, method, op } of list) {
      const body = op.requestBody && op.requestBody.content["application/json"].schema;
      html += '<details><summary><span class="m ' + method + '">' + method.toUpperCase() +
        "</span><code>" + esc(path) + "</code> — " + esc(op.summary || "") + "</summary>" +
        (op.description ? "<p>" + esc(op.description) + "</p>" : "") +
        (op.parameters ? "<p>Parameters: " + op.parameters.map((p) => "<code>" + esc(p.name) +
          "</code> (" + p.in + ")").join(", ") + "</p>" : "") +
        (body ? "<p>Body:</p><pre>" + esc(JSON.stringify(body, null, 2)) + "</pre>" : "") +
        "<p>Responses: " + Object.entries(op.responses).map(([s, r]) => "<b>" + s + "</b> " +
          esc(r.description)).join("; ") + "</p></details>";
    }
  }
  html += "<h2>Schemas</h2><pre>" + esc(JSON.stringify(doc.components.schemas, null, 2)) + "</pre>";
  document.getElementById("routes").innerHTML = html;
});
</script></body></html>`;
