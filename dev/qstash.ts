// Local QStash stand-in: the real @upstash/qstash Client publishes to it, its Receiver verifies.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import {
  createServer,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { AddressInfo, Socket } from "node:net";

export type QStashOptions = {
  /** @default a free port */
  port?: number;
  /** Bearer token the Client must present. @default random */
  token?: string;
  /** Key every delivery and callback is signed with (`sig_…`). @default random */
  currentSigningKey?: string;
  /** Reported only: QStash signs with the current key until a rotation. @default random */
  nextSigningKey?: string;
  /**
   * Backoff before retry number `retried + 1` of a message published without
   * `Upstash-Retry-Delay`, in ms (`retried` is 0 before the first retry).
   * @default QStash's min(86400, e^(2.5·(retried+1))) seconds: 12 s, 2 min 28 s, 30 min, …
   */
  retryDelayMs?: (retried: number) => number;
  /** How often the scheduler looks for due messages, in ms. @default 25 */
  tickMs?: number;
};

export type MessageKind = "message" | "callback" | "failure-callback";

/**
 * `pending`: waiting for its first attempt or a retry; `active`: an attempt in flight;
 * `delivered`: answered 2xx; `failed`: retries used up or non-retryable (messages go to the
 * DLQ, callbacks do not); `cancelled`: by `DELETE /v2/messages`.
 */
export type MessageState = "pending" | "active" | "delivered" | "failed" | "cancelled";

export type StoredMessage = {
  messageId: string;
  kind: MessageKind;
  /** For callbacks: the message whose outcome they report. */
  sourceMessageId?: string;
  /** The destination, verbatim. */
  url: string;
  method: string;
  /** What the destination gets besides QStash's own headers: content-type and forwarded ones. */
  headers: Record<string, string>;
  /** The body as UTF-8 text (it is delivered as the exact bytes published). */
  body: string;
  createdAt: number;
  /** Not delivered before this (ms). */
  notBefore: number;
  maxRetries: number;
  retryDelayExpression?: string;
  timeoutMs: number;
  callback?: string;
  failureCallback?: string;
  labels: string[];
  deduplicationId?: string;
  state: MessageState;
  /** Retries made so far (the next attempt carries this as `Upstash-Retried`). */
  retried: number;
  /** When the next attempt is due, while pending. */
  nextDeliveryAt?: number;
  /** Status of the last attempt; null when the destination never answered. */
  lastStatus?: number | null;
  dlqId?: string;
};

export type DeliveryRecord = {
  kind: MessageKind;
  messageId: string;
  sourceMessageId?: string;
  destination: string;
  method: string;
  /** Every header sent, QStash's own included. */
  headers: Record<string, string>;
  body: string;
  retried: number;
  /** The answer's status; null when there was none (refused, reset, timed out). */
  status: number | null;
  error?: string;
  /** When the attempt started (ms). */
  at: number;
  durationMs: number;
};

export type QStashStandIn = {
  url: string;
  port: number;
  token: string;
  currentSigningKey: string;
  nextSigningKey: string;
  /** Finished delivery attempts (callbacks included), oldest first; the last 10,000 kept. */
  deliveries(): DeliveryRecord[];
  /** Any message or callback ever accepted, by id, in whatever state it is now. */
  message(id: string): StoredMessage | undefined;
  /** Replaces the default backoff (messages without `Upstash-Retry-Delay`). */
  setRetryDelay(fn: (retried: number) => number): void;
  /**
   * While on, the API accepts requests and neither answers nor acts on them (a QStash that
   * hangs); each stays open until its caller gives up or the stand-in closes. Deliveries go on.
   */
  hang(on: boolean): void;
  /** Stops the scheduler, aborts attempts in flight and closes every socket. */
  close(): Promise<void>;
};

/** Longest wait QStash allows between attempts, and for a `Retry-After`. */
const MAX_RETRY_DELAY_MS = 86_400_000;
/** Pay-as-you-go's longest delay; a `Not-Before` beyond it is most likely in ms by mistake. */
const MAX_DELAY_MS = 365 * 86_400_000;
const MAX_BODY_BYTES = 10 * 1024 * 1024;
const MAX_RESPONSE_BYTES = 1024 * 1024;
/** A dev stack runs for hours: keep the newest records only. */
const MAX_RECORDS = 10_000;
/** Without `Upstash-Timeout`, QStash waits as long as the plan allows (15 minutes on free). */
const DEFAULT_TIMEOUT_MS = 15 * 60_000;
const DEFAULT_RETRIES = 3;
const METHODS = new Set(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]);
/** Forwarded headers that would corrupt the delivery's framing if passed through. */
const UNFORWARDABLE = new Set(["host", "content-length", "transfer-encoding", "connection"]);

