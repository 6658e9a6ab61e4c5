// Black-box harness: `npm run dev` (dev/stack.ts, wrangler mode) spawned in a temporary folder on a
// free port, driven over HTTP only; webhook receivers of our own; independent signature checks.
import { type ChildProcess, spawn } from "node:child_process";
import { createHmac, timingSafeEqual } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startService } from "../../dev/service-process";

const root = join(import.meta.dirname, "..", "..");

/** What `.dev/stack.json` holds (DESIGN §8). */
export type StackInfo = {
  apiUrl: string;
  apiToken: string;
  bridgeUrl: string;
  bridgeToken: string;
  redisPort: number;
  qstashUrl: string;
  qstashToken: string;
  qstashCurrentSigningKey: string;
  qstashNextSigningKey: string;
  alipaySandboxUrl: string;
  wechatpaySandboxUrl: string;
};

/** What wrangler dev's proxy answers a request its runtime was restarted under. */
const RESTARTED = "Your worker restarted mid-request";

/** An answer of the API: status, parsed JSON (or the text), headers. */
export type Reply = { status: number; json: any; text: string; headers: Headers };

export type Stack = {
  info: StackInfo;
  /** How long `npm run dev` took to write stack.json, ms. */
  startMs: number;
  /** Calls the API with the stack's bearer token (`token: null` sends none). */
  api(
    method: string,
    path: string,
    body?: unknown,
    options?: { token?: string | null; headers?: Record<string, string> },
  ): Promise<Reply>;
  /**
   * Fires the scheduled handler the way the stack's own local cron does (wrangler dev's
   * `/__scheduled`): the suites that keep the cron quiet (DQ_DEV_TICK_MS) tick when they choose.
   */
  tick(): Promise<void>;
  /**
   * Whether the worker's isolate was replaced since the start (wrangler dev reloads it when its
   * sources or config change; waiting deliveries die with it): a description, or undefined.
   */
  restarted(): Promise<string | undefined>;
  /** Everything the stack printed. */
  output(): string;
  stop(): Promise<void>;
};

/** A free TCP port on 127.0.0.1 (the OS picks one, we let it go). */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createTcpServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Process groups (not ours) of live processes whose command line names `text` (Linux /proc). */
function groupsNaming(text: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const ownGroup = Number(readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ")[2]);
  const found = new Set<number>();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(text)) continue;
      // stat: "pid (comm) state ppid pgrp ..."
      const group = Number(
        readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]?.split(" ")[2],
      );
      if (group > 1 && group !== ownGroup) found.add(group);
    } catch {
      // not ours to read, or gone
    }
  }
  return [...found];
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A copy of what `npm run dev` runs (src, functions, dev and their config; node_modules linked)
 * as the working tree has it now. wrangler dev reloads the worker whenever a source file changes,
 * which drops the deliveries waiting in the old isolate's waitUntil; in a checkout others edit
 * while the suite runs, that would fail timing tests for reasons that are not the product's.
 */
function snapshot(into: string): string {
  mkdirSync(into, { recursive: true });
  for (const entry of [
    "src",
    "functions",
    "dev",
    "package.json",
    "wrangler.toml",
    "tsconfig.json",
  ]) {
    cpSync(join(root, entry), join(into, entry), { recursive: true });
  }
  symlinkSync(join(root, "node_modules"), join(into, "node_modules"), "dir");
  return into;
}

/**
 * Starts `npm run dev` as the e2e test does (`node --import tsx dev/stack.ts`, its own process
 * group, DQ_DEV_DIR in a temporary folder, PORT free), from a snapshot of the working tree, with
 * `env` added to ours, and waits for stack.json.
 */
