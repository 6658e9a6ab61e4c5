// Push topics: their config, the delivery a receiver gets, and how its answer settles the job.
import { z } from "zod";
import { clip } from "./errors";

/** Delivery timeouts, seconds. */
export const MAX_PUSH_TIMEOUT_SECONDS = 60;
export const DEFAULT_PUSH_TIMEOUT_SECONDS = 15;
/** The longest Retry-After a receiver may ask for: one day. */
export const MAX_RETRY_AFTER_SECONDS = 86_400;
/** The most a push config's `rate` (a second) and `parallelism` may be. */
export const MAX_FLOW = 1000;
/**
 * Deliveries of a topic with `rate` start at least FLOW_SPACING_MS / rate ms apart: a tenth more
 * than 1000 / rate, so that network jitter (a send a little late, the next one on time) does not
 * put rate + 1 arrivals within one second at the receiver.
 */
export const FLOW_SPACING_MS = 1100;
/**
 * How far ahead of its send time a job of a topic with flow control is claimed, ms: such topics
 * are claimed as room frees, not a tick ahead (a job claimed early would take a place in the
 * parallelism, or a rate slot, that an earlier job added later should have).
 */
export const FLOW_AHEAD_MS = 1000;
/** How often a run with held-back jobs of a topic with `parallelism` looks again, ms. */
export const FLOW_RETRY_MS = 1000;
/** Headers a push config may add to each delivery. */
export const MAX_PUSH_HEADERS = 10;
/**
 * How far ahead of their due time push jobs are claimed, ms: a tick claims what falls due before
 * the next one (the cron comes every minute), and delivers it at its due time, never before.
 */
export const CLAIM_AHEAD_MS = 65_000;
/**
 * How far ahead a run that is not a tick (a request, a QStash callback or hand-off) claims, ms: a
 * direct job due this soon after the request that wrote it is delivered by that request. A
 * Worker keeps a request's deferred work for 30 s after its answer.
 */
export const DIRECT_WINDOW_MS = 25_000;

const HttpUrl = z
  .string()
  .max(2000)
  .refine((text) => {
    try {
      const url = new URL(text);
      return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "";
    } catch {
      return false;
    }
  }, "must be an http:// or https:// URL, e.g. https://shop.example/hooks/delayq")
  // fetch refuses a URL with credentials, and they would be stored and shown with the config:
  // a receiver authenticates deliveries by their signature, or a header of `headers`.
  .refine((text) => {
    try {
      const url = new URL(text);
      return url.username === "" && url.password === "";
    } catch {
      return true;
    }
  }, "must not carry a user or password (user:pass@): check the delayq-signature, or send a header with `headers`");

/** Header names delayq sets itself or that HTTP reserves: a config may not set them. */
const RESERVED_HEADER =
  /^(content-type|content-length|host|connection|transfer-encoding|te|upgrade|keep-alive|expect|delayq-.*|upstash-.*)$/i;

/** Why a header name cannot be configured, or undefined when it can. */
function headerNameProblem(name: string): string | undefined {
  if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/.test(name)) return "is not an HTTP header name";
  if (RESERVED_HEADER.test(name)) {
    return "is set by delayq or by HTTP itself (content-type, delayq-*, upstash-*, host, ...)";
  }
  return undefined;
}

