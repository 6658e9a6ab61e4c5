// Request bodies: size-limited, always read as JSON (whatever Content-Type says), parsed once.
import type { Context, MiddlewareHandler } from "hono";
import { DelayqError } from "../domain/errors";
import type { AppEnv } from "./context";
import { closingQuote, keepRawBodies } from "./raw-bodies";

/** Largest request body, bytes, unless DQ_MAX_REQUEST_BYTES says otherwise: Upstash's own limit. */
export const DEFAULT_MAX_REQUEST_BYTES = 10 * 1024 * 1024;

/**
 * Reads the body with a size limit (413 payload_too_large beyond it), rejects text that is not
 * JSON with a message saying where it broke, and hands the validators a request whose
 * Content-Type is JSON, so `curl -d '{...}'` works without `-H content-type`. An empty body
 * counts as no body.
 */
export function jsonBodies(maxBytes: number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const { raw } = c.req;
    if (raw.method === "GET" || raw.method === "HEAD") return next();
    const length = raw.headers.get("content-length");
    // Asking a Node request for its body stream builds a whole web Request: not when it is read
    // whole (a TRACE has no body there).
    const whole = length !== null && raw.method !== "TRACE" && fromNodeServer(c);
    if (!whole && raw.body === null) {
      // No body at all counts as an empty one: no Content-Type is left for the validators.
      if (raw.headers.has("content-type")) c.req.raw = bodiless(raw);
      return next();
    }
    const declared = Number(length);
    if (declared > maxBytes) throw tooLarge(maxBytes);
    const text = await readText(raw, maxBytes, whole);
    // A client that says JSON (as ours do) keeps its request: a new Request and Headers per
    // request cost more CPU than the route. Validators read the text from the cache below.
    if (text.trim() !== "" && JSON_TYPE.test(mediaType(raw.headers.get("content-type")))) {
      return parsedBody(c, raw, text, next);
    }
    if (text.trim() === "") {
      c.req.raw = bodiless(raw);
      return next();
    }
    const headers = new Headers(raw.headers);
    headers.delete("content-length");
    headers.set("content-type", "application/json");
    const request = new Request(raw.url, {
      method: raw.method,
      headers,
      body: text,
      signal: raw.signal,
    });
    return parsedBody(c, request, text, next);
  };
}

/** `request` without its body, and without the headers that described one. */
function bodiless(request: Request): Request {
  const headers = new Headers(request.headers);
  headers.delete("content-length");
  headers.delete("content-type");
  return new Request(request.url, { method: request.method, headers, signal: request.signal });
}

/** Hono's validator reads a JSON body only under a media type like this (hono/validator). */
const JSON_TYPE = /^application\/([\w.-]+\+)?json$/i;

const mediaType = (contentType: string | null) =>
  (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";

/** Parses `text` (else 400), hands the validators `request` with `text` cached, then the route. */
function parsedBody(
  c: Context<AppEnv>,
  request: Request,
  text: string,
  next: () => Promise<void>,
): Promise<void> {
  const parsed = parseJsonText(text);
  if (request !== c.req.raw) c.req.raw = request;
  // The validators take the value parsed here: Hono's json() would parse the text once more (a
  // second ~1 s for 10 MiB). Job bodies in it may be RawJson (below): their schemas take any value.
  (c.req.bodyCache as { text?: Promise<string> }).text = Promise.resolve(text);
  c.req.json = (() => Promise.resolve(parsed)) as typeof c.req.json;
  // Routes that add jobs take this copy, whose job bodies are the text the client sent
  // (numbers JavaScript cannot hold survive): see requestJson.
  // The path the router matched (no second parse of the URL).
  if (keepRawBodies(c.req.path, text, parsed)) c.set("rawJson", parsed);
  return next();
}

/**
 * The deepest nesting of arrays and objects a request may have. JSON.parse spends about half a
 * microsecond of the one event loop per level (10 MiB of "[" took 2 s, every other request
 * waiting): deep enough for any job body a program writes (serde_json stops at 128).
 */
export const MAX_JSON_DEPTH = 512;

/** A request body's JSON, or 400 invalid_request saying why it is not (nor nested too deep). */
export function parseJsonText(text: string): unknown {
  if (nestsDeeper(text, MAX_JSON_DEPTH)) {
    throw new DelayqError(
      "invalid_request",
      `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep: ` +
        "flatten it, or send deep data as a string",
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new DelayqError("invalid_request", `The request body is not valid JSON: ${reason}`);
  }
}

/**
 * Whether JSON text opens more than `limit` arrays and objects inside each other (brackets in
 * strings do not count). One pass, no allocation, strings passed over natively (closingQuote);
 * text that is not JSON gets an answer too.
 */
export function nestsDeeper(text: string, limit: number): boolean {
  // Each level opens with a bracket of its own: text no longer than the limit cannot pass it.
  if (text.length <= limit) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = closingQuote(text, i);
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/**
 * Served by @hono/node-server, whose Node request parser never reads more body than a declared
 * Content-Length: such a body may be read whole (its request reads it without a web stream).
 */
function fromNodeServer(c: Context<AppEnv>): boolean {
  const env = c.env as { incoming?: unknown } | undefined;
  return typeof env === "object" && env !== null && env.incoming !== undefined;
}

async function readText(request: Request, maxBytes: number, whole: boolean): Promise<string> {
  if (whole) return request.text();
  return readCapped(request.body as ReadableStream<Uint8Array>, maxBytes);
}

/**
 * A request's body as UTF-8 text, at most `maxBytes` of it (413 payload_too_large beyond, from
 * its Content-Length before anything is read, else once the stream passes the limit).
 */
export function cappedText(request: Request, maxBytes: number): Promise<string> {
  if (Number(request.headers.get("content-length")) > maxBytes) throw tooLarge(maxBytes);
  return readCapped(request.body, maxBytes);
}

/**
 * Reads a body stream as UTF-8 text, at most `maxBytes` of it: beyond that the stream is cancelled
 * and the request answered 413 payload_too_large. No stream reads as "".
 */
export async function readCapped(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<string> {
  if (!body) return "";
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

export function tooLarge(maxBytes: number): DelayqError {
  return new DelayqError(
    "payload_too_large",
    `The request body is over ${maxBytes} bytes; send fewer or smaller jobs per request`,
  );
}

/**
 * The request's JSON for a route that adds jobs: the value the body middleware parsed, with job
 * bodies as the text the client sent (RawJson) when it kept them. Validation has run on that
 * same value (the body fields' schemas take any value, RawJson included); the validated copy is
 * the answer when no bodies were kept.
 */
export function requestJson<T>(c: Context<AppEnv>, validated: T): T {
  return (c.get("rawJson") as T | undefined) ?? validated;
}