export async function startStack(env: Record<string, string> = {}): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), "delayq-blackbox-"));
  const port = await freePort();
  const started = Date.now();
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "dev/stack.ts"], {
    cwd: snapshot(join(dir, "repo")),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      PORT: String(port),
      DQ_DEV_DIR: join(dir, "state"),
      // wrangler dev's registry of local workers is shared by every stack on the machine, all
      // named "delayq": ours keeps its own, so that others starting and stopping leave it alone.
      WRANGLER_REGISTRY_PATH: join(dir, "registry"),
      ...env,
    },
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk));
  const stop = async () => {
    const pid = child.pid;
    if (pid && groupAlive(pid)) {
      // Ctrl-C: the stack stops what it started (the service runs in a process group of its own).
      process.kill(pid, "SIGINT");
      const deadline = Date.now() + 30_000;
      while (groupAlive(pid) && Date.now() < deadline) await sleep(100);
      if (groupAlive(pid)) process.kill(-pid, "SIGKILL");
    }
    // Whatever the stack left behind (killed before it could stop its service): the process
    // groups of the processes that name our own folder, each by its id.
    for (const group of groupsNaming(dir)) {
      try {
        process.kill(-group, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const file = join(dir, "state", "stack.json");
  const deadline = Date.now() + 120_000;
  while (!existsSync(file)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`npm run dev did not come up:\n${output}`);
    }
    await sleep(100);
  }
  const info = JSON.parse(readFileSync(file, "utf8")) as StackInfo;
  const startMs = Date.now() - started;
  const api: Stack["api"] = async (method, path, body, options = {}) => {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? info.apiToken : options.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = typeof body === "string" ? body : JSON.stringify(body);
      headers["content-type"] ??= "application/json";
    }
    let res = await fetch(`${info.apiUrl}${path}`, { method, headers, body: payload });
    let text = await res.text();
    if (res.status === 503 && text.startsWith(RESTARTED)) {
      // wrangler dev's proxy, not delayq (whose 503 is JSON): its runtime was restarted under
      // the request, which it says to send again (it resends only GET and HEAD itself).
      await sleep(200);
      res = await fetch(`${info.apiUrl}${path}`, { method, headers, body: payload });
      text = await res.text();
    }
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = text;
    }
    return { status: res.status, json, text, headers: res.headers };
  };
  const isolateStart = async () => {
    const res = await api("GET", "/metrics");
    return /^delayq_process_start_time_seconds (\d+)/m.exec(res.text)?.[1] ?? `HTTP ${res.status}`;
  };
  const firstIsolate = await isolateStart();
  return {
    info,
    startMs,
    api,
    async restarted() {
      const now = await isolateStart().catch(() => "unreachable");
      return now === firstIsolate ? undefined : `${firstIsolate} -> ${now}`;
    },
    async tick() {
      const res = await fetch(`${info.apiUrl}/__scheduled?cron=*+*+*+*+*`);
      await res.text();
      if (res.status !== 200) throw new Error(`/__scheduled answered ${res.status}`);
    },
    output: () => output,
    stop,
  };
}

/** One request a receiver got. */
export type Hit = {
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  /** The raw body as received (UTF-8). */
  raw: string;
  /** When it arrived (unix ms, this process's clock: the stack runs on the same machine). */
  at: number;
};

/** How a route answers: status, body, headers, after an optional hold. */
export type Answer = {
  status?: number;
  body?: string | object;
  headers?: Record<string, string>;
  holdMs?: number;
};

export type Receiver = {
  /** The receiver's base URL, http://127.0.0.1:<port>. */
  base: string;
  /** The URL of a path (and makes sure it answers 200 with an empty body until told otherwise). */
  url(path: string): string;
  /** Sets how `path` answers; `answer` may look at the hit and how many came before to it. */
  on(path: string, answer: Answer | ((hit: Hit, n: number) => Answer)): void;
  hits(path?: string): Hit[];
  /** Waits until `path` has at least `count` hits, or the time runs out; answers the hits. */
  waitFor(path: string, count: number, timeoutMs: number): Promise<Hit[]>;
  close(): Promise<void>;
};

