// Every error leaves as {"error": {"code", "message"}} with the code's status; nothing leaks a stack.
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { DelayqError, ERROR_STATUS, type ErrorCode, invalidRequest } from "../domain/errors";
import type { Logger } from "../log";

const CODE_FOR_STATUS: Partial<Record<number, ErrorCode>> = {
  400: "invalid_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  415: "invalid_request",
  503: "redis_unavailable",
};

/**
 * The error answer: `{"error": {code, message, requestId}}` with the code's status. A 5xx's
 * message ends by pointing at the log line of its request id, which holds what the caller is not
 * told (http/request-id.ts).
 */
export function errorResponse(c: Context, code: ErrorCode, message: string): Response {
  const status = ERROR_STATUS[code] as ContentfulStatusCode;
  if (ERROR_STATUS[code] === 503) c.header("Retry-After", "1");
  if (code === "unauthorized") c.header("WWW-Authenticate", 'Bearer realm="delayq"');
  const requestId: string | undefined = c.get("requestId");
  const told = status >= 500 && requestId ? `${message}; ${seeTheLogs(requestId)}` : message;
  return c.json({ error: { code, message: told, requestId } }, status);
}

/** Where an operator finds what a 5xx answer does not say. */
export function seeTheLogs(requestId: string): string {
  return `see the logs for request ${requestId}`;
}

/** The app's one error handler. */
export function handleError(log: Logger) {
  return (error: Error, c: Context): Response => {
    const requestId: string | undefined = c.get("requestId");
    if (error instanceof DelayqError) {
      if (error.status >= 500) {
        log({
          level: "error",
          code: error.code,
          message: error.message,
          detail: error.detail,
          route: routeOf(c),
          requestId,
        });
      }
      return errorResponse(c, error.code, error.message);
    }
    if (error instanceof HTTPException) {
      const code = CODE_FOR_STATUS[error.status] ?? "invalid_request";
      return errorResponse(c, code, error.message || defaultMessage(code));
    }
    logBug(log, error, routeOf(c), requestId);
    return errorResponse(c, "internal_error", BUG_MESSAGE);
  };
}

/**
 * What a protocol's envelope (the command protocol's, ouqiang's) tells of `error`: its message,
 * and for a 5xx, after logging it with its detail, the pointer to that log line.
 */
export function toldOf(c: Context, log: Logger): (error: DelayqError) => string {
  return (error) => {
    if (error.status < 500) return error.message;
    const requestId: string | undefined = c.get("requestId");
    log({
      level: "error",
      code: error.code,
      message: error.message,
      detail: error.detail,
      route: routeOf(c),
      requestId,
    });
    return requestId ? `${error.message}; ${seeTheLogs(requestId)}` : error.message;
  };
}

/** What a caller is told of an error delayq did not expect: the log has the rest. */
export const BUG_MESSAGE = "Something went wrong inside delayq";

/** Logs an error delayq did not expect, with its stack and the route it broke. */
export function logBug(log: Logger, error: unknown, route: string, requestId?: string): void {
  log({
    level: "error",
    code: "internal_error",
    message: error instanceof Error ? error.message : String(error),
    stack: error instanceof Error ? error.stack : undefined,
    route,
    requestId,
  });
}

/** zod-openapi's hook: a failed validation becomes one invalid_request naming the field. */
export function validationHook(
  result: { success: boolean; error?: unknown; target: string },
  _c: Context,
): void {
  if (!result.success) {
    const what = { json: "request body", param: "path", query: "query" }[result.target];
    throw invalidRequest(result.error as Parameters<typeof invalidRequest>[0], what);
  }
}

function defaultMessage(code: ErrorCode): string {
  return code === "payload_too_large" ? "The request body is too large" : "Invalid request";
}

function routeOf(c: Context): string {
  return `${c.req.method} ${c.req.routePath || c.req.path}`;
}
