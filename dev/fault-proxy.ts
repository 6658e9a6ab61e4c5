// An HTTP proxy for fault injection: drops, delays and 5xx-es a fraction of the requests it passes.
import { createServer, request as forward } from "node:http";
import type { AddressInfo, Server, Socket } from "node:net";
import { readAll } from "./sandbox-http";

/** Chances per request, 0 to 1; change them at any time. */
export type Faults = {
  /** Close the connection before forwarding: the request never reaches the target. */
  dropBefore: number;
  /** Forward, then close the connection instead of answering: done, but the caller never hears. */
  dropAfter: number;
  /** Answer 502 without forwarding. */
  error5xx: number;
  /** Hold the request for up to `maxDelayMs` before forwarding. */
  delay: number;
  maxDelayMs: number;
};

export type FaultProxy = {
  url: string;
  faults: Faults;
  /** What the proxy did so far. */
  stats: {
    passed: number;
    droppedBefore: number;
    droppedAfter: number;
    errors: number;
    delayed: number;
  };
  close(): Promise<void>;
};

export const NO_FAULTS: Faults = {
  dropBefore: 0,
  dropAfter: 0,
  error5xx: 0,
  delay: 0,
  maxDelayMs: 0,
};

/** Starts a proxy to `target` (an http:// origin) on a free port. */
export async function startFaultProxy(
  target: string,
  faults: Partial<Faults> = {},
): Promise<FaultProxy> {
  const origin = new URL(target);
  const state: FaultProxy["faults"] = { ...NO_FAULTS, ...faults };
  const stats = { passed: 0, droppedBefore: 0, droppedAfter: 0, errors: 0, delayed: 0 };
  const sockets = new Set<Socket>();

  const server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      if (Math.random() < state.dropBefore) {
        stats.droppedBefore += 1;
        req.socket.destroy();
        return;
      }
      if (Math.random() < state.error5xx) {
        stats.errors += 1;
        res.writeHead(502, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: "fault proxy: injected 502" }));
        return;
      }
      if (Math.random() < state.delay) {
        stats.delayed += 1;
        await new Promise((r) => setTimeout(r, Math.random() * state.maxDelayMs));
      }
      const dropAfter = Math.random() < state.dropAfter;
      const upstream = forward(
        {
          host: origin.hostname,
          port: origin.port,
          method: req.method,
          path: req.url,
          headers: req.headers,
        },
        (answer) => {
          void readAll(answer).then((payload) => {
            if (dropAfter) {
              stats.droppedAfter += 1;
              req.socket.destroy();
              return;
            }
            stats.passed += 1;
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(payload);
          });
        },
      );
      upstream.on("error", () => {
        stats.errors += 1;
        if (!res.headersSent) {
          res.writeHead(502, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: "fault proxy: the target is unreachable" }));
        }
      });
      upstream.end(body);
    })();
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    faults: state,
    stats,
    close: () => closeServer(server, sockets),
  };
}

/** Stops `server` at once: its open connections (`sockets`, tracked by the caller) are cut. */
export function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  return new Promise((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  });
}
