// Push delivery's HTTP side: the QStash callback route (verified, no bearer token), and prompt
// delivery of push jobs a request wrote that fall due before the next tick.
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Dispatcher } from "../../dispatch/dispatcher";
import { type ContinueBody, callbackAttempt } from "../../dispatch/qstash";
import { DelayqError } from "../../domain/errors";
import { CLAIM_AHEAD_MS } from "../../domain/push";
import type { Logger } from "../../log";
import type { PushedTopic } from "../../queue/add-batch";
import { soon, type Work } from "../../run/work";
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
  log: Logger;
};

/** Drains `work` after the answer, in the request's run (a Worker's waitUntil). */
export function drainAfter(c: Context<AppEnv>, dispatcher: Dispatcher, work: readonly Work[]) {
  if (work.length === 0) return;
  const run = c.get("run");
  run.defer(dispatcher.drain(run, work));
}

const Settled = z
  .object({
    settled: z.boolean().meta({
      description:
        "false when the reservation had already ended (a duplicate or late callback): ignored",
    }),
  })
  .meta({ id: "CallbackAnswer" });

const Continued = z
  .object({
    started: z.literal(true).meta({
      description: "The run claims what is due within its reach, after this answer.",
    }),
  })
  .meta({ id: "ContinueAnswer" });

/**
 * Registers POST /v1/qstash/callback and /v1/qstash/continue. Call before the /v1 bearer-auth
 * middleware: QStash authenticates them with their signature.
 */
export function pushRoutes(app: OpenAPIHono<AppEnv>, options: PushOptions): void {
  callbackRoute(app, options);
  continueRoute(app, options);
}

function continueRoute(app: OpenAPIHono<AppEnv>, options: PushOptions): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/qstash/continue",
      operationId: "continueHandoff",
      tags: ["push"],
      summary: "QStash starts a run a hand-off asked for (signed by QStash; no bearer token)",
      description:
        "When an invocation's subrequest budget (DQ_SUBREQUESTS) stops it with push jobs left, " +
        "it asks QStash for fresh invocations of this route, wave by wave, each a little before " +
        "the 20 s of due jobs it is for; so does a run for a job due before the next tick that " +
        "it cannot wait for. Each claims and delivers what is due within its reach, from a " +
        'budget of its own. The body is `{"topic": <name> | null, "share"?: <jobs it was asked ' +
        'to take>, "wave"?: <its wave>}`.',
      responses: {
        202: json(Continued, "Started"),
        400: json(ErrorBody, "The body is not a hand-off's (`invalid_request`)"),
        401: json(ErrorBody, "Signature does not verify"),
      },
    }),
    async (c) => {
      const raw = await verifiedBody(c, options);
      if (raw === undefined) return unverified(c);
      const { handOff } = options.dispatcher;
      if (!handOff) {
        throw new DelayqError(
          "not_found",
          "Hand-offs are off here: they need QStash, DQ_PUBLIC_URL and DQ_SUBREQUESTS",
        );
      }
      drainAfter(c, options.dispatcher, [handOff.work(continueBody(raw), c.get("run").clock())]);
      return c.json({ started: true as const }, 202);
    },
  );
}

/**
 * A hand-off message's topic (undefined: every push topic), share (the jobs its run was asked
 * to take: a whole number from 0 to 100,000) and wave (a whole number), or invalid_request.
 */
function continueBody(raw: string): { topic?: string; share?: number; wave?: number } {
  let body: Partial<ContinueBody> | undefined;
  try {
    body = JSON.parse(raw) as Partial<ContinueBody>;
  } catch {
    body = undefined;
  }
  const topic = body?.topic;
  const share = body?.share;
  const wave = body?.wave;
  const shareOk =
    share === undefined || (Number.isSafeInteger(share) && share >= 0 && share <= 100_000);
  const waveOk = wave === undefined || (Number.isSafeInteger(wave) && wave >= 0);
  if (
    typeof body !== "object" ||
    body === null ||
    (topic !== null && typeof topic !== "string") ||
    !shareOk ||
    !waveOk
  ) {
    throw new DelayqError(
      "invalid_request",
      'A hand-off\'s body is {"topic": <name> | null, "share"?: <jobs>, "wave"?: <wave>}, as ' +
        "delayq publishes it",
    );
  }
  return {
    ...(topic ? { topic } : {}),
    ...(share === undefined ? {} : { share }),
    ...(wave === undefined ? {} : { wave }),
  };
}

function callbackRoute(app: OpenAPIHono<AppEnv>, options: PushOptions): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/qstash/callback",
      operationId: "settleQstashCallback",
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
      const raw = await verifiedBody(c, options);
      if (raw === undefined) return unverified(c);
      const { id, receipt } = c.req.valid("query");
      const run = c.get("run");
      const attempt = callbackAttempt(raw, run.clock());
      if (!attempt)
        throw new DelayqError("invalid_request", "The callback body is not QStash's JSON");
      // `flow=1`: the topic has `parallelism` (dispatch/qstash.ts: callbackUrl).
      const flow = c.req.query("flow") === "1";
      const { settled, work } = await options.dispatcher.settle(run, {
        id,
        receipt,
        attempt,
        flow,
      });
      // A job given back due soon is claimed again after the answer, a death told at once.
      drainAfter(c, options.dispatcher, work);
      return c.json({ settled }, 200);
    },
  );
}

/**
 * The per-request hook the queue calls after writing push jobs: those due before the claim
 * window ends (25 s for direct delivery, the next tick for QStash) are claimed and delivered by
 * this request, in the background; a direct one due after that window and before the next tick
 * may come has a fresh run asked for it (with hand-offs: src/dispatch/loop.ts, cover).
 */
export function pushSoon(options: PushOptions) {
  return (c: Context<AppEnv>, pushed: PushedTopic[]): void => {
    const now = c.get("run").clock();
    const work: Work[] = [];
    for (const { topic, via, dueAt } of pushed) {
      if (via === "qstash" && options.qstashReady) {
        if (dueAt <= now + CLAIM_AHEAD_MS) {
          work.push({ kind: "claim", topic, horizon: now + CLAIM_AHEAD_MS });
        }
      } else if (dueAt <= now + 2 * CLAIM_AHEAD_MS) {
        work.push(soon(topic, now, dueAt));
      }
    }
    drainAfter(c, options.dispatcher, work);
  };
}

/**
 * The raw body of a request QStash signed for this URL (read before any authentication, no more
 * than a callback can be), or undefined when its Upstash-Signature does not verify.
 */
async function verifiedBody(c: Context<AppEnv>, options: PushOptions): Promise<string | undefined> {
  const { dispatcher, publicUrl } = options;
  if (!dispatcher.qstash || !publicUrl) {
    throw new DelayqError(
      "not_found",
      "QStash is not configured here: set QSTASH_URL, QSTASH_TOKEN, the two " +
        "QSTASH_*_SIGNING_KEYs and DQ_PUBLIC_URL",
    );
  }
  const raw = await cappedText(c.req.raw, MAX_CALLBACK_BYTES);
  const url = new URL(c.req.url);
  const signedUrl = `${publicUrl.replace(/\/+$/, "")}${url.pathname}${url.search}`;
  const signature = c.req.header("upstash-signature") ?? "";
  return (await dispatcher.qstash.verify(signature, raw, signedUrl)) ? raw : undefined;
}

function unverified(c: Context<AppEnv>) {
  return c.json(
    {
      error: {
        code: "unauthorized" as const,
        message: "The Upstash-Signature does not verify",
        requestId: c.get("requestId"),
      },
    },
    401,
  );
}
