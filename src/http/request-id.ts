// Every answer carries a request id (`x-request-id`, and `requestId` in an error's body): what a
// caller quotes to the operator, and what the log line of the request's error is keyed by.

/** An id a caller (or a proxy before delayq) may choose: up to 64 of A-Z a-z 0-9 . _ - */
const SANE = /^[A-Za-z0-9._-]{1,64}$/;

export const REQUEST_ID_HEADER = "x-request-id";

/**
 * The request's id: the incoming `x-request-id` when it is sane (a proxy's, or the caller's own),
 * else a new one (a random UUID). Nothing else of the caller's is echoed.
 */
export function requestIdOf(headers: Headers): string {
  const given = headers.get(REQUEST_ID_HEADER);
  return given !== null && SANE.test(given) ? given : crypto.randomUUID();
}
