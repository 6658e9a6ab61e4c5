// The Upstash REST client for Node over undici's Pool (its dispatcher, no WHATWG layers) instead
// of global fetch, which cost the service about as much CPU per request as everything else
// together, and of node:http, whose client request made each API request cost the service a
// median 17 % more CPU than this (bench/cpu.ts --driver rest, issue 12).
import {
  errors,
  Redis,
  type RedisConfigNodejs,
  type Requester,
  type UpstashRequest,
  type UpstashResponse,
} from "@upstash/redis";
import { type Dispatcher, Pool } from "undici";

export type NodeRestConfig = RedisConfigNodejs & {
  /**
   * Each request's time limit, ms, retries included: what `signal: () => AbortSignal.timeout(ms)`
   * gives the package's client (a `signal` in the config is left to streaming commands).
   */
  timeoutMs: number;
  /**
   * Commands sent alone (no auto-pipelining) that are issued in one turn of the event loop share
   * one /pipeline request; each still resolves or fails on its own, as it would have alone.
   * (Auto-pipelining waits two microtasks for company, which never spans two API requests.)
   * @default false
   */
  turnPipelining?: boolean;
};

/**
 * `@upstash/redis`'s `Redis` (its commands, scripts, auto-pipelining and options) whose requests
 * go out through one undici Pool with keep-alive. Each request is the one the package's own client
 * would send (POST, JSON body, that client's headers: token, Upstash-Encoding, upstash-sync-token,
 * telemetry), read the same way (base64 decoding, the sync token kept, UpstashError for an error
 * answer), with that client's retries on network errors and one time limit per request, which
 * fails it with a TimeoutError and no retry. Streaming commands (subscribe) go through the
 * package's client, and so does everything if its client is not the shape this reads.
 */
export class NodeRestRedis extends Redis {
  constructor(config: NodeRestConfig) {
    super(config);
    const own = this.client as Partial<HttpClientShape>;
    if (
      typeof own.baseUrl === "string" &&
      typeof own.headers === "object" &&
      typeof own.retry?.attempts === "number" &&
      typeof own.retry.backoff === "function" &&
      typeof own.options?.responseEncoding !== "undefined"
    ) {
      this.client = nodeRequester(
        own as HttpClientShape,
        config.timeoutMs,
        config.turnPipelining ?? false,
      );
    }
  }
}

/** The fields of the package's HttpClient (1.39) this reads: its state stays there. */
type HttpClientShape = Requester & {
  baseUrl: string;
  headers: Record<string, string>;
  readYourWrites: boolean;
  upstashSyncToken: string;
  retry: { attempts: number; backoff: (retryCount: number) => number };
  options: { responseEncoding: false | "base64" };
};

