// Helpers of the suites that start a local Redis Cluster of their own (dev/redis-cluster.ts):
// `npm start` on it, which master holds a prefix's slot, what each master holds.
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { expect } from "vitest";
import { type RedisCluster, slotRanges } from "../../dev/redis-cluster";
import { RespConnection } from "../../dev/resp";

const root = join(import.meta.dirname, "..", "..");

/** `npm start` (package.json: tsx functions/node.ts) as a process group of its own. */
export type Started = { child: ChildProcess; output(): string; stop(): Promise<void> };

export async function npmStart(env: Record<string, string>): Promise<Started> {
  const child = spawn("npm", ["start"], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const deadline = Date.now() + 15_000;
  while (!/"event":"listening"/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`npm start did not listen: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    child,
    output: () => output,
    async stop() {
      if (child.exitCode === null) process.kill(-(child.pid as number), "SIGTERM");
      await exited;
    },
  };
}

/** The index (in slotRanges) of the master that holds `{prefix}`'s slot. */
export async function masterOf(cluster: RedisCluster, prefix: string): Promise<number> {
  const connection = await RespConnection.open(cluster.nodes[0]?.port as number);
  const reply = await connection.call("CLUSTER", "KEYSLOT", `{${prefix}}`);
  connection.close();
  const slot = reply.type === "integer" ? reply.value : -1;
  return slotRanges(cluster.nodes.length).findIndex(([from, to]) => slot >= from && slot <= to);
}

/** A prefix whose slot is on master `index` (or on any other master, with `not`). */
export async function prefixOn(cluster: RedisCluster, index: number, not = false): Promise<string> {
  for (let i = 0; ; i++) {
    const prefix = `cl${i}${crypto.randomUUID().slice(0, 4)}`;
    if (((await masterOf(cluster, prefix)) === index) !== not) return prefix;
  }
}

/** The names of the function libraries on the node at `port`. */
export async function librariesOn(port: number, flush = false): Promise<string[]> {
  const connection = await RespConnection.open(port);
  if (flush) await connection.call("FUNCTION", "FLUSH");
  const reply = await connection.call("FUNCTION", "LIST");
  connection.close();
  return (reply.type === "array" ? (reply.value ?? []) : []).map((library) => {
    const fields = library.type === "array" ? (library.value ?? []) : [];
    const name = fields[1];
    return name?.type === "bulk" ? String(name.value) : "";
  });
}

export async function keysOn(port: number): Promise<number> {
  const connection = await RespConnection.open(port);
  const reply = await connection.call("DBSIZE");
  connection.close();
  return reply.type === "integer" ? reply.value : -1;
}

/** The keys on the node at `port` that match `pattern` (SCAN, a test's few thousand keys). */
export async function keysMatching(port: number, pattern: string): Promise<string[]> {
  const connection = await RespConnection.open(port);
  const found: string[] = [];
  let cursor = "0";
  do {
    const reply = await connection.call("SCAN", cursor, "MATCH", pattern, "COUNT", "1000");
    const [next, page] = reply.type === "array" ? (reply.value ?? []) : [];
    cursor = next?.type === "bulk" ? String(next.value) : "0";
    for (const key of page?.type === "array" ? (page.value ?? []) : []) {
      if (key.type === "bulk") found.push(String(key.value));
    }
  } while (cursor !== "0");
  connection.close();
  return found;
}

/**
 * A JSON call to the service at `url()` (read at each call: set once the service started) with
 * a bearer token: the HTTP status and the JSON body.
 */
export function apiCaller(url: () => string, token: string) {
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url()}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
}

/** What a test's `call` answers: the HTTP status and the JSON body. */
type Call = (
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; body: Record<string, unknown> }>;

/**
 * Producers and consumers on `topics` through `call` while master `master` is killed and then
 * restarted from its AOF: every acknowledged job is delivered and finished, none before its due
 * time, none again after a finished delivery.
 */
export async function loadThroughKill(
  call: Call,
  cluster: RedisCluster,
  master: number,
  topics: readonly string[],
): Promise<void> {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const acknowledged = new Map<string, number>(); // id -> dueAt
  const deliveries: { id: string; at: number; dueAt: number; finished: boolean }[] = [];
  const failed = { status: 0, body: {} as Record<string, unknown> };
  const finished = new Set<string>();
  let producing = true;
  let failedCalls = 0;
  const producer = async (name: string) => {
    for (let i = 0; producing; i++) {
      const id = `${name}-${i}`;
      const res = await call("POST", "/v1/jobs", {
        topic: topics[i % topics.length],
        id,
        body: id,
        delay: (i % 4) * 0.25,
        ttr: 2,
      }).catch(() => failed);
      if (res.status === 201) acknowledged.set(id, (res.body.job as { dueAt: number }).dueAt);
      else failedCalls += 1;
      await sleep(20);
    }
  };
  let consuming = true;
  let turn = 0;
  const consumer = async () => {
    while (consuming) {
      const topic = topics[turn++ % topics.length];
      const res = await call("POST", `/v1/topics/${topic}/pop`, { count: 10, wait: 1 }).catch(
        () => failed,
      );
      if (res.status !== 200) {
        failedCalls += 1;
        await sleep(100);
        continue;
      }
      const at = Date.now();
      for (const job of res.body.jobs as { id: string; dueAt: number; receipt: string }[]) {
        const delivery = { id: job.id, at, dueAt: job.dueAt, finished: false };
        deliveries.push(delivery);
        const done = await call("POST", `/v1/jobs/${job.id}/finish`, {
          receipt: job.receipt,
        }).catch(() => failed);
        if (done.status === 200) {
          delivery.finished = true;
          finished.add(job.id);
        }
      }
    }
  };
  const running = [producer("a"), producer("b"), consumer(), consumer()];
  await sleep(1000);
  await cluster.kill(master);
  await sleep(1500);
  await cluster.restart(master);
  await sleep(1000);
  producing = false;
  // Until every acknowledged job was delivered (leases of unfinished ones end after 2 s).
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline && [...acknowledged.keys()].some((id) => !finished.has(id))) {
    await sleep(100);
  }
  consuming = false;
  await Promise.all(running);
  expect(failedCalls).toBeGreaterThan(0); // the master was down for a while
  expect(acknowledged.size).toBeGreaterThan(20);
  const missing = [...acknowledged.keys()].filter((id) => !finished.has(id));
  expect(missing).toEqual([]);
  // Never early: each delivery at or after the due time its add acknowledged.
  const early = deliveries.filter((d) => d.at < (acknowledged.get(d.id) ?? d.dueAt));
  expect(early).toEqual([]);
  // Delivered again only while no delivery of it was finished (at-least-once, no more).
  const done = new Set<string>();
  const afterFinish: string[] = [];
  for (const d of deliveries) {
    if (done.has(d.id)) afterFinish.push(d.id);
    if (d.finished) done.add(d.id);
  }
  expect(afterFinish).toEqual([]);
}
