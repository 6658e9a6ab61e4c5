// An HTTP server that speaks the Upstash Redis REST protocol in front of a local redis-server.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type Reply, RespConnection } from "./resp";

export type BridgeOptions = {
  /** Port of the redis-server behind the bridge. */
  redisPort: number;
  /** @default "127.0.0.1" */
  redisHost?: string;
  /**
   * Accepted bearer tokens. A string or list maps every token to logical DB 0; a record maps
   * each token to its own DB, so that separate users of one bridge never see each other's keys.
   */
  tokens: string | readonly string[] | Readonly<Record<string, number>>;
  /**
   * Also accept `<token>:<label>` for any label, with the DB of `<token>`. Requests are counted
   * per full token, so a test can give itself a label and read exactly its own request counts.
   * @default false
   */
  allowTokenLabels?: boolean;
  /** Port to listen on. @default a free port */
  port?: number;
  /** @default "127.0.0.1" */
  host?: string;
  /** Largest accepted request body. @default 10 MiB, as on Upstash */
  maxBodyBytes?: number;
  /**
   * `redisPort` is a node of a Redis Cluster (dev/redis-cluster.ts): a command answered `MOVED`
   * goes again to the node named, and `KEYS`/`SCAN` whose pattern holds a hash tag go to the
   * node of that tag's slot, so that tests can look at a deployment's keys wherever they are.
   * Database 0 only. @default false
   */
  cluster?: boolean;
};

/** What one token (or the whole bridge) has been asked to do. */
export type BridgeCounters = {
  /** HTTP requests that reached Redis, by endpoint. */
  requests: { single: number; pipeline: number; multiExec: number; total: number };
  /** Redis commands sent for those requests (a pipeline of 5 counts 5; MULTI/EXEC not counted). */
  commands: number;
};

export type Bridge = {
  url: string;
  port: number;
  /** Counters of one token (as presented, label included), or of all tokens. */
  stats(token?: string): BridgeCounters;
  /** Zeroes the counters. */
  resetStats(): void;
  /** Stops listening, closes keep-alive sockets and the Redis connections. */
  close(): Promise<void>;
};

type Command = string[];
type Endpoint = "single" | "pipeline" | "multiExec";
type JsonReply = { status: number; body: unknown };

/**
 * Commands that would change the state of the shared connection, block it, or end it. Upstash's
 * REST API has no blocking commands or subscriptions either, so refusing them is faithful.
 */
const REFUSED = new Set([
  "auth",
  "blmove",
  "blmpop",
  "blpop",
  "brpop",
  "brpoplpush",
  "bzmpop",
  "bzpopmax",
  "bzpopmin",
  "client",
  "discard",
  "exec",
  "hello",
  "monitor",
  "multi",
  "psubscribe",
  "punsubscribe",
  "quit",
  "reset",
  "select",
  "shutdown",
  "ssubscribe",
  "subscribe",
  "sunsubscribe",
  "swapdb",
  "sync",
  "psync",
  "unsubscribe",
  "unwatch",
  "wait",
  "waitaof",
  "watch",
  "xread",
  "xreadgroup",
]);

const emptyCounters = (): BridgeCounters => ({
  requests: { single: 0, pipeline: 0, multiExec: 0, total: 0 },
  commands: 0,
});

