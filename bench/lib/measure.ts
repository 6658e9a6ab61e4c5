// Measuring tools for the benchmarks: Redis command counts, MONITOR, percentiles, progress lines.
import { connect, type Socket } from "node:net";
import { type Reply, RespConnection, RespParser } from "../../dev/resp";

/** Calls per command name, as INFO commandstats names them (`evalsha`, `client|setname`). */
export type CommandStats = Record<string, number>;

export type CommandSnapshot = {
  stats: CommandStats;
  /** The counter's own commands redis-server had executed when `stats` was read. */
  own: CommandStats;
};

export type CommandDelta = {
  /** Every command executed between two snapshots, inside Lua included, the counter's own not. */
  total: number;
  byCommand: CommandStats;
};

function text(reply: Reply): string {
  if (reply.type === "error") throw new Error(`redis-server: ${reply.message}`);
  return reply.type === "bulk" || reply.type === "status" ? String(reply.value) : "";
}

/**
 * Reads INFO commandstats on a connection of its own. It remembers every command it sent, so a
 * delta leaves out exactly its own INFO calls, not other clients' (BullMQ sends INFO too).
 */
export class CommandCounter {
  private readonly own: CommandStats = {};

  private constructor(
    private readonly connection: RespConnection,
    /** `ip:port` of this connection as redis-server sees it, to leave it out of MONITOR counts. */
    readonly address: string,
  ) {}

  static async open(port: number): Promise<CommandCounter> {
    const connection = await RespConnection.open(port);
    const address = /addr=(\S+)/.exec(text(await connection.call("CLIENT", "INFO")))?.[1];
    if (!address) throw new Error("CLIENT INFO gave no addr");
    const counter = new CommandCounter(connection, address);
    counter.own["client|info"] = 1;
    return counter;
  }

  async snapshot(): Promise<CommandSnapshot> {
    // INFO counts itself only after it has run, so this call is not in its own reply.
    const own = { ...this.own };
    const reply = await this.call("info", ["INFO", "commandstats"]);
    const stats: CommandStats = {};
    for (const match of text(reply).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      const [, name, calls] = match;
      if (name) stats[name] = Number(calls);
    }
    return { stats, own };
  }

  /**
   * Runs a simple command (LLEN, DBSIZE) on this connection; deltas leave it out like INFO, so a
   * harness can look at Redis without adding to what it measures.
   */
  command(...args: string[]): Promise<Reply> {
    return this.call((args[0] ?? "").toLowerCase(), args);
  }

  /** Sends ECHO with a token: MONITOR sees it after every command executed before it. */
  async echo(token: string): Promise<void> {
    await this.call("echo", ["ECHO", token]);
  }

  close(): void {
    this.connection.close();
  }

  private call(name: string, args: string[]): Promise<Reply> {
    this.own[name] = (this.own[name] ?? 0) + 1;
    return this.connection.call(...args);
  }
}

export function commandDelta(before: CommandSnapshot, after: CommandSnapshot): CommandDelta {
  const byCommand: CommandStats = {};
  let total = 0;
  for (const [name, calls] of Object.entries(after.stats)) {
    const own = (after.own[name] ?? 0) - (before.own[name] ?? 0);
    const delta = calls - (before.stats[name] ?? 0) - own;
    if (delta > 0) {
      byCommand[name] = delta;
      total += delta;
    }
  }
  return { total, byCommand };
}

export type MonitorCounts = {
  /** Commands clients sent over the wire (MULTI/EXEC and their queued commands included). */
  client: number;
  /** Commands run inside Lua scripts. */
  lua: number;
  clientByCommand: CommandStats;
};

/**
 * Counts MONITOR lines on a raw connection: `[0 127.0.0.1:53422] "evalsha" ...` is a command a
 * client sent, `[0 lua] "hset" ...` one a script ran. Lines from excluded addresses (the
 * harness's own INFO connection) are not counted.
 */
export class MonitorCounter {
  private counts: MonitorCounts = { client: 0, lua: 0, clientByCommand: {} };
  private readonly parser = new RespParser();
  private readonly waiters = new Map<string, { resolve(): void; reject(error: Error): void }>();
  private closedError: Error | undefined;
  private syncs = 0;

  private constructor(
    private readonly socket: Socket,
    private readonly exclude: ReadonlySet<string>,
  ) {}

