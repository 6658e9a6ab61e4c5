// JSON responses that carry job bodies as the text the client sent (see domain/raw-json.ts).
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { stringifyJson } from "../domain/raw-json";

/**
 * Like `c.json(value, status)`, but RawJson values (job bodies) are written as their text. The
 * return type is `c.json`'s, so typed routes keep their response types.
 */
export function jsonBody<T, S extends ContentfulStatusCode>(
  c: Context,
  value: T,
  status: S,
): ReturnType<typeof c.json<T, S>> {
  return c.body(stringifyJson(value), status, {
    "content-type": "application/json",
  }) as unknown as ReturnType<typeof c.json<T, S>>;
}
