// The floor under an add (issue 12): what one add request costs the server's CPU, from HTTP alone
// up to delayq's and ouqiang/delay-queue's adds, driven the same way in the same run. Where
// delayq's single-job throughput stands against ouqiang's is a question of where its CPU per
// request goes, and this puts each layer beside the next:
//   go net/http      Go's HTTP server alone (when `go` is on the PATH: built at bench time)
//   node:http        Node's HTTP server alone
//   hono + FCALL     Hono on @hono/node-server, the body parsed and stored by one FCALL (ioredis)
//   delayq add       POST /v1/jobs on functions/node.ts over TCP (REDIS_URL), as the single shape
//   ouqiang push     its /push, delay 1 s, as the single shape (OUQIANG_DELAY_QUEUE_BIN)
// Every server is driven by 8 concurrent senders in this process (nodeFetch, keep-alive, as the
// single shape's), warmed first, the order rotated each repetition; the medians are printed.
// `npx tsx bench/floor.ts [--requests 20000] [--reps 3]`.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort, type RedisServer, startRedisServer } from "../dev/redis-server";
import { nodeFetch } from "../src/client/node";
import { log, median } from "./lib/measure";
import { processCpuMs } from "./lib/processes";
import { makeBody } from "./lib/workloads";
import { ouqiangBinary, startOuqiang } from "./peers/ouqiang";
import { cpuMsSince } from "./single/shape";
import { API_TOKEN, openStack } from "./single/stack";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "20000" },
    warmup: { type: "string", default: "5000" },
    reps: { type: "string", default: "3" },
  },
});
const requests = Number(values.requests);
const warmup = Number(values.warmup);
const reps = Number(values.reps);
for (const [name, value] of Object.entries({ requests, warmup, reps })) {
  if (!Number.isInteger(value) || value < (name === "warmup" ? 0 : 1)) {
    throw new Error(`--${name} wants a whole number${name === "warmup" ? "" : " > 0"}`);
  }
}
const CONCURRENCY = 8;
const SERVERS = fileURLToPath(new URL("./floor/servers.ts", import.meta.url));
const GO_SOURCE = fileURLToPath(new URL("./floor/net-http.go", import.meta.url));
const send = nodeFetch();

/** A server under test: where to send an add, what to send, and the process whose CPU counts. */
type Target = {
  name: string;
  url: string;
  pid: number;
  headers: Record<string, string>;
  body(i: number): string;
  /** Throws unless the answer is a successful add. */
  check(status: number, text: string): void;
  close(): Promise<void> | void;
};

type Sample = { perSec: number; serverMs: number; driverMs: number };

const added = (status: number, text: string) => {
  if (status !== 201 && status !== 200)
    throw new Error(`answered ${status}: ${text.slice(0, 200)}`);
};
const addBody = (i: number) => JSON.stringify({ topic: "floor", body: makeBody(i) });
const json = { "content-type": "application/json" };

/** A child process that prints "ready" once it listens; killed if the benchmark exits first. */
async function startChild(command: string, args: string[]): Promise<ChildProcess> {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"] });
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  child.once("exit", () => process.off("exit", kill));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${command} did not start in 20 s`)), 20_000);
      child.once("exit", (code) => reject(new Error(`${command} exited at start (code ${code})`)));
      child.stdout?.on("data", (chunk: Buffer) => {
        if (chunk.toString().includes("ready")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
  } catch (error) {
    await stopChild(child);
    throw error;
  }
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

async function childTarget(
  name: string,
  command: string,
  args: (port: number) => string[],
): Promise<Target> {
  const port = await freePort();
  const child = await startChild(command, args(port));
  return {
    name,
    url: `http://127.0.0.1:${port}/v1/jobs`,
    pid: child.pid ?? 0,
    headers: json,
    body: addBody,
    check: added,
    close: () => stopChild(child),
  };
}

/** Go's net/http server built into a temporary folder, or why not. */
function buildGo(): { bin: string; dir: string } | { skipped: string } {
  if (spawnSync("go", ["version"]).status !== 0) return { skipped: "go is not on the PATH" };
  const dir = mkdtempSync(join(tmpdir(), "delayq-floor-go-"));
  const bin = join(dir, "net-http");
  const built = spawnSync("go", ["build", "-o", bin, GO_SOURCE], {
    env: { ...process.env, GO111MODULE: "off", GOPATH: dir, GOCACHE: join(dir, "cache") },
    encoding: "utf8",
  });
  if (built.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return { skipped: `go build failed: ${built.stderr.trim().split("\n")[0]}` };
  }
  return { bin, dir };
}

/** Every server to measure; those already started are closed if a later one fails to start. */
async function openTargets(redis: RedisServer): Promise<{ targets: Target[]; skipped: string[] }> {
  const targets: Target[] = [];
  try {
    const skipped = await startTargets(redis, targets);
    return { targets, skipped };
  } catch (error) {
    for (const target of targets) await target.close();
    throw error;
  }
}

