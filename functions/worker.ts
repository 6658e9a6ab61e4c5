// The Cloudflare Worker: the HTTP API (fetch) and the scheduler tick (scheduled, every minute).
// Each invocation is one run (src/run): its clock, subrequest budget, waitUntil and logger.
import type {
  ExecutionContext,
  ExportedHandler,
  ScheduledController,
} from "@cloudflare/workers-types";
import { Redis } from "@upstash/redis/cloudflare";
import type { z } from "zod";
import type { EnvSchema } from "../src/config";
import { DelayqError } from "../src/domain/errors";
import { seeTheLogs } from "../src/http/errors";
import { REQUEST_ID_HEADER, requestIdOf } from "../src/http/request-id";
import { buildService, type Service } from "../src/service";

/**
 * The Worker's bindings: its variables and secrets (wrangler.toml's [vars], `wrangler secret
 * put`), parsed with zod by buildService (src/config.ts: EnvSchema), which names any that is
 * missing or wrong.
 */
export type Env = { [K in keyof z.input<typeof EnvSchema>]?: string };

/** Built once per isolate from its env, rebuilt only if the env changes. */
let cached: { env: Env; service: Service } | undefined;

function service(env: Env): Service {
  if (cached?.env !== env) {
    cached = {
      env,
      service: buildService(
        env,
        (config) => new Redis({ url: config.url, token: config.token, ...config.options }),
      ),
    };
  }
  return cached.service;
}

/** The log line of a failed start: ours name the variable (never its value); else a bug's. */
function startFailure(error: unknown): string {
  return error instanceof DelayqError
    ? error.message
    : "delayq could not start: check the Worker's variables (see docs/operating.md, Configuration)";
}

/**
 * Every route, /health included, answers the same JSON error (never workerd's text/plain 500):
 * 500 `misconfigured`, which says no more than to read the log, for anyone may call. The log
 * line, keyed by the request id, names the variable and what is wrong with it.
 */
function misconfigured(error: unknown, request: Request): Response {
  const requestId = requestIdOf(request.headers);
  const message = startFailure(error);
  const stack = error instanceof DelayqError ? undefined : (error as Error | undefined)?.stack;
  // The log line keeps a stack only for what is not a configuration error (a bug of ours).
  console.error(
    JSON.stringify({ level: "error", code: "misconfigured", message, stack, requestId }),
  );
  const told = `delayq is misconfigured: the service cannot start; ${seeTheLogs(requestId)}`;
  return Response.json(
    { error: { code: "misconfigured", message: told, requestId } },
    { status: 500, headers: { [REQUEST_ID_HEADER]: requestId } },
  );
}

export default {
  async fetch(request, env, ctx: ExecutionContext) {
    let built: Service;
    try {
      built = service(env);
      // Settled after the isolate's first request: a microtask from then on.
      await built.ready;
    } catch (error) {
      return misconfigured(error, request);
    }
    const run = built.runs.request({
      path: new URL(request.url).pathname,
      requestId: requestIdOf(request.headers),
      waitUntil: (work) => ctx.waitUntil(work),
    });
    return built.app.fetch(request, { run }, ctx);
  },

  // A misconfigured cron throws, so that the invocation shows as failed with the message.
  async scheduled(controller: ScheduledController, env, ctx: ExecutionContext) {
    const built = service(env);
    await built.ready;
    // Push deliveries wait for their due times (up to a minute) in waitUntil; the tick's run has
    // one subrequest budget, shared by everything it defers.
    const run = built.runs.tick({
      startedAt: controller.scheduledTime,
      waitUntil: (work) => ctx.waitUntil(work),
    });
    await built.scheduler.tick(run);
  },
} satisfies ExportedHandler<Env>;
