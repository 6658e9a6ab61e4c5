// Starts and stops a private Redis Cluster of three masters for tests and development: each a
// redis-server --cluster-enabled yes on free ports, with its append-only file and nodes.conf in a
// folder of its own, so that one master can be killed and restarted as it was.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, type RedisServer, startRedisServer } from "./redis-server";
import { RespConnection } from "./resp";

export type RedisClusterOptions = {
  /** How many masters (no replicas). @default 3 */
  masters?: number;
  /**
   * cluster-node-timeout, ms: how long a master may be unreachable before the others mark it
   * failed. Short, so that a test's killed master is seen down (and back) within seconds.
   * @default 2000
   */
  nodeTimeoutMs?: number;
  /** How long to wait for `cluster_state:ok` on every master. @default 20000 */
  startTimeoutMs?: number;
};

export type RedisClusterNode = {
  port: number;
  /** The cluster bus's port (`--cluster-port`), chosen free, as the client port is. */
  busPort: number;
  dir: string;
  /** The running server, undefined while the node is killed. */
  server: RedisServer | undefined;
};

export type RedisCluster = {
  nodes: RedisClusterNode[];
  /** `127.0.0.1:<port>,...`: every master, the value of REDIS_CLUSTER_NODES. */
  seeds: string;
  /** SIGKILLs master `index` (its data stays in its AOF) and waits for the process to exit. */
  kill(index: number): Promise<void>;
  /**
   * Starts master `index` again on its port from its folder (nodes.conf and AOF), and waits until
   * every master says `cluster_state:ok` and knows all the others again.
   */
  restart(index: number): Promise<void>;
  /** Resolves once every running master answers `cluster_state:ok`, knowing every node. */
  waitOk(timeoutMs?: number): Promise<void>;
  /** Stops every master and removes the folders. */
  stop(): Promise<void>;
};

/** The slot ranges of `masters` masters: 16384 slots cut into equal runs. */
export function slotRanges(masters: number): [number, number][] {
  const ranges: [number, number][] = [];
  for (let i = 0; i < masters; i++) {
    ranges.push([Math.floor((16384 * i) / masters), Math.floor((16384 * (i + 1)) / masters) - 1]);
  }
  return ranges;
}

/**
 * Starts the cluster: the masters, each assigned its slots (`CLUSTER ADDSLOTSRANGE`, Redis 7+),
 * joined by `CLUSTER MEET` over plain connections (no redis-cli needed), then waits for
 * `cluster_state:ok` everywhere.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000;
  const root = mkdtempSync(join(tmpdir(), "delayq-cluster-"));
  const nodes: RedisClusterNode[] = [];
  for (let i = 0; i < masters; i++) {
    const dir = join(root, `node-${i}`);
    mkdirSync(dir);
    nodes.push({ port: await freePort(), busPort: await freePort(), dir, server: undefined });
  }
  const start = async (node: RedisClusterNode) => {
    node.server = await startRedisServer({
      port: node.port,
      dir: node.dir,
      appendOnly: true,
      databases: 1,
      extraArgs: [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(node.dir, "nodes.conf"),
        "--cluster-port",
        String(node.busPort),
        "--cluster-node-timeout",
        String(nodeTimeoutMs),
        // The other masters keep serving their slots while one is down.
        "--cluster-require-full-coverage",
        "no",
      ],
    });
  };
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.server?.stop()));
    rmSync(root, { recursive: true, force: true });
  };
  const waitOk = async (timeoutMs = options.startTimeoutMs ?? 20_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const states = await Promise.all(
        nodes.filter((node) => node.server).map((node) => clusterInfo(node.port)),
      );
      if (states.every((info) => /^cluster_state:ok\r?$/m.test(info) && knowsAll(info, masters))) {
        return;
      }
      if (Date.now() > deadline) {
        throw new Error(`the local Redis Cluster did not reach cluster_state:ok: ${states.join()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  try {
    for (const node of nodes) await start(node);
    const ranges = slotRanges(masters);
    for (const [i, node] of nodes.entries()) {
      const [from, to] = ranges[i] as [number, number];
      await command(node.port, "CLUSTER", "ADDSLOTSRANGE", String(from), String(to));
    }
    const first = nodes[0] as RedisClusterNode;
    for (const node of nodes.slice(1)) {
      await command(
        first.port,
        "CLUSTER",
        "MEET",
        "127.0.0.1",
        String(node.port),
        String(node.busPort),
      );
    }
    await waitOk();
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    nodes,
    seeds: nodes.map((node) => `127.0.0.1:${node.port}`).join(","),
    waitOk,
    stop,
    async kill(index) {
      const node = nodes[index] as RedisClusterNode;
      const server = node.server;
      if (!server) return;
      node.server = undefined;
      const exited = new Promise((resolve) => server.process.once("exit", resolve));
      server.process.kill("SIGKILL");
      await exited;
    },
    async restart(index) {
      const node = nodes[index] as RedisClusterNode;
      if (!node.server) await start(node);
      await waitOk();
    },
  };
}

/** Whether CLUSTER INFO says the node knows `masters` nodes, each with slots. */
function knowsAll(info: string, masters: number): boolean {
  const known = /^cluster_known_nodes:(\d+)/m.exec(info)?.[1];
  const sized = /^cluster_size:(\d+)/m.exec(info)?.[1];
  return Number(known) === masters && Number(sized) === masters;
}

async function clusterInfo(port: number): Promise<string> {
  try {
    return await command(port, "CLUSTER", "INFO");
  } catch (error) {
    return `port ${port}: ${(error as Error).message}`;
  }
}

/** One command on a connection of its own; its reply as text, an error reply thrown. */
async function command(port: number, ...args: string[]): Promise<string> {
  const connection = await RespConnection.open(port);
  try {
    const reply = await connection.call(...args);
    if (reply.type === "error") throw new Error(`${args.join(" ")}: ${reply.message}`);
    if (reply.type === "bulk" || reply.type === "status") return String(reply.value ?? "");
    return JSON.stringify(reply);
  } finally {
    connection.close();
  }
}