  static open(port: number, exclude: readonly string[]): Promise<MonitorCounter> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: "127.0.0.1" });
      const monitor = new MonitorCounter(socket, new Set(exclude));
      let started = false;
      socket.once("error", reject);
      socket.on("data", (chunk: Buffer) => {
        for (const reply of monitor.parser.push(chunk)) {
          if (reply.type !== "status") continue;
          if (!started) {
            // The first reply is MONITOR's own +OK; every later line is a command.
            started = true;
            socket.off("error", reject);
            socket.on("error", (error) => monitor.fail(error));
            socket.on("close", () => monitor.fail(new Error("MONITOR connection closed")));
            resolve(monitor);
            continue;
          }
          monitor.line(reply.value);
        }
      });
      socket.once("connect", () => socket.write("*1\r\n$7\r\nMONITOR\r\n"));
    });
  }

  /** Resolves once every command redis-server executed before this call has been counted. */
  async sync(counter: CommandCounter, timeoutMs = 10_000): Promise<void> {
    if (this.closedError) throw this.closedError;
    const token = `bench-monitor-sync-${++this.syncs}`;
    let timer: NodeJS.Timeout | undefined;
    const seen = new Promise<void>((resolve, reject) => {
      this.waiters.set(token, { resolve, reject });
      timer = setTimeout(
        () => reject(new Error(`MONITOR did not show ECHO ${token} in ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      await counter.echo(token);
      await seen;
    } finally {
      clearTimeout(timer);
      this.waiters.delete(token);
    }
  }

  /** Counts since the last reset, then starts again from zero. */
  take(): MonitorCounts {
    const counts = this.counts;
    this.counts = { client: 0, lua: 0, clientByCommand: {} };
    return counts;
  }

  close(): void {
    this.closedError ??= new Error("MONITOR connection closed");
    this.socket.destroy();
  }

  private fail(error: Error): void {
    this.closedError ??= error;
    for (const waiter of this.waiters.values()) waiter.reject(error);
    this.waiters.clear();
  }

  private line(value: Buffer): void {
    // Address and command name sit in the first few dozen bytes; arguments can be long.
    const head = value.toString("latin1", 0, Math.min(value.length, 240));
    const open = head.indexOf(" [");
    const close = head.indexOf("] ", open);
    if (open < 0 || close < 0) return;
    const source = head.slice(head.indexOf(" ", open + 2) + 1, close);
    if (source === "lua") {
      this.counts.lua++;
      return;
    }
    const name = /^"([^"]*)"/.exec(head.slice(close + 2))?.[1]?.toLowerCase() ?? "?";
    if (this.exclude.has(source)) {
      if (name === "echo") {
        const token = /"echo" "([^"]*)"/i.exec(head)?.[1] ?? "";
        this.waiters.get(token)?.resolve();
      }
      return;
    }
    this.counts.client++;
    this.counts.clientByCommand[name] = (this.counts.clientByCommand[name] ?? 0) + 1;
  }
}

export type Percentiles = {
  count: number;
  min: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
};

/**
 * µs of this process's CPU per call of `fn(i)`, the median of five rounds of `calls` after a
 * warm-up round: for steps too short to time one by one.
 */
export function perCall(fn: (i: number) => void, calls: number): number {
  const rounds: number[] = [];
  for (let round = 0; round <= 5; round++) {
    const before = process.cpuUsage();
    for (let i = 0; i < calls; i++) fn(i);
    const used = process.cpuUsage(before);
    if (round > 0) rounds.push((used.user + used.system) / calls);
  }
  return median(rounds);
}

/** The median of repeated runs' figures (the mean of the middle two for an even count); 0 for none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** Nearest-rank percentiles; NaN everywhere when there are no values. */
export function percentiles(values: readonly number[]): Percentiles {
  const sorted = Float64Array.from(values).sort();
  const rank = (p: number) =>
    sorted.length === 0 ? Number.NaN : (sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? 0);
  return {
    count: sorted.length,
    min: rank(0),
    p50: rank(0.5),
    p95: rank(0.95),
    p99: rank(0.99),
    max: sorted.length === 0 ? Number.NaN : (sorted[sorted.length - 1] ?? 0),
  };
}

/** Round-trip times by route (add, pop, finish), as a client sees them. */
export class Latencies {
  private readonly byRoute = new Map<string, number[]>();

  record(route: string, ms: number): void {
    let list = this.byRoute.get(route);
    if (!list) {
      list = [];
      this.byRoute.set(route, list);
    }
    list.push(ms);
  }

  /** Times `work` under `route`; a call that throws is not recorded. */
  async time<T>(route: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const value = await work();
    this.record(route, performance.now() - started);
    return value;
  }

  count(): number {
    let n = 0;
    for (const list of this.byRoute.values()) n += list.length;
    return n;
  }

  summary(): Record<string, Percentiles> {
    return Object.fromEntries([...this.byRoute].map(([route, list]) => [route, percentiles(list)]));
  }
}

/** Writes a line to stderr, so that progress never mixes with the results on stdout. */
export function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** Prints `label: line()` to stderr every `everyMs` until the returned function is called. */
export function startProgress(label: string, line: () => string, everyMs = 1000): () => void {
  const timer = setInterval(() => log(`${label}: ${line()}`), everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** A small seeded PRNG (mulberry32), so every system and run gets the same delays. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
