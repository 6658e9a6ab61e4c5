// ouqiang/delay-queue as a peer of the single-job shape: a built binary from the environment
// (OUQIANG_DELAY_QUEUE_BIN), its config written to a temporary folder, its HTTP API driven as its
// README shows (/push, /pop, /finish). Nothing here builds it; without the variable it is skipped.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../dev/redis-server";
import { nodeFetch } from "../../src/client/node";

/**
 * Requests go out as delayq's do in the single-job shape (bench/single/stack.ts): through
 * nodeFetch, node:http with keep-alive. Node's global fetch cost the benchmark process ~0.5 ms of
 * CPU a request, which made the one Node thread driving both systems their bottleneck.
 */
const send = nodeFetch();

export const OUQIANG_ENV = "OUQIANG_DELAY_QUEUE_BIN";

export const OUQIANG_SKIPPED =
  `ouqiang/delay-queue skipped: set ${OUQIANG_ENV} to a built ouqiang/delay-queue binary ` +
  "to compare it";

/** The binary to run, or why there is none. */
export function ouqiangBinary(): { bin: string } | { skipped: string } {
  const bin = process.env[OUQIANG_ENV];
  if (!bin) return { skipped: OUQIANG_SKIPPED };
  if (!existsSync(bin)) return { skipped: `${OUQIANG_ENV} names ${bin}, which does not exist` };
  return { bin };
}

export type OuqiangServer = {
  url: string;
  pid: number;
  close(): Promise<void>;
};

/** Its answer envelope: always HTTP 200, `code` 0 on success. */
type Envelope = { code: number; message: string; data: unknown };

/**
 * Starts the server against the benchmark's redis-server. Everything but where to listen and
 * which Redis to use stays at its defaults: 3 buckets scanned every second, BLPOP for 178 s,
 * a pool that PINGs each connection it lends (redigo's TestOnBorrow). It logs every request to
 * stderr, as it does by default; that output is dropped.
 */
export async function startOuqiang(bin: string, redisPort: number): Promise<OuqiangServer> {
  const dir = mkdtempSync(join(tmpdir(), "delayq-bench-ouqiang-"));
  const port = await freePort();
  const config = join(dir, "delay-queue.conf");
  writeFileSync(
    config,
    [
      `bind_address = 127.0.0.1:${port}`,
      `redis.host = 127.0.0.1:${redisPort}`,
      // The benchmark's redis-server holds nothing else; db 0 is where the counters look.
      "redis.db = 0",
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn(bin, ["-c", config], { stdio: "ignore" });
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const close = async () => {
    process.off("exit", kill);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(kill, 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      await close();
      throw new Error(`ouqiang/delay-queue exited at start (code ${child.exitCode})`);
    }
    try {
      await call(url, "/get", { id: "bench-probe" });
      break;
    } catch {
      if (Date.now() > deadline) {
        await close();
        throw new Error(`ouqiang/delay-queue did not answer ${url} within 15 s`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { url, pid: child.pid ?? 0, close };
}

async function call(
  base: string,
  path: string,
  body: unknown,
  signal?: AbortSignal,
): Promise<Envelope> {
  const res = await send(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  const answer = JSON.parse(await res.text()) as Envelope;
  if (answer.code !== 0) throw new Error(`ouqiang ${path}: ${answer.message}`);
  return answer;
}

/** Its HTTP lifecycle. `delay` and `ttr` are whole seconds; delay must be at least 1. */
export function ouqiangApi(url: string) {
  return {
    async push(job: { topic: string; id: string; delay: number; ttr: number; body: string }) {
      await call(url, "/push", job);
    },
    /**
     * Blocks (BLPOP) until a job is ready; null when its 178 s ran out. A long-lived `signal`
     * reaches fetch through a controller of this call's own, whose listener on it is removed
     * after the call, as delayq's client does: fetch given the signal itself leaves a listener
     * on it per call until garbage collection, and the listener list's growth slowed this
     * peer's consumers (thousands of them, Node's MaxListenersExceededWarning).
     */
    async pop(topic: string, signal?: AbortSignal): Promise<{ id: string; body: string } | null> {
      if (signal?.aborted) throw signal.reason;
      const own = new AbortController();
      const onAbort = () => own.abort(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        const answer = await call(url, "/pop", { topic }, signal ? own.signal : undefined);
        return answer.data as { id: string; body: string } | null;
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
    },
    async finish(id: string) {
      await call(url, "/finish", { id });
    },
  };
}
