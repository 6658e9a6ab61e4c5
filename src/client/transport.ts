// One HTTP exchange with delayq, with a time limit, and the retry loop around it.
import { DelayqClientError } from "./errors";

/**
 * The subset of `fetch` the client calls: global fetch, a Workers service binding's, Hono's
 * `app.request` (which may answer synchronously, hence the plain answer), or `nodeFetch` from
 * delayq/client/node.
 */
export type FetchLike = (input: string, init: RequestInit) => FetchReply | Promise<FetchReply>;

/** What the client reads of an answer: a `Response` has it all. */
export type FetchReply = {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
};

export type TransportOptions = {
  baseUrl: string;
  token: string;
  fetch: FetchLike;
  retries: number;
  retryDelayMs: number;
  maxRetryDelayMs: number;
  timeoutMs: number;
};

export type Call = {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Already encoded, starting with "/". */
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** Overrides the client's per-attempt time limit. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Statuses besides 2xx whose JSON body is the answer rather than an error (health's 503). */
  answerStatuses?: readonly number[];
  /** Send the bearer token (every route but /health). @default true */
  auth?: boolean;
};

export type Answer = { status: number; data: unknown };

/** An answer that came back, before it is judged. */
type Reply = { status: number; headers: FetchReply["headers"]; data: unknown; text: string };

/**
 * Sends a request, retrying 503s, network errors and timeouts up to `retries` times with
 * exponential backoff and jitter, waiting at least what `Retry-After` asks (up to
 * `maxRetryDelayMs`). Any other status is final: retrying a 4xx would give the same answer,
 * and a 500 is a bug a retry would only repeat. An aborted `signal` rejects with its reason at
 * once, never retried.
 */
export async function send(options: TransportOptions, request: Call): Promise<Answer> {
  for (let attempt = 0; ; attempt++) {
    let failure: DelayqClientError;
    try {
      const reply = await exchange(options, request);
      if (reply.status < 300 || request.answerStatuses?.includes(reply.status)) {
        if (reply.data === undefined) {
          throw new DelayqClientError(
            "invalid_response",
            `delayq answered HTTP ${reply.status} without a JSON body: ${excerpt(reply.text)}`,
            { status: reply.status },
          );
        }
        return { status: reply.status, data: reply.data };
      }
      failure = errorOf(reply);
    } catch (error) {
      if (request.signal?.aborted) throw request.signal.reason;
      if (!(error instanceof DelayqClientError)) throw error;
      failure = error;
    }
    if (!retryable(failure) || attempt >= options.retries) throw failure;
    await sleep(backoff(options, attempt, failure.retryAfter), request.signal);
  }
}

function retryable(error: DelayqClientError): boolean {
  return error.status === 503 || error.code === "network_error" || error.code === "timeout";
}