export const PushConfig = z
  .strictObject({
    /** Where deliveries are POSTed. */
    url: HttpUrl.meta({
      description: "Where each due job is POSTed (http or https).",
      example: "https://shop.example/hooks/delayq",
    }),
    /** `direct`: delayq POSTs itself; `qstash`: through Upstash QStash. @default "direct" */
    via: z
      .enum(["direct", "qstash"])
      .default("direct")
      .meta({
        description:
          '"direct": delayq POSTs itself; "qstash": published to Upstash QStash, which delivers ' +
          "at the due second and reports the answer back.",
        example: "direct",
      }),
    /** The HMAC key of `delayq-signature`, at least 16 characters; generated when absent. */
    secret: z
      .string()
      .min(16, "must be at least 16 characters")
      .max(200)
      .optional()
      .meta({
        description:
          "The HMAC-SHA256 key of the delayq-signature header, 16-200 characters; generated when " +
          "absent, shown in full only in the answer that generated it, then masked (…last4).",
        example: "whsec_5f2b7c0d9e1a4b3c",
      }),
    /** Seconds the receiver has to answer, 1-60. @default 15 */
    timeout: z
      .number()
      .int()
      .min(1)
      .max(MAX_PUSH_TIMEOUT_SECONDS)
      .default(DEFAULT_PUSH_TIMEOUT_SECONDS)
      .meta({
        description: "Seconds the receiver has to answer, 1-60; later is a failed attempt.",
        example: 15,
      }),
    /** Told (POST, signed) when a job dies. */
    failureUrl: HttpUrl.optional().meta({
      description:
        "Told when a job dies (attempts used up, past its deadline, buried): a signed POST of " +
        '{"id","topic","body","attempts","reason","lastStatus"}.',
      example: "https://shop.example/hooks/delayq-failed",
    }),
    /** Sent with each delivery, at most 10. */
    headers: z
      .record(
        z.string(),
        z
          .string()
          .max(1000)
          .regex(/^[^\r\n]*$/, "must be one line")
          // fetch (and QStash's client with it) refuses header values beyond Latin-1, and a
          // header that cannot be sent would fail every delivery of the topic.
          .regex(/^[\t\x20-\x7e]*$/, "must be printable ASCII (encode other text, e.g. as %XX)"),
      )
      .superRefine((headers, ctx) => {
        const names = Object.keys(headers);
        if (names.length > MAX_PUSH_HEADERS) {
          ctx.addIssue({ code: "custom", message: `at most ${MAX_PUSH_HEADERS} headers` });
        }
        // Header names are case-insensitive: two spellings of one would go out as one header
        // with both values joined ("x-a: 1, 2"), which no receiver expects.
        const seen = new Map<string, string>();
        for (const name of names) {
          const problem = headerNameProblem(name);
          if (problem)
            ctx.addIssue({ code: "custom", message: `"${clip(name)}" ${problem}`, path: [name] });
          const first = seen.get(name.toLowerCase());
          if (first !== undefined) {
            ctx.addIssue({
              code: "custom",
              message: `"${clip(name)}" is "${clip(first)}" again (header names ignore case): keep one`,
              path: [name],
            });
          } else seen.set(name.toLowerCase(), name);
        }
      })
      .optional()
      .meta({
        description:
          "Up to 10 headers sent with each delivery (not content-type, delayq-*, upstash-*).",
        example: { "X-Api-Key": "k_live_123" },
      }),
    /** Flow control: at most this many deliveries a second (1-1000). */
    rate: z
      .number()
      .int()
      .min(1)
      .max(MAX_FLOW)
      .optional()
      .meta({
        description:
          "Flow control: at most this many deliveries a second, 1-1000. Deliveries start at " +
          "least 1.1/rate s apart; due jobs beyond it are held back and go out in due order.",
        example: 20,
      }),
    /** Flow control: at most this many deliveries unanswered at once (1-1000). */
    parallelism: z
      .number()
      .int()
      .min(1)
      .max(MAX_FLOW)
      .optional()
      .meta({
        description:
          "Flow control: at most this many deliveries sent and not yet answered at once, 1-1000; " +
          "due jobs beyond it are held back and go out in due order as answers come.",
        example: 5,
      }),
  })
  .meta({ id: "PushConfig" });
export type PushConfig = z.output<typeof PushConfig>;

/** Whether a push config limits its deliveries (`rate` or `parallelism`). */
export function hasFlowControl(push: Pick<PushConfig, "rate" | "parallelism">): boolean {
  return push.rate !== undefined || push.parallelism !== undefined;
}

/**
 * How a push delivery attempt ends: done finishes the job, bury moves it to the dead letter, retry
 * (the receiver asked) and fail (it did not take the job) give it back. The settle script
 * (redis/lua/scripts/push.ts) takes these names and tests for them.
 */
