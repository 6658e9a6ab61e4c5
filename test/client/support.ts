// Client test setup: a real app and a client of it, a send recorder, an app with Redis down.
import { Redis } from "@upstash/redis";
import {
  type ClientOptions,
  createClient,
  DelayqClientError,
  type FetchLike,
} from "../../src/client";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
// After the app: @hono/zod-openapi must extend zod before the domain schemas are built.
import { DelayQueue } from "../../src/index";
import { ADMIN, type TestApp, testApp } from "../support/app";
import { expectRejection } from "../support/expect";

export const BASE = "http://delayq.test";
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A sent JSON body, as far as the assertions read it. */
export type SentBody = { id?: string; jobs?: { id?: string }[] };
export type Sent = { method: string; url: string; headers: Headers; body?: SentBody };

/** Records every request the client sends, then hands it to `next`. */
export function recording(next: FetchLike): { fetch: FetchLike; sent: Sent[] } {
  const sent: Sent[] = [];
  return {
    sent,
    fetch: (input, init) => {
      const body = typeof init.body === "string" ? JSON.parse(init.body) : undefined;
      sent.push({
        method: init.method ?? "GET",
        url: input,
        headers: new Headers(init.headers),
        body,
      });
      return next(input, init);
    },
  };
}

/** A real app and a client of it; `sent` holds what the client sent. */
export function setup(options: Partial<ClientOptions> = {}, app: TestApp = testApp()) {
  const { fetch, sent } = recording((input, init) => app.app.request(input, init));
  const client = createClient({ baseUrl: BASE, token: ADMIN, fetch, retryDelayMs: 1, ...options });
  return { t: app, client, sent };
}

/** The real app on a queue whose Redis is not there: every Redis call fails, so 503. */
export function brokenApp() {
  const redis = new Redis({
    url: "http://127.0.0.1:1",
    token: "x",
    retry: { retries: 0 },
    automaticDeserialization: false,
    enableTelemetry: false,
  });
  return createApp({
    queue: new DelayQueue({ redis }),
    tokens: parseTokens(ADMIN),
    log: () => {},
  });
}

/** The rejection of a call, which must be a DelayqClientError. */
export function failure(promise: Promise<unknown>): Promise<DelayqClientError> {
  return expectRejection(promise, DelayqClientError);
}
