// The Upstash REST client for Node over node:http(s) instead of global fetch (undici), which cost
// the service about as much CPU per request as everything else together (issue 12).
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import {
  errors,
  Redis,
  type RedisConfigNodejs,
  type Requester,
  type UpstashRequest,
  type UpstashResponse,
} from "@upstash/redis";

export type NodeRestConfig = RedisConfigNodejs & {
  /**
   * Each request's time limit, ms, retries included: what `signal: () => AbortSignal.timeout(ms)`
   * gives the package's client (a `signal` in the config is left to streaming commands).
   */
  timeoutMs: number;
};

/**
 * `@upstash/redis`'s `Redis` (its commands, scripts, auto-pipelining and options) whose requests
 * go out through node:http(s) with keep-alive. Each request is the one the package's own client
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
  const secure = base.protocol === "https:";
  const send = secure ? httpsRequest : httpRequest;
  // Idle connections close after 4 s, as fetch's (undici's keepAliveTimeout): a connection the
  // server has dropped meanwhile is less likely to be picked for a request.
  const options = { keepAlive: true, timeout: 4_000 };
  const agent = secure ? new HttpsAgent(options) : new HttpAgent(options);
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
      headers["Content-Length"] = String(Buffer.byteLength(body));
      const path = `${basePath}/${(req.path ?? []).join("/")}`;
      const deadline = Date.now() + timeoutMs;
      let answer: Answer | undefined;
      let error: unknown;
      for (let i = 0; i <= own.retry.attempts; i++) {
        if (i > 0 && headers["Upstash-Telemetry-Sdk"]) {
          headers["Upstash-Telemetry-Retry"] = String(i);
        }
        try {
          answer = await exchange(send, agent, base, path, headers, body, deadline - Date.now());
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
 * One POST: resolves with the answer's head once it comes (its text follows, as fetch's
 * Response does), rejects on a network error before then; both fail at `timeoutMs`.
 */
function exchange(
  send: typeof httpRequest,
  agent: HttpAgent,
  base: URL,
  path: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let fail: (error: unknown) => void = reject;
    // The reason AbortSignal.timeout() gives, so that callers see the same error as with fetch.
    const timer = setTimeout(
      () => {
        const reason = new DOMException("The operation was aborted due to timeout", "TimeoutError");
        fail(reason);
        req.destroy(reason);
      },
      Math.max(0, timeoutMs),
    );
    const req = send(
      {
        agent,
        protocol: base.protocol,
        hostname: base.hostname.replace(/^\[|\]$/g, ""),
        port: base.port,
        method: "POST",
        path,
        headers,
      },
      (res: IncomingMessage) => {
        const text = new Promise<string>((done, failed) => {
          fail = failed;
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            clearTimeout(timer);
            // As Response.text() reads it: UTF-8, a leading BOM dropped.
            done(decoder.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
          });
          res.on("error", failed);
          res.on("aborted", () => failed(new Error("the answer was cut short")));
        });
        // Read or not, a failure of the text is the caller's (an unhandled rejection otherwise).
        text.catch(() => {});
        resolve({
          status: res.statusCode ?? 0,
          syncToken: String(res.headers["upstash-sync-token"] ?? ""),
          text,
        });
      },
    );
    req.on("error", (error) => {
      clearTimeout(timer);
      fail(error);
    });
    req.end(body);
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
