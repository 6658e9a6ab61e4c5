// Test helpers: the real Hono app over a real queue (shared bridge), driven with app.request().

import { type AppOptions, createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
import { silentLogger } from "../../src/log";
import { createRun, type Run } from "../../src/run";
import { type TestQueue, testQueue } from "./queue";

export const ADMIN = "admin-token";
export const SHOP_A = "shop-a-token";

export type TestApp = TestQueue & {
  app: ReturnType<typeof createApp>;
  logs: Record<string, unknown>[];
  /** Sends a request; `body` is JSON-encoded unless it is a string. */
  call(
    method: string,
    path: string,
    options?: { body?: unknown; token?: string | null; headers?: Record<string, string> },
  ): Promise<{ status: number; json: any; headers: Headers }>;
};

export function testApp(
  options: Partial<AppOptions> & { pollIntervalMs?: number; test?: TestQueue } = {},
): TestApp {
  const test =
    options.test ?? testQueue({ pollIntervalMs: options.pollIntervalMs, rawBodies: true });
  const logs: Record<string, unknown>[] = [];
  const app = createApp({
    queue: test.queue,
    tokens: parseTokens(`${ADMIN},${SHOP_A}:shop-a.*|wechatpay/shop-a`),
    log: (entry) => logs.push(entry),
    ...options,
  });
  return {
    ...test,
    app,
    logs,
    async call(method, path, { body, token = ADMIN, headers = {} } = {}) {
      const init: RequestInit = { method, headers: { ...headers } };
      if (token !== null)
        (init.headers as Record<string, string>).authorization = `Bearer ${token}`;
      if (body !== undefined) {
        init.body = typeof body === "string" ? body : JSON.stringify(body);
        (init.headers as Record<string, string>)["content-type"] ??= "application/json";
      }
      const res = await app.request(path, init);
      const text = await res.text();
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = text;
      }
      return { status: res.status, json, headers: res.headers };
    },
  };
}

/** A run as an entry point makes one, for tests that drive the scheduler or dispatcher directly. */
export function testRun(
  options: { startedAt?: number; clock?: () => number; subrequests?: number } = {},
): Run {
  return createRun({
    clock: options.clock,
    startedAt: options.startedAt,
    subrequests: options.subrequests ?? 1000,
    lifetimeMs: 120_000,
    log: silentLogger,
  });
}
