// The HTTP side the payment sandboxes share: a server on 127.0.0.1 that reads each request's body
// and hands it to the sandbox's router, answering a sandbox bug as a plain 500 (never a key or a
// body); and the random digits their ids are made of.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** Routes one request whose body has been read. */
export type SandboxRoute = (
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  body: Buffer,
) => void | Promise<void>;

/** `n` random decimal digits. */
export function digits(n: number): string {
  return Array.from(randomBytes(n), (b) => String(b % 10)).join("");
}

/** A request's (or an answer's) whole body. */
export function readAll(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => resolve(Buffer.concat(chunks)));
    stream.on("error", reject);
  });
}

/**
 * Serves `route` on 127.0.0.1 (`port`, or a free one). `stop` clears the timers of requests the
 * sandbox holds on purpose (`hangs`), drops every connection and closes the server.
 */
export async function serveSandbox(
  route: SandboxRoute,
  options: { port?: number; hangs: Set<NodeJS.Timeout> },
): Promise<{ url: string; stop(): Promise<void> }> {
  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      await route(req, res, url, await readAll(req));
    })().catch((error: unknown) => {
      // A sandbox bug, not a provider answer: say so plainly, never with a key or a body.
      if (res.headersSent) return void res.destroy();
      const text = JSON.stringify({ error: "sandbox_error", message: (error as Error).message });
      res.writeHead(500, { "content-type": "application/json" });
      res.end(text);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async stop() {
      for (const timer of options.hangs) clearTimeout(timer);
      options.hangs.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
