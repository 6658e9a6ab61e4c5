// The client's options: how to reach delayq and how hard to try, checked into transport settings.
import type { FetchLike, TransportOptions } from "./transport";

/** How to reach delayq, and how hard to try. */
export type ClientOptions = {
  /** Where delayq is served, without the `/v1`: e.g. `http://127.0.0.1:8787`. */
  baseUrl: string;
  /** A bearer token from the server's `DQ_TOKENS`; sent on every `/v1` request. */
  token: string;
  /**
   * The fetch to send requests with: a Workers service binding's (bind it:
   * `(input, init) => env.DELAYQ.fetch(input, init)`), or a test's `app.request`.
   * @default the global fetch
   */
  fetch?: FetchLike;
  /**
   * Retries after a 503 (`redis_unavailable`), a network error or a timeout; never after any
   * other status. 0 turns retrying off.
   * @default 3
   */
  retries?: number;
  /**
   * The first retry's wait, ms; it doubles on each retry, with jitter, and is at least what the
   * server's `Retry-After` asks.
   * @default 200
   */
  retryDelayMs?: number;
  /** The longest wait between two attempts, ms, whatever `Retry-After` says. @default 5000 */
  maxRetryDelayMs?: number;
  /**
   * Time limit of each attempt, ms, from sending to the whole body read. A long-polling `pop`
   * (and a `command` that pops with `wait`) gets its `wait` on top.
   * @default 30000
   */
  timeoutMs?: number;
};

/** The transport settings from a client's options, defaults filled in; bad ones throw. */
export function transportOptions(options: ClientOptions): TransportOptions {
  if (typeof options.baseUrl !== "string" || options.baseUrl === "") {
    throw new TypeError("delayq client: baseUrl is required, e.g. http://127.0.0.1:8787");
  }
  if (typeof options.token !== "string" || options.token === "") {
    throw new TypeError("delayq client: token is required");
  }
  return {
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    token: options.token,
    // Looked up at call time and called as a plain function: Workers throw "Illegal
    // invocation" for a fetch detached from globalThis.
    fetch: options.fetch ?? ((input, init) => fetch(input, init)),
    retries: nonNegative(options.retries, 3, "retries"),
    retryDelayMs: nonNegative(options.retryDelayMs, 200, "retryDelayMs"),
    maxRetryDelayMs: nonNegative(options.maxRetryDelayMs, 5000, "maxRetryDelayMs"),
    timeoutMs: nonNegative(options.timeoutMs, 30_000, "timeoutMs"),
  };
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) {
    throw new TypeError(`delayq client: ${name} must be a number ≥ 0`);
  }
  return value;
}
