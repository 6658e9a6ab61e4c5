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

function misconfigured(error: unknown): Response {
  const message = error instanceof Error ? error.message : String(error);
  console.error(JSON.stringify({ level: "error", code: "internal_error", message }));
  return Response.json({ error: { code: "internal_error", message } }, { status: 500 });
}

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    let app: Service["app"];
    try {
      app = service(env).app;
    } catch (error) {
      if (error instanceof DelayqError) return misconfigured(error);
      throw error;
    }
    return app.fetch(request, env, ctx as never);
  },

  async scheduled(controller: ScheduledController, env: Env, _ctx: ExecutionContext) {
    await service(env).scheduler.tick({ now: controller.scheduledTime });
  },
};
