// The Cloudflare Worker: the HTTP API (fetch) and the scheduler tick (scheduled, every minute).
import { Redis } from "@upstash/redis/cloudflare";
import { DelayqError } from "../src/domain/errors";
import { buildService, type Service } from "../src/service";

type Env = Record<string, unknown>;
/** The parts of workerd's handler arguments this entry uses. */
type ScheduledController = { readonly scheduledTime: number; readonly cron: string };
type ExecutionContext = { waitUntil(promise: Promise<unknown>): void };

/** Built once per isolate from its env (parsed with zod), rebuilt only if the env changes. */
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

/** The message of a failed start: ours name the variable; anything else is not quoted. */
function startFailure(error: unknown): string {
  return error instanceof DelayqError
    ? error.message
    : "delayq could not start: check the Worker's variables (see the README's Configuration)";
}

/** Every route, /health included, answers the same JSON error (never workerd's text/plain 500). */
function misconfigured(error: unknown): Response {
  const message = startFailure(error);
  const stack = error instanceof DelayqError ? undefined : (error as Error | undefined)?.stack;
  // The log line keeps a stack only for what is not a configuration error (a bug of ours).
  console.error(JSON.stringify({ level: "error", code: "internal_error", message, stack }));
  return Response.json({ error: { code: "internal_error", message } }, { status: 500 });
}

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    let app: Service["app"];
    try {
      app = service(env).app;
    } catch (error) {
      return misconfigured(error);
    }
    return app.fetch(request, env, ctx as never);
  },

  // A misconfigured cron throws, so that the invocation shows as failed with the message.
  async scheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext) {
    // Push deliveries wait for their due times (up to a minute) in waitUntil. Each tick has one
    // subrequest budget (the scheduler's), shared by everything it defers.
    await service(env).scheduler.tick({
      now: controller.scheduledTime,
      defer: (work) => ctx.waitUntil(work),
    });
  },
};