type Entry = StoredMessage & {
  bytes: Buffer;
  delayFn?: (retried: number) => number;
  /** Headers forwarded to the success / failure callback (`Upstash-Callback-Forward-*`). */
  callbackHeaders: Record<string, string>;
  failureCallbackHeaders: Record<string, string>;
  cancelRequested: boolean;
};

type DlqEntry = {
  dlqId: string;
  entry: Entry;
  responseStatus: number | null;
  responseHeader: Record<string, string[]>;
  responseBody: Buffer;
};

type Outcome = {
  status: number | null;
  headers: Record<string, string[]>;
  body: Buffer;
  error?: string;
};

type Reply = { status: number; body?: unknown };

class PublishError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Starts the stand-in and resolves once it listens on 127.0.0.1. */
export async function startQStash(options: QStashOptions = {}): Promise<QStashStandIn> {
  const token = options.token ?? randomId(40);
  const currentSigningKey = options.currentSigningKey ?? `sig_${randomId(28)}`;
  const nextSigningKey = options.nextSigningKey ?? `sig_${randomId(28)}`;
  const tickMs = options.tickMs ?? 25;
  let defaultDelay = options.retryDelayMs ?? defaultRetryDelayMs;

  const messages = new Map<string, Entry>();
  const dedup = new Map<string, string>();
  const dlq = new Map<string, DlqEntry>();
  const due = new Set<Entry>();
  const records: DeliveryRecord[] = [];
  const inFlight = new Set<Promise<void>>();
  const aborts = new Set<AbortController>();
  let dlqSeq = 0;
  let closed = false;
  let hanging = false;

  const httpAgent = new HttpAgent({ keepAlive: false });
  const httpsAgent = new HttpsAgent({ keepAlive: false });

  const schedule = (entry: Entry, at: number) => {
    entry.state = "pending";
    entry.nextDeliveryAt = at;
    due.add(entry);
  };

  const accept = (fields: Omit<Entry, "state" | "retried" | "cancelRequested">): Entry => {
    const entry: Entry = { ...fields, state: "pending", retried: 0, cancelRequested: false };
    messages.set(entry.messageId, entry);
    schedule(entry, entry.notBefore);
    return entry;
  };

  const publish = (
    destination: string,
    rawHeaders: Record<string, string>,
    body: Buffer,
  ): { status: number; body: { messageId: string; url: string; deduplicated?: boolean } } => {
    const now = Date.now();
    const fields = parsePublish(destination, rawHeaders, body, now);
    const dedupKey =
      fields.deduplicationId !== undefined
        ? `id:${fields.deduplicationId}`
        : fields.contentBased
          ? `content:${contentHash(fields)}`
          : undefined;
    if (dedupKey !== undefined) {
      const existing = dedup.get(dedupKey);
      if (existing !== undefined) {
        return { status: 202, body: { messageId: existing, url: destination, deduplicated: true } };
      }
    }
    const entry = accept({
      messageId: `msg_${randomId(40)}`,
      kind: "message",
      url: destination,
      method: fields.method,
      headers: fields.headers,
      body: body.toString("utf8"),
      bytes: body,
      createdAt: now,
      notBefore: fields.notBefore,
      maxRetries: fields.retries,
      ...(fields.retryDelay !== undefined && {
        retryDelayExpression: fields.retryDelay.expression,
        delayFn: fields.retryDelay.fn,
      }),
      timeoutMs: fields.timeoutMs,
      ...(fields.callback !== undefined && { callback: fields.callback }),
      ...(fields.failureCallback !== undefined && { failureCallback: fields.failureCallback }),
      callbackHeaders: fields.callbackHeaders,
      failureCallbackHeaders: fields.failureCallbackHeaders,
      labels: fields.labels,
      ...(fields.deduplicationId !== undefined && { deduplicationId: fields.deduplicationId }),
    });
    if (dedupKey !== undefined) dedup.set(dedupKey, entry.messageId);
    return { status: 200, body: { messageId: entry.messageId, url: destination } };
  };

  /** Tells a callback URL how a message ended, as a message of its own (signed, retried). */
  const sendCallback = (
    source: Entry,
    kind: "callback" | "failure-callback",
    outcome: Outcome,
    dlqId?: string,
  ) => {
    const url = kind === "callback" ? source.callback : source.failureCallback;
    if (url === undefined) return;
    const payload = {
      status: outcome.status ?? 0,
      header: outcome.headers,
      body: outcome.body.toString("base64"),
      retried: source.retried,
      maxRetries: source.maxRetries,
      sourceMessageId: source.messageId,
      url: source.url,
      method: source.method,
      sourceHeader: toHeaderLists(source.headers),
      sourceBody: source.bytes.toString("base64"),
      notBefore: String(source.notBefore),
      createdAt: String(source.createdAt),
      ...(source.labels.length > 0 && { label: source.labels[0], labels: source.labels }),
      ...(dlqId !== undefined && { dlqId }),
    };
    const bytes = Buffer.from(JSON.stringify(payload), "utf8");
    const now = Date.now();
    accept({
      messageId: `msg_${randomId(40)}`,
      kind,
      sourceMessageId: source.messageId,
      url,
      method: "POST",
      headers: {
        ...(kind === "callback" ? source.callbackHeaders : source.failureCallbackHeaders),
        "content-type": "application/json",
      },
      body: bytes.toString("utf8"),
      bytes,
      createdAt: now,
      notBefore: now,
      // Callbacks use the retry settings of the message they report on.
      maxRetries: source.maxRetries,
      ...(source.retryDelayExpression !== undefined && {
        retryDelayExpression: source.retryDelayExpression,
      }),
      ...(source.delayFn !== undefined && { delayFn: source.delayFn }),
      timeoutMs: source.timeoutMs,
      callbackHeaders: {},
      failureCallbackHeaders: {},
      labels: [],
    });
  };

  const fail = (entry: Entry, outcome: Outcome) => {
    entry.state = "failed";
    if (entry.kind !== "message") return;
    dlqSeq += 1;
    const dlqId = `${Date.now()}-${dlqSeq}`;
    entry.dlqId = dlqId;
    dlq.set(dlqId, {
      dlqId,
      entry,
      responseStatus: outcome.status,
      responseHeader: outcome.headers,
      responseBody: outcome.body,
    });
    sendCallback(entry, "failure-callback", outcome, dlqId);
  };

  const attempt = async (entry: Entry): Promise<void> => {
    entry.state = "active";
    delete entry.nextDeliveryAt;
    const started = Date.now();
    const headers: Record<string, string> = {
      ...entry.headers,
      "Upstash-Signature": signJwt(currentSigningKey, entry.url, entry.bytes, started),
      "Upstash-Message-Id": entry.messageId,
      "Upstash-Retried": String(entry.retried),
      "User-Agent": "Upstash-QStash",
    };
    const outcome = await deliver(entry, headers);
    if (closed) return;
    records.push({
      kind: entry.kind,
      messageId: entry.messageId,
      ...(entry.sourceMessageId !== undefined && { sourceMessageId: entry.sourceMessageId }),
      destination: entry.url,
      method: entry.method,
      headers,
      body: entry.body,
      retried: entry.retried,
      status: outcome.status,
      ...(outcome.error !== undefined && { error: outcome.error }),
      at: started,
      durationMs: Date.now() - started,
    });
    if (records.length > MAX_RECORDS) records.splice(0, records.length - MAX_RECORDS);
    entry.lastStatus = outcome.status;
    const ok = outcome.status !== null && outcome.status >= 200 && outcome.status < 300;
    if (ok) {
      entry.state = "delivered";
      if (entry.kind === "message") sendCallback(entry, "callback", outcome);
      return;
    }
    // A cancel that came while this attempt was in flight stops what would follow it.
    if (entry.cancelRequested) {
      entry.state = "cancelled";
      return;
    }
    const nonRetryable =
      outcome.status === 489 &&
      outcome.headers["upstash-nonretryable-error"]?.[0]?.toLowerCase() === "true";
    if (nonRetryable || entry.retried >= entry.maxRetries) {
      fail(entry, outcome);
      return;
    }
    const retryAfter = parseRetryAfter(outcome.headers["retry-after"]?.[0], Date.now());
    const wait = retryAfter ?? clampDelay((entry.delayFn ?? defaultDelay)(entry.retried));
    entry.retried += 1;
    schedule(entry, Date.now() + wait);
  };

  const deliver = (entry: Entry, headers: Record<string, string>): Promise<Outcome> => {
    const target = new URL(entry.url);
    const controller = new AbortController();
    aborts.add(controller);
    const timer = setTimeout(() => controller.abort(new Error("timeout")), entry.timeoutMs);
    const sendBody = entry.bytes.length > 0 || !["GET", "HEAD"].includes(entry.method);
    const outgoing: OutgoingHttpHeaders = { ...headers };
    if (sendBody) outgoing["Content-Length"] = String(entry.bytes.length);
    const https = target.protocol === "https:";
    return new Promise<Outcome>((resolve) => {
      let done = false;
      const finish = (outcome: Outcome) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        aborts.delete(controller);
        resolve(outcome);
      };
      const failed = (error: unknown) =>
        finish({
          status: null,
          headers: {},
          body: Buffer.alloc(0),
          error: controller.signal.aborted ? describe(controller.signal.reason) : describe(error),
        });
      const req = (https ? httpsRequest : httpRequest)(
        target,
        {
          method: entry.method,
          headers: outgoing,
          agent: https ? httpsAgent : httpAgent,
          signal: controller.signal,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (chunk: Buffer) => {
            if (size >= MAX_RESPONSE_BYTES) return;
            chunks.push(chunk);
            size += chunk.length;
          });
          res.on("end", () =>
            finish({
              status: res.statusCode ?? null,
              headers: headerLists(res.headersDistinct),
              body: Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES),
            }),
          );
          res.on("error", failed);
          // A response cut off mid-body ends in "close" without "end".
          res.on("close", () => failed(new Error("response cut off")));
        },
      );
      req.on("error", failed);
      req.end(sendBody ? entry.bytes : undefined);
    });
  };

  const run = (entry: Entry) => {
    const job = attempt(entry).finally(() => inFlight.delete(job));
    inFlight.add(job);
  };

  const ticker = setInterval(() => {
    const now = Date.now();
    for (const entry of due) {
      if ((entry.nextDeliveryAt ?? 0) <= now) {
        due.delete(entry);
        run(entry);
      }
    }
  }, tickMs);
  ticker.unref();

  const cancel = (entry: Entry): boolean => {
    if (entry.state === "pending") {
      due.delete(entry);
      delete entry.nextDeliveryAt;
      entry.state = "cancelled";
      return true;
    }
    if (entry.state === "active") {
      entry.cancelRequested = true;
      return true;
    }
    return false;
  };

  /** Messages QStash still holds: once delivered, failed or cancelled they are gone from its API. */
  const live = (id: string): Entry | undefined => {
    const entry = messages.get(id);
    return entry && (entry.state === "pending" || entry.state === "active") ? entry : undefined;
  };

  const route = async (req: IncomingMessage): Promise<Reply> => {
    const target = req.url ?? "/";
    const cut = target.indexOf("?");
    const path = cut === -1 ? target : target.slice(0, cut);
    const search = cut === -1 ? "" : target.slice(cut);
    const query = new URLSearchParams(search);
    const method = req.method ?? "GET";
    const raw = await readBody(req);

    if (path.startsWith("/v2/publish/")) {
      if (method !== "POST") return notAllowed();
      let destination = path.slice("/v2/publish/".length);
      if (/^https?%3A/i.test(destination)) destination = safeDecode(destination);
      return publish(destination + search, lowerHeaders(req.headers), raw);
    }
    if (path === "/v2/batch") {
      if (method !== "POST") return notAllowed();
      const items = parseBatch(raw);
      // Validate every item first, so that a bad one publishes nothing.
      const now = Date.now();
      for (const item of items) parsePublish(item.destination, item.headers, item.body, now);
      return {
        status: 200,
        body: items.map((item) => publish(item.destination, item.headers, item.body).body),
      };
    }
    if (path === "/v2/messages") {
      if (method !== "DELETE") return notAllowed();
      const ids = query.getAll("messageIds");
      const labels = query.getAll("label");
      const urls = query.getAll("url");
      let cancelled = 0;
      for (const entry of messages.values()) {
        if (ids.length > 0 && !ids.includes(entry.messageId)) continue;
        if (labels.length > 0 && !entry.labels.some((l) => labels.includes(l))) continue;
        if (urls.length > 0 && !urls.includes(entry.url)) continue;
        if (cancel(entry)) cancelled += 1;
      }
      return { status: 200, body: { cancelled } };
    }
    const messageMatch = /^\/v2\/messages\/([^/]+)$/.exec(path);
    if (messageMatch) {
      const entry = live(safeDecode(messageMatch[1] ?? ""));
      if (method === "GET") {
        if (!entry) return { status: 404, body: { error: "message not found" } };
        return { status: 200, body: messagePayload(entry) };
      }
      if (method === "DELETE") {
        if (!entry || !cancel(entry)) return { status: 404, body: { error: "message not found" } };
        return { status: 200, body: { cancelled: 1 } };
      }
      return notAllowed();
    }
    if (path === "/v2/dlq") {
      const selected = selectDlq(query);
      if (method === "GET") {
        const count = Number(query.get("count") ?? "100");
        const limit = Number.isInteger(count) && count > 0 ? count : 100;
        return {
          status: 200,
          body: { messages: selected.slice(0, limit).map(dlqPayload) },
        };
      }
      if (method === "DELETE") {
        for (const item of selected) dlq.delete(item.dlqId);
        return { status: 200, body: { deleted: selected.length } };
      }
      return notAllowed();
    }
    if (path === "/v2/dlq/retry") {
      if (method !== "POST") return notAllowed();
      return { status: 200, body: { responses: selectDlq(query).map(retryDlq) } };
    }
    const retryMatch = /^\/v2\/dlq\/retry\/([^/]+)$/.exec(path);
    if (retryMatch) {
      if (method !== "POST") return notAllowed();
      const item = dlq.get(safeDecode(retryMatch[1] ?? ""));
      if (!item) return { status: 404, body: { error: "dlq message not found" } };
      return { status: 200, body: retryDlq(item) };
    }
    const dlqMatch = /^\/v2\/dlq\/([^/]+)$/.exec(path);
    if (dlqMatch) {
      const item = dlq.get(safeDecode(dlqMatch[1] ?? ""));
      if (!item) return { status: 404, body: { error: "dlq message not found" } };
      if (method === "GET") return { status: 200, body: dlqPayload(item) };
      if (method === "DELETE") {
        dlq.delete(item.dlqId);
        return { status: 200 };
      }
      return notAllowed();
    }
    return { status: 404, body: { error: "not found" } };
  };

  const selectDlq = (query: URLSearchParams): DlqEntry[] => {
    const ids = query.getAll("dlqIds");
    const urls = query.getAll("url");
    const labels = query.getAll("label");
    return [...dlq.values()].filter(
      (item) =>
        (ids.length === 0 || ids.includes(item.dlqId)) &&
        (urls.length === 0 || urls.includes(item.entry.url)) &&
        (labels.length === 0 || item.entry.labels.some((l) => labels.includes(l))),
    );
  };

  /** A DLQ retry publishes the same message afresh, due now, and drops it from the DLQ. */
  const retryDlq = (item: DlqEntry): { messageId: string } => {
    dlq.delete(item.dlqId);
    const source = item.entry;
    const now = Date.now();
    const entry = accept({
      ...source,
      messageId: `msg_${randomId(40)}`,
      createdAt: now,
      notBefore: now,
      headers: { ...source.headers },
      labels: [...source.labels],
    });
    delete entry.dlqId;
    delete entry.lastStatus;
    return { messageId: entry.messageId };
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (hanging) {
      req.resume();
      return;
    }
    if (!authorized(req.headers.authorization, token)) {
      send(res, { status: 401, body: { error: "Unauthorized" } });
      req.resume();
      return;
    }
    route(req)
      .then((reply) => send(res, reply))
      .catch((error: unknown) => {
        if (error instanceof PublishError) {
          send(res, { status: error.status, body: { error: error.message } });
        } else {
          send(res, { status: 500, body: { error: "internal error in the QStash stand-in" } });
        }
      });
  });
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    token,
    currentSigningKey,
    nextSigningKey,
    deliveries: () => structuredClone(records),
    message: (id) => {
      const entry = messages.get(id);
      return entry ? snapshot(entry) : undefined;
    },
    setRetryDelay: (fn) => {
      defaultDelay = fn;
    },
    hang: (on) => {
      hanging = on;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      clearInterval(ticker);
      due.clear();
      for (const controller of aborts) controller.abort(new Error("stand-in closed"));
      await Promise.allSettled([...inFlight]);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      });
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

