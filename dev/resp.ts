// A minimal RESP2 client over node:net that keeps every reply as raw bytes, for the local stack.
import { connect, type Socket } from "node:net";

/** A decoded RESP2 reply. Bulk and status strings stay as bytes so nothing is re-encoded. */
export type Reply =
  | { type: "status"; value: Buffer }
  | { type: "error"; message: string }
  | { type: "integer"; value: number }
  | { type: "bulk"; value: Buffer | null }
  | { type: "array"; value: Reply[] | null };

const CRLF = Buffer.from("\r\n");

/** Encodes one command as a RESP array of bulk strings. */
export function encodeCommand(args: readonly (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = typeof arg === "string" ? Buffer.from(arg, "utf8") : arg;
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, CRLF);
  }
  return Buffer.concat(parts);
}

/**
 * Incremental RESP2 parser: feed it chunks as they arrive, take complete replies out.
 * Partial replies stay buffered until the rest of their bytes come.
 */
export class RespParser {
  private buffer: Buffer = Buffer.alloc(0);
  private offset = 0;

  push(chunk: Buffer): Reply[] {
    this.buffer =
      this.offset < this.buffer.length
        ? Buffer.concat([this.buffer.subarray(this.offset), chunk])
        : chunk;
    this.offset = 0;
    const replies: Reply[] = [];
    for (;;) {
      const start = this.offset;
      const reply = this.parse();
      if (reply === undefined) {
        this.offset = start;
        break;
      }
      replies.push(reply);
    }
    return replies;
  }

  /** Parses one reply at `offset`, or returns undefined when its bytes have not all arrived. */
  private parse(): Reply | undefined {
    const line = this.readLine();
    if (line === undefined) return undefined;
    const kind = line[0];
    const rest = line.subarray(1);
    switch (kind) {
      case 0x2b /* + */:
        return { type: "status", value: Buffer.from(rest) };
      case 0x2d /* - */:
        return { type: "error", message: rest.toString("utf8") };
      case 0x3a /* : */:
        return { type: "integer", value: Number(rest.toString("latin1")) };
      case 0x24 /* $ */:
        {
          const length = Number(rest.toString("latin1"));
          if (length < 0) return { type: "bulk", value: null };
          if (this.buffer.length < this.offset + length + 2) return undefined;
          const value = Buffer.from(this.buffer.subarray(this.offset, this.offset + length));
          this.offset += length + 2;
          return { type: "bulk", value };
        }
      case 0x2a /* * */:
        {
          const count = Number(rest.toString("latin1"));
          if (count < 0) return { type: "array", value: null };
          const items: Reply[] = [];
          for (let i = 0; i < count; i++) {
            const item = this.parse();
            if (item === undefined) return undefined;
            items.push(item);
          }
          return { type: "array", value: items };
        }
      default:
        throw new Error(`RESP protocol error: unexpected type byte ${String(kind)}`);
    }
  }

  private readLine(): Buffer | undefined {
    const end = this.buffer.indexOf(CRLF, this.offset);
    if (end === -1) return undefined;
    const line = this.buffer.subarray(this.offset, end);
    this.offset = end + 2;
    return line;
  }
}

type Pending = { resolve: (reply: Reply) => void; reject: (error: Error) => void };

/**
 * One pipelined connection to redis-server. Replies come back in the order commands were
 * written, so any number of callers can share it as long as each writes its commands in one go.
 */
export class RespConnection {
  private readonly pending: Pending[] = [];
  private readonly parser = new RespParser();
  private closedError: Error | undefined;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      let replies: Reply[];
      try {
        replies = this.parser.push(chunk);
      } catch (error) {
        this.fail(error as Error);
        socket.destroy();
        return;
      }
      for (const reply of replies) this.pending.shift()?.resolve(reply);
    });
    socket.on("error", (error) => this.fail(error));
    socket.on("close", () => this.fail(new Error("connection to redis-server closed")));
  }

  /** Opens a connection; rejects when nothing listens on the port. */
  static open(port: number, host = "127.0.0.1"): Promise<RespConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host });
      const onError = (error: Error) => reject(error);
      socket.once("error", onError);
      socket.once("connect", () => {
        socket.off("error", onError);
        resolve(new RespConnection(socket));
      });
    });
  }

  get closed(): boolean {
    return this.closedError !== undefined;
  }

  /** Sends commands back to back in one write and resolves with their replies, in order. */
  send(commands: readonly (readonly (string | Buffer)[])[]): Promise<Reply[]> {
    if (this.closedError) return Promise.reject(this.closedError);
    const promises = commands.map(
      () =>
        new Promise<Reply>((resolve, reject) => {
          this.pending.push({ resolve, reject });
        }),
    );
    this.socket.write(Buffer.concat(commands.map(encodeCommand)));
    return Promise.all(promises);
  }

  /** Sends one command and resolves with its reply. */
  async call(...args: (string | Buffer)[]): Promise<Reply> {
    const [reply] = await this.send([args]);
    return reply as Reply;
  }

  close(): void {
    this.socket.end();
  }

  private fail(error: Error): void {
    this.closedError ??= error;
    for (const waiter of this.pending.splice(0)) waiter.reject(error);
  }
}
