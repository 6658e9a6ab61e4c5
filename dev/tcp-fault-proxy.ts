// A TCP proxy for fault injection in front of redis-server: drops and delays what a connection
// carries, for the TCP driver (REDIS_URL) what dev/fault-proxy.ts is for REST. It sees bytes, not
// commands: a fault hits what the client wrote in one go (one command, or several pipelined),
// and a dropped connection fails every command in flight on it, as a real network would.
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { closeServer } from "./fault-proxy";

/** Chances per chunk the client writes, 0 to 1; change them at any time. */
export type TcpFaults = {
  /** Close both ends instead of forwarding: the chunk never reaches Redis. */
  dropBefore: number;
  /** Forward, then close both ends when Redis next answers: run, perhaps, but never heard. */
  dropAfter: number;
  /**
   * Hold the chunk up to `maxDelayMs`, like a network whose latency rose for a moment: what
   * follows it on the connection waits behind it, but delays do not add up.
   */
  delay: number;
  maxDelayMs: number;
};

export type TcpFaultProxy = {
  /** Where clients connect: 127.0.0.1 and this port. */
  port: number;
  faults: TcpFaults;
  /** What the proxy did so far: chunks passed, dropped or delayed. */
  stats: { passed: number; droppedBefore: number; droppedAfter: number; delayed: number };
  close(): Promise<void>;
};

export const NO_TCP_FAULTS: TcpFaults = { dropBefore: 0, dropAfter: 0, delay: 0, maxDelayMs: 0 };

/** Starts a proxy to 127.0.0.1:`targetPort` on a free port. */
export async function startTcpFaultProxy(
  targetPort: number,
  faults: Partial<TcpFaults> = {},
): Promise<TcpFaultProxy> {
  const state: TcpFaults = { ...NO_TCP_FAULTS, ...faults };
  const stats = { passed: 0, droppedBefore: 0, droppedAfter: 0, delayed: 0 };
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  };

  const server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    track(client);
    track(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    // Chunks go upstream in the order written, each at its time: when it came, plus its delay,
    // and never before the chunk ahead of it.
    const pending: { at: number; chunk: Buffer; dropAfter: boolean }[] = [];
    let lastAt = 0;
    let timer: NodeJS.Timeout | undefined;
    let dropOnAnswer = false;
    const pump = () => {
      timer = undefined;
      while (pending.length > 0 && (pending[0]?.at ?? 0) <= Date.now()) {
        const next = pending.shift();
        if (!next || upstream.destroyed) return;
        if (next.dropAfter) dropOnAnswer = true;
        stats.passed += 1;
        upstream.write(next.chunk);
      }
      const head = pending[0];
      if (head) timer = setTimeout(pump, head.at - Date.now());
    };
    client.on("data", (chunk: Buffer) => {
      if (Math.random() < state.dropBefore) {
        stats.droppedBefore += 1;
        drop();
        return;
      }
      let at = Date.now();
      if (Math.random() < state.delay) {
        stats.delayed += 1;
        at += Math.random() * state.maxDelayMs;
      }
      lastAt = Math.max(at, lastAt);
      pending.push({ at: lastAt, chunk, dropAfter: Math.random() < state.dropAfter });
      if (!timer) pump();
    });
    client.on("close", () => clearTimeout(timer));
    upstream.on("data", (chunk: Buffer) => {
      if (dropOnAnswer) {
        stats.droppedAfter += 1;
        drop();
        return;
      }
      client.write(chunk);
    });
    for (const socket of [client, upstream]) {
      socket.on("error", drop);
      socket.on("close", drop);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    faults: state,
    stats,
    close: () => closeServer(server, sockets),
  };
}
