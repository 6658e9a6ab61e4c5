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
      this.client = nodeRequester(own as HttpClientShape, config.timeoutMs);
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

function nodeRequester(own: HttpClientShape, timeoutMs: number): Requester {
  const base = new URL(own.baseUrl);
  // Idle connections close after 4 s, as fetch's: a connection the server has dropped meanwhile
  // is less likely to be picked for a request. Its own time limits are left to `timeoutMs`.
  const pool = new Pool(base.origin, {
    keepAliveTimeout: 4_000,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  const basePath = base.pathname === "/" ? "" : base.pathname;
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
      if (own.readYourWrites) own.headers["upstash-sync-token"] = own.upstashSyncToken;
      const headers: Record<string, string> = {};
      for (const source of [own.headers, req.headers ?? {}]) {
        for (const [key, value] of Object.entries(source)) {
          if (value !== undefined && value !== null) headers[key] = value;
        }
      }
      const body = JSON.stringify(req.body);
      const path = `${basePath}/${(req.path ?? []).join("/")}`;
      const deadline = Date.now() + timeoutMs;
      let answer: Answer | undefined;
      let error: unknown;
      for (let i = 0; i <= own.retry.attempts; i++) {
        if (i > 0 && headers["Upstash-Telemetry-Sdk"]) {
          headers["Upstash-Telemetry-Retry"] = String(i);
        }
        try {
          answer = await exchange(pool, path, headers, body, deadline - Date.now());
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
      if (answer.status < 200 || answer.status > 299) {
        throw new errors.UpstashError(
          `${(parsed as Reply).error}, command was: ${JSON.stringify(req.body)}`,
        );
      }
      if (own.readYourWrites) own.upstashSyncToken = answer.syncToken;
      if (own.options.responseEncoding !== "base64") return parsed as UpstashResponse<TResult>;
      if (Array.isArray(parsed)) {
        return parsed.map(({ result, error: failure }) => ({
          result: decode(result),
          error: failure,
        })) as unknown as UpstashResponse<TResult>;
      }
      return { result: decode(parsed.result) as TResult, error: parsed.error };
    },
  } as Requester;
}

type Reply = { result?: unknown; error?: string };
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
