// The one error the client throws: a delayq answer, or a failure that never got one.
import type { ErrorCode } from "../domain/errors";

/**
 * What went wrong: one of the server's error codes, or one of the client's own for failures that
 * never got a delayq answer: `network_error` (fetch threw, or the body could not be read),
 * `timeout` (no complete answer within the request's time limit) and `invalid_response` (an
 * answer that is not delayq's JSON, say an HTML page from a proxy).
 */
export type DelayqClientErrorCode = ErrorCode | "network_error" | "timeout" | "invalid_response";

/** Thrown by every client method. `instanceof` it, then branch on `code`. */
export class DelayqClientError extends Error {
  /** The server's error code, or the client's own (see {@link DelayqClientErrorCode}). */
  readonly code: DelayqClientErrorCode;
  /** The HTTP status of the answer, or 0 when there was none (network error, timeout). */
  readonly status: number;
  /** Seconds the server asked to wait before retrying (`Retry-After`), when it said. */
  readonly retryAfter?: number;
  /**
   * The request's id (its answer's `x-request-id`), when delayq answered: quote it to the
   * operator, whose log line of that id says what a 5xx's message does not.
   */
  readonly requestId?: string;

  constructor(
    code: DelayqClientErrorCode,
    message: string,
    options: { status?: number; retryAfter?: number; requestId?: string; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DelayqClientError";
    this.code = code;
    this.status = options.status ?? 0;
    if (options.retryAfter !== undefined) this.retryAfter = options.retryAfter;
    if (options.requestId !== undefined) this.requestId = options.requestId;
  }
}