/** Exponential with "equal jitter": half the step fixed, half random, so clients spread out. */
function backoff(options: TransportOptions, attempt: number, retryAfter?: number): number {
  const step = options.retryDelayMs * 2 ** attempt;
  const jittered = step / 2 + (Math.random() * step) / 2;
  const asked = retryAfter === undefined ? 0 : retryAfter * 1000;
  return Math.min(Math.max(jittered, asked), options.maxRetryDelayMs);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * One attempt. The time limit covers reading the body too, and is enforced by racing rather
 * than only by aborting fetch: a fetch that ignores its signal (some test doubles, some
 * bindings) must still not hang the caller.
 */
async function exchange(options: TransportOptions, request: Call): Promise<Reply> {
  const { signal } = request;
  if (signal?.aborted) throw signal.reason;
  const controller = takesCallSignals.has(options.fetch)
    ? new CallController()
    : new AbortController();
  const timeoutMs = request.timeoutMs ?? options.timeoutMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new DelayqClientError(
        "timeout",
        `${request.method} ${request.path}: no answer from delayq within ${timeoutMs} ms`,
      );
      controller.abort(error);
      reject(error);
    }, timeoutMs);
    if (signal) {
      onAbort = () => {
        controller.abort(signal.reason);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
  try {
    return await Promise.race([
      fetchReply(options, request, controller.signal as AbortSignal),
      stopped,
    ]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Fetches that read only `aborted`, `reason` and one "abort" listener of `init.signal`, and so
 * take a {@link CallController}'s signal: nodeFetch (delayq/client/node) registers itself.
 */
const takesCallSignals = new WeakSet<FetchLike>();

/** Marks `fetch` as taking a call signal (see {@link CallController}); returns it. */
export function takingCallSignals<F extends FetchLike>(fetch: F): F {
  takesCallSignals.add(fetch);
  return fetch;
}

/**
 * An AbortController reduced to what a registered fetch reads: one listener, no EventTarget.
 * On Node 20, a real one costs ~9 µs of CPU a call (the signal's creation, and its listener's
 * bookkeeping), a sixth of the client's own share of a call (bench/client-fetch.ts).
 */
class CallController {
  aborted = false;
  reason: unknown;
  private listener: (() => void) | undefined;

  get signal(): this {
    return this;
  }

  addEventListener(_type: "abort", listener: () => void): void {
    this.listener = listener;
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    if (this.listener === listener) this.listener = undefined;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listener = this.listener;
    this.listener = undefined;
    listener?.();
  }
}

async function fetchReply(
  options: TransportOptions,
  request: Call,
  signal: AbortSignal,
): Promise<Reply> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (request.auth !== false) headers.authorization = `Bearer ${options.token}`;
  const init: RequestInit = { method: request.method, headers, signal };
  if (request.body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(request.body);
  }
  const where = `${request.method} ${request.path}`;
  let response: FetchReply;
  let text: string;
  try {
    response = await options.fetch(urlOf(options.baseUrl, request), init);
    text = await response.text();
  } catch (error) {
    // Our own abort (timeout or the caller's signal) is reported by exchange(), not as a
    // network error.
    if (signal.aborted) throw signal.reason;
    const reason = error instanceof Error ? error.message : String(error);
    throw new DelayqClientError("network_error", `${where}: ${reason}`, { cause: error });
  }
  let data: unknown;
  try {
    data = text === "" ? undefined : JSON.parse(text);
  } catch {
    data = undefined;
  }
  return { status: response.status, headers: response.headers, data, text };
}

function urlOf(baseUrl: string, request: Call): string {
  if (request.query === undefined) return `${baseUrl}${request.path}`;
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(request.query ?? {})) {
    if (value !== undefined) query.set(name, String(value));
  }
  const search = query.toString();
  return `${baseUrl}${request.path}${search ? `?${search}` : ""}`;
}

/** The error an answer that is not a success stands for. */
function errorOf(reply: Reply): DelayqClientError {
  const status = reply.status;
  const retryAfter = parseRetryAfter(reply.headers.get("retry-after"));
  const requestId = reply.headers.get("x-request-id") ?? undefined;
  const extra = {
    status,
    ...(retryAfter === undefined ? {} : { retryAfter }),
    ...(requestId === undefined ? {} : { requestId }),
  };
  const error = (reply.data as { error?: unknown } | undefined)?.error;
  if (
    typeof error === "object" &&
    error !== null &&
    typeof (error as { code?: unknown }).code === "string" &&
    typeof (error as { message?: unknown }).message === "string"
  ) {
    const { code, message } = error as { code: DelayqClientError["code"]; message: string };
    return new DelayqClientError(code, message, extra);
  }
  // The command protocol answers a lone command's failure as a CommandResult:
  // {success: false, error: "<code>: <message>"} (with 503 for redis_unavailable).
  if (typeof error === "string") {
    const match = /^([a-z_]+): ([\s\S]*)$/.exec(error);
    if (match) {
      return new DelayqClientError(
        match[1] as DelayqClientError["code"],
        match[2] as string,
        extra,
      );
    }
  }
  const location = status >= 300 && status < 400 ? reply.headers.get("location") : null;
  if (location) {
    // delayq never redirects: a proxy or the platform does (http to https, a moved host).
    return new DelayqClientError(
      "invalid_response",
      `HTTP ${status}, a redirect to ${location}: set the client's baseUrl to that address`,
      extra,
    );
  }
  return new DelayqClientError(
    "invalid_response",
    `HTTP ${status} without a delayq error body: ${excerpt(reply.text)}`,
    extra,
  );
}

/** `Retry-After` in seconds: a number of seconds, or an HTTP date. */
function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - Date.now()) / 1000);
}

function excerpt(text: string): string {
  if (text === "") return "(empty)";
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
