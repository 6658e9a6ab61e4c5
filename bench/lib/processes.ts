// Child processes of the benchmark: the Upstash-REST bridge on its own CPU (as Upstash is another
// machine), and CPU time of any process read from /proc (the service, ouqiang's server).
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { BridgeCounters } from "../../dev/bridge";

let ticksPerSecond: number | undefined;

/** Clock ticks per second of /proc's CPU times (CLK_TCK; 100 on every Linux seen so far). */
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const out = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim();
    const value = Number(out);
    ticksPerSecond = Number.isInteger(value) && value > 0 ? value : 100;
  }
  return ticksPerSecond;
}

/**
 * CPU time (user + system, ms) a process has used so far, from /proc/<pid>/stat. The resolution
 * is one clock tick (10 ms), so read it over runs of seconds, not single requests.
 */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis don't.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15, i.e. 11 and 12 after the state (field 3).
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / clockTicks();
}

/** The bridge in a child process, with its counters read over IPC. */
export type BridgeProcess = {
  url: string;
  /** Counters of one token, or of all tokens. */
  stats(token?: string): Promise<BridgeCounters>;
  close(): Promise<void>;
};

type ChildMessage =
  | { type: "ready"; url: string }
  | { type: "stats"; id: number; stats: BridgeCounters };

const BRIDGE_CHILD = fileURLToPath(new URL("./bridge-child.ts", import.meta.url));

/** Starts the bridge (bench/lib/bridge-child.ts) in front of `redisPort`, accepting `tokens`. */
export function startBridgeProcess(
  redisPort: number,
  tokens: readonly string[],
): Promise<BridgeProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    ["--import", "tsx", BRIDGE_CHILD, String(redisPort), tokens.join(",")],
    { stdio: ["ignore", "ignore", "inherit", "ipc"] },
  );
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  const waiting = new Map<number, (stats: BridgeCounters) => void>();
  let asked = 0;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the bridge process exited (code ${code})`)));
    child.on("message", (message: ChildMessage) => {
      if (message.type === "stats") {
        waiting.get(message.id)?.(message.stats);
        waiting.delete(message.id);
        return;
      }
      resolve({
        url: message.url,
        stats: (token) =>
          new Promise((answer) => {
            const id = ++asked;
            waiting.set(id, answer);
            child.send({ type: "stats", id, token });
          }),
        async close() {
          process.off("exit", kill);
          if (child.exitCode === null && child.signalCode === null) {
            child.kill("SIGTERM");
            const timer = setTimeout(kill, 5000);
            await exited;
            clearTimeout(timer);
          }
        },
      });
    });
  });
}