type ParsedPublish = {
  method: string;
  headers: Record<string, string>;
  notBefore: number;
  retries: number;
  retryDelay?: { expression: string; fn: (retried: number) => number };
  timeoutMs: number;
  callback?: string;
  failureCallback?: string;
  callbackHeaders: Record<string, string>;
  failureCallbackHeaders: Record<string, string>;
  labels: string[];
  deduplicationId?: string;
  contentBased: boolean;
  destination: string;
  body: Buffer;
};

/** Reads one publish (headers lower-cased) into what the message will be; throws PublishError. */
function parsePublish(
  destination: string,
  headers: Record<string, string>,
  body: Buffer,
  now: number,
): ParsedPublish {
  checkUrl(destination, "destination");
  const method = (headers["upstash-method"] ?? "POST").toUpperCase();
  if (!METHODS.has(method)) throw new PublishError(400, `invalid Upstash-Method: ${method}`);

  let notBefore = now;
  const notBeforeHeader = headers["upstash-not-before"];
  const delayHeader = headers["upstash-delay"];
  if (notBeforeHeader !== undefined) {
    if (!/^\d+$/.test(notBeforeHeader.trim())) {
      throw new PublishError(400, "invalid Upstash-Not-Before: expected unix seconds");
    }
    notBefore = Math.max(now, Number(notBeforeHeader) * 1000);
  } else if (delayHeader !== undefined) {
    const delay = parseDuration(delayHeader);
    if (delay === undefined) {
      throw new PublishError(400, "invalid Upstash-Delay: expected e.g. 100ms, 30s, 5m, 2h, 1d");
    }
    notBefore = now + delay;
  }
  if (notBefore - now > MAX_DELAY_MS) {
    throw new PublishError(
      400,
      "delay too long: at most 1 year (is Upstash-Not-Before in ms? it takes unix seconds)",
    );
  }

  let retries = DEFAULT_RETRIES;
  const retriesHeader = headers["upstash-retries"];
  if (retriesHeader !== undefined) {
    if (!/^\d+$/.test(retriesHeader.trim())) {
      throw new PublishError(400, "invalid Upstash-Retries: expected a whole number");
    }
    retries = Number(retriesHeader);
  }

  let retryDelay: ParsedPublish["retryDelay"];
  const retryDelayHeader = headers["upstash-retry-delay"];
  if (retryDelayHeader !== undefined) {
    try {
      retryDelay = { expression: retryDelayHeader, fn: compileRetryDelay(retryDelayHeader) };
    } catch (error) {
      throw new PublishError(400, `invalid Upstash-Retry-Delay: ${describe(error)}`);
    }
  }

  let timeoutMs = DEFAULT_TIMEOUT_MS;
  const timeoutHeader = headers["upstash-timeout"];
  if (timeoutHeader !== undefined) {
    const parsed = parseDuration(timeoutHeader);
    if (parsed === undefined || parsed <= 0) {
      throw new PublishError(400, "invalid Upstash-Timeout: expected e.g. 10s, 2m");
    }
    timeoutMs = parsed;
  }

  const callback = headers["upstash-callback"];
  const failureCallback = headers["upstash-failure-callback"];
  if (callback !== undefined) checkUrl(callback, "Upstash-Callback");
  if (failureCallback !== undefined) checkUrl(failureCallback, "Upstash-Failure-Callback");

  const forwarded = prefixed(headers, "upstash-forward-");
  const contentType = headers["content-type"];
  if (contentType !== undefined) forwarded["content-type"] = contentType;

  const label = headers["upstash-label"];
  const deduplicationId = headers["upstash-deduplication-id"];
  return {
    destination,
    body,
    method,
    headers: forwarded,
    notBefore,
    retries,
    ...(retryDelay !== undefined && { retryDelay }),
    timeoutMs,
    ...(callback !== undefined && { callback }),
    ...(failureCallback !== undefined && { failureCallback }),
    callbackHeaders: prefixed(headers, "upstash-callback-forward-"),
    failureCallbackHeaders: prefixed(headers, "upstash-failure-callback-forward-"),
    labels:
      label === undefined
        ? []
        : label
            .split(",")
            .map((l) => l.trim())
            .filter(Boolean),
    ...(deduplicationId !== undefined && { deduplicationId }),
    contentBased: headers["upstash-content-based-deduplication"]?.toLowerCase() === "true",
  };
}