class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Starts the bridge and resolves once it listens. */
export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const tokenDbs = normalizeTokens(options.tokens);
  const maxBodyBytes = options.maxBodyBytes ?? 10 * 1024 * 1024;
  const connections = new Map<number, Promise<RespConnection>>();
  const perToken = new Map<string, BridgeCounters>();
  let total = emptyCounters();

  // A cluster's other nodes, by port (the key of `connections` is the port there, not a db).
  const connection = async (db: number, port = options.redisPort): Promise<RespConnection> => {
    const slot = options.cluster ? port : db;
    const existing = connections.get(slot);
    if (existing !== undefined) {
      const open = await existing.catch(() => undefined);
      if (open && !open.closed) return open;
    }
    const opening = (async () => {
      const conn = await RespConnection.open(port, options.redisHost);
      if (db !== 0) {
        const reply = await conn.call("SELECT", String(db));
        if (reply.type === "error") throw new Error(reply.message);
      }
      return conn;
    })();
    connections.set(slot, opening);
    return opening;
  };

  /** `command` on the node that serves it: a pattern's tag's node, then wherever MOVED points. */
  const clusterCall = async (command: Command): Promise<Reply> => {
    const seed = await connection(0);
    let port = options.redisPort;
    const name = command[0]?.toLowerCase();
    const pattern =
      name === "keys" ? command[1] : name === "scan" ? optionAfter(command, "match") : undefined;
    if (pattern && /\{[^}]+\}/.test(pattern)) port = await slotOwner(seed, pattern);
    for (let hops = 0; ; hops++) {
      const reply = await (await connection(0, port)).call(...command);
      const moved = reply.type === "error" ? /^MOVED \d+ [^:]+:(\d+)/.exec(reply.message) : null;
      if (!moved || hops >= 3) return reply;
      port = Number(moved[1]);
    }
  };
  const call = (db: number, command: Command): Promise<Reply> =>
    options.cluster ? clusterCall(command) : connection(db).then((conn) => conn.call(...command));

  const authorize = (req: IncomingMessage): { token: string; db: number } | undefined => {
    const header = req.headers.authorization ?? "";
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const token = match?.[1];
    if (!token) return undefined;
    const direct = tokenDbs.get(token);
    if (direct !== undefined) return { token, db: direct };
    if (options.allowTokenLabels) {
      const cut = token.indexOf(":");
      const db = cut > 0 ? tokenDbs.get(token.slice(0, cut)) : undefined;
      if (db !== undefined) return { token, db };
    }
    return undefined;
  };

  const count = (token: string, endpoint: Endpoint, commands: number) => {
    let counters = perToken.get(token);
    if (!counters) {
      counters = emptyCounters();
      perToken.set(token, counters);
    }
    for (const c of [counters, total]) {
      c.requests[endpoint] += 1;
      c.requests.total += 1;
      c.commands += commands;
    }
  };

  const handle = async (req: IncomingMessage, base64: boolean): Promise<JsonReply> => {
    const auth = authorize(req);
    if (!auth) return { status: 401, body: { error: "Unauthorized" } };
    const url = new URL(req.url ?? "/", "http://bridge");
    const raw = await readBody(req, maxBodyBytes);

    if (url.pathname === "/__bridge/stats" && req.method === "GET") {
      return { status: 200, body: perToken.get(auth.token) ?? emptyCounters() };
    }
    if (url.pathname === "/pipeline" || url.pathname === "/multi-exec") {
      if (req.method !== "POST") throw new RequestError(405, "ERR use POST");
      const commands = parseCommandList(raw);
      const endpoint: Endpoint = url.pathname === "/pipeline" ? "pipeline" : "multiExec";
      count(auth.token, endpoint, commands.length);
      if (endpoint === "pipeline" && options.cluster) {
        const replies = await Promise.all(commands.map((command) => call(auth.db, command)));
        return { status: 200, body: replies.map((reply) => entry(reply, base64)) };
      }
      const conn = await connection(auth.db);
      if (endpoint === "pipeline") {
        const replies = await conn.send(commands);
        return { status: 200, body: replies.map((reply) => entry(reply, base64)) };
      }
      return multiExec(conn, commands, base64);
    }
    const command =
      url.pathname === "/" ? parseCommand(parseJson(raw)) : pathCommand(url.pathname, raw);
    count(auth.token, "single", 1);
    const reply = await call(auth.db, command);
    if (reply.type === "error") return { status: 400, body: { error: reply.message } };
    return { status: 200, body: { result: encode(reply, base64) } };
  };

  const server = createServer((req, res) => {
    const base64 = String(req.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
    handle(req, base64)
      .then((reply) => send(res, reply))
      .catch((error: unknown) => {
        if (error instanceof RequestError) {
          send(res, { status: error.status, body: { error: error.message } });
        } else {
          // The only other failures are the redis-server connection's: refused, reset, closed.
          const reason = error instanceof Error ? error.message : String(error);
          send(res, { status: 503, body: { error: `ERR redis-server unavailable: ${reason}` } });
        }
      });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://${options.host ?? "127.0.0.1"}:${port}`,
    port,
    stats: (token) =>
      structuredClone(token === undefined ? total : (perToken.get(token) ?? emptyCounters())),
    resetStats: () => {
      perToken.clear();
      total = emptyCounters();
    },
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      for (const opening of connections.values()) {
        const conn = await opening.catch(() => undefined);
        conn?.close();
      }
      connections.clear();
    },
  };
}

/** The value after `option` (any case) in a command's arguments. */
function optionAfter(command: Command, option: string): string | undefined {
  const at = command.findIndex((arg, i) => i > 0 && arg.toLowerCase() === option);
  return at > 0 ? command[at + 1] : undefined;
}

