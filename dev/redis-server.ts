// Starts and stops a private redis-server for the local stack, tests and benchmarks.
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { RespConnection } from "./resp";

/** Thrown when there is no redis-server binary to start; its message says how to install one. */
export class RedisNotInstalledError extends Error {
  constructor() {
    super(
      [
        "redis-server was not found on PATH; the local stack needs it.",
        "Install it with one of:",
        "  Debian/Ubuntu:  sudo apt-get update && sudo apt-get install -y redis-server",
        "  macOS:          brew install redis",
        "or set REDIS_SERVER_BIN to the path of a redis-server binary.",
      ].join("\n"),
    );
    this.name = "RedisNotInstalledError";
  }
}

export type RedisServerOptions = {
  /** Port to listen on. @default a free port */
  port?: number;
  /** Data directory (created if missing). @default a fresh temporary directory, removed on stop */
  dir?: string;
  /** Turn the append-only file on (durable dev data) or off (tests). @default false */
  appendOnly?: boolean;
  /** `appendfsync` policy when `appendOnly` is on. @default "everysec" */
  appendFsync?: "always" | "everysec" | "no";
  /** Number of logical databases. @default 16 */
  databases?: number;
  /** How long to wait for the server to answer, its data loaded. @default 10000 */
  startTimeoutMs?: number;
  /**
   * Resolve once the server answers, before its data has loaded (commands answer LOADING
   * meanwhile): for tests of a server in that state. @default false
   */
  whileLoading?: boolean;
  /** More redis-server arguments, e.g. ["--enable-debug-command", "yes"] for DEBUG DIGEST. */
  extraArgs?: string[];
};

export type RedisServer = {
  port: number;
  dir: string;
  /** The child process, for fault-injection tests that want to kill it. */
  process: ChildProcess;
  /** Stops the server (SIGTERM, then SIGKILL after a grace period) and waits for it to exit. */
  stop(): Promise<void>;
};

/** Finds the redis-server binary: REDIS_SERVER_BIN, else the first one on PATH. */
export function findRedisServer(): string {
  const explicit = process.env.REDIS_SERVER_BIN;
  const candidates = explicit
    ? [explicit]
    : (process.env.PATH ?? "")
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, "redis-server"));
  if (!explicit) candidates.push("/usr/sbin/redis-server", "/usr/bin/redis-server");
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; try the next one
    }
  }
  throw new RedisNotInstalledError();
}

/** Asks the OS for a port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Whether something listens on `port` (binding it fails), checked before starting anything. */
export function portInUse(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE") resolve(true);
      else reject(error);
    });
    server.listen(port, host, () => server.close(() => resolve(false)));
  });
}

/**
 * Whether the server on `connection` is the process `pid` (a PING alone could be answered by
 * another server on the same port) and, unless `whileLoading`, has loaded its data: INFO is
 * answered while a data file still loads, a command is not ("LOADING Redis is loading ...").
 */
async function serves(
  connection: RespConnection,
  pid: number | undefined,
  whileLoading: boolean,
): Promise<boolean> {
  const server = await connection.call("INFO", "server");
  const id = server.type === "bulk" ? /process_id:(\d+)/.exec(String(server.value))?.[1] : "";
  if (id !== String(pid)) return false;
  if (whileLoading) return true;
  const persistence = await connection.call("INFO", "persistence");
  return persistence.type === "bulk" && /^loading:0\r?$/m.test(String(persistence.value));
}

/** Starts redis-server and resolves once it answers, its data loaded. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const bin = findRedisServer();
  const port = options.port ?? (await freePort());
  const temporary = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "delayq-redis-"));
  mkdirSync(dir, { recursive: true });
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--daemonize",
    "no",
    "--protected-mode",
    "no",
    "--save",
    "",
    "--databases",
    String(options.databases ?? 16),
    "--appendonly",
    options.appendOnly ? "yes" : "no",
    "--appendfsync",
    options.appendFsync ?? "everysec",
    "--loglevel",
    "warning",
    "--logfile",
    "",
    ...(options.extraArgs ?? []),
  ];
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  // redis-server logs to stdout; keep the tail to explain a failed start.
  let stderr = "";
  const keep = (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  const stop = async () => {
    process.off("exit", killOnExit);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    if (temporary) rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (options.startTimeoutMs ?? 10_000);
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`redis-server exited at start (code ${child.exitCode}): ${stderr.trim()}`);
    }
    let connection: RespConnection | undefined;
    try {
      connection = await RespConnection.open(port);
      if (await serves(connection, child.pid, options.whileLoading === true)) break;
    } catch {
      // not listening yet
    } finally {
      connection?.close();
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer on port ${port} in time: ${stderr.trim()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { port, dir, process: child, stop };
}