/** Starts the servers into `targets` as each comes up; the ones skipped, and why. */
async function startTargets(redis: RedisServer, targets: Target[]): Promise<string[]> {
  const skipped: string[] = [];
  const go = buildGo();
  if ("skipped" in go) skipped.push(`go net/http: ${go.skipped}`);
  else {
    const removeBuild = () => rmSync(go.dir, { recursive: true, force: true });
    const target = await childTarget("go net/http", go.bin, (port) => [String(port)]).catch(
      (error: unknown) => {
        removeBuild();
        throw error;
      },
    );
    targets.push({
      ...target,
      close: async () => {
        await target.close();
        removeBuild();
      },
    });
  }
  const tsx = (kind: string) => (port: number) => [
    "--import",
    "tsx",
    SERVERS,
    kind,
    String(port),
    String(redis.port),
  ];
  targets.push(await childTarget("node:http", process.execPath, tsx("node-http")));
  targets.push(await childTarget("hono + FCALL", process.execPath, tsx("hono-fcall")));
  const stack = await openStack("tcp");
  targets.push({
    name: "delayq add",
    url: `${stack.service.url}/v1/jobs`,
    pid: stack.service.child.pid ?? 0,
    headers: { ...json, authorization: `Bearer ${API_TOKEN}` },
    body: addBody,
    check: added,
    close: () => stack.close(),
  });
  const found = ouqiangBinary();
  if ("skipped" in found) skipped.push(found.skipped);
  else {
    const own = await startRedisServer();
    const server = await startOuqiang(found.bin, own.port).catch(async (error: unknown) => {
      await own.stop();
      throw error;
    });
    targets.push({
      name: "ouqiang push",
      url: `${server.url}/push`,
      pid: server.pid,
      headers: json,
      body: (i) =>
        JSON.stringify({
          topic: "floor",
          id: `floor-${i}`,
          delay: 1,
          ttr: 3,
          body: JSON.stringify(makeBody(i)),
        }),
      check: (status, text) => {
        if (status !== 200 || (JSON.parse(text) as { code: number }).code !== 0) {
          throw new Error(`answered ${status}: ${text.slice(0, 200)}`);
        }
      },
      async close() {
        await server.close();
        await own.stop();
      },
    });
  }
  return skipped;
}

/** Sends requests `from` … `from + count - 1` to `target`, CONCURRENCY at a time. */
async function drive(target: Target, from: number, count: number): Promise<void> {
  let next = from;
  const end = from + count;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < end; i = next++) {
        const res = await send(target.url, {
          method: "POST",
          headers: target.headers,
          body: target.body(i),
        });
        target.check(res.status, await res.text());
      }
    }),
  );
}

async function measure(target: Target, from: number): Promise<Sample> {
  const cpuBefore = processCpuMs(target.pid);
  const driverBefore = process.cpuUsage();
  const started = performance.now();
  await drive(target, from, requests);
  const seconds = (performance.now() - started) / 1000;
  return {
    perSec: requests / seconds,
    serverMs: (processCpuMs(target.pid) - cpuBefore) / requests,
    driverMs: cpuMsSince(driverBefore) / requests,
  };
}

const redis = await startRedisServer();
const { targets, skipped } = await openTargets(redis).catch(async (error: unknown) => {
  await redis.stop();
  throw error;
});
for (const why of skipped) log(`skipped: ${why}`);
const samples = new Map<string, Sample[]>(targets.map((t) => [t.name, []]));
try {
  let offset = 0;
  for (const target of targets) {
    log(`${target.name}: warm-up`);
    await drive(target, offset, warmup);
    offset += warmup;
  }
  for (let rep = 0; rep < reps; rep++) {
    // Rotated, so that no server always runs first or last in a repetition.
    const order = targets.map((_, i) => targets[(i + rep) % targets.length] as Target);
    for (const target of order) {
      const sample = await measure(target, offset);
      offset += requests;
      samples.get(target.name)?.push(sample);
      log(
        `rep ${rep + 1} ${target.name}: ${sample.perSec.toFixed(0)}/s, ` +
          `server ${sample.serverMs.toFixed(3)} ms a request`,
      );
    }
  }
} finally {
  for (const target of targets) await target.close();
  await redis.stop();
}

const rows = targets.map((t) => {
  const xs = samples.get(t.name) ?? [];
  return {
    name: t.name,
    perSec: median(xs.map((x) => x.perSec)),
    serverMs: median(xs.map((x) => x.serverMs)),
    driverMs: median(xs.map((x) => x.driverMs)),
  };
});
const base = rows.find((r) => r.name === "node:http")?.serverMs ?? Number.NaN;
console.log(
  `\nAn add request, ${CONCURRENCY} senders, ${requests} requests × ${reps} (medians); ` +
    "server CPU is its whole process's (user + system)\n",
);
console.log(
  "| server | requests/s | server CPU, ms a request | × node:http | driver CPU, ms a request |",
);
console.log("|---|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.name} | ${r.perSec.toFixed(0)} | ${r.serverMs.toFixed(3)} | ` +
      `${(r.serverMs / base).toFixed(2)} | ${r.driverMs.toFixed(3)} |`,
  );
}
process.exit(0);