/** The port of the cluster node that serves the slot of `key`'s hash tag (CLUSTER SLOTS). */
async function slotOwner(seed: RespConnection, key: string): Promise<number> {
  const slotReply = await seed.call("CLUSTER", "KEYSLOT", key);
  const slot = slotReply.type === "integer" ? slotReply.value : -1;
  const slots = await seed.call("CLUSTER", "SLOTS");
  for (const range of slots.type === "array" ? (slots.value ?? []) : []) {
    const [from, to, master] = range.type === "array" ? (range.value ?? []) : [];
    if (from?.type !== "integer" || to?.type !== "integer" || master?.type !== "array") continue;
    const port = master.value?.[1];
    if (slot >= from.value && slot <= to.value && port?.type === "integer") return port.value;
  }
  throw new RequestError(503, `ERR no node serves slot ${slot}`);
}

function normalizeTokens(tokens: BridgeOptions["tokens"]): Map<string, number> {
  if (typeof tokens === "string") return new Map([[tokens, 0]]);
  if (Array.isArray(tokens)) return new Map(tokens.map((token: string) => [token, 0]));
  return new Map(Object.entries(tokens as Record<string, number>));
}

/** MULTI, the commands, EXEC, written in one go so that nothing interleaves on the connection. */
async function multiExec(
  conn: RespConnection,
  commands: Command[],
  base64: boolean,
): Promise<JsonReply> {
  const replies = await conn.send([["MULTI"], ...commands, ["EXEC"]]);
  const exec = replies[replies.length - 1] as Reply;
  if (exec.type === "error") {
    // A command was refused while queueing (EXECABORT): Upstash answers 400 with one error.
    const cause = replies.slice(1, -1).find((reply) => reply.type === "error");
    const detail = cause?.type === "error" ? `: ${cause.message}` : "";
    return { status: 400, body: { error: `${exec.message}${detail}` } };
  }
  const results = exec.type === "array" ? (exec.value ?? []) : [];
  return { status: 200, body: results.map((reply) => entry(reply, base64)) };
}

function entry(reply: Reply, base64: boolean): { result: unknown } | { error: string } {
  return reply.type === "error" ? { error: reply.message } : { result: encode(reply, base64) };
}

/**
 * Encodes a reply as Upstash does: with base64 on, every bulk and status string is the base64 of
 * its raw bytes except the status `OK`; integers stay numbers; nil is null; arrays recurse.
 */
export function encode(reply: Reply, base64: boolean): unknown {
  switch (reply.type) {
    case "status":
      if (!base64) return reply.value.toString("utf8");
      return reply.value.toString("latin1") === "OK" ? "OK" : reply.value.toString("base64");
    case "bulk":
      if (reply.value === null) return null;
      return base64 ? reply.value.toString("base64") : reply.value.toString("utf8");
    case "integer":
      return reply.value;
    case "error":
      // An error inside an array (a Lua table holding an error reply): its text, unencoded.
      return reply.message;
    case "array":
      return reply.value === null ? null : reply.value.map((item) => encode(item, base64));
  }
}

function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch {
    throw new RequestError(400, "ERR failed to parse command: the body is not valid JSON");
  }
}

/** One command: a non-empty JSON array of strings, numbers or booleans. */
function parseCommand(value: unknown): Command {
  if (!Array.isArray(value) || value.length === 0) {
    throw new RequestError(400, "ERR failed to parse command: expected a non-empty JSON array");
  }
  const args = value.map((arg) => {
    if (typeof arg === "string") return arg;
    if (typeof arg === "number" || typeof arg === "boolean") return String(arg);
    throw new RequestError(400, "ERR failed to parse command: arguments must be scalars");
  });
  const name = (args[0] as string).toLowerCase();
  if (REFUSED.has(name)) {
    throw new RequestError(400, `ERR Command is not available: '${name}'`);
  }
  return args;
}

function parseCommandList(raw: Buffer): Command[] {
  const value = parseJson(raw);
  if (!Array.isArray(value) || value.length === 0) {
    throw new RequestError(400, "ERR failed to parse pipeline: expected an array of commands");
  }
  return value.map(parseCommand);
}

/** The URL form `/set/key/value`, with a POST body, when present, as the last argument. */
function pathCommand(pathname: string, raw: Buffer): Command {
  const args = pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (raw.length > 0) args.push(raw.toString("utf8"));
  return parseCommand(args);
}

/** Reads the whole body as bytes, so multi-byte characters split across chunks survive. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new RequestError(413, `ERR max request size exceeded (${limit} bytes)`));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function send(res: ServerResponse, reply: JsonReply): void {
  if (res.headersSent) return;
  const body = JSON.stringify(reply.body);
  res.writeHead(reply.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}
