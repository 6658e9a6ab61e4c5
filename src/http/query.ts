// Unknown query parameters are refused like unknown body fields: a typo (`?cont=1` for `count`)
// must not silently fall back to a default (issue 8.15).
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { clip, DelayqError } from "../domain/errors";
import type { AppEnv } from "./context";

type Known = { pattern: RegExp; method: string; names: Set<string> };

/**
 * Middleware for the API's routes: answers 400 invalid_request naming any query parameter the
 * matched route does not document. The allowed names come from the OpenAPI registry (each route's
 * `query` schema), read once on the first request, so every route registered with `openapi()`
 * is covered without listing anything twice.
 */
export function knownQueryOnly(app: OpenAPIHono<AppEnv>): MiddlewareHandler<AppEnv> {
  let known: Known[] | undefined;
  return async (c, next) => {
    const href = c.req.url;
    const mark = href.indexOf("?");
    // Most requests have no query: no URL to parse for them.
    if (mark >= 0 && mark < href.length - 1) {
      const url = new URL(href);
      known ??= readRegistry(app);
      // Hono answers a HEAD with the GET route: its parameters are the GET's.
      const method = c.req.method === "HEAD" ? "get" : c.req.method.toLowerCase();
      const route = known.find(
        (entry) => entry.method === method && entry.pattern.test(url.pathname),
      );
      if (route) {
        const unknown = [...new Set(url.searchParams.keys())].filter((n) => !route.names.has(n));
        if (unknown.length > 0) {
          const allowed = [...route.names].join(", ") || "none";
          const named = unknown.slice(0, 20).map((name) => `"${clip(name)}"`);
          if (unknown.length > 20) named.push(`and ${unknown.length - 20} more`);
          throw new DelayqError(
            "invalid_request",
            `Unknown query parameter${unknown.length > 1 ? "s" : ""} ${named.join(", ")}; ` +
              `this route takes: ${allowed}`,
          );
        }
      }
    }
    await next();
  };
}

function readRegistry(app: OpenAPIHono<AppEnv>): Known[] {
  const out: Known[] = [];
  for (const definition of app.openAPIRegistry.definitions) {
    if (definition.type !== "route") continue;
    const { route } = definition;
    const query = route.request?.query as { shape?: Record<string, unknown> } | undefined;
    const pattern = new RegExp(
      `^${route.path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}$`,
    );
    out.push({ pattern, method: route.method, names: new Set(Object.keys(query?.shape ?? {})) });
  }
  return out;
}
