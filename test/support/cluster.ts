// Helpers of the suites that start a local Redis Cluster of their own (dev/redis-cluster.ts):
// `npm start` on it, which master holds a prefix's slot, what each master holds.
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
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