export const SETTLE_OUTCOMES = ["done", "retry", "bury", "fail"] as const;
export type SettleOutcome = (typeof SETTLE_OUTCOMES)[number];

/** What a push delivery's receiver answered, reduced to what settles the job. */
export type Settlement = {
  [O in SettleOutcome]: { outcome: O } & SettlementDetails[O];
}[SettleOutcome];

/** What each outcome carries besides its name (unknown: nothing): the wait asked for, if any. */
type SettlementDetails = {
  done: unknown;
  retry: { delayMs?: number };
  bury: unknown;
  fail: { delayMs?: number };
};

/** A receiver's JSON answer, when it gives one: its status; `delay` is read on its own. */
const Answer = z.object({ status: z.enum(["done", "retry", "bury"]) });

/**
 * A retry's `delay`, seconds, in ms: capped at a day, as Retry-After is; anything but a number
 * ≥ 0 (a string, null, a negative) is no delay, so the job waits its backoff step. The receiver
 * asked for a retry either way: a delay it got wrong must not turn that into a finish.
 */
function retryDelayMs(delay: unknown): number | undefined {
  if (typeof delay !== "number" || !Number.isFinite(delay) || delay < 0) return undefined;
  return Math.round(Math.min(delay, MAX_RETRY_AFTER_SECONDS) * 1000);
}

/**
 * The settlement table (DESIGN §3): a 2xx with an empty or non-JSON body, or `{"status":"done"}`,
 * finishes; `{"status":"retry","delay":s?}` releases; `{"status":"bury"}` buries; any other
 * status is a failed attempt, its Retry-After honoured up to a day. A 2xx whose JSON names no
 * known status counts as done (the receiver took it).
 */
export function settlementOf(
  status: number,
  body: string,
  retryAfter: string | null | undefined,
  now: number,
): Settlement {
  if (status >= 200 && status < 300) {
    let parsed: unknown;
    try {
      parsed = body.trim() === "" ? undefined : JSON.parse(body);
    } catch {
      return { outcome: "done" };
    }
    const answer = Answer.safeParse(parsed);
    if (!answer.success) return { outcome: "done" };
    if (answer.data.status === "retry") {
      const delayMs = retryDelayMs((parsed as { delay?: unknown }).delay);
      return delayMs === undefined ? { outcome: "retry" } : { outcome: "retry", delayMs };
    }
    return { outcome: answer.data.status };
  }
  const delayMs = retryAfterMs(retryAfter, now);
  return delayMs === undefined ? { outcome: "fail" } : { outcome: "fail", delayMs };
}

/** Retry-After as seconds or an HTTP date, in ms from now, capped at a day; undefined if none. */
export function retryAfterMs(value: string | null | undefined, now: number): number | undefined {
  if (!value) return undefined;
  const cap = MAX_RETRY_AFTER_SECONDS * 1000;
  if (/^\s*\d+\s*$/.test(value)) return Math.min(cap, Number(value) * 1000);
  const at = Date.parse(value);
  if (Number.isNaN(at)) return undefined;
  return Math.min(cap, Math.max(0, at - now));
}

/**
 * A push config as answered: the secret masked (`…` and its last 4), unless `reveal` (a secret
 * generated by this very request), and the values of `headers` (an API key, often) always masked
 * the same way: they are the caller's, and never echoed.
 */
export function maskPush(push: PushConfig, reveal = false): PushConfig {
  const masked: PushConfig = reveal
    ? { ...push }
    : { ...push, secret: push.secret && mask(push.secret) };
  if (push.headers) {
    masked.headers = Object.fromEntries(
      Object.entries(push.headers).map(([name, value]) => [name, mask(value)]),
    );
  }
  return masked;
}

/**
 * A secret as shown: `…` and its last 4 characters, or `…` alone when it has fewer than 8 (its
 * last 4 would be half of it or all). A masked value is never taken back: `…` is not ASCII,
 * which header values must be, and a secret has at least 16 characters.
 */
export function mask(value: string): string {
  return value.length >= 8 ? `…${value.slice(-4)}` : "…";
}
