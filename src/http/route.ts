// A documented route whose input is validated in one synchronous step, for the routes behind
// jsonBodies (http/body.ts): add, pop and finish are most of what the service serves.
import type { OpenAPIHono, RouteConfig, RouteHandler } from "@hono/zod-openapi";
import type { Context, Handler, MiddlewareHandler } from "hono";
import type { z } from "zod";
import { parseInput } from "../domain/errors";
import type { AppEnv } from "./context";

/**
 * Registers `route` in the OpenAPI document as `app.openapi` does, and serves it with one
 * middleware that validates its path parameters, query and JSON body with their schemas, handing
 * the handler the same `c.req.valid(...)` values and the same `invalid_request` messages.
 *
 * Why not `app.openapi`: its validators are an asynchronous middleware a target
 * (@hono/zod-validator's `safeParseAsync`) plus a media-type gate, which at 8 consumers were ~6 %
 * of the service's CPU a request (bench/cpu.ts --profile), for checks that are synchronous.
 * The gate has nothing to refuse here: jsonBodies has already read the body as JSON whatever its
 * Content-Type, and left none on a request without one. So only for routes under jsonBodies:
 * every /v1 route but the QStash callback, which is served before it and keeps app.openapi.
 */
export function documentedRoute<R extends RouteConfig>(
  app: OpenAPIHono<AppEnv>,
  route: R,
  handler: RouteHandler<R, AppEnv>,
): void {
  app.openAPIRegistry.registerPath(route);
  const path = route.path.replaceAll(/\/\{(.+?)\}/g, "/:$1");
  app.on(route.method.toUpperCase(), path, validateInput(route), handler as unknown as Handler);
}

type RouteInput = NonNullable<RouteConfig["request"]>;

/** The JSON body's schema and whether the body is required, when the route takes one. */
function bodyOf(request: RouteInput | undefined) {
  const body = request?.body;
  const json = body?.content?.["application/json"] as { schema?: z.ZodType } | undefined;
  const schema = json?.schema;
  return schema ? { schema, required: body?.required === true } : undefined;
}

/** What Hono's validator reads as the query: one value per name, a list for a repeated one. */
function queryOf(c: Context): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [name, values] of Object.entries(c.req.queries())) {
    query[name] = values.length === 1 ? (values[0] as string) : values;
  }
  return query;
}

/** The validated value, as Hono keeps it (an object: every schema here is one). */
const valid = (schema: z.ZodType, value: unknown, what: string) =>
  parseInput(schema, value, what) as object;

function validateInput(route: RouteConfig): MiddlewareHandler<AppEnv> {
  const params = route.request?.params as z.ZodType | undefined;
  const query = route.request?.query as z.ZodType | undefined;
  const body = bodyOf(route.request);
  // The messages name what was wrong as the app's validation hook does (http/errors.ts).
  return async (c, next) => {
    if (params) c.req.addValidatedData("param", valid(params, c.req.param(), "path"));
    if (query) c.req.addValidatedData("query", valid(query, queryOf(c), "query"));
    if (body) {
      // jsonBodies parsed every body it read (c.req.json answers that value) and left no
      // Content-Type on a request without one.
      const sent = c.req.header("content-type") !== undefined;
      // An optional body that is absent is {}, unvalidated, as with app.openapi.
      if (!sent && !body.required) c.req.addValidatedData("json", {});
      else {
        const value = sent ? await c.req.json() : {};
        c.req.addValidatedData("json", valid(body.schema, value, "request body"));
      }
    }
    await next();
  };
}
