// JSON responses that carry job bodies as the text the client sent (see domain/raw-json.ts).
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { RawJson } from "../domain/raw-json";

/**
 * Like `c.json(value, status)`, but RawJson values (job bodies) are written as their text. The
 * return type is `c.json`'s, so typed routes keep their response types.
 */
export function jsonBody<T, S extends ContentfulStatusCode>(
  c: Context,
  value: T,
  status: S,
): ReturnType<typeof c.json<T, S>> {
  return c.body(responseJson(value) as string, status, {
    "content-type": "application/json",
  }) as unknown as ReturnType<typeof c.json<T, S>>;
}

/**
 * The text `stringifyJson` (domain/raw-json.ts) writes for `value`, without its cost: a
 * JSON.stringify replacer runs for every key and leaves V8's fast path, then a RegExp pass puts
 * the bodies in. This walks objects and arrays itself and lets JSON.stringify write each leaf,
 * following JSON.stringify's rules (toJSON, boxed primitives, undefined and functions left out
 * of objects and written as null in arrays). undefined when JSON.stringify gives undefined.
 */
export function responseJson(value: unknown, key = ""): string | undefined {
  let item = value;
  if (typeof item === "object" && item !== null) {
    const toJSON = (item as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") item = toJSON.call(item, key);
  }
  if (typeof item !== "object" || item === null) return JSON.stringify(item);
  if (item instanceof RawJson) return item.text;
  if (
    item instanceof Number ||
    item instanceof String ||
    item instanceof Boolean ||
    item instanceof BigInt
  ) {
    return JSON.stringify(item);
  }
  if (Array.isArray(item)) {
    let text = "[";
    for (let i = 0; i < item.length; i++) {
      if (i > 0) text += ",";
      text += responseJson(item[i], String(i)) ?? "null";
    }
    return `${text}]`;
  }
  let text = "{";
  let first = true;
  for (const name of Object.keys(item)) {
    const written = responseJson((item as Record<string, unknown>)[name], name);
    if (written === undefined) continue;
    text += `${first ? "" : ","}${JSON.stringify(name)}:${written}`;
    first = false;
  }
  return `${text}}`;
}