/**
 * A duration as QStash's headers take it: one or more `<number><unit>` with unit ms, s, m, h
 * or d (`100ms`, `30s`, `1h30m`). Returns ms, or undefined when it is not one.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h|d))+$/.test(trimmed)) return undefined;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  let total = 0;
  for (const part of trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)) {
    total += Number(part[1]) * (unit[part[2] ?? ""] ?? 0);
  }
  return Math.round(total);
}

/**
 * Compiles an `Upstash-Retry-Delay` expression: numbers, the variable `retried` (0 before the
 * first retry), + - * / %, parentheses, and pow, sqrt, abs, exp, floor, ceil, round, min, max.
 * The result is in ms, clamped to 0…1 day. Throws an Error saying what is wrong.
 */
export function compileRetryDelay(expression: string): (retried: number) => number {
  const tokens = tokenize(expression);
  let at = 0;
  const peek = () => tokens[at];
  const take = () => tokens[at++];
  const expect = (value: string) => {
    const token = take();
    if (token !== value) throw new Error(`expected "${value}" but found ${token ?? "the end"}`);
  };
  type Fn = (retried: number) => number;
  const functions: Record<string, [min: number, max: number, fn: (...v: number[]) => number]> = {
    pow: [2, 2, Math.pow],
    sqrt: [1, 1, Math.sqrt],
    abs: [1, 1, Math.abs],
    exp: [1, 1, Math.exp],
    floor: [1, 1, Math.floor],
    ceil: [1, 1, Math.ceil],
    round: [1, 1, Math.round],
    min: [1, Number.POSITIVE_INFINITY, Math.min],
    max: [1, Number.POSITIVE_INFINITY, Math.max],
  };
  const sum = (): Fn => {
    let left = product();
    while (peek() === "+" || peek() === "-") {
      const op = take();
      const l = left;
      const r = product();
      left = op === "+" ? (n) => l(n) + r(n) : (n) => l(n) - r(n);
    }
    return left;
  };
  const product = (): Fn => {
    let left = unary();
    while (peek() === "*" || peek() === "/" || peek() === "%") {
      const op = take();
      const l = left;
      const r = unary();
      left = op === "*" ? (n) => l(n) * r(n) : op === "/" ? (n) => l(n) / r(n) : (n) => l(n) % r(n);
    }
    return left;
  };
  const unary = (): Fn => {
    if (peek() === "-") {
      take();
      const inner = unary();
      return (n) => -inner(n);
    }
    if (peek() === "+") {
      take();
      return unary();
    }
    return primary();
  };
  const primary = (): Fn => {
    const token = take();
    if (token === undefined) throw new Error("unexpected end of expression");
    if (token === "(") {
      const inner = sum();
      expect(")");
      return inner;
    }
    if (/^(\d|\.\d)/.test(token)) {
      const value = Number(token);
      if (!Number.isFinite(value)) throw new Error(`bad number ${token}`);
      return () => value;
    }
    if (token === "retried") return (n) => n;
    const spec = functions[token];
    if (!spec) throw new Error(`unknown name "${token}"`);
    const [min, max, fn] = spec;
    expect("(");
    const args: Fn[] = [];
    if (peek() !== ")") {
      args.push(sum());
      while (peek() === ",") {
        take();
        args.push(sum());
      }
    }
    expect(")");
    if (args.length < min || args.length > max) {
      throw new Error(`${token} takes ${min === max ? min : "1 or more"} argument(s)`);
    }
    return (n) => fn(...args.map((arg) => arg(n)));
  };
  const compiled = sum();
  if (at !== tokens.length) throw new Error(`unexpected "${tokens[at]}"`);
  return (retried) => clampDelay(compiled(retried));
}

