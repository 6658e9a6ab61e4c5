// Typed errors with stable codes: the same cause gives the same code, status and message shape.
import type { z } from "zod";

/** Every error code delayq answers with, and the HTTP status that goes with it. */
export const ERROR_STATUS = {
  invalid_request: 400,
  unknown_account: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  job_not_found: 404,
  payment_not_found: 404,
  refund_not_found: 404,
  schedule_not_found: 404,
  method_not_allowed: 405,
  job_exists: 409,
  payment_exists: 409,
  refund_exists: 409,
  job_reserved: 409,
  not_reserved: 409,
  stale_receipt: 409,
  push_topic: 409,
  invalid_state: 409,
  payload_too_large: 413,
  too_many_watches: 429,
  internal_error: 500,
  misconfigured: 500,
  redis_unavailable: 503,
  qstash_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/**
 * The base of every error delayq raises on purpose. `status` is the HTTP status for the code.
 * `message` is what the caller is told, so it never holds an address, a URL or a secret of
 * delayq's own (its Redis, QStash, the providers' gateways); `detail` holds those, for the log
 * line an answer's request id points to.
 */
export class DelayqError extends Error {
  readonly code: ErrorCode;
  readonly status: (typeof ERROR_STATUS)[ErrorCode];
  /** For operators only: written to the log with the request id, never into an answer. */
  readonly detail?: string;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; detail?: string }) {
    super(message, options);
    this.name = "DelayqError";
    this.code = code;
    this.status = ERROR_STATUS[code];
    if (options?.detail !== undefined) this.detail = options.detail;
  }

  toJSON(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

/** Text of the caller's quoted in a message, cut at 64 characters (a key may be megabytes). */
export function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

/**
 * `text` with every URL and network address (IPv4, IPv6, host:port) replaced by `<address>`: for
 * what a network error says that reaches an answer (a watch's last poll), which may name a
 * gateway delayq is configured with, or a proxy's address.
 */
export function withoutAddresses(text: string): string {
  return text
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>()]+/gi, "<address>")
    .replace(/\[[0-9a-f:.]+\](?::\d+)?/gi, "<address>")
    .replace(/(?<![\w:])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:[.:]\d+)*(?![\w:])/gi, "<address>")
    .replace(/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g, "<address>")
    .replace(/\b(?:localhost|[a-z0-9-]+(?:\.[a-z0-9-]+)+):\d{1,5}\b/gi, "<address>");
}

/** Turns a zod failure into one `invalid_request` whose message names each bad field. */
export function invalidRequest(error: z.ZodError, what = "request"): DelayqError {
  const problems = error.issues.slice(0, 5).map((issue) => {
    const path = issue.path.map((part) => clip(String(part))).join(".");
    if (issue.code === "unrecognized_keys") {
      // The first 20 are enough to act on: a body of a million made a message of megabytes.
      const keys = issue.keys
        .slice(0, 20)
        .map((k) => JSON.stringify(clip(k)))
        .join(", ");
      const others = issue.keys.length > 20 ? ` and ${issue.keys.length - 20} more` : "";
      const where = path ? ` in ${path}` : "";
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${keys}${others}${where}`;
    }
    // zod's "Invalid input: expected string, ..." after "Invalid <what>:" says "invalid" twice.
    const message = issue.message.replace(/^Invalid input: /, "");
    return path ? `${path}: ${message}` : message;
  });
  const more = error.issues.length > 5 ? ` (and ${error.issues.length - 5} more)` : "";
  return new DelayqError("invalid_request", `Invalid ${what}: ${problems.join("; ")}${more}`);
}

/** Parses with a zod schema, throwing `invalid_request` with a message naming the field. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  what?: string,
): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw invalidRequest(result.error, what);
  return result.data;
}
