// Push delivery's HTTP side: the QStash callback route (verified, no bearer token), and prompt
// delivery of push jobs a request wrote that fall due before the next tick.
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { DIRECT_WINDOW_MS, type Dispatcher } from "../../dispatch/dispatcher";
import { callbackAttempt } from "../../dispatch/qstash";
import { DelayqError } from "../../domain/errors";
import { type Logger, messageOf } from "../../log";
import type { PushedTopic } from "../../queue/add-batch";
import { CLAIM_AHEAD_MS } from "../../redis/lua/lib/transitions";
import { cappedText } from "../body";
import type { AppEnv } from "../context";
import { ErrorBody, json } from "../schemas";

/** The largest callback body read (QStash sends base64 of the receiver's answer). */
const MAX_CALLBACK_BYTES = 1024 * 1024;

export type PushOptions = {
  dispatcher: Dispatcher;
  /** The service's public URL (DQ_PUBLIC_URL): callbacks are verified against it. */
  publicUrl?: string;
  /** Whether topics may push via QStash (QSTASH_* and DQ_PUBLIC_URL are set). */
  qstashReady: boolean;
  /** Keeps work going after the answer: a Worker's waitUntil, Node's tracked promises. */
  background: (c: Context<AppEnv>, work: Promise<unknown>) => void;
  log: Logger;
};

const Settled = z
  .object({
    settled: z.boolean().meta({
      description:
        "false when the reservation had already ended (a duplicate or late callback): ignored",
    }),
  })
  .meta({ id: "CallbackAnswer" });

/** Registers POST /v1/qstash/callback. Call before the /v1 bearer-auth middleware. */
export function pushRoutes(app: OpenAPIHono<AppEnv>, options: PushOptions): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/qstash/callback",
      tags: ["push"],
      summary: "QStash reports a push delivery's answer (signed by QStash; no bearer token)",
      description:
        "QStash calls this with the receiver's answer (success) or the failure. The " +
        "`Upstash-Signature` is verified against the raw body and this URL; the answer settles " +
        "the job by the settlement table, once per reservation.",
      request: {
        query: z.object({
          id: z.string().meta({ param: { name: "id", in: "query" } }),
          receipt: z.string().meta({ param: { name: "receipt", in: "query" } }),
        }),
      },
      responses: {
        200: json(Settled, "Taken"),
        400: json(ErrorBody, "No `id` or `receipt` in the URL (`invalid_request`)"),
        401: json(ErrorBody, "Signature does not verify"),
      },
    }),
    async (c) => {
      const { dispatcher, publicUrl } = options;
      if (!dispatcher.qstash || !publicUrl) {
        throw new DelayqError(
          "not_found",
          "QStash is not configured here: set QSTASH_URL, QSTASH_TOKEN, the two " +
            "QSTASH_*_SIGNING_KEYs and DQ_PUBLIC_URL",
        );
      }
      // Before any authentication: read no more than a callback can be.
      const raw = await cappedText(c.req.raw, MAX_CALLBACK_BYTES);
      const url = new URL(c.req.url);
      const signedUrl = `${publicUrl.replace(/\/+$/, "")}${url.pathname}${url.search}`;
      const signature = c.req.header("upstash-signature") ?? "";
      if (!(await dispatcher.qstash.verify(signature, raw, signedUrl))) {
        return c.json(
          {
            error: {
              code: "unauthorized" as const,
              message: "The Upstash-Signature does not verify",
            },
          },
          401,
        );
      }
      const { id, receipt } = c.req.valid("query");
      const attempt = callbackAttempt(raw, Date.now());
      if (!attempt)
        throw new DelayqError("invalid_request", "The callback body is not QStash's JSON");
      // A job given back due soon is claimed again after the answer (the request's waitUntil).
      const settled = await dispatcher.settle(id, receipt, attempt, (work) =>
        options.background(c, work),
      );
      return c.json({ settled }, 200);
    },
  );
}

/**
 * The per-request hook the queue calls after writing push jobs: those due before the claim
 * window ends (25 s for direct delivery, the next tick for QStash) are claimed and delivered by
 * this request, in the background.
 */
export function pushSoon(options: PushOptions) {
  return (c: Context<AppEnv>, pushed: PushedTopic[]): void => {
    const now = Date.now();
    for (const { topic, via, dueAt } of pushed) {
      const window = via === "qstash" && options.qstashReady ? CLAIM_AHEAD_MS : DIRECT_WINDOW_MS;
      if (dueAt > now + window) continue;
      const work = options.dispatcher
        .run({ now, horizon: now + window, topic })
        .catch((error: unknown) => {
          options.log({ level: "error", event: "push_failed", topic, message: messageOf(error) });
        });
      options.background(c, work);
    }
  };
}