function tokenize(expression: string): string[] {
  const tokens: string[] = [];
  const pattern = /\s*(?:(\d+(?:\.\d*)?|\.\d+)|([A-Za-z_]\w*)|([-+*/%(),]))\s*/y;
  let at = 0;
  while (at < expression.length) {
    pattern.lastIndex = at;
    const match = pattern.exec(expression);
    if (!match) throw new Error(`unexpected character at ${at}`);
    const token = match[1] ?? match[2] ?? match[3];
    if (token !== undefined) tokens.push(token);
    at = pattern.lastIndex;
  }
  if (tokens.length === 0) throw new Error("empty expression");
  return tokens;
}

function defaultRetryDelayMs(retried: number): number {
  return Math.min(86_400, Math.exp(2.5 * (retried + 1))) * 1000;
}

function clampDelay(ms: number): number {
  return Number.isFinite(ms) ? Math.min(MAX_RETRY_DELAY_MS, Math.max(0, ms)) : MAX_RETRY_DELAY_MS;
}

/** `Retry-After` as seconds or an HTTP date, in ms from now, capped at a day. */
function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return clampDelay(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : clampDelay(date - now);
}

/** HS256 JWT with QStash's claims; the key is the `sig_…` string's UTF-8 bytes, prefix included. */
function signJwt(key: string, subject: string, body: Buffer, now: number): string {
  const iat = Math.floor(now / 1000);
  // base64url of the digest, keeping the `=` padding that real tokens carry.
  const bodyHash = createHash("sha256")
    .update(body)
    .digest("base64")
    .replace(/\+/g, "-")
    .replace(/\//g, "_");
  const header = base64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const payload = base64url(
    JSON.stringify({
      body: bodyHash,
      exp: iat + 300,
      iat,
      iss: "Upstash",
      jti: `jwt_${randomId(26)}`,
      nbf: iat,
      sub: subject,
    }),
  );
  const signature = createHmac("sha256", Buffer.from(key, "utf8"))
    .update(`${header}.${payload}`)
    .digest("base64url");
  return `${header}.${payload}.${signature}`;
}

function base64url(text: string): string {
  return Buffer.from(text, "utf8").toString("base64url");
}

const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

function randomId(length: number): string {
  // 248 = 4 × 62, so taking bytes below it keeps every character equally likely.
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

function contentHash(fields: ParsedPublish): string {
  const headers = Object.entries(fields.headers).sort(([a], [b]) => (a < b ? -1 : 1));
  return createHash("sha256")
    .update(JSON.stringify([fields.destination, fields.method, headers]))
    .update(fields.body)
    .digest("hex");
}

function checkUrl(value: string, what: string): void {
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    throw new PublishError(400, `invalid ${what}: expected an http:// or https:// URL`);
  }
}

function prefixed(headers: Record<string, string>, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith(prefix)) continue;
    const stripped = name.slice(prefix.length);
    if (stripped && !UNFORWARDABLE.has(stripped)) out[stripped] = value;
  }
  return out;
}

