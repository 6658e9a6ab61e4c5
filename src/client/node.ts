// delayq/client/node: a fetch for the client on Node, over node:http(s) with keep-alive, at about
// a third of the CPU per call of Node's global fetch (undici).
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { type FetchLike, type FetchReply, takingCallSignals } from "./transport";

export type NodeFetchOptions = {
  /**
   * How long an idle connection is kept for the next request, ms. Below the server's keep-alive
   * (Node's 5 s), so that a connection the server is about to close is not picked.
   * @default 4000
   */
  keepAliveMs?: number;
  /** Connections kept per host at most. @default Infinity, as fetch */
  maxSockets?: number;
  /**
   * Certificate authorities to trust for https, PEM, instead of Node's own list (a private CA;
   * `NODE_EXTRA_CA_CERTS` adds to the list for the whole process instead). Certificates are
   * always verified. @default Node's list
   */
  ca?: string | readonly string[];
};

/**
 * A `fetch` for `createClient` on Node: `createClient({ baseUrl, token, fetch: nodeFetch() })`.
 *
 * With Node 20's global fetch the client spent a median 0.71 ms of CPU a call on this project's
 * benchmark machine, most of it in fetch's WHATWG layers (Request, Response, Headers, streams,
 * the signal's bookkeeping); with this, 0.25 ms (bench/client-fetch.ts). It sends what the
 * client asks (method, headers, a text body), reads the whole answer as UTF-8 and hands the
 * client its status, headers and text. The call's signal aborts it (the client's time limit and
 * the caller's signal both come that way); a connection failure rejects, which the client
 * reports as `network_error`. Each `nodeFetch()` has its own keep-alive agents, one for http
 * and one for https. It follows no redirect (the client names the address a 3xx points to) and
 * asks for no compression.
 */
export function nodeFetch(options: NodeFetchOptions = {}): FetchLike {
  const agentOptions = {
    keepAlive: true,
    timeout: positive(options.keepAliveMs, 4_000, "keepAliveMs"),
    maxSockets: positive(options.maxSockets, Number.POSITIVE_INFINITY, "maxSockets"),
  };
  const http = new HttpAgent(agentOptions);
  const https = new HttpsAgent(
    options.ca === undefined ? agentOptions : { ...agentOptions, ca: [options.ca].flat() },
  );
  // It reads only `aborted`, `reason` and one "abort" listener of a signal: the client may give
  // it a lighter one than AbortSignal (transport.ts).
  return takingCallSignals((input: string, init: RequestInit) => {
    const secure = input.startsWith("https:");
    if (!secure && !input.startsWith("http:")) {
      return Promise.reject(new TypeError(`nodeFetch: ${input} is not an http(s) URL`));
    }
    try {
      return send(secure ? httpsRequest : httpRequest, secure ? https : http, input, init);
    } catch (error) {
      return Promise.reject(error);
    }
  });
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || Number.isNaN(value) || value <= 0) {
    throw new TypeError(`nodeFetch: ${name} must be a number > 0`);
  }
  return value;
}

function send(
  request: typeof httpRequest,
  agent: HttpAgent,
  url: string,
  init: RequestInit,
): Promise<FetchReply> {
  const signal = init.signal ?? undefined;
  if (signal?.aborted) return Promise.reject(signal.reason);
  const body = bodyText(init.body);
  const headers = headersOf(init.headers);
  if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      reject(error);
    };
    const onAbort = () => {
      fail(signal?.reason);
      req.destroy();
    };
    const req = request(url, { agent, method: init.method ?? "GET", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        const text = decoder.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
        resolve(replyOf(res, text));
      });
      res.on("error", fail);
      res.on("aborted", () => fail(new Error(`${url}: the answer was cut short`)));
    });
    req.on("error", fail);
    signal?.addEventListener("abort", onAbort, { once: true });
    req.end(body);
  });
}

function replyOf(res: IncomingMessage, text: string): FetchReply {
  return {
    status: res.statusCode ?? 0,
    headers: {
      get(name: string) {
        const value = res.headers[name.toLowerCase()];
        if (value === undefined) return null;
        return Array.isArray(value) ? value.join(", ") : value;
      },
    },
    text: () => Promise.resolve(text),
  };
}

/** The client sends its headers as a plain object; any other form is read as fetch would. */
function headersOf(headers: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === undefined) return out;
  if (!(headers instanceof Headers) && !Array.isArray(headers)) {
    for (const [name, value] of Object.entries(headers)) {
      out[name] = typeof value === "string" ? value : value.join(", ");
    }
    return out;
  }
  new Headers(headers).forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

function bodyText(body: RequestInit["body"]): string | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return body;
  throw new TypeError("nodeFetch: only text bodies are sent (the client sends JSON text)");
}

// As Response.text() reads a body: UTF-8, a leading byte-order mark dropped.
const decoder = new TextDecoder();
