// Test helper: the QStash stand-in and the app under test served over HTTP, so that the stand-in
// can call the app back (deliveries' callbacks, hand-offs) at a public URL of its own.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { type QStashStandIn, startQStash } from "../../dev/qstash";
import { createQStash, type QStash } from "../../src/dispatch/qstash";
import type { PushApp } from "./push";

export type QStashHarness = {
  qstash: QStashStandIn;
  /** Where the stand-in reaches the app `serve` was last given. */
  publicUrl: string;
  /** The app the public URL serves from now on. */
  serve(app: PushApp): void;
  /** A real @upstash/qstash client of the stand-in (`url` and `timeoutMs` for faults). */
  client(options?: { url?: string; timeoutMs?: number }): QStash;
  close(): Promise<void>;
};

export async function startQStashHarness(): Promise<QStashHarness> {
  const qstash = await startQStash({ retryDelayMs: () => 50 });
  let current: PushApp | undefined;
  const server: Server = createServer(
    getRequestListener((request) => {
      if (!current) return new Response("no app", { status: 503 });
      return current.app.fetch(request);
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    qstash,
    publicUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    serve(app) {
      current = app;
    },
    client: ({ url, timeoutMs } = {}) =>
      createQStash({
        url: url ?? qstash.url,
        token: qstash.token,
        currentSigningKey: qstash.currentSigningKey,
        nextSigningKey: qstash.nextSigningKey,
        timeoutMs,
      }),
    async close() {
      await qstash.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