function lowerHeaders(headers: IncomingMessage["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined)
      out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

function headerLists(headers: Record<string, string[] | undefined>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [name, values] of Object.entries(headers)) if (values) out[name] = [...values];
  return out;
}

function toHeaderLists(headers: Record<string, string>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, [value]]));
}

type BatchItem = { destination: string; headers: Record<string, string>; body: Buffer };

/** `POST /v2/batch`: `[{destination, headers?, body?}]`, as Client.batch sends it. */
function parseBatch(raw: Buffer): BatchItem[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new PublishError(400, "batch body is not JSON");
  }
  if (!Array.isArray(parsed) || parsed.length === 0) {
    throw new PublishError(400, "batch body must be a non-empty array of messages");
  }
  return parsed.map((item: unknown, index): BatchItem => {
    if (typeof item !== "object" || item === null) {
      throw new PublishError(400, `batch message ${index} is not an object`);
    }
    const { destination, headers, body } = item as Record<string, unknown>;
    if (typeof destination !== "string") {
      throw new PublishError(400, `batch message ${index} has no destination`);
    }
    const lowered: Record<string, string> = {};
    if (headers !== undefined && headers !== null) {
      if (typeof headers !== "object") {
        throw new PublishError(400, `batch message ${index}: headers must be an object`);
      }
      for (const [name, value] of Object.entries(headers)) {
        if (typeof value !== "string") {
          throw new PublishError(400, `batch message ${index}: header ${name} is not a string`);
        }
        lowered[name.toLowerCase()] = value;
      }
    }
    if (body !== undefined && body !== null && typeof body !== "string") {
      throw new PublishError(400, `batch message ${index}: body must be a string`);
    }
    return { destination, headers: lowered, body: Buffer.from(body ?? "", "utf8") };
  });
}

