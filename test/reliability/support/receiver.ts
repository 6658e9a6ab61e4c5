// A push receiver for the fault run: a node:http server that answers deliveries 2xx most of the
// time, and otherwise 500, late (past a short lease), never (past the push timeout) or by dropping
// the connection; it logs every delivery with when it came and when its answer ended.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { PushDelivery, ReceiverAnswer } from "./history";

/** Chances of each answer, 0 to 1; the rest are a prompt 200. */
export type ReceiverFaults = {
  /** 500, promptly. */
  error: number;
  /** 200, after `slowMs` (a lease of 1 s has ended by then, the push timeout has not). */
  slow: number;
  /** No answer at all: the dispatcher gives up at the push timeout. */
  hang: number;
  /** The connection is destroyed once the request is read. */
  reset: number;
};

export type FaultyReceiver = {
  url: string;
  /** Every delivery, in arrival order; `endedAt` is filled when its answer ends. */
  deliveries: PushDelivery[];
  /** Deliveries whose signature did not verify with the topic's secret (node:crypto's HMAC). */
  badSignatures: number;
  faults: ReceiverFaults;
  close(): Promise<void>;
};

export async function startFaultyReceiver(options: {
  secret: string;
  faults: ReceiverFaults;
  /** How late a slow answer is, ms: [min, max). */
  slowMs: [number, number];
}): Promise<FaultyReceiver> {
  const deliveries: PushDelivery[] = [];
  const sockets = new Set<Socket>();
  const hanging = new Set<ServerResponse>();
  const state = { badSignatures: 0 };
  const faults = { ...options.faults };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const at = Date.now();
      const raw = Buffer.concat(chunks).toString("utf8");
      if (!verified(options.secret, req.headers["delayq-signature"], raw)) state.badSignatures++;
      let parsed: { id?: string; attempt?: number; dueAt?: number } = {};
      try {
        parsed = JSON.parse(raw);
      } catch {}
      const roll = Math.random();
      // Each fault takes its share of [0, 1) in turn; the rest is "ok".
      let answer: ReceiverAnswer = "ok";
      let edge = 0;
      for (const fault of ["error", "slow", "hang", "reset"] as const) {
        edge += faults[fault];
        if (roll < edge) {
          answer = fault;
          break;
        }
      }
      const delivery: PushDelivery = {
        type: "push-deliver",
        id: String(parsed.id),
        attempt: Number(parsed.attempt),
        dueAt: Number(parsed.dueAt),
        at,
        answer,
      };
      deliveries.push(delivery);
      // When the exchange is over for the dispatcher: the answer written, or the connection gone.
      const ended = () => {
        delivery.endedAt ??= Date.now();
      };
      res.on("finish", ended);
      res.on("close", ended);
      if (answer === "reset") {
        req.socket.destroy();
        ended();
      } else if (answer === "hang") {
        hanging.add(res);
      } else if (answer === "slow") {
        const [min, max] = options.slowMs;
        setTimeout(
          () => {
            if (!res.destroyed) res.writeHead(200).end();
          },
          min + Math.random() * (max - min),
        );
      } else {
        res.writeHead(answer === "error" ? 500 : 200).end();
      }
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    deliveries,
    get badSignatures() {
      return state.badSignatures;
    },
    faults,
    async close() {
      for (const res of hanging) res.destroy();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `delayq-signature: t=<s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, checked here. */
function verified(secret: string, header: string | string[] | undefined, body: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(header));
  if (!match) return false;
  const expected = createHmac("sha256", secret).update(`${match[1]}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(match[2] as string, "hex"));
}