/** A webhook receiver on 127.0.0.1: records every request and answers as each path is told. */
export async function startReceiver(): Promise<Receiver> {
  const hits: Hit[] = [];
  const routes = new Map<string, Answer | ((hit: Hit, n: number) => Answer)>();
  const respond = (res: ServerResponse, answer: Answer) => {
    const body =
      answer.body === undefined
        ? ""
        : typeof answer.body === "string"
          ? answer.body
          : JSON.stringify(answer.body);
    res.writeHead(answer.status ?? 200, answer.headers ?? {});
    res.end(body);
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      const hit: Hit = {
        path,
        method: req.method ?? "",
        headers: req.headers,
        raw: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      };
      const n = hits.filter((h) => h.path === path).length;
      hits.push(hit);
      const route = routes.get(path) ?? {};
      const answer = typeof route === "function" ? route(hit, n) : route;
      if (answer.holdMs) {
        const timer = setTimeout(() => {
          if (!res.destroyed) respond(res, answer);
        }, answer.holdMs);
        res.on("close", () => clearTimeout(timer));
      } else respond(res, answer);
    });
  });
  // Idle connections closed after ~2 s (1 s plus Node's grace), as receivers do: workerd reuses
  // them whatever the Keep-Alive hint says, and one sent on as the receiver closes it is lost
  // ("Network connection lost."); delayq sends such a delivery again at once, so no case here
  // depends on missing that moment (test/workers/closed-connection.test.ts forces it).
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    url: (path) => `${base}${path}`,
    on: (path, answer) => void routes.set(path, answer),
    hits: (path) => (path === undefined ? [...hits] : hits.filter((h) => h.path === path)),
    async waitFor(path, count, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const got = hits.filter((h) => h.path === path);
        if (got.length >= count || Date.now() > deadline) return got;
        await sleep(20);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Checks a `delayq-signature` header with node:crypto, independently of src/:
 * `t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`. Answers the signed time (unix s),
 * or throws saying what is wrong.
 */
export function checkDelayqSignature(secret: string, header: unknown, raw: string): number {
  if (typeof header !== "string") throw new Error("no delayq-signature header");
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!match) throw new Error(`delayq-signature is not t=<s>,v1=<hex>: ${header}`);
  const t = match[1] as string;
  const expected = createHmac("sha256", secret).update(`${t}.${raw}`, "utf8").digest();
  const given = Buffer.from(match[2] as string, "hex");
  if (!timingSafeEqual(expected, given)) throw new Error("delayq-signature does not verify");
  return Number(t);
}

/** min / p50 / p99 / max of a list of numbers (nearest-rank percentiles). */
export function summary(values: readonly number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
  return {
    n: sorted.length,
    min: sorted[0] ?? NaN,
    p50: rank(50),
    p99: rank(99),
    max: sorted[sorted.length - 1] ?? NaN,
  };
}

/** Polls `read` until `done` holds of its value or the time runs out; answers the last value. */
export async function eventually<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs: number,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await sleep(everyMs);
  }
}

/**
 * Watches this process's event loop: how late a 20 ms timer fires, sampled until `stop`. Arrival
 * times at our receivers are taken here, so a stall here (a machine running far more than it has
 * cores for) makes every delivery look late by as much.
 */
export function lagProbe(): { stop(): { maxMs: number; p99Ms: number; samples: number } } {
  const lags: number[] = [];
  let expected = Date.now() + 20;
  const timer = setInterval(() => {
    const now = Date.now();
    lags.push(Math.max(0, now - expected));
    expected = now + 20;
  }, 20);
  return {
    stop() {
      clearInterval(timer);
      const s = summary(lags);
      return { maxMs: s.max, p99Ms: s.p99, samples: s.n };
    },
  };
}

/** `npm run dev` and a second instance on its keyspace, ticked as TwoInstances says. */
export type TwoInstances = {
  stack: Stack;
  /** A receiver of this suite's push topics. */
  rx: Receiver;
  /** Calls the second instance's API with the stack's token. */
  other(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }>;
  stop(): Promise<void>;
};

/**
 * Several ticks and two instances at once: `npm run dev` (its own cron kept quiet) ticked by this
 * suite every `tickEveryMs`, and a second service instance (functions/node.ts on the same bridge
 * and keyspace, ticking every second). `name` names the second instance's state folder.
 */
export async function startTwoInstances(name: string, tickEveryMs: number): Promise<TwoInstances> {
  const stack = await startStack({ DQ_DEV_TICK_MS: "3600000" });
  const rx = await startReceiver();
  const port = await freePort();
  const second = await startService({
    mode: "node",
    port,
    stateDir: join(process.cwd(), ".dev", `blackbox-${name}-${port}`),
    stdio: "ignore",
    vars: {
      UPSTASH_REDIS_REST_URL: stack.info.bridgeUrl,
      UPSTASH_REDIS_REST_TOKEN: stack.info.bridgeToken,
      DQ_TOKENS: stack.info.apiToken,
      DQ_TICK_INTERVAL_MS: "1000",
      DQ_PRIVATE_PUSH: "allow",
    },
  });
  let ticking = true;
  // The pause between ticks ends early when the suite stops (not up to tickEveryMs later).
  let wake = () => {};
  const ticker = (async () => {
    while (ticking) {
      await stack.tick().catch(() => {});
      if (!ticking) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, tickEveryMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  })();
  return {
    stack,
    rx,
    async other(method, path, body) {
      const res = await fetch(`${second.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${stack.info.apiToken}`,
          "content-type": "application/json",
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as any };
    },
    async stop() {
      ticking = false;
      wake();
      await ticker;
      await second.stop();
      await rx.close();
      await stack.stop();
    },
  };
}