function messagePayload(entry: Entry): Record<string, unknown> {
  return {
    messageId: entry.messageId,
    url: entry.url,
    method: entry.method,
    header: toHeaderLists(entry.headers),
    body: entry.body,
    maxRetries: entry.maxRetries,
    ...(entry.retryDelayExpression !== undefined && {
      retryDelayExpression: entry.retryDelayExpression,
    }),
    notBefore: entry.notBefore,
    createdAt: entry.createdAt,
    ...(entry.callback !== undefined && { callback: entry.callback }),
    ...(entry.failureCallback !== undefined && { failureCallback: entry.failureCallback }),
    ...(entry.labels.length > 0 && { label: entry.labels[0], labels: entry.labels }),
  };
}

function dlqPayload(item: DlqEntry): Record<string, unknown> {
  return {
    ...messagePayload(item.entry),
    dlqId: item.dlqId,
    ...(item.responseStatus !== null && { responseStatus: item.responseStatus }),
    responseHeader: item.responseHeader,
    responseBody: item.responseBody.toString("utf8"),
  };
}

function snapshot(entry: Entry): StoredMessage {
  const {
    bytes: _bytes,
    delayFn: _delayFn,
    callbackHeaders: _callbackHeaders,
    failureCallbackHeaders: _failureCallbackHeaders,
    cancelRequested: _cancelRequested,
    ...rest
  } = entry;
  return structuredClone(rest);
}

function authorized(header: string | undefined, token: string): boolean {
  const expected = Buffer.from(`Bearer ${token}`, "utf8");
  const given = Buffer.from(header ?? "", "utf8");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on("end", () => {
      if (size > MAX_BODY_BYTES) reject(new PublishError(413, "message too large: at most 10 MB"));
      else resolve(Buffer.concat(chunks));
    });
    req.on("error", reject);
  });
}

function send(res: ServerResponse, reply: Reply): void {
  if (res.headersSent) return;
  if (reply.body === undefined) {
    res.writeHead(reply.status).end();
    return;
  }
  const text = JSON.stringify(reply.body);
  res
    .writeHead(reply.status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
    })
    .end(text);
}

function notAllowed(): Reply {
  return { status: 405, body: { error: "method not allowed" } };
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