function nodeRequester(
  own: HttpClientShape,
  timeoutMs: number,
  turnPipelining: boolean,
): Requester {
  const base = new URL(own.baseUrl);
  // Idle connections close after 4 s, as fetch's: a connection the server has dropped meanwhile
  // is less likely to be picked for a request. Its own time limits are left to `timeoutMs`.
  const pool = new Pool(base.origin, {
    keepAliveTimeout: 4_000,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  const basePath = base.pathname === "/" ? "" : base.pathname;
  const turns = turnPipelining ? turnGroups(flush) : undefined;
  return {
    get readYourWrites() {
      return own.readYourWrites;
    },
    set readYourWrites(value: boolean) {
      own.readYourWrites = value;
    },
    get upstashSyncToken() {
      return own.upstashSyncToken;
    },
    set upstashSyncToken(value: string) {
      own.upstashSyncToken = value;
    },
    async request<TResult>(req: UpstashRequest): Promise<UpstashResponse<TResult>> {
      if (req.headers?.Accept === "text/event-stream") return own.request(req);
      const body = JSON.stringify(req.body);
      const path = req.path ?? [];
      // A command of its own (not a pipeline, no headers of its own) may share a request.
      if (
        turns !== undefined &&
        path.length === 0 &&
        !req.headers &&
        body.length <= GROUP_MAX_CHARS
      ) {
        return turns.hold(body) as Promise<UpstashResponse<TResult>>;
      }
      return single(path, req.headers, body) as Promise<UpstashResponse<TResult>>;
    },
  } as Requester;

  /** One exchange with its retries and time limit: the answer's status and parsed JSON. */
  async function transmit(path: string[], extra: Record<string, string> | undefined, body: string) {
    if (own.readYourWrites) own.headers["upstash-sync-token"] = own.upstashSyncToken;
    const headers: Record<string, string> = {};
    for (const source of [own.headers, extra ?? {}]) {
      for (const [key, value] of Object.entries(source)) {
        if (value !== undefined && value !== null) headers[key] = value;
      }
    }
    const url = `${basePath}/${path.join("/")}`;
    const deadline = Date.now() + timeoutMs;
    let answer: Answer | undefined;
    let error: unknown;
    for (let i = 0; i <= own.retry.attempts; i++) {
      if (i > 0 && headers["Upstash-Telemetry-Sdk"]) {
        headers["Upstash-Telemetry-Retry"] = String(i);
      }
      try {
        answer = await exchange(pool, url, headers, body, deadline - Date.now());
        break;
      } catch (error_) {
        if (error_ instanceof DOMException && error_.name === "TimeoutError") throw error_;
        error = error_;
        if (i < own.retry.attempts) {
          await new Promise((resolve) => setTimeout(resolve, own.retry.backoff(i)));
        }
      }
    }
    if (!answer) throw error ?? new Error("Exhausted all retries");
    const text = await answer.text;
    let parsed: Reply | Reply[];
    try {
      parsed = JSON.parse(text);
    } catch (error_) {
      throw new errors.UpstashJSONParseError(text, { cause: error_ });
    }
    const ok = answer.status >= 200 && answer.status <= 299;
    if (ok && own.readYourWrites) own.upstashSyncToken = answer.syncToken;
    return { ok, parsed };
  }

  /** A request's answer as the package's client gives it (an error answer throws). */
  async function single(path: string[], extra: Record<string, string> | undefined, body: string) {
    const { ok, parsed } = await transmit(path, extra, body);
    if (!ok) throw failed(parsed as Reply, body);
    if (own.options.responseEncoding !== "base64") return parsed;
    if (Array.isArray(parsed)) {
      return parsed.map(({ result, error: failure }) => ({
        result: decode(result),
        error: failure,
      }));
    }
    return { result: decode(parsed.result), error: parsed.error };
  }

  /**
   * The commands held for one turn of the event loop: one goes as it would have alone, several
   * as one /pipeline request, whose entries are handed back one by one (an entry's error fails
   * its command alone, with the message the command would have had alone).
   */
  async function flush(bodies: string[], waiters: Waiter[]) {
    if (bodies.length === 1) {
      const [waiter] = waiters as [Waiter];
      single([], undefined, bodies[0] as string).then(waiter.resolve, waiter.reject);
      return;
    }
    try {
      const { ok, parsed } = await transmit(["pipeline"], undefined, `[${bodies.join(",")}]`);
      if (!ok) {
        for (const [i, waiter] of waiters.entries()) {
          waiter.reject(failed(parsed as Reply, bodies[i] as string));
        }
        return;
      }
      if (!Array.isArray(parsed) || parsed.length !== bodies.length) {
        const error = new errors.UpstashError(
          `Redis answered a pipeline of ${bodies.length} commands with ${Array.isArray(parsed) ? parsed.length : "no list of"} replies`,
        );
        for (const waiter of waiters) waiter.reject(error);
        return;
      }
      const base64 = own.options.responseEncoding === "base64";
      waiters.forEach((waiter, i) => {
        const entry = parsed[i] as Reply;
        if (entry.error !== undefined) waiter.reject(failed(entry, bodies[i] as string));
        else waiter.resolve({ result: base64 ? decode(entry.result) : entry.result });
      });
    } catch (error) {
      for (const waiter of waiters) waiter.reject(error);
    }
  }
}

type Reply = { result?: unknown; error?: string };
type Waiter = { resolve: (answer: unknown) => void; reject: (error: unknown) => void };

/** An error answer as the package's client reports it, naming the command it answered. */
const failed = (reply: Reply, body: string) =>
  new errors.UpstashError(`${reply.error}, command was: ${body}`);

/** Commands that share one request at most: how many, and their JSON's length. */
const GROUP_MAX_COMMANDS = 100;
const GROUP_MAX_CHARS = 1024 * 1024;

/**
 * Holds commands until the event loop's check phase, then hands each group to `flush`: the
 * commands issued in one turn (the script calls of the API requests that arrived together), up
 * to GROUP_MAX_COMMANDS and GROUP_MAX_CHARS of JSON a group.
 */
function turnGroups(flush: (bodies: string[], waiters: Waiter[]) => Promise<void>) {
  let open: { bodies: string[]; waiters: Waiter[]; chars: number } | undefined;
  return {
    hold(body: string): Promise<unknown> {
      return new Promise((resolve, reject) => {
        if (
          !open ||
          open.bodies.length >= GROUP_MAX_COMMANDS ||
          open.chars + body.length > GROUP_MAX_CHARS
        ) {
          const group = { bodies: [] as string[], waiters: [] as Waiter[], chars: 0 };
          open = group;
          setImmediate(() => {
            if (open === group) open = undefined;
            void flush(group.bodies, group.waiters);
          });
        }
        open.bodies.push(body);
        open.waiters.push({ resolve, reject });
        open.chars += body.length;
      });
    },
  };
}
type Answer = { status: number; syncToken: string; text: Promise<string> };

/**
 * One POST through the pool: resolves with the answer's head once it comes (its text follows, as
 * fetch's Response does), rejects on a network error before then; both fail at `timeoutMs`.
 */
function exchange(
  pool: Pool,
  path: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let fail: (error: unknown) => void = reject;
    let controller: Dispatcher.DispatchController | undefined;
    // The reason AbortSignal.timeout() gives, so that callers see the same error as with fetch.
    let timedOut: DOMException | undefined;
    const timer = setTimeout(
      () => {
        timedOut = new DOMException("The operation was aborted due to timeout", "TimeoutError");
        fail(timedOut);
        // A request still waiting for a connection is aborted once it gets one.
        controller?.abort(timedOut);
      },
      Math.max(0, timeoutMs),
    );
    const chunks: Buffer[] = [];
    let done: (text: string) => void = () => {};
    pool.dispatch(
      { method: "POST", path, headers, body },
      {
        onRequestStart(started) {
          controller = started;
          if (timedOut) started.abort(timedOut);
        },
        onResponseStart(_, statusCode, responseHeaders) {
          const text = new Promise<string>((resolveText, failText) => {
            done = resolveText;
            fail = failText;
          });
          // Read or not, a failure of the text is the caller's (an unhandled rejection otherwise).
          text.catch(() => {});
          const syncToken = responseHeaders["upstash-sync-token"];
          resolve({ status: statusCode, syncToken: String(syncToken ?? ""), text });
        },
        onResponseData(_, chunk) {
          chunks.push(chunk);
        },
        onResponseEnd() {
          clearTimeout(timer);
          // As Response.text() reads it: UTF-8, a leading BOM dropped.
          done(decoder.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
        },
        onResponseError(_, error) {
          clearTimeout(timer);
          // After the head, as fetch's body: the answer was cut short.
          fail(timedOut ?? error);
        },
      },
    );
  });
}

const decoder = new TextDecoder();

/** The package's base64 decoding of a reply (strings as UTF-8; "OK" and numbers as they are). */
function decode(raw: unknown): unknown {
  switch (typeof raw) {
    case "undefined":
    case "number":
      return raw;
    case "string":
      return raw === "OK" ? "OK" : base64decode(raw);
    case "object":
      if (!Array.isArray(raw)) return null;
      return raw.map((v: unknown) =>
        typeof v === "string" ? base64decode(v) : Array.isArray(v) ? v.map(decode) : v,
      );
    default:
      return undefined;
  }
}

function base64decode(b64: string): string {
  try {
    const binary = atob(b64);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return decoder.decode(bytes);
  } catch {
    return b64;
  }
}
