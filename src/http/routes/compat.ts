// /compat/ouqiang/{token}/…: ouqiang/delay-queue's HTTP API, authenticated by the token in the path.

import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { DelayqError } from "../../domain/errors";
import { jsonLogger, type Logger } from "../../log";
import {
  failure,
  OUQIANG_ENDPOINTS,
  type OuqiangEndpoint,
  type OuqiangEnvelope,
  runOuqiang,
} from "../../protocols/ouqiang";
import type { DelayQueue } from "../../queue";
import type { TokenSet } from "../auth";
import { cappedText, DEFAULT_MAX_REQUEST_BYTES, parseJsonText } from "../body";
import type { AppEnv } from "../context";
import { BUG_MESSAGE, logBug, seeTheLogs, toldOf } from "../errors";
import { type PushOptions, pushSoon } from "./push";

export type CompatOptions = {
  queue: DelayQueue;
  tokens: TokenSet;
  /** Largest request body, bytes. @default DEFAULT_MAX_REQUEST_BYTES */
  maxRequestBytes?: number;
  /** Where bugs are logged (never with the token). @default one JSON line on stderr */
  log?: Logger;
  /** Push delivery: a job pushed here to a push topic and due soon is delivered promptly. */
  push?: PushOptions;
};

export const OUQIANG_BASE = "/compat/ouqiang";

/**
 * Serves ouqiang's endpoints under `/compat/ouqiang/{token}/`. Like ouqiang, every answer is
 * HTTP 200 with `{code, message, data}`; a wrong token is `code: 1` too. The token is part of
 * the URL, so nothing here logs a path: log lines name the route pattern (`:token`).
 */
export function compatRoutes(app: OpenAPIHono<AppEnv>, options: CompatOptions): void {
  const log = options.log ?? jsonLogger;
  const maxBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  for (const endpoint of OUQIANG_ENDPOINTS) {
    const route = `${OUQIANG_BASE}/:token/${endpoint}`;
    app.post(route, async (c) => {
      const tell = toldOf(c, log);
      try {
        const principal = await options.tokens.identify(c.req.param("token") ?? "");
        if (!principal) {
          return answer(c, failure(unauthorized()));
        }
        const input = await readJson(c.req.raw, maxBytes);
        const onPushed = options.push && pushSoon(options.push);
        const queue = options.queue.view({
          scope: principal.scope,
          onPushed: onPushed && ((pushed) => onPushed(c, pushed)),
        });
        // A 5xx is logged with its detail, and its message points at that line.
        const envelope = await runOuqiang(queue, endpoint, input, c.req.raw.signal, tell);
        return answer(c, envelope);
      } catch (error) {
        if (error instanceof DelayqError && error.code !== "internal_error") {
          return answer(c, failure(error, tell));
        }
        logBug(log, error, `POST ${route}`, c.get("requestId"));
        const bug = `${BUG_MESSAGE}; ${seeTheLogs(c.get("requestId"))}`;
        return answer(c, failure(new DelayqError("internal_error", bug)));
      }
    });
  }
  // Anything else under the prefix: an ouqiang envelope that never echoes the path (the token).
  const elsewhere = (c: Context) => {
    const parts = c.req.path.split("/");
    // Only /compat/ouqiang/<token>/<endpoint> names an endpoint; anything deeper does not.
    const name = parts.length === 5 ? (parts[4] ?? "") : "";
    const known = (OUQIANG_ENDPOINTS as readonly string[]).includes(name);
    const message = known
      ? `Use POST for /${name as OuqiangEndpoint}, with a JSON body`
      : `No such endpoint: ouqiang's API has /${OUQIANG_ENDPOINTS.join(", /")} under ${OUQIANG_BASE}/<token>/`;
    return answer(c, failure(new DelayqError(known ? "method_not_allowed" : "not_found", message)));
  };
  app.all(`${OUQIANG_BASE}/:token/*`, elsewhere);
  app.all(`${OUQIANG_BASE}/:token`, elsewhere);
  app.all(OUQIANG_BASE, elsewhere);
}

function answer(c: Context, envelope: OuqiangEnvelope): Response {
  if (envelope.error === "redis_unavailable") c.header("Retry-After", "1");
  return c.json(envelope, 200);
}

function unauthorized(): DelayqError {
  return new DelayqError(
    "unauthorized",
    `Invalid token: use ${OUQIANG_BASE}/<token>/ with one of the service's DQ_TOKENS`,
  );
}

/** The body as JSON, read up to `maxBytes` whatever the Content-Type (ouqiang ignores it). */
async function readJson(request: Request, maxBytes: number): Promise<unknown> {
  const text = await cappedText(request, maxBytes);
  if (text.trim() === "") {
    throw new DelayqError(
      "invalid_request",
      'The request body is empty: send JSON such as {"topic": "order", "id": "15702398321", ...}',
    );
  }
  return parseJsonText(text);
}
